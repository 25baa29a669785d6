/* cli.c — see cli.h. */
#include "cli.h"

hpt_status hpt_cli_parse(int argc, char **argv, const struct option *opts, const char *prog,
                         int help_opt, hpt_cli_apply apply, void *ctx, int *action)
{
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h')
            c = help_opt;
        if (c == '?' || c == ':')
            return hpt_error_set(HPT_ERR_USAGE, "%s: unknown option or missing value (see %s "
                                 "--help)", argv[optind - 1], prog);
        hpt_status st = apply(ctx, c, optarg, action);
        if (st)
            return st;
    }
    if (optind < argc)
        return hpt_error_set(HPT_ERR_USAGE, "unexpected argument '%s' (see %s --help)",
                             argv[optind], prog);
    return HPT_OK;
}
