/* train_ckpt.c — checkpoints of the training run: the checkpoint directory,
 * choosing and loading the checkpoint to resume (falling back past
 * damaged ones), keeping the global batch, saving, and cutting the
 * per-step logs back to the step resumed. The file format is in
 * checkpoint.c / io/ckpt.c. */
#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpt_config.h"
#include "cli.h"
#include "durable.h"
#include "train_ckpt.h"
#include "train_zero3.h"

/* Keep only the rows of a per-step log (log.tsv, samples.*.tsv: step in
 * the first column) up to step `upto`: a resume continues the log from its
 * checkpoint. */
static void trim_rows(const char *path, int upto)
{
    char tmp[4200], line[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *in = fopen(path, "r"), *out = in ? fopen(tmp, "w") : NULL;
    while (in && out && fgets(line, sizeof line, in)) {
        char *end;
        long step = strtol(line, &end, 10);
        if (end == line || step <= upto) /* header or an earlier step */
            fputs(line, out);
    }
    if (in)
        fclose(in);
    if (!out)
        return;
    hpt_status st = fclose(out) ? hpt_error_set(HPT_ERR_IO, "%s: write failed: %s", tmp,
                                                strerror(errno))
                                : hpt_file_commit(tmp, path);
    if (st) {
        fprintf(stderr, "hpt: warning: %s not trimmed to step %d: %s\n", path, upto, hpt_error_msg());
        unlink(tmp);
    }
}

/* World rank 0: the RUN_DIR/samples.<d>.tsv files no rank of this run
 * writes (DP ranks that no longer exist after a resume on fewer ranks, or
 * every one without --log-samples): cut back to step `upto` (a resume: the
 * steps after it run again), or removed when upto < 0 (a fresh start). */
void tidy_samples(run_state *r, const hpt_train_opts *o, int64_t upto)
{
    char pat[4200];
    glob_t g;
    if (!r->root || !o->run_dir)
        return;
    snprintf(pat, sizeof pat, "%s/samples.*.tsv", o->run_dir);
    if (glob(pat, 0, NULL, &g))
        return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *base = strrchr(g.gl_pathv[i], '/') + 1;
        char *end;
        long d = strtol(base + strlen("samples."), &end, 10);
        if (end == base + strlen("samples.") || strcmp(end, ".tsv") || d < 0 ||
            (o->log_samples && d < r->comm.dp))
            continue; /* not ours, or written by its own rank */
        if (upto < 0)
            unlink(g.gl_pathv[i]);
        else
            trim_rows(g.gl_pathv[i], (int)upto);
    }
    globfree(&g);
}

/* The checkpoint directory: --checkpoint-dir, else RUN_DIR/checkpoints;
 * "" when neither is given (then --save-every is refused). */
hpt_status checkpoint_dir(run_state *r, const hpt_train_opts *o)
{
    const char *d = o->ckpt_dir;
    char buf[4096];
    if (!d && o->run_dir) {
        snprintf(buf, sizeof buf, "%s/checkpoints", o->run_dir);
        d = buf;
    }
    if (!d && o->save_every > 0)
        return hpt_error_set(HPT_ERR_USAGE, "--save-every %d needs --run-dir or --checkpoint-dir",
                             o->save_every);
    snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s", d ? d : "");
    return HPT_OK;
}

/* The checkpoint's global batch must be kept: change gradient
 * accumulation, or refuse with the layouts that would work. */
static hpt_status keep_global_batch(run_state *r, hpt_train_opts *o, const hpt_ckpt_meta *meta)
{
    long long G = meta->global_batch, per = (long long)o->batch * r->comm.dp;
    if (G == per * o->grad_accum)
        return HPT_OK;
    if (G % per == 0) {
        if (r->root)
            fprintf(stderr, "hpt-train: note: resuming a global batch of %lld sequences: "
                    "--grad-accum %lld (micro-batch %d x DP %d)\n",
                    G, G / per, o->batch, r->comm.dp);
        o->grad_accum = (int)(G / per);
        return HPT_OK;
    }
    char ok[512] = "", cp[24] = "";
    int W = r->comm.world_size;
    if (r->comm.cp > 1)
        snprintf(cp, sizeof cp, " / CP %d", r->comm.cp);
    if (G % r->comm.dp == 0) { /* some micro-batches do: list them */
        for (int b = 1; b <= G && strlen(ok) < 400; b++)
            if (G % ((long long)b * r->comm.dp) == 0)
                snprintf(ok + strlen(ok), sizeof ok - strlen(ok), "%s%d", ok[0] ? ", " : "", b);
        return hpt_error_set(HPT_ERR_USAGE,
                             "%s: checkpoint global batch %lld cannot be kept with --batch %d x DP "
                             "%d (%d ranks / TP %d%s / PP %d): micro-batch x DP must divide it; with "
                             "this layout use --batch in {%s}, or a DP that divides %lld",
                             r->ckpt_dir, G, o->batch, r->comm.dp, W, r->comm.tp, cp, r->comm.pp,
                             ok, G);
    }
    /* DP itself does not divide G: no micro-batch can; name the DPs that
     * divide both G and the world size (DP 1 always does) */
    for (int d = 1; d <= W && strlen(ok) < 400; d++)
        if (W % d == 0 && G % d == 0)
            snprintf(ok + strlen(ok), sizeof ok - strlen(ok), "%sDP %d (TP x CP x PP = %d)",
                     ok[0] ? ", " : "", d, W / d);
    return hpt_error_set(HPT_ERR_USAGE,
                         "%s: checkpoint global batch %lld cannot be kept with --batch %d x DP %d "
                         "(%d ranks / TP %d%s / PP %d): micro-batch x DP must divide it, and DP %d "
                         "does not divide %lld, so no --batch can; on %d ranks use a layout with a "
                         "DP that divides %lld: %s, or a number of ranks that allows one",
                         r->ckpt_dir, G, o->batch, r->comm.dp, W, r->comm.tp, cp, r->comm.pp,
                         r->comm.dp, G, W, G, ok);
}

/* How checkpoint metadata m differs from this run: 0 not; 1 another model
 * (what: the first differing config field); 2 another sequence length or
 * seed (what: "--seq-len A, not B", "--seed A, not B": the seed keys the
 * data order, lib/data.h, so another one would not continue the run; with
 * advise, how to continue: the run's newest checkpoint only); -1 its config
 * does not parse (*st: the parser's status, message set; what: that
 * message). */
static int meta_differs(const run_state *r, const hpt_ckpt_meta *m, int seq_len, uint64_t seed,
                        int advise, char *what, size_t n, hpt_status *st)
{
    hpt_config saved;
    if ((*st = hpt_config_parse(m->config_json, r->ckpt_dir, &saved))) {
        snprintf(what, n, "%s", hpt_error_msg());
        return -1;
    }
    if (hpt_config_diff(&saved, &r->cfg, what, n))
        return 1;
    if (m->seq_len != seq_len) {
        snprintf(what, n, "--seq-len %d, not %d", m->seq_len, seq_len);
        return 2;
    }
    if (m->seed != seed) {
        if (advise)
            snprintf(what, n, "--seed %llu, not %llu (the seed keys the data order: pass --seed "
                     "%llu to continue this run, or a new run directory to start another)",
                     (unsigned long long)m->seed, (unsigned long long)seed,
                     (unsigned long long)m->seed);
        else
            snprintf(what, n, "--seed %llu, not %llu", (unsigned long long)m->seed,
                     (unsigned long long)seed);
        return 2;
    }
    return 0;
}

/* A resume candidate failed with error st (message set): --resume strict
 * refuses (returns the error, message extended); --resume auto warns
 * (rank 0) and returns HPT_OK, to try the previous checkpoint. */
static hpt_status fall_back(const run_state *r, const hpt_train_opts *o, hpt_status st)
{
    if (o->resume == 2)
        return hpt_error_set(st, "%s (--resume strict: not falling back)", hpt_error_msg());
    if (r->root)
        fprintf(stderr, "hpt-train: warning: %s; falling back to the previous checkpoint\n",
                hpt_error_msg());
    return HPT_OK;
}

/* Before the model exists: pick the checkpoint to resume, check that it
 * fits (config, sequence length) and adapt gradient accumulation. */
hpt_status probe_resume(run_state *r, hpt_train_opts *o, hpt_ckpt_meta *meta)
{
    MPI_Comm world = r->comm.comms[HPT_GROUP_WORLD];
    r->resume_from = -1;
    if (!r->ckpt_dir[0] || !o->resume)
        return HPT_OK;
    hpt_status st = hpt_checkpoint_clean(r->ckpt_dir, world);
    int64_t *steps = malloc(sizeof(int64_t) * HPT_CKPT_MAX_CANDIDATES);
    if (!steps)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    int n = st ? 0 : hpt_checkpoint_candidates(r->ckpt_dir, world, steps, HPT_CKPT_MAX_CANDIDATES);
    if (st || n == 0) {
        free(steps);
        return st;
    }
    for (int i = 0; i < n; i++) { /* the newest whose metadata reads */
        hpt_status e;
        meta->format_version = 0;
        if (!(st = hpt_checkpoint_meta(r->ckpt_dir, steps[i], world, meta)))
            break;
        if (meta->format_version > HPT_CKPT_VERSION) /* a newer hpt's: never skip its work */
            break;
        if ((e = fall_back(r, o, st))) {
            free(steps);
            return e;
        }
    }
    free(steps);
    if (st && meta->format_version > HPT_CKPT_VERSION)
        return st;
    if (st)
        return hpt_error_set(st, "%s: no loadable checkpoint (%s)", r->ckpt_dir, hpt_error_msg());
    char what[512];
    int d = meta_differs(r, meta, o->seq_len, o->seed, 1, what, sizeof what, &st);
    if (d < 0)
        return st; /* the parser's message */
    if (d == 1)
        return hpt_error_set(HPT_ERR_USAGE,
                             "%s: checkpoint of step %lld is of another model: %s from --model %s; "
                             "nothing was overwritten",
                             r->ckpt_dir, (long long)meta->step, what, o->model);
    if (d == 2)
        return hpt_error_set(HPT_ERR_USAGE, "%s: checkpoint was trained with %s",
                             r->ckpt_dir, what);
    if ((st = keep_global_batch(r, o, meta)))
        return st;
    r->resume_from = meta->step;
    return HPT_OK;
}

static hpt_ckpt_state ckpt_state(run_state *r)
{
    return (hpt_ckpt_state){.comm = &r->comm, .model = &r->model, .opt = &r->opt,
                            .shard_counts = r->shard_counts};
}

/* After a checkpoint of step `step` has loaded: cut the per-step logs this
 * rank writes back to that step (rows of steps that will run again). */
static void retrim_logs(run_state *r, const hpt_train_opts *o, int64_t step)
{
    char path[4096];
    tidy_samples(r, o, step);
    if (r->log) {
        snprintf(path, sizeof path, "%s/log.tsv", o->run_dir);
        fclose(r->log);
        trim_rows(path, (int)step);
        r->log = fopen(path, "a");
    }
    if (r->samples) {
        snprintf(path, sizeof path, "%s/samples.%d.tsv", o->run_dir, r->comm.dp_rank);
        fclose(r->samples);
        trim_rows(path, (int)step);
        r->samples = fopen(path, "a");
    }
}

/* Load the probed checkpoint; with --resume auto fall back to older ones
 * when a tensor is damaged — only to one of the same model, sequence
 * length and global batch (the run was set up for the probed one).
 * Collective. */
/* The run's optimizer options as hpt-train options, for the checkpoint's
 * "optimizer" attribute and the resume's comparison: buf[n]. */
static void optimizer_words(const hpt_train_opts *o, char *buf, size_t n)
{
    const hpt_optim_opts *p = &o->optim;
    char v[7][16]; /* a float's shortest text: at most 15 characters */
    const float f[7] = {p->lr, p->min_lr, p->weight_decay, p->beta1, p->beta2, p->eps, p->max_norm};
    for (int i = 0; i < 7; i++)
        hpt_cli_format_g(f[i], 1, v[i], sizeof v[i]);
    snprintf(buf, n, "--lr %s --min-lr %s --warmup %d --steps %d --weight-decay %s --beta1 %s "
             "--beta2 %s --adam-eps %s --clip %s", v[0], v[1], p->warmup, o->steps, v[2], v[3],
             v[4], v[5], v[6]);
}

/* On a resume with other optimizer options than the checkpoint's run
 * (meta->optimizer, when recorded): a note naming each, then the lr of the
 * next step. Not refused: extending --steps is how a run is lengthened. */
static void note_optimizer_change(const hpt_train_opts *o, const hpt_ckpt_meta *meta)
{
    char now[256], diff[512] = "";
    optimizer_words(o, now, sizeof now);
    if (!meta->optimizer[0] || !strcmp(now, meta->optimizer))
        return;
    /* "--name value" pairs in the same order: name the ones that differ */
    char a[256], b[256], *sa, *sb;
    snprintf(a, sizeof a, "%s", now);
    snprintf(b, sizeof b, "%s", meta->optimizer);
    char *na = strtok_r(a, " ", &sa), *nb = strtok_r(b, " ", &sb);
    while (na && nb) {
        char *va = strtok_r(NULL, " ", &sa), *vb = strtok_r(NULL, " ", &sb);
        if (!va || !vb)
            break;
        if (!strcmp(na, nb) && strcmp(va, vb))
            snprintf(diff + strlen(diff), sizeof diff - strlen(diff), "%s%s %s (was %s)",
                     diff[0] ? ", " : "", na, va, vb);
        na = strtok_r(NULL, " ", &sa);
        nb = strtok_r(NULL, " ", &sb);
    }
    hpt_optim_opts oo = o->optim;
    oo.total_steps = o->steps;
    fprintf(stderr, "hpt-train: note: resuming with other optimizer options than the "
            "checkpoint's run: %s; the schedule continues from step %lld with them (lr of the "
            "next step %g)\n", diff[0] ? diff : now, (long long)meta->step,
            hpt_lr_at(&oo, (int)meta->step));
}

/* ", full recomputation", ", selective recomputation" or "" (none, or not
 * recorded: -1) for the resume line. */
static const char *recompute_words(int recompute)
{
    return recompute == HPT_RECOMPUTE_SELECTIVE ? ", selective recomputation"
           : recompute > 0                      ? ", full recomputation" : "";
}

hpt_status load_resume(run_state *r, const hpt_train_opts *o, hpt_ckpt_meta *meta)
{
    MPI_Comm world = r->comm.comms[HPT_GROUP_WORLD];
    int64_t *steps = malloc(sizeof(int64_t) * HPT_CKPT_MAX_CANDIDATES);
    double t0 = now_s();
    if (!steps)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    int n = hpt_checkpoint_candidates(r->ckpt_dir, world, steps, HPT_CKPT_MAX_CANDIDATES), i = 0;
    while (i < n && steps[i] > meta->step) /* newer ones failed the probe */
        i++;
    hpt_ckpt_state cs = ckpt_state(r);
    hpt_status st = hpt_error_set(HPT_ERR_DATA, "step %lld is gone", (long long)meta->step);
    for (int first = i; i < n; i++) {
        hpt_ckpt_meta mi = *meta;
        if (i > first) {
            char what[400] = "", diff[300];
            hpt_status perr;
            mi.format_version = 0;
            if ((st = hpt_checkpoint_meta(r->ckpt_dir, steps[i], world, &mi))) {
                if (mi.format_version > HPT_CKPT_VERSION)
                    break;
                fall_back(r, o, st); /* (strict stopped at the first failure) */
                continue;
            }
            int d = meta_differs(r, &mi, meta->seq_len, meta->seed, 0, diff, sizeof diff, &perr);
            if (d)
                snprintf(what, sizeof what, "%s%s%s",
                         d < 0 ? "an unreadable model config (" : d == 1 ? "another model: " : "",
                         diff, d < 0 ? ")" : "");
            else if (mi.global_batch != meta->global_batch)
                snprintf(what, sizeof what, "a global batch of %lld sequences, not %lld",
                         (long long)mi.global_batch, (long long)meta->global_batch);
            if (what[0]) {
                st = hpt_error_set(HPT_ERR_DATA, "the previous checkpoint, step %lld, has %s: not "
                                   "falling back to it", (long long)steps[i], what);
                break;
            }
        }
        if (!(st = hpt_checkpoint_load(r->ckpt_dir, steps[i], &cs))) {
            *meta = mi;
            break;
        }
        hpt_status e = fall_back(r, o, st);
        if (e) {
            free(steps);
            return e;
        }
    }
    /* the unloadable ones newer than the step loaded: out of the way of
     * later resumes and of --keep (renamed, not deleted) */
    for (int j = 0; !st && r->root && j < n && steps[j] > meta->step; j++) {
        if (hpt_checkpoint_move_aside(r->ckpt_dir, steps[j]))
            fprintf(stderr, "hpt-train: warning: %s\n", hpt_error_msg());
        else
            fprintf(stderr, "hpt-train: moved the unloadable %s/step_%08lld aside to "
                    "step_%08lld.unloadable\n", r->ckpt_dir, (long long)steps[j],
                    (long long)steps[j]);
    }
    free(steps);
    if (st)
        return hpt_error_set(st, "%s: no loadable checkpoint (%s)", r->ckpt_dir, hpt_error_msg());
    retrim_logs(r, o, meta->step); /* only now: a failed load leaves the logs as they were */
    r->ckpt_load_s = now_s() - t0;
    r->cursor = meta->samples;
    r->start_step = (int)meta->step;
    r->resume_from = meta->step;
    r->opt.t = (int)meta->adam_t;
    r->skipped_total = (int)meta->skipped_total;
    r->consecutive = (int)meta->consecutive_skips;
    /* the checkpoint does not depend on CP (issue 31); its writer's CP is
     * recorded (attribute cp, 1 when absent) and named */
    char cp[48] = "", wcp[48] = "";
    if (r->comm.cp > 1)
        snprintf(cp, sizeof cp, ", context parallel CP %d", r->comm.cp);
    if (meta->cp > 1)
        snprintf(wcp, sizeof wcp, ", context parallel CP %d", meta->cp);
    if (r->root)
        fprintf(stderr, "hpt-train: resumed from %s/step_%08lld (written by TP %d x PP %d x DP %d%s%s%s%s) "
                "in %.3f s, continuing as TP %d x PP %d x DP %d%s%s%s%s\n", r->ckpt_dir,
                (long long)meta->step, meta->tp, meta->pp, meta->dp, zero_words(meta->zero1),
                meta->sequence_parallel > 0 ? ", sequence parallel" : "",
                recompute_words(meta->recompute), wcp, now_s() - t0, r->comm.tp, r->comm.pp, r->comm.dp,
                zero_words(o->zero), o->sequence_parallel && r->comm.tp > 1
                ? ", sequence parallel" : "", recompute_words(o->recompute), cp);
    if (r->root)
        note_optimizer_change(o, meta);
    return HPT_OK;
}

/* The training state to store with the tensors. */
static void fill_meta(run_state *r, const hpt_train_opts *o, int step, hpt_ckpt_meta *m)
{
    memset(m, 0, sizeof *m);
    m->format_version = HPT_CKPT_VERSION;
    snprintf(m->hpt_version, sizeof m->hpt_version, "%s", PACKAGE_VERSION);
    FILE *f = fmemopen(m->config_json, sizeof m->config_json - 1, "w");
    if (f) {
        hpt_config_write(&r->cfg, f);
        fclose(f);
    }
    m->step = step;
    m->samples = r->cursor;
    m->adam_t = r->opt.t;
    m->skipped_total = r->skipped_total;
    m->consecutive_skips = r->consecutive;
    m->global_batch = (int64_t)o->batch * o->grad_accum * r->comm.dp;
    m->seq_len = o->seq_len;
    m->micro_batch = o->batch;
    m->tp = r->comm.tp;
    m->pp = r->comm.pp;
    m->dp = r->comm.dp;
    m->zero1 = o->zero; /* the ZeRO stage (0, 1, 2) */
    m->seed = o->seed;
    m->sequence_parallel = o->sequence_parallel && r->comm.tp > 1;
    m->recompute = o->recompute;
    m->cp = r->comm.cp; /* metadata: the tensors do not depend on CP */
    optimizer_words(o, m->optimizer, sizeof m->optimizer);
}

hpt_status save_checkpoint(run_state *r, const hpt_train_opts *o, int step, FILE *out)
{
    hpt_ckpt_meta meta;
    fill_meta(r, o, step, &meta);
    hpt_ckpt_state cs = ckpt_state(r);
    double secs = 0;
    int64_t bytes = 0;
    cs.fault_stop = r->fault_stop_save; /* test: --fault-stall-at save */
    r->fault_stop_save = 0;
    hpt_flight_save_begin(r->comm.fr); /* the watchdog's save clock (lib/watchdog.h) */
    zero3_gather_all(r); /* ZeRO-3: the writers read the whole block */
    hpt_status st = hpt_checkpoint_save(r->ckpt_dir, &cs, &meta, o->keep, &secs, &bytes);
    zero3_drop_all(r);
    hpt_flight_save_end(r->comm.fr);
    if (!st && r->root) {
        fprintf(out, "step %d: checkpoint %s/step_%08d (%.1f MiB in %.2f s, %.0f MiB/s)\n", step,
                r->ckpt_dir, step, bytes / 1048576.0, secs, secs > 0 ? bytes / 1048576.0 / secs : 0);
        fflush(out);
    }
    if (!st)
        hpt_metrics_event(r->metrics, step, 0, "checkpoint_save",
                          "%s/step_%08d: %lld bytes in %.3f s", r->ckpt_dir, step,
                          (long long)bytes, secs);
    return st;
}

/* --async-save: snapshot step `step` and start its background write
 * (collective). A failure (no space, the file cannot be created) is
 * reported once and training goes on: the previous checkpoints are
 * untouched. Returns HPT_OK. */
hpt_status start_async_save(run_state *r, const hpt_train_opts *o, int step, FILE *out)
{
    hpt_ckpt_meta meta;
    fill_meta(r, o, step, &meta);
    hpt_ckpt_state cs = ckpt_state(r);
    hpt_flight_save_begin(r->comm.fr); /* its collective create (lib/watchdog.h) */
    zero3_gather_all(r);
    hpt_status st = hpt_ckpt_async_start(r->async, r->ckpt_dir, &cs, &meta, o->keep);
    if (r->z3) { /* ZeRO-3: the snapshot copies the whole block before it is dropped */
        (void)hpt_ckpt_async_snapshot_wait(r->async); /* in the caller's stall time */
        zero3_drop_all(r);
    }
    hpt_flight_save_end(r->comm.fr);
    if (st) {
        if (r->root)
            fprintf(stderr, "hpt-train: warning: step %d: %s; training goes on\n", step,
                    hpt_error_msg());
        hpt_metrics_event(r->metrics, step, 0, "checkpoint_error", "%s", hpt_error_msg());
    } else if (r->root && getenv("HPT_CKPT_PROFILE")) {
        fprintf(out, "step %d: checkpoint snapshot taken, writing in the background\n", step);
        fflush(out);
    }
    return HPT_OK;
}

/* --async-save: finish the save in flight, if any (collective; every rank
 * calls it at the same boundary, after step `at`): wait for the writers,
 * commit, then print "checkpoint ..." and record the checkpoint_save event
 * with the save's figures — only now is the step saved. A failed save is
 * reported once and training goes on. Adds the time waited here to the
 * step's checkpoint seconds; returns the save's start-to-commit seconds
 * (0: none in flight). */
double finish_async_save(run_state *r, int at, FILE *out)
{
    if (hpt_ckpt_async_inflight(r->async) < 0)
        return 0;
    double t0 = now_s();
    hpt_ckpt_async_info in;
    hpt_ckpt_state cs = ckpt_state(r);
    hpt_flight_save_begin(r->comm.fr); /* its collective close and commit */
    hpt_status st = hpt_ckpt_async_finish(r->async, &cs, &in);
    hpt_flight_save_end(r->comm.fr);
    r->ckpt_save_s += now_s() - t0;
    if (st) {
        if (r->root)
            fprintf(stderr, "hpt-train: warning: step %lld: %s; training goes on\n",
                    (long long)in.step, hpt_error_msg());
        hpt_metrics_event(r->metrics, in.step, 0, "checkpoint_error", "%s", hpt_error_msg());
        return in.total_s;
    }
    if (r->root) {
        fprintf(out, "step %lld: checkpoint %s/step_%08lld (%.1f MiB; async: training stalled "
                "%.3f s, written in %.2f s in the background, committed after step %d)\n",
                (long long)in.step, r->ckpt_dir, (long long)in.step, in.bytes / 1048576.0,
                in.snapshot_s + in.copy_wait_s, in.write_s, at);
        if (getenv("HPT_CKPT_PROFILE"))
            fprintf(out, "step %lld: async stall: snapshot %.4f s + waiting for the copy %.4f s; "
                    "the writer copied in %.4f s\n", (long long)in.step, in.snapshot_s,
                    in.copy_wait_s, in.copy_s);
        fflush(out);
    }
    /* the figures first: a long path is what the 256-byte message cuts */
    hpt_metrics_event(r->metrics, in.step, 0, "checkpoint_save",
                      "async: %lld bytes, snapshot (training stall) %.3f s, background write "
                      "%.3f s, commit waited %.3f s, committed after step %d, %.3f s in all; "
                      "%s/step_%08lld", (long long)in.bytes, in.snapshot_s + in.copy_wait_s,
                      in.write_s, in.wait_s,
                      at, in.total_s, r->ckpt_dir, (long long)in.step);
    hpt_metrics_write_events(r->metrics);
    return in.total_s;
}

hpt_status setup_async_save(run_state *r, const hpt_train_opts *o)
{
    int level = MPI_THREAD_SINGLE;
    if (!o->async_save || !r->ckpt_dir[0])
        return HPT_OK;
    if (o->save_every <= 0) { /* no periodic saves: the stop saves are synchronous anyway */
        if (r->root)
            fprintf(stderr, "hpt-train: warning: --async-save applies to the periodic saves of "
                    "--save-every only; without --save-every it does nothing (the saves at a "
                    "stop are synchronous)\n");
        return HPT_OK;
    }
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_FUNNELED) {
        if (r->root)
            fprintf(stderr, "hpt-train: warning: --async-save needs MPI_THREAD_FUNNELED (MPI "
                    "provides level %d): saving synchronously\n", level);
        return HPT_OK;
    }
    if (!(r->async = hpt_ckpt_async_new()))
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (--async-save)");
    hpt_ckpt_state cs = ckpt_state(r);
    return hpt_ckpt_async_reserve(r->async, &cs);
}
