/* h5util.c — see h5util.h. */
#include "h5util.h"

#include <hdf5.h>
#include <stdio.h>

static herr_t innermost_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    if (n == 0)
        snprintf((char *)data, 256, "%s", e->desc ? e->desc : "");
    return 0;
}

const char *hpt_h5_cause(void)
{
    static _Thread_local char buf[256];
    buf[0] = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_cb, buf);
    return buf[0] ? buf : "HDF5 error";
}
