/* metrics_h5.c — see metrics_h5.h. */
#include "metrics_h5.h"

#include "h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

hid_t hpt_metrics_h5_fapl(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0)
        return fapl;
    H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    H5Pset_file_locking(fapl, 0, 1);
    H5Pset_metadata_read_attempts(fapl, HPT_METRICS_READ_ATTEMPTS);
    return fapl;
}

/* Take FILE.lock as a writer would (*fd = -1 when there is no lock file or
 * no lock support). */
static hpt_status clear_lock(const char *path, FILE *log, int *fd)
{
    char lp[4200];
    snprintf(lp, sizeof lp, "%s.lock", path);
    *fd = open(lp, O_RDWR | O_CLOEXEC);
    if (*fd < 0)
        return HPT_OK; /* no writer has run here since the file was copied */
    if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
        return HPT_OK;
    int err = errno;
    close(*fd);
    *fd = -1;
    if (err == EWOULDBLOCK)
        return hpt_error_set(HPT_ERR_IO, "%s: a live hpt-train is writing it (%s is locked); "
                             "not cleared: read a live file in SWMR mode (hpt-metrics, "
                             "plot_metrics.py, h5py.File(FILE, \"r\", swmr=True))", path, lp);
    if (log)
        fprintf(log, "hpt-metrics: warning: %s: cannot lock %s (%s): cannot tell whether a "
                "writer is live; clearing anyway\n", path, lp, strerror(err));
    return HPT_OK;
}

hpt_status hpt_metrics_h5_clear(const char *path, FILE *log, int *cleared)
{
    int fd;
    *cleared = 0;
    if (access(path, F_OK) != 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: no such file", path);
    hpt_status st = clear_lock(path, log, &fd);
    if (st)
        return st;
    hid_t fapl = hpt_metrics_h5_fapl(), f;
    H5E_BEGIN_TRY { f = H5Fopen(path, H5F_ACC_RDONLY, fapl); }
    H5E_END_TRY;
    if (f < 0) { /* flagged (or not HDF5): open for writing, clearing the flags */
        bool clear = true;
        if (H5Pexist(fapl, "clear_status_flags") > 0)
            H5Pset(fapl, "clear_status_flags", &clear);
        H5E_BEGIN_TRY { f = H5Fopen(path, H5F_ACC_RDWR, fapl); }
        H5E_END_TRY;
        if (f < 0)
            st = hpt_error_set(HPT_ERR_DATA, "%s: not a readable HDF5 file (HDF5: %s)", path,
                               hpt_h5_cause());
        else
            *cleared = 1;
    }
    if (f >= 0 && H5Fclose(f) < 0 && !st)
        st = hpt_error_set(HPT_ERR_IO, "%s: cannot close it (HDF5: %s)", path, hpt_h5_cause());
    H5Pclose(fapl);
    if (fd >= 0)
        close(fd);
    return st;
}
