/* backend.c — registry of compute backends. The only place that knows
 * which backends were compiled in. */
#include "backend.h"

#include <string.h>

#include "hpt_config.h"

static const hpt_backend *const registry[] = {
    &hpt_backend_cpu,
    /* #ifdef HAVE_CUDA: &hpt_backend_cuda lands with the CUDA backend issue. */
    NULL,
};

const hpt_backend *const *hpt_backend_list(void) { return registry; }

hpt_status hpt_backend_get(const char *name, const hpt_backend **out)
{
    char names[256] = "";
    for (const hpt_backend *const *b = registry; *b; b++) {
        if (strcmp((*b)->name, name) == 0) {
            if ((*b)->init)
                (*b)->init();
            *out = *b;
            return HPT_OK;
        }
        strncat(names, names[0] ? ", " : "", sizeof names - strlen(names) - 1);
        strncat(names, (*b)->name, sizeof names - strlen(names) - 1);
    }
    return hpt_error_set(HPT_ERR_USAGE, "--backend %s: unknown compute backend (compiled in: %s)",
                         name, names);
}
