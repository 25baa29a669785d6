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
 * They are built in out_dir/.prep-tmp (removed at the end, and at the start
 * of the next run if a crash left it) and moved into out_dir only when every
 * step succeeded: the old prep.json is removed, the new files are renamed
 * over the old ones, files of the old set that the new one lacks (shards
 * beyond the new count, corpus.txt, tokenizer.vocab) are removed, and the
 * new prep.json is renamed in last, with out_dir fsynced between the
 * phases. So a failed run (bad option value, input or tokenizer, training
 * failure) leaves the previous outputs exactly as they were, and a crash
 * during the final renames leaves no prep.json (the next run redoes it).
 * out_dir is locked (flock, where the file system supports it) for the run.
 * The input may not be one of the files above in out_dir, nor be in
 * .prep-tmp: it is refused rather than replaced. The tokenizer may be
 * out_dir/tokenizer.model (it is read before it is replaced).
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
 * Errors: HPT_ERR_USAGE (bad option value; an input or tokenizer that is an
 * output of out_dir), HPT_ERR_DATA (missing or empty input, bad tokenizer
 * model, tokenizer training failure: the message names the input and, for
 * a vocabulary too small or too large for the text, the bound to use),
 * HPT_ERR_IO (out_dir or a file in it not writable; out_dir locked by
 * another run), HPT_ERR_INTERNAL (out of memory); each message names the
 * path. On any error the previous outputs in out_dir are unchanged (except
 * for a failure during the final renames, see above). */
hpt_status hpt_prep_run(const hpt_prep_opts *o, MPI_Comm comm, FILE *log);

/* The tokenizer vocabulary (pieces) recorded in dir/prep.json by hpt-data,
 * or -1 when dir has no readable prep.json with a positive "vocab_size"
 * (a dataset made by other tools). Reads one small file; no errors set. */
int hpt_prep_vocab_size(const char *dir);

#endif
