/* prep.h — data preparation: raw text -> SentencePiece tokenizer -> llm.c
 * token shards (the library behind hpt-data).
 *
 * Outputs in out_dir:
 *   corpus.txt           the non-empty input lines as plain text (only when
 *                        a tokenizer is trained: the trainer reads a file)
 *   tokenizer.model/.vocab  SentencePiece BPE model (trained, or a copy of
 *                        the model given in `tokenizer`)
 *   train_000000.bin ... at most shard_tokens tokens each
 *   val_000000.bin  ...  the last val_fraction of the lines
 *   prep.json            what was done; written last, so it marks a
 *                        complete output and is the key for reuse
 * Each non-empty line is encoded and followed by the model's eos id (2 for
 * trained models). Tokens are uint16 (llm.c magic 20240520) when the
 * vocabulary has <= 65,536 pieces, else uint32 (magic 20240801). The token
 * streams do not depend on the number of threads.
 *
 * Reuse: when prep.json exists, names the same input (path, size and
 * modification time), the same vocabulary request (vocab_size, or the same
 * tokenizer file by content hash), val_fraction and shard_tokens, and
 * every file it lists is present with the recorded size/hash/token count,
 * the run is skipped ("up to date"). `force` redoes it regardless.
 */
#ifndef HPT_PREP_H
#define HPT_PREP_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

typedef struct {
    const char *input;     /* text file, plain or gzip/dictzip (required)        */
    const char *out_dir;   /* output directory, created if missing (required)    */
    int vocab_size;        /* pieces to train (default 8192); ignored with tokenizer */
    const char *tokenizer; /* existing SentencePiece model to reuse, or NULL     */
    double val_fraction;   /* fraction of lines (from the end) for validation, [0, 1); default 0.005 */
    int64_t shard_tokens;  /* max tokens per shard file, 1..2^31-1; default 100,000,000 */
    int threads;           /* OpenMP threads for training and encoding; 0 = OpenMP default */
    int force;             /* 1: redo even if the outputs are up to date         */
} hpt_prep_opts;

/* Fill *o with the defaults above (input and out_dir NULL). */
void hpt_prep_opts_default(hpt_prep_opts *o);

/* Run data preparation. Rank 0 of `comm` does all the work and prints
 * progress lines (timings, token counts) to `log` (may be NULL); the status
 * and error message are then broadcast, so every rank returns the same.
 * Collective over comm.
 * Errors: HPT_ERR_USAGE (bad option value), HPT_ERR_DATA (missing or empty
 * input, bad tokenizer model, tokenizer training failure), HPT_ERR_IO
 * (out_dir or a file in it not writable), HPT_ERR_INTERNAL (out of memory);
 * each message names the path. */
hpt_status hpt_prep_run(const hpt_prep_opts *o, MPI_Comm comm, FILE *log);

#endif
