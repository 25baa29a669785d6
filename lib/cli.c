/* cli.c — see cli.h. */
#include "cli.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdlib.h>

hpt_status hpt_cli_parse(int argc, char **argv, const struct option *opts, const char *prog,
                         int help_opt, hpt_cli_apply apply, void *ctx, int *action)
{
    int c, li = -1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        if (c == 'h')
            c = help_opt;
        if (c == '?' || c == ':')
            return hpt_error_set(HPT_ERR_USAGE, "%s: unknown option or missing value (see %s "
                                 "--help)", argv[optind - 1], prog);
        const char *arg = optarg;
        /* an optional value may also be the next word ("--recompute selective") */
        if (c != help_opt && li >= 0 && opts[li].has_arg == optional_argument && !arg &&
            optind < argc && argv[optind][0] != '-')
            arg = argv[optind++];
        li = -1;
        hpt_status st = apply(ctx, c, arg, action);
        if (st)
            return st;
    }
    if (optind < argc)
        return hpt_error_set(HPT_ERR_USAGE, "unexpected argument '%s' (see %s --help)",
                             argv[optind], prog);
    return HPT_OK;
}

const char *hpt_cli_opt_name(const struct option *opts, int val)
{
    for (const struct option *lo = opts; lo->name; lo++)
        if (lo->val == val)
            return lo->name;
    return "";
}

hpt_status hpt_cli_parse_int(const char *opt, const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end)
        return hpt_error_set(HPT_ERR_USAGE, "--%s '%s': not an integer", opt, s);
    if (errno == ERANGE || v < -2147483647L || v > 2147483647L)
        return hpt_error_set(HPT_ERR_USAGE, "--%s '%s': out of range (at most %ld in magnitude)",
                             opt, s, 2147483647L);
    *out = (int)v;
    return HPT_OK;
}

static hpt_status parse_zero(const char *s, int *out)
{
    int v = 0;
    hpt_status st = hpt_cli_parse_int("zero", s, &v);
    if (st)
        return st;
    if (v < 0 || v > 3)
        return hpt_error_set(HPT_ERR_USAGE, "--zero %d: expected 0, 1, 2 or 3 (the ZeRO stage)",
                             v);
    *out = v;
    return HPT_OK;
}

hpt_status hpt_cli_parse_int_min(const char *opt, const char *s, int min, const char *what,
                                 int *out)
{
    hpt_status st = hpt_cli_parse_int(opt, s, out);
    return st || *out >= min ? st
                             : hpt_error_set(HPT_ERR_USAGE, "--%s %d: must be >= %d (%s)", opt, *out,
                                             min, what);
}

hpt_status hpt_cli_zero_option(const char *arg, int *zero, int *zero_given, int *zero1_given)
{
    int v = 1;
    hpt_status st = arg ? parse_zero(arg, &v) : HPT_OK;
    if (st)
        return st;
    if (arg)
        *zero_given = v + 1;
    else
        *zero1_given = 1;
    if (*zero1_given && *zero_given && *zero_given != 2)
        return hpt_error_set(HPT_ERR_USAGE, "--zero1 and --zero %d contradict: --zero1 is "
                             "--zero 1; give one of them", *zero_given - 1);
    *zero = v;
    return HPT_OK;
}

hpt_status hpt_cli_parse_u64(const char *opt, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || s[0] == '-')
        return hpt_error_set(HPT_ERR_USAGE, "--%s '%s': not a non-negative integer", opt, s);
    if (errno == ERANGE)
        return hpt_error_set(HPT_ERR_USAGE, "--%s '%s': out of range (at most 2^64 - 1)", opt, s);
    *out = v;
    return HPT_OK;
}

hpt_status hpt_cli_parse_double(const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) /* errno: ERANGE, over- or underflow */
        return hpt_error_set(HPT_ERR_USAGE, "--%s '%s': not a finite number", opt, s);
    *out = v;
    return HPT_OK;
}

hpt_status hpt_cli_parse_float(const char *opt, const char *s, float *out)
{
    double v = 0;
    hpt_status st = hpt_cli_parse_double(opt, s, &v);
    if (st)
        return st;
    float f = (float)v;
    if (!isfinite(f) || (v != 0 && f == 0))
        return hpt_error_set(HPT_ERR_USAGE, "--%s '%s': outside the range of a float (magnitude "
                             "%.3g to %.3g, or 0)", opt, s, (double)FLT_TRUE_MIN, (double)FLT_MAX);
    *out = f;
    return HPT_OK;
}

const char *hpt_cli_format_g(double v, int is_float, char *buf, size_t n)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)v : back == v)
            break;
    }
    return buf;
}

int hpt_cli_main_rank0(int argc, char **argv, const char *prog, hpt_cli_run run)
{
    int rank, code = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        hpt_status st = run(argc, argv, stdout);
        if (fflush(stdout) != 0 && !st) /* a full disk or closed pipe is an error */
            st = hpt_error_set(HPT_ERR_IO, "standard output: write failed");
        if (st)
            fprintf(stderr, "%s: %s\n", prog, hpt_error_msg());
        code = hpt_status_exit_code(st);
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return code;
}

int hpt_cli_help_or_version(FILE *out, int help, int version, void (*usage)(FILE *),
                            const char *version_fmt, ...)
{
    if (help)
        usage(out);
    else if (version) {
        va_list ap;
        va_start(ap, version_fmt);
        vfprintf(out, version_fmt, ap);
        va_end(ap);
    }
    return help || version;
}
