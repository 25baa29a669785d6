/* h5util.c — see h5util.h. */
#include "h5util.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
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

hpt_status hpt_h5_lock_error(const char *what, const char *path, const char *cause)
{
    if (!strstr(cause, "unable to lock file"))
        return HPT_OK;
    return hpt_error_set(HPT_ERR_IO, "%s%s: not read: " HPT_H5_NOLOCK_TEXT ", which HDF5 "
                         "takes on open (HDF5: %s); set "
                         "HDF5_USE_FILE_LOCKING=FALSE (slurm/launch.sh does) and run again",
                         what, path, cause);
}

char *hpt_h5_read_str_attr(hid_t obj, const char *name)
{
    if (H5Aexists(obj, name) <= 0)
        return NULL;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return NULL;
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    char *out = NULL;
    if (ft >= 0 && sp >= 0 && H5Tget_class(ft) == H5T_STRING && H5Sget_simple_extent_npoints(sp) == 1) {
        if (H5Tis_variable_str(ft) > 0) {
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, H5T_VARIABLE);
            H5Tset_cset(mt, H5Tget_cset(ft)); /* HDF5 does not convert ASCII <-> UTF-8 */
            char *s = NULL;
            if (H5Aread(a, mt, &s) >= 0 && s) {
                out = strdup(s);
                H5free_memory(s);
            }
            H5Tclose(mt);
        } else {
            size_t len = H5Tget_size(ft);
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, len + 1);
            H5Tset_cset(mt, H5Tget_cset(ft));
            out = calloc(len + 2, 1);
            if (out && H5Aread(a, mt, out) < 0) {
                free(out);
                out = NULL;
            }
            H5Tclose(mt);
        }
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (ft >= 0)
        H5Tclose(ft);
    H5Aclose(a);
    return out;
}

int hpt_h5_has_signature(const char *path)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char b[8];
    FILE *f = fopen(path, "rb");
    int yes = f && fread(b, 1, 8, f) == 8 && !memcmp(b, sig, 8);
    if (f)
        fclose(f);
    return yes;
}
