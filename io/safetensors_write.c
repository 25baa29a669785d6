/* safetensors_write.c — Hugging Face safetensors writer (single file or
 * shards + index, config.json beside); see safetensors_write.h. */
#include "safetensors_write.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "durable.h"
#include "h5out.h"
#include "safetensors.h"

#define NAME_MAX_ST 4200

struct hpt_st_writer {
    char path[HPT_H5OUT_PATH_MAX]; /* OUT as given                                 */
    char dir[HPT_H5OUT_PATH_MAX];  /* its directory ("." when none)                */
    hpt_st_out_tensor *t;
    int n;
    int *shard_of;                 /* n: the shard of tensor i                    */
    uint64_t *begin;               /* n: data_offsets[0] of tensor i in its shard */
    int nshards;
    uint64_t total;                /* bytes of all tensors                        */
    hpt_st_out_dtype dt;
    int elsize;                    /* 4 (F32) or 2 (BF16)                         */
    char *config;                  /* config.json text                            */
    char (*final)[NAME_MAX_ST];    /* nshards final names                         */
    char (*tmp)[NAME_MAX_ST];      /* nshards .tmp names                          */
    char *made;                    /* nshards: .tmp created                       */
    char id[40];                   /* this export's id (shards' and index's metadata) */
    FILE *f;                       /* the shard being written, or NULL            */
    int cur;                       /* its index, -1 before the first              */
    int ti;                        /* the tensor being filled                     */
    int64_t tdone;                 /* its elements written                        */
};

/* ------------------------------------------------------------ helpers */

hpt_status hpt_st_out_dtype_parse(const char *label, const char *name, hpt_st_out_dtype *dt)
{
    if (!strcasecmp(name, "f32") || !strcasecmp(name, "float32"))
        *dt = HPT_ST_OUT_F32;
    else if (!strcasecmp(name, "bf16") || !strcasecmp(name, "bfloat16"))
        *dt = HPT_ST_OUT_BF16;
    else
        return hpt_error_set(HPT_ERR_USAGE, "%s '%s': unknown export dtype (f32 or bf16)", label,
                             name);
    return HPT_OK;
}

int hpt_st_out_is_safetensors(const char *path)
{
    size_t n = strlen(path), k = strlen(".safetensors");
    return n > k && !strcasecmp(path + n - k, ".safetensors");
}

uint16_t hpt_st_f32_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep the sign, make it quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even (may carry into inf) */
    return (uint16_t)(u >> 16);
}

static const char *dtype_name(hpt_st_out_dtype dt)
{
    return dt == HPT_ST_OUT_BF16 ? "BF16" : "F32";
}

/* A growing text buffer; on out of memory `bad` is set and text dropped. */
typedef struct {
    char *s;
    size_t len, cap;
    int bad;
} text;

__attribute__((format(printf, 2, 3))) static void text_add(text *b, const char *fmt, ...)
{
    va_list ap;
    for (int pass = 0; pass < 2 && !b->bad; pass++) {
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->bad = 1;
        } else if (b->s && b->len + (size_t)k < b->cap) {
            b->len += (size_t)k;
            return;
        } else {
            size_t cap = (b->cap + (size_t)k + 1) * 2;
            char *p = realloc(b->s, cap);
            if (!p)
                b->bad = 1;
            else
                b->s = p, b->cap = cap;
        }
    }
}

/* Append `str` as a JSON string literal (RFC 8259 section 7: quote,
 * backslash and control characters escaped; other bytes as they are). */
static void text_add_json(text *b, const char *str)
{
    text_add(b, "\"");
    for (const unsigned char *p = (const unsigned char *)str; *p && !b->bad; p++) {
        if (*p == '"' || *p == '\\')
            text_add(b, "\\%c", *p);
        else if (*p < 0x20)
            text_add(b, "\\u%04x", *p);
        else
            text_add(b, "%c", *p);
    }
    text_add(b, "\"");
}

/* --------------------------------------------------------------- plan */

/* Assign tensors to shards (greedy, in order) and name the files. */
static hpt_status plan(hpt_st_writer *w, uint64_t shard_bytes)
{
    uint64_t used = 0;
    int k = 0;
    for (int i = 0; i < w->n; i++) {
        uint64_t b = (uint64_t)w->t[i].rows * (uint64_t)w->t[i].cols * (uint64_t)w->elsize;
        if (used > 0 && used + b > shard_bytes)
            k++, used = 0;
        w->shard_of[i] = k;
        w->begin[i] = used;
        used += b;
        w->total += b;
    }
    w->nshards = k + 1;
    w->final = calloc((size_t)w->nshards, sizeof *w->final);
    w->tmp = calloc((size_t)w->nshards, sizeof *w->tmp);
    w->made = calloc((size_t)w->nshards, 1);
    if (!w->final || !w->tmp || !w->made)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory planning %s", w->path);
    const char *base = strrchr(w->path, '/');
    base = base ? base + 1 : w->path;
    int stem = (int)(strlen(base) - strlen(".safetensors"));
    for (int s = 0; s < w->nshards; s++) {
        int len = w->nshards == 1
                      ? snprintf(w->final[s], NAME_MAX_ST, "%s", w->path)
                      : snprintf(w->final[s], NAME_MAX_ST, "%s/%.*s-%05d-of-%05d.safetensors",
                                 w->dir, stem, base, s + 1, w->nshards);
        if (len >= NAME_MAX_ST - 4 ||
            snprintf(w->tmp[s], NAME_MAX_ST, "%s.tmp", w->final[s]) >= NAME_MAX_ST)
            return hpt_error_set(HPT_ERR_USAGE, "%s: path too long", w->path);
    }
    return HPT_OK;
}

/* The JSON header of shard s, padded with spaces to a multiple of 8. */
static hpt_status shard_header(const hpt_st_writer *w, int s, text *h)
{
    text_add(h, "{\"__metadata__\":{\"format\":\"pt\",\"" HPT_ST_EXPORT_ID_KEY "\":\"%s\"}", w->id);
    for (int i = 0; i < w->n; i++) {
        if (w->shard_of[i] != s)
            continue;
        const hpt_st_out_tensor *t = &w->t[i];
        uint64_t b = w->begin[i];
        uint64_t e = b + (uint64_t)t->rows * (uint64_t)t->cols * (uint64_t)w->elsize;
        text_add(h, ",");
        text_add_json(h, t->name);
        if (t->ndim == 1)
            text_add(h, ":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%llu,%llu]}",
                     dtype_name(w->dt), (long long)t->rows, (unsigned long long)b,
                     (unsigned long long)e);
        else
            text_add(h, ":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%llu,"
                     "%llu]}", dtype_name(w->dt), (long long)t->rows, (long long)t->cols,
                     (unsigned long long)b, (unsigned long long)e);
    }
    text_add(h, "}");
    while (!h->bad && h->len % 8)
        text_add(h, " ");
    return h->bad ? hpt_error_set(HPT_ERR_INTERNAL, "out of memory writing %s", w->path) : HPT_OK;
}

/* Create shard s's .tmp and write its length field and header. */
static hpt_status shard_start(hpt_st_writer *w, int s)
{
    text h = {0};
    hpt_status st = shard_header(w, s, &h);
    if (!st && !(w->f = fopen(w->tmp[s], "wb")))
        st = hpt_error_set(HPT_ERR_IO, "%s: cannot create: %s", w->tmp[s], strerror(errno));
    if (!st) {
        w->made[s] = 1, w->cur = s;
        unsigned char len[8];
        for (int i = 0; i < 8; i++)
            len[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
        if (fwrite(len, 1, 8, w->f) != 8 || fwrite(h.s, 1, h.len, w->f) != h.len)
            st = hpt_error_set(HPT_ERR_IO, "%s: write failed: %s", w->tmp[s], strerror(errno));
    }
    free(h.s);
    return st;
}

/* Close the shard being written. */
static hpt_status shard_end(hpt_st_writer *w)
{
    if (!w->f)
        return HPT_OK;
    int bad = ferror(w->f) || fflush(w->f) != 0;
    int e = errno;
    bad |= fclose(w->f) != 0;
    w->f = NULL;
    return bad ? hpt_error_set(HPT_ERR_IO, "%s: write failed: %s", w->tmp[w->cur],
                               strerror(e ? e : errno))
               : HPT_OK;
}

/* Skip past complete (and empty) tensors; switch shards as needed. */
static hpt_status advance(hpt_st_writer *w)
{
    while (w->ti < w->n && w->tdone == w->t[w->ti].rows * w->t[w->ti].cols)
        w->ti++, w->tdone = 0;
    hpt_status st = HPT_OK;
    if (w->ti < w->n && w->shard_of[w->ti] != w->cur) {
        if (!(st = shard_end(w)))
            st = shard_start(w, w->shard_of[w->ti]);
    }
    return st;
}

/* -------------------------------------------------------------- public */

hpt_status hpt_st_writer_open(hpt_st_writer **out, const char *path, const hpt_st_out_tensor *t,
                              int n, hpt_st_out_dtype dt, uint64_t shard_bytes,
                              const char *config_json)
{
    *out = NULL;
    if (!shard_bytes)
        return hpt_error_set(HPT_ERR_USAGE, "%s: shard size 0: give a size in bytes", path);
    hpt_st_writer *w = calloc(1, sizeof *w);
    if (!w)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory writing %s", path);
    w->cur = -1, w->dt = dt, w->elsize = dt == HPT_ST_OUT_BF16 ? 2 : 4, w->n = n;
    *out = w;
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path)
        return hpt_error_set(HPT_ERR_USAGE, "%s: path too long", path);
    const char *slash = strrchr(path, '/');
    snprintf(w->dir, sizeof w->dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
             slash ? path : ".");
    w->t = malloc(sizeof *w->t * (size_t)(n ? n : 1));
    w->shard_of = malloc(sizeof *w->shard_of * (size_t)(n ? n : 1));
    w->begin = malloc(sizeof *w->begin * (size_t)(n ? n : 1));
    w->config = strdup(config_json);
    if (!w->t || !w->shard_of || !w->begin || !w->config)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory writing %s", path);
    memcpy(w->t, t, sizeof *t * (size_t)n);
    for (int i = 0; i < n; i++)
        if (w->t[i].ndim != 1 && w->t[i].ndim != 2)
            return hpt_error_set(HPT_ERR_INTERNAL, "%s: tensor '%s': not 1-D or 2-D", path,
                                 w->t[i].name);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(w->id, sizeof w->id, "%llx-%lx-%lx", (unsigned long long)ts.tv_sec,
             (unsigned long)ts.tv_nsec, (unsigned long)getpid());
    hpt_status st = plan(w, shard_bytes);
    if (!st)
        st = shard_start(w, 0);
    return st;
}

hpt_status hpt_st_writer_write(hpt_st_writer *w, const float *x, size_t n)
{
    unsigned char buf[8192];
    hpt_status st = HPT_OK;
    while (n > 0 && !st) {
        if ((st = advance(w)))
            break;
        if (w->ti >= w->n)
            return hpt_error_set(HPT_ERR_INTERNAL, "%s: %zu values more than the tensors hold",
                                 w->path, n);
        int64_t left = w->t[w->ti].rows * w->t[w->ti].cols - w->tdone;
        size_t k = n < (size_t)left ? n : (size_t)left;
        k = k < sizeof buf / 4 ? k : sizeof buf / 4;
        for (size_t i = 0; i < k; i++) {
            uint32_t u;
            if (w->dt == HPT_ST_OUT_BF16) {
                u = hpt_st_f32_to_bf16(x[i]);
                buf[2 * i] = (unsigned char)u, buf[2 * i + 1] = (unsigned char)(u >> 8);
            } else {
                memcpy(&u, &x[i], 4);
                for (int b = 0; b < 4; b++)
                    buf[4 * i + (size_t)b] = (unsigned char)(u >> (8 * b));
            }
        }
        size_t bytes = k * (size_t)w->elsize;
        if (fwrite(buf, 1, bytes, w->f) != bytes)
            st = hpt_error_set(HPT_ERR_IO, "%s: write failed: %s", w->tmp[w->cur],
                               strerror(errno));
        w->tdone += (int64_t)k, x += k, n -= k;
    }
    return st;
}

/* Write text to name (via name.tmp, committed). */
static hpt_status put_text_file(const char *name, const char *body)
{
    char tmp[NAME_MAX_ST + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    int bad = fputs(body, f) < 0 || fflush(f) != 0;
    int e = errno;
    bad |= fclose(f) != 0;
    hpt_status st = bad ? hpt_error_set(HPT_ERR_IO, "%s: write failed: %s", tmp,
                                        strerror(e ? e : errno))
                        : hpt_file_commit(tmp, name);
    if (st)
        unlink(tmp);
    return st;
}

/* The index text: total_size and every tensor's shard file (basename). */
static hpt_status index_text(const hpt_st_writer *w, text *b)
{
    text_add(b, "{\n  \"metadata\": {\"total_size\": %llu, \"" HPT_ST_EXPORT_ID_KEY "\": \"%s\"},"
             "\n  \"weight_map\": {", (unsigned long long)w->total, w->id);
    for (int i = 0; i < w->n; i++) {
        const char *f = strrchr(w->final[w->shard_of[i]], '/');
        text_add(b, "%s\n    ", i ? "," : "");
        text_add_json(b, w->t[i].name);
        text_add(b, ": ");
        text_add_json(b, f ? f + 1 : w->final[w->shard_of[i]]);
    }
    text_add(b, "\n  }\n}\n");
    return b->bad ? hpt_error_set(HPT_ERR_INTERNAL, "out of memory writing %s", w->path) : HPT_OK;
}

/* Remove `path` if it is a regular file (a stale other form of OUT). */
static void remove_stale(const char *path)
{
    struct stat sb;
    if (!lstat(path, &sb) && S_ISREG(sb.st_mode))
        unlink(path);
}

/* Is `base` a shard file name of Hugging Face's pattern
 * STEM-NNNNN-of-MMMMM.safetensors (no '/')? */
static int is_shard_name(const char *base)
{
    size_t n = strlen(base);
    const char *tail = "-00000-of-00000.safetensors";
    size_t k = strlen(tail);
    if (strchr(base, '/') || n <= k)
        return 0;
    for (size_t i = 0; i < k; i++) {
        char c = base[n - k + i];
        if (tail[i] == '0' ? (c < '0' || c > '9') : c != tail[i])
            return 0;
    }
    return 1;
}

/* The shard paths named by the index `index` (an earlier export), those of
 * HF's shard pattern only, into *old (owned, NULL-terminated); NULL when
 * there is no index or it does not parse (then nothing is removed). */
static char **old_shards(const char *index)
{
    struct stat sb;
    hpt_st_set set;
    if (lstat(index, &sb) || !S_ISREG(sb.st_mode) || hpt_st_set_open(index, &set))
        return NULL;
    char **old = calloc((size_t)set.nshards + 1, sizeof *old);
    for (int i = 0, k = 0; old && i < set.nshards; i++) {
        const char *b = strrchr(set.shard_paths[i], '/');
        if (is_shard_name(b ? b + 1 : set.shard_paths[i]))
            old[k++] = strdup(set.shard_paths[i]);
    }
    hpt_st_set_close(&set);
    return old;
}

/* When `committed`, remove the files of `old` that the new set does not
 * hold (shards of a longer earlier set, or all of them under one new file);
 * free `old` either way. */
static void remove_old_shards(const hpt_st_writer *w, char **old, int committed)
{
    for (int i = 0; old && old[i]; i++) {
        int keep = !committed;
        for (int s = 0; s < w->nshards && !keep; s++)
            keep = w->nshards > 1 && !strcmp(old[i], w->final[s]);
        if (!keep)
            remove_stale(old[i]);
        free(old[i]);
    }
    free(old);
}

/* Test hook: HPT_ST_TEST_ABORT_AFTER_RENAME=k aborts the process (as a
 * kill -9 would stop it) right after the k-th shard is renamed into place. */
static void fault_after_rename(int k)
{
    const char *e = getenv("HPT_ST_TEST_ABORT_AFTER_RENAME");
    if (e && atoi(e) == k) {
        fprintf(stderr, "HPT_ST_TEST_ABORT_AFTER_RENAME=%d: aborting\n", k);
        abort();
    }
}

/* Commit the export so that a crash at any point leaves the earlier export
 * whole, the new one whole, or a set no loader takes (never a mix): the
 * earlier index is removed (durably) before any shard is renamed over its
 * shards; then the shards, config.json, the new index (several shards);
 * then the stale other form of OUT and the earlier set's shards that the
 * new one does not reuse. Each shard's __metadata__ and the index also carry
 * the export's id, which the reader matches (safetensors.h). */
static hpt_status commit_all(hpt_st_writer *w)
{
    hpt_status st = HPT_OK;
    char name[NAME_MAX_ST + 32];
    snprintf(name, sizeof name, "%s.index.json", w->path);
    char **old = old_shards(name);
    struct stat sb;
    if (!lstat(name, &sb) && S_ISREG(sb.st_mode)) {
        if (unlink(name))
            st = hpt_error_set(HPT_ERR_IO, "%s: cannot remove the earlier index: %s", name,
                               strerror(errno));
        else
            st = hpt_fsync_path(w->dir);
    }
    for (int s = 0; s < w->nshards && !st; s++)
        if (!(st = hpt_file_commit(w->tmp[s], w->final[s]))) {
            w->made[s] = 0;
            fault_after_rename(s + 1);
        }
    char cfg[NAME_MAX_ST + 32];
    snprintf(cfg, sizeof cfg, "%s/config.json", w->dir);
    if (!st)
        st = put_text_file(cfg, w->config);
    if (!st && w->nshards > 1) {
        text b = {0};
        if (!(st = index_text(w, &b)))
            st = put_text_file(name, b.s);
        free(b.s);
        if (!st)
            remove_stale(w->path);
    }
    remove_old_shards(w, old, !st);
    return st;
}

hpt_status hpt_st_writer_finish(hpt_st_writer *w, hpt_status st, int *nfiles)
{
    if (!w)
        return st;
    if (!st)
        st = advance(w);
    if (!st && w->ti < w->n)
        st = hpt_error_set(HPT_ERR_INTERNAL, "%s: tensor %s: %lld of %lld values written",
                           w->path, w->t[w->ti].name, (long long)w->tdone,
                           (long long)(w->t[w->ti].rows * w->t[w->ti].cols));
    hpt_status end = shard_end(w);
    st = st ? st : end;
    if (!st)
        st = commit_all(w);
    if (st && w->path[0]) { /* nothing half-written stays; say what is unchanged */
        int committed = 0;
        for (int s = 0; w->made && s < w->nshards; s++)
            if (w->made[s])
                unlink(w->tmp[s]);
            else
                committed += w->cur >= 0 && s <= w->cur;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hpt_error_msg());
        if (committed)
            st = hpt_error_set(st, "%s (the export to %s is incomplete: %d of %d shards renamed "
                               "into place, no new index written, an earlier index removed: "
                               "export again)", msg, w->path, committed, w->nshards);
        else
            st = hpt_error_set(st, "%s (removed the .tmp files; %s is unchanged)", msg, w->path);
    }
    if (nfiles)
        *nfiles = w->nshards;
    free(w->t);
    free(w->shard_of);
    free(w->begin);
    free(w->config);
    free(w->final);
    free(w->tmp);
    free(w->made);
    free(w);
    return st;
}
