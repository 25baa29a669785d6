/* live_report.c — `hpt-metrics report`: the live page with the data of
 * finished (or stopped) runs inlined, built from the same JSON hpt-live
 * serves (lib/live_json.c), so the report and the live page can never
 * disagree about a file. See live.h. */
#include "live.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* The whole of file `path`, NUL-terminated: malloc'd, the caller frees. */
static hpt_status slurp(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return hpt_error_set(HPT_ERR_IO, "%s: cannot read the page asset: %s", path,
                             strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb)
            free(buf);
        buf = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf)
        return hpt_error_set(HPT_ERR_INTERNAL, "%s: out of memory reading it", path);
    if (bad) {
        free(buf);
        return hpt_error_set(HPT_ERR_IO, "%s: read error", path);
    }
    buf[len] = 0;
    *out = buf;
    return HPT_OK;
}

/* Write `text` inside a <script> or <style> element: every "</" followed
 * by the element's name becomes "<\/" (equal in JS strings and regular
 * expressions, where alone it can occur), so the element cannot end early. */
static void put_inline(FILE *out, const char *text, const char *tag)
{
    size_t tl = strlen(tag);
    for (const char *p = text; *p; p++) {
        if (p[0] == '<' && p[1] == '/' && !strncasecmp(p + 2, tag, tl)) {
            fputs("<\\/", out);
            p++;
            continue;
        }
        fputc(*p, out);
    }
}

/* window.HPT_DATA = {"runs":[...],"history":[...]}: the /api/runs list
 * and one /api/history object per file, as hpt-live would serve them. */
static hpt_status report_data(const char *const *paths, int n, size_t points, FILE *out)
{
    hpt_live_run **runs = calloc((size_t)(n > 0 ? n : 1), sizeof *runs);
    hpt_sbuf b = {0};
    hpt_status st = runs ? HPT_OK : hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
    int opened = 0;
    for (int i = 0; !st && i < n; i++) {
        if (!(runs[i] = malloc(sizeof *runs[i]))) {
            st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory");
            break;
        }
        hpt_live_run_init(runs[i], i, paths[i], NULL, 0);
        opened++;
        if (access(runs[i]->path, F_OK) != 0)
            st = hpt_error_set(HPT_ERR_DATA, "%s: no such file", runs[i]->path);
        else if (hpt_live_not_metrics(runs[i]->path))
            st = HPT_ERR_DATA;
        if (!st) {
            hpt_live_run_poll(runs[i], (double)time(NULL), NULL);
            if (runs[i]->state == HPT_LIVE_WAITING || runs[i]->state == HPT_LIVE_ERROR)
                st = hpt_error_set(HPT_ERR_DATA, "%s", runs[i]->error);
        }
    }
    if (!st) {
        hpt_live_runs_json(runs, n, &b); /* {"runs":[...]}: reopened below */
        if (b.n && b.p[b.n - 1] == '}')
            b.n--;
        hpt_sbuf_printf(&b, ",\"history\":[");
        for (int i = 0; !st && i < n; i++) {
            if (i)
                hpt_sbuf_put(&b, ",\n", 2);
            st = hpt_live_run_history_json(runs[i], points, -1, &b);
        }
        hpt_sbuf_printf(&b, "]}");
        if (!st && b.oom)
            st = hpt_error_set(HPT_ERR_INTERNAL, "out of memory (report data)");
    }
    if (!st) {
        fputs("window.HPT_DATA = ", out);
        fwrite(b.p, 1, b.n, out);
        fputs(";\n", out);
    }
    for (int i = 0; i < opened; i++) {
        hpt_live_run_free(runs[i]);
        free(runs[i]);
    }
    free(runs);
    free(b.p);
    return st;
}

hpt_status hpt_live_report_write(const char *const *paths, int n, size_t points,
                                 const char *const assets[3], FILE *out)
{
    char *text[3] = {0};
    hpt_status st = HPT_OK;
    for (int a = 0; !st && a < 3; a++)
        st = slurp(assets[a], &text[a]);
    if (!st) {
        fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
              "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
              "<meta name=\"generator\" content=\"hpt-metrics report\">\n<link rel=\"icon\" href=\"data:,\">\n"
              "<title>hpt report</title>\n<style>\n", out);
        put_inline(out, text[0], "style");
        fputs("</style>\n</head>\n<body>\n<script>\n", out);
        st = report_data(paths, n, points, out);
    }
    if (!st) {
        fputs("</script>\n<script>\n", out);
        put_inline(out, text[1], "script");
        fputs("\n</script>\n<script>\n", out);
        put_inline(out, text[2], "script");
        fputs("\n</script>\n</body>\n</html>\n", out);
        if (ferror(out))
            st = hpt_error_set(HPT_ERR_IO, "writing the report failed: %s", strerror(errno));
    }
    for (int a = 0; a < 3; a++)
        free(text[a]);
    return st;
}
