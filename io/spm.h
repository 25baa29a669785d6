/* spm.h — a small C interface to SentencePiece (Kudo & Richardson, EMNLP
 * 2018): train a BPE tokenizer, load a model, encode and decode.
 *
 * Plain C (the implementation, spm.cc, is C++ and links -lsentencepiece_train
 * -lsentencepiece). No exception crosses this boundary: every fallible
 * function returns an hpt_spm_status and writes a message naming the file
 * and SentencePiece's reason into the caller's `err` buffer (NUL-terminated,
 * truncated to errlen; err may be NULL when errlen is 0).
 */
#ifndef HPT_SPM_H
#define HPT_SPM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    HPT_SPM_OK = 0,
    HPT_SPM_ERR_IO = 1,      /* a file cannot be read or written        */
    HPT_SPM_ERR_INVALID = 2, /* bad model, bad option, training failure */
    HPT_SPM_ERR_NOMEM = 3,   /* out of memory                           */
} hpt_spm_status;

typedef struct hpt_spm hpt_spm;

/* Lines longer than this many bytes are skipped by the trainer (its
 * max_sentence_length); encoding has no limit. */
#define HPT_SPM_MAX_SENTENCE_BYTES 65536

/* Training options for hpt_spm_train_bpe. Llama's special ids are fixed:
 * unk = 0, bos = 1, eos = 2, no pad piece. */
typedef struct {
    const char *input;        /* plain-text file, one sentence per line        */
    const char *model_prefix; /* writes <prefix>.model and <prefix>.vocab      */
    int vocab_size;           /* pieces, including specials and 256 byte pieces */
    int num_threads;          /* trainer threads (>= 1)                        */
    int input_sentence_size;  /* sentences sampled for training (0 = all)      */
    unsigned seed;            /* seed of the sentence sampling (reproducible)  */
    int verbose;              /* 0: SentencePiece logs warnings only; 1: all   */
} hpt_spm_train_opts;

/* Why training failed, when SentencePiece said so in a way we recognise,
 * so the caller can give advice in its own terms (option names). */
typedef enum {
    HPT_SPM_TRAIN_ERR_OTHER = 0,       /* see the message                          */
    HPT_SPM_TRAIN_ERR_VOCAB_SMALL = 1, /* bound: the least vocab_size the text needs
                                          (specials + 256 bytes + its characters)   */
    HPT_SPM_TRAIN_ERR_VOCAB_LARGE = 2, /* bound: the largest vocab_size it supports */
    HPT_SPM_TRAIN_ERR_NO_SENTENCE = 3, /* no line of at most HPT_SPM_MAX_SENTENCE_BYTES
                                          bytes; bound: that limit                 */
} hpt_spm_train_err;

/* A training failure's kind and bound, set by hpt_spm_train_bpe. */
typedef struct {
    hpt_spm_train_err kind;
    int bound; /* see hpt_spm_train_err; 0 for OTHER */
} hpt_spm_train_diag;

/* Set the defaults: vocab_size 8192, num_threads 1, input_sentence_size
 * 300000, seed 1, verbose 0; input and model_prefix NULL (caller must set
 * them). */
void hpt_spm_train_opts_default(hpt_spm_train_opts *o);

/* Train a byte-fallback BPE model on o->input with shuffled sentence
 * sampling, character_coverage 0.9995 and max_sentence_length
 * HPT_SPM_MAX_SENTENCE_BYTES (longer lines are skipped by the trainer only).
 * Sets SentencePiece's process-wide random seed to o->seed and its log level
 * (both global state of the library; do not train from two threads at
 * once). Writes <model_prefix>.model and <model_prefix>.vocab (not fsynced).
 * Errors: HPT_SPM_ERR_IO (input unreadable, output unwritable),
 * HPT_SPM_ERR_INVALID (e.g. a vocab_size the text cannot support), with
 * SentencePiece's message (trailing whitespace trimmed). When diag is not
 * NULL it is always set: kind OTHER on success or an unrecognised error. */
hpt_spm_status hpt_spm_train_bpe(const hpt_spm_train_opts *o, hpt_spm_train_diag *diag, char *err,
                                 size_t errlen);

/* Load a model file. On success *out owns the model (free with
 * hpt_spm_free); on error *out = NULL. Errors: HPT_SPM_ERR_IO (missing or
 * unreadable file, or not a regular file: a FIFO is refused, not read), HPT_SPM_ERR_INVALID ("PATH: not a SentencePiece model",
 * with SentencePiece's reason when it says more than a parse failure). */
hpt_spm_status hpt_spm_load(const char *path, hpt_spm **out, char *err, size_t errlen);

/* Free a model; accepts NULL. */
void hpt_spm_free(hpt_spm *sp);

/* Number of pieces (= vocabulary size; ids are 0..size-1). */
int hpt_spm_vocab_size(const hpt_spm *sp);

/* Id of the end-of-sentence piece, or -1 if the model has none. */
int hpt_spm_eos_id(const hpt_spm *sp);

/* A growable array of token ids, owned by the caller: zero-initialise it,
 * let hpt_spm_encode append, release `ids` with free(). */
typedef struct {
    int32_t *ids;
    size_t n;   /* elements used      */
    size_t cap; /* elements allocated */
} hpt_spm_ids;

/* Encode `len` bytes of UTF-8 text (no NUL needed) and append the ids to
 * *out (no bos/eos added). Thread-safe: several threads may encode with the
 * same model at once. Errors: HPT_SPM_ERR_NOMEM, HPT_SPM_ERR_INVALID. */
hpt_spm_status hpt_spm_encode(const hpt_spm *sp, const char *text, size_t len, hpt_spm_ids *out,
                              char *err, size_t errlen);

/* Append one id to *out. Errors: HPT_SPM_ERR_NOMEM. */
hpt_spm_status hpt_spm_ids_push(hpt_spm_ids *out, int32_t id);

/* Decode n ids to text. *text is malloc'ed, NUL-terminated, owned by the
 * caller. Errors: HPT_SPM_ERR_INVALID (id out of range), HPT_SPM_ERR_NOMEM. */
hpt_spm_status hpt_spm_decode(const hpt_spm *sp, const int32_t *ids, size_t n, char **text,
                              char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
