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

#include "cli.h"
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

/* A non-negative int option (hpt_cli_parse_int, then the sign). */
static hpt_status parse_count(const char *opt, const char *s, int *v)
{
    hpt_status st = hpt_cli_parse_int(opt, s, v);
    if (!st && *v < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--%s %s: must be an integer >= 0", opt, s);
    return st;
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
    switch (c) {
    case OPT_CHECKPOINT: return set_path(o, arg, HPT_GEN_SOURCE_ANY);
    case OPT_EXPORT: return set_path(o, arg, HPT_GEN_SOURCE_EXPORT);
    case OPT_MODEL: o->model = arg; return HPT_OK;
    case OPT_TOKENIZER: o->tokenizer = arg; return HPT_OK;
    case OPT_PROMPT: o->prompt = arg; return HPT_OK;
    case OPT_MAX_NEW:
        return parse_count("max-new-tokens", arg, &o->max_new_tokens);
    case OPT_TEMPERATURE: return hpt_cli_parse_float("temperature", arg, &o->sample.temperature);
    case OPT_TOP_K:
        return parse_count("top-k", arg, &o->sample.top_k);
    case OPT_TOP_P: return hpt_cli_parse_float("top-p", arg, &o->sample.top_p);
    case OPT_SEED:
        return hpt_cli_parse_u64("seed", arg, &o->sample.seed);
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
    int action = 0, size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1)
        return hpt_error_set(HPT_ERR_USAGE, "runs as one process (mpiexec -n 1 or no mpiexec), "
                             "not %d", size);
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

int main(int argc, char **argv) { return hpt_cli_main_rank0(argc, argv, "hpt-generate", run); }
