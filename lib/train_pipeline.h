/* train_pipeline.h — the pipeline schedule (1F1B, GPipe), stage layers
 * and validation (lib/train_pipeline.c). */
#ifndef HPT_TRAIN_PIPELINE_H
#define HPT_TRAIN_PIPELINE_H

#include <stdio.h>

#include "train_state.h"

/* This rank's layers: r->l0/l1, its model chunks r->nchunks,
 * r->chunk_l0/l1 (interleaved schedule: --pp-virtual of them), and
 * r->layer_stage (every layer's stage): balanced, or --pp-split. Errors:
 * HPT_ERR_USAGE. */
hpt_status stage_layers(run_state *r, const hpt_train_opts *o);
/* Activation slots of this stage (micro-batches in flight; one chunk:
 * r->slots_per_chunk, interleaved: a pool whose last r->head_slots serve
 * the last stage's last chunk; both set here). After stage_layers. */
int pipeline_slots(run_state *r, const hpt_train_opts *o);
/* Pipeline send buffers and requests for nslots slots, and (interleaved)
 * the slot pool's free lists and the slot of each of the step's
 * micro_batches x chunks. Errors: HPT_ERR_INTERNAL (out of memory). */
hpt_status setup_pipeline(run_state *r, int nslots, int micro_batches);
/* Forward+backward of one step's micro-batches (1F1B or GPipe), gradients
 * summed over DP; returns the global batch's mean loss per token. */
double pipe_accumulate(run_state *r, const hpt_train_opts *o);
/* Mean validation loss; NaN with r->val_stopped = 1 when a stop signal
 * cut it short. Collective. */
double pipe_evaluate(run_state *r, const hpt_train_opts *o);
#endif
