/* ref_dump — run hpt's tiny model on real tokens and dump everything the
 * PyTorch reference (tests/helpers/torch_ref.py) compares against, to HDF5:
 *   /params_init/<hf name>   initial weights (exported from hpt's init)
 *   /inputs, /targets        (steps, B, T) int32 tokens, one batch per step
 *   /logits                  (B, T, V) logits of batch 0
 *   /loss0                   mean loss of batch 0
 *   /grads/<hf name>         gradients of batch 0's mean loss
 *   /step_loss, /step_norm, /step_lr   per AdamW step
 *   /params_after/<hf name>  weights after `steps` AdamW steps
 * Usage: ref_dump MODEL TIE(0|1) SHARD OUT.h5 B T STEPS LR WARMUP CLIP SEED
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "data.h"
#include "optim.h"
#include "model_h5.h"
#include "weights.h"

#define TRY(x)                                                      \
    do {                                                            \
        if ((x)) {                                                  \
            fprintf(stderr, "ref_dump: %s\n", hpt_error_msg());     \
            MPI_Abort(MPI_COMM_WORLD, 1);                           \
        }                                                           \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 12) {
        fprintf(stderr, "usage: ref_dump MODEL TIE SHARD OUT.h5 B T STEPS LR WARMUP CLIP SEED\n");
        return 2;
    }
    hpt_config cfg;
    TRY(hpt_config_resolve(argv[1], &cfg));
    cfg.tie_word_embeddings = atoi(argv[2]);
    int B = atoi(argv[5]), T = atoi(argv[6]), steps = atoi(argv[7]), N = B * T;
    hpt_optim_opts oo = {.lr = (float)atof(argv[8]), .min_lr = (float)atof(argv[8]) / 10,
                         .warmup = atoi(argv[9]), .total_steps = steps, .beta1 = 0.9f,
                         .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                         .max_norm = (float)atof(argv[10])};
    hpt_model m;
    hpt_optim opt;
    hpt_loader *ld;
    const hpt_backend *be;
    TRY(hpt_backend_get("cpu", &be));
    TRY(hpt_model_init(&m, &cfg, be, B, T, strtoull(argv[11], NULL, 10)));
    TRY(hpt_optim_init(&opt, &m, &oo, 0, m.nparams));
    TRY(hpt_loader_open(&ld, argv[3], NULL, T, cfg.vocab_size, 1, 0));

    hid_t f;
    TRY(hpt_h5_create(argv[4], &f));
    TRY(hpt_model_h5_write(f, "params_init", &m, m.params));
    int32_t *in = malloc(sizeof(int32_t) * N * steps), *tg = malloc(sizeof(int32_t) * N * steps);
    for (int s = 0; s < steps; s++)
        hpt_loader_batch(ld, (int64_t)s * B, B, in + s * N, tg + s * N);
    hsize_t tdims[3] = {(hsize_t)steps, (hsize_t)B, (hsize_t)T};
    TRY(hpt_h5_write_array(f, "inputs", H5T_NATIVE_INT32, 3, tdims, in));
    TRY(hpt_h5_write_array(f, "targets", H5T_NATIVE_INT32, 3, tdims, tg));

    /* Batch 0: logits, loss and gradients of the mean loss. */
    double loss0 = hpt_model_forward(&m, in, tg, 0.0f, 0) / N;
    hsize_t ldims[3] = {(hsize_t)B, (hsize_t)T, (hsize_t)cfg.vocab_size}, one = 1;
    TRY(hpt_h5_write_array(f, "logits", H5T_NATIVE_FLOAT, 3, ldims, m.logits));
    TRY(hpt_h5_write_array(f, "loss0", H5T_NATIVE_DOUBLE, 1, &one, &loss0));
    hpt_model_zero_grad(&m);
    hpt_model_forward(&m, in, tg, 1.0f / N, 1);
    hpt_model_backward(&m);
    TRY(hpt_model_h5_write(f, "grads", &m, m.grads));

    /* `steps` AdamW steps with warm-up, cosine schedule and clipping. */
    double *sl = malloc(sizeof(double) * steps * 3), *sn = sl + steps, *slr = sl + 2 * steps;
    for (int s = 0; s < steps; s++) {
        hpt_model_zero_grad(&m);
        sl[s] = hpt_model_forward(&m, in + s * N, tg + s * N, 1.0f / N, 1) / N;
        hpt_model_backward(&m);
        sn[s] = sqrt(hpt_model_grad_sumsq(&m, m.grads, 0, m.nparams));
        slr[s] = hpt_lr_at(&opt.o, s);
        hpt_optim_step(&opt, &m, m.grads, (float)slr[s], hpt_clip_coef(&opt.o, sn[s]));
    }
    hsize_t sdims = (hsize_t)steps;
    TRY(hpt_h5_write_array(f, "step_loss", H5T_NATIVE_DOUBLE, 1, &sdims, sl));
    TRY(hpt_h5_write_array(f, "step_norm", H5T_NATIVE_DOUBLE, 1, &sdims, sn));
    TRY(hpt_h5_write_array(f, "step_lr", H5T_NATIVE_DOUBLE, 1, &sdims, slr));
    TRY(hpt_model_h5_write(f, "params_after", &m, m.params));
    H5Fclose(f);
    printf("ref_dump: loss0 %.6f, %d steps, final norm %.4f\n", loss0, steps, sn[steps - 1]);
    free(sl);
    free(in);
    free(tg);
    hpt_loader_close(ld);
    hpt_optim_free(&opt);
    hpt_model_free(&m);
    MPI_Finalize();
    return 0;
}
