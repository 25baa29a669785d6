/* model_h5.c — see model_h5.h. */
#include "model_h5.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights.h"

hpt_status hpt_model_h5_write(hid_t file, const char *group, const hpt_model *m,
                              const float *block)
{
    float *host = malloc(sizeof(float) * m->nparams);
    if (!host)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory exporting tensors");
    m->be->download(host, block, sizeof(float) * m->nparams);
    hpt_status st = HPT_OK;
    for (int i = 0; i < m->ntensors && !st; i++) {
        const hpt_tensor *t = &m->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%s/%s", strcmp(group, "/") ? group : "", t->name);
        hsize_t dims[2] = {(hsize_t)t->rows, (hsize_t)t->cols};
        st = hpt_h5_write_array(file, name, H5T_NATIVE_FLOAT, t->cols > 1 ? 2 : 1, dims,
                                host + t->offset);
    }
    free(host);
    return st;
}
