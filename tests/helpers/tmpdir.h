/* tmpdir.h — a fresh temporary directory for a C unit test (test_data.c,
 * test_safetensors.c): tmpdir_make("prefix") creates $TMPDIR/prefix.XXXXXX
 * (or under /tmp), tpath("name") gives a path inside it (one of 8 rotating
 * static buffers, so a few may be live at once), tmpdir_remove() deletes it
 * and everything in it. Include once per test program, after defining
 * _XOPEN_SOURCE 700 (nftw). */
#ifndef HPT_TEST_TMPDIR_H
#define HPT_TEST_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

static char tmpdir[4096];

/* 0 on success; -1 (perror printed) when the directory cannot be made. */
static int tmpdir_make(const char *prefix)
{
    const char *base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/%s.XXXXXX", base, prefix);
    if (!mkdtemp(tmpdir)) {
        perror(tmpdir);
        return -1;
    }
    return 0;
}

static const char *tpath(const char *name)
{
    static char buf[8][4096 + 64];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static int tmpdir_rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void tmpdir_remove(void) { nftw(tmpdir, tmpdir_rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

#endif
