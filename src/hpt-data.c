/* hpt-data — prepare training data: text -> SentencePiece BPE tokenizer ->
 * llm.c token shards. Parses options and calls hpt_prep_run (io/prep.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "error.h"
#include "prep.h"

static void usage(FILE *f)
{
    fputs("usage: hpt-data --input PATH --out DIR [options]\n"
          "\n"
          "Train a SentencePiece BPE tokenizer on a text file (plain or gzip/dictzip) and\n"
          "encode every non-empty line, followed by the eos id, into llm.c token shards.\n"
          "Shards are uint16 (magic 20240520) when the vocabulary has <= 65536 pieces, else\n"
          "uint32 (magic 20240801). A rerun whose outputs are up to date is skipped.\n"
          "\n"
          "outputs in DIR:\n"
          "  tokenizer.model, tokenizer.vocab   the SentencePiece model (trained or copied)\n"
          "  corpus.txt          the non-empty input lines, written only when a tokenizer is\n"
          "                      trained (not with --tokenizer)\n"
          "  train_000000.bin ...  val_000000.bin ...   token shards\n"
          "  prep.json           what was done; marks a complete output\n"
          "The new outputs are built in DIR/.prep-tmp and replace the old ones only when\n"
          "every step succeeded: a failed run leaves an existing dataset unchanged. The\n"
          "input may not be one of these outputs (copy it elsewhere first).\n"
          "\n"
          "options:\n"
          "  --input PATH        raw text, plain or gzip-compressed (required)\n"
          "  --out DIR           output directory, created if missing (required)\n"
          "  --vocab-size N      tokenizer vocabulary, pieces (default 8192). At least 260;\n"
          "                      real text needs more: 259 + its distinct characters (339\n"
          "                      for the GCIDE dictionary); a too-small N is reported with\n"
          "                      the minimum for the input\n"
          "  --tokenizer MODEL   reuse this SentencePiece model instead of training one;\n"
          "                      the vocabulary size is then the model's (default: train)\n"
          "  --val-fraction F    fraction of the lines, taken from the end, for validation,\n"
          "                      in [0, 1) (default 0.005)\n"
          "  --shard-tokens N    maximum tokens per shard file, 1..2147483647\n"
          "                      (default 100000000)\n"
          "  --threads N         OpenMP threads for training and encoding\n"
          "                      (default 0 = OpenMP default, e.g. OMP_NUM_THREADS)\n"
          "  --force             redo everything even if the outputs are up to date\n"
          "  -h, --help          print this help and exit\n"
          "\n"
          "exit status: 0 ok, 2 usage error (including an input that is one of the\n"
          "outputs), 3 data error (missing or malformed input, tokenizer failure), 5 I/O\n"
          "error (output not writable, or another hpt-data is writing DIR).\n",
          f);
}

/* Parse an integer option in [lo, hi]. */
static int parse_int64(const char *opt, const char *s, long long lo, long long hi, long long *v)
{
    char *end;
    errno = 0;
    *v = strtoll(s, &end, 10);
    if (errno || end == s || *end || *v < lo || *v > hi) {
        hpt_error_set(HPT_ERR_USAGE, "%s '%s': expected an integer in %lld..%lld", opt, s, lo, hi);
        return -1;
    }
    return 0;
}

static int parse_double(const char *opt, const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    if (errno || end == s || *end) {
        hpt_error_set(HPT_ERR_USAGE, "%s '%s': expected a number", opt, s);
        return -1;
    }
    return 0;
}

enum { OPT_INPUT = 256, OPT_OUT, OPT_VOCAB, OPT_TOKENIZER, OPT_VAL, OPT_SHARD, OPT_THREADS, OPT_FORCE };

static const struct option long_opts[] = {
    {"input", required_argument, NULL, OPT_INPUT},
    {"out", required_argument, NULL, OPT_OUT},
    {"vocab-size", required_argument, NULL, OPT_VOCAB},
    {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
    {"val-fraction", required_argument, NULL, OPT_VAL},
    {"shard-tokens", required_argument, NULL, OPT_SHARD},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"force", no_argument, NULL, OPT_FORCE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Apply one option. 0 ok, -1 usage error (message set), 1 help. */
static int apply_opt(int c, const char *arg, hpt_prep_opts *o)
{
    long long v;
    switch (c) {
    case OPT_INPUT: o->input = arg; return 0;
    case OPT_OUT: o->out_dir = arg; return 0;
    case OPT_TOKENIZER: o->tokenizer = arg; return 0;
    case OPT_FORCE: o->force = 1; return 0;
    case 'h': return 1;
    case OPT_VAL: return parse_double("--val-fraction", arg, &o->val_fraction);
    case OPT_VOCAB:
        if (parse_int64("--vocab-size", arg, 1, INT_MAX, &v))
            return -1;
        o->vocab_size = (int)v;
        return 0;
    case OPT_SHARD:
        if (parse_int64("--shard-tokens", arg, 1, INT32_MAX, &v))
            return -1;
        o->shard_tokens = v;
        return 0;
    case OPT_THREADS:
        if (parse_int64("--threads", arg, 0, 4096, &v))
            return -1;
        o->threads = (int)v;
        return 0;
    default:
        hpt_error_set(HPT_ERR_USAGE, "option code %d not handled", c);
        return -1;
    }
}

/* Parse argv into *o. 0 ok, -1 usage error (message set), 1 help. */
static int parse_args(int argc, char **argv, hpt_prep_opts *o)
{
    int c, rc;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        if (c == '?') {
            hpt_error_set(HPT_ERR_USAGE, "%s: unknown option or missing value (see --help)",
                          argv[optind - 1]);
            return -1;
        }
        if ((rc = apply_opt(c, optarg, o)) != 0)
            return rc;
    }
    if (optind < argc) {
        hpt_error_set(HPT_ERR_USAGE, "unexpected argument '%s' (see --help)", argv[optind]);
        return -1;
    }
    if (!o->input || !o->out_dir) {
        hpt_error_set(HPT_ERR_USAGE, "--input and --out are required (see --help)");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int rank;
    hpt_prep_opts o;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    hpt_prep_opts_default(&o);
    int rc = parse_args(argc, argv, &o);
    hpt_status st = rc < 0 ? HPT_ERR_USAGE : HPT_OK;
    if (rc == 1 && rank == 0)
        usage(stdout);
    if (rc == 0)
        st = hpt_prep_run(&o, MPI_COMM_WORLD, rank == 0 ? stdout : NULL);
    if (st != HPT_OK && rank == 0)
        fprintf(stderr, "hpt-data: %s\n", hpt_error_msg());
    MPI_Finalize();
    return hpt_status_exit_code(st);
}
