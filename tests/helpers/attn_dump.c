/* attn_dump — run one attention forward and backward of a compute backend
 * on fixed-seed inputs and write every tensor as raw little-endian float32
 * for tests/helpers/attention_torch.py (the PyTorch reference of the op):
 *   q.f32 dout.f32 out.f32 dq.f32 (B,T,H,hd); k.f32 v.f32 dk.f32 dv.f32
 *   (B,T,KV,hd). Inputs are uniform in [-2,2) (q, k) and [-1,1) (v, dout).
 * Usage: attn_dump B T H KV HD OUTDIR [backend]   (default backend cpu)
 * Exit status: 0, 2 on usage errors, 5 when a file cannot be written. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

static uint64_t rng = 0x853C49E6748FEA9Bull;

/* Uniform in [-a, a) (splitmix64). */
static float urand(double a)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(a * ((double)(z >> 11) * 0x1.0p-52 - 1.0));
}

/* n floats of device memory filled with urand(a) (a = 0: zeros). */
static float *dev_rand(const hpt_backend *be, size_t n, double a)
{
    float *h = malloc(sizeof(float) * n), *d = be->alloc(sizeof(float) * n);
    if (!h || !d)
        HPT_FATAL("attn_dump: out of memory (%zu floats)", n);
    for (size_t i = 0; i < n; i++)
        h[i] = a > 0 ? urand(a) : 0.0f;
    be->upload(d, h, sizeof(float) * n);
    free(h);
    return d;
}

static void save(const hpt_backend *be, const char *dir, const char *name, const float *d,
                 size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f32", dir, name);
    float *h = malloc(sizeof(float) * n);
    if (!h)
        HPT_FATAL("attn_dump: out of memory (%zu floats)", n);
    be->download(h, d, sizeof(float) * n);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(h, sizeof(float), n, f) != n || fclose(f)) {
        fprintf(stderr, "attn_dump: cannot write %s\n", path);
        exit(5);
    }
    free(h);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 7) {
        fprintf(stderr, "usage: attn_dump B T H KV HD OUTDIR [backend]\n");
        return 2;
    }
    int B = atoi(argv[1]), T = atoi(argv[2]), H = atoi(argv[3]), KV = atoi(argv[4]);
    int hd = atoi(argv[5]);
    if (B < 1 || T < 1 || H < 1 || KV < 1 || hd < 1 || H % KV) {
        fprintf(stderr, "attn_dump: need positive sizes and KV dividing H\n");
        return 2;
    }
    const hpt_backend *be;
    if (hpt_backend_get(argc > 7 ? argv[7] : "cpu", &be)) {
        fprintf(stderr, "attn_dump: %s\n", hpt_error_msg());
        return 2;
    }
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd;
    float *q = dev_rand(be, nq, 2.0), *k = dev_rand(be, nk, 2.0), *v = dev_rand(be, nk, 1.0);
    float *dout = dev_rand(be, nq, 1.0), *out = dev_rand(be, nq, 0);
    float *saved = dev_rand(be, be->attention_saved_floats(B, T, H), 0);
    float *scratch = dev_rand(be, be->attention_scratch_floats(B, T, H), 0);
    float *dq = dev_rand(be, nq, 0), *dk = dev_rand(be, nk, 0), *dv = dev_rand(be, nk, 0);
    be->attention_forward(out, saved, q, k, v, B, T, H, KV, hd);
    be->attention_backward(dq, dk, dv, scratch, dout, out, saved, q, k, v, B, T, H, KV, hd);
    const char *dir = argv[6];
    save(be, dir, "q", q, nq), save(be, dir, "k", k, nk), save(be, dir, "v", v, nk);
    save(be, dir, "dout", dout, nq), save(be, dir, "out", out, nq);
    save(be, dir, "dq", dq, nq), save(be, dir, "dk", dk, nk), save(be, dir, "dv", dv, nk);
    MPI_Finalize();
    return 0;
}
