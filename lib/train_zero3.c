/* train_zero3.c — ZeRO-3 parameter sharding; see train_zero3.h. */
#include <stdlib.h>

#include "train_zero3.h"

enum { DROPPED = 0, GATHERING = 1, RESIDENT = 2 };

struct hpt_zero3 {
    run_state *r;
    int n;                 /* units, forward order                          */
    size_t (*range)[2];    /* [lo, hi) of each unit in the parameter block   */
    int *counts, *displs;  /* (n, DP): each DP rank's block of each unit     */
    hpt_comm_req *req;     /* n: the gather in flight                        */
    char *state;           /* n: DROPPED, GATHERING, RESIDENT                */
    int prefetch;          /* units gathered ahead                           */
    int prev;              /* the unit needed last (-1: none yet)            */
    size_t own_lo, own_hi; /* this rank's block of the parameter block       */
    size_t resident, peak; /* floats outside the own block held now, at most
                            * since the first zero3_drop_all             */
    int started;           /* zero3_drop_all was called                     */
    int64_t gathers;
    double wait_s;
};

/* The unit that starts at lo (units are few: a linear search). */
static int unit_at(const struct hpt_zero3 *z, size_t lo, size_t hi)
{
    for (int u = 0; u < z->n; u++)
        if (z->range[u][0] == lo && z->range[u][1] == hi)
            return u;
    HPT_FATAL("ZeRO-3: parameter range [%zu, %zu) is not a unit of the block", lo, hi);
}

/* Floats of unit u outside this rank's own block. */
static size_t foreign(const struct hpt_zero3 *z, int u)
{
    size_t lo = z->range[u][0], hi = z->range[u][1];
    size_t a = lo > z->own_lo ? lo : z->own_lo, b = hi < z->own_hi ? hi : z->own_hi;
    return hi - lo - (b > a ? b - a : 0);
}

/* The parts of unit u outside the own block, element ranges [p[k][0],
 * p[k][1]) of the parameter block (empty ones have p[k][0] >= p[k][1]):
 * below it and above it. */
static void foreign_parts(const struct hpt_zero3 *z, int u, size_t p[2][2])
{
    size_t lo = z->range[u][0], hi = z->range[u][1];
    p[0][0] = lo, p[0][1] = hi < z->own_lo ? hi : z->own_lo;
    p[1][0] = lo > z->own_hi ? lo : z->own_hi, p[1][1] = hi;
}

/* Unit u's foreign parts backed by memory before a gather writes them
 * (the backend's commit: CUDA maps their granules; the CPU has nothing to
 * do). Out of device memory mid-step aborts, naming the unit. */
static void commit_unit(struct hpt_zero3 *z, int u)
{
    const hpt_backend *be = z->r->model.be;
    size_t p[2][2];
    foreign_parts(z, u, p);
    for (int k = 0; k < 2 && be->commit; k++)
        if (p[k][0] < p[k][1] &&
            be->commit(z->r->model.params + p[k][0], sizeof(float) * (p[k][1] - p[k][0])))
            HPT_FATAL("ZeRO-3: backing unit %d of the parameter block (elements [%zu, %zu)) "
                      "before its gather: %s", u, p[k][0], p[k][1], hpt_error_msg());
}

/* Unit u's foreign parts given back (the backend's decommit: the CPU's
 * whole pages inside them, MADV_DONTNEED; CUDA unmaps the granules no
 * other unit and not the own block hold). */
static void decommit_unit(struct hpt_zero3 *z, int u)
{
    const hpt_backend *be = z->r->model.be;
    size_t p[2][2];
    foreign_parts(z, u, p);
    for (int k = 0; k < 2 && be->decommit; k++)
        if (p[k][0] < p[k][1])
            be->decommit(z->r->model.params + p[k][0], sizeof(float) * (p[k][1] - p[k][0]));
}

static void start(struct hpt_zero3 *z, int u)
{
    run_state *r = z->r;
    int D = r->comm.group_size[HPT_GROUP_DPS];
    commit_unit(z, u);
    r->comm.be->iallgather_inplace_f32(&r->comm, HPT_GROUP_DPS, r->model.params + z->range[u][0],
                                       z->counts + (size_t)u * D, z->displs + (size_t)u * D,
                                       &z->req[u]);
    z->state[u] = GATHERING;
    z->gathers++;
    z->resident += foreign(z, u);
    z->peak = z->resident > z->peak ? z->resident : z->peak;
}

static void finish(struct hpt_zero3 *z, int u)
{
    double t0 = now_s();
    z->r->comm.be->wait(&z->r->comm, &z->req[u]);
    z->wait_s += now_s() - t0;
    z->state[u] = RESIDENT;
}

/* Every gather in flight waited for. */
static void finish_all(struct hpt_zero3 *z)
{
    for (int u = 0; u < z->n; u++)
        if (z->state[u] == GATHERING)
            finish(z, u);
}

static void drop(struct hpt_zero3 *z, int u)
{
    if (z->state[u] == GATHERING)
        finish(z, u);
    if (z->state[u] == DROPPED)
        return;
    z->state[u] = DROPPED;
    z->resident -= foreign(z, u);
    decommit_unit(z, u);
}

/* Unit u resident: gathered now, or its gather in flight waited for. */
static void gather_now(struct hpt_zero3 *z, int u)
{
    if (z->state[u] == DROPPED)
        start(z, u);
    if (z->state[u] == GATHERING)
        finish(z, u);
}

/* The model's param_need hook (ctx: the run_state). */
static void need(void *ctx, size_t lo, size_t hi, int backward)
{
    struct hpt_zero3 *z = ((run_state *)ctx)->z3;
    int u = unit_at(z, lo, hi);
    gather_now(z, u);
    /* prefetch the next units of this pass: forward in unit order,
     * backward in reverse down to the first layer (the embedding's backward
     * reads no parameter); none after the tied head's embedding (one stage,
     * tied: the forward pass has ended) */
    int first_embed = z->r->model.first, tied_head = !backward && u == 0 && z->prev == z->n - 1 &&
                                                     z->n > 1;
    z->prev = u;
    if (tied_head)
        return;
    for (int k = 1; k <= z->prefetch; k++) {
        int v = backward ? u - k : u + k;
        if (v < 0 || v >= z->n || (backward && v == 0 && first_embed))
            break;
        if (z->state[v] == DROPPED)
            start(z, v);
    }
}

/* The model's param_done hook. */
static void done(void *ctx, size_t lo, size_t hi)
{
    struct hpt_zero3 *z = ((run_state *)ctx)->z3;
    drop(z, unit_at(z, lo, hi));
}

hpt_status zero3_init(run_state *r, int prefetch, size_t lo, size_t hi)
{
    hpt_model *m = &r->model;
    int D = r->comm.group_size[HPT_GROUP_DPS], n = hpt_model_param_units(m, NULL);
    struct hpt_zero3 *z = calloc(1, sizeof *z);
    if (!z || !(z->range = calloc((size_t)n, sizeof *z->range)) ||
        !(z->counts = calloc((size_t)n * D, sizeof(int))) ||
        !(z->displs = calloc((size_t)n * D, sizeof(int))) ||
        !(z->req = calloc((size_t)n, sizeof *z->req)) || !(z->state = calloc((size_t)n, 1))) {
        if (z) {
            free(z->range), free(z->counts), free(z->displs), free(z->req), free(z->state);
            free(z);
        }
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory setting up ZeRO-3");
    }
    z->r = r;
    z->n = hpt_model_param_units(m, z->range);
    z->prefetch = prefetch;
    z->prev = -1;
    z->own_lo = lo;
    z->own_hi = hi;
    /* the own block backed for good (a commit never paired with a
     * decommit: CUDA keeps its granules, those it shares with units too) */
    hpt_status st;
    if (m->be->commit && hi > lo &&
        (st = m->be->commit(m->params + lo, sizeof(float) * (hi - lo)))) {
        r->z3 = z; /* nothing committed yet to undo */
        zero3_free(r);
        return hpt_error_set(st, "ZeRO-3: backing the own block of the parameters: %s",
                             hpt_error_msg());
    }
    for (int u = 0; u < z->n; u++) {
        shard_parts(r, z->range[u][0], z->range[u][1], z->counts + (size_t)u * D,
                    z->displs + (size_t)u * D);
        z->state[u] = RESIDENT; /* the whole block is there until zero3_drop_all */
        commit_unit(z, u);      /* each resident unit holds its granules */
        z->resident += foreign(z, u);
    }
    z->peak = z->resident;
    r->z3 = z;
    m->param_need = need;
    m->param_done = done;
    m->param_ctx = r;
    return HPT_OK;
}

void zero3_free(run_state *r)
{
    struct hpt_zero3 *z = r->z3;
    if (!z)
        return;
    finish_all(z);
    free(z->range), free(z->counts), free(z->displs), free(z->req), free(z->state);
    free(z);
    r->z3 = NULL;
    r->model.param_need = NULL;
    r->model.param_done = NULL;
}

void zero3_drop_all(run_state *r)
{
    struct hpt_zero3 *z = r->z3;
    if (!z)
        return;
    for (int u = 0; u < z->n; u++)
        drop(z, u);
    z->prev = -1;
    if (!z->started) { /* the whole block held since set-up is not a step's */
        z->peak = 0, z->started = 1;
        hpt_commit_stats c;
        if (r->model.be->committed)
            r->model.be->committed(&c, 1);
    }
}

void zero3_gather_all(run_state *r)
{
    struct hpt_zero3 *z = r->z3;
    if (!z)
        return;
    finish_all(z);
    for (int u = 0; u < z->n; u++)
        if (z->state[u] == DROPPED) {
            commit_unit(z, u);
            z->state[u] = RESIDENT;
            z->resident += foreign(z, u);
        }
    r->comm.be->allgather_inplace_f32(&r->comm, HPT_GROUP_DPS, r->model.params, r->shard_counts);
}

void zero3_hold(run_state *r, size_t x)
{
    struct hpt_zero3 *z = r->z3;
    if (!z)
        return;
    for (int u = 0; u < z->n; u++)
        if (z->range[u][0] <= x && x < z->range[u][1]) {
            gather_now(z, u);
            return;
        }
}

void zero3_stats(const run_state *r, size_t *peak_bytes, int64_t *gathers, double *wait_s)
{
    const struct hpt_zero3 *z = r->z3;
    *peak_bytes = z ? sizeof(float) * (z->peak + (z->own_hi - z->own_lo)) : 0;
    *gathers = z ? z->gathers : 0;
    *wait_s = z ? z->wait_s : 0;
}

int zero3_device_stats(const run_state *r, hpt_commit_stats *out)
{
    if (!r->z3 || !r->model.be->committed)
        return 0;
    r->model.be->committed(out, 0);
    return 1;
}
