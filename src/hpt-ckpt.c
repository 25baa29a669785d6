/* hpt-ckpt — list, verify, describe and export hpt checkpoints (format in
 * io/ckpt.h and docs/CHECKPOINT.md).
 *
 * The work is io/ckpt_inspect.c's (serial HDF5, default driver), so this
 * runs as a plain process; under mpiexec rank 0 does the work and every rank
 * exits with its status. This file parses options; what a model config
 * implies, which io/ does not know, is lib/ckpt_model.c's.
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "ckpt_inspect.h"
#include "ckpt_model.h"
#include "cli.h"
#include "error.h"
#include "hpt_config.h"
#include "safetensors_write.h"

static void usage(FILE *f)
{
    fputs("usage: hpt-ckpt list [--verify] DIR\n"
          "       hpt-ckpt verify PATH|DIR\n"
          "       hpt-ckpt info PATH\n"
          "       hpt-ckpt export [--export-dtype f32|bf16] [--export-shard-size BYTES]\n"
          "                PATH OUT.h5|OUT.safetensors\n"
          "\n"
          "Inspect the checkpoints hpt-train writes (docs/CHECKPOINT.md). DIR is a run's\n"
          "checkpoints directory (RUN/checkpoints; RUN itself is accepted too). PATH is one\n"
          "checkpoint: a step_NNNNNNNN directory or its checkpoint.h5; for info and export a\n"
          "DIR stands for its newest complete checkpoint (the one a resume starts from).\n"
          "\n"
          "commands:\n"
          "  list DIR        one line per checkpoint, newest first: step, layout\n"
          "                  (tp x pp x dp, ',cpN' when written at context parallel CP N > 1;\n"
          "                  ZeRO: no, yes (stage 1), yes-2, yes-3), size in MiB, samples consumed and status:\n"
          "                  complete, incomplete (a step_NNNNNNNN.tmp left by an interrupted\n"
          "                  save), unreadable, or with --verify damaged (first bad dataset);\n"
          "                  marks the one 'latest' names and says when 'latest' is missing\n"
          "                  or names a missing checkpoint\n"
          "    --verify      also read every dataset of every checkpoint (as verify does)\n"
          "  verify PATH|DIR read every dataset fully (checks the CRC32C of every tile, or\n"
          "                  in format 1 files each chunk's Fletcher32), check that every\n"
          "                  /model tensor has\n"
          "                  /optim/exp_avg and /optim/exp_avg_sq of its shape, that the\n"
          "                  tensors are those config_json describes, and the root\n"
          "                  attributes; prints 'ok' or one line per bad dataset. A DIR\n"
          "                  verifies each complete checkpoint in it\n"
          "  info PATH       the root attributes, the model config and a table of the\n"
          "                  tensors (name, shape, dtype, layer)\n"
          "  export PATH OUT.h5\n"
          "                  consolidated weights: every /model/NAME as /NAME in OUT.h5\n"
          "                  (Hugging Face names, contiguous float32 arrays) with the root\n"
          "                  attribute config_json; written to OUT.h5.tmp, synced, renamed\n"
          "  export PATH OUT.safetensors\n"
          "                  the same as Hugging Face safetensors, with config.json in\n"
          "                  OUT's directory (not a run directory), what transformers\n"
          "                  loads; above the shard size, OUT's stem-0000K-of-0000N shards\n"
          "                  and OUT.index.json; each file written as .tmp, synced, renamed\n"
          "    --export-dtype D       f32 or bf16 (round to nearest even) [f32]\n"
          "    --export-shard-size B  bytes per shard [5000000000]\n"
          "\n"
          "options:\n"
          "  -h, --help      print this help and exit\n"
          "  --version       print the hpt version and exit\n"
          "\n"
          "exit status: 0 ok, 2 usage error, 3 damaged, incomplete or not a checkpoint\n"
          "(including an unknown format version), 5 I/O error (unreadable path, OUT not\n"
          "writable).\n",
          f);
}

/* ------------------------------------------------------------------- main */

typedef struct {
    const char *cmd;   /* list, verify, info, export        */
    const char *arg[2];
    int nargs, verify, help, version;
    hpt_ckpt_export_opts exp; /* --export-dtype, --export-shard-size */
    int exp_given;
} cli;

/* --export-dtype D / --export-shard-size B of export (value in v). */
static hpt_status export_option(cli *c, const char *a, const char *v)
{
    if (!v)
        return hpt_error_set(HPT_ERR_USAGE, "%s needs a value (see --help)", a);
    c->exp_given = 1;
    if (!strcmp(a, "--export-dtype")) {
        hpt_st_out_dtype dt;
        hpt_status st = hpt_st_out_dtype_parse(a, v, &dt);
        c->exp.bf16 = dt == HPT_ST_OUT_BF16;
        return st;
    }
    hpt_status st = hpt_cli_parse_u64(a + 2, v, &c->exp.shard_size); /* a + 2: no "--" */
    return st || c->exp.shard_size ? st : hpt_error_set(HPT_ERR_USAGE, "%s 0: must be >= 1 "
                                                        "(bytes per shard)", a);
}

static const struct {
    const char *name;
    int nargs;
} commands[] = {{"list", 1}, {"verify", 1}, {"info", 1}, {"export", 2}};

/* Parse argv into *c. Errors: HPT_ERR_USAGE. */
static hpt_status parse_args(int argc, char **argv, cli *c)
{
    int want = -1, opts = 1;
    memset(c, 0, sizeof *c);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (opts && (!strcmp(a, "-h") || !strcmp(a, "--help")))
            c->help = 1;
        else if (opts && !strcmp(a, "--version"))
            c->version = 1;
        else if (opts && !strcmp(a, "--verify") && c->cmd && !strcmp(c->cmd, "list"))
            c->verify = 1;
        else if (opts && c->cmd && !strcmp(c->cmd, "export") &&
                 (!strcmp(a, "--export-dtype") || !strcmp(a, "--export-shard-size"))) {
            hpt_status st = export_option(c, a, i + 1 < argc ? argv[i + 1] : NULL);
            if (st)
                return st;
            i++;
        } else if (opts && !strcmp(a, "--"))
            opts = 0;
        else if (opts && a[0] == '-' && a[1])
            return hpt_error_set(HPT_ERR_USAGE, "%s: unknown option%s (see --help)", a,
                                 c->cmd ? " for this command" : "");
        else if (!c->cmd) {
            for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
                if (!strcmp(a, commands[k].name))
                    want = commands[k].nargs;
            if (want < 0)
                return hpt_error_set(HPT_ERR_USAGE,
                                     "unknown command '%s' (list, verify, info, export; see --help)", a);
            c->cmd = a;
        } else if (c->nargs < want)
            c->arg[c->nargs++] = a;
        else
            return hpt_error_set(HPT_ERR_USAGE, "unexpected argument '%s' (see --help)", a);
    }
    if (c->help || c->version)
        return HPT_OK;
    if (!c->cmd)
        return hpt_error_set(HPT_ERR_USAGE, "a command is required: list, verify, info or export "
                                            "(see --help)");
    if (c->nargs < want)
        return hpt_error_set(HPT_ERR_USAGE, "%s needs %s (see --help)", c->cmd,
                             want == 2 ? "PATH and OUT.h5" : "a path");
    if (c->exp_given && !hpt_st_out_is_safetensors(c->arg[1]))
        return hpt_error_set(HPT_ERR_USAGE, "--export-dtype and --export-shard-size apply to an "
                             "OUT ending in .safetensors (%s is written as HDF5, float32)",
                             c->arg[1]);
    return HPT_OK;
}

static hpt_status run(int argc, char **argv, FILE *out)
{
    cli c;
    hpt_status st = parse_args(argc, argv, &c);
    if (st)
        return st;
    if (hpt_cli_help_or_version(out, c.help, c.version, usage,
                                "hpt-ckpt (hpt) %s; reads checkpoint format version %d\n",
                                PACKAGE_VERSION, HPT_CKPT_VERSION))
        return HPT_OK;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages, not HDF5's error stack */
    if (!strcmp(c.cmd, "list"))
        return hpt_ckpt_inspect_list(c.arg[0], c.verify, &hpt_ckpt_model_llama, out);
    if (!strcmp(c.cmd, "verify"))
        return hpt_ckpt_inspect_verify(c.arg[0], &hpt_ckpt_model_llama, out);
    if (!strcmp(c.cmd, "info"))
        return hpt_ckpt_inspect_info(c.arg[0], &hpt_ckpt_model_llama, out);
    return hpt_ckpt_inspect_export(c.arg[0], c.arg[1], &c.exp, &hpt_ckpt_model_llama, out);
}

int main(int argc, char **argv) { return hpt_cli_main_rank0(argc, argv, "hpt-ckpt", run); }
