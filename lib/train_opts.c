/* train_opts.c — the trainer's options: defaults, the checks that need
 * no communication, the --export target, the agreement that every rank
 * was given the same options, and the checks against the world size; see
 * train_opts.h and train.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan.h"
#include "ckpt_read.h"
#include "cli.h"
#include "comm.h"
#include "fsutil.h"
#include "metrics.h"
#include "train_export.h"
#include "flight.h"
#include "trace.h"
#include "attention_ring.h"
#include "train_opts.h"

const char *const hpt_stall_at_names[5] = {"step", "boundary", "bucket", "save", "end"};

void hpt_train_opts_default(hpt_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model = "small";
    o->data = "data/gcide";
    o->backend = "cpu";
    o->comm = "auto";
    o->batch = 4;
    o->seq_len = 256;
    o->grad_accum = 1;
    o->pp_virtual = 1;
    o->zero3_prefetch = 1;
    o->steps = 1000;
    o->optim = (hpt_optim_opts){.lr = 6e-4f, .min_lr = 6e-5f, .warmup = 100, .total_steps = 1000,
                                .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                .weight_decay = 0.1f, .max_norm = 1.0f};
    o->seed = 1234;
    o->eval_interval = 100;
    o->eval_batches = 8;
    o->eval_batches_default = 1;
    o->max_skips = 5;
    o->tie_embeddings = -1;
    o->tp = 1;
    o->cp = 1;
    o->pp = 1;
    o->dp = 0;
    o->keep = 3;
    o->resume = 1;
    o->save_signals = 1;
    o->metrics_interval = 10;
    o->slow_factor = 1.5;
    o->spike_factor = 4.0;
    o->fault_nan_rank = -1;
    o->fault_slow_rank = -1;
    o->event_window = 50;
    o->collective_timeout = -1;
    o->fault_stall_rank = -1;
}

hpt_status hpt_train_opts_choice(hpt_train_opts *o, const char *opt, const char *arg)
{
    if (!strcmp(opt, "fault-stall-at")) {
        for (int i = 0; i <= HPT_STALL_AT_END; i++)
            if (!strcmp(arg, hpt_stall_at_names[i])) {
                o->fault_stall_at = i;
                return HPT_OK;
            }
        return hpt_error_set(HPT_ERR_USAGE, "--fault-stall-at '%s': expected step, boundary, "
                             "bucket, save or end", arg);
    }
    if (!strcmp(opt, "resume")) {
        static const char *const w[] = {"none", "auto", "strict"}; /* o->resume 0, 1, 2 */
        for (int i = 0; i < 3; i++)
            if (!strcmp(arg, w[i])) {
                o->resume = i;
                return HPT_OK;
            }
        return hpt_error_set(HPT_ERR_USAGE, "--resume '%s': expected auto, strict or none", arg);
    }
    return hpt_plan_schedule_parse(arg, &o->pp_schedule);
}

/* A plain decimal number of at most 9 digits at *p, which moves past it;
 * -1 when there is none. */
static long digits_at(const char **p)
{
    long v = 0;
    int n = 0;
    for (; **p >= '0' && **p <= '9'; (*p)++, n++)
        v = n < 9 ? 10 * v + (**p - '0') : v;
    return n >= 1 && n <= 9 ? v : -1;
}

hpt_status hpt_train_opts_fault_anomaly(hpt_train_opts *o, const char *arg)
{
    const char *colon = strchr(arg, ':'), *p = colon ? colon + 1 : "";
    long from = digits_at(&p), to = -1;
    if (o->fault_anomaly) /* one forced anomaly per run: a second would replace the first */
        return hpt_error_set(HPT_ERR_USAGE, "--fault-anomaly '%s': given twice (after '%s'); one "
                             "forced anomaly per run", arg, o->fault_anomaly);
    if (*p == '-') {
        p++;
        to = digits_at(&p);
    }
    for (int k = HPT_FAULT_ANOMALY_SPIKE; colon && k <= HPT_FAULT_ANOMALY_DROP; k++) {
        const char *name = hpt_fault_anomaly_kinds[k];
        if (strlen(name) == (size_t)(colon - arg) && !strncmp(arg, name, strlen(name)) && !*p &&
            from >= 1 && to >= from) {
            o->fault_anomaly = arg;
            o->fault_anomaly_kind = k;
            o->fault_anomaly_from = (int)from;
            o->fault_anomaly_to = (int)to;
            return HPT_OK;
        }
    }
    return hpt_error_set(HPT_ERR_USAGE, "--fault-anomaly '%s': expected KIND:A-B, KIND "
                         "grad_norm_spike or throughput_drop, steps 1 <= A <= B (e.g. "
                         "throughput_drop:5-30)", arg);
}

hpt_status hpt_train_opts_agree_parse(MPI_Comm comm, hpt_status st, int action)
{
    st = hpt_comm_agree(comm, st);
    int lo = action, hi = action;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, comm);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, comm);
    if (!st && lo != hi)
        st = hpt_error_set(HPT_ERR_USAGE, "the ranks were given other options (--help, --version "
                           "or --print-config on some ranks only): every rank must run the same "
                           "hpt-train command");
    return st;
}

hpt_status hpt_train_opts_print_config(const hpt_train_opts *o, FILE *out)
{
    hpt_config cfg;
    hpt_status st = hpt_config_resolve(o->model, &cfg);
    if (st)
        return st;
    if (o->tie_embeddings >= 0)
        cfg.tie_word_embeddings = o->tie_embeddings;
    return out ? hpt_config_write(&cfg, out) : HPT_OK;
}

hpt_status hpt_train_opts_validate(const hpt_train_opts *o)
{
    const struct {
        const char *opt;
        long v;
    } pos[] = {{"--batch", o->batch},           {"--seq-len", o->seq_len},
               {"--grad-accum", o->grad_accum}, {"--steps", o->steps},
               {"--eval-batches", o->eval_batches}, {"--max-skips", o->max_skips}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0)
            return hpt_error_set(HPT_ERR_USAGE, "%s %ld: must be > 0", pos[i].opt, pos[i].v);
    if ((long long)o->batch * o->seq_len > 2147483647LL / 64)
        return hpt_error_set(HPT_ERR_USAGE, "--batch %d x --seq-len %d: micro-batch too large",
                             o->batch, o->seq_len);
    if (o->sequence_parallel && o->tp > 1 && (o->batch * o->seq_len) % o->tp)
        return hpt_error_set(HPT_ERR_USAGE, "--sequence-parallel: a micro-batch of --batch %d x "
                             "--seq-len %d = %d tokens does not split into --tp %d equal parts "
                             "(choose them so that TP divides batch x seq-len)", o->batch,
                             o->seq_len, o->batch * o->seq_len, o->tp);
    const hpt_optim_opts *p = &o->optim;
    if (!(p->lr > 0) || !isfinite(p->lr))
        return hpt_error_set(HPT_ERR_USAGE, "--lr %g: must be > 0", p->lr);
    if (!(p->min_lr >= 0) || p->min_lr > p->lr)
        return hpt_error_set(HPT_ERR_USAGE, "--min-lr %g: must be in [0, --lr %g]", p->min_lr,
                             p->lr);
    if (p->warmup < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--warmup %d: must be >= 0", p->warmup);
    if (o->nan_steps)
        for (const char *p = o->nan_steps; *p; p++)
            if (!(*p == ',' || (*p >= '0' && *p <= '9')))
                return hpt_error_set(HPT_ERR_USAGE,
                                     "--fault-nan-steps '%s': expected step numbers like 3,4",
                                     o->nan_steps);
    if (o->init_from && !*o->init_from)
        return hpt_error_set(HPT_ERR_USAGE, "--init-from '': expected a weights file or directory");
    if (o->export_path && !*o->export_path)
        return hpt_error_set(HPT_ERR_USAGE, "--export '': expected a file name");
    hpt_status est = export_check_opts(o);
    if (est)
        return est;
    if (o->stop_at < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--stop-at %d: must be >= 1 (a step number; 0 = never)",
                             o->stop_at);
    if (o->stop_at && !o->run_dir && !o->ckpt_dir)
        return hpt_error_set(HPT_ERR_USAGE, "--stop-at needs --run-dir or --checkpoint-dir");
    if (o->max_runtime > 0 && !o->run_dir && !o->ckpt_dir) /* it stops with a checkpoint */
        return hpt_error_set(HPT_ERR_USAGE, "--max-runtime needs --run-dir or --checkpoint-dir "
                             "(it checkpoints before it stops)");
    if (!o->comm || (strcmp(o->comm, "mpi") && strcmp(o->comm, "nccl") && strcmp(o->comm, "auto")))
        return hpt_error_set(HPT_ERR_USAGE, "--comm %s: unknown communication backend (mpi, nccl "
                             "or auto)", o->comm ? o->comm : "(null)");
    if (!strcmp(o->comm, "nccl") && !strcmp(o->backend, "cpu"))
        return hpt_error_set(HPT_ERR_USAGE, "--comm nccl: NCCL moves GPU buffers; --backend cpu keeps "
                             "its buffers in host memory (use --comm mpi, or --backend cuda)");
    if (o->async_save && !o->run_dir && !o->ckpt_dir)
        return hpt_error_set(HPT_ERR_USAGE, "--async-save needs --run-dir or --checkpoint-dir "
                             "(it writes checkpoints)");
    if (o->save_every < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--save-every %d: must be >= 0 (0 = only on a stop "
                             "signal and at --max-runtime/--stop-at)", o->save_every);
    if (o->keep < 1)
        return hpt_error_set(HPT_ERR_USAGE, "--keep %d: must be >= 1", o->keep);
    if (!(o->max_runtime >= 0))
        return hpt_error_set(HPT_ERR_USAGE, "--max-runtime %g: must be >= 0 seconds (0 = none)",
                             o->max_runtime);
    if (o->eval_interval < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--eval-interval %d: must be >= 0", o->eval_interval);
    if (o->trace_steps) {
        int a, b;
        hpt_status ts = hpt_trace_parse(o->trace_steps, &a, &b);
        if (ts)
            return ts;
        if (b > o->steps)
            return hpt_error_set(HPT_ERR_USAGE, "--trace-steps %s: beyond the run: it has %d "
                                 "steps (--steps)", o->trace_steps, o->steps);
        if ((o->metrics && !strcmp(o->metrics, "none")) || (!o->metrics && !o->run_dir))
            return hpt_error_set(HPT_ERR_USAGE, "--trace-steps %s: the trace goes into the "
                                 "metrics file: needs --run-dir DIR or --metrics PATH (not "
                                 "--metrics none)", o->trace_steps);
        if (hpt_flight_size_from_env() == 0) /* refused before the run directory is touched */
            return hpt_error_set(HPT_ERR_USAGE, "--trace-steps %s records the communication from "
                                 "the flight recorder, which HPT_FLIGHT_RECORDER=0 turns off "
                                 "(unset it)", o->trace_steps);
    }
    if (o->metrics_interval < 1)
        return hpt_error_set(HPT_ERR_USAGE, "--metrics-interval %d: must be >= 1",
                             o->metrics_interval);
    if (!(o->peak_flops >= 0) || !isfinite(o->peak_flops))
        return hpt_error_set(HPT_ERR_USAGE, "--peak-flops %g: must be >= 0 (0 = backend default)",
                             o->peak_flops);
    if (!(o->slow_factor > 1) || !(o->spike_factor > 1))
        return hpt_error_set(HPT_ERR_USAGE, "--slow-rank-factor %g / --spike-factor %g: must be > 1",
                             o->slow_factor, o->spike_factor);
    if (o->fault_slow_rank >= 0 && !(o->fault_slow_ms > 0))
        return hpt_error_set(HPT_ERR_USAGE, "--fault-slow-rank needs --fault-slow-ms > 0");
    if (o->event_window < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--event-window %d: must be >= 0 steps (0 = a "
                             "job-log line for every anomaly)", o->event_window);
    /* a forced anomaly that could not take effect would make a test pass vacuously */
    if (o->fault_anomaly && o->fault_anomaly_from > o->steps)
        return hpt_error_set(HPT_ERR_USAGE, "--fault-anomaly '%s': step %d is beyond --steps %d",
                             o->fault_anomaly, o->fault_anomaly_from, o->steps);
    if (o->fault_anomaly && (o->metrics ? !strcmp(o->metrics, "none") : !o->run_dir))
        return hpt_error_set(HPT_ERR_USAGE, "--fault-anomaly needs the metrics file (--run-dir, "
                             "or --metrics FILE other than none): anomalies are detected there");
    if (!(p->beta1 >= 0 && p->beta1 < 1) || !(p->beta2 >= 0 && p->beta2 < 1))
        return hpt_error_set(HPT_ERR_USAGE, "--beta1 %g / --beta2 %g: must be in [0, 1)", p->beta1,
                             p->beta2);
    if (!(p->eps > 0))
        return hpt_error_set(HPT_ERR_USAGE, "--adam-eps %g: must be > 0", p->eps);
    if (!(p->weight_decay >= 0))
        return hpt_error_set(HPT_ERR_USAGE, "--weight-decay %g: must be >= 0", p->weight_decay);
    if (!(p->max_norm >= 0))
        return hpt_error_set(HPT_ERR_USAGE, "--clip %g: must be >= 0 (0 disables clipping)",
                             p->max_norm);
    return HPT_OK;
}

int train_opts_in_list(const char *list, int step)
{
    if (!list)
        return 0;
    for (const char *p = list; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (v == step)
            return 1;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

/* --export FILE, checked before any step (hpt_check_output_file). Its directory
 * may be the --run-dir that this run has not created yet (train_rundir_write
 * creates it and checks that it is writable). FILE must not be one of the
 * run's own files (hpt_check_export_not_run_file). Errors: HPT_ERR_IO naming
 * FILE; HPT_ERR_USAGE (a checkpoint, a run's own file). */
hpt_status train_opts_check_export(const hpt_train_opts *o)
{
    char dir[4096], run[4096], ck[4200];
    struct stat sb;
    hpt_status st = export_check_st_path(o, o->run_dir);
    if (st)
        return st;
    if (o->ckpt_dir)
        snprintf(ck, sizeof ck, "%s", o->ckpt_dir);
    else if (o->run_dir)
        snprintf(ck, sizeof ck, "%s/checkpoints", o->run_dir);
    const char *run_ckpt = o->ckpt_dir || o->run_dir ? ck : NULL;
    hpt_path_dir(o->export_path, dir, sizeof dir);
    if (o->run_dir && snprintf(run, sizeof run, "%s", o->run_dir) < (int)sizeof run) {
        for (size_t n = strlen(run); n > 1 && run[n - 1] == '/'; n--)
            run[n - 1] = 0;
        if (!strcmp(dir, run) && stat(run, &sb) != 0) /* not created yet: only the names */
            return hpt_check_export_not_run_file("--export", o->export_path, o->run_dir,
                                                 run_ckpt);
    }
    st = hpt_check_output_file("--export", o->export_path);
    if (st)
        return st;
    if (hpt_ckpt_file_is_checkpoint(o->export_path))
        return hpt_error_set(HPT_ERR_USAGE, "--export %s: is an hpt checkpoint: the export "
                             "(weights only) would replace it; give another file name",
                             o->export_path);
    if ((st = hpt_check_export_not_run_file("--export", o->export_path, o->run_dir, run_ckpt)))
        return st;
    /* The export is written to PATH.tmp and renamed (io/h5out.h): create
     * and remove that name now, so a place no file can be created in
     * (root's access() says yes to /proc, a read-only mount) is refused
     * before training, not after it. An existing PATH.tmp (a crash's) is
     * overwritten later anyway. */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->export_path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno != EEXIST)
        return hpt_error_set(HPT_ERR_IO, "--export %s: cannot create %s: %s", o->export_path, tmp,
                             strerror(errno));
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    return HPT_OK;
}

/* The options as lines in hpt-train's own words ("--lr 0.0006", "--zero
 * 1"), every one that the ranks must share, into buf[n] (n may be
 * 0: nothing written). Returns the length the whole text needs. */
static size_t opts_lines(const hpt_train_opts *o, char *buf, size_t n)
{
    size_t at = 0;
    char g[40];
#define L(...)                                                                                 \
    do {                                                                                       \
        int k_ = snprintf(at < n ? buf + at : NULL, at < n ? n - at : 0, __VA_ARGS__);         \
        at += k_ > 0 ? (size_t)k_ : 0;                                                         \
    } while (0)
#define S(name, v) L("--" name " %s\n", (v) ? (v) : "(not given)")
#define I(name, v) L("--" name " %lld\n", (long long)(v))
#define B(name, v) L("--" name " %s\n", (v) ? "(given)" : "(not given)")
#define D(name, v) L("--" name " %s\n", hpt_cli_format_g((double)(v), 0, g, sizeof g))
#define F(name, v) L("--" name " %s\n", hpt_cli_format_g((double)(v), 1, g, sizeof g))
    S("model", o->model); S("data", o->data); S("val-data", o->val_data);
    S("run-dir", o->run_dir); S("backend", o->backend);
    S("precision", hpt_precision_name(o->precision)); S("comm", o->comm);
    I("batch", o->batch); I("seq-len", o->seq_len); I("grad-accum", o->grad_accum);
    I("steps", o->steps); F("lr", o->optim.lr); F("min-lr", o->optim.min_lr);
    I("warmup", o->optim.warmup); F("beta1", o->optim.beta1); F("beta2", o->optim.beta2);
    F("adam-eps", o->optim.eps); F("weight-decay", o->optim.weight_decay);
    F("clip", o->optim.max_norm); I("seed", o->seed); I("eval-interval", o->eval_interval);
    L("--eval-batches %d%s\n", o->eval_batches, o->eval_batches_default ? " (the default)" : "");
    I("max-skips", o->max_skips);
    L("%s\n", o->tie_embeddings < 0 ? "--tie-embeddings/--untie-embeddings (not given)"
              : o->tie_embeddings ? "--tie-embeddings (given)" : "--untie-embeddings (given)");
    S("fault-nan-steps", o->nan_steps); S("export", o->export_path);
    S("export-dtype", o->export_bf16 ? "bf16" : "f32"); I("export-shard-size", o->export_shard_size);
    S("init-from", o->init_from); I("tp", o->tp); I("cp", o->cp); I("pp", o->pp);
    I("dp", o->dp);
    I("zero", o->zero); I("zero3-prefetch", o->zero3_prefetch);
    I("zero-shard-group", o->zero_shard_group);
    S("recompute", o->recompute == 0 ? "none" : o->recompute == 1 ? "full" : "selective");
    B("sequence-parallel", o->sequence_parallel);
    S("pp-schedule", hpt_plan_schedule_str(o->pp_schedule));
    I("pp-virtual", o->pp_virtual); S("pp-split", o->pp_split);
    B("comm-stats", o->comm_stats); S("checkpoint-dir", o->ckpt_dir);
    I("save-every", o->save_every); I("keep", o->keep); B("async-save", o->async_save);
    S("resume", o->resume == 0 ? "none" : o->resume == 1 ? "auto" : "strict");
    D("max-runtime", o->max_runtime); B("no-signal-save", !o->save_signals);
    S("signals", o->signals); B("log-samples", o->log_samples); I("stop-at", o->stop_at);
    S("trace-steps", o->trace_steps);
    S("metrics", o->metrics); I("metrics-interval", o->metrics_interval);
    D("peak-flops", o->peak_flops); D("slow-rank-factor", o->slow_factor);
    D("spike-factor", o->spike_factor); I("fault-nan-rank", o->fault_nan_rank);
    I("fault-slow-rank", o->fault_slow_rank); D("fault-slow-ms", o->fault_slow_ms);
    I("event-window", o->event_window); S("fault-anomaly", o->fault_anomaly);
    for (int i = 0; i < o->nalerts; i++)
        L("--alert %s\n", o->alerts[i].text);
    D("collective-timeout", o->collective_timeout); I("fault-stall-rank", o->fault_stall_rank);
    I("fault-stall-step", o->fault_stall_step);
    S("fault-stall-at", hpt_stall_at_names[o->fault_stall_at]);
#undef L
#undef S
#undef I
#undef B
#undef D
#undef F
    return at;
}

/* Every rank must have been given the same options (a launcher that builds
 * them per node, an MPMD command line): otherwise DP replicas train apart
 * silently (another --lr), or ranks hang or crash in a collective (another
 * --steps, --seq-len). Compares a hash over the world (FNV-1a 64 of
 * opts_lines) before anything else is collective; on a difference the
 * lowest differing rank sends its lines and rank 0 names the first option
 * that differs. Collective over comm; the same status everywhere. Errors:
 * HPT_ERR_USAGE (HPT_ERR_INTERNAL: out of memory, agreed). */
hpt_status train_opts_agree(MPI_Comm comm, const hpt_train_opts *o)
{
    size_t len = opts_lines(o, NULL, 0);
    char *mine = calloc(1, len + 1);
    int rank, ok = mine != NULL, all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok) {
        free(mine);
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory comparing the ranks' options");
    }
    opts_lines(o, mine, len + 1);
    uint64_t h = 1469598103934665603ull, lo, hi, h0;
    for (const char *p = mine; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    MPI_Comm_rank(comm, &rank);
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, comm);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, comm);
    if (lo == hi) {
        free(mine);
        return HPT_OK;
    }
    h0 = h;
    MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, comm);
    int me = h != h0 ? rank : INT_MAX, bad;
    MPI_Allreduce(&me, &bad, 1, MPI_INT, MPI_MIN, comm); /* never 0, never INT_MAX */
    char msg[1024] = "";
    if (rank == bad)
        MPI_Send(mine, (int)(len + 1), MPI_CHAR, 0, 0, comm);
    if (rank == 0) {
        MPI_Status ms;
        int count = 0;
        MPI_Probe(bad, 0, comm, &ms);
        MPI_Get_count(&ms, MPI_CHAR, &count);
        char *theirs = calloc(1, (size_t)count + 1);
        MPI_Recv(theirs ? theirs : msg, theirs ? count : 0, MPI_CHAR, bad, 0, comm,
                 MPI_STATUS_IGNORE);
        const char *a = "", *b = "", *p = mine, *q = theirs ? theirs : "";
        while (*p && *q) { /* the first line that differs */
            size_t lp = strcspn(p, "\n"), lq = strcspn(q, "\n");
            if (lp != lq || memcmp(p, q, lp)) {
                a = p, b = q;
                break;
            }
            p += lp + (p[lp] == '\n');
            q += lq + (q[lq] == '\n');
        }
        snprintf(msg, sizeof msg, "rank %d was given other options than rank 0 (every rank must "
                 "run the same hpt-train command): %.*s on rank 0, %.*s on rank %d", bad,
                 (int)strcspn(a, "\n"), a, (int)strcspn(b, "\n"), b, bad);
        free(theirs);
    }
    MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, comm);
    free(mine);
    return hpt_error_set(HPT_ERR_USAGE, "%s", msg);
}

/* Context parallelism's rules: the zigzag split of --seq-len, and the
 * combinations it refuses: ZeRO-2/3 and HSDP (they would shard over the
 * CP x DP replicas, which is not tested yet). Any --comm rings: MPI (host
 * staging on the CUDA backend) or NCCL (lib/comm_nccl.c: a two-rank
 * communicator per ring edge). */
static hpt_status train_opts_check_cp(const hpt_train_opts *o)
{
    if (o->cp <= 1)
        return HPT_OK;
    hpt_status st = hpt_cp_check(o->seq_len, o->cp);
    if (st)
        return st;
    long local = (long)o->batch * (o->seq_len / o->cp); /* a rank's tokens of a micro-batch */
    if (o->sequence_parallel && o->tp > 1 && local % o->tp)
        return hpt_error_set(HPT_ERR_USAGE, "--sequence-parallel with --cp %d: a rank's "
                             "micro-batch of --batch %d x --seq-len %d / CP %d = %ld tokens does "
                             "not split into --tp %d equal parts (choose them so that TP divides "
                             "batch x seq-len / CP)", o->cp, o->batch, o->seq_len, o->cp, local,
                             o->tp);
    if (o->zero >= 2)
        return hpt_error_set(HPT_ERR_USAGE, "--cp %d with --zero %d: not supported yet (ZeRO-1 "
                             "shards over the CP x DP replicas; use --zero 1)", o->cp, o->zero);
    if (o->zero_shard_group)
        return hpt_error_set(HPT_ERR_USAGE, "--cp %d with --zero-shard-group: not supported yet "
                             "(HSDP's groups are DP ranks; use --zero 1 without it)", o->cp);
    return HPT_OK;
}

/* Layout checks that need no communication: every rank reaches the same
 * verdict, so no rank is left waiting in a collective. */
hpt_status train_opts_check_layout(MPI_Comm comm, const hpt_train_opts *o, int *dp)
{
    int world;
    MPI_Comm_size(comm, &world);
    hpt_status st = hpt_grid_check_cp(world, o->tp, o->cp, o->pp, o->dp, dp);
    if (!st)
        st = train_opts_check_cp(o);
    if (st)
        return st;
    /* test faults that could not take effect would make a test pass vacuously */
    if (o->fault_nan_rank != -1 && (o->fault_nan_rank < 0 || o->fault_nan_rank >= world))
        return hpt_error_set(HPT_ERR_USAGE, "--fault-nan-rank %d: not a rank of this %d-rank job",
                             o->fault_nan_rank, world);
    if (o->fault_nan_rank >= 0 && !o->nan_steps)
        return hpt_error_set(HPT_ERR_USAGE, "--fault-nan-rank needs --fault-nan-steps");
    if (o->fault_slow_rank != -1 && (o->fault_slow_rank < 0 || o->fault_slow_rank >= world))
        return hpt_error_set(HPT_ERR_USAGE, "--fault-slow-rank %d: not a rank of this %d-rank job",
                             o->fault_slow_rank, world);
    if (o->fault_slow_ms != 0 && o->fault_slow_rank < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--fault-slow-ms needs --fault-slow-rank");
    if (o->fault_stall_rank != -1 && (o->fault_stall_rank < 0 || o->fault_stall_rank >= world))
        return hpt_error_set(HPT_ERR_USAGE, "--fault-stall-rank %d: not a rank of this %d-rank job",
                             o->fault_stall_rank, world);
    if ((o->fault_stall_rank >= 0) != (o->fault_stall_step != 0) || o->fault_stall_step < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--fault-stall-rank and --fault-stall-step (>= 1) go "
                             "together");
    if (o->fault_stall_at != HPT_STALL_AT_STEP && o->fault_stall_rank < 0)
        return hpt_error_set(HPT_ERR_USAGE, "--fault-stall-at %s needs --fault-stall-rank "
                             "and --fault-stall-step", hpt_stall_at_names[o->fault_stall_at]);
    if (o->pp_virtual < 1)
        return hpt_error_set(HPT_ERR_USAGE, "--pp-virtual %d: must be >= 1 (model chunks per "
                             "pipeline rank)", o->pp_virtual);
    if (o->pp_virtual > 1 && o->pp_schedule != HPT_PLAN_SCHEDULE_INTERLEAVED)
        return hpt_error_set(HPT_ERR_USAGE, "--pp-virtual %d needs --pp-schedule interleaved (the "
                             "chunks of a rank only pay with that schedule)", o->pp_virtual);
    if (o->pp_schedule == HPT_PLAN_SCHEDULE_INTERLEAVED) {
        int P = o->pp, M = o->grad_accum;
        if (P < 2)
            return hpt_error_set(HPT_ERR_USAGE, "--pp-schedule interleaved needs --pp >= 2 (it "
                                 "interleaves model chunks over the pipeline ranks)");
        if (o->pp_virtual < 2)
            return hpt_error_set(HPT_ERR_USAGE, "--pp-schedule interleaved needs --pp-virtual V "
                                 ">= 2 (model chunks per pipeline rank; V = 1 is 1f1b)");
        if (M % P) {
            int lo = M / P * P, hi = lo + P;
            char near[64];
            if (lo > 0)
                snprintf(near, sizeof near, "%d or %d", lo, hi);
            else
                snprintf(near, sizeof near, "%d", hi);
            return hpt_error_set(HPT_ERR_USAGE, "--grad-accum %d: --pp-schedule interleaved needs "
                                 "the micro-batches per step to be a multiple of --pp %d (the "
                                 "nearest: %s)", M, P, near);
        }
    }
    /* on DP 1 ZeRO-2/3 run as ZeRO-0 (lib/train.c's note), as hpt-plan plans them */
    if (o->pp_schedule == HPT_PLAN_SCHEDULE_ZBH1 && o->zero >= 2 && *dp > 1 && o->pp > 1)
        return hpt_error_set(HPT_ERR_USAGE, "--pp-schedule zb-h1 with --zero %d: not supported "
                             "(its per-micro-batch reduce-scatters would start at a deferred "
                             "weight-gradient pass, after later micro-batches' norm gradients); "
                             "use --zero 1", o->zero);
    int n = o->zero_shard_group;
    if (n && *dp % n) {
        char fit[256] = "";
        for (int d = 1, k = 0; d <= *dp; d++)
            if (*dp % d == 0)
                k += snprintf(fit + k, sizeof fit - (size_t)k, "%s%d", k ? ", " : "", d);
        return hpt_error_set(HPT_ERR_USAGE, "--zero-shard-group %d does not divide DP %d (the "
                             "DP ranks split into shard groups of that size; one of %s)", n, *dp,
                             fit);
    }
    if (n && !o->zero && *dp > 1)
        return hpt_error_set(HPT_ERR_USAGE, "--zero-shard-group %d needs --zero 1, 2 or 3 (it "
                             "shards the ZeRO state within groups of %d DP ranks)", n, n);
    return HPT_OK;
}
