/* Small file-system helpers of the environment module: messages, whole-file reads, recursive
 * removal, mkdir -p and atomic writes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

void env__msg(char *msg, size_t len, const char *fmt, ...)
{
    if (msg == NULL || len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
}

const char *env_strerror(int err)
{
    switch (err) {
        ENV_ERRORS(PTC_ERR_CASE)
    }
    return ptc_strerror(err);
}

int env__read_file(const char *path, size_t max, char **out, size_t *out_len)
{
    /* base/'s reader; the builder's callers tell only a size, memory or file-system failure. */
    _Static_assert((int)ENV_ETOOBIG == (int)PTC_ETOOBIG && (int)ENV_ENOMEM == (int)PTC_ENOMEM,
                   "one error space");
    int rc = ptc_file_read(path, max, out, out_len);
    if (rc == 0 || rc == ENV_ETOOBIG || rc == ENV_ENOMEM) return rc;
    return ENV_EIO;
}

char *env__dup_or_null(const char *s, bool *ok)
{
    if (s == NULL) return NULL;
    char *d = strdup(s);
    if (d == NULL) *ok = false;
    return d;
}

int env__remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) return unlink(path);
    int rc = 0;
    DIR *d = opendir(path);
    if (d != NULL) {
        struct dirent *e;
        size_t plen = strlen(path);
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            size_t need = plen + 1 + strlen(e->d_name) + 1;
            char *sub = malloc(need);
            if (sub == NULL) {
                rc = -1;
                continue;
            }
            snprintf(sub, need, "%s/%s", path, e->d_name);
            if (env__remove_tree(sub) != 0) rc = -1;
            free(sub);
        }
        closedir(d);
    }
    if (rmdir(path) != 0) rc = -1;
    return rc;
}

int env__mkdirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int env__write_file_atomic(const char *path, const char *data, size_t len)
{
    char tmp[4096];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
    if (n < 0 || (size_t)n >= sizeof tmp) return ENV_EIO;
    int fd = mkstemp(tmp);
    if (fd < 0) return ENV_EIO;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    /* 0644: the sandbox reads these as another uid */
    bool ok = off == len && fchmod(fd, 0644) == 0;
    if (close(fd) != 0) ok = false;
    if (!ok) {
        unlink(tmp);
        return ENV_EIO;
    }
    if (rename(tmp, path) != 0) {
        unlink(tmp);
        return ENV_EIO;
    }
    return 0;
}

void env__hex(const unsigned char *digest32, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < 32; i++) {
        out[2 * i] = digits[digest32[i] >> 4];
        out[2 * i + 1] = digits[digest32[i] & 15];
    }
    out[64] = '\0';
}
