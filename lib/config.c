/* config.c — Hugging Face-style config.json (via json-c) and presets. */
#include "config.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const char *name;
    hpt_config cfg;
} preset;

/* Published shapes: Llama 2 (Touvron et al. 2023, table 1 and the released
 * config.json files), Llama 3 (Meta 2024, released config.json). tiny and
 * small are hpt's own (tests and demo; vocabulary of the demo tokenizer). */
static const preset presets[] = {
    {"tiny", {64, 176, 2, 4, 2, 8192, 256, 1e-5f, 10000.0f, 0}},
    {"small", {384, 1152, 8, 6, 2, 8192, 1024, 1e-5f, 10000.0f, 0}},
    {"llama2-7b", {4096, 11008, 32, 32, 32, 32000, 4096, 1e-5f, 10000.0f, 0}},
    {"llama2-13b", {5120, 13824, 40, 40, 40, 32000, 4096, 1e-5f, 10000.0f, 0}},
    {"llama2-70b", {8192, 28672, 80, 64, 8, 32000, 4096, 1e-5f, 10000.0f, 0}},
    {"llama3-8b", {4096, 14336, 32, 32, 8, 128256, 8192, 1e-5f, 500000.0f, 0}},
    {"llama3-70b", {8192, 28672, 80, 64, 8, 128256, 8192, 1e-5f, 500000.0f, 0}},
    /* Llama 3.1 405B (Hugging Face config.json; Llama 3 paper, table 3) */
    {"llama3-405b", {16384, 53248, 126, 128, 8, 128256, 131072, 1e-5f, 500000.0f, 0}},
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
    *out = (float)json_object_get_double(v);
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
    return check_unsupported(root, path, c);
}

hpt_status hpt_config_load(const char *path, hpt_config *cfg)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return hpt_error_set(HPT_ERR_USAGE, "%s: cannot open model config: %s", path,
                             strerror(errno));
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    int toolong = !feof(f);
    fclose(f);
    if (toolong)
        return hpt_error_set(HPT_ERR_USAGE, "%s: config larger than 64 KiB", path);
    buf[n] = 0;
    return hpt_config_parse(buf, path, cfg);
}

hpt_status hpt_config_parse(const char *buf, const char *path, hpt_config *cfg)
{
    size_t n = strlen(buf);
    json_tokener *tok = json_tokener_new();
    json_object *root = json_tokener_parse_ex(tok, buf, (int)n + 1);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    if (!root || jerr != json_tokener_success) {
        hpt_status st = hpt_error_set(HPT_ERR_USAGE, "%s: malformed JSON near byte %zu: %s", path,
                                      json_tokener_get_parse_end(tok),
                                      json_tokener_error_desc(jerr));
        json_object_put(root);
        json_tokener_free(tok);
        return st;
    }
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
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
    if (x == (float)(long long)x && fabsf(x) < 1e15f) { /* integral: "10000.0" */
        snprintf(buf, 32, "%.1f", x);
        return buf;
    }
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, 32, "%.*g", prec, x);
        if (strtof(buf, NULL) == x)
            break;
    }
    return buf;
}

hpt_status hpt_config_write(const hpt_config *c, FILE *f)
{
    char eps[32], theta[32];
    fprintf(f,
            "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
            "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n"
            "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
            "  \"num_key_value_heads\": %d,\n  \"vocab_size\": %d,\n"
            "  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": %s,\n"
            "  \"rope_theta\": %s,\n  \"tie_word_embeddings\": %s,\n"
            "  \"hidden_act\": \"silu\",\n  \"torch_dtype\": \"float32\"\n}\n",
            c->hidden_size, c->intermediate_size, c->num_hidden_layers, c->num_attention_heads,
            c->num_key_value_heads, c->vocab_size, c->max_position_embeddings,
            float_str(c->rms_norm_eps, eps), float_str(c->rope_theta, theta),
            c->tie_word_embeddings ? "true" : "false");
    return ferror(f) ? hpt_error_set(HPT_ERR_IO, "writing config.json failed") : HPT_OK;
}

int64_t hpt_config_num_params(const hpt_config *c)
{
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
