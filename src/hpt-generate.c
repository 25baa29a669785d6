/* hpt-generate — write text with a trained model: load a checkpoint or an
 * export, encode a prompt with the run's SentencePiece tokenizer, sample with
 * a key/value cache and print the text. One process, CPU backend, fp32
 * (lib/generate.h does the work). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "generate.h"
#include "hpt_config.h"

static void usage(FILE *f, const hpt_generate_opts *d)
{
    fprintf(f,
            "usage: hpt-generate [options] --prompt TEXT [PATH]\n"
            "\n"
            "Continue TEXT with a model hpt-train trained. PATH (or --checkpoint PATH) is a\n"
            "checkpoint: a run directory or its checkpoints directory (the newest complete\n"
            "checkpoint), a step_NNNNNNNN directory or its checkpoint.h5; or an HDF5 export\n"
            "(hpt-train --export, hpt-ckpt export; --export FILE insists on one).\n"
            "\n"
            "  --checkpoint PATH     weights from a checkpoint (or an export: the file says)\n"
            "  --export FILE         weights from an export file\n"
            "  --model PRESET|FILE   model config, for files that carry none (exports of\n"
            "                        older hpt-train versions, other tools' files); must\n"
            "                        match the file's when it has one\n"
            "  --tokenizer DIR|FILE  the corpus directory hpt-data wrote, or its\n"
            "                        tokenizer.model [tokenizer.model next to the weights or\n"
            "                        in the run directory]\n"
            "  --prompt TEXT         text to continue (required; preceded by eos, as each line\n"
            "                        of the training data is)\n"
            "  --max-new-tokens N    tokens to generate at most [%d]; generation stops early\n"
            "                        at eos or when the context is full\n"
            "  --temperature X       softmax temperature, >= 0; 0 = greedy [%g]\n"
            "  --top-k N             sample among the N most probable tokens; 0 = all [%d]\n"
            "  --top-p X             nucleus sampling, in (0, 1]; 1 = all [%g]\n"
            "  --seed N              seed of the draws (same seed, same text) [%llu]\n"
            "  --ignore-eos          do not stop at eos\n"
            "  --ids                 print token ids instead of the text: lines 'prompt:',\n"
            "                        'generated:' and 'logprob:' (each new token's natural\n"
            "                        log-probability under the model, before temperature)\n"
            "  -h, --help            this help\n"
            "  --version             version\n"
            "\n"
            "Exit status: 0 ok; 2 usage (bad option, prompt empty or longer than the\n"
            "context, no tokenizer found); 3 bad data (missing or damaged weights, not an\n"
            "HDF5 file, missing or wrong tokenizer); 5 unreadable file.\n",
            d->max_new_tokens, d->sample.temperature, d->sample.top_k, d->sample.top_p,
            (unsigned long long)d->sample.seed);
}

enum {
    OPT_CHECKPOINT = 256, OPT_EXPORT, OPT_MODEL, OPT_TOKENIZER, OPT_PROMPT, OPT_MAX_NEW,
    OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_SEED, OPT_IGNORE_EOS, OPT_IDS, OPT_HELP,
    OPT_VERSION,
};

static const struct option long_opts[] = {
    {"checkpoint", 1, 0, OPT_CHECKPOINT}, {"export", 1, 0, OPT_EXPORT},
    {"model", 1, 0, OPT_MODEL},           {"tokenizer", 1, 0, OPT_TOKENIZER},
    {"prompt", 1, 0, OPT_PROMPT},         {"max-new-tokens", 1, 0, OPT_MAX_NEW},
    {"temperature", 1, 0, OPT_TEMPERATURE}, {"top-k", 1, 0, OPT_TOP_K},
    {"top-p", 1, 0, OPT_TOP_P},           {"seed", 1, 0, OPT_SEED},
    {"ignore-eos", 0, 0, OPT_IGNORE_EOS}, {"ids", 0, 0, OPT_IDS},
    {"help", 0, 0, OPT_HELP},             {"version", 0, 0, OPT_VERSION},
    {0, 0, 0, 0},
};

static hpt_status parse_int(const char *opt, const char *s, long long lo, long long *v)
{
    char *end;
    errno = 0;
    *v = strtoll(s, &end, 10);
    if (errno || end == s || *end || *v < lo)
        return hpt_error_set(HPT_ERR_USAGE, "--%s %s: must be an integer >= %lld", opt, s, lo);
    return HPT_OK;
}

static hpt_status parse_float(const char *opt, const char *s, float *v)
{
    char *end;
    errno = 0;
    *v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(*v))
        return hpt_error_set(HPT_ERR_USAGE, "--%s %s: not a number", opt, s);
    return HPT_OK;
}

/* Weights given twice (--checkpoint, --export, positional)? */
static hpt_status set_path(hpt_generate_opts *o, const char *path, hpt_gen_source kind)
{
    if (o->path)
        return hpt_error_set(HPT_ERR_USAGE, "weights given twice (%s and %s): give one PATH, "
                             "--checkpoint or --export", o->path, path);
    o->path = path;
    o->kind = kind;
    return HPT_OK;
}

static hpt_status apply(hpt_generate_opts *o, int c, const char *arg, int *action)
{
    long long v;
    hpt_status st = HPT_OK;
    switch (c) {
    case OPT_CHECKPOINT: return set_path(o, arg, HPT_GEN_SOURCE_ANY);
    case OPT_EXPORT: return set_path(o, arg, HPT_GEN_SOURCE_EXPORT);
    case OPT_MODEL: o->model = arg; return HPT_OK;
    case OPT_TOKENIZER: o->tokenizer = arg; return HPT_OK;
    case OPT_PROMPT: o->prompt = arg; return HPT_OK;
    case OPT_MAX_NEW:
        if (!(st = parse_int("max-new-tokens", arg, 0, &v)))
            o->max_new_tokens = v > 1000000000 ? 1000000000 : (int)v;
        return st;
    case OPT_TEMPERATURE: return parse_float("temperature", arg, &o->sample.temperature);
    case OPT_TOP_K:
        if (!(st = parse_int("top-k", arg, 0, &v)))
            o->sample.top_k = v > 1000000000 ? 1000000000 : (int)v;
        return st;
    case OPT_TOP_P: return parse_float("top-p", arg, &o->sample.top_p);
    case OPT_SEED:
        if (!(st = parse_int("seed", arg, 0, &v)))
            o->sample.seed = (uint64_t)v;
        return st;
    case OPT_IGNORE_EOS: o->ignore_eos = 1; return HPT_OK;
    case OPT_IDS: o->print_ids = 1; return HPT_OK;
    case OPT_HELP: *action = 1; return HPT_OK;
    case OPT_VERSION: *action = 2; return HPT_OK;
    default:
        return hpt_error_set(HPT_ERR_USAGE, "%s: unknown option or missing value (see "
                             "hpt-generate --help)", arg ? arg : "option");
    }
}

/* Options and at most one positional PATH. */
static hpt_status parse_args(int argc, char **argv, hpt_generate_opts *o, int *action)
{
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        if (c == '?' || c == ':')
            return hpt_error_set(HPT_ERR_USAGE, "%s: unknown option or missing value (see "
                                 "hpt-generate --help)", argv[optind - 1]);
        hpt_status st = apply(o, c == 'h' ? OPT_HELP : c, optarg, action);
        if (st)
            return st;
    }
    for (int i = optind; i < argc; i++) {
        hpt_status st = set_path(o, argv[i], HPT_GEN_SOURCE_ANY);
        if (st)
            return st;
    }
    if (!*action && !o->path)
        return hpt_error_set(HPT_ERR_USAGE, "no weights: give a checkpoint or export PATH (see "
                             "hpt-generate --help)");
    return HPT_OK;
}

static hpt_status run(int argc, char **argv, FILE *out)
{
    hpt_generate_opts o = {0}, d = {0};
    int action = 0;
    d.max_new_tokens = 64;
    hpt_sample_opts_default(&d.sample);
    o = d;
    hpt_status st = parse_args(argc, argv, &o, &action);
    if (st)
        return st;
    if (action == 1) {
        usage(out, &d);
        return HPT_OK;
    }
    if (action == 2) {
        fprintf(out, "hpt-generate (hpt) %s\n", PACKAGE_VERSION);
        return HPT_OK;
    }
    return hpt_generate(&o, out);
}

int main(int argc, char **argv)
{
    int rank, size, code = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        hpt_status st = size > 1 ? hpt_error_set(HPT_ERR_USAGE, "runs as one process (mpiexec "
                                                 "-n 1 or no mpiexec), not %d", size)
                                 : run(argc, argv, stdout);
        fflush(stdout);
        if (st)
            fprintf(stderr, "hpt-generate: %s\n", hpt_error_msg());
        code = hpt_status_exit_code(st);
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return code;
}
