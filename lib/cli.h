/* cli.h — what hpt's programs share on the command line: the getopt_long
 * loop, strict number parsing and the rank-0-only main of the tools. */
#ifndef HPT_CLI_H
#define HPT_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

/* Apply one parsed option `opt` (its long_opts value) with argument `arg`
 * (NULL when it takes none) to the program's options `ctx`; `action`
 * lets --help/--version ask the caller for something else than a run. */
typedef hpt_status (*hpt_cli_apply)(void *ctx, int opt, const char *arg, int *action);

/* Parse argv with getopt_long over `opts`, mapping -h to `help_opt` and
 * calling apply for each option. An option with an optional_argument takes
 * its value from "--opt=VALUE" or, when the next word does not start with
 * '-', from that word ("--recompute selective"); else arg is NULL. Errors: HPT_ERR_USAGE for an unknown
 * option, a missing value or a stray argument ("see PROG --help"), or
 * whatever apply returns. */
hpt_status hpt_cli_parse(int argc, char **argv, const struct option *opts, const char *prog,
                         int help_opt, hpt_cli_apply apply, void *ctx, int *action);

/* The long name of option value `val` in the NULL-terminated table `opts`
 * ("" when absent), for messages. The string belongs to the table. */
const char *hpt_cli_opt_name(const struct option *opts, int val);

/* Strict number parsing: the whole of `s` must be the number. `opt` is the
 * option's long name (no dashes), used in the message. On error *out is
 * unchanged. Errors: HPT_ERR_USAGE "--OPT 'S': not an integer", or "out of
 * range" for an integer beyond ±2147483647 (int) or 2^64 - 1 (u64), "not a
 * non-negative integer" (u64), "not a finite number"
 * (double: NaN, inf and overflow refused), and for float additionally
 * "outside the range of a float" when the value would become inf or
 * underflow to 0 as a 32-bit float (1e39, 1e-50): the options stored as
 * float must not silently turn into inf or "off". */
hpt_status hpt_cli_parse_int(const char *opt, const char *s, int *out);

#define HPT_CLI_SHARD_WHAT "DP ranks per shard group" /* --zero-shard-group's */

/* hpt_cli_parse_int, and at least `min`: otherwise HPT_ERR_USAGE
 * "--OPT V: must be >= MIN (WHAT)" (*out set to V). */
hpt_status hpt_cli_parse_int_min(const char *opt, const char *s, int min, const char *what,
                                 int *out);

/* --zero ARG, or with arg NULL --zero1 (hpt-train, hpt-plan): sets *zero
 * to the stage (0, 1, 2 or 3) and records which was given (*zero_given =
 * stage + 1, *zero1_given = 1; both start at 0). Errors (HPT_ERR_USAGE,
 * *zero unchanged): "--zero 'abc': not an integer"; any other value
 * "--zero N: expected 0, 1, 2 or 3"; "--zero1 and
 * --zero N contradict" when both are given with N != 1 (--zero1 is
 * --zero 1). */
hpt_status hpt_cli_zero_option(const char *arg, int *zero, int *zero_given, int *zero1_given);
hpt_status hpt_cli_parse_u64(const char *opt, const char *s, uint64_t *out);
hpt_status hpt_cli_parse_double(const char *opt, const char *s, double *out);
hpt_status hpt_cli_parse_float(const char *opt, const char *s, float *out);

/* The shortest %g text of v that reads back (strtod) as v — as a float
 * when is_float — e.g. "0.0006", not "0.00060000002849847078": how option
 * values and configs are written so that parsing them again gives the same
 * value. Into buf[n] (n >= 16 for a float, 32 for a double); returns buf. */
const char *hpt_cli_format_g(double v, int is_float, char *buf, size_t n);

/* The --help / --version part of a program's run(): with `help` set prints
 * usage(out), with `version` set prints the printf-style version line (e.g.
 * "hpt-ckpt (hpt) 0.1; reads checkpoint format version 2\n"), and returns
 * 1 when either was printed (run() then returns HPT_OK), 0 otherwise. */
int hpt_cli_help_or_version(FILE *out, int help, int version, void (*usage)(FILE *),
                            const char *version_fmt, ...) __attribute__((format(printf, 5, 6)));

/* main() of a tool that works on rank 0 only (hpt-ckpt, hpt-metrics):
 * MPI_Init, run(argc, argv, stdout) on world rank 0, stdout flushed (a
 * failed flush after a successful run is HPT_ERR_IO "standard output:
 * write failed"), the error message printed once as "PROG: message" on
 * stderr, the exit code
 * (hpt_status_exit_code) broadcast so that every rank exits with it,
 * MPI_Finalize. Returns that exit code: `return hpt_cli_main_rank0(argc,
 * argv, "hpt-ckpt", run);`. */
typedef hpt_status (*hpt_cli_run)(int argc, char **argv, FILE *out);
int hpt_cli_main_rank0(int argc, char **argv, const char *prog, hpt_cli_run run);

#endif
