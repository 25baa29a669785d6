/* weights.c — HDF5 export of model tensors; see weights.h. */
#include "weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5out.h"

hpt_status hpt_h5_create(const char *path, hid_t *file)
{
    int existed = access(path, F_OK) == 0;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages, not HDF5's error stack */
    *file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (*file < 0) {
        hpt_status st = hpt_error_set(HPT_ERR_IO, "%s: cannot create HDF5 file: %s", path,
                                      hpt_h5_cause_line());
        if (!existed)
            unlink(path); /* HDF5 may have created it before failing (a lock) */
        return st;
    }
    return HPT_OK;
}

hpt_status hpt_h5_write_array(hid_t file, const char *name, hid_t type, int rank,
                              const hsize_t *dims, const void *data)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t ds = H5Dcreate2(file, name, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    herr_t err = ds < 0 ? -1 : H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    char cause[256], file_name[4096] = "HDF5 file";
    if (err < 0) { /* before the next HDF5 call clears the error stack */
        snprintf(cause, sizeof cause, "%s", hpt_h5_cause_line());
        H5Fget_name(file, file_name, sizeof file_name);
    }
    if (ds >= 0)
        H5Dclose(ds);
    H5Sclose(space);
    H5Pclose(lcpl);
    return err < 0 ? hpt_error_set(HPT_ERR_IO, "%s: cannot %s dataset %s: %s", file_name,
                                   ds < 0 ? "create" : "write", name, cause)
                   : HPT_OK;
}
