/* test_safetensors.c — unit tests of io/safetensors.c: exact F32/BF16/F16
 * conversion (subnormals, infinities, signed zero), block reads, every
 * header rule (one malformed header per check) and sharded indexes (lazy
 * shard opening, a shard without its tensor). Writes small files into a
 * fresh temporary directory. Exit status: 0 if every check passed, 1
 * otherwise (each failure printed with file:line). */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "safetensors.h"
#include "safetensors_write.h"

#include "../helpers/expect.h"
#include "../helpers/tmpdir.h"


/* A safetensors file: length field (hlen < 0: the header's real length),
 * header text, data bytes. */
static const char *write_st(const char *name, long long hlen, const char *header,
                            const void *data, size_t n)
{
    const char *p = tpath(name);
    FILE *f = fopen(p, "wb");
    uint64_t len = hlen < 0 ? strlen(header) : (uint64_t)hlen;
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(len >> (8 * i));
    fwrite(b, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    if (n)
        fwrite(data, 1, n, f);
    fclose(f);
    return p;
}

static void write_text(const char *name, const char *text)
{
    FILE *f = fopen(tpath(name), "w");
    fputs(text, f);
    fclose(f);
}

static int same_bits(float a, float b) { return !memcmp(&a, &b, sizeof a); }

/* ------------------------------------------------------------- tests */

static void test_valid(void)
{
    /* a: F32 (2, 3); b: BF16 (3); c: F16 (2, 2); padding spaces after the JSON */
    unsigned char data[24 + 6 + 8];
    float a[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
    for (int i = 0; i < 6; i++) {
        uint32_t u;
        memcpy(&u, &a[i], 4);
        for (int k = 0; k < 4; k++)
            data[4 * i + k] = (unsigned char)(u >> (8 * k));
    }
    uint16_t bf[3] = {0x3f80, 0xc040, 0x7f80}; /* 1, -3, +inf */
    uint16_t hf[4] = {0x0001, 0x8000, 0x7bff, 0xfc00}; /* 2^-24, -0, 65504, -inf */
    for (int i = 0; i < 3; i++)
        data[24 + 2 * i] = (unsigned char)bf[i], data[25 + 2 * i] = (unsigned char)(bf[i] >> 8);
    for (int i = 0; i < 4; i++)
        data[30 + 2 * i] = (unsigned char)hf[i], data[31 + 2 * i] = (unsigned char)(hf[i] >> 8);
    const char *p = write_st("ok.safetensors", -1,
                             "{\"__metadata__\":{\"format\":\"pt\"},"
                             "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                             "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[24,30]},"
                             "\"c\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[30,38]}}   ",
                             data, sizeof data);
    hpt_st_file f;
    if (!EXPECT(hpt_st_open(p, &f) == HPT_OK, "open: %s", hpt_error_msg()))
        return;
    EXPECT(f.ntensors == 3, "%d tensors (the metadata is not one)", f.ntensors);
    const hpt_st_tensor *ta = hpt_st_find(&f, "a"), *tb = hpt_st_find(&f, "b"),
                        *tc = hpt_st_find(&f, "c");
    EXPECT(ta && tb && tc && !hpt_st_find(&f, "d"), "find");
    float out[6];
    if (ta && EXPECT(hpt_st_read_block(&f, ta, 0, 2, 0, 3, out) == HPT_OK, "read a"))
        for (int i = 0; i < 6; i++)
            EXPECT(same_bits(out[i], a[i]), "a[%d] = %g, want %g", i, out[i], a[i]);
    if (ta && EXPECT(hpt_st_read_block(&f, ta, 1, 1, 1, 2, out) == HPT_OK, "read a block"))
        EXPECT(same_bits(out[0], a[4]) && same_bits(out[1], a[5]), "block (1, 1..2): %g %g",
               out[0], out[1]);
    float wb[3] = {1.0f, -3.0f, INFINITY};
    if (tb && EXPECT(hpt_st_read_block(&f, tb, 0, 3, 0, 1, out) == HPT_OK, "read b"))
        for (int i = 0; i < 3; i++)
            EXPECT(same_bits(out[i], wb[i]), "bf16 %d = %g, want %g", i, out[i], wb[i]);
    float wc[4] = {0x1p-24f, -0.0f, 65504.0f, -INFINITY};
    if (tc && EXPECT(hpt_st_read_block(&f, tc, 0, 2, 0, 2, out) == HPT_OK, "read c"))
        for (int i = 0; i < 4; i++)
            EXPECT(same_bits(out[i], wc[i]), "f16 %d = %g, want %g", i, out[i], wc[i]);
    hpt_st_close(&f);
    hpt_st_close(&f); /* twice is fine */
}

/* One malformed header: open fails with HPT_ERR_DATA and `sub`. */
static void bad(const char *header, long long hlen, size_t ndata, const char *sub)
{
    static unsigned char zeros[64];
    const char *p = write_st("bad.safetensors", hlen, header, zeros, ndata);
    hpt_st_file f;
    hpt_status st = hpt_st_open(p, &f);
    EXPECT_ERR(st, HPT_ERR_DATA, sub);
    EXPECT(strstr(hpt_error_msg(), "bad.safetensors") != NULL, "file not named: %s", hpt_error_msg());
    EXPECT(f.map == NULL && f.tensors == NULL, "left open after an error");
}

static void test_bad_headers(void)
{
    const char *ok = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    hpt_st_file f;
    EXPECT_ERR(hpt_st_open(tpath("none.safetensors"), &f), HPT_ERR_DATA, "cannot open");
    write_text("short.safetensors", "abc");
    EXPECT_ERR(hpt_st_open(tpath("short.safetensors"), &f), HPT_ERR_DATA, "truncated: 3 bytes");
    bad(ok, 1000, 8, "header length 1000 exceeds the");
    bad("{", 1, 0, "header length 1 outside");
    bad("{\"t\":", -1, 0, "is not one strict JSON object");
    bad("{} x", -1, 0, "is not one strict JSON object");
    bad("[1, 2]", -1, 0, "must be a JSON object");
    /* the format forbids duplicate keys; json-c alone would keep the last */
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8,
        "gives the key \"t\" twice in one object");
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"shape\":[2],\"data_offsets\":[0,8]}}", -1,
        8, "gives the key \"shape\" twice");
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"\\u0074\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8,
        "gives the key \"t\" twice"); /* the same key spelt with an escape */
    bad("{\"__metadata__\":{\"x\":NaN},\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
        "\"data_offsets\":[0,8]}}", -1, 8, "'NaN' is not a JSON value");
    bad("{\"__metadata__\":{\"x\":-Infinity},\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
        "\"data_offsets\":[2e0,8]}}", -1, 8, "'Infinity' is not a JSON value");
    bad("{/* c */\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8,
        "is not one strict JSON object");
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", -1, 8, "tensor t: header entry must be");
    bad("{\"t\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8,
        "tensor t: unknown dtype 'Q4'");
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", -1, 8,
        "tensor t: shape entry 0 is not a size");
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", -1, 8,
        "tensor t: 9 dimensions");
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", -1, 8,
        "tensor t: data_offsets [8, 0] outside the data region of 8 bytes");
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", -1, 8,
        "tensor t: data_offsets [0, 16] outside the data region of 8 bytes");
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", -1, 8,
        "tensor t: data_offsets [0, 8] hold 8 bytes, shape x F32 needs 12");
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}", -1, 8,
        "shape entry 0 is not a size");
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"u\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[6,10]}}", -1, 16,
        "tensors t [0, 8) and u [6, 10) overlap");
    /* the data_offsets must tile the data region: no gap, nothing after the last tensor */
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", -1, 12,
        "the first tensor t begins at byte 4 of the data region: bytes [0, 4) belong to no tensor");
    bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"u\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", -1, 12,
        "tensor u begins at byte 8 of the data region, but the tensor before it, t, ends at "
        "byte 4");
    bad(ok, -1, 12,
        "the last tensor t ends at byte 8 of the 12-byte data region: its last 4 bytes");
    bad("{}", -1, 4, "no tensors, but a data region of 4 bytes");
    /* a length field 4 bytes short of a space-padded header: the JSON still
     * parses, the tensors would read 4 bytes early (was: accepted) */
    char padded[128];
    snprintf(padded, sizeof padded, "%s        ", ok);
    bad(padded, (long long)strlen(padded) - 4, 8, "the last tensor t ends at byte 8 of the "
        "12-byte data region: its last 4 bytes belong to no tensor");
    /* an empty tensor needs no bytes */
    const char *e = write_st("empty.safetensors", -1,
                             "{\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
                             "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                             "\0\0\0\0\0\0\0\0", 8);
    if (EXPECT(hpt_st_open(e, &f) == HPT_OK, "empty tensor at the end: %s", hpt_error_msg()))
        hpt_st_close(&f);
    /* an unsupported but known dtype opens; reading it is refused */
    const char *p = write_st("i32.safetensors", -1,
                             "{\"t\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                             "\0\0\0\0\0\0\0\0", 8);
    if (EXPECT(hpt_st_open(p, &f) == HPT_OK, "I32 file: %s", hpt_error_msg())) {
        float out[2];
        EXPECT_ERR(hpt_st_read_block(&f, hpt_st_find(&f, "t"), 0, 2, 0, 1, out), HPT_ERR_DATA,
                   "tensor t: dtype I32 is not supported");
        hpt_st_close(&f);
    }
}

static void test_index(void)
{
    unsigned char one[4] = {0, 0, 0x80, 0x3f}; /* 1.0f */
    write_st("s1.safetensors", -1, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             one, 4);
    write_st("s2.safetensors", -1, "{\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             one, 4);
    write_text("m.index.json", "{\"metadata\": {}, \"weight_map\": {\"y\": \"s2.safetensors\", "
                               "\"x\": \"s1.safetensors\", \"z\": \"s1.safetensors\"}}");
    hpt_st_set s;
    if (!EXPECT(hpt_st_set_open(tpath("m.index.json"), &s) == HPT_OK, "index: %s", hpt_error_msg()))
        return;
    EXPECT(s.nshards == 2 && s.nnames == 3 && !s.opened[0] && !s.opened[1],
           "%d shards, %d names, nothing opened yet", s.nshards, s.nnames);
    const hpt_st_file *f;
    const hpt_st_tensor *t;
    EXPECT(hpt_st_set_find(&s, "y", &f, &t) == HPT_OK && t && !strcmp(t->name, "y"), "find y");
    int k = s.opened[0] ? 0 : 1;
    EXPECT(s.opened[0] + s.opened[1] == 1 && strstr(s.shard_paths[k], "s2.safetensors"),
           "only y's shard is open");
    float v = 0;
    EXPECT(t && hpt_st_read_block(f, t, 0, 1, 0, 1, &v) == HPT_OK && v == 1.0f, "y = %g", v);
    EXPECT(hpt_st_set_find(&s, "w", &f, &t) == HPT_OK && !t && !f, "w: not in the set");
    EXPECT_ERR(hpt_st_set_find(&s, "z", &f, &t), HPT_ERR_DATA,
               "puts tensor z in");
    hpt_st_set_close(&s);
    write_text("noshard.index.json", "{\"weight_map\": {\"x\": \"gone.safetensors\"}}");
    if (EXPECT(hpt_st_set_open(tpath("noshard.index.json"), &s) == HPT_OK, "open")) {
        EXPECT_ERR(hpt_st_set_find(&s, "x", &f, &t), HPT_ERR_DATA,
                   "gone.safetensors: cannot open");
        EXPECT(strstr(hpt_error_msg(), "the shard of tensor x in") != NULL, "%s", hpt_error_msg());
        hpt_st_set_close(&s);
    }
    write_text("nomap.index.json", "{\"metadata\": {}}");
    EXPECT_ERR(hpt_st_set_open(tpath("nomap.index.json"), &s), HPT_ERR_DATA,
               "not a safetensors index");
    write_text("up.index.json", "{\"weight_map\": {\"x\": \"../../x.safetensors\"}}");
    EXPECT_ERR(hpt_st_set_open(tpath("up.index.json"), &s), HPT_ERR_DATA,
               "weight_map entry x: expected the name of a shard file beside the index (no '/')");
    write_text("dup.index.json", "{\"weight_map\": {\"x\": \"a.safetensors\", \"x\": "
               "\"b.safetensors\"}}");
    EXPECT_ERR(hpt_st_set_open(tpath("dup.index.json"), &s), HPT_ERR_DATA,
               "gives the key \"x\" twice in one object");
    write_text("cmt.index.json", "{/* c */ \"weight_map\": {\"x\": \"a.safetensors\"}}");
    EXPECT_ERR(hpt_st_set_open(tpath("cmt.index.json"), &s), HPT_ERR_DATA,
               "is not one strict JSON object");
    write_text("abs.index.json", "{\"weight_map\": {\"x\": \"/etc/passwd\"}}");
    EXPECT_ERR(hpt_st_set_open(tpath("abs.index.json"), &s), HPT_ERR_DATA,
               "weight_map entry x: expected the name of a shard file beside the index (no '/')");
    /* a single file as a set */
    if (EXPECT(hpt_st_set_open(tpath("s1.safetensors"), &s) == HPT_OK, "single: %s",
               hpt_error_msg())) {
        EXPECT(s.nshards == 1 && s.nnames == 1 && s.opened[0], "single file: one open shard");
        EXPECT(hpt_st_set_find(&s, "x", &f, &t) == HPT_OK && t, "find x");
        hpt_st_set_close(&s);
    }
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* float32 → bfloat16: round to nearest, ties to even; NaN stays NaN. */
static void test_bf16_rounding(void)
{
    static const struct {
        uint32_t in;
        uint16_t out;
    } v[] = {{0x3f800000u, 0x3f80}, /* 1.0 exact                          */
             {0x3f808000u, 0x3f80}, /* tie, even below: down              */
             {0x3f818000u, 0x3f82}, /* tie, odd below: up                 */
             {0x3f808001u, 0x3f81}, /* just above the tie: up             */
             {0x3f807fffu, 0x3f80}, /* just below: down                   */
             {0xbf818000u, 0xbf82}, /* negative tie: magnitude up         */
             {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds to +inf             */
             {0xff800000u, 0xff80}, /* -inf                               */
             {0x00000001u, 0x0000}, /* smallest subnormal: to +0          */
             {0x80000000u, 0x8000}}; /* -0                                 */
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint16_t got = hpt_st_f32_to_bf16(from_bits(v[i].in));
        EXPECT(got == v[i].out, "bf16(0x%08x) = 0x%04x, want 0x%04x", v[i].in, got, v[i].out);
    }
    uint16_t n = hpt_st_f32_to_bf16(from_bits(0x7f800001u)); /* a NaN whose payload is all low */
    EXPECT((n & 0x7f80) == 0x7f80 && (n & 0x7f), "NaN → 0x%04x, not a NaN", n);
}

/* Writer → reader: sharded (a shard per tensor here), index, config.json,
 * values exact (F32) and round-to-nearest-even (BF16); data tiles. */
static void test_writer(void)
{
    hpt_st_out_tensor t[3] = {{"a.weight", 2, 2, 3}, {"b.weight", 1, 4, 1}, {"c.weight", 2, 1, 2}};
    float x[12] = {1, 2, 3, 4, 5, 6, 1.00390625f, -0.0f, INFINITY, 7, 8, 9};
    char out[4300];
    snprintf(out, sizeof out, "%s", tpath("w.safetensors"));
    for (int bf = 0; bf < 2; bf++) {
        hpt_st_writer *w = NULL;
        hpt_status st = hpt_st_writer_open(&w, out, t, 3, bf ? HPT_ST_OUT_BF16 : HPT_ST_OUT_F32,
                                           10, "{\"model_type\": \"llama\"}\n");
        if (!st) /* spans tensors and shards in one call, then the rest */
            st = hpt_st_writer_write(w, x, 7);
        if (!st)
            st = hpt_st_writer_write(w, x + 7, 5);
        int nf = 0;
        st = hpt_st_writer_finish(w, st, &nf);
        if (!EXPECT(st == HPT_OK && nf == 3, "write (bf16 %d): %s, %d files", bf,
                    st ? hpt_error_msg() : "ok", nf))
            continue;
        hpt_st_set s;
        if (!EXPECT(hpt_st_set_open(tpath("w.safetensors.index.json"), &s) == HPT_OK,
                    "read the index: %s", hpt_error_msg()))
            continue;
        EXPECT(s.nshards == 3 && s.nnames == 3, "%d shards, %d names", s.nshards, s.nnames);
        float got[12];
        int k = 0;
        for (int i = 0; i < 3; i++) {
            const hpt_st_file *f;
            const hpt_st_tensor *tt;
            if (!EXPECT(hpt_st_set_find(&s, t[i].name, &f, &tt) == HPT_OK && tt, "find %s: %s",
                        t[i].name, hpt_error_msg()))
                break;
            EXPECT(!strcmp(tt->dtype, bf ? "BF16" : "F32") && tt->ndim == t[i].ndim,
                   "%s: dtype %s, %d dims", t[i].name, tt->dtype, tt->ndim);
            hpt_st_read_block(f, tt, 0, t[i].rows, 0, t[i].cols, got + k);
            k += (int)(t[i].rows * t[i].cols);
        }
        for (int i = 0; i < k; i++) {
            float want = bf ? from_bits((uint32_t)hpt_st_f32_to_bf16(x[i]) << 16) : x[i];
            EXPECT(same_bits(got[i], want), "bf16 %d: value %d = %g, want %g", bf, i, got[i], want);
        }
        hpt_st_set_close(&s);
        FILE *c = fopen(tpath("config.json"), "r");
        char line[64] = "";
        EXPECT(c && fgets(line, sizeof line, c) && strstr(line, "llama"), "config.json: '%s'",
               line);
        if (c)
            fclose(c);
    }
    /* too few values: nothing is left, not even the .tmp files */
    hpt_st_writer *w = NULL;
    snprintf(out, sizeof out, "%s", tpath("part.safetensors"));
    hpt_status st = hpt_st_writer_open(&w, out, t, 3, HPT_ST_OUT_F32, 1000, "{}");
    if (!st)
        st = hpt_st_writer_write(w, x, 5);
    st = hpt_st_writer_finish(w, st, NULL); /* (EXPECT_ERR evaluates its argument twice) */
    EXPECT_ERR(st, HPT_ERR_INTERNAL, "tensor a.weight: 5 of 6 values");
    EXPECT(access(out, F_OK) != 0 && access(tpath("part.safetensors.tmp"), F_OK) != 0,
           "a partial export was left");
}

int main(void)
{
    if (tmpdir_make("hpt-st"))
        return 1;
    test_valid();
    test_bad_headers();
    test_index();
    test_bf16_rounding();
    test_writer();
    tmpdir_remove();
    printf("test_safetensors: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
