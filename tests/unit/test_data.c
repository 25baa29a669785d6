/* test_data.c — unit tests of io/shard.c (llm.c token shards), of
 * io/durable.c (the durable commit every writer uses) and
 * lib/data.c (loader: sample numbering, Feistel permutation, batches,
 * shard selection). Writes small shards into a fresh temporary directory.
 * Exit status: 0 if every check passed, 1 otherwise (each failure is
 * printed with file:line). */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data.h"
#include "durable.h"
#include "error.h"
#include "shard.h"

#include "../helpers/expect.h"
#include "../helpers/tmpdir.h"


/* ------------------------------------------------------------- fixtures */

/* Write a file from raw header ints and a body of `body_bytes` zero bytes. */
static void write_raw(const char *path, int32_t magic, int32_t version, int32_t ntok, size_t body_bytes)
{
    FILE *f = fopen(path, "wb");
    int32_t h[256] = {magic, version, ntok};
    if (!EXPECT(f != NULL, "cannot create %s", path))
        return;
    fwrite(h, sizeof h, 1, f);
    for (size_t i = 0; i < body_bytes; i++)
        fputc(0, f);
    fclose(f);
}

/* Write a shard whose token i is base + i (mod 65536 for u16). */
static void write_seq(const char *path, int64_t n, uint32_t base, int tb)
{
    uint32_t *t = malloc((size_t)(n ? n : 1) * sizeof *t);
    for (int64_t i = 0; i < n; i++)
        t[i] = tb == 2 ? (base + (uint32_t)i) & 0xffff : base + (uint32_t)i;
    hpt_status st = hpt_shard_write(path, t, n, tb);
    EXPECT(st == HPT_OK, "write %s: %s", path, hpt_error_msg());
    free(t);
}

/* ---------------------------------------------------------- shard tests */

static void test_roundtrip(int tb, uint32_t max_id)
{
    enum { N = 1000 };
    uint32_t t[N];
    for (int i = 0; i < N; i++)
        t[i] = (uint32_t)((uint64_t)i * 2654435761u % (max_id + 1ull));
    t[N - 1] = max_id;
    const char *p = tpath(tb == 2 ? "rt16.bin" : "rt32.bin");
    hpt_shard s;
    EXPECT(hpt_shard_write(p, t, N, tb) == HPT_OK, "write: %s", hpt_error_msg());
    EXPECT(access(tpath(tb == 2 ? "rt16.bin.tmp" : "rt32.bin.tmp"), F_OK) != 0, "temp file left behind");
    if (!EXPECT(hpt_shard_open(p, &s) == HPT_OK, "open: %s", hpt_error_msg()))
        return;
    EXPECT(s.ntok == N && s.token_bytes == tb, "ntok %lld token_bytes %d", (long long)s.ntok, s.token_bytes);
    EXPECT(s.map_bytes == 1024 + (size_t)N * tb, "map_bytes %zu", s.map_bytes);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += hpt_shard_token(&s, i) != t[i];
    EXPECT(bad == 0, "%d tokens differ after roundtrip (token_bytes %d)", bad, tb);
    EXPECT(hpt_shard_check_vocab(&s, (int)max_id + 1) == HPT_OK, "check_vocab: %s", hpt_error_msg());
    EXPECT_ERR(hpt_shard_check_vocab(&s, (int)max_id), HPT_ERR_DATA, ">= vocab_size");
    hpt_shard_close(&s);
    hpt_shard_close(&s); /* closing twice is allowed */
}

static void test_bad_shards(void)
{
    hpt_shard s;
    const char *p;
    p = tpath("magic.bin");
    write_raw(p, 12345, 1, 0, 0);
    EXPECT_ERR(hpt_shard_open(p, &s), HPT_ERR_DATA,
               "bad magic 12345 (expected 20240520 for uint16 llm.c shards or 20240801 for uint32)");
    EXPECT(strstr(hpt_error_msg(), p) != NULL, "message does not name the file: %s", hpt_error_msg());
    EXPECT(s.map == NULL, "shard not left closed after error");

    p = tpath("version.bin");
    write_raw(p, 20240520, 3, 0, 0);
    EXPECT_ERR(hpt_shard_open(p, &s), HPT_ERR_DATA, "unsupported version 3 for magic 20240520 (expected 1)");
    write_raw(p, 20240801, 1, 0, 0);
    EXPECT_ERR(hpt_shard_open(p, &s), HPT_ERR_DATA, "unsupported version 1 for magic 20240801 (expected 7)");

    p = tpath("trunc.bin");
    write_raw(p, 20240520, 1, 1000, 2000 - 1024);
    EXPECT_ERR(hpt_shard_open(p, &s), HPT_ERR_DATA, "truncated: header says 1000 tokens = 3024 bytes, file has 2000 bytes");
    write_raw(p, 20240801, 7, 10, 41);
    EXPECT_ERR(hpt_shard_open(p, &s), HPT_ERR_DATA, "trailing bytes: header says 10 tokens = 1064 bytes, file has 1065 bytes");
    FILE *f = fopen(p, "wb");
    fputs("short", f);
    fclose(f);
    EXPECT_ERR(hpt_shard_open(p, &s), HPT_ERR_DATA, "truncated: file has 5 bytes, less than the 1024-byte header");

    p = tpath("missing.bin");
    EXPECT_ERR(hpt_shard_open(p, &s), HPT_ERR_DATA, "missing.bin: cannot open token shard: No such file or directory");

    uint32_t t[32] = {0};
    t[17] = 9000;
    p = tpath("vocab.bin");
    EXPECT(hpt_shard_write(p, t, 32, 2) == HPT_OK, "write: %s", hpt_error_msg());
    if (EXPECT(hpt_shard_open(p, &s) == HPT_OK, "open: %s", hpt_error_msg())) {
        EXPECT_ERR(hpt_shard_check_vocab(&s, 8192), HPT_ERR_DATA, "vocab.bin: token id 9000 at position 17 >= vocab_size 8192");
        hpt_shard_close(&s);
    }
    hpt_loader *ld;
    EXPECT_ERR(hpt_loader_open(&ld, p, NULL, 4, 8192, 1, 1), HPT_ERR_DATA, "token id 9000 at position 17 >= vocab_size 8192");
    EXPECT(ld == NULL, "loader not NULL after error");

    t[17] = 70000;
    EXPECT_ERR(hpt_shard_write(tpath("wide.bin"), t, 32, 2), HPT_ERR_DATA, "token id 70000 at position 17 does not fit uint16");
    EXPECT_ERR(hpt_shard_write(tpath("nodir/x.bin"), t, 32, 4), HPT_ERR_IO, "cannot create");
}

/* --------------------------------------------------------- loader tests */

enum { T = 4 }; /* sequence length of every loader test */

/* Loader over one fresh shard of S samples (S*T + 1 tokens). */
static hpt_loader *loader_of(int64_t S, uint64_t seed, int shuffle)
{
    char name[64];
    hpt_loader *ld = NULL;
    snprintf(name, sizeof name, "perm_%lld.bin", (long long)S);
    const char *p = tpath(name);
    if (access(p, F_OK) != 0)
        write_seq(p, S * T + 1, 0, 4);
    hpt_status st = hpt_loader_open(&ld, p, NULL, T, 1 << 24, seed, shuffle);
    EXPECT(st == HPT_OK, "open S=%lld: %s", (long long)S, hpt_error_msg());
    return ld;
}

/* Positions [e*S, (e+1)*S) visit every sample exactly once. */
static int epoch_is_bijection(const hpt_loader *ld, int64_t e)
{
    int64_t S = hpt_loader_num_samples(ld);
    char *seen = calloc((size_t)S, 1);
    int ok = 1;
    for (int64_t p = e * S; p < (e + 1) * S; p++) {
        int64_t s = hpt_loader_sample_at(ld, p);
        if (s < 0 || s >= S || seen[s]++)
            ok = 0;
    }
    free(seen);
    return ok;
}

/* Number of positions where epochs (or loaders) a and b disagree. */
static int64_t order_diff(const hpt_loader *a, int64_t ea, const hpt_loader *b, int64_t eb)
{
    int64_t S = hpt_loader_num_samples(a), d = 0;
    for (int64_t i = 0; i < S; i++)
        d += hpt_loader_sample_at(a, ea * S + i) != hpt_loader_sample_at(b, eb * S + i);
    return d;
}

static void test_permutation(void)
{
    static const int64_t sizes[] = {1, 2, 3, 5, 7, 8, 16, 17, 100, 255, 256, 1000, 1025, 4099};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t S = sizes[k];
        hpt_loader *ld = loader_of(S, 42, 1);
        if (!ld)
            continue;
        EXPECT(hpt_loader_num_samples(ld) == S, "S=%lld: num_samples %lld", (long long)S,
               (long long)hpt_loader_num_samples(ld));
        for (int64_t e = 0; e < 3; e++)
            EXPECT(epoch_is_bijection(ld, e), "S=%lld epoch %lld is not a permutation", (long long)S, (long long)e);
        hpt_loader_close(ld);
    }
}

static void test_order_keys(void)
{
    int64_t S = 1000;
    hpt_loader *a = loader_of(S, 7, 1), *a2 = loader_of(S, 7, 1), *b = loader_of(S, 8, 1);
    hpt_loader *plain = loader_of(S, 7, 0);
    if (!a || !a2 || !b || !plain)
        return;
    EXPECT(order_diff(a, 0, a, 1) > S / 2, "epochs 0 and 1 share too many positions (%lld differ)",
           (long long)order_diff(a, 0, a, 1));
    EXPECT(order_diff(a, 0, a2, 0) == 0 && order_diff(a, 5, a2, 5) == 0, "same seed, different order");
    EXPECT(order_diff(a, 0, b, 0) > S / 2, "different seeds give nearly the same order");
    EXPECT(order_diff(a, 0, plain, 0) > S / 2, "shuffled order is nearly the identity");
    int64_t bad = 0;
    for (int64_t p = 0; p < 3 * S; p++)
        bad += hpt_loader_sample_at(plain, p) != p % S;
    EXPECT(bad == 0, "shuffle=0 is not the identity (%lld positions)", (long long)bad);
    hpt_loader_close(a);
    hpt_loader_close(a2);
    hpt_loader_close(b);
    hpt_loader_close(plain);
    hpt_loader_close(NULL);
}

/* Expected token at offset i of global sample s over dir "batch": shard
 * a_000 (10 samples, base 1000), a_001 (too short: 0 samples), a_002
 * (7 samples + 2 spare tokens, base 30000). */
static uint32_t batch_expected(int64_t s, int64_t i)
{
    return s < 10 ? 1000 + (uint32_t)(s * T + i) : 30000 + (uint32_t)((s - 10) * T + i);
}

static void test_batch(void)
{
    if (mkdir(tpath("batch"), 0755) != 0 && !EXPECT(0, "mkdir batch"))
        return;
    write_seq(tpath("batch/a_000.bin"), 10 * T + 1, 1000, 2);
    write_seq(tpath("batch/a_001.bin"), T, 20000, 2);
    write_seq(tpath("batch/a_002.bin"), 7 * T + 3, 30000, 4);
    hpt_loader *ld;
    if (!EXPECT(hpt_loader_open(&ld, tpath("batch"), NULL, T, 65536, 3, 1) == HPT_OK, "%s", hpt_error_msg()))
        return;
    EXPECT(hpt_loader_num_samples(ld) == 17, "S %lld (want 17)", (long long)hpt_loader_num_samples(ld));
    enum { B = 5 };
    int32_t in[B * T], tg[B * T];
    int bad = 0;
    for (int64_t first = 0; first < 40; first += B) {
        hpt_loader_batch(ld, first, B, in, tg);
        for (int b = 0; b < B; b++) {
            int64_t s = hpt_loader_sample_at(ld, first + b);
            for (int t = 0; t < T; t++) {
                bad += (uint32_t)in[b * T + t] != batch_expected(s, t);
                bad += (uint32_t)tg[b * T + t] != batch_expected(s, t + 1);
                bad += tg[b * T + t] != (t + 1 < T ? in[b * T + t + 1] : tg[b * T + t]);
            }
        }
    }
    EXPECT(bad == 0, "%d batch tokens differ from the shard windows", bad);
    hpt_loader_close(ld);
    EXPECT_ERR(hpt_loader_open(&ld, tpath("batch/a_001.bin"), NULL, T, 65536, 3, 1), HPT_ERR_DATA,
               "no sample of 4+1 tokens");
    EXPECT(strstr(hpt_error_msg(), "a_001.bin") != NULL, "message does not name the spec: %s", hpt_error_msg());
}

/* Loader over spec/prefix has S samples (T = 4), or fails with `err`. */
static void expect_spec(const char *spec, const char *prefix, int64_t S, const char *err)
{
    hpt_loader *ld = NULL;
    hpt_status st = hpt_loader_open(&ld, spec, prefix, T, 65536, 1, 0);
    if (err)
        EXPECT_ERR(st, HPT_ERR_DATA, err);
    else if (EXPECT(st == HPT_OK, "%s [%s]: %s", spec, prefix ? prefix : "NULL", hpt_error_msg()))
        EXPECT(hpt_loader_num_samples(ld) == S, "%s [%s]: S %lld (want %lld)", spec, prefix ? prefix : "NULL",
               (long long)hpt_loader_num_samples(ld), (long long)S);
    hpt_loader_close(ld);
}

static void test_specs(void)
{
    if (mkdir(tpath("sel"), 0755) != 0 && !EXPECT(0, "mkdir sel"))
        return;
    write_seq(tpath("sel/train_000001.bin"), 3 * T + 1, 0, 2); /* 3 samples */
    write_seq(tpath("sel/train_000000.bin"), 5 * T + 1, 0, 2); /* 5 samples */
    write_seq(tpath("sel/val_000000.bin"), 2 * T + 1, 0, 2);   /* 2 samples */
    FILE *f = fopen(tpath("sel/train_notes.txt"), "w");
    fputs("not a shard\n", f);
    fclose(f);
    expect_spec(tpath("sel"), "train", 8, NULL);
    expect_spec(tpath("sel"), "val", 2, NULL);
    expect_spec(tpath("sel"), NULL, 10, NULL);
    expect_spec(tpath("sel/train_*.bin"), NULL, 8, NULL);
    expect_spec(tpath("sel/*_000000.bin"), NULL, 7, NULL);
    expect_spec(tpath("sel/val_000000.bin"), "train", 2, NULL); /* a file: prefix not used */
    expect_spec(tpath("sel"), "test", 0, "no shard named test*.bin");
    expect_spec(tpath("sel/zzz_*.bin"), NULL, 0, "no shard matches");
    expect_spec(tpath("sel/none.bin"), NULL, 0, "cannot open token shard");

    /* sorted-shard order: train_000000 (5 samples) precedes train_000001 */
    hpt_loader *ld;
    if (EXPECT(hpt_loader_open(&ld, tpath("sel/train_*.bin"), NULL, T, 65536, 1, 0) == HPT_OK, "%s", hpt_error_msg())) {
        int32_t in[T], tg[T];
        hpt_loader_batch(ld, 5, 1, in, tg); /* sample 5 = first of train_000001 */
        EXPECT(in[0] == 0 && tg[T - 1] == T, "sample 5 starts at %d (want 0 of the second shard)", in[0]);
        hpt_loader_batch(ld, 4, 1, in, tg); /* sample 4 = last of train_000000 */
        EXPECT(in[0] == 4 * T, "sample 4 starts at %d (want %d)", in[0], 4 * T);
        hpt_loader_close(ld);
    }
}

/* 1 when `path` holds exactly the NUL-terminated text `want`. */
static int file_is(const char *path, const char *want)
{
    char buf[64] = "";
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    return f && n == strlen(want) && !memcmp(buf, want, n);
}

/* io/durable.c: a write replaces the file whole and leaves no .tmp; every
 * failure names the step and the file, leaves the old file and no .tmp;
 * a directory commits like a file (the checkpoint's step_S.tmp/). */
static void test_durable(void)
{
    struct stat sb;
    const char *f = tpath("d.txt"), *ft = tpath("d.txt.tmp");
    EXPECT(hpt_file_write_durable(f, "abc", 3) == HPT_OK, "write: %s", hpt_error_msg());
    EXPECT(file_is(f, "abc") && stat(ft, &sb) != 0, "d.txt is not 'abc', or d.txt.tmp is left");
    EXPECT(hpt_file_write_durable(f, "xy", 2) == HPT_OK, "overwrite: %s", hpt_error_msg());
    EXPECT(file_is(f, "xy") && stat(ft, &sb) != 0, "d.txt is not 'xy', or d.txt.tmp is left");
    EXPECT_ERR(hpt_file_write_durable(tpath("no/x"), "a", 1), HPT_ERR_IO, "no/x.tmp: cannot create: No such file");
    /* the unsynced form (heartbeats): the same replacement and the same errors */
    EXPECT(hpt_file_write_atomic(f, "hb1", 3) == HPT_OK, "atomic write: %s", hpt_error_msg());
    EXPECT(file_is(f, "hb1") && stat(ft, &sb) != 0, "d.txt is not 'hb1', or d.txt.tmp is left");
    EXPECT_ERR(hpt_file_write_atomic(tpath("no/x"), "a", 1), HPT_ERR_IO, "no/x.tmp: cannot create: No such file");
    EXPECT(mkdir(tpath("adir"), 0777) == 0, "fixture adir");
    EXPECT(mkdir(tpath("adir/full"), 0777) == 0 &&
               hpt_file_write_durable(tpath("adir/full/k"), "1", 1) == HPT_OK,
           "fixture full");
    EXPECT_ERR(hpt_file_write_atomic(tpath("adir/full"), "a", 1), HPT_ERR_IO, "cannot rename ");
    EXPECT(stat(tpath("adir/full.tmp"), &sb) != 0, "a failed atomic write left its .tmp");
    EXPECT_ERR(hpt_file_commit(tpath("gone.tmp"), tpath("gone")), HPT_ERR_IO,
               "gone.tmp: cannot open for fsync: No such file");
    EXPECT(stat(tpath("gone"), &sb) != 0, "a failed commit created its target");
    EXPECT_ERR(hpt_fsync_path(tpath("gone")), HPT_ERR_IO, "gone: cannot open for fsync");
    /* directories: step_S.tmp/ -> step_S/; a rename over a non-empty one fails, named */
    EXPECT(mkdir(tpath("s.tmp"), 0777) == 0 && mkdir(tpath("busy"), 0777) == 0 &&
               hpt_file_write_durable(tpath("busy/f"), "1", 1) == HPT_OK,
           "fixture: %s", hpt_error_msg());
    EXPECT(hpt_file_commit(tpath("s.tmp"), tpath("s")) == HPT_OK, "dir commit: %s", hpt_error_msg());
    EXPECT(stat(tpath("s"), &sb) == 0 && S_ISDIR(sb.st_mode) && stat(tpath("s.tmp"), &sb) != 0,
           "s.tmp/ not renamed to s/");
    EXPECT_ERR(hpt_file_commit(tpath("s"), tpath("busy")), HPT_ERR_IO, "cannot rename ");
    EXPECT(stat(tpath("s"), &sb) == 0 && file_is(tpath("busy/f"), "1"),
           "a failed rename lost the source or the target");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (tmpdir_make("hpt-test-data")) {
        MPI_Finalize();
        return 1;
    }
    test_durable();
    test_roundtrip(2, 65535);
    test_roundtrip(4, 2000000000u);
    test_bad_shards();
    test_permutation();
    test_order_keys();
    test_batch();
    test_specs();
    tmpdir_remove();
    printf("test_data: %s (%d failure%s)\n", failures ? "FAIL" : "ok", failures, failures == 1 ? "" : "s");
    MPI_Finalize();
    return failures ? 1 : 0;
}
