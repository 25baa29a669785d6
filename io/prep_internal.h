/* prep_internal.h — state shared by io/prep.c (the pipeline) and
 * io/prep_manifest.c (prep.json: the manifest and the up-to-date check).
 * Not a public API: only these two files include it. */
#ifndef HPT_PREP_INTERNAL_H
#define HPT_PREP_INTERNAL_H

#include <json-c/json.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "durable.h"
#include "prep.h"
#include "spm.h"

#define PREP_FORMAT "hpt-prep"
#define PREP_VERSION 1
#define ENCODE_CHUNK_LINES 2048 /* lines per encoding task (fixed: output order) */
#define ERR_LEN 1024
#define STAGE_DIR ".prep-tmp" /* in out_dir: the new outputs until they are committed */

typedef struct {
    const char *p; /* into the text buffer, not NUL-terminated */
    size_t n;      /* bytes                                    */
} text_line;

/* Tokens of one split (train or val). */
typedef struct {
    const char *name; /* "train" or "val" */
    int64_t line0, nlines;
    uint32_t *tok;
    int64_t ntok;
    int64_t nfiles;     /* shard files written                 */
    json_object *files; /* [{"file": ..., "tokens": ...}] */
} split;

typedef struct {
    const hpt_prep_opts *o;
    FILE *log;
    int nthreads;
    char model[PATH_MAX + 32]; /* out_dir/tokenizer.model (its final name) */
    char stage[PATH_MAX + 32]; /* out_dir/STAGE_DIR                        */
    char out_real[PATH_MAX];   /* realpath of out_dir                      */
    int out_fd;                /* out_dir, locked during the run; or -1    */
    int staged;                /* 1 while the staging directory is ours    */
    int has_vocab;             /* the new outputs include tokenizer.vocab  */
    char in_real[PATH_MAX];
    struct stat in_sb;
    char *text;
    size_t text_bytes;
    text_line *lines;
    int64_t nlines;
    hpt_spm *sp;
    int vocab, eos, token_bytes;
    uint64_t model_hash;
    split sp_train, sp_val;
    double t_read, t_train, t_encode, t_write;
} prep;

/* A progress line "prep: ..." on the log (if any), flushed. */
void prep_say(FILE *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* out_dir/name into buf (PATH_MAX + 32 bytes). */
void prep_out_path(char *buf, const hpt_prep_opts *o, const char *name);
/* staging_dir/name into buf (PATH_MAX + 64 bytes). */
void prep_staging_path(char *buf, const prep *r, const char *name);
/* Read a whole (small) file; *buf is malloc'ed (caller frees), *n bytes.
 * Errors: HPT_ERR_DATA naming the file. */
hpt_status prep_file_read(const char *path, char **buf, size_t *n);
/* FNV-1a 64 of a file's bytes (0 when it cannot be read). */
uint64_t prep_file_hash(const char *path);

/* Write prep.json (format, inputs, tokenizer hash, shard list, timings)
 * into the staging directory. Takes ownership of r->sp_*.files. Errors:
 * HPT_ERR_IO. */
hpt_status prep_manifest_write(prep *r);
/* 1 when out_dir's prep.json says its outputs were made from this very
 * input and tokenizer with these options and every shard it lists is
 * there with its size (then the run reuses them and says so); 0 otherwise,
 * with the reason on the log. */
int prep_up_to_date(const prep *r);

#endif
