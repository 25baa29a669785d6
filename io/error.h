/* error.h — status codes and the last error message of libhpt.
 *
 * Every fallible library function returns an hpt_status. On failure it has
 * called hpt_error_set() with a message naming the file or field, the value
 * and the rule broken; the caller (a program's main) prints hpt_error_msg()
 * once and exits with hpt_status_exit_code(). The message buffer is
 * thread-local, so OpenMP threads never race on it.
 */
#ifndef HPT_ERROR_H
#define HPT_ERROR_H

#include <stddef.h>

#ifdef __cplusplus /* lib/backend_cuda.cu (nvcc) includes this header */
extern "C" {
#define HPT_NORETURN [[noreturn]]
#else
#define HPT_NORETURN _Noreturn
#endif

typedef enum {
    HPT_OK = 0,
    HPT_ERR_INTERNAL = 1,  /* a bug or an out-of-memory condition        */
    HPT_ERR_USAGE = 2,     /* bad option, bad config or bad architecture */
    HPT_ERR_DATA = 3,      /* missing, truncated or malformed data/token */
    HPT_ERR_DIVERGED = 4,  /* too many consecutive non-finite steps      */
    HPT_ERR_IO = 5,        /* run directory or output file not writable  */
    HPT_REQUEUE = 75,      /* checkpointed after a signal or --max-runtime:
                            * "requeue me" (EX_TEMPFAIL)                  */
} hpt_status;

/* Record a printf-style message for the current thread and return `code`,
 * so callers can write `return hpt_error_set(HPT_ERR_USAGE, "...")`. */
hpt_status hpt_error_set(hpt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The last message recorded on this thread ("" if none). Owned by libhpt;
 * valid until the next hpt_error_set on this thread. */
const char *hpt_error_msg(void);

/* Process exit status for a status: equal to the enum value (0..5, 75). These
 * are the documented exit codes of every hpt program (docs/EXIT_CODES in
 * README). */
int hpt_status_exit_code(hpt_status s);

/* Fatal error inside a parallel run: print "hpt: fatal: file:line: msg" on
 * stderr and call MPI_Abort(MPI_COMM_WORLD, code) (or exit(code) when MPI
 * is not initialised). Never returns. Use HPT_FATAL(...). */
HPT_NORETURN void hpt_fatal(const char *file, int line, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define HPT_FATAL(...) hpt_fatal(__FILE__, __LINE__, HPT_ERR_INTERNAL, __VA_ARGS__)

/* Always-on assertion (never compiled out, never has side effects in cond). */
#define HPT_CHECK(cond) \
    do { if (!(cond)) hpt_fatal(__FILE__, __LINE__, HPT_ERR_INTERNAL, "check failed: %s", #cond); } while (0)

#ifdef __cplusplus
}
#endif

#endif
