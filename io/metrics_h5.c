/* metrics_h5.c — the metrics file's layout and the HDF5 side of its writer
 * (metrics_h5.h, docs/METRICS.md). */
#include "hpt_config.h"

#include "metrics_h5.h"

#include "h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------- columns */

/* Global per-step columns (/steps/NAME, shape [rows]). The first four are
 * integers; the rest float64. */
const hpt_metrics_column hpt_metrics_step_cols[HPT_SC_COUNT] = {
    {"step", "1", "optimizer step (1-based)"},
    {"segment", "1", "index into /segments of the run segment that wrote the row"},
    {"repeated", "1", "1: this step was already logged by an earlier segment (redone after a "
                      "resume); curves keep the last row of each step"},
    {"skipped", "1", "1: non-finite loss or gradient norm, no update"},
    {"wall_time", "s", "Unix time at the end of the step"},
    {"loss", "nats/token", "mean training loss over the tokens of the global batch"},
    {"val_loss", "nats/token", "validation loss after this step; NaN when not evaluated"},
    {"lr", "1", "learning rate of the step"},
    {"grad_norm", "1", "global gradient L2 norm before clipping"},
    {"clip_coef", "1", "factor the gradients were multiplied by (1 = not clipped)"},
    {"tokens", "tokens", "tokens in the global batch"},
    {"step_time", "s", "wall time of the step on world rank 0 (validation and checkpoint "
                       "excluded)"},
    {"tokens_per_s", "tokens/s", "tokens / step_time"},
    {"flops", "FLOP", "model FLOPs of the step (attribute flop_formula)"},
    {"mfu", "1", "model FLOP utilisation: flops / step_time / (world x peak_flops_per_rank)"},
    {"noise_g2", "1", "unbiased estimate of |G|^2 from per-DP-rank and global gradient norms "
                      "(McCandlish et al. 2018, appendix A.1); NaN when DP = 1"},
    {"noise_s", "tokens", "estimate of tr(Sigma) in the same units; NaN when DP = 1"},
    {"noise_scale", "tokens", "simple gradient noise scale B_noise = EMA(noise_s) / "
                              "EMA(noise_g2), EMA decay 0.9; NaN when DP = 1"},
};

/* Per-rank columns (/ranks/NAME, shape [rows, ranks], float64; NaN where a
 * rank did not exist in a row's segment). Order of lib/metrics.h's HPT_MR_*. */
const hpt_metrics_column hpt_metrics_rank_cols[HPT_RC_COUNT] = {
    {"step_time", "s", "wall time of forward, backward and optimizer on this rank"},
    {"forward", "s", "compute in the stage forwards (their TP communication excluded)"},
    {"backward", "s", "compute in the stage backwards (TP and DP communication excluded)"},
    {"optimizer", "s", "gradient norm, clipping and AdamW, communication excluded"},
    {"data", "s", "building micro-batches from the token shards"},
    {"pipeline_wait", "s", "blocked receiving activations or gradients from a neighbour stage"},
    {"checkpoint", "s", "saving the checkpoint written at the boundary before this step (rows "
                        "reach the file before a checkpoint commits, so its time is carried to "
                        "the next step)"},
    {"comm_tp", "s", "time in tensor-parallel communication calls"},
    {"comm_pp", "s", "time in pipeline-parallel communication calls (incl. pipeline_wait)"},
    {"comm_dp", "s", "time in data-parallel communication calls (all-reduce, reduce-scatter, "
                     "all-gather, waits)"},
    {"comm_mp", "s", "time in model-parallel (TP x PP) reductions of the gradient norm"},
    {"comm_embed", "s", "time in the tied-embedding all-reduce between first and last stage"},
    {"bytes_tp", "bytes", "payload bytes this rank handed to tensor-parallel calls"},
    {"bytes_pp", "bytes", "payload bytes sent to neighbour stages"},
    {"bytes_dp", "bytes", "payload bytes handed to data-parallel calls"},
    {"bytes_mp", "bytes", "payload bytes handed to model-parallel calls"},
    {"bytes_embed", "bytes", "payload bytes handed to the tied-embedding all-reduce"},
    {"tokens", "tokens", "tokens this rank processed in the step"},
    {"loss", "nats/token", "mean loss over this rank's tokens; NaN off the last stage"},
    {"grad_sumsq", "1", "sum of squares of this rank's gradient before the data-parallel "
                        "reduction (replicated tensors on TP rank 0 only)"},
    {"peak_rss", "bytes", "peak resident set size of the process so far"},
    {"device_mem", "bytes", "peak device memory; NaN on the CPU backend"},
    {"busy", "s", "step_time minus time in communication calls: the rank's own work"},
    {"nonfinite", "1", "1: this rank's own loss or pre-reduction gradient was non-finite"},
    {"validation", "s", "validation after this step (0 when none was due); NaN in rows written "
                        "before the column existed"},
    {"comm_dp_gather", "s", "of comm_dp: waited for the ZeRO parameter all-gathers (ZeRO-3 units; "
                            "ZeRO-1/2: the update's all-gather)"},
    {"bytes_dp_gather", "bytes", "of bytes_dp: handed to the ZeRO parameter all-gathers"},
    {"comm_dp_rs", "s", "of comm_dp: waited for the ZeRO gradient reduce-scatters"},
    {"bytes_dp_rs", "bytes", "of bytes_dp: handed to the ZeRO gradient reduce-scatters"},
    {"dp_gather_hidden", "1", "share of the parameter all-gathers' time in flight (start to the end "
                              "of its wait) not spent waiting: hidden behind compute; NaN without "
                              "gathers or on NCCL (host clocks cannot see the device's)"},
    {"pipeline_bubble", "s", "PP > 1: idle time in the step's pipeline phase, from its start to "
                             "the end of this rank's last backward, spent in neither data, "
                             "forward nor backward (waiting for a neighbour stage, mostly); NaN "
                             "without PP"},
    {"comm_cp", "s", "time in the context-parallel ring's calls (K/V and dK/dV sends, receives, "
                     "waits); 0 without --cp"},
    {"bytes_cp", "bytes", "payload bytes sent around the context-parallel ring"},
    {"cp_ring_hidden", "1", "share of the context-parallel ring's transfers' time in flight (from "
                            "their start to the end of their wait) not spent waiting: hidden "
                            "behind the block compute; NaN without --cp or on NCCL"},
};

/* ---------------------------------------------------------- HDF5 helpers */

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

/* ---------------------------------------------------------------- probe */

static herr_t probe_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    (void)data;
    free(hpt_h5_read_str_attr(loc, name));
    return 0;
}

static herr_t probe_obj(hid_t root, const char *name, const H5O_info_t *info, void *data)
{
    (void)info;
    (void)data;
    hid_t o = H5Oopen(root, name, H5P_DEFAULT);
    if (o >= 0) {
        H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, probe_attr, NULL);
        H5Oclose(o);
    }
    return 0;
}

/* The child: every object's string attributes; never returns. Its crash
 * is the parent's to report: the default actions (no MPI library's
 * handler printing a backtrace), its output to /dev/null (glibc's "malloc
 * assertion" lines). */
static void probe_child(const char *path)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, 1);
        dup2(null, 2);
    }
    hid_t fapl = hpt_metrics_h5_fapl(), f;
    H5E_BEGIN_TRY
    {
        f = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
        if (f >= 0) {
            H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, probe_obj, NULL, H5O_INFO_BASIC);
            H5Fclose(f);
        }
    }
    H5E_END_TRY;
    _exit(0);
}

static const char *sig_name(int sig)
{
    return sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGABRT ? "SIGABRT"
         : sig == SIGFPE ? "SIGFPE" : sig == SIGILL ? "SIGILL" : "a signal";
}

hpt_status hpt_metrics_h5_probe(const char *path)
{
    fflush(NULL); /* the child exits with _exit: nothing buffered twice */
    pid_t pid = fork();
    if (pid < 0)
        return HPT_OK;
    if (pid == 0)
        probe_child(path);
    int status = 0;
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (long waited = 0;; waited++) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            break;
        if (got < 0 && errno != EINTR)
            return HPT_OK;
        if (waited >= HPT_METRICS_PROBE_S * 100L) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return hpt_error_set(HPT_ERR_DATA, "%s: damaged file: HDF5 did not finish reading "
                                 "its attributes in %d s (a damaged global heap: the strings of "
                                 "the attributes)", path, HPT_METRICS_PROBE_S);
        }
        nanosleep(&tick, NULL);
    }
    if (WIFSIGNALED(status))
        return hpt_error_set(HPT_ERR_DATA, "%s: damaged file: HDF5 crashed reading its "
                             "attributes (signal %d, %s; a damaged global heap: the strings of "
                             "the attributes)", path, WTERMSIG(status),
                             sig_name(WTERMSIG(status)));
    /* the child ends with _exit(0); a sanitizer's report ends it with a status */
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: damaged file: HDF5 failed reading its "
                             "attributes (the reader ended with status %d; a damaged global "
                             "heap: the strings of the attributes)", path, WEXITSTATUS(status));
    return HPT_OK;
}

/* Note HDF5's cause of a failed call in h->cause (call right after it; the
 * first failure since the cause was cleared wins); -1. */
static int fail_note(hpt_metrics_h5 *h)
{
    if (!h->cause[0]) {
        snprintf(h->cause, sizeof h->cause, "%s", hpt_h5_cause());
        for (char *c = h->cause; *c; c++) /* sec2's messages carry a newline */
            if (*c == '\n')
                *c = ' ';
    }
    return -1;
}

static void set_str_attr(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, &value);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
}

static void set_num_attr(hid_t obj, const char *name, hid_t type, const void *v)
{
    hid_t s = H5Screate(H5S_SCALAR), a = H5Acreate2(obj, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, v);
    H5Aclose(a);
    H5Sclose(s);
}

static hid_t step_type(int c)
{
    return c == HPT_SC_STEP ? H5T_NATIVE_INT64 : c == HPT_SC_SEGMENT ? H5T_NATIVE_INT32
         : c < HPT_SC_NINT ? H5T_NATIVE_INT8 : H5T_NATIVE_DOUBLE;
}

/* An empty extendable dataset for column `col`: [0] chunked by 1024, or
 * [0, 0] chunked 64 x 16 when rank2; float64 filled with NaN. */
static hid_t make_ds(hpt_metrics_h5 *h, hid_t loc, const hpt_metrics_column *col, hid_t type,
                     int rank2)
{
    hsize_t dims[2] = {0, 0}, maxd[2] = {H5S_UNLIMITED, H5S_UNLIMITED};
    hsize_t chunk[2] = {rank2 ? 64 : 1024, 16};
    hid_t sp = H5Screate_simple(rank2 ? 2 : 1, dims, maxd), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, rank2 ? 2 : 1, chunk);
    if (H5Tequal(type, H5T_NATIVE_DOUBLE) > 0) {
        double nan = NAN;
        H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &nan);
    }
    hid_t d = H5Dcreate2(loc, col->name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d < 0)
        fail_note(h);
    else {
        set_str_attr(d, "units", col->units);
        set_str_attr(d, "description", col->desc);
    }
    H5Pclose(dcpl);
    H5Sclose(sp);
    return d;
}

/* The string type of n bytes (NUL-terminated). */
static hid_t str_type(size_t n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n);
    return t;
}

/* The layout /segments and /events have in the file (format version 1):
 * these offsets, strings of HPT_METRICS_*_LEN bytes. Only for creating the
 * tables; rows are read and written as hpt_metrics_*_row. */
typedef struct {
    int32_t segment;
    int64_t first_row, first_step, resumed_from, last_step_before;
    int32_t world, tp, pp, dp, zero1, grad_accum, micro_batch, seq_len;
    double start_time, flops_per_token, peak_flops_per_rank;
    char hpt_version[HPT_METRICS_STR_LEN], slurm_job_id[HPT_METRICS_STR_LEN];
    char host[HPT_METRICS_HOST_LEN];
    int32_t sequence_parallel, recompute;
    double process_start, load_seconds;
    int32_t pp_schedule, pp_virtual;
    double bubble_theory;
} seg_disk;

typedef struct {
    int64_t step;
    double wall_time;
    int32_t rank;
    char kind[HPT_METRICS_KIND_LEN];
    char message[HPT_METRICS_MSG_LEN];
} event_disk;

/* The /segments members into compound t of a struct S (its string sizes
 * from S), the newer ones where `newer` allows. */
#define SEG_MEMBERS(t, S, newer_sp, newer_rc, newer_ps, newer_ls, newer_pb)                  \
    do {                                                                                         \
        hid_t s_ = str_type(sizeof((S *)0)->hpt_version), h_ = str_type(sizeof((S *)0)->host); \
        H5Tinsert(t, "segment", HOFFSET(S, segment), H5T_NATIVE_INT32);                         \
        H5Tinsert(t, "first_row", HOFFSET(S, first_row), H5T_NATIVE_INT64);                     \
        H5Tinsert(t, "first_step", HOFFSET(S, first_step), H5T_NATIVE_INT64);                   \
        H5Tinsert(t, "resumed_from", HOFFSET(S, resumed_from), H5T_NATIVE_INT64);               \
        H5Tinsert(t, "last_step_before", HOFFSET(S, last_step_before), H5T_NATIVE_INT64);       \
        H5Tinsert(t, "world", HOFFSET(S, world), H5T_NATIVE_INT32);                             \
        H5Tinsert(t, "tp", HOFFSET(S, tp), H5T_NATIVE_INT32);                                   \
        H5Tinsert(t, "pp", HOFFSET(S, pp), H5T_NATIVE_INT32);                                   \
        H5Tinsert(t, "dp", HOFFSET(S, dp), H5T_NATIVE_INT32);                                   \
        H5Tinsert(t, "zero1", HOFFSET(S, zero1), H5T_NATIVE_INT32);                             \
        H5Tinsert(t, "grad_accum", HOFFSET(S, grad_accum), H5T_NATIVE_INT32);                   \
        H5Tinsert(t, "micro_batch", HOFFSET(S, micro_batch), H5T_NATIVE_INT32);                 \
        H5Tinsert(t, "seq_len", HOFFSET(S, seq_len), H5T_NATIVE_INT32);                         \
        H5Tinsert(t, "start_time", HOFFSET(S, start_time), H5T_NATIVE_DOUBLE);                  \
        H5Tinsert(t, "flops_per_token", HOFFSET(S, flops_per_token), H5T_NATIVE_DOUBLE);        \
        H5Tinsert(t, "peak_flops_per_rank", HOFFSET(S, peak_flops_per_rank), H5T_NATIVE_DOUBLE); \
        H5Tinsert(t, "hpt_version", HOFFSET(S, hpt_version), s_);                               \
        H5Tinsert(t, "slurm_job_id", HOFFSET(S, slurm_job_id), s_);                             \
        H5Tinsert(t, "host", HOFFSET(S, host), h_);                                             \
        if (newer_sp)                                                                            \
            H5Tinsert(t, "sequence_parallel", HOFFSET(S, sequence_parallel), H5T_NATIVE_INT32); \
        if (newer_rc)                                                                            \
            H5Tinsert(t, "recompute", HOFFSET(S, recompute), H5T_NATIVE_INT32);                 \
        if (newer_ps)                                                                            \
            H5Tinsert(t, "process_start", HOFFSET(S, process_start), H5T_NATIVE_DOUBLE);        \
        if (newer_ls)                                                                            \
            H5Tinsert(t, "load_seconds", HOFFSET(S, load_seconds), H5T_NATIVE_DOUBLE);          \
        if (newer_pb) {                                                                          \
            H5Tinsert(t, "pp_schedule", HOFFSET(S, pp_schedule), H5T_NATIVE_INT32);             \
            H5Tinsert(t, "pp_virtual", HOFFSET(S, pp_virtual), H5T_NATIVE_INT32);               \
            H5Tinsert(t, "bubble_theory", HOFFSET(S, bubble_theory), H5T_NATIVE_DOUBLE);        \
        }                                                                                        \
        H5Tclose(s_);                                                                            \
        H5Tclose(h_);                                                                            \
    } while (0)

#define EVENT_MEMBERS(t, S)                                                                      \
    do {                                                                                         \
        hid_t k_ = str_type(sizeof((S *)0)->kind), m_ = str_type(sizeof((S *)0)->message);     \
        H5Tinsert(t, "step", HOFFSET(S, step), H5T_NATIVE_INT64);                               \
        H5Tinsert(t, "wall_time", HOFFSET(S, wall_time), H5T_NATIVE_DOUBLE);                    \
        H5Tinsert(t, "rank", HOFFSET(S, rank), H5T_NATIVE_INT32);                               \
        H5Tinsert(t, "kind", HOFFSET(S, kind), k_);                                             \
        H5Tinsert(t, "message", HOFFSET(S, message), m_);                                       \
        H5Tclose(k_);                                                                            \
        H5Tclose(m_);                                                                            \
    } while (0)

hid_t hpt_metrics_trace_type(void)
{
    typedef hpt_metrics_trace_row R;
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(R)), s = str_type(HPT_METRICS_TRACE_NAME_LEN);
    H5Tinsert(t, "segment", HOFFSET(R, segment), H5T_NATIVE_INT32);
    H5Tinsert(t, "step", HOFFSET(R, step), H5T_NATIVE_INT32);
    H5Tinsert(t, "rank", HOFFSET(R, rank), H5T_NATIVE_INT32);
    H5Tinsert(t, "stage", HOFFSET(R, stage), H5T_NATIVE_INT32);
    H5Tinsert(t, "micro", HOFFSET(R, micro), H5T_NATIVE_INT32);
    H5Tinsert(t, "peer", HOFFSET(R, peer), H5T_NATIVE_INT32);
    H5Tinsert(t, "bytes", HOFFSET(R, bytes), H5T_NATIVE_INT64);
    H5Tinsert(t, "t_start", HOFFSET(R, t_start), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "t_end", HOFFSET(R, t_end), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "name", HOFFSET(R, name), s);
    H5Tinsert(t, "stream", HOFFSET(R, stream), s);
    H5Tclose(s);
    return t;
}

static int file_has(hid_t ft, const char *name)
{
    return ft < 0 || H5Tget_member_index(ft, name) >= 0;
}

hid_t hpt_metrics_seg_type(hid_t file_type)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(hpt_metrics_seg_row));
    if (t >= 0)
        SEG_MEMBERS(t, hpt_metrics_seg_row, file_has(file_type, "sequence_parallel"),
                    file_has(file_type, "recompute"), file_has(file_type, "process_start"),
                    file_has(file_type, "load_seconds"), file_has(file_type, "bubble_theory"));
    return t;
}

int hpt_metrics_seg_type_has(hid_t t, const char *name)
{
    return H5Tget_member_index(t, name) >= 0;
}

hid_t hpt_metrics_event_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(hpt_metrics_event_row));
    if (t >= 0)
        EVENT_MEMBERS(t, hpt_metrics_event_row);
    return t;
}

static hid_t seg_file_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(seg_disk));
    SEG_MEMBERS(t, seg_disk, 1, 1, 1, 1, 1);
    return t;
}

static hid_t event_file_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(event_disk));
    EVENT_MEMBERS(t, event_disk);
    return t;
}

static hid_t make_table(hpt_metrics_h5 *h, const char *name, hid_t type, const char *desc)
{
    hsize_t dims = 0, maxd = H5S_UNLIMITED, chunk = 64;
    hid_t sp = H5Screate_simple(1, &dims, &maxd), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    hid_t d = H5Dcreate2(h->file, name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d < 0)
        fail_note(h);
    else
        set_str_attr(d, "description", desc);
    H5Pclose(dcpl);
    H5Sclose(sp);
    return d;
}

/* Write n rows of `buf` (type t) at row `at` of a 1-D dataset, setting
 * its extent to at + n. */
static int write_1d_at(hpt_metrics_h5 *h, hid_t d, hid_t t, const void *buf, hsize_t at,
                       hsize_t n)
{
    hsize_t cur = at, ext = at + n;
    if (H5Dset_extent(d, &ext) < 0)
        return fail_note(h);
    hid_t sp = H5Dget_space(d);
    H5Sselect_hyperslab(sp, H5S_SELECT_SET, &cur, NULL, &n, NULL);
    hid_t ms = H5Screate_simple(1, &n, NULL);
    herr_t e = H5Dwrite(d, t, ms, sp, H5P_DEFAULT, buf);
    if (e < 0)
        fail_note(h);
    H5Sclose(ms);
    H5Sclose(sp);
    return e < 0 ? -1 : 0;
}

/* Rows along the first axis of dataset d. */
static hsize_t rows_of(hid_t d)
{
    hsize_t dims[2] = {0, 0};
    hid_t sp = H5Dget_space(d);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    return dims[0];
}

/* Append n rows along the first axis of a 1-D table. */
static int append_1d(hpt_metrics_h5 *h, hid_t d, hid_t t, const void *buf, hsize_t n)
{
    return write_1d_at(h, d, t, buf, rows_of(d), n);
}

/* -------------------------------------------------------------- create */

void hpt_metrics_h5_init(hpt_metrics_h5 *h, const char *path)
{
    memset(h, 0, sizeof *h);
    snprintf(h->path, sizeof h->path, "%s", path);
    h->seg_t = hpt_metrics_seg_type(-1);
    h->ev_t = hpt_metrics_event_type();
}

static void create_attrs(hpt_metrics_h5 *h, const hpt_metrics_h5_attrs *a)
{
    int v = HPT_METRICS_FORMAT_VERSION;
    set_str_attr(h->file, "format", HPT_METRICS_FORMAT);
    set_num_attr(h->file, "format_version", H5T_NATIVE_INT, &v);
    set_str_attr(h->file, "hpt_version", PACKAGE_VERSION);
    set_str_attr(h->file, "model_config", a->model_config ? a->model_config : "{}");
    set_str_attr(h->file, "flop_formula", a->flop_formula ? a->flop_formula : "");
    set_num_attr(h->file, "flops_per_token", H5T_NATIVE_DOUBLE, &a->flops_per_token);
    set_num_attr(h->file, "peak_flops_per_rank", H5T_NATIVE_DOUBLE, &a->peak_flops_per_rank);
}

/* Every dataset of a new file; -1 with h->cause on failure. */
static int create_datasets(hpt_metrics_h5 *h, const hpt_metrics_h5_attrs *a)
{
    hid_t gs = H5Gcreate2(h->file, "steps", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t gr = H5Gcreate2(h->file, "ranks", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (gs < 0 || gr < 0)
        return fail_note(h);
    set_str_attr(gs, "description", "global values, one row per logged step, shape [rows]");
    set_str_attr(gr, "description", "per-rank values, shape [rows, world ranks]; row i is the "
                                    "step of /steps/step[i]");
    int bad = 0;
    for (int c = 0; c < HPT_SC_COUNT; c++)
        bad |= (h->sd[c] = make_ds(h, gs, &hpt_metrics_step_cols[c], step_type(c), 0)) < 0;
    for (int c = 0; c < HPT_RC_COUNT; c++)
        bad |= (h->rd[c] = make_ds(h, gr, &hpt_metrics_rank_cols[c], H5T_NATIVE_DOUBLE, 1)) < 0;
    hid_t seg_ft = seg_file_type(), ev_ft = event_file_type();
    h->seg_ds = make_table(h, "segments", seg_ft,
                           "one row per run segment (start or resume): layout, first row/step, "
                           "checkpoint resumed from");
    h->ev_ds = make_table(h, "events", ev_ft,
                          "events: run_start, run_end, checkpoint_save, checkpoint_load, signal, "
                          "resume, layout_change, skipped_step, grad_norm_spike, "
                          "throughput_drop, slow_rank");
    H5Tclose(seg_ft);
    H5Tclose(ev_ft);
    bad |= h->seg_ds < 0 || h->ev_ds < 0;
    if (!bad) {
        set_str_attr(h->sd[HPT_SC_MFU], "flop_formula", a->flop_formula ? a->flop_formula : "");
        set_num_attr(h->sd[HPT_SC_MFU], "peak_flops_per_rank", H5T_NATIVE_DOUBLE,
                     &a->peak_flops_per_rank);
    }
    H5Gclose(gs);
    H5Gclose(gr);
    return bad ? -1 : 0;
}

hpt_status hpt_metrics_h5_create(hpt_metrics_h5 *h, hid_t fapl, const hpt_metrics_h5_attrs *a)
{
    int e;
    h->cause[0] = 0;
    H5E_BEGIN_TRY
    {
        h->file = H5Fcreate(h->path, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
        e = h->file < 0 ? fail_note(h) : 0;
        if (!e) {
            create_attrs(h, a);
            e = create_datasets(h, a);
        }
    }
    H5E_END_TRY;
    h->rows = h->rank_cols_n = h->prev_max_step = 0;
    h->segment = 0;
    if (!e)
        return HPT_OK;
    int made = h->file > 0;
    struct stat sb;
    hpt_metrics_h5_close(h);
    /* created exclusively, so nothing of the user's is lost: remove what
     * HDF5 made, also the empty file a failed H5Fcreate leaves */
    if (made || (stat(h->path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0))
        unlink(h->path);
    return hpt_error_set(HPT_ERR_IO, "metrics file %s: cannot create %s (HDF5: %s)", h->path,
                         made ? "the datasets" : "it", h->cause);
}

/* ---------------------------------------------------------------- open */

/* A damaged hpt metrics file: flagged for the caller to move aside. The
 * message names the part and HDF5's innermost cause; call right after the
 * failing call. */
static hpt_status damaged(hpt_metrics_h5 *h, const char *what)
{
    h->damaged = 1;
    return hpt_error_set(HPT_ERR_IO, "metrics file %s: %s (HDF5: %s)", h->path, what,
                         hpt_h5_cause());
}

/* String attribute `name` of the root as a malloc'd string in *out (NULL
 * when absent). -1 when HDF5 cannot read the attribute (damaged). */
static int root_str_attr(hpt_metrics_h5 *h, const char *name, char **out)
{
    *out = NULL;
    htri_t ex = H5Aexists(h->file, name);
    if (ex <= 0)
        return ex < 0 ? -1 : 0;
    hid_t t = H5Tcopy(H5T_C_S1), a = H5Aopen(h->file, name, H5P_DEFAULT);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    int e = a < 0 || H5Aread(a, t, out) < 0 ? -1 : 0;
    if (e)
        *out = NULL;
    H5Aclose(a);
    H5Tclose(t);
    return e;
}

/* The format attributes: an hpt metrics file of this version, or refused
 * and left untouched. */
static hpt_status check_format(hpt_metrics_h5 *h)
{
    char *fmt = NULL;
    int ver = -1;
    if (root_str_attr(h, "format", &fmt) < 0)
        return damaged(h, "cannot read the root attribute format");
    int ok = fmt && !strcmp(fmt, HPT_METRICS_FORMAT);
    free(fmt);
    if (!ok)
        return hpt_error_set(HPT_ERR_IO, "metrics file %s: exists but is not an hpt metrics file "
                             "(attribute format != \"hpt-metrics\"); left untouched", h->path);
    htri_t ex = H5Aexists(h->file, "format_version");
    if (ex > 0) {
        hid_t a = H5Aopen(h->file, "format_version", H5P_DEFAULT);
        ex = a < 0 || H5Aread(a, H5T_NATIVE_INT, &ver) < 0 ? -1 : 1;
        H5Aclose(a);
    }
    if (ex < 0)
        return damaged(h, "cannot read the root attribute format_version");
    if (ver != HPT_METRICS_FORMAT_VERSION)
        return hpt_error_set(HPT_ERR_IO,
                             "metrics file %s: format_version %d, this hpt writes version %d; "
                             "left untouched (pass another --metrics path)",
                             h->path, ver, HPT_METRICS_FORMAT_VERSION);
    return HPT_OK;
}

/* The same model as this run's (when model_config is given). */
static hpt_status check_model(hpt_metrics_h5 *h, const char *model_config)
{
    char *cfg = NULL;
    if (!model_config)
        return HPT_OK;
    if (root_str_attr(h, "model_config", &cfg) < 0)
        return damaged(h, "cannot read the root attribute model_config");
    int same = !cfg || !strcmp(cfg, model_config);
    free(cfg);
    if (!same)
        return hpt_error_set(HPT_ERR_IO, "metrics file %s: holds the metrics of another model "
                             "(its model_config differs from this run's); left untouched: pass "
                             "another --metrics path or --run-dir", h->path);
    return HPT_OK;
}

/* Open every dataset of the layout; a missing one is damage, except a
 * per-rank column newer than the file (index >= HPT_RC_V1_COUNT): left 0
 * for add_newer_rank_cols. */
static hpt_status open_datasets(hpt_metrics_h5 *h)
{
    char p[64], what[160];
    for (int c = 0; c < HPT_SC_COUNT; c++) {
        snprintf(p, sizeof p, "steps/%s", hpt_metrics_step_cols[c].name);
        if ((h->sd[c] = H5Dopen2(h->file, p, H5P_DEFAULT)) < 0)
            break;
    }
    for (int c = 0; c < HPT_RC_COUNT && h->sd[HPT_SC_COUNT - 1] > 0; c++) {
        snprintf(p, sizeof p, "ranks/%s", hpt_metrics_rank_cols[c].name);
        if (c >= HPT_RC_V1_COUNT && H5Lexists(h->file, p, H5P_DEFAULT) == 0) {
            h->rd[c] = 0; /* an older file: created by add_newer_rank_cols */
            continue;
        }
        if ((h->rd[c] = H5Dopen2(h->file, p, H5P_DEFAULT)) < 0)
            break;
    }
    int bad_rank = 0;
    for (int c = 0; c < HPT_RC_COUNT; c++)
        bad_rank |= h->rd[c] < 0 || (c < HPT_RC_V1_COUNT && h->rd[c] == 0);
    if (h->sd[HPT_SC_COUNT - 1] <= 0 || bad_rank) {
        snprintf(what, sizeof what, "dataset /%s is missing or unreadable", p);
        return damaged(h, what);
    }
    if ((h->seg_ds = H5Dopen2(h->file, "segments", H5P_DEFAULT)) < 0)
        return damaged(h, "dataset /segments is missing or unreadable");
    if ((h->ev_ds = H5Dopen2(h->file, "events", H5P_DEFAULT)) < 0)
        return damaged(h, "dataset /events is missing or unreadable");
    h->tr_ds = H5Lexists(h->file, "trace", H5P_DEFAULT) > 0 /* optional */
                   ? H5Dopen2(h->file, "trace", H5P_DEFAULT) : 0;
    if (h->tr_ds < 0)
        return damaged(h, "dataset /trace is unreadable");
    return HPT_OK;
}

/* The per-rank columns newer than an older file's layout (open_datasets
 * left them 0), created with `rows` rows of NaN and `cols` ranks. */
static hpt_status add_newer_rank_cols(hpt_metrics_h5 *h, hsize_t rows, hsize_t cols)
{
    hid_t g = -1;
    for (int c = HPT_RC_V1_COUNT; c < HPT_RC_COUNT; c++) {
        if (h->rd[c] > 0)
            continue;
        hsize_t ext[2] = {rows, cols};
        if (g < 0 && (g = H5Gopen2(h->file, "ranks", H5P_DEFAULT)) < 0)
            return damaged(h, "cannot open group /ranks to add a newer column");
        h->rd[c] = make_ds(h, g, &hpt_metrics_rank_cols[c], H5T_NATIVE_DOUBLE, 1);
        if (h->rd[c] < 0 || H5Dset_extent(h->rd[c], ext) < 0) {
            H5Gclose(g);
            return damaged(h, "cannot add a newer per-rank column");
        }
    }
    if (g >= 0)
        H5Gclose(g);
    return HPT_OK;
}

/* Cut every column to the rows all of them hold (a writer killed in the
 * middle of an append may leave some longer; done before SWMR writing,
 * which cannot shrink); then add the per-rank columns newer than the
 * file. */
static hpt_status cut_to_complete_rows(hpt_metrics_h5 *h)
{
    hsize_t dims[2] = {0, 0}, minrows = rows_of(h->sd[0]);
    for (int c = 0; c < HPT_SC_COUNT; c++)
        minrows = rows_of(h->sd[c]) < minrows ? rows_of(h->sd[c]) : minrows;
    for (int c = 0; c < HPT_RC_COUNT; c++)
        if (h->rd[c] > 0)
            minrows = rows_of(h->rd[c]) < minrows ? rows_of(h->rd[c]) : minrows;
    h->rows = (int64_t)minrows;
    for (int c = 0; c < HPT_SC_COUNT; c++)
        if (rows_of(h->sd[c]) != minrows && H5Dset_extent(h->sd[c], &minrows) < 0)
            return damaged(h, "cannot cut a partly written row");
    hid_t sp = H5Dget_space(h->rd[0]);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    h->rank_cols_n = (int64_t)dims[1];
    for (int c = 0; c < HPT_RC_COUNT; c++) {
        hsize_t ext[2] = {minrows, dims[1]};
        if (h->rd[c] > 0 && rows_of(h->rd[c]) != minrows && H5Dset_extent(h->rd[c], ext) < 0)
            return damaged(h, "cannot cut a partly written row");
    }
    return add_newer_rank_cols(h, minrows, dims[1]);
}

/* The next segment's index and the largest step logged so far. */
static hpt_status read_progress(hpt_metrics_h5 *h)
{
    h->segment = (int32_t)rows_of(h->seg_ds);
    h->prev_max_step = 0;
    if (h->rows == 0)
        return HPT_OK;
    int64_t *st = malloc(sizeof *st * (size_t)rows_of(h->sd[HPT_SC_STEP]));
    if (!st)
        return hpt_error_set(HPT_ERR_INTERNAL, "out of memory (metrics)");
    if (H5Dread(h->sd[HPT_SC_STEP], H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, st) < 0) {
        free(st);
        return damaged(h, "cannot read dataset /steps/step");
    }
    for (int64_t i = 0; i < h->rows; i++)
        h->prev_max_step = st[i] > h->prev_max_step ? st[i] : h->prev_max_step;
    free(st);
    return HPT_OK;
}

int hpt_metrics_h5_looks_hdf5(const char *path)
{
    unsigned char sig[8];
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0)
        return 1;
    FILE *f = fopen(path, "rb");
    int n = f ? (int)fread(sig, 1, 8, f) : 0;
    if (f)
        fclose(f);
    return n == 8 && !memcmp(sig, "\x89HDF\r\n\x1a\n", 8);
}

static hpt_status open_checked(hpt_metrics_h5 *h, hid_t fapl, const char *model_config)
{
    bool clear = true;
    struct stat sb;
    if (stat(h->path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0) {
        h->damaged = 1; /* a writer killed while creating it */
        return hpt_error_set(HPT_ERR_IO, "metrics file %s: empty file (0 bytes)", h->path);
    }
    if (hpt_h5_has_signature(h->path) && hpt_metrics_h5_probe(h->path) != HPT_OK) {
        h->damaged = 1; /* its attributes would crash this process */
        return hpt_error_set(HPT_ERR_IO, "metrics file %s", hpt_error_msg());
    }
    if (H5Pexist(fapl, "clear_status_flags") > 0) /* as h5clear -s */
        H5Pset(fapl, "clear_status_flags", &clear);
    h->file = H5Fopen(h->path, H5F_ACC_RDWR, fapl);
    if (h->file < 0 && hpt_metrics_h5_looks_hdf5(h->path))
        return damaged(h, "cannot be opened by HDF5");
    if (h->file < 0)
        return hpt_error_set(HPT_ERR_IO, "metrics file %s: exists but is not a readable HDF5 "
                             "file (HDF5: %s); left untouched: move it away or pass another "
                             "--metrics path", h->path, hpt_h5_cause());
    hpt_status st = check_format(h);
    if (!st)
        st = check_model(h, model_config);
    if (!st)
        st = open_datasets(h);
    if (!st)
        st = cut_to_complete_rows(h);
    return st ? st : read_progress(h);
}

hpt_status hpt_metrics_h5_open(hpt_metrics_h5 *h, hid_t fapl, const char *model_config)
{
    hpt_status st;
    h->damaged = 0;
    H5E_BEGIN_TRY { st = open_checked(h, fapl, model_config); }
    H5E_END_TRY;
    return st;
}

/* -------------------------------------------------------------- append */

int hpt_metrics_h5_start_segment(hpt_metrics_h5 *h, hid_t fapl, hpt_metrics_seg_row *s)
{
    int e;
    s->segment = h->segment;
    s->first_row = h->rows;
    s->last_step_before = h->prev_max_step;
    h->cause[0] = 0;
    H5E_BEGIN_TRY
    {
        e = append_1d(h, h->seg_ds, h->seg_t, s, 1);
        if (!e && h->want_trace && h->tr_ds == 0) { /* SWMR writing creates nothing */
            hid_t tt = hpt_metrics_trace_type();
            h->tr_ds = make_table(h, "trace", tt,
                                  "the step timeline (hpt-train --trace-steps): one row per "
                                  "span of work on one rank, Unix seconds");
            H5Tclose(tt);
            e = h->tr_ds < 0 ? -1 : 0;
        }
        if (!e) {
            hpt_metrics_h5_close(h);
            if ((h->file = H5Fopen(h->path, H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE, fapl)) < 0)
                e = fail_note(h);
            else if (open_datasets(h) != HPT_OK)
                e = fail_note(h);
        }
    }
    H5E_END_TRY;
    return e;
}

/* The per-rank columns of n rows: [rows, max(world, extent)] widened when
 * this segment has more ranks than any before. */
static int append_ranks(hpt_metrics_h5 *h, int n, const double *all, int W, double *v)
{
    hsize_t ncol = (hsize_t)(W > h->rank_cols_n ? W : h->rank_cols_n);
    hsize_t ext[2] = {(hsize_t)(h->rows + n), ncol};
    hsize_t start[2] = {(hsize_t)h->rows, 0}, count[2] = {(hsize_t)n, (hsize_t)W};
    hid_t ms = H5Screate_simple(2, count, NULL);
    int e = 0;
    for (int c = 0; c < HPT_RC_COUNT && !e; c++) {
        for (int i = 0; i < n; i++) /* [world][n][cols] -> [n][world] */
            for (int w = 0; w < W; w++)
                v[(size_t)i * W + w] = all[((size_t)w * n + i) * HPT_RC_COUNT + c];
        if (H5Dset_extent(h->rd[c], ext) < 0) {
            e = fail_note(h);
            break;
        }
        hid_t fs = H5Dget_space(h->rd[c]);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
        if (H5Dwrite(h->rd[c], H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, v) < 0)
            e = fail_note(h);
        H5Sclose(fs);
    }
    H5Sclose(ms);
    if (!e)
        h->rank_cols_n = (int64_t)ncol;
    return e;
}

/* The /steps columns of n rows at row h->rows. */
static int append_steps(hpt_metrics_h5 *h, int n, int64_t *const ints[HPT_SC_NINT],
                        double *const cols[HPT_SC_COUNT], void *scratch)
{
    hsize_t at = (hsize_t)h->rows, nn = (hsize_t)n;
    int e = 0;
    for (int c = 0; c < HPT_SC_NINT && !e; c++) {
        hid_t t = step_type(c);
        for (int i = 0; i < n; i++) { /* int64 -> the column's width */
            if (c == HPT_SC_STEP)
                ((int64_t *)scratch)[i] = ints[c][i];
            else if (c == HPT_SC_SEGMENT)
                ((int32_t *)scratch)[i] = (int32_t)ints[c][i];
            else
                ((int8_t *)scratch)[i] = (int8_t)ints[c][i];
        }
        e = write_1d_at(h, h->sd[c], t, scratch, at, nn);
    }
    for (int c = HPT_SC_NINT; c < HPT_SC_COUNT && !e; c++)
        e = write_1d_at(h, h->sd[c], H5T_NATIVE_DOUBLE, cols[c], at, nn);
    return e;
}

int hpt_metrics_h5_append(hpt_metrics_h5 *h, int n, int64_t *const ints[HPT_SC_NINT],
                          double *const cols[HPT_SC_COUNT], const double *all, int world,
                          const hpt_metrics_event_row *ev, int nev)
{
    size_t need = (size_t)(n > 0 ? n : 1) * (size_t)(world > 0 ? world : 1);
    double *scratch = malloc(sizeof *scratch * need);
    int e = scratch ? 0 : -1;
    h->cause[0] = 0;
    if (!scratch)
        snprintf(h->cause, sizeof h->cause, "out of memory");
    H5E_BEGIN_TRY
    {
        if (!e && n > 0)
            e = append_steps(h, n, ints, cols, scratch);
        if (!e && n > 0)
            e = append_ranks(h, n, all, world, scratch);
        if (!e && nev > 0)
            e = append_1d(h, h->ev_ds, h->ev_t, ev, (hsize_t)nev);
        if (!e && H5Fflush(h->file, H5F_SCOPE_GLOBAL) < 0)
            e = fail_note(h);
    }
    H5E_END_TRY;
    if (!e)
        h->rows += n;
    free(scratch);
    return e;
}

int hpt_metrics_h5_append_trace(hpt_metrics_h5 *h, const hpt_metrics_trace_row *rows, size_t n)
{
    int e = 0;
    h->cause[0] = 0;
    if (h->tr_ds <= 0) {
        snprintf(h->cause, sizeof h->cause, "no /trace table");
        return -1;
    }
    hid_t t = hpt_metrics_trace_type();
    H5E_BEGIN_TRY
    {
        e = n ? append_1d(h, h->tr_ds, t, rows, (hsize_t)n) : 0;
        if (!e && H5Fflush(h->file, H5F_SCOPE_GLOBAL) < 0)
            e = fail_note(h);
    }
    H5E_END_TRY;
    H5Tclose(t);
    return e;
}

/* --------------------------------------------------------------- close */

void hpt_metrics_h5_close(hpt_metrics_h5 *h)
{
    if (h->file > 0) {
        H5E_BEGIN_TRY
        {
            for (int c = 0; c < HPT_SC_COUNT; c++)
                if (h->sd[c] > 0)
                    H5Dclose(h->sd[c]);
            for (int c = 0; c < HPT_RC_COUNT; c++)
                if (h->rd[c] > 0)
                    H5Dclose(h->rd[c]);
            if (h->seg_ds > 0)
                H5Dclose(h->seg_ds);
            if (h->ev_ds > 0)
                H5Dclose(h->ev_ds);
            if (h->tr_ds > 0)
                H5Dclose(h->tr_ds);
            H5Fclose(h->file);
        }
        H5E_END_TRY;
    }
    h->file = 0;
    memset(h->sd, 0, sizeof h->sd);
    memset(h->rd, 0, sizeof h->rd);
    h->seg_ds = h->ev_ds = h->tr_ds = 0;
}

void hpt_metrics_h5_free(hpt_metrics_h5 *h)
{
    hpt_metrics_h5_close(h);
    if (h->seg_t > 0)
        H5Tclose(h->seg_t);
    if (h->ev_t > 0)
        H5Tclose(h->ev_t);
    h->seg_t = h->ev_t = 0;
}

/* ------------------------------------------------- hpt-metrics close */

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

static long long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
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
    if (f < 0 && !hpt_h5_has_signature(path)) /* never write into what is not HDF5 */
        st = hpt_error_set(HPT_ERR_DATA, "%s: not an HDF5 file (%s): nothing to clear, left "
                           "untouched", path, file_size(path) == 0 ? "empty, 0 bytes"
                                                                   : "no HDF5 signature");
    else if (f < 0) { /* flagged: open for writing, clearing the flags */
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

hpt_status hpt_metrics_h5_check_format(const char *path, const char *fmt)
{
    if (fmt && !strcmp(fmt, HPT_METRICS_FORMAT))
        return HPT_OK;
    return hpt_error_set(HPT_ERR_DATA, "%s: not an hpt metrics file (root attribute format = "
                         "%s%s%s, expected \"%s\")", path, fmt ? "\"" : "", fmt ? fmt : "missing",
                         fmt ? "\"" : "", HPT_METRICS_FORMAT);
}
