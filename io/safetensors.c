/* safetensors.c — Hugging Face safetensors reader; see safetensors.h. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ dtypes */

static const struct {
    const char *name;
    int size;
} dtypes[] = {{"F32", 4},     {"BF16", 2},    {"F16", 2},     {"F64", 8},  {"I64", 8},
              {"U64", 8},     {"I32", 4},     {"U32", 4},     {"I16", 2},  {"U16", 2},
              {"I8", 1},      {"U8", 1},      {"BOOL", 1},    {"F8_E5M2", 1},
              {"F8_E4M3", 1}, {"F8_E8M0", 1}};

/* Bytes per element of a dtype name, 0 if unknown. */
static int dtype_size(const char *name)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dtypes[i].name, name))
            return dtypes[i].size;
    return 0;
}

static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE 754 binary16 to binary32, exact (subnormals, infinities, NaN). */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f)
        return bits_f32(sign | 0x7f800000u | man << 13);
    if (exp)
        return bits_f32(sign | (exp + 112) << 23 | man << 13);
    float f = (float)man * 0x1p-24f; /* zero or subnormal: man x 2^-24 */
    return sign ? -f : f;
}

/* Convert n elements of dtype (F32, BF16 or F16; little-endian) at src. */
static void convert(const char *dtype, const unsigned char *src, int64_t n, float *dst)
{
    if (!strcmp(dtype, "F32"))
        for (int64_t i = 0; i < n; i++)
            dst[i] = bits_f32(le32(src + 4 * i));
    else if (!strcmp(dtype, "BF16")) /* bfloat16: the high half of a binary32 */
        for (int64_t i = 0; i < n; i++)
            dst[i] = bits_f32(((uint32_t)src[2 * i] | (uint32_t)src[2 * i + 1] << 8) << 16);
    else
        for (int64_t i = 0; i < n; i++)
            dst[i] = f16_to_f32((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
}

/* ------------------------------------------------------------- JSON */

/* The decoded text of the JSON string literal at text[0..n) (quotes
 * included) into *out (owned), or NULL out of memory / not a string. */
static char *key_text(const char *text, size_t n)
{
    if (!memchr(text, '\\', n))
        return strndup(text + 1, n - 2);
    char *raw = strndup(text, n), *res = NULL;
    json_object *v = raw ? json_tokener_parse(raw) : NULL;
    if (v && json_object_is_type(v, json_type_string))
        res = strdup(json_object_get_string(v));
    json_object_put(v);
    free(raw);
    return res;
}

/* Scan strict JSON `text` (len bytes, already parsed) for an object that
 * gives one key twice: json-c keeps the last value without a word, the
 * safetensors format forbids duplicates, and in a header the two entries
 * could name different bytes. Returns the first duplicated key (owned),
 * NULL when every key is unique, or sets *oom. Each open object keeps its
 * keys in a json-c object used as a hash set. Also *word (owned): a bare
 * word other than true, false, null (json-c takes NaN and Infinity even
 * when strict; RFC 8259 has no such numbers), which stops the scan. */
static char *json_duplicate_key(const char *text, size_t len, char **word, int *oom)
{
    *word = NULL;
    json_object *stack[64]; /* objects nested deeper share the check of depth 63 */
    int depth = 0;          /* open containers; sets kept for objects only       */
    char kind[64];
    char *dup = NULL;
    *oom = 0;
    for (size_t i = 0; i < len && !dup && !*oom; i++) {
        char c = text[i];
        if (c == '{' || c == '[') {
            if (depth < 64) {
                kind[depth] = c;
                stack[depth] = c == '{' ? json_object_new_object() : NULL;
                if (c == '{' && !stack[depth])
                    *oom = 1;
            }
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth < 64 && depth >= 0)
                json_object_put(stack[depth]);
        } else if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) {
            size_t j = i; /* outside strings: only true, false, null and exponents */
            while (j < len && ((text[j] >= 'A' && text[j] <= 'Z') || (text[j] >= 'a' && text[j] <= 'z')))
                j++;
            int exponent = (c == 'e' || c == 'E') && j == i + 1 && i > 0 &&
                           ((text[i - 1] >= '0' && text[i - 1] <= '9') || text[i - 1] == '.');
            if (!exponent && !(j - i == 4 && !strncmp(text + i, "true", 4)) &&
                !(j - i == 5 && !strncmp(text + i, "false", 5)) &&
                !(j - i == 4 && !strncmp(text + i, "null", 4))) {
                *word = strndup(text + i, j - i);
                *oom = !*word;
                break;
            }
            i = j - 1;
        } else if (c == '"') {
            size_t j = i + 1;
            while (j < len && text[j] != '"')
                j += text[j] == '\\' ? 2 : 1;
            size_t k = j + 1;
            while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' ||
                               text[k] == '\r'))
                k++;
            if (k < len && text[k] == ':' && depth >= 1 && depth <= 64 &&
                kind[depth - 1] == '{') {
                char *key = key_text(text + i, j + 1 - i);
                if (!key)
                    *oom = 1;
                else if (json_object_object_get_ex(stack[depth - 1], key, NULL))
                    dup = key, key = NULL;
                else if (json_object_object_add(stack[depth - 1], key, NULL))
                    *oom = 1;
                free(key);
            }
            i = j;
        }
    }
    for (int d = depth < 64 ? depth : 64; d > 0; d--)
        json_object_put(stack[d - 1]);
    return dup;
}

/* Parse `text` (len bytes; trailing whitespace and NULs allowed, as a
 * padded header has) as strict RFC 8259 JSON (json-c's
 * JSON_TOKENER_STRICT: no NaN, no comments, no single quotes) with no key
 * given twice in one object. `what` names the text in messages ("PATH:
 * the 120-byte header"). Errors: HPT_ERR_DATA. */
static hpt_status json_parse_strict(const char *what, const char *text, size_t len,
                                    json_object **out)
{
    *out = NULL;
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    size_t body = len; /* the tokener in strict mode refuses trailing padding */
    while (body > 0 && (text[body - 1] == ' ' || text[body - 1] == '\n' ||
                        text[body - 1] == '\t' || text[body - 1] == '\r' || text[body - 1] == 0))
        body--;
    json_object *root = json_tokener_parse_ex(tok, text, (int)body);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    if (jerr == json_tokener_continue) { /* complete only at the end of the input */
        json_object_put(root);
        root = json_tokener_parse_ex(tok, "", 1);
        jerr = json_tokener_get_error(tok);
    }
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!root || jerr != json_tokener_success || (end < body && root)) {
        json_object_put(root);
        return hpt_error_set(HPT_ERR_DATA, "%s is not one strict JSON object (%s near byte %zu; "
                             "RFC 8259: no NaN, comments or trailing commas)", what,
                             !root || jerr != json_tokener_success ? json_tokener_error_desc(jerr)
                                                                   : "text after the object",
                             end);
    }
    int oom;
    char *word, *dup = json_duplicate_key(text, body, &word, &oom);
    if (dup || word || oom) {
        json_object_put(root);
        hpt_status st =
            oom ? hpt_error_set(HPT_ERR_INTERNAL, "out of memory")
            : word ? hpt_error_set(HPT_ERR_DATA, "%s is not strict JSON: '%s' is not a JSON value "
                                   "(RFC 8259 has no NaN or Infinity)", what, word)
                   : hpt_error_set(HPT_ERR_DATA, "%s gives the key \"%s\" twice in one object "
                                   "(duplicate keys are not allowed: which one would be "
                                   "loaded?)", what, dup);
        free(dup);
        free(word);
        return st;
    }
    *out = root;
    return HPT_OK;
}

/* ------------------------------------------------------------ header */

/* Parse one header entry into t (name already set). Errors: HPT_ERR_DATA
 * naming file and tensor. data: bytes in the data region. */
static hpt_status parse_entry(const char *path, json_object *v, uint64_t data, hpt_st_tensor *t)
{
    json_object *dt, *sh, *off;
    if (!json_object_is_type(v, json_type_object) ||
        !json_object_object_get_ex(v, "dtype", &dt) || !json_object_is_type(dt, json_type_string) ||
        !json_object_object_get_ex(v, "shape", &sh) || !json_object_is_type(sh, json_type_array) ||
        !json_object_object_get_ex(v, "data_offsets", &off) ||
        !json_object_is_type(off, json_type_array) || json_object_array_length(off) != 2)
        return hpt_error_set(HPT_ERR_DATA, "%s: tensor %s: header entry must be an object with "
                             "\"dtype\" (string), \"shape\" (array) and \"data_offsets\" "
                             "([begin, end])", path, t->name);
    snprintf(t->dtype, sizeof t->dtype, "%s", json_object_get_string(dt));
    if (!(t->elsize = dtype_size(t->dtype)))
        return hpt_error_set(HPT_ERR_DATA, "%s: tensor %s: unknown dtype '%s'", path, t->name,
                             json_object_get_string(dt));
    t->ndim = (int)json_object_array_length(sh);
    if (t->ndim > HPT_ST_MAX_DIMS)
        return hpt_error_set(HPT_ERR_DATA, "%s: tensor %s: %d dimensions (at most %d)", path,
                             t->name, t->ndim, HPT_ST_MAX_DIMS);
    uint64_t bytes = (uint64_t)t->elsize;
    for (int d = 0; d < t->ndim; d++) {
        json_object *x = json_object_array_get_idx(sh, (size_t)d);
        int64_t v64 = json_object_is_type(x, json_type_int) ? json_object_get_int64(x) : -1;
        if (v64 < 0 || __builtin_mul_overflow(bytes, (uint64_t)v64, &bytes))
            return hpt_error_set(HPT_ERR_DATA, "%s: tensor %s: shape entry %d is not a size",
                                 path, t->name, d);
        t->shape[d] = v64;
    }
    json_object *b = json_object_array_get_idx(off, 0), *e = json_object_array_get_idx(off, 1);
    int64_t b64 = json_object_is_type(b, json_type_int) ? json_object_get_int64(b) : -1;
    int64_t e64 = json_object_is_type(e, json_type_int) ? json_object_get_int64(e) : -1;
    if (b64 < 0 || e64 < b64 || (uint64_t)e64 > data)
        return hpt_error_set(HPT_ERR_DATA, "%s: tensor %s: data_offsets [%s, %s] outside the data "
                             "region of %llu bytes", path, t->name, json_object_to_json_string(b),
                             json_object_to_json_string(e), (unsigned long long)data);
    t->begin = (uint64_t)b64, t->end = (uint64_t)e64;
    if (t->end - t->begin != bytes)
        return hpt_error_set(HPT_ERR_DATA, "%s: tensor %s: data_offsets [%llu, %llu] hold %llu "
                             "bytes, shape x %s needs %llu", path, t->name,
                             (unsigned long long)t->begin, (unsigned long long)t->end,
                             (unsigned long long)(t->end - t->begin), t->dtype,
                             (unsigned long long)bytes);
    return HPT_OK;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const hpt_st_tensor *)a)->name, ((const hpt_st_tensor *)b)->name);
}

static int cmp_begin(const void *a, const void *b)
{
    const hpt_st_tensor *x = *(const hpt_st_tensor *const *)a;
    const hpt_st_tensor *y = *(const hpt_st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* The tensors' bytes must tile the data region exactly, as the format
 * requires: sorted by data_offsets, each begins where the one before ends
 * (the first at 0) and the last ends at the end of the file. A gap or bytes
 * after the last tensor mean a wrong header length (the tensors would load
 * shifted) or a damaged header; an overlap, two tensors sharing bytes.
 * Errors: HPT_ERR_DATA naming the file, the tensor(s) and the rule. */
static hpt_status check_tiling(hpt_st_file *f)
{
    hpt_st_tensor **by = malloc(sizeof *by * (size_t)(f->ntensors ? f->ntensors : 1));
    if (!by)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory reading %s", f->path);
    for (int i = 0; i < f->ntensors; i++)
        by[i] = &f->tensors[i];
    qsort(by, (size_t)f->ntensors, sizeof *by, cmp_begin);
    uint64_t data = f->size - f->data0, at = 0; /* bytes covered so far */
    hpt_status st = HPT_OK;
    for (int i = 0; i < f->ntensors && !st; i++) {
        const hpt_st_tensor *t = by[i], *p = i ? by[i - 1] : NULL;
        if (t->begin < at)
            st = hpt_error_set(HPT_ERR_DATA, "%s: tensors %s [%llu, %llu) and %s [%llu, %llu) "
                               "overlap in the data region", f->path, p->name,
                               (unsigned long long)p->begin, (unsigned long long)p->end, t->name,
                               (unsigned long long)t->begin, (unsigned long long)t->end);
        else if (t->begin > at && p)
            st = hpt_error_set(HPT_ERR_DATA, "%s: tensor %s begins at byte %llu of the data "
                               "region, but the tensor before it, %s, ends at byte %llu: bytes "
                               "[%llu, %llu) belong to no tensor (the data_offsets must tile the "
                               "data region; a wrong header length or a damaged header?)",
                               f->path, t->name, (unsigned long long)t->begin, p->name,
                               (unsigned long long)at, (unsigned long long)at,
                               (unsigned long long)t->begin);
        else if (t->begin > at)
            st = hpt_error_set(HPT_ERR_DATA, "%s: the first tensor %s begins at byte %llu of the "
                               "data region: bytes [0, %llu) belong to no tensor (the "
                               "data_offsets must tile the data region)", f->path, t->name,
                               (unsigned long long)t->begin, (unsigned long long)t->begin);
        at = t->end > at ? t->end : at;
    }
    if (!st && at != data && f->ntensors)
        st = hpt_error_set(HPT_ERR_DATA, "%s: the last tensor %s ends at byte %llu of the "
                           "%llu-byte data region: its last %llu bytes belong to no tensor (the "
                           "data_offsets must tile the data region up to the end of the file; a "
                           "wrong header length, or bytes appended?)", f->path,
                           by[f->ntensors - 1]->name, (unsigned long long)at,
                           (unsigned long long)data, (unsigned long long)(data - at));
    else if (!st && at != data)
        st = hpt_error_set(HPT_ERR_DATA, "%s: no tensors, but a data region of %llu bytes (the "
                           "data_offsets must tile the data region)", f->path,
                           (unsigned long long)data);
    free(by);
    return st;
}

/* Parse the JSON header (len bytes at text) into f->tensors. */
static hpt_status parse_header(hpt_st_file *f, const char *text, size_t len)
{
    char what[4200];
    snprintf(what, sizeof what, "%s: the %zu-byte header", f->path, len);
    json_object *root;
    hpt_status jst = json_parse_strict(what, text, len, &root);
    if (jst)
        return jst;
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return hpt_error_set(HPT_ERR_DATA, "%s: the header must be a JSON object", f->path);
    }
    int n = json_object_object_length(root);
    f->tensors = calloc((size_t)(n ? n : 1), sizeof *f->tensors);
    hpt_status st = f->tensors ? HPT_OK : hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    uint64_t data = f->size - f->data0;
    json_object_object_foreach(root, key, val)
    {
        json_object *id;
        if (!strcmp(key, "__metadata__") && json_object_is_type(val, json_type_object) &&
            json_object_object_get_ex(val, HPT_ST_EXPORT_ID_KEY, &id))
            snprintf(f->export_id, sizeof f->export_id, "%s", json_object_get_string(id));
        if (st || !strcmp(key, "__metadata__"))
            continue;
        hpt_st_tensor *t = &f->tensors[f->ntensors++];
        if (!(t->name = strdup(key)))
            st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
        else
            st = parse_entry(f->path, val, data, t);
    }
    json_object_put(root);
    if (st)
        return st;
    qsort(f->tensors, (size_t)f->ntensors, sizeof *f->tensors, cmp_name);
    return check_tiling(f);
}

/* Open `path` read-only if it is a regular file, *sb its status; else -1
 * with the error set (HPT_ERR_DATA naming the file). O_NONBLOCK: a FIFO or
 * a device named here must not block the open for ever (it is refused by
 * the fstat that follows); reads of a regular file ignore the flag. */
static int open_regular(const char *path, struct stat *sb)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, sb) || !S_ISREG(sb->st_mode)) {
        hpt_error_set(HPT_ERR_DATA, "%s: cannot open: %s", path,
                      fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Map the file and locate the header. */
static hpt_status map_file(hpt_st_file *f, const char *path)
{
    snprintf(f->path, sizeof f->path, "%s", path);
    struct stat sb;
    int fd = open_regular(path, &sb);
    if (fd < 0)
        return HPT_ERR_DATA;
    f->size = (size_t)sb.st_size;
    if (f->size > 0) {
        void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        f->map = p == MAP_FAILED ? NULL : p;
    }
    int err = errno;
    close(fd);
    if (f->size > 0 && !f->map)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot map: %s", path, strerror(err));
    if (f->size < 8)
        return hpt_error_set(HPT_ERR_DATA, "%s: truncated: %zu bytes, shorter than the 8-byte "
                             "header length of a safetensors file", path, f->size);
    uint64_t n = (uint64_t)le32(f->map) | (uint64_t)le32(f->map + 4) << 32;
    if (n > f->size - 8)
        return hpt_error_set(HPT_ERR_DATA, "%s: header length %llu exceeds the %zu bytes after "
                             "the length field (truncated, or not a safetensors file)", path,
                             (unsigned long long)n, f->size - 8);
    if (n < 2 || n > HPT_ST_MAX_HEADER)
        return hpt_error_set(HPT_ERR_DATA, "%s: header length %llu outside [2, %llu]", path,
                             (unsigned long long)n, HPT_ST_MAX_HEADER);
    f->data0 = 8 + n;
    return HPT_OK;
}

hpt_status hpt_st_open(const char *path, hpt_st_file *f)
{
    memset(f, 0, sizeof *f);
    hpt_status st = map_file(f, path);
    if (!st)
        st = parse_header(f, (const char *)f->map + 8, (size_t)(f->data0 - 8));
    if (st)
        hpt_st_close(f);
    return st;
}

void hpt_st_close(hpt_st_file *f)
{
    if (f->map)
        munmap((void *)f->map, f->size);
    for (int i = 0; f->tensors && i < f->ntensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    memset(f, 0, sizeof *f);
}

const hpt_st_tensor *hpt_st_find(const hpt_st_file *f, const char *name)
{
    hpt_st_tensor key = {.name = (char *)name};
    return f->ntensors ? bsearch(&key, f->tensors, (size_t)f->ntensors, sizeof key, cmp_name)
                       : NULL;
}

hpt_status hpt_st_read_block(const hpt_st_file *f, const hpt_st_tensor *t, int64_t r0, int64_t nr,
                             int64_t c0, int64_t nc, float *dst)
{
    if (strcmp(t->dtype, "F32") && strcmp(t->dtype, "BF16") && strcmp(t->dtype, "F16"))
        return hpt_error_set(HPT_ERR_DATA, "%s: tensor %s: dtype %s is not supported (F32, BF16 "
                             "and F16 are)", f->path, t->name, t->dtype);
    int64_t cols = 1;
    for (int d = 1; d < t->ndim; d++)
        cols *= t->shape[d];
    const unsigned char *base = f->map + f->data0 + t->begin;
    if (c0 == 0 && nc == cols) /* whole rows: one run */
        convert(t->dtype, base + (size_t)(r0 * cols) * (size_t)t->elsize, nr * nc, dst);
    else
        for (int64_t i = 0; i < nr; i++)
            convert(t->dtype, base + (size_t)((r0 + i) * cols + c0) * (size_t)t->elsize, nc,
                    dst + i * nc);
    return HPT_OK;
}

/* ------------------------------------------------------------- sets */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Index of shard file `file` in s (added when new), or -1 out of memory.
 * seen: a JSON object used as a hash table, shard file name -> index (an
 * index may name as many shards as tensors: no linear search). */
static int shard_index(hpt_st_set *s, json_object *seen, const char *dir, const char *file)
{
    json_object *k;
    if (json_object_object_get_ex(seen, file, &k))
        return json_object_get_int(k);
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (s->nshards == s->shard_cap) { /* doubling: a realloc per shard copies O(n^2) bytes */
        int cap = s->shard_cap ? 2 * s->shard_cap : 16;
        char **p = realloc(s->shard_paths, sizeof *p * (size_t)cap);
        if (!p)
            return -1;
        s->shard_paths = p, s->shard_cap = cap;
    }
    char **p = s->shard_paths;
    if (!(p[s->nshards] = strdup(path)) ||
        json_object_object_add(seen, file, json_object_new_int(s->nshards)))
        return -1;
    return s->nshards++;
}

/* Read a whole small text file (a regular file: see open_regular).
 * Errors: HPT_ERR_DATA. */
static hpt_status slurp(const char *path, char **text)
{
    struct stat sb;
    int fd = open_regular(path, &sb);
    if (fd < 0)
        return HPT_ERR_DATA;
    size_t n = (size_t)sb.st_size, got = 0;
    *text = malloc(n + 1);
    while (*text && got < n) {
        ssize_t k = read(fd, *text + got, n - got);
        if (k <= 0 && !(k < 0 && errno == EINTR))
            break;
        got += k > 0 ? (size_t)k : 0;
    }
    close(fd);
    if (!*text || got != n) {
        free(*text);
        *text = NULL;
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot read", path);
    }
    (*text)[n] = 0;
    return HPT_OK;
}

/* Fill s from the weight_map of index `path` (text: its contents). */
static hpt_status parse_index(hpt_st_set *s, const char *path, const char *text)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    json_object *root, *wm, *meta, *id;
    hpt_status jst = json_parse_strict(path, text, strlen(text), &root);
    if (jst)
        return jst;
    if (!json_object_is_type(root, json_type_object) ||
        !json_object_object_get_ex(root, "weight_map", &wm) ||
        !json_object_is_type(wm, json_type_object)) {
        json_object_put(root);
        return hpt_error_set(HPT_ERR_DATA, "%s: not a safetensors index: expected a JSON object "
                             "with a \"weight_map\" object", path);
    }
    if (json_object_object_get_ex(root, "metadata", &meta) &&
        json_object_is_type(meta, json_type_object) &&
        json_object_object_get_ex(meta, HPT_ST_EXPORT_ID_KEY, &id))
        snprintf(s->export_id, sizeof s->export_id, "%s", json_object_get_string(id));
    int n = json_object_object_length(wm);
    s->names = calloc((size_t)(n ? n : 1), sizeof *s->names);
    s->shard_of = calloc((size_t)(n ? n : 1), sizeof *s->shard_of);
    hpt_status st = s->names && s->shard_of ? HPT_OK
                                            : hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    json_object *seen = json_object_new_object();
    if (!seen)
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    json_object_object_foreach(wm, key, val)
    {
        if (st)
            break;
        const char *file = json_object_is_type(val, json_type_string) ? json_object_get_string(val)
                                                                       : NULL;
        if (!file || !file[0] || strchr(file, '/')) {
            st = hpt_error_set(HPT_ERR_DATA, "%s: weight_map entry %s: expected the name of a "
                               "shard file beside the index (no '/'), got %s%s%s", path, key,
                               file ? "'" : "", file ? file : json_object_to_json_string(val),
                               file ? "'" : "");
            break;
        }
        int k = shard_index(s, seen, dir, file);
        if (k < 0 || !(s->names[s->nnames] = strdup(key)))
            st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
        else
            s->shard_of[s->nnames++] = k;
    }
    json_object_put(seen);
    json_object_put(root);
    return st;
}

typedef struct {
    char *name;
    int shard;
} name_shard;

static int cmp_name_shard(const void *a, const void *b)
{
    return strcmp(((const name_shard *)a)->name, ((const name_shard *)b)->name);
}

/* Sort names (with their shard numbers) for bsearch: O(n log n), an index
 * may hold hundreds of thousands of names. Errors: HPT_ERR_INTERNAL. */
static hpt_status sort_names(hpt_st_set *s)
{
    name_shard *v = malloc(sizeof *v * (size_t)(s->nnames ? s->nnames : 1));
    if (!v)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory sorting the names of %s", s->path);
    for (int i = 0; i < s->nnames; i++)
        v[i] = (name_shard){s->names[i], s->shard_of[i]};
    qsort(v, (size_t)s->nnames, sizeof *v, cmp_name_shard);
    for (int i = 0; i < s->nnames; i++)
        s->names[i] = v[i].name, s->shard_of[i] = v[i].shard;
    free(v);
    return HPT_OK;
}

/* A single file: one shard, opened now. */
static hpt_status open_single(hpt_st_set *s, const char *path)
{
    if (!(s->shard_paths = calloc(1, sizeof *s->shard_paths)) ||
        !(s->shards = calloc(1, sizeof *s->shards)) || !(s->opened = calloc(1, 1)))
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    s->nshards = 1;
    if (!(s->shard_paths[0] = strdup(path)))
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    hpt_status st = hpt_st_open(path, &s->shards[0]);
    if (st)
        return st;
    s->opened[0] = 1;
    int n = s->shards[0].ntensors;
    s->names = calloc((size_t)(n + 1), sizeof *s->names);
    s->shard_of = calloc((size_t)(n + 1), sizeof *s->shard_of);
    if (!s->names || !s->shard_of)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    for (; s->nnames < n; s->nnames++)
        if (!(s->names[s->nnames] = strdup(s->shards[0].tensors[s->nnames].name)))
            return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    return HPT_OK;
}

hpt_status hpt_st_set_open(const char *path, hpt_st_set *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    size_t n = strlen(path);
    hpt_status st;
    if (n >= 5 && !strcmp(path + n - 5, ".json")) {
        char *text = NULL;
        if (!(st = slurp(path, &text)))
            st = parse_index(s, path, text);
        free(text);
        if (!st && (!(s->shards = calloc((size_t)(s->nshards + 1), sizeof *s->shards)) ||
                    !(s->opened = calloc((size_t)(s->nshards + 1), 1))))
            st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    } else
        st = open_single(s, path);
    if (!st)
        st = sort_names(s);
    if (st)
        hpt_st_set_close(s);
    return st;
}

void hpt_st_set_close(hpt_st_set *s)
{
    for (int i = 0; i < s->nshards; i++) {
        if (s->opened && s->opened[i])
            hpt_st_close(&s->shards[i]);
        free(s->shard_paths[i]);
    }
    for (int i = 0; i < s->nnames; i++)
        free(s->names[i]);
    free(s->shard_paths);
    free(s->shards);
    free(s->opened);
    free(s->names);
    free(s->shard_of);
    memset(s, 0, sizeof *s);
}

hpt_status hpt_st_set_find(hpt_st_set *s, const char *name, const hpt_st_file **file,
                           const hpt_st_tensor **t)
{
    *file = NULL;
    *t = NULL;
    char **hit = s->nnames ? bsearch(&name, s->names, (size_t)s->nnames, sizeof *s->names, cmp_str)
                           : NULL;
    if (!hit)
        return HPT_OK;
    int k = s->shard_of[hit - s->names];
    if (!s->opened[k]) {
        hpt_status st = hpt_st_open(s->shard_paths[k], &s->shards[k]);
        if (st) { /* (an index: single files open at once) say which tensor needed it */
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", hpt_error_msg());
            return hpt_error_set(st, "%s (the shard of tensor %s in %s)", msg, name, s->path);
        }
        s->opened[k] = 1;
    }
    if (s->export_id[0] && strcmp(s->export_id, s->shards[k].export_id))
        return hpt_error_set(HPT_ERR_DATA, "%s: shard %s is from another export (%s \"%s\", the "
                             "index names \"%s\"): shards of two exports, e.g. an export "
                             "interrupted over an earlier one; export again", s->path,
                             s->shard_paths[k], HPT_ST_EXPORT_ID_KEY,
                             s->shards[k].export_id[0] ? s->shards[k].export_id : "none",
                             s->export_id);
    if (!(*t = hpt_st_find(&s->shards[k], name)))
        return hpt_error_set(HPT_ERR_DATA, "%s: the index puts tensor %s in %s, which has no such "
                             "tensor", s->path, name, s->shard_paths[k]);
    *file = &s->shards[k];
    return HPT_OK;
}
