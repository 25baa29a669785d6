/* data.c — shard selection, sample numbering and the per-epoch Feistel
 * permutation of the training data; see data.h.
 *
 * The permutation of 0..S-1 for epoch e is a keyed bijection on the
 * power-of-two domain [0, 2^b), 2^b >= S, restricted to [0, S) by cycle
 * walking (Black & Rogaway, "Ciphers with Arbitrary Finite Domains",
 * CT-RSA 2002): apply the bijection until the value lands below S. The
 * bijection is an alternating (unbalanced) Feistel network: x is split into
 * a high half H (ceil(b/2) bits) and a low half L (floor(b/2) bits); even
 * rounds set H ^= F(L), odd rounds L ^= F(H), each of which is invertible,
 * so the whole network is a permutation of [0, 2^b). F is Philox-4x32-10
 * keyed by the seed, with the epoch as stream and (round, half) as counter.
 * Since 2^b < 2S, a walk takes fewer than two steps on average.
 */
#include "data.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "philox.h"
#include "shard.h"

#define FEISTEL_ROUNDS 8

struct hpt_loader {
    int nshards;
    hpt_shard *shards;
    int64_t *first; /* (nshards+1): first global sample index of each shard */
    int64_t S;      /* samples per epoch                                      */
    int T;
    int shuffle;
    uint64_t seed;
    int hi_bits, lo_bits; /* Feistel halves; hi_bits + lo_bits = b         */
};

/* ------------------------------------------------------------ path lists */

typedef struct {
    char **v;
    size_t n, cap;
} path_list;

static void path_list_free(path_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static hpt_status path_list_add(path_list *l, const char *p)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return hpt_error_set(HPT_ERR_INTERNAL, "out of memory listing shards");
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(p)))
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory listing shards");
    l->n++;
    return HPT_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Does a directory entry name a shard: "<prefix>*.bin"? */
static int dir_entry_matches(const char *name, const char *prefix)
{
    size_t n = strlen(name);
    if (n < 4 || strcmp(name + n - 4, ".bin") != 0)
        return 0;
    return !prefix || strncmp(name, prefix, strlen(prefix)) == 0;
}

/* Regular files in `dir` named "<prefix>*.bin". */
static hpt_status list_dir(const char *dir, const char *prefix, path_list *l)
{
    DIR *d = opendir(dir);
    if (!d)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot open data directory: %s", dir, strerror(errno));
    hpt_status st = HPT_OK;
    struct dirent *e;
    char path[8192];
    while (st == HPT_OK && (e = readdir(d)) != NULL) {
        struct stat sb;
        if (!dir_entry_matches(e->d_name, prefix))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
            st = path_list_add(l, path);
    }
    closedir(d);
    if (st == HPT_OK && l->n == 0)
        st = hpt_error_set(HPT_ERR_DATA, "%s: no shard named %s*.bin in this directory", dir,
                           prefix ? prefix : "");
    return st;
}

/* Files matching a glob pattern. */
static hpt_status list_glob(const char *pattern, path_list *l)
{
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH)
        return hpt_error_set(HPT_ERR_DATA, "%s: no shard matches this pattern", pattern);
    if (rc != 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: glob failed (code %d)", pattern, rc);
    hpt_status st = HPT_OK;
    for (size_t i = 0; st == HPT_OK && i < g.gl_pathc; i++)
        st = path_list_add(l, g.gl_pathv[i]);
    globfree(&g);
    return st;
}

/* Resolve spec (file, glob, or directory + prefix) to sorted paths. */
static hpt_status list_shards(const char *spec, const char *prefix, path_list *l)
{
    struct stat sb;
    hpt_status st;
    if (stat(spec, &sb) == 0 && S_ISDIR(sb.st_mode))
        st = list_dir(spec, prefix, l);
    else if (strpbrk(spec, "*?["))
        st = list_glob(spec, l);
    else
        st = path_list_add(l, spec); /* a missing file fails in hpt_shard_open */
    if (st == HPT_OK)
        qsort(l->v, l->n, sizeof *l->v, cmp_str);
    return st;
}

/* ------------------------------------------------------------- opening */

/* Samples in a shard of n tokens: windows of T+1 with stride T. */
static int64_t shard_samples(int64_t n, int T) { return n >= (int64_t)T + 1 ? (n - 1) / T : 0; }

/* Number of bits b with 2^b >= S (0 for S <= 1). */
static int domain_bits(int64_t S)
{
    int b = 0;
    while (b < 63 && ((int64_t)1 << b) < S)
        b++;
    return b;
}

/* Map, validate and number the shards of `paths`. */
static hpt_status open_shards(hpt_loader *ld, const path_list *paths, int vocab_size)
{
    ld->shards = calloc(paths->n, sizeof *ld->shards);
    ld->first = calloc(paths->n + 1, sizeof *ld->first);
    if (!ld->shards || !ld->first)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory opening %zu shards", paths->n);
    for (size_t i = 0; i < paths->n; i++) {
        hpt_status st = hpt_shard_open(paths->v[i], &ld->shards[i]);
        if (st != HPT_OK)
            return st;
        ld->nshards = (int)i + 1;
        if ((st = hpt_shard_check_vocab(&ld->shards[i], vocab_size)) != HPT_OK)
            return st;
        ld->first[i + 1] = ld->first[i] + shard_samples(ld->shards[i].ntok, ld->T);
    }
    ld->S = ld->first[paths->n];
    return HPT_OK;
}

hpt_status hpt_loader_open(hpt_loader **out, const char *spec, const char *prefix, int T,
                           int vocab_size, uint64_t seed, int shuffle)
{
    *out = NULL;
    if (T < 1 || vocab_size < 1)
        return hpt_error_set(HPT_ERR_USAGE, "%s: sequence length %d and vocab_size %d must be >= 1",
                             spec, T, vocab_size);
    hpt_loader *ld = calloc(1, sizeof *ld);
    if (!ld)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory opening %s", spec);
    ld->T = T;
    ld->seed = seed;
    ld->shuffle = shuffle != 0;
    path_list paths = {0};
    hpt_status st = list_shards(spec, prefix, &paths);
    if (st == HPT_OK)
        st = open_shards(ld, &paths, vocab_size);
    if (st == HPT_OK && ld->S == 0)
        st = hpt_error_set(HPT_ERR_DATA,
                           "%s: no sample of %d+1 tokens: every selected shard (%zu) is shorter "
                           "than the sequence length + 1",
                           spec, T, paths.n);
    path_list_free(&paths);
    if (st != HPT_OK) {
        hpt_loader_close(ld);
        return st;
    }
    int b = domain_bits(ld->S);
    ld->hi_bits = (b + 1) / 2;
    ld->lo_bits = b / 2;
    *out = ld;
    return HPT_OK;
}

int64_t hpt_loader_num_samples(const hpt_loader *ld) { return ld->S; }

/* -------------------------------------------------------- permutation */

/* Philox stream of epoch e's permutation: a tag keeps data order apart
 * from the parameter-initialisation streams keyed by tensor names. */
static uint64_t epoch_stream(uint64_t e) { return 0x68707464617461ull /* "hptdata" */ ^ (e << 8); }

/* One pass of the alternating Feistel network over [0, 2^(hi+lo)). */
static uint64_t feistel(const hpt_loader *ld, uint64_t stream, uint64_t x)
{
    uint64_t lo_mask = ((uint64_t)1 << ld->lo_bits) - 1;
    uint64_t hi_mask = ((uint64_t)1 << ld->hi_bits) - 1;
    uint64_t hi = x >> ld->lo_bits, lo = x & lo_mask;
    for (uint64_t r = 0; r < FEISTEL_ROUNDS; r++) {
        if (r % 2 == 0)
            hi ^= hpt_philox_u64(ld->seed, stream, r << 32 | lo) & hi_mask;
        else
            lo ^= hpt_philox_u64(ld->seed, stream, r << 32 | hi) & lo_mask;
    }
    return hi << ld->lo_bits | lo;
}

int64_t hpt_loader_sample_at(const hpt_loader *ld, int64_t p)
{
    HPT_CHECK(p >= 0);
    int64_t i = p % ld->S;
    if (!ld->shuffle || ld->S == 1)
        return i;
    uint64_t stream = epoch_stream((uint64_t)(p / ld->S));
    uint64_t x = (uint64_t)i;
    do
        x = feistel(ld, stream, x);
    while (x >= (uint64_t)ld->S);
    return (int64_t)x;
}

/* ------------------------------------------------------------- batches */

/* Shard holding global sample s (binary search over first[]). */
static int shard_of(const hpt_loader *ld, int64_t s)
{
    int a = 0, b = ld->nshards - 1;
    while (a < b) {
        int m = (a + b + 1) / 2;
        if (ld->first[m] <= s)
            a = m;
        else
            b = m - 1;
    }
    return a;
}

void hpt_loader_batch(const hpt_loader *ld, int64_t first, int B, int32_t *inputs,
                      int32_t *targets)
{
    int T = ld->T;
    for (int b = 0; b < B; b++) {
        int64_t s = hpt_loader_sample_at(ld, first + b);
        int k = shard_of(ld, s);
        const hpt_shard *sh = &ld->shards[k];
        int64_t off = (s - ld->first[k]) * T;
        for (int t = 0; t < T; t++) {
            inputs[(int64_t)b * T + t] = (int32_t)hpt_shard_token(sh, off + t);
            targets[(int64_t)b * T + t] = (int32_t)hpt_shard_token(sh, off + t + 1);
        }
    }
}

void hpt_loader_close(hpt_loader *ld)
{
    if (!ld)
        return;
    for (int i = 0; i < ld->nshards; i++)
        hpt_shard_close(&ld->shards[i]);
    free(ld->shards);
    free(ld->first);
    free(ld);
}
