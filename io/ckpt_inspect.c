/* ckpt_inspect.c — list, verify, describe and export hpt checkpoints; see
 * ckpt_inspect.h. */
#include "ckpt_inspect.h"
#include "safetensors_write.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_read.h"
#include "fsutil.h"
#include "h5out.h"
#include "h5util.h"

/* ---------------------------------------------------------- sizes on disk */

/* Bytes in the regular files directly under `dir`. */
static long long dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    long long total = 0;
    struct dirent *e;
    char p[PATH_MAX];
    struct stat sb;
    while (d && (e = readdir(d)))
        if (!hpt_ckpt_join(p, dir, e->d_name) && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode))
            total += (long long)sb.st_size;
    if (d)
        closedir(d);
    return total;
}

/* ------------------------------------------------------------------ verify */

typedef struct {
    const char *path; /* checkpoint file, for messages                 */
    const hpt_ckpt_model *model; /* what config_json implies            */
    FILE *out;        /* findings, one per line; NULL: count only       */
    int nbad;         /* findings so far                                */
    char first[256];  /* dataset (or attribute) of the first finding    */
} verify_ctx;

static void finding(verify_ctx *v, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record one problem with `what` (a dataset path or an attribute). */
static void finding(verify_ctx *v, const char *what, const char *fmt, ...)
{
    va_list ap;
    if (!v->nbad++)
        snprintf(v->first, sizeof v->first, "%s", what);
    if (!v->out)
        return;
    fprintf(v->out, "%s: %s: ", v->path, what);
    va_start(ap, fmt);
    vfprintf(v->out, fmt, ap);
    va_end(ap);
    fputc('\n', v->out);
}

/* msg without its leading "origin: ", which the finding names already. */
static const char *strip_origin(const char *msg, const char *origin)
{
    size_t n = strlen(origin);
    return !strncmp(msg, origin, n) && !strncmp(msg + n, ": ", 2) ? msg + n + 2 : msg;
}

/* Values of the root attributes that no save could have written. */
static void check_meta_values(verify_ctx *v, const hpt_ckpt_meta *m)
{
    const struct {
        const char *name;
        long long value, min;
    } f[] = {
        {"step", m->step, 0},           {"samples", m->samples, 0},
        {"adam_t", m->adam_t, 0},       {"skipped_total", m->skipped_total, 0},
        {"consecutive_skips", m->consecutive_skips, 0},
        {"global_batch", m->global_batch, 1}, {"seq_len", m->seq_len, 1},
        {"micro_batch", m->micro_batch, 1},   {"tp", m->tp, 1},
        {"pp", m->pp, 1},               {"dp", m->dp, 1},
        {"zero1", m->zero1, 0},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].value < f[i].min)
            finding(v, f[i].name, "attribute is %lld, must be >= %lld", f[i].value, f[i].min);
    if (m->zero1 > 3) /* the ZeRO stage of the writer; 0/1 before ZeRO-2 existed */
        finding(v, "zero1", "attribute is %d, must be 0, 1, 2 or 3 (the ZeRO stage)",
                (int)m->zero1);
}

/* /model/<name> has shape `want` and attribute layer == `layer`. */
static void check_expected(verify_ctx *v, hid_t file, const char *name, const hpt_ckpt_shape *want,
                           int layer)
{
    char path[256], why[300], a[64], b[64];
    hpt_ckpt_shape got;
    int32_t l;
    snprintf(path, sizeof path, "/model/%s", name);
    hid_t ds = hpt_ckpt_open_dataset(file, path, why, sizeof why);
    if (ds < 0) {
        finding(v, path, "%s (config_json implies this tensor)", why);
        return;
    }
    if (hpt_ckpt_get_shape(ds, &got) || !hpt_ckpt_shape_eq(&got, want))
        finding(v, path, "shape %s, config_json implies %s",
                got.rank == 1 || got.rank == 2 ? hpt_ckpt_shape_str(&got, a, sizeof a)
                                               : "not 1-D or 2-D",
                hpt_ckpt_shape_str(want, b, sizeof b));
    if (hpt_ckpt_get_layer(ds, &l))
        finding(v, path, "attribute layer missing or not an integer");
    else if (l != layer)
        finding(v, path, "attribute layer = %d, expected %d", (int)l, layer);
    H5Dclose(ds);
}

/* The /model tensors are exactly the nt tensors t[] config_json implies,
 * with their global shapes and layer indices. */
static void check_against_config(verify_ctx *v, hid_t file, const hpt_ckpt_tensor *t, int nt,
                                 char **names, int n)
{
    char path[256];
    int i;
    char *matched = calloc((size_t)n + 1, 1);
    if (!matched)
        HPT_FATAL("out of memory checking %s", v->path);
    for (int k = 0; k < nt; k++) {
        /* vectors (the norm weights) are 1-D, as in lib/checkpoint.c */
        hpt_ckpt_shape s = {t[k].cols > 1 ? 2 : 1, {(hsize_t)t[k].rows, (hsize_t)t[k].cols}};
        check_expected(v, file, t[k].name, &s, t[k].layer);
        if ((i = hpt_ckpt_names_find(names, n, t[k].name)) >= 0)
            matched[i] = 1;
    }
    for (i = 0; i < n; i++)
        if (!matched[i]) {
            snprintf(path, sizeof path, "/model/%s", names[i]);
            finding(v, path, "unexpected tensor (not in the model config_json describes)");
        }
    free(matched);
}

/* Open dataset `path`, check its shape against `want` (when not NULL) and
 * read it fully. Records a finding on any problem; *got is its shape. */
static void check_dataset(verify_ctx *v, hid_t file, const char *path, const hpt_ckpt_shape *want,
                          hpt_ckpt_shape *got)
{
    char why[400], a[64], b[64];
    hid_t ds = hpt_ckpt_open_dataset(file, path, why, sizeof why);
    got->rank = 0;
    if (ds < 0) {
        finding(v, path, "%s", why);
        return;
    }
    if (hpt_ckpt_get_shape(ds, got)) {
        got->rank = 0; /* nothing to compare the optimizer moments with */
        finding(v, path, "not a 1-D or 2-D array");
    } else if (want && want->rank && !hpt_ckpt_shape_eq(got, want))
        finding(v, path, "shape %s differs from /model's %s", hpt_ckpt_shape_str(got, a, sizeof a),
                hpt_ckpt_shape_str(want, b, sizeof b));
    else if (hpt_ckpt_read_blocks(ds, NULL, NULL, why, sizeof why))
        finding(v, path, "damaged: %s", why);
    H5Dclose(ds);
}

/* The finding for hpt_ckpt_names' result n on group gpath, if any. */
static void group_finding(verify_ctx *v, const char *gpath, int n)
{
    if (n == -1)
        finding(v, gpath, "group missing");
    else if (n == -2)
        finding(v, gpath, "links unreadable (damaged metadata): %s", hpt_ckpt_names_why());
}

/* Read every /model tensor and its two optimizer moments fully; datasets
 * in the optimizer groups without a /model tensor are findings too. */
static void check_data(verify_ctx *v, hid_t file, char **names, int n)
{
    char path[512];
    hpt_ckpt_shape s, o;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "/model/%s", names[i]);
        check_dataset(v, file, path, NULL, &s);
        for (int g = 1; g < 3; g++) {
            snprintf(path, sizeof path, "%s/%s", hpt_ckpt_groups[g], names[i]);
            check_dataset(v, file, path, &s, &o);
        }
    }
    for (int g = 1; g < 3; g++) {
        char **extra;
        int m = hpt_ckpt_names(file, hpt_ckpt_groups[g], &extra);
        group_finding(v, hpt_ckpt_groups[g], m);
        for (int i = 0; i < m; i++)
            if (hpt_ckpt_names_find(names, n, extra[i]) < 0) {
                snprintf(path, sizeof path, "%s/%s", hpt_ckpt_groups[g], extra[i]);
                finding(v, path, "no matching /model tensor");
            }
        hpt_ckpt_names_free(extra, m);
    }
}

/* The /model tensors against config_json (check_against_config); returns
 * the /model names as hpt_ckpt_names does (the caller frees them). */
static int check_structure(verify_ctx *v, hid_t f, const hpt_ckpt_meta *meta, char ***names)
{
    hpt_ckpt_tensor *t = NULL;
    int nt = 0, n = hpt_ckpt_names(f, hpt_ckpt_groups[0], names);
    group_finding(v, hpt_ckpt_groups[0], n);
    if (v->model->tensors(meta->config_json, "config_json", &t, &nt))
        finding(v, "config_json", "%s", strip_origin(hpt_error_msg(), "config_json"));
    else if (n >= 0)
        check_against_config(v, f, t, nt, *names, n);
    free(t);
    return n;
}

/* Verify checkpoint file `path`: root attributes, tensor set against
 * config_json, every dataset read fully. Problems go to v (see
 * verify_ctx). Errors (returned, nothing recorded): the file cannot be
 * opened or its root attributes are not a known checkpoint format. */
static hpt_status verify_file(const char *path, verify_ctx *v)
{
    hid_t f;
    hpt_ckpt_meta meta;
    char **names;
    hpt_status st = hpt_ckpt_open(path, &f, &meta);
    if (st)
        return st;
    check_meta_values(v, &meta);
    int n = check_structure(v, f, &meta, &names);
    check_data(v, f, names, n < 0 ? 0 : n);
    hpt_ckpt_names_free(names, n);
    H5Fclose(f);
    return HPT_OK;
}

/* ------------------------------------------------------ checkpoint directory */

/* A run directory stands for its checkpoints/ subdirectory. out: PATH_MAX. */
static void ckpt_dir_of(const char *path, char *out)
{
    char sub[PATH_MAX], probe[PATH_MAX];
    snprintf(out, PATH_MAX, "%s", path);
    if (hpt_ckpt_join(sub, path, "checkpoints") || !hpt_ckpt_is_dir(sub) ||
        hpt_ckpt_join(probe, path, "latest"))
        return;
    if (access(probe, F_OK) && !hpt_ckpt_join(probe, path, HPT_CKPT_FILE) && access(probe, F_OK))
        snprintf(out, PATH_MAX, "%s", sub);
}

/* DIR/latest: 0 with the step directory name in name (32 bytes), -1 when
 * the file is missing, -2 when it does not hold a step_NNNNNNNN name (the
 * text, trimmed, is still in name). */
static int read_latest(const char *dir, char *name)
{
    char p[PATH_MAX], canon[32];
    name[0] = 0;
    if (hpt_ckpt_join(p, dir, "latest"))
        return -1;
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    size_t n = fread(name, 1, 31, f);
    fclose(f);
    name[n] = 0;
    while (n && isspace((unsigned char)name[n - 1]))
        name[--n] = 0;
    char *end;
    long long s = strncmp(name, "step_", 5) || !isdigit((unsigned char)name[5])
                      ? -1 : strtoll(name + 5, &end, 10);
    if (s < 0)
        return -2;
    hpt_ckpt_dirname(s, canon);
    return strcmp(canon, name) ? -2 : 0;
}

typedef struct {
    int64_t step;
    int tmp;       /* 1: step_NNNNNNNN.tmp, an unfinished save */
    char name[64]; /* directory name                           */
} entry;

static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? 1 : -1;
    return x->tmp - y->tmp;
}

/* Checkpoints under dir, newest first: the complete ones (as the trainer
 * sees them, hpt_ckpt_list) and the step_*.tmp leftovers. *out is malloc'd.
 * Errors: the directory cannot be read. */
static hpt_status scan_dir(const char *dir, entry **out, int *count)
{
    DIR *d = opendir(dir);
    if (!d && errno == ENOTDIR && hpt_ckpt_is_file(dir))
        return hpt_error_set(HPT_ERR_DATA, "%s: a file, not a directory: list takes a run "
                             "directory or its checkpoints directory (info, verify and export "
                             "take one checkpoint file)", dir);
    if (!d)
        return hpt_ckpt_path_error(dir, errno);
    int cap = 1024, n = 0;
    int64_t *steps = malloc(sizeof(int64_t) * (size_t)cap);
    entry *e = malloc(sizeof(entry) * (size_t)cap * 2);
    if (!steps || !e)
        HPT_FATAL("out of memory listing %s", dir);
    int nc = hpt_ckpt_list(dir, steps, cap);
    for (int i = 0; i < nc; i++, n++) {
        e[n].step = steps[i];
        e[n].tmp = 0;
        hpt_ckpt_dirname(steps[i], e[n].name);
    }
    struct dirent *de;
    while ((de = readdir(d)) && n < 2 * cap) {
        char *end;
        if (strncmp(de->d_name, "step_", 5) || !isdigit((unsigned char)de->d_name[5]))
            continue;
        long long s = strtoll(de->d_name + 5, &end, 10);
        if (strcmp(end, ".tmp") || strlen(de->d_name) >= sizeof e[n].name)
            continue;
        e[n].step = s;
        e[n].tmp = 1;
        memcpy(e[n].name, de->d_name, strlen(de->d_name) + 1); /* length checked above */
        n++;
    }
    closedir(d);
    free(steps);
    qsort(e, (size_t)n, sizeof *e, entry_cmp);
    *out = e;
    *count = n;
    return HPT_OK;
}

/* -------------------------------------------------------------------- list */

typedef struct {
    char layout[24], zero1[8], samples[24]; /* "-" when not known        */
    char status[320];                       /* complete, damaged (...), ... */
    char note[1200];                        /* printed under the table     */
    int bad;                                /* unreadable or damaged       */
    int unread;                             /* not read: no file locks     */
} list_row;

/* The row for checkpoint directory e under dir: the root attributes, and
 * with `verify` the result of verify_file. */
static void list_row_fill(const char *dir, const entry *e, int verify, const hpt_ckpt_model *mdl,
                          list_row *r)
{
    char p[PATH_MAX], file[PATH_MAX];
    hpt_ckpt_meta m;
    hid_t f;
    memset(r, 0, sizeof *r);
    snprintf(r->layout, sizeof r->layout, "-");
    snprintf(r->zero1, sizeof r->zero1, "-");
    snprintf(r->samples, sizeof r->samples, "-");
    if (e->tmp) {
        snprintf(r->status, sizeof r->status, "incomplete (%s)", e->name);
        return;
    }
    if (hpt_ckpt_join(p, dir, e->name) || hpt_ckpt_join(file, p, HPT_CKPT_FILE) ||
        hpt_ckpt_open(file, &f, &m)) {
        r->unread = strstr(hpt_error_msg(), HPT_H5_NOLOCK_TEXT) != NULL;
        snprintf(r->status, sizeof r->status, r->unread ? "not read (no file locks)" : "unreadable");
        snprintf(r->note, sizeof r->note, "%s", hpt_error_msg());
        r->bad = !r->unread;
        return;
    }
    H5Fclose(f);
    snprintf(r->layout, sizeof r->layout, "%dx%dx%d", (int)m.tp, (int)m.pp, (int)m.dp);
    if (m.cp > 1) /* the writer's context parallelism (attribute cp, 1 when absent) */
        snprintf(r->layout + strlen(r->layout), sizeof r->layout - strlen(r->layout), ",cp%d",
                 (int)m.cp);
    snprintf(r->zero1, sizeof r->zero1, "%s", m.zero1 >= 2 ? (m.zero1 == 3 ? "yes-3" : "yes-2") : m.zero1 ? "yes" : "no");
    snprintf(r->samples, sizeof r->samples, "%lld", (long long)m.samples);
    verify_ctx v = {file, mdl, NULL, 0, ""};
    if (verify && verify_file(file, &v)) /* opened a moment ago: a race, or out of memory */
        snprintf(v.first, sizeof v.first, "%s", hpt_error_msg()), v.nbad = 1;
    r->bad = v.nbad > 0;
    snprintf(r->status, sizeof r->status, v.nbad ? "damaged (%s)" : "complete", v.first);
}

/* Print the notes about DIR/latest, which only informs: a resume takes
 * the newest complete checkpoint. Returns the name latest holds ("" if
 * none) in latest (32 bytes). */
static void latest_notes(const char *dir, const entry *e, int n, char *latest, FILE *out)
{
    int rc = read_latest(dir, latest), found = 0, newest = -1;
    for (int i = 0; i < n; i++) {
        found |= rc == 0 && !e[i].tmp && !strcmp(e[i].name, latest);
        newest = newest < 0 && !e[i].tmp ? i : newest;
    }
    if (rc == -1)
        fprintf(out, "latest: missing (no %s/latest file)\n", dir);
    else if (rc == -2)
        fprintf(out, "latest: malformed ('%s', expected step_NNNNNNNN)\n", latest);
    else if (!found)
        fprintf(out, "latest: names %s, which does not exist\n", latest);
    if (newest >= 0 && (rc || strcmp(e[newest].name, latest)))
        fprintf(out, "resume: tries %s first (the newest complete checkpoint)\n", e[newest].name);
    if (rc)
        latest[0] = 0;
}

hpt_status hpt_ckpt_inspect_list(const char *path, int verify, const hpt_ckpt_model *mdl, FILE *out)
{
    char dir[PATH_MAX], latest[32], p[PATH_MAX];
    entry *e;
    int n, bad = 0, unread = 0;
    ckpt_dir_of(path, dir);
    hpt_status st = scan_dir(dir, &e, &n);
    if (st)
        return st;
    list_row *rows = calloc((size_t)n + 1, sizeof *rows);
    if (!rows)
        HPT_FATAL("out of memory listing %s", dir);
    read_latest(dir, latest);
    fprintf(out, "checkpoints in %s%s\n", dir, verify ? " (data verified)" : "");
    if (n)
        fprintf(out, "%10s  %-10s %-5s %10s %12s  %s\n", "STEP", "TPxPPxDP", "ZERO1", "MiB",
                "SAMPLES", "STATUS");
    else
        fprintf(out, "no checkpoints\n");
    for (int i = 0; i < n; i++) {
        list_row *r = &rows[i];
        list_row_fill(dir, &e[i], verify, mdl, r);
        bad |= r->bad;
        unread += r->unread;
        hpt_ckpt_join(p, dir, e[i].name);
        fprintf(out, "%10lld  %-10s %-5s %10.1f %12s  %s%s\n", (long long)e[i].step, r->layout,
                r->zero1, dir_bytes(p) / 1048576.0, r->samples, r->status,
                !e[i].tmp && !strcmp(e[i].name, latest) ? "  <- latest" : "");
    }
    for (int i = 0; i < n; i++)
        if (rows[i].note[0])
            fprintf(out, "note: %s\n", rows[i].note);
    latest_notes(dir, e, n, latest, out);
    free(rows);
    free(e);
    if (verify && bad)
        return hpt_error_set(HPT_ERR_DATA, "%s: some checkpoints are damaged or unreadable%s", dir,
                             unread ? "; others were not read (no file locks: see the notes)" : "");
    if (verify && unread)
        return hpt_error_set(HPT_ERR_IO, "%s: %d checkpoint%s not read, so not verified: "
                             HPT_H5_NOLOCK_TEXT " (see the notes)", dir, unread,
                             unread == 1 ? "" : "s");
    return HPT_OK;
}

/* ------------------------------------------------------------------ verify */

/* verify one file: "PATH: ok" or the findings. */
static hpt_status verify_one(const char *file, const hpt_ckpt_model *mdl, FILE *out)
{
    verify_ctx v = {file, mdl, out, 0, ""};
    hpt_status st = verify_file(file, &v);
    if (st)
        return st;
    if (v.nbad)
        return hpt_error_set(HPT_ERR_DATA, "%s: damaged or invalid (%d problem%s)", file, v.nbad,
                             v.nbad == 1 ? "" : "s");
    fprintf(out, "%s: ok\n", file);
    return HPT_OK;
}

/* verify each complete checkpoint in checkpoints directory `dir`. */
static hpt_status verify_dir(const char *dir, const hpt_ckpt_model *mdl, FILE *out)
{
    char p[PATH_MAX], file[PATH_MAX];
    entry *e;
    int n, bad = 0, unread = 0, ncomplete = 0;
    hpt_status st = scan_dir(dir, &e, &n);
    if (st)
        return st;
    for (int i = 0; i < n; i++) {
        hpt_ckpt_join(p, dir, e[i].name);
        if (e[i].tmp) {
            fprintf(out, "%s: incomplete (an unfinished save; not verified)\n", p);
            continue;
        }
        ncomplete++;
        if (hpt_ckpt_join(file, p, HPT_CKPT_FILE) || (st = verify_one(file, mdl, out))) {
            fprintf(out, "%s\n", hpt_error_msg());
            if (strstr(hpt_error_msg(), HPT_H5_NOLOCK_TEXT))
                unread++;
            else
                bad++;
        }
    }
    free(e);
    if (!ncomplete)
        return hpt_error_set(HPT_ERR_DATA, "%s: no complete checkpoint (step_NNNNNNNN/%s)", dir,
                             HPT_CKPT_FILE);
    if (bad)
        return hpt_error_set(HPT_ERR_DATA, "%s: %d of %d checkpoints damaged or unreadable%s", dir,
                             bad, ncomplete,
                             unread ? "; others not read (no file locks: see above)" : "");
    if (unread)
        return hpt_error_set(HPT_ERR_IO, "%s: %d of %d checkpoints not read, so not verified: "
                             HPT_H5_NOLOCK_TEXT "; set HDF5_USE_FILE_LOCKING=FALSE and run "
                             "again", dir, unread, ncomplete);
    return HPT_OK;
}

hpt_status hpt_ckpt_inspect_verify(const char *path, const hpt_ckpt_model *mdl, FILE *out)
{
    char dir[PATH_MAX], file[PATH_MAX];
    struct stat sb;
    if (stat(path, &sb))
        return hpt_ckpt_path_error(path, errno);
    if (!S_ISDIR(sb.st_mode))
        return verify_one(path, mdl, out);
    if (!hpt_ckpt_join(file, path, HPT_CKPT_FILE) && hpt_ckpt_is_file(file))
        return verify_one(file, mdl, out);
    ckpt_dir_of(path, dir);
    return verify_dir(dir, mdl, out);
}

/* The checkpoint file PATH designates: PATH (a file), PATH/checkpoint.h5
 * (a step directory), or in a checkpoints (or run) directory the newest
 * complete checkpoint — the one a resume tries first. file: PATH_MAX
 * bytes. Errors: HPT_ERR_DATA. */
static hpt_status resolve_file(const char *path, char *file)
{
    char dir[PATH_MAX], skipped[1200];
    int64_t newest;
    struct stat sb;
    if (stat(path, &sb))
        return hpt_ckpt_path_error(path, errno);
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(file, PATH_MAX, "%s", path);
        return HPT_OK;
    }
    hpt_status st = hpt_ckpt_join(file, path, HPT_CKPT_FILE);
    if (st || hpt_ckpt_is_file(file))
        return st;
    ckpt_dir_of(path, dir);
    int found = hpt_ckpt_newest_readable(dir, &newest, file, skipped, sizeof skipped);
    if (found == -2) /* a newer format's: its message as it is */
        return HPT_ERR_DATA;
    if (found == -3) /* not read (no file locks): its message as it is */
        return HPT_ERR_IO;
    if (found < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: no complete checkpoint opens: %s", path,
                             hpt_error_msg());
    if (!found)
        return hpt_error_set(HPT_ERR_DATA, "%s: not a checkpoint (no %s) and no complete "
                             "step_NNNNNNNN checkpoint in it", path, HPT_CKPT_FILE);
    if (skipped[0])
        fprintf(stderr, "hpt-ckpt: note: %s\n", skipped);
    return HPT_OK;
}

/* -------------------------------------------------------------------- info */

static void info_meta(const char *file, const hpt_ckpt_meta *m, FILE *out)
{
    fprintf(out, "checkpoint     %s\n", file);
    fprintf(out, "format         %s version %d, written by hpt %s\n", HPT_CKPT_FORMAT,
            (int)m->format_version, m->hpt_version);
    fprintf(out, "step           %lld\n", (long long)m->step);
    fprintf(out, "samples        %lld (sequences consumed in the global data order)\n",
            (long long)m->samples);
    fprintf(out, "optimizer      AdamW, t = %lld%s%s\n", (long long)m->adam_t,
            m->optimizer[0] ? "; " : "", m->optimizer);
    fprintf(out, "skipped steps  %lld in total, %lld consecutive at the end\n",
            (long long)m->skipped_total, (long long)m->consecutive_skips);
    fprintf(out, "seed           %llu\n", (unsigned long long)m->seed);
    fprintf(out, "batch          %lld sequences of %d tokens per step, micro-batch %d\n",
            (long long)m->global_batch, (int)m->seq_len, (int)m->micro_batch);
    /* cp: the writer's context parallelism, 1 when the attribute is absent;
     * the tensors do not depend on it */
    if (m->zero1)
        fprintf(out, "layout         tp %d x cp %d x pp %d x dp %d, ZeRO-%d\n", (int)m->tp,
                (int)m->cp, (int)m->pp, (int)m->dp, (int)m->zero1);
    else
        fprintf(out, "layout         tp %d x cp %d x pp %d x dp %d, no ZeRO\n", (int)m->tp,
                (int)m->cp, (int)m->pp, (int)m->dp);
}

static void info_model(const char *file, const hpt_ckpt_meta *m, const hpt_ckpt_model *mdl,
                       FILE *out)
{
    char origin[PATH_MAX + 16], text[1024];
    snprintf(origin, sizeof origin, "%s: config_json", file);
    if (mdl->describe(m->config_json, origin, text, sizeof text))
        fprintf(out, "model          config_json invalid: %s\n", hpt_error_msg());
    else
        fprintf(out, "model          %s\n", text);
}

/* The table of /model tensors: name, shape, dtype, layer. */
static void info_tensors(hid_t f, FILE *out)
{
    char **names[3], sh[64], dt[32], lay[16], why[300], path[512];
    int n[3], w = 4;
    for (int g = 0; g < 3; g++)
        if ((n[g] = hpt_ckpt_names(f, hpt_ckpt_groups[g], &names[g])) == -2)
            fprintf(out, "%s: links unreadable (damaged metadata): %s\n", hpt_ckpt_groups[g],
                    hpt_ckpt_names_why());
    fprintf(out, "tensors        %d in /model, %d in /optim/exp_avg, %d in /optim/exp_avg_sq\n\n",
            n[0] < 0 ? 0 : n[0], n[1] < 0 ? 0 : n[1], n[2] < 0 ? 0 : n[2]);
    for (int i = 0; i < n[0]; i++)
        w = (int)strlen(names[0][i]) > w ? (int)strlen(names[0][i]) : w;
    if (n[0] > 0)
        fprintf(out, "%-*s  %-14s %-8s %5s\n", w, "NAME", "SHAPE", "DTYPE", "LAYER");
    for (int i = 0; i < n[0]; i++) {
        hpt_ckpt_shape s;
        int32_t l;
        snprintf(path, sizeof path, "/model/%s", names[0][i]);
        hid_t ds = hpt_ckpt_open_dataset(f, path, why, sizeof why);
        if (ds < 0) {
            fprintf(out, "%-*s  %s\n", w, names[0][i], why);
            continue;
        }
        snprintf(lay, sizeof lay, "-");
        if (!hpt_ckpt_get_layer(ds, &l))
            snprintf(lay, sizeof lay, "%d", (int)l);
        fprintf(out, "%-*s  %-14s %-8s %5s\n", w, names[0][i],
                hpt_ckpt_get_shape(ds, &s) ? "?" : hpt_ckpt_shape_str(&s, sh, sizeof sh),
                hpt_ckpt_dtype_str(ds, dt, sizeof dt), lay);
        H5Dclose(ds);
    }
    for (int g = 0; g < 3; g++)
        hpt_ckpt_names_free(names[g], n[g]);
}

hpt_status hpt_ckpt_inspect_info(const char *path, const hpt_ckpt_model *mdl, FILE *out)
{
    char file[PATH_MAX];
    hid_t f;
    hpt_ckpt_meta m;
    hpt_status st = resolve_file(path, file);
    if (st || (st = hpt_ckpt_open(file, &f, &m)))
        return st;
    info_meta(file, &m, out);
    info_model(file, &m, mdl, out);
    info_tensors(f, out);
    H5Fclose(f);
    return HPT_OK;
}

/* ------------------------------------------------------------------ export */

typedef struct {
    hid_t dst; /* output dataset, same shape as the source */
} copy_ctx;

static int write_block(void *ctx, hsize_t row0, const hsize_t *cnt, int rank, const float *buf,
                       char *why, size_t n)
{
    hid_t dst = ((copy_ctx *)ctx)->dst, fsp = H5Dget_space(dst);
    hid_t msp = H5Screate_simple(rank, cnt, NULL);
    hsize_t off[2] = {row0, 0};
    int err = fsp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, off, NULL, cnt, NULL) < 0 ||
              H5Dwrite(dst, H5T_NATIVE_FLOAT, msp, fsp, H5P_DEFAULT, buf) < 0;
    if (err)
        snprintf(why, n, "write failed: %s", hpt_h5_cause_line());
    H5Sclose(msp);
    if (fsp >= 0)
        H5Sclose(fsp);
    return err ? -1 : 0;
}

/* Copy /model/<name> of src to /<name> of dst (contiguous float32).
 * Errors: HPT_ERR_DATA for a damaged source, HPT_ERR_IO for a failed
 * write (the reason says which). */
static hpt_status copy_tensor(hid_t src, hid_t dst, const char *file, const char *out_path,
                              const char *name)
{
    char path[512], why[400];
    hpt_ckpt_shape s;
    snprintf(path, sizeof path, "/model/%s", name);
    hid_t in = hpt_ckpt_open_dataset(src, path, why, sizeof why);
    if (in < 0)
        return hpt_error_set(HPT_ERR_DATA, "%s: %s: %s", file, path, why);
    if (hpt_ckpt_get_shape(in, &s)) {
        H5Dclose(in);
        return hpt_error_set(HPT_ERR_DATA, "%s: %s: not a 1-D or 2-D array", file, path);
    }
    hid_t sp = H5Screate_simple(s.rank, s.dims, NULL);
    copy_ctx c = {H5Dcreate2(dst, name, H5T_NATIVE_FLOAT, sp, H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT)};
    H5Sclose(sp);
    hpt_status st = HPT_OK;
    if (c.dst < 0)
        st = hpt_error_set(HPT_ERR_IO, "%s: cannot create dataset %s: %s", out_path, name,
                           hpt_h5_cause_line());
    else if (hpt_ckpt_read_blocks(in, write_block, &c, why, sizeof why))
        st = hpt_error_set(strncmp(why, "write failed", 12) ? HPT_ERR_DATA : HPT_ERR_IO,
                           "%s: %s: %s", strncmp(why, "write failed", 12) ? file : out_path,
                           strncmp(why, "write failed", 12) ? path : name, why);
    if (c.dst >= 0)
        H5Dclose(c.dst);
    H5Dclose(in);
    return st;
}

/* Feeds the blocks of one tensor, in row order, to a safetensors writer. */
typedef struct {
    hpt_st_writer *w;
    hsize_t next_row; /* the row the next block must start at */
} st_sink_ctx;

static int st_block(void *ctx, hsize_t row0, const hsize_t *cnt, int rank, const float *buf,
                    char *why, size_t n)
{
    st_sink_ctx *c = ctx;
    size_t k = (size_t)cnt[0] * (rank > 1 ? (size_t)cnt[1] : 1);
    if (row0 != c->next_row) {
        snprintf(why, n, "write failed: block of row %llu out of order (expected %llu)",
                 (unsigned long long)row0, (unsigned long long)c->next_row);
        return -1;
    }
    c->next_row += cnt[0];
    if (hpt_st_writer_write(c->w, buf, k)) {
        snprintf(why, n, "write failed: %s", hpt_error_msg());
        return -1;
    }
    return 0;
}

/* The tensors of the model, in its order (mdl->tensors), as safetensors
 * writes them; *list malloc'd. */
static hpt_status st_tensor_list(const hpt_ckpt_meta *m, const char *file,
                                 const hpt_ckpt_model *mdl, hpt_st_out_tensor **list, int *n)
{
    char origin[PATH_MAX + 16];
    hpt_ckpt_tensor *t;
    snprintf(origin, sizeof origin, "%s: config_json", file);
    hpt_status st = mdl->tensors(m->config_json, origin, &t, n);
    if (st)
        return st;
    *list = calloc((size_t)(*n ? *n : 1), sizeof **list);
    for (int i = 0; *list && i < *n; i++) {
        snprintf((*list)[i].name, sizeof (*list)[i].name, "%s", t[i].name);
        (*list)[i].rows = t[i].rows, (*list)[i].cols = t[i].cols;
        (*list)[i].ndim = t[i].cols > 1 ? 2 : 1;
    }
    free(t);
    return *list ? HPT_OK : hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
}

/* Write every /model tensor of src as safetensors at out_path, with the
 * Hugging Face config.json beside it (io/safetensors_write.h). */
static hpt_status export_st(hid_t src, const char *file, const hpt_ckpt_meta *m,
                            const hpt_ckpt_export_opts *o, const hpt_ckpt_model *mdl,
                            const char *out_path, int *count, int *nfiles)
{
    hpt_st_out_tensor *list = NULL;
    char config[8192], origin[PATH_MAX + 16];
    snprintf(origin, sizeof origin, "%s: config_json", file);
    hpt_status st = st_tensor_list(m, file, mdl, &list, count);
    if (!st)
        st = mdl->hf_config(m->config_json, origin, o->bf16 ? "bfloat16" : "float32", config,
                            sizeof config);
    hpt_st_writer *w = NULL;
    if (!st)
        st = hpt_st_writer_open(&w, out_path, list, *count,
                                o->bf16 ? HPT_ST_OUT_BF16 : HPT_ST_OUT_F32,
                                o->shard_size ? o->shard_size : HPT_ST_SHARD_DEFAULT, config);
    for (int i = 0; i < *count && !st; i++) {
        char path[512], why[1200];
        snprintf(path, sizeof path, "/model/%s", list[i].name);
        hid_t in = hpt_ckpt_open_dataset(src, path, why, sizeof why);
        if (in < 0) {
            st = hpt_error_set(HPT_ERR_DATA, "%s: %s: %s", file, path, why);
            break;
        }
        st_sink_ctx c = {w, 0};
        if (hpt_ckpt_read_blocks(in, st_block, &c, why, sizeof why))
            st = hpt_error_set(strncmp(why, "write failed", 12) ? HPT_ERR_DATA : HPT_ERR_IO,
                               "%s: %s: %s", strncmp(why, "write failed", 12) ? file : out_path,
                               strncmp(why, "write failed", 12) ? path : list[i].name, why);
        H5Dclose(in);
    }
    free(list);
    return hpt_st_writer_finish(w, st, nfiles);
}

/* An hpt run directory (checkpoints/ or log.tsv in it): its config.json
 * is the run's own. */
static int is_run_dir(const char *dir)
{
    char p[PATH_MAX + 32];
    struct stat sb;
    snprintf(p, sizeof p, "%s/checkpoints", dir);
    if (!stat(p, &sb))
        return 1;
    snprintf(p, sizeof p, "%s/log.tsv", dir);
    return !stat(p, &sb);
}

/* Write every /model tensor of src and config_json to out_path (through
 * OUT.tmp, hpt_h5_out); the tensors must be those config_json describes. */
static hpt_status export_into(hid_t src, const char *file, const hpt_ckpt_meta *m,
                              const hpt_ckpt_model *mdl, const char *out_path, int *count)
{
    char **names;
    hpt_h5_out o;
    verify_ctx v = {file, mdl, NULL, 0, ""};
    int n = check_structure(&v, src, m, &names);
    if (v.nbad) {
        hpt_ckpt_names_free(names, n);
        return hpt_error_set(HPT_ERR_DATA, "%s: %s: not the tensors config_json describes (%d "
                             "problem%s; see hpt-ckpt verify)", file, v.first, v.nbad,
                             v.nbad == 1 ? "" : "s");
    }
    hpt_status st = hpt_h5_out_create(out_path, &o);
    if (st) {
        hpt_ckpt_names_free(names, n);
        return st;
    }
    if (hpt_h5_put_str_attr(o.file, "config_json", m->config_json))
        st = hpt_error_set(HPT_ERR_IO, "%s: cannot write attribute config_json: %s", o.tmp,
                           hpt_h5_cause_line());
    for (int i = 0; i < n && !st; i++)
        st = copy_tensor(src, o.file, file, o.tmp, names[i]);
    hpt_ckpt_names_free(names, n);
    *count = n;
    return hpt_h5_out_finish(&o, st);
}

/* export_st after the structure check of export_into. */
static hpt_status export_st_checked(hid_t src, const char *file, const hpt_ckpt_meta *m,
                                    const hpt_ckpt_export_opts *o, const hpt_ckpt_model *mdl,
                                    const char *out_path, int *count, int *nfiles)
{
    char **names;
    verify_ctx v = {file, mdl, NULL, 0, ""};
    int n = check_structure(&v, src, m, &names);
    hpt_ckpt_names_free(names, n);
    if (v.nbad)
        return hpt_error_set(HPT_ERR_DATA, "%s: %s: not the tensors config_json describes (%d "
                             "problem%s; see hpt-ckpt verify)", file, v.first, v.nbad,
                             v.nbad == 1 ? "" : "s");
    return export_st(src, file, m, o, mdl, out_path, count, nfiles);
}

hpt_status hpt_ckpt_inspect_export(const char *path, const char *out_path,
                                   const hpt_ckpt_export_opts *o, const hpt_ckpt_model *mdl,
                                   FILE *out)
{
    char file[PATH_MAX];
    hid_t f;
    hpt_ckpt_meta m;
    int n = 0, nfiles = 1, is_st = hpt_st_out_is_safetensors(out_path);
    hpt_ckpt_export_opts defaults = {0, 0};
    o = o ? o : &defaults;
    if (!*out_path)
        return hpt_error_set(HPT_ERR_USAGE, "export: OUT.h5 is empty: give a file name");
    struct stat sb;
    if (hpt_ckpt_is_dir(out_path))
        return hpt_error_set(HPT_ERR_IO, "%s: is a directory", out_path);
    if (stat(out_path, &sb) == 0 && !S_ISREG(sb.st_mode)) /* the rename would replace it */
        return hpt_error_set(HPT_ERR_IO, "%s: not a regular file (left untouched)", out_path);
    const char *slash = strrchr(out_path, '/');
    if (slash && slash != out_path) { /* the directory must be there: nothing creates it */
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - out_path), out_path);
        if (!hpt_ckpt_is_dir(dir))
            return hpt_error_set(HPT_ERR_IO, "%s: directory %s does not exist", out_path, dir);
    }
    if (is_st) { /* config.json goes beside it: not over a run's own */
        char dir[PATH_MAX], cfg[PATH_MAX + 16];
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out_path) + (slash == out_path)
                                                : 1, slash ? out_path : ".");
        if (is_run_dir(dir))
            return hpt_error_set(HPT_ERR_USAGE, "export: OUT %s is in the run directory %s: its "
                                 "config.json would replace the run's own; export into another "
                                 "directory", out_path, dir);
        snprintf(cfg, sizeof cfg, "%s/config.json", dir);
        if (stat(cfg, &sb) == 0 && !S_ISREG(sb.st_mode))
            return hpt_error_set(HPT_ERR_IO, "%s: not a regular file (left untouched)", cfg);
    }
    if (hpt_ckpt_file_is_checkpoint(out_path)) /* the input itself, or another one */
        return hpt_error_set(HPT_ERR_USAGE, "export: OUT %s is an hpt checkpoint: the export "
                             "(weights only) would replace it; give another file name",
                             out_path);
    hpt_status st = hpt_check_export_not_run_file("export: OUT", out_path, NULL, NULL);
    if (st)
        return st;
    st = resolve_file(path, file);
    if (st || (st = hpt_ckpt_open(file, &f, &m)))
        return st;
    st = is_st ? export_st_checked(f, file, &m, o, mdl, out_path, &n, &nfiles)
               : export_into(f, file, &m, mdl, out_path, &n);
    H5Fclose(f);
    if (st)
        return st;
    if (nfiles > 1)
        fprintf(out, "exported %d tensors of step %lld from %s to %d shards and %s.index.json\n",
                n, (long long)m.step, file, nfiles, out_path);
    else
        fprintf(out, "exported %d tensors of step %lld from %s to %s\n", n, (long long)m.step,
                file, out_path);
    return HPT_OK;
}
