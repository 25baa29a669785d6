/* test_ckpt.c — unit tests of the checkpoint integrity code in io/ckpt.c:
 * hpt_crc32c (RFC 3720 test vectors, a bit-at-a-time reference over many
 * lengths and alignments on both sides of the three-stream threshold,
 * chaining) and the tile checksums (hpt_ckpt_tiles_crc, reading a block
 * band by band with hpt_ckpt_read_checked from a real HDF5 file, a flipped
 * byte found in the right tile and only there).
 * Exit status: 0 if every check passed, 1 otherwise (each failure is
 * printed with file:line). */
#include <hdf5.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"

#include "../helpers/expect.h"

/* CRC32C one bit at a time: the definition (reflected 0x1EDC6F41). */
static uint32_t crc_ref(uint32_t crc, const unsigned char *p, size_t n)
{
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static uint64_t rng = 88172645463325252ull;
static unsigned char next_byte(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned char)(rng >> 32);
}

static void test_crc32c(void)
{
    unsigned char b[32];
    EXPECT(hpt_crc32c(0, "123456789", 9) == 0xE3069283u, "check value %08x",
           hpt_crc32c(0, "123456789", 9));
    /* RFC 3720, appendix B.4 */
    memset(b, 0, 32);
    EXPECT(hpt_crc32c(0, b, 32) == 0x8A9136AAu, "32 zeros: %08x", hpt_crc32c(0, b, 32));
    memset(b, 0xff, 32);
    EXPECT(hpt_crc32c(0, b, 32) == 0x62A8AB43u, "32 x 0xff: %08x", hpt_crc32c(0, b, 32));
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)i;
    EXPECT(hpt_crc32c(0, b, 32) == 0x46DD794Eu, "0..31: %08x", hpt_crc32c(0, b, 32));
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)(31 - i);
    EXPECT(hpt_crc32c(0, b, 32) == 0x113FDB5Cu, "31..0: %08x", hpt_crc32c(0, b, 32));
    EXPECT(hpt_crc32c(0, b, 0) == 0, "empty: %08x", hpt_crc32c(0, b, 0));

    size_t big = (3u << 20) + 123;
    unsigned char *buf = malloc(big + 16);
    if (!EXPECT(buf != NULL, "out of memory"))
        return;
    for (size_t i = 0; i < big + 16; i++)
        buf[i] = next_byte();
    /* every length near the three-stream threshold (3 x 4096 bytes) and
     * others up to 3 MiB, at every alignment mod 8 */
    size_t lens[] = {1, 7, 8, 9, 63, 4095, 12287, 12288, 12289, 12290, 12295, 12296, 12297,
                     24576 + 5, 65536, 1000003, 3u << 20, big};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++)
        for (size_t al = 0; al < 8; al++) {
            uint32_t want = crc_ref(0, buf + al, lens[k]), got = hpt_crc32c(0, buf + al, lens[k]);
            EXPECT(got == want, "length %zu at offset %zu: %08x, reference %08x", lens[k], al, got,
                   want);
        }
    /* chaining: the CRC of a || b continues from the CRC of a */
    size_t cuts[] = {0, 1, 8, 12288, 50001, 1u << 20, big};
    for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
        uint32_t whole = hpt_crc32c(0, buf, big);
        uint32_t two = hpt_crc32c(hpt_crc32c(0, buf, cuts[k]), buf + cuts[k], big - cuts[k]);
        EXPECT(two == whole, "split at %zu: %08x, whole %08x", cuts[k], two, whole);
    }
    /* a one-bit change anywhere in a long buffer changes the CRC */
    uint32_t before = hpt_crc32c(0, buf, big);
    size_t spots[] = {0, 12345, big / 3, big / 3 + 1, 2 * (big / 3) + 7, big - 1};
    for (size_t k = 0; k < sizeof spots / sizeof *spots; k++) {
        buf[spots[k]] ^= 0x10;
        EXPECT(hpt_crc32c(0, buf, big) != before, "bit flip at %zu not seen", spots[k]);
        buf[spots[k]] ^= 0x10;
    }
    free(buf);
}

/* A 100 x 70 float dataset with 16 x 32 tiles (the last row and column of
 * tiles clipped): write it contiguous, checksum it, read blocks back. */
static void test_tiles(void)
{
    enum { R = 100, C = 70 };
    char path[] = "/tmp/hpt-test-ckpt.XXXXXX";
    int fd = mkstemp(path);
    if (!EXPECT(fd >= 0, "mkstemp"))
        return;
    close(fd);
    static float a[R * C], back[R * C];
    for (int i = 0; i < R * C; i++)
        a[i] = (float)i * 0.25f - 7.0f;
    hpt_ckpt_tiles t;
    hpt_ckpt_tiles_init(&t, R, C, 16, 32);
    EXPECT(t.nr == 7 && t.nc == 3, "tile grid %lld x %lld", (long long)t.nr, (long long)t.nc);
    uint32_t crc[21];
    memset(crc, 0, sizeof crc);
    hpt_ckpt_tiles_crc(&t, a, C, 0, R, 0, C, crc);
    /* tile (6, 2) is rows 96..99, columns 64..69 */
    uint32_t x = 0;
    for (int r = 96; r < 100; r++)
        x = hpt_crc32c(x, a + r * C + 64, 6 * sizeof(float));
    EXPECT(crc[6 * 3 + 2] == x, "clipped corner tile %08x, expected %08x", crc[20], x);

    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hsize_t dims[2] = {R, C};
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t ds = H5Dcreate2(f, "w", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT(ds >= 0 && H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a) >= 0,
           "writing the dataset");
    haddr_t off = H5Dget_offset(ds);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);

    int64_t bad = -1;
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ds = H5Dopen2(f, "w", H5P_DEFAULT);
    int rc = hpt_ckpt_read_checked(ds, H5P_DEFAULT, &t, crc, 0, R, 0, C, back, &bad);
    EXPECT(rc == 0 && !memcmp(a, back, sizeof a), "whole dataset: %d", rc);
    /* an inner block of whole tiles: rows 16..63, columns 32..63 */
    rc = hpt_ckpt_read_checked(ds, H5P_DEFAULT, &t, crc, 16, 48, 32, 32, back, &bad);
    int same = 1;
    for (int r = 0; r < 48; r++)
        same &= !memcmp(back + r * 32, a + (16 + r) * C + 32, 32 * sizeof(float));
    EXPECT(rc == 0 && same, "inner block: %d, same %d", rc, same);
    H5Dclose(ds);
    H5Fclose(f);

    /* flip one byte of element (40, 50): tile (2, 1) */
    FILE *fp = fopen(path, "r+b");
    long at = (long)off + (long)((40 * C + 50) * sizeof(float)) + 1;
    int ch = fp && !fseek(fp, at, SEEK_SET) ? fgetc(fp) : EOF;
    EXPECT(ch != EOF && !fseek(fp, at, SEEK_SET) && fputc(ch ^ 0x40, fp) != EOF && !fclose(fp),
           "damaging the file");
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ds = H5Dopen2(f, "w", H5P_DEFAULT);
    rc = hpt_ckpt_read_checked(ds, H5P_DEFAULT, &t, crc, 0, R, 0, C, back, &bad);
    EXPECT(rc == -2 && bad == 2 * 3 + 1, "damaged whole read: %d, tile %lld", rc, (long long)bad);
    bad = -1;
    rc = hpt_ckpt_read_checked(ds, H5P_DEFAULT, &t, crc, 32, 16, 0, C, back, &bad);
    EXPECT(rc == -2 && bad == 2 * 3 + 1, "damaged band: %d, tile %lld", rc, (long long)bad);
    rc = hpt_ckpt_read_checked(ds, H5P_DEFAULT, &t, crc, 48, 52, 0, C, back, &bad);
    EXPECT(rc == 0, "rows 48..99 do not hold the damage: %d", rc);
    rc = hpt_ckpt_read_checked(ds, H5P_DEFAULT, &t, crc, 0, R, 0, 32, back, &bad);
    EXPECT(rc == 0, "columns 0..31 do not hold the damage: %d", rc);
    H5Dclose(ds);
    H5Fclose(f);
    unlink(path);
}

int main(void)
{
    test_crc32c();
    test_tiles();
    if (failures)
        fprintf(stderr, "test_ckpt: %d failure(s)\n", failures);
    else
        printf("test_ckpt: all checks passed\n");
    return failures ? 1 : 0;
}
