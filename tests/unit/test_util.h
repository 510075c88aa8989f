/* test_util.h - helpers the unit tests of every module share: temporary folders. Header-only
 * (static inline, so a test that uses one of them does not warn about the other); include it
 * after <cmocka.h>. */
#ifndef PTC_TEST_UTIL_H
#define PTC_TEST_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TU_PATH_MAX 4096

/* A new empty folder "$TMPDIR/<prefix>-XXXXXX" (TMPDIR unset: /tmp). Caller frees the path. */
static inline char *tu_temp_dir(const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    char *d = malloc(TU_PATH_MAX);
    assert_non_null(d);
    snprintf(d, TU_PATH_MAX, "%s/%s-XXXXXX", tmp && tmp[0] ? tmp : "/tmp", prefix);
    assert_non_null(mkdtemp(d));
    return d;
}

/* Removes path and, for a folder, everything below it; symbolic links are removed, never
 * followed. Returns 0 when path is gone, -1 when something could not be removed. */
static inline int tu_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode)) return unlink(path);
    DIR *d = opendir(path);
    if (d != NULL) {
        struct dirent *e;
        char sub[TU_PATH_MAX];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            int n = snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            if (n > 0 && (size_t)n < sizeof sub) tu_remove_tree(sub); /* else rmdir fails below */
        }
        closedir(d);
    }
    return rmdir(path);
}

#endif
