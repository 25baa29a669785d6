/* cli.h — the option loop shared by hpt's programs (getopt_long). */
#ifndef HPT_CLI_H
#define HPT_CLI_H

#include <getopt.h>

#include "error.h"

/* Apply one parsed option `opt` (its long_opts value) with argument `arg`
 * (NULL when it takes none) to the program's options `ctx`; `action`
 * lets --help/--version ask the caller for something else than a run. */
typedef hpt_status (*hpt_cli_apply)(void *ctx, int opt, const char *arg, int *action);

/* Parse argv with getopt_long over `opts`, mapping -h to `help_opt` and
 * calling apply for each option. Errors: HPT_ERR_USAGE for an unknown
 * option, a missing value or a stray argument ("see PROG --help"), or
 * whatever apply returns. */
hpt_status hpt_cli_parse(int argc, char **argv, const struct option *opts, const char *prog,
                         int help_opt, hpt_cli_apply apply, void *ctx, int *action);

#endif
