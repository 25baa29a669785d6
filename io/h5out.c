/* h5out.c — atomically committed output files; see h5out.h. */
#include "h5out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "h5util.h"

int hpt_h5_put_str_attr(hid_t obj, const char *name, const char *s)
{
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_size(t, strlen(s) + 1);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    int err = a < 0 || H5Awrite(a, t, s) < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return err;
}

hpt_status hpt_h5_out_create(const char *path, hpt_h5_out *o)
{
    o->file = -1;
    if (snprintf(o->path, sizeof o->path, "%s", path) >= (int)sizeof o->path ||
        snprintf(o->tmp, sizeof o->tmp, "%s.tmp", path) >= (int)sizeof o->tmp)
        return hpt_error_set(HPT_ERR_USAGE, "%s: path too long", path);
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644); /* errno's message, not HDF5's */
    if (fd < 0)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot create: %s", o->tmp, strerror(errno));
    close(fd);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages, not HDF5's error stack */
    o->file = H5Fcreate(o->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (o->file < 0) {
        hpt_status st = hpt_error_set(HPT_ERR_IO, "%s: cannot create HDF5 file: %s", o->tmp,
                                      hpt_h5_cause_line());
        unlink(o->tmp);
        return st;
    }
    return HPT_OK;
}

hpt_status hpt_h5_out_finish(hpt_h5_out *o, hpt_status st)
{
    if (o->file >= 0 && H5Fclose(o->file) < 0 && !st)
        st = hpt_error_set(HPT_ERR_IO, "%s: closing the HDF5 file failed: %s", o->tmp,
                           hpt_h5_cause_line());
    o->file = -1;
    if (!st)
        st = hpt_file_commit(o->tmp, o->path);
    if (st && !unlink(o->tmp)) /* (not after the rename: then o->path is new) */
        return hpt_error_set(st, "%s (removed %s; %s is unchanged)", hpt_error_msg(), o->tmp,
                             o->path);
    return st;
}
