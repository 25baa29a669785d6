/* gpu_slots.c — which ranks share a GPU; see gpu_slots.h. */
#include "gpu_slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const hpt_gpu_slot *s;
    int rank;
} ranked;

/* host, then gpu, then rank: equal slots end up adjacent, lowest rank first */
static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    int c = strncmp(x->s->host, y->s->host, sizeof x->s->host);
    if (!c)
        c = strncmp(x->s->gpu, y->s->gpu, sizeof x->s->gpu);
    return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

int hpt_gpu_shared(const hpt_gpu_slot *slots, int n, int *first)
{
    for (int i = 0; i < n; i++)
        first[i] = -1;
    if (n <= 1)
        return 0;
    ranked *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return -1;
    for (int i = 0; i < n; i++)
        v[i] = (ranked){&slots[i], i};
    qsort(v, (size_t)n, sizeof *v, cmp_ranked);
    int shared = 0, head = 0; /* head: first index of the current run of equal slots */
    for (int i = 1; i < n; i++) {
        const hpt_gpu_slot *a = v[head].s, *b = v[i].s;
        if (strncmp(a->host, b->host, sizeof a->host) || strncmp(a->gpu, b->gpu, sizeof a->gpu)) {
            head = i;
            continue;
        }
        if (!b->gpu[0]) /* no GPU: nothing to share */
            continue;
        first[v[i].rank] = v[head].rank;
        shared++;
    }
    free(v);
    return shared;
}

char *hpt_gpu_shared_describe(const hpt_gpu_slot *slots, int n, const int *first, int max_listed,
                              char *buf, size_t cap)
{
    size_t at = 0;
    int listed = 0, more = 0;
    if (cap)
        buf[0] = 0;
    for (int i = 0; i < n && cap; i++) {
        if (first[i] < 0)
            continue;
        if (listed >= max_listed) {
            more++;
            continue;
        }
        int w = snprintf(buf + at, cap - at, "%srank %d on %.64s shares GPU %.64s with rank %d",
                         listed ? "; " : "", i, slots[i].host, slots[i].gpu, first[i]);
        listed++;
        at = w < 0 || (size_t)w >= cap - at ? cap - 1 : at + (size_t)w;
    }
    if (more && cap && at < cap - 1)
        snprintf(buf + at, cap - at, " (and %d more rank%s)", more, more == 1 ? "" : "s");
    return buf;
}
