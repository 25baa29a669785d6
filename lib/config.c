/* config.c — Hugging Face-style config.json (via json-c) and presets. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *name;
    hpt_config cfg;
} preset;

/* Published shapes: Llama 2 (Touvron et al. 2023, table 1 and the released
 * config.json files), Llama 3 (Meta 2024, released config.json). tiny and
 * small are hpt's own (tests and demo; vocabulary of the demo tokenizer). */
static const preset presets[] = {
    {"tiny", {64, 176, 2, 4, 2, 8192, 256, 1e-5f, 10000.0f, 0, {0}, 0}},
    {"small", {384, 1152, 8, 6, 2, 8192, 1024, 1e-5f, 10000.0f, 0, {0}, 0}},
    {"llama2-7b", {4096, 11008, 32, 32, 32, 32000, 4096, 1e-5f, 10000.0f, 0, {0}, 0}},
    {"llama2-13b", {5120, 13824, 40, 40, 40, 32000, 4096, 1e-5f, 10000.0f, 0, {0}, 0}},
    {"llama2-70b", {8192, 28672, 80, 64, 8, 32000, 4096, 1e-5f, 10000.0f, 0, {0}, 0}},
    {"llama3-8b", {4096, 14336, 32, 32, 8, 128256, 8192, 1e-5f, 500000.0f, 0, {0}, 0}},
    {"llama3-70b", {8192, 28672, 80, 64, 8, 128256, 8192, 1e-5f, 500000.0f, 0, {0}, 0}},
    /* Llama 3.1 405B (Hugging Face config.json; Llama 3 paper, table 3) */
    {"llama3-405b", {16384, 53248, 126, 128, 8, 128256, 131072, 1e-5f, 500000.0f, 0, {0}, 0}},
};

static const char *const preset_names[] = {
    "tiny", "small", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b", NULL,
};

const char *const *hpt_config_preset_names(void) { return preset_names; }

hpt_status hpt_config_preset(const char *name, hpt_config *cfg)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name) == 0) {
            *cfg = presets[i].cfg;
            return HPT_OK;
        }
    }
    return hpt_error_set(HPT_ERR_USAGE,
                         "model '%s': unknown preset (presets: tiny, small, llama2-7b, "
                         "llama2-13b, llama2-70b, llama3-8b, llama3-70b, llama3-405b; or a path to "
                         "config.json)",
                         name);
}

hpt_status hpt_config_resolve(const char *spec, hpt_config *cfg)
{
    size_t n = strlen(spec);
    struct stat sb;
    if (stat(spec, &sb) == 0 && S_ISDIR(sb.st_mode)) { /* a Hugging Face model directory */
        char path[4096];
        if (snprintf(path, sizeof path, "%s/config.json", spec) >= (int)sizeof path)
            return hpt_error_set(HPT_ERR_USAGE, "%s: path too long", spec);
        return hpt_config_load(path, cfg);
    }
    if (strchr(spec, '/') || (n > 5 && strcmp(spec + n - 5, ".json") == 0))
        return hpt_config_load(spec, cfg);
    hpt_status st = hpt_config_preset(spec, cfg);
    return st ? st : hpt_config_validate(cfg, spec);
}

static double params_double(const hpt_config *c);

/* Read integer field `key`; required fields must be present. */
static hpt_status get_int(json_object *root, const char *path, const char *key, int required,
                          int *out)
{
    json_object *v;
    if (!json_object_object_get_ex(root, key, &v) || json_object_is_type(v, json_type_null)) {
        if (!required)
            return HPT_OK;
        return hpt_error_set(HPT_ERR_USAGE, "%s: required field '%s' is missing", path, key);
    }
    if (!json_object_is_type(v, json_type_int))
        return hpt_error_set(HPT_ERR_USAGE, "%s: field '%s' must be an integer, got %s", path, key,
                             json_object_to_json_string(v));
    int64_t x = json_object_get_int64(v);
    if (x < -2147483647 || x > 2147483647)
        return hpt_error_set(HPT_ERR_USAGE, "%s: field '%s' = %lld is out of range", path, key,
                             (long long)x);
    *out = (int)x;
    return HPT_OK;
}

static hpt_status get_float(json_object *root, const char *path, const char *key, float *out)
{
    json_object *v;
    if (!json_object_object_get_ex(root, key, &v) || json_object_is_type(v, json_type_null))
        return HPT_OK;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        return hpt_error_set(HPT_ERR_USAGE, "%s: field '%s' must be a number, got %s", path, key,
                             json_object_to_json_string(v));
    double d = json_object_get_double(v);
    if (!(fabs(d) <= FLT_MAX)) /* converting it to float would be undefined */
        return hpt_error_set(HPT_ERR_USAGE, "%s: field '%s' = %s is out of range for a float "
                             "(|x| <= %g)", path, key, json_object_to_json_string(v), FLT_MAX);
    *out = (float)d;
    return HPT_OK;
}

static hpt_status get_bool(json_object *root, const char *path, const char *key, int *out)
{
    json_object *v;
    if (!json_object_object_get_ex(root, key, &v) || json_object_is_type(v, json_type_null))
        return HPT_OK;
    if (!json_object_is_type(v, json_type_boolean))
        return hpt_error_set(HPT_ERR_USAGE, "%s: field '%s' must be true or false, got %s", path,
                             key, json_object_to_json_string(v));
    *out = json_object_get_boolean(v);
    return HPT_OK;
}

/* Fields of Hugging Face configs that would change the architecture into
 * something hpt does not implement: refuse rather than train another model. */
static hpt_status check_unsupported(json_object *root, const char *path, const hpt_config *c)
{
    json_object *v;
    const char *str_fields[][2] = {{"hidden_act", "silu"}, {"model_type", "llama"}};
    for (size_t i = 0; i < 2; i++)
        if (json_object_object_get_ex(root, str_fields[i][0], &v) &&
            !json_object_is_type(v, json_type_null) &&
            (!json_object_is_type(v, json_type_string) ||
             strcmp(json_object_get_string(v), str_fields[i][1])))
            return hpt_error_set(HPT_ERR_USAGE, "%s: %s = %s is not supported (hpt implements %s)",
                                 path, str_fields[i][0], json_object_to_json_string(v),
                                 str_fields[i][1]);
    const char *bias[] = {"attention_bias", "mlp_bias"};
    for (size_t i = 0; i < 2; i++)
        if (json_object_object_get_ex(root, bias[i], &v) && json_object_get_boolean(v))
            return hpt_error_set(HPT_ERR_USAGE, "%s: %s = true is not supported (Llama has no biases)",
                                 path, bias[i]);
    if (json_object_object_get_ex(root, "rope_scaling", &v) && !json_object_is_type(v, json_type_null))
        return hpt_error_set(HPT_ERR_USAGE, "%s: rope_scaling = %s is not supported (plain RoPE only)",
                             path, json_object_to_json_string(v));
    if (json_object_object_get_ex(root, "head_dim", &v) && !json_object_is_type(v, json_type_null) &&
        c->num_attention_heads > 0 &&
        json_object_get_int64(v) != c->hidden_size / c->num_attention_heads)
        return hpt_error_set(HPT_ERR_USAGE,
                             "%s: head_dim = %s differs from hidden_size / num_attention_heads = %d "
                             "(not supported)",
                             path, json_object_to_json_string(v),
                             c->hidden_size / c->num_attention_heads);
    return HPT_OK;
}

static const char *const token_id_names[HPT_CONFIG_TOKEN_IDS] = {"bos_token_id", "eos_token_id",
                                                                 "pad_token_id"};

static hpt_status parse_fields(json_object *root, const char *path, hpt_config *c)
{
    hpt_status st;
    json_object *kv;
    c->rms_norm_eps = 1e-6f;
    c->rope_theta = 10000.0f;
    c->tie_word_embeddings = 0;
    if ((st = get_int(root, path, "hidden_size", 1, &c->hidden_size)) ||
        (st = get_int(root, path, "intermediate_size", 1, &c->intermediate_size)) ||
        (st = get_int(root, path, "num_hidden_layers", 1, &c->num_hidden_layers)) ||
        (st = get_int(root, path, "num_attention_heads", 1, &c->num_attention_heads)) ||
        (st = get_int(root, path, "vocab_size", 1, &c->vocab_size)) ||
        (st = get_int(root, path, "max_position_embeddings", 1, &c->max_position_embeddings)) ||
        (st = get_float(root, path, "rms_norm_eps", &c->rms_norm_eps)) ||
        (st = get_float(root, path, "rope_theta", &c->rope_theta)) ||
        (st = get_bool(root, path, "tie_word_embeddings", &c->tie_word_embeddings)))
        return st;
    /* absent or null: multi-head attention, as Hugging Face */
    c->num_key_value_heads = c->num_attention_heads;
    if (json_object_object_get_ex(root, "num_key_value_heads", &kv) &&
        (st = get_int(root, path, "num_key_value_heads", 0, &c->num_key_value_heads)))
        return st;
    c->token_id_given = 0;
    for (int k = 0; k < HPT_CONFIG_TOKEN_IDS; k++)
        if (json_object_object_get_ex(root, token_id_names[k], &kv) &&
            !json_object_is_type(kv, json_type_null)) {
            if ((st = get_int(root, path, token_id_names[k], 0, &c->token_id[k])))
                return st;
            if (c->token_id[k] < 0)
                return hpt_error_set(HPT_ERR_USAGE, "%s: field '%s' = %d must be >= 0 (a token "
                                     "id), or null", path, token_id_names[k], c->token_id[k]);
            c->token_id_given |= 1u << k;
        }
    return check_unsupported(root, path, c);
}

/* Largest config.json read (Hugging Face's are ~1 KiB). */
#define CONFIG_MAX_BYTES 65536

hpt_status hpt_config_load(const char *path, hpt_config *cfg)
{
    /* O_NONBLOCK: a FIFO's open would wait for a writer for ever; this way
     * it returns at once and fstat refuses it (no window between a stat of
     * the name and the open). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return hpt_error_set(HPT_ERR_USAGE, "%s: cannot open model config: %s", path,
                             strerror(errno));
    struct stat sb;
    int known = fstat(fd, &sb) == 0;
    if (!known || !S_ISREG(sb.st_mode)) {
        close(fd);
        return hpt_error_set(HPT_ERR_USAGE, "%s: model config is not a regular file%s", path,
                             known && S_ISFIFO(sb.st_mode) ? " (a FIFO)" : "");
    }
    FILE *f = fdopen(fd, "rb");
    char *buf = f ? malloc(CONFIG_MAX_BYTES + 2) : NULL;
    if (!buf) {
        f ? fclose(f) : close(fd);
        return hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory reading the model config", path);
    }
    size_t n = fread(buf, 1, CONFIG_MAX_BYTES + 1, f); /* one more: is there more? */
    int rerr = ferror(f);
    fclose(f);
    hpt_status st;
    if (rerr)
        st = hpt_error_set(HPT_ERR_USAGE, "%s: cannot read model config", path);
    else if (n > CONFIG_MAX_BYTES)
        st = hpt_error_set(HPT_ERR_USAGE, "%s: config larger than 64 KiB (%d bytes)", path,
                           CONFIG_MAX_BYTES);
    else if (memchr(buf, 0, n))
        st = hpt_error_set(HPT_ERR_USAGE, "%s: malformed JSON: NUL byte at byte %zu (JSON text "
                           "has none)", path, (size_t)((char *)memchr(buf, 0, n) - buf));
    else {
        buf[n] = 0;
        st = hpt_config_parse(buf, path, cfg);
    }
    free(buf);
    return st;
}

/* Hugging Face writes strict JSON (RFC 8259); json-c also reads comments,
 * single-quoted strings, NaN and Infinity, and its strict mode (0.16) still
 * lets single-quoted keys, NaN and Infinity through. Scan outside strings
 * for what RFC 8259 does not allow there and name it; returns the offending
 * byte's offset and sets *what, or returns n when the text is clean. */
static size_t strict_scan(const char *buf, size_t n, const char **what)
{
    for (size_t i = 0; i < n; i++) {
        char ch = buf[i];
        if (ch == '"') { /* skip the string, escapes included */
            for (i++; i < n && buf[i] != '"'; i++)
                if (buf[i] == '\\')
                    i++;
            continue;
        }
        if (ch == '/' || ch == '#') {
            *what = "comments are not JSON";
            return i;
        }
        if (ch == '\'') {
            *what = "single quotes are not JSON (strings take double quotes)";
            return i;
        }
        if (ch == ',') {
            size_t j = i + 1;
            while (j < n && strchr(" \t\r\n", buf[j]))
                j++;
            if (j < n && (buf[j] == '}' || buf[j] == ']')) {
                *what = "trailing comma (JSON has none before '}' or ']')";
                return i;
            }
        }
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
            size_t j = i;
            while (j < n && ((buf[j] >= 'a' && buf[j] <= 'z') || (buf[j] >= 'A' && buf[j] <= 'Z')))
                j++;
            int e = (ch == 'e' || ch == 'E') && j == i + 1; /* exponent of a number */
            if (!e && !(j - i == 4 && !strncmp(buf + i, "true", 4)) &&
                !(j - i == 5 && !strncmp(buf + i, "false", 5)) &&
                !(j - i == 4 && !strncmp(buf + i, "null", 4))) {
                *what = "only true, false and null are JSON words (no NaN or Infinity)";
                return i;
            }
            i = j - 1;
        }
    }
    return n;
}

hpt_status hpt_config_parse(const char *buf, const char *path, hpt_config *cfg)
{
    size_t n = strlen(buf);
    const char *what = NULL;
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory parsing JSON", path);
    /* trailing text is checked below, with its own message */
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS);
    json_object *root = json_tokener_parse_ex(tok, buf, (int)n + 1);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    /* what json-c read, and on an error the byte it stopped at */
    size_t scanned = end < n ? end + (root == NULL) : n, bad = strict_scan(buf, scanned, &what);
    if (bad < scanned) {
        json_object_put(root);
        return hpt_error_set(HPT_ERR_USAGE, "%s: malformed JSON near byte %zu: %s", path, bad,
                             what);
    }
    if (!root || jerr != json_tokener_success) {
        json_object_put(root);
        return hpt_error_set(HPT_ERR_USAGE, "%s: malformed JSON near byte %zu: %s", path, end,
                             json_tokener_error_desc(jerr));
    }
    while (end < n && (buf[end] == ' ' || buf[end] == '\n' || buf[end] == '\t' || buf[end] == '\r'))
        end++;
    if (end < n) {
        json_object_put(root);
        return hpt_error_set(HPT_ERR_USAGE, "%s: malformed JSON: unexpected text after the object at byte %zu",
                             path, end);
    }
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return hpt_error_set(HPT_ERR_USAGE, "%s: top level must be a JSON object", path);
    }
    hpt_config c;
    hpt_status st = parse_fields(root, path, &c);
    json_object_put(root);
    if (st)
        return st;
    if ((st = hpt_config_validate(&c, path)))
        return st;
    *cfg = c;
    return HPT_OK;
}

hpt_status hpt_config_validate(const hpt_config *c, const char *origin)
{
    const struct {
        const char *name;
        int v;
    } pos[] = {
        {"hidden_size", c->hidden_size},
        {"intermediate_size", c->intermediate_size},
        {"num_hidden_layers", c->num_hidden_layers},
        {"num_attention_heads", c->num_attention_heads},
        {"num_key_value_heads", c->num_key_value_heads},
        {"vocab_size", c->vocab_size},
        {"max_position_embeddings", c->max_position_embeddings},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
        if (pos[i].v <= 0)
            return hpt_error_set(HPT_ERR_USAGE, "%s: %s = %d must be > 0", origin, pos[i].name,
                                 pos[i].v);
        /* keep every product of two sizes inside 64-bit and tables small */
        if (pos[i].v > (1 << 24))
            return hpt_error_set(HPT_ERR_USAGE, "%s: %s = %d is larger than hpt supports (2^24)",
                                 origin, pos[i].name, pos[i].v);
    }
    if (c->hidden_size % c->num_attention_heads)
        return hpt_error_set(HPT_ERR_USAGE,
                             "%s: num_attention_heads = %d must divide hidden_size = %d", origin,
                             c->num_attention_heads, c->hidden_size);
    if (c->num_attention_heads % c->num_key_value_heads)
        return hpt_error_set(HPT_ERR_USAGE,
                             "%s: num_key_value_heads = %d must divide num_attention_heads = %d",
                             origin, c->num_key_value_heads, c->num_attention_heads);
    if (hpt_config_head_dim(c) % 2)
        return hpt_error_set(HPT_ERR_USAGE,
                             "%s: head dimension hidden_size/num_attention_heads = %d must be even "
                             "(RoPE rotates pairs)",
                             origin, hpt_config_head_dim(c));
    /* the sizes alone allow 2^75 parameters; an untied head counts */
    double np = params_double(c) + (c->tie_word_embeddings ? (double)c->vocab_size * c->hidden_size : 0);
    if (!(np < HPT_CONFIG_MAX_PARAMS))
        return hpt_error_set(HPT_ERR_USAGE,
                             "%s: %.3g parameters (%d layers, hidden_size %d, intermediate_size "
                             "%d, vocab_size %d) is more than hpt supports (2^50)",
                             origin, np, c->num_hidden_layers, c->hidden_size,
                             c->intermediate_size, c->vocab_size);
    if (!(c->rms_norm_eps > 0) || !isfinite(c->rms_norm_eps))
        return hpt_error_set(HPT_ERR_USAGE, "%s: rms_norm_eps = %g must be > 0", origin,
                             c->rms_norm_eps);
    if (!(c->rope_theta > 0) || !isfinite(c->rope_theta))
        return hpt_error_set(HPT_ERR_USAGE, "%s: rope_theta = %g must be > 0", origin,
                             c->rope_theta);
    return HPT_OK;
}

/* Shortest decimal that reads back as the same float ("1e-05", not
 * "9.99999975e-06"). buf: at least 32 bytes. */
static const char *float_str(float x, char *buf)
{
    /* range first: casting a float >= 2^63 to long long is undefined */
    if (fabsf(x) < 1e15f && x == (float)(long long)x) { /* integral: "10000.0" */
        snprintf(buf, 32, "%.1f", x);
        return buf;
    }
    return hpt_cli_format_g(x, 1, buf, 32);
}

hpt_status hpt_config_write(const hpt_config *c, FILE *f)
{
    return hpt_config_write_dtype(c, "float32", f);
}

hpt_status hpt_config_format(const hpt_config *c, const char *torch_dtype, char *buf, size_t n)
{
    memset(buf, 0, n);
    FILE *f = n > 1 ? fmemopen(buf, n - 1, "w") : NULL;
    int bad = !f || hpt_config_write_dtype(c, torch_dtype, f) != HPT_OK;
    if (f)
        bad |= fclose(f) != 0;
    return bad || strlen(buf) >= n - 2 ? hpt_error_set(HPT_ERR_INTERNAL, "config.json longer "
                                                       "than %zu bytes", n)
                                       : HPT_OK;
}

hpt_status hpt_config_write_dtype(const hpt_config *c, const char *torch_dtype, FILE *f)
{
    char eps[32], theta[32];
    fprintf(f,
            "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
            "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n"
            "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
            "  \"num_key_value_heads\": %d,\n  \"vocab_size\": %d,\n"
            "  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": %s,\n"
            "  \"rope_theta\": %s,\n  \"tie_word_embeddings\": %s,\n"
            "  \"hidden_act\": \"silu\",\n  \"torch_dtype\": \"%s\"",
            c->hidden_size, c->intermediate_size, c->num_hidden_layers, c->num_attention_heads,
            c->num_key_value_heads, c->vocab_size, c->max_position_embeddings,
            float_str(c->rms_norm_eps, eps), float_str(c->rope_theta, theta),
            c->tie_word_embeddings ? "true" : "false", torch_dtype);
    for (int k = 0; k < HPT_CONFIG_TOKEN_IDS; k++)
        if (c->token_id_given >> k & 1)
            fprintf(f, ",\n  \"%s\": %d", token_id_names[k], c->token_id[k]);
    fprintf(f, "\n}\n");
    return ferror(f) ? hpt_error_set(HPT_ERR_IO, "writing config.json failed") : HPT_OK;
}

/* Parameter count in double (exact below 2^53; never overflows). */
static double params_double(const hpt_config *c)
{
    double C = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    double hd = hpt_config_head_dim(c), H = c->num_attention_heads, KV = c->num_key_value_heads;
    double layer = 2 * C + C * H * hd + 2 * C * KV * hd + H * hd * C + 3 * C * I;
    return V * C * (c->tie_word_embeddings ? 1 : 2) + C + c->num_hidden_layers * layer;
}

int64_t hpt_config_num_params(const hpt_config *c)
{
    if (!(params_double(c) < HPT_CONFIG_MAX_PARAMS)) /* unvalidated config: saturate */
        return INT64_MAX;
    int64_t C = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    int64_t hd = hpt_config_head_dim(c), H = c->num_attention_heads, KV = c->num_key_value_heads;
    int64_t layer = 2 * C + C * H * hd + 2 * C * KV * hd + H * hd * C + 3 * C * I;
    return V * C * (c->tie_word_embeddings ? 1 : 2) + C + c->num_hidden_layers * layer;
}

int hpt_config_diff(const hpt_config *a, const hpt_config *b, char *msg, size_t n)
{
    const struct {
        const char *name;
        double x, y;
    } f[] = {
        {"hidden_size", a->hidden_size, b->hidden_size},
        {"intermediate_size", a->intermediate_size, b->intermediate_size},
        {"num_hidden_layers", a->num_hidden_layers, b->num_hidden_layers},
        {"num_attention_heads", a->num_attention_heads, b->num_attention_heads},
        {"num_key_value_heads", a->num_key_value_heads, b->num_key_value_heads},
        {"vocab_size", a->vocab_size, b->vocab_size},
        {"max_position_embeddings", a->max_position_embeddings, b->max_position_embeddings},
        {"rms_norm_eps", a->rms_norm_eps, b->rms_norm_eps},
        {"rope_theta", a->rope_theta, b->rope_theta},
        {"tie_word_embeddings", a->tie_word_embeddings, b->tie_word_embeddings},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].x != f[i].y) {
            snprintf(msg, n, "%s = %g but %g", f[i].name, f[i].x, f[i].y);
            return 1;
        }
    return 0;
}

hpt_status hpt_config_check_tp(const hpt_config *cfg, int tp)
{
    const struct {
        const char *name;
        int v;
    } need[] = {{"num_attention_heads", cfg->num_attention_heads},
                {"num_key_value_heads", cfg->num_key_value_heads},
                {"intermediate_size", cfg->intermediate_size}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (need[i].v % tp)
            return hpt_error_set(HPT_ERR_USAGE,
                                 "--tp %d must divide %s = %d (tensor parallelism splits it)", tp,
                                 need[i].name, need[i].v);
    return HPT_OK;
}
