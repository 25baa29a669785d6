/* h5util.c — see h5util.h. */
#include "h5util.h"

#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#define CAUSE_LEN 512

/* Walking upward from the innermost entry: keep the first non-empty
 * description. */
static herr_t innermost_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    if (e->desc && *e->desc && !*(char *)data)
        snprintf((char *)data, CAUSE_LEN, "%s", e->desc);
    return 0;
}

const char *hpt_h5_cause(void)
{
    static _Thread_local char buf[CAUSE_LEN];
    buf[0] = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_cb, buf);
    return buf[0] ? buf : "HDF5 error";
}

const char *hpt_h5_cause_line(void)
{
    static _Thread_local char buf[256];
    const char *c = hpt_h5_cause(), *m = strstr(c, "error message = '"), *colon = strchr(c, ':');
    const char *end = m ? strchr(m + 17, '\'') : NULL;
    if (m && end && colon)
        snprintf(buf, sizeof buf, "%.*s (%.*s)", (int)(end - m - 17), m + 17, (int)(colon - c), c);
    else
        snprintf(buf, sizeof buf, "%s", c);
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return buf;
}
