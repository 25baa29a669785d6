/* error.c — see error.h. */
#include "error.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char err_buf[1024];

hpt_status hpt_error_set(hpt_status code, const char *fmt, ...)
{
    char tmp[sizeof err_buf]; /* the arguments may include hpt_error_msg() */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(err_buf, tmp, sizeof err_buf);
    return code;
}

const char *hpt_error_msg(void) { return err_buf; }

int hpt_status_exit_code(hpt_status s) { return (int)s; }

void hpt_fatal(const char *file, int line, int code, const char *fmt, ...)
{
    va_list ap;
    int inited = 0, finalized = 0;
    fprintf(stderr, "hpt: fatal: %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized)
        MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}
