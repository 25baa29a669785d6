/* prep.c — raw text to SentencePiece tokenizer to llm.c shards; see prep.h.
 *
 * Steps (rank 0 only): lock out_dir; refuse an input (or tokenizer) that
 * is one of the files this run replaces; check the up-to-date manifest;
 * read the text (zlib: plain or gzip); split it into non-empty lines; then,
 * in the staging directory out_dir/.prep-tmp: train or copy the tokenizer;
 * encode the lines in fixed-size chunks in parallel (so the result does not
 * depend on the thread count); write the shards and prep.json. Only when
 * all of that succeeded are the staged files renamed over the old ones
 * (staging_commit), so a failed run leaves the previous outputs untouched.
 */
#include "prep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "shard.h"
#include "spm.h"

#include "prep_internal.h"

/* ------------------------------------------------------------- helpers */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A progress line "prep: ..." on the log (if any), flushed. */
__attribute__((format(printf, 2, 3))) void prep_say(FILE *log, const char *fmt, ...)
{
    if (!log)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("prep: ", log);
    vfprintf(log, fmt, ap);
    fputc('\n', log);
    fflush(log);
    va_end(ap);
}

/* out_dir/name into buf (PATH_MAX + 32 bytes). */
void prep_out_path(char *buf, const hpt_prep_opts *o, const char *name)
{
    snprintf(buf, PATH_MAX + 32, "%s/%s", o->out_dir, name);
}

/* staging_dir/name into buf (PATH_MAX + 64 bytes). */
void prep_staging_path(char *buf, const prep *r, const char *name)
{
    snprintf(buf, PATH_MAX + 64, "%s/" STAGE_DIR "/%s", r->o->out_dir, name);
}

/* Read a whole (small) file. *buf is malloc'ed. Errors: HPT_ERR_DATA. */
hpt_status prep_file_read(const char *path, char **buf, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16;
    *n = 0;
    *buf = malloc(cap);
    while (*buf) {
        *n += fread(*buf + *n, 1, cap - *n, f);
        if (*n < cap)
            break;
        char *b = realloc(*buf, cap *= 2);
        if (!b)
            free(*buf);
        *buf = b;
    }
    int bad = ferror(f);
    fclose(f);
    if (!*buf)
        return hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory reading", path);
    if (bad) {
        free(*buf);
        return hpt_error_set(HPT_ERR_DATA, "%s: read error", path);
    }
    return HPT_OK;
}

/* 64-bit FNV-1a of a file's bytes (0 if unreadable). */
uint64_t prep_file_hash(const char *path)
{
    char *buf;
    size_t n;
    if (prep_file_read(path, &buf, &n) != HPT_OK)
        return 0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)buf[i]) * 0x100000001b3ull;
    free(buf);
    return h;
}

/* ---------------------------------------------------------- validation */

static hpt_status opts_check(const hpt_prep_opts *o)
{
    if (!o->input || !*o->input)
        return hpt_error_set(HPT_ERR_USAGE, "input: a text file is required");
    if (!o->out_dir || !*o->out_dir)
        return hpt_error_set(HPT_ERR_USAGE, "out_dir: an output directory is required");
    if (strlen(o->out_dir) > PATH_MAX - 64)
        return hpt_error_set(HPT_ERR_USAGE, "%s: output directory path too long", o->out_dir);
    if (!o->tokenizer && o->vocab_size < 260)
        return hpt_error_set(HPT_ERR_USAGE,
                             "vocab_size %d: must be >= 260 (256 byte pieces + unk, bos, eos + text pieces)",
                             o->vocab_size);
    if (!(o->val_fraction >= 0.0 && o->val_fraction < 1.0))
        return hpt_error_set(HPT_ERR_USAGE, "val_fraction %g: must be in [0, 1)", o->val_fraction);
    if (o->shard_tokens < 1 || o->shard_tokens > INT32_MAX)
        return hpt_error_set(HPT_ERR_USAGE, "shard_tokens %lld: must be in 1..%d (int32 header count)",
                             (long long)o->shard_tokens, INT32_MAX);
    if (o->threads < 0)
        return hpt_error_set(HPT_ERR_USAGE, "threads %d: must be >= 0 (0 = OpenMP default)", o->threads);
    return HPT_OK;
}

/* The input exists and is not a directory; record its identity. */
static hpt_status input_stat(prep *r)
{
    const char *in = r->o->input;
    if (stat(in, &r->in_sb) != 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot open input text: %s", in, strerror(errno));
    if (S_ISDIR(r->in_sb.st_mode))
        return hpt_error_set(HPT_ERR_DATA, "%s: input is a directory, expected a text file", in);
    if (!realpath(in, r->in_real))
        snprintf(r->in_real, sizeof r->in_real, "%s", in);
    return HPT_OK;
}

/* mkdir -p out_dir, then prove it is writable by creating a file. */
static hpt_status out_dir_prepare(const hpt_prep_opts *o)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", o->out_dir);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return hpt_error_set(HPT_ERR_IO, "%s: cannot create output directory: %s", p, strerror(errno));
        *s = c;
        if (c == '\0')
            break;
    }
    char probe[PATH_MAX + 32];
    prep_out_path(probe, o, ".prep-write-test");
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return hpt_error_set(HPT_ERR_IO, "%s: output directory not writable: %s", o->out_dir,
                             strerror(errno));
    close(fd);
    unlink(probe);
    return HPT_OK;
}

/* Parse a shard name "(train|val)_NNNNNN.bin": 1 and *val (1 for val),
 * *index; else 0. */
static int shard_name_parse(const char *name, int *val, long *index)
{
    int k = 0, end;
    if (strncmp(name, "train_", 6) == 0)
        k = 6;
    else if (strncmp(name, "val_", 4) == 0)
        k = 4;
    else
        return 0;
    for (end = k; name[end] >= '0' && name[end] <= '9'; end++)
        ;
    if (end - k != 6 || strcmp(name + end, ".bin") != 0)
        return 0;
    *val = k == 4;
    *index = strtol(name + k, NULL, 10);
    return 1;
}

/* Is `name` a file hpt-data writes in out_dir: prep.json, corpus.txt,
 * tokenizer.model, tokenizer.vocab or a shard, each possibly with ".tmp"? */
static int is_prep_output(const char *name)
{
    static const char *const fixed[] = {"prep.json", "corpus.txt", "tokenizer.model", "tokenizer.vocab"};
    char base[64];
    size_t n = strlen(name);
    if (n >= sizeof base)
        return 0;
    memcpy(base, name, n + 1);
    if (n > 4 && strcmp(base + n - 4, ".tmp") == 0)
        base[n - 4] = '\0';
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        if (strcmp(base, fixed[i]) == 0)
            return 1;
    int val;
    long k;
    return shard_name_parse(base, &val, &k);
}

/* Is out_dir/name one of the outputs of this run (else, if one of ours, it
 * is left over from an earlier run)? Valid once the shards are written. */
static int output_is_new(const prep *r, const char *name)
{
    int val;
    long k;
    if (strcmp(name, "prep.json") == 0 || strcmp(name, "tokenizer.model") == 0)
        return 1;
    if (strcmp(name, "corpus.txt") == 0)
        return !r->o->tokenizer;
    if (strcmp(name, "tokenizer.vocab") == 0)
        return r->has_vocab;
    if (shard_name_parse(name, &val, &k))
        return k < (val ? r->sp_val.nfiles : r->sp_train.nfiles);
    return 0;
}

/* Open out_dir and lock it (flock) for the run, so that two runs never
 * share the staging directory; file systems without flock run unlocked.
 * Records its real path. Errors: HPT_ERR_IO. */
static hpt_status out_dir_lock(prep *r)
{
    const char *dir = r->o->out_dir;
    r->out_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r->out_fd < 0)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot open output directory: %s", dir, strerror(errno));
    if (flock(r->out_fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        return hpt_error_set(HPT_ERR_IO, "%s: another hpt-data run is writing this output directory",
                             dir);
    if (!realpath(dir, r->out_real))
        return hpt_error_set(HPT_ERR_IO, "%s: cannot resolve output directory: %s", dir, strerror(errno));
    return HPT_OK;
}

/* Refuse `path` (what: "input" or "tokenizer") when this run would replace
 * or remove it: an output file of out_dir (except `allow`, which is read
 * before it is replaced), or anything in the staging directory. A missing
 * path passes (it is reported when opened). Errors: HPT_ERR_USAGE. */
static hpt_status path_guard(const prep *r, const char *path, const char *what, const char *allow)
{
    char real[PATH_MAX], stage_real[PATH_MAX + 64];
    if (!realpath(path, real))
        return HPT_OK;
    char *slash = strrchr(real, '/');
    const char *base = slash + 1;
    *slash = '\0';
    snprintf(stage_real, sizeof stage_real, "%s/%s", r->out_real, STAGE_DIR);
    if (strcmp(real, stage_real) == 0)
        return hpt_error_set(HPT_ERR_USAGE,
                             "%s: refusing to use this %s: it is in %s, hpt-data's temporary directory, "
                             "which every run into %s removes; copy it elsewhere first",
                             path, what, r->stage, r->o->out_dir);
    if (strcmp(real, r->out_real) == 0 && is_prep_output(base) && !(allow && strcmp(base, allow) == 0))
        return hpt_error_set(HPT_ERR_USAGE,
                             "%s: refusing to use this %s: it is %s, one of the outputs that this run "
                             "replaces or removes in %s; copy it elsewhere first or choose another --out",
                             path, what, base, r->o->out_dir);
    return HPT_OK;
}

/* Remove the staging directory and the files in it (a symlink in its
 * place is removed, never followed). */
static void staging_remove(const prep *r)
{
    struct stat sb;
    if (lstat(r->stage, &sb) != 0)
        return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(r->stage);
        return;
    }
    DIR *d = opendir(r->stage);
    struct dirent *e;
    char p[PATH_MAX + 64];
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        prep_staging_path(p, r, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(r->stage);
}

/* A fresh, empty staging directory (a crashed run's is removed first).
 * Errors: HPT_ERR_IO. */
static hpt_status staging_create(prep *r)
{
    staging_remove(r);
    if (mkdir(r->stage, 0755) != 0)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot create staging directory: %s", r->stage,
                             strerror(errno));
    r->staged = 1;
    prep_say(r->log, "building the new outputs in %s", r->stage);
    return HPT_OK;
}

/* ----------------------------------------------------------- text input */

/* Read the whole input through zlib (plain text passes through). */
static hpt_status text_read(prep *r)
{
    const char *in = r->o->input;
    gzFile f = gzopen(in, "rb");
    if (!f)
        return hpt_error_set(HPT_ERR_DATA, "%s: cannot open input text: %s", in, strerror(errno));
    gzbuffer(f, 1 << 18);
    size_t cap = (size_t)r->in_sb.st_size + (1 << 20), n = 0;
    char *buf = NULL;
    for (;;) {
        if (cap - n < (1 << 20))
            cap *= 2;
        char *b = realloc(buf, cap + 1);
        if (!b)
            break;
        buf = b;
        unsigned want = cap - n > (1u << 30) ? 1u << 30 : (unsigned)(cap - n);
        int got = gzread(f, buf + n, want);
        if (got <= 0) {
            /* Z_BUF_ERROR at the end: the gzip stream stopped mid-way */
            int zerr = Z_OK;
            const char *m = gzerror(f, &zerr);
            if (got < 0 || zerr != Z_OK) {
                hpt_status st = hpt_error_set(HPT_ERR_DATA, "%s: cannot read input text: %s", in,
                                              zerr == Z_BUF_ERROR ? "truncated gzip stream" : m);
                gzclose(f);
                free(buf);
                return st;
            }
            gzclose(f);
            buf[n] = '\0';
            r->text = buf;
            r->text_bytes = n;
            return HPT_OK;
        }
        n += (size_t)got;
    }
    gzclose(f);
    free(buf);
    return hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory reading input text", in);
}

/* Only spaces, tabs, CR, VT or FF (or nothing)? */
static int is_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\v' && p[i] != '\f')
            return 0;
    return 1;
}

/* Index the non-blank lines (trailing '\r' dropped). */
static hpt_status text_split_lines(prep *r)
{
    size_t cap = 1 << 16;
    r->lines = malloc(cap * sizeof *r->lines);
    const char *p = r->text, *end = r->text + r->text_bytes;
    while (r->lines && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (!is_blank(p, n)) {
            if ((size_t)r->nlines == cap) {
                text_line *l = realloc(r->lines, (cap *= 2) * sizeof *l);
                if (!l)
                    free(r->lines);
                r->lines = l;
                if (!l)
                    break;
            }
            r->lines[r->nlines++] = (text_line){p, n};
        }
        p = nl ? nl + 1 : end;
    }
    if (!r->lines)
        return hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory indexing lines", r->o->input);
    if (r->nlines == 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: no non-empty line of text", r->o->input);
    return HPT_OK;
}

/* Write the indexed lines to `path` (the staged corpus.txt) for the
 * trainer, fsynced. Errors: HPT_ERR_IO. */
static hpt_status corpus_write(const prep *r, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    for (int64_t i = 0; i < r->nlines; i++) {
        fwrite(r->lines[i].p, 1, r->lines[i].n, f);
        fputc('\n', f);
    }
    int bad = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
    if (fclose(f) != 0 || bad)
        return hpt_error_set(HPT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return HPT_OK;
}

/* Lines [0, nlines - nval) train, the rest val. */
static hpt_status lines_split(prep *r)
{
    double f = r->o->val_fraction;
    int64_t nval = (int64_t)llround((double)r->nlines * f);
    if (f > 0 && nval == 0)
        nval = 1;
    if (nval >= r->nlines)
        return hpt_error_set(HPT_ERR_DATA,
                             "%s: %lld non-empty lines; val_fraction %.9g leaves none for training "
                             "(use a smaller --val-fraction or more text)",
                             r->o->input, (long long)r->nlines, f);
    if (nval > r->nlines - nval) /* legal, but most likely a slip (0.9 for 0.09) */
        prep_say(r->log, "warning: --val-fraction %.9g leaves %lld of the %lld lines (%.2g %%) "
                 "for training and %lld for validation; usual values are 0.001 to 0.05",
                 f, (long long)(r->nlines - nval), (long long)r->nlines,
                 100.0 * (double)(r->nlines - nval) / (double)r->nlines, (long long)nval);
    r->sp_train = (split){.name = "train", .line0 = 0, .nlines = r->nlines - nval};
    r->sp_val = (split){.name = "val", .line0 = r->nlines - nval, .nlines = nval};
    return HPT_OK;
}

/* ------------------------------------------------------------ tokenizer */

/* Map a wrapper status to ours (I/O while writing into out_dir is HPT_ERR_IO). */
static hpt_status spm_status(hpt_spm_status s, hpt_status io_as, const char *msg)
{
    hpt_status st = s == HPT_SPM_ERR_NOMEM ? HPT_ERR_INTERNAL
                    : s == HPT_SPM_ERR_IO  ? io_as
                                           : HPT_ERR_DATA;
    return hpt_error_set(st, "%s", msg);
}

/* fsync a file written by someone else (SentencePiece). Errors: HPT_ERR_IO. */
static hpt_status file_fsync(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int ok = fd >= 0 && fsync(fd) == 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    return ok ? HPT_OK : hpt_error_set(HPT_ERR_IO, "%s: cannot sync: %s", path, strerror(e));
}

/* The error of a failed training, in hpt-data's terms when SentencePiece's
 * reason is a known one (the raw message is kept otherwise). */
static hpt_status train_error(const prep *r, hpt_spm_status s, const hpt_spm_train_diag *d,
                              const char *raw)
{
    const char *in = r->o->input;
    int v = r->o->vocab_size, b = d->bound;
    switch (d->kind) {
    case HPT_SPM_TRAIN_ERR_VOCAB_SMALL:
        return hpt_error_set(HPT_ERR_DATA,
                             "%s: vocabulary %d is too small for this text: it needs at least %d pieces "
                             "(unk, bos, eos, 256 byte pieces and one per common character); "
                             "use --vocab-size >= %d",
                             in, v, b, b);
    case HPT_SPM_TRAIN_ERR_VOCAB_LARGE:
        return hpt_error_set(HPT_ERR_DATA,
                             "%s: vocabulary %d is too large for this text: SentencePiece can learn at "
                             "most %d pieces from it; use --vocab-size <= %d or more text",
                             in, v, b, b);
    case HPT_SPM_TRAIN_ERR_NO_SENTENCE:
        return hpt_error_set(HPT_ERR_DATA,
                             "%s: no usable line to train the tokenizer: every line is longer than %d "
                             "bytes (SentencePiece's max_sentence_length); split the text into shorter "
                             "lines",
                             in, b);
    default:
        return spm_status(s, HPT_ERR_IO, raw);
    }
}

/* Train a BPE model on the staged corpus.txt into the staged
 * tokenizer.{model,vocab}, fsynced. */
static hpt_status tokenizer_train(prep *r)
{
    char corpus[PATH_MAX + 64], prefix[PATH_MAX + 64], err[ERR_LEN];
    prep_staging_path(corpus, r, "corpus.txt");
    prep_staging_path(prefix, r, "tokenizer");
    hpt_status st = corpus_write(r, corpus);
    if (st != HPT_OK)
        return st;
    prep_say(r->log, "wrote %s; training SentencePiece BPE, vocab %d, %d threads", corpus,
        r->o->vocab_size, r->nthreads);
    hpt_spm_train_opts t;
    hpt_spm_train_diag diag;
    hpt_spm_train_opts_default(&t);
    t.input = corpus;
    t.model_prefix = prefix;
    t.vocab_size = r->o->vocab_size;
    t.num_threads = r->nthreads;
    double t0 = now_s();
    hpt_spm_status s = hpt_spm_train_bpe(&t, &diag, err, sizeof err);
    r->t_train = now_s() - t0;
    if (s != HPT_SPM_OK)
        return train_error(r, s, &diag, err);
    prep_say(r->log, "trained the tokenizer in %.1f s", r->t_train);
    r->has_vocab = 1;
    prep_staging_path(prefix, r, "tokenizer.model");
    st = file_fsync(prefix);
    prep_staging_path(prefix, r, "tokenizer.vocab");
    return st == HPT_OK ? file_fsync(prefix) : st;
}

/* Copy src to dst atomically. */
static hpt_status file_copy(const char *src, const char *dst)
{
    char *buf;
    size_t n;
    hpt_status st = prep_file_read(src, &buf, &n);
    if (st != HPT_OK)
        return st;
    st = hpt_file_write_durable(dst, buf, n);
    free(buf);
    return st;
}

/* Copy the given model (and its .vocab, if beside it) into the staging
 * directory. */
static hpt_status tokenizer_copy(prep *r)
{
    const char *src = r->o->tokenizer;
    char dst[PATH_MAX + 64], vsrc[PATH_MAX + 32];
    struct stat sb;
    prep_staging_path(dst, r, "tokenizer.model");
    hpt_status st = file_copy(src, dst);
    if (st != HPT_OK)
        return st;
    prep_say(r->log, "reusing tokenizer %s (copied to %s)", src, dst);
    size_t n = strlen(src);
    if (n > 6 && n < PATH_MAX && strcmp(src + n - 6, ".model") == 0) {
        snprintf(vsrc, sizeof vsrc, "%.*s.vocab", (int)(n - 6), src);
        if (stat(vsrc, &sb) == 0) {
            prep_staging_path(dst, r, "tokenizer.vocab");
            st = file_copy(vsrc, dst);
            r->has_vocab = st == HPT_OK;
        }
    }
    return st;
}

/* Load the model at `path`: vocabulary, eos id, token width, hash. Error
 * messages start with `what` ("--tokenizer " for the given model, or ""). */
static hpt_status tokenizer_load(prep *r, const char *path, const char *what)
{
    char err[ERR_LEN];
    struct stat sb;
    if (stat(path, &sb) != 0)
        return hpt_error_set(HPT_ERR_DATA, "%s%s: cannot open tokenizer model: %s", what, path,
                             strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return hpt_error_set(HPT_ERR_DATA, "%s%s: is a directory, expected a SentencePiece .model file",
                             what, path);
    hpt_spm_status s = hpt_spm_load(path, &r->sp, err, sizeof err);
    if (s != HPT_SPM_OK)
        return hpt_error_set(spm_status(s, HPT_ERR_DATA, err), "%s%s", what, err);
    r->vocab = hpt_spm_vocab_size(r->sp);
    r->eos = hpt_spm_eos_id(r->sp);
    if (r->eos < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s%s: model has no eos piece (needed after each line)", what,
                             path);
    r->token_bytes = r->vocab <= 65536 ? 2 : 4;
    r->model_hash = prep_file_hash(path);
    prep_say(r->log, "tokenizer %s: vocab %d, eos id %d, uint%d shards", path, r->vocab, r->eos,
        8 * r->token_bytes);
    return HPT_OK;
}

/* ------------------------------------------------------------- encoding */

typedef struct {
    hpt_spm_ids ids;
    hpt_spm_status st;
    char err[256];
} chunk;

/* Encode lines [a, b) into c, each followed by eos. */
static void chunk_encode(const prep *r, int64_t a, int64_t b, chunk *c)
{
    for (int64_t i = a; i < b && c->st == HPT_SPM_OK; i++) {
        c->st = hpt_spm_encode(r->sp, r->lines[i].p, r->lines[i].n, &c->ids, c->err, sizeof c->err);
        if (c->st == HPT_SPM_OK)
            c->st = hpt_spm_ids_push(&c->ids, r->eos);
    }
}

/* Concatenate chunk results in order into s->tok (uint32) and free them. */
static hpt_status chunks_join(chunk *c, int64_t nc, split *s)
{
    hpt_status st = HPT_OK;
    s->ntok = 0;
    for (int64_t k = 0; k < nc; k++) {
        if (c[k].st != HPT_SPM_OK && st == HPT_OK)
            st = spm_status(c[k].st, HPT_ERR_DATA, c[k].err);
        s->ntok += (int64_t)c[k].ids.n;
    }
    s->tok = st == HPT_OK ? malloc((size_t)(s->ntok ? s->ntok : 1) * sizeof *s->tok) : NULL;
    if (st == HPT_OK && !s->tok)
        st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory joining %lld tokens", (long long)s->ntok);
    for (int64_t k = 0, at = 0; k < nc; k++) {
        for (size_t i = 0; s->tok && i < c[k].ids.n; i++)
            s->tok[at++] = (uint32_t)c[k].ids.ids[i];
        free(c[k].ids.ids);
    }
    return st;
}

/* Encode the lines of a split with nthreads threads, chunk by chunk. */
static hpt_status split_encode(const prep *r, split *s)
{
    int64_t nc = (s->nlines + ENCODE_CHUNK_LINES - 1) / ENCODE_CHUNK_LINES;
    chunk *c = calloc((size_t)(nc ? nc : 1), sizeof *c);
    if (!c)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory encoding %s", s->name);
#pragma omp parallel for schedule(dynamic, 1) num_threads(r->nthreads)
    for (int64_t k = 0; k < nc; k++) {
        int64_t a = s->line0 + k * ENCODE_CHUNK_LINES;
        int64_t b = a + ENCODE_CHUNK_LINES < s->line0 + s->nlines ? a + ENCODE_CHUNK_LINES
                                                                  : s->line0 + s->nlines;
        chunk_encode(r, a, b, &c[k]);
    }
    hpt_status st = chunks_join(c, nc, s);
    free(c);
    return st;
}

static hpt_status encode_all(prep *r)
{
    double t0 = now_s();
    hpt_status st = split_encode(r, &r->sp_train);
    if (st == HPT_OK)
        st = split_encode(r, &r->sp_val);
    r->t_encode = now_s() - t0;
    if (st != HPT_OK)
        return st;
    int64_t n = r->sp_train.ntok + r->sp_val.ntok;
    prep_say(r->log, "encoded %lld lines -> %lld tokens (train %lld, val %lld) in %.1f s, %d threads, %.2f M tokens/s",
        (long long)r->nlines, (long long)n, (long long)r->sp_train.ntok, (long long)r->sp_val.ntok,
        r->t_encode, r->nthreads, 1e-6 * (double)n / (r->t_encode > 0 ? r->t_encode : 1e-9));
    return HPT_OK;
}

/* ---------------------------------------------------------------- shards */

/* The file name of shard k of a split. */
static void shard_name(char name[64], const split *s, int64_t k)
{
    snprintf(name, 64, "%s_%06lld.bin", s->name, (long long)k);
}

/* Write a split as staged <name>_NNNNNN.bin files of at most shard_tokens
 * each. */
static hpt_status split_write(const prep *r, split *s)
{
    char name[64], path[PATH_MAX + 64];
    s->files = json_object_new_array();
    for (int64_t at = 0; at < s->ntok; at += r->o->shard_tokens) {
        int64_t n = s->ntok - at < r->o->shard_tokens ? s->ntok - at : r->o->shard_tokens;
        shard_name(name, s, s->nfiles);
        prep_staging_path(path, r, name);
        hpt_status st = hpt_shard_write(path, s->tok + at, n, r->token_bytes);
        if (st != HPT_OK)
            return st;
        s->nfiles++;
        json_object *f = json_object_new_object();
        json_object_object_add(f, "file", json_object_new_string(name));
        json_object_object_add(f, "tokens", json_object_new_int64(n));
        json_object_array_add(s->files, f);
        prep_say(r->log, "wrote %s: %lld tokens, uint%d", path, (long long)n, 8 * r->token_bytes);
    }
    return HPT_OK;
}

/* ---------------------------------------------------------------- commit */

/* Move one staged file into out_dir. Errors: HPT_ERR_IO. */
static hpt_status staging_move(const prep *r, const char *name)
{
    char from[PATH_MAX + 64], to[PATH_MAX + 32];
    prep_staging_path(from, r, name);
    prep_out_path(to, r->o, name);
    if (rename(from, to) == 0)
        return HPT_OK;
    return hpt_error_set(HPT_ERR_IO, "%s: cannot move into %s: %s (%s has no prep.json now: rerun)", from,
                         r->o->out_dir, strerror(errno), r->o->out_dir);
}

/* Move a split's staged shards into out_dir. */
static hpt_status staging_move_split(const prep *r, const split *s)
{
    char name[64];
    hpt_status st = HPT_OK;
    for (int64_t k = 0; k < s->nfiles && st == HPT_OK; k++) {
        shard_name(name, s, k);
        st = staging_move(r, name);
    }
    return st;
}

/* Remove our files in out_dir that are not outputs of this run (the
 * shards of a larger earlier run, a stale corpus.txt or .vocab, .tmp files). */
static void out_dir_remove_stale(const prep *r)
{
    DIR *d = opendir(r->o->out_dir);
    struct dirent *e;
    char p[PATH_MAX + 32];
    while (d && (e = readdir(d)) != NULL) {
        if (!is_prep_output(e->d_name) || output_is_new(r, e->d_name))
            continue;
        prep_out_path(p, r->o, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
}

/* Replace the previous outputs by the staged ones. The old prep.json goes
 * first (a crash midway leaves no manifest, so the next run redoes the
 * work), then the data files are renamed in, the stale ones removed and
 * the new prep.json renamed in last; out_dir is fsynced after each phase.
 * Errors: HPT_ERR_IO. */
static hpt_status staging_commit(prep *r)
{
    char path[PATH_MAX + 32];
    prep_out_path(path, r->o, "prep.json");
    if (unlink(path) != 0 && errno != ENOENT)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot replace: %s", path, strerror(errno));
    fsync(r->out_fd);
    hpt_status st = r->o->tokenizer ? HPT_OK : staging_move(r, "corpus.txt");
    if (st == HPT_OK)
        st = staging_move(r, "tokenizer.model");
    if (st == HPT_OK && r->has_vocab)
        st = staging_move(r, "tokenizer.vocab");
    if (st == HPT_OK)
        st = staging_move_split(r, &r->sp_train);
    if (st == HPT_OK)
        st = staging_move_split(r, &r->sp_val);
    if (st != HPT_OK)
        return st;
    out_dir_remove_stale(r);
    fsync(r->out_fd);
    st = staging_move(r, "prep.json");
    if (st == HPT_OK && rmdir(r->stage) == 0)
        r->staged = 0;
    fsync(r->out_fd);
    return st;
}

/* ------------------------------------------------------------------ run */

static void prep_free(prep *r)
{
    if (r->staged)
        staging_remove(r);
    if (r->out_fd >= 0)
        close(r->out_fd); /* releases the lock */
    hpt_spm_free(r->sp);
    free(r->text);
    free(r->lines);
    free(r->sp_train.tok);
    free(r->sp_val.tok);
    json_object_put(r->sp_train.files);
    json_object_put(r->sp_val.files);
}

/* Read and index the input text. */
/* Bytes of text[0, n) that are NUL or not part of valid UTF-8 (RFC 3629:
 * no overlong forms, surrogates or code points past U+10FFFF). */
static size_t not_text_bytes(const unsigned char *t, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = t[i];
        int len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        int ok = len > 0 && i + (size_t)len <= n && c != 0;
        for (int k = 1; ok && k < len; k++)
            ok = (t[i + k] & 0xC0) == 0x80;
        if (ok && len == 3)
            ok = !(c == 0xE0 && t[i + 1] < 0xA0) && !(c == 0xED && t[i + 1] >= 0xA0);
        if (ok && len == 4)
            ok = !(c == 0xF0 && t[i + 1] < 0x90) && !(c == 0xF4 && t[i + 1] >= 0x90);
        if (ok)
            i += (size_t)len;
        else
            bad++, i++;
    }
    return bad;
}

static hpt_status stage_read(prep *r)
{
    double t0 = now_s();
    hpt_status st = text_read(r);
    if (st == HPT_OK) {
        size_t bad = not_text_bytes((const unsigned char *)r->text, r->text_bytes);
        if (bad > r->text_bytes / 1000) /* more than 0.1 %: binary, or another encoding */
            prep_say(r->log, "warning: %s does not look like UTF-8 text: %zu of its %zu bytes "
                     "are NUL or invalid UTF-8 (%.1f %%); the tokenizer will learn pieces of "
                     "them (convert it to UTF-8 first, e.g. iconv)", r->o->input, bad,
                     r->text_bytes, 100.0 * (double)bad / (double)r->text_bytes);
    }
    if (st == HPT_OK)
        st = text_split_lines(r);
    if (st == HPT_OK)
        st = lines_split(r);
    r->t_read = now_s() - t0;
    if (st == HPT_OK)
        prep_say(r->log, "read %s: %.1f MB, %lld non-empty lines (train %lld, val %lld) in %.1f s",
            r->o->input, 1e-6 * (double)r->text_bytes, (long long)r->nlines,
            (long long)r->sp_train.nlines, (long long)r->sp_val.nlines, r->t_read);
    return st;
}

/* Train (into the staging directory) and load a tokenizer, or load the
 * given one and copy it there. */
static hpt_status stage_tokenizer(prep *r)
{
    char model[PATH_MAX + 64];
    if (r->o->tokenizer) {
        hpt_status st = tokenizer_load(r, r->o->tokenizer, "--tokenizer ");
        return st == HPT_OK ? tokenizer_copy(r) : st;
    }
    hpt_status st = tokenizer_train(r);
    prep_staging_path(model, r, "tokenizer.model");
    return st == HPT_OK ? tokenizer_load(r, model, "") : st;
}

static hpt_status stage_shards(prep *r)
{
    double t0 = now_s();
    hpt_status st = split_write(r, &r->sp_train);
    if (st == HPT_OK)
        st = split_write(r, &r->sp_val);
    r->t_write = now_s() - t0;
    return st;
}

/* Check the options, the input and out_dir; lock out_dir; refuse an input
 * or tokenizer that this run would replace. */
static hpt_status prep_setup(prep *r)
{
    hpt_status st = opts_check(r->o);
    if (st != HPT_OK)
        return st;
    r->nthreads = r->o->threads > 0 ? r->o->threads : omp_get_max_threads();
    prep_out_path(r->model, r->o, "tokenizer.model");
    prep_out_path(r->stage, r->o, STAGE_DIR);
    st = input_stat(r);
    if (st == HPT_OK)
        st = out_dir_prepare(r->o);
    if (st == HPT_OK)
        st = out_dir_lock(r);
    if (st == HPT_OK)
        st = path_guard(r, r->o->input, "input", NULL);
    if (st == HPT_OK && r->o->tokenizer)
        st = path_guard(r, r->o->tokenizer, "tokenizer", "tokenizer.model");
    return st;
}

/* The work of rank 0: everything is built in the staging directory and
 * replaces the old outputs only once every step succeeded. */
static hpt_status prep_rank0(prep *r)
{
    double t0 = now_s();
    hpt_status st = prep_setup(r);
    if (st != HPT_OK || (!r->o->force && prep_up_to_date(r)))
        return st;
    st = stage_read(r);
    if (st == HPT_OK)
        st = staging_create(r);
    if (st == HPT_OK)
        st = stage_tokenizer(r);
    if (st == HPT_OK)
        st = encode_all(r);
    if (st == HPT_OK)
        st = stage_shards(r);
    if (st == HPT_OK)
        st = prep_manifest_write(r);
    if (st == HPT_OK)
        st = staging_commit(r);
    if (st == HPT_OK)
        prep_say(r->log, "done in %.1f s: vocab %d, train %lld tokens, val %lld tokens in %s", now_s() - t0,
            r->vocab, (long long)r->sp_train.ntok, (long long)r->sp_val.ntok, r->o->out_dir);
    return st;
}

void hpt_prep_opts_default(hpt_prep_opts *o)
{
    memset(o, 0, sizeof *o);
    o->vocab_size = 8192;
    o->val_fraction = 0.005;
    o->shard_tokens = 100000000;
}

/* Wait until every rank got here, sleeping between polls: MPICH busy-polls
 * in a blocking collective and would steal a core from rank 0's threads. */
static void barrier_sleeping(MPI_Comm comm)
{
    MPI_Request req;
    int done = 0;
    MPI_Ibarrier(comm, &req);
    for (;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done)
            break;
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
}

hpt_status hpt_prep_run(const hpt_prep_opts *o, MPI_Comm comm, FILE *log)
{
    int rank = 0, code = HPT_OK;
    char msg[ERR_LEN] = "";
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) {
        prep r = {.o = o, .log = log, .out_fd = -1};
        struct stat sb;
        int existed = o->out_dir && stat(o->out_dir, &sb) == 0;
        code = prep_rank0(&r);
        prep_free(&r);
        if (code != HPT_OK && !existed && o->out_dir)
            rmdir(o->out_dir); /* a failed first run leaves no empty output directory */
        snprintf(msg, sizeof msg, "%s", code == HPT_OK ? "" : hpt_error_msg());
    }
    barrier_sleeping(comm);
    MPI_Bcast(&code, 1, MPI_INT, 0, comm);
    MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, comm);
    return code == HPT_OK ? HPT_OK : hpt_error_set((hpt_status)code, "%s", msg);
}
