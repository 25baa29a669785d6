/* prep_manifest.c — prep.json: the manifest hpt-data writes with its
 * outputs, and the check that lets a second run reuse them; see
 * prep_internal.h. */
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prep_internal.h"
#include "shard.h"

/* ------------------------------------------------------------- manifest */

static int64_t mtime_ns(const struct stat *sb)
{
    return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

static json_object *json_pair(int64_t train, int64_t val)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "train", json_object_new_int64(train));
    json_object_object_add(o, "val", json_object_new_int64(val));
    return o;
}

static json_object *json_hex64(uint64_t h)
{
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    return json_object_new_string(hex);
}

/* The manifest of a finished run. Takes over the splits' file arrays. */
static json_object *manifest_build(prep *r)
{
    const hpt_prep_opts *o = r->o;
    json_object *m = json_object_new_object(), *files = json_object_new_object(), *t;
    json_object_object_add(m, "format", json_object_new_string(PREP_FORMAT));
    json_object_object_add(m, "version", json_object_new_int(PREP_VERSION));
    json_object_object_add(m, "input", json_object_new_string(o->input));
    json_object_object_add(m, "input_realpath", json_object_new_string(r->in_real));
    json_object_object_add(m, "input_bytes", json_object_new_int64(r->in_sb.st_size));
    json_object_object_add(m, "input_mtime_ns", json_object_new_int64(mtime_ns(&r->in_sb)));
    json_object_object_add(m, "vocab_size_requested", o->tokenizer ? NULL : json_object_new_int(o->vocab_size));
    json_object_object_add(m, "tokenizer_source", o->tokenizer ? json_object_new_string(o->tokenizer) : NULL);
    json_object_object_add(m, "tokenizer", json_object_new_string(r->model));
    json_object_object_add(m, "tokenizer_fnv1a64", json_hex64(r->model_hash));
    json_object_object_add(m, "vocab_size", json_object_new_int(r->vocab));
    json_object_object_add(m, "eos_id", json_object_new_int(r->eos));
    json_object_object_add(m, "token_bytes", json_object_new_int(r->token_bytes));
    json_object_object_add(m, "val_fraction", json_object_new_double(o->val_fraction));
    json_object_object_add(m, "shard_tokens", json_object_new_int64(o->shard_tokens));
    json_object_object_add(m, "lines", json_pair(r->sp_train.nlines, r->sp_val.nlines));
    json_object_object_add(m, "tokens", json_pair(r->sp_train.ntok, r->sp_val.ntok));
    json_object_object_add(files, "train", r->sp_train.files);
    json_object_object_add(files, "val", r->sp_val.files);
    r->sp_train.files = r->sp_val.files = NULL;
    json_object_object_add(m, "shards", files);
    json_object_object_add(m, "seconds", t = json_object_new_object());
    json_object_object_add(t, "read", json_object_new_double(r->t_read));
    json_object_object_add(t, "train_tokenizer", json_object_new_double(r->t_train));
    json_object_object_add(t, "encode", json_object_new_double(r->t_encode));
    json_object_object_add(t, "write", json_object_new_double(r->t_write));
    return m;
}

/* Write the staged prep.json. Errors: HPT_ERR_IO. */
hpt_status prep_manifest_write(prep *r)
{
    char path[PATH_MAX + 64];
    prep_staging_path(path, r, "prep.json");
    json_object *m = manifest_build(r);
    size_t n;
    const char *s = json_object_to_json_string_length(
        m, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    hpt_status st = hpt_file_write_durable(path, s, n);
    json_object_put(m);
    return st;
}

/* ------------------------------------------------------ reuse (up to date) */

static int64_t jint(json_object *m, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(m, key, &v) ? json_object_get_int64(v) : INT64_MIN;
}

static const char *jstr(json_object *m, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(m, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : "";
}

/* Every shard listed under shards.<name> is valid with the recorded count. */
static const char *manifest_shards_ok(const prep *r, json_object *m, const char *name)
{
    json_object *files, *arr;
    if (!json_object_object_get_ex(m, "shards", &files) || !json_object_object_get_ex(files, name, &arr) ||
        !json_object_is_type(arr, json_type_array))
        return "prep.json lists no shards";
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        json_object *f = json_object_array_get_idx(arr, i);
        char path[PATH_MAX + 32];
        hpt_shard s;
        prep_out_path(path, r->o, jstr(f, "file"));
        if (hpt_shard_open(path, &s) != HPT_OK)
            return "a listed shard is missing or invalid";
        int ok = s.ntok == jint(f, "tokens") && s.token_bytes == jint(m, "token_bytes");
        hpt_shard_close(&s);
        if (!ok)
            return "a listed shard has a different token count";
    }
    return NULL;
}

/* NULL when out_dir holds a complete run for these options, else why not. */
static const char *manifest_stale(const prep *r, json_object *m)
{
    const hpt_prep_opts *o = r->o;
    json_object *v;
    if (strcmp(jstr(m, "format"), PREP_FORMAT) != 0 || jint(m, "version") != PREP_VERSION)
        return "prep.json has another format or version";
    if (strcmp(jstr(m, "input_realpath"), r->in_real) != 0 || jint(m, "input_bytes") != r->in_sb.st_size ||
        jint(m, "input_mtime_ns") != mtime_ns(&r->in_sb))
        return "the input file differs (path, size or modification time)";
    if (!json_object_object_get_ex(m, "val_fraction", &v) || json_object_get_double(v) != o->val_fraction ||
        jint(m, "shard_tokens") != o->shard_tokens)
        return "val_fraction or shard_tokens differ";
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)prep_file_hash(r->model));
    if (strcmp(jstr(m, "tokenizer_fnv1a64"), hex) != 0)
        return "tokenizer.model is missing or changed";
    if (o->tokenizer) {
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)prep_file_hash(o->tokenizer));
        if (strcmp(jstr(m, "tokenizer_fnv1a64"), hex) != 0)
            return "the given tokenizer differs from the one used";
    } else if (jint(m, "vocab_size_requested") != o->vocab_size) {
        return "a different vocab_size was requested (or a tokenizer was given before)";
    }
    const char *why = manifest_shards_ok(r, m, "train");
    return why ? why : manifest_shards_ok(r, m, "val");
}

/* 1 if the run can be skipped (and says so on the log). */
int prep_up_to_date(const prep *r)
{
    char path[PATH_MAX + 32];
    prep_out_path(path, r->o, "prep.json");
    if (access(path, F_OK) != 0)
        return 0;
    json_object *m = json_object_from_file(path);
    const char *why = m ? manifest_stale(r, m) : "prep.json is not valid JSON";
    if (why) {
        prep_say(r->log, "redoing %s: %s", r->o->out_dir, why);
    } else {
        json_object *t = NULL;
        json_object_object_get_ex(m, "tokens", &t);
        prep_say(r->log, "%s is up to date (the input's path, size and modification time, the "
                    "tokenizer's hash and the shards match prep.json): "
                    "vocab %lld, train %lld tokens, val %lld tokens; skipping (use --force to redo)",
            r->o->out_dir, (long long)jint(m, "vocab_size"), (long long)jint(t, "train"),
            (long long)jint(t, "val"));
    }
    json_object_put(m);
    return why == NULL;
}

int hpt_prep_vocab_size(const char *dir)
{
    char path[PATH_MAX + 16];
    struct stat sb;
    if (snprintf(path, sizeof path, "%s/prep.json", dir) >= (int)sizeof path || stat(path, &sb) ||
        !S_ISREG(sb.st_mode) || sb.st_size > (1 << 20))
        return -1;
    json_object *m = json_object_from_file(path);
    int64_t v = m ? jint(m, "vocab_size") : -1;
    json_object_put(m);
    return v > 0 && v <= INT32_MAX ? (int)v : -1;
}
