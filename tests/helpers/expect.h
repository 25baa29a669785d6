/* expect.h — the check macro of the C unit tests (test_data.c, test_safetensors.c,
 * test_ckpt.c): EXPECT(cond, fmt, ...) counts a failure in `failures` and
 * prints file:line, the condition and the message when cond is false;
 * returns cond (0 or 1). Include once per test program. */
#ifndef HPT_TEST_EXPECT_H
#define HPT_TEST_EXPECT_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

static int failures;

#define EXPECT(cond, ...) expect((cond), __FILE__, __LINE__, #cond, __VA_ARGS__)

/* Status st equals want and hpt_error_msg() contains the substring sub. */
#define EXPECT_ERR(st, want, sub)                                                                  \
    EXPECT((st) == (want) && strstr(hpt_error_msg(), (sub)),                                       \
           "status %d (want %d), message '%s' (want '%s')", (int)(st), (int)(want),                \
           hpt_error_msg(), (sub))

__attribute__((format(printf, 5, 6))) static int expect(int ok, const char *file, int line,
                                                        const char *cond, const char *fmt, ...)
{
    if (ok)
        return 1;
    va_list ap;
    failures++;
    fprintf(stderr, "%s:%d: FAIL: %s: ", file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 0;
}

#endif
