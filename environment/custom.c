/* The user's own helpers: .py files and package folders copied into a content-addressed folder
 * under the cache (SHA-256 of every module name, relative path and content), whose entries are
 * importable by module name once the folder is on sys.path. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mbedtls/sha256.h>

#include "internal.h"

#define PATH_LEN 4096u

typedef struct file_ent {
    char *rel; /* path inside the published folder: "textutils.py", "pkg/sub.py" */
    char *src; /* where it is read from */
    uint64_t size;
} file_ent_t;

typedef struct walk {
    file_ent_t *files;
    size_t n, cap;
    uint64_t bytes;
    char *msg;
    size_t msg_len;
} walk_t;

static void walk_free(walk_t *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->files[i].rel);
        free(w->files[i].src);
    }
    free(w->files);
}

static int add_file(walk_t *w, const char *rel, const char *src, uint64_t size)
{
    if (w->n >= ENV_MAX_CUSTOM_FILES || w->bytes + size > ENV_MAX_CUSTOM_BYTES) {
        env__msg(w->msg, w->msg_len, "the helpers hold more than %u files or %llu MiB (at %s)",
                 ENV_MAX_CUSTOM_FILES, (unsigned long long)(ENV_MAX_CUSTOM_BYTES >> 20), src);
        return ENV_ETOOBIG;
    }
    /* n < ENV_MAX_CUSTOM_FILES (checked above): only ENOMEM is left. */
    if (ptc_array_reserve(&w->files, &w->cap, w->n + 1, sizeof *w->files, ENV_MAX_CUSTOM_FILES) < 0)
        return ENV_ENOMEM;
    file_ent_t *f = &w->files[w->n];
    f->rel = strdup(rel);
    f->src = strdup(src);
    f->size = size;
    if (f->rel == NULL || f->src == NULL) {
        free(f->rel);
        free(f->src);
        return ENV_ENOMEM;
    }
    w->n++;
    w->bytes += size;
    return 0;
}

/* Regular files below dir, as rel/...; caches, compiled files and symbolic links skipped (a
   link could point anywhere on the host, and the copy must not depend on where). */
static int walk_dir(walk_t *w, const char *dir, const char *rel, unsigned depth)
{
    if (depth > 32) {
        env__msg(w->msg, w->msg_len, "%s: folders nested too deep", dir);
        return ENV_ETOOBIG;
    }
    DIR *d = opendir(dir);
    if (d == NULL) {
        env__msg(w->msg, w->msg_len, "%s: %s", dir, strerror(errno));
        return ENV_EIO;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        size_t len = strlen(name);
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, "__pycache__") == 0 ||
            (len > 4 && strcmp(name + len - 4, ".pyc") == 0))
            continue;
        char src[PATH_LEN], sub[PATH_LEN];
        int n1 = snprintf(src, sizeof src, "%s/%s", dir, name);
        int n2 = snprintf(sub, sizeof sub, "%s/%s", rel, name);
        if (n1 < 0 || n2 < 0 || (size_t)n1 >= sizeof src || (size_t)n2 >= sizeof sub) {
            env__msg(w->msg, w->msg_len, "%s/%s: path too long", dir, name);
            rc = ENV_ETOOBIG;
            break;
        }
        struct stat st;
        if (lstat(src, &st) != 0) {
            env__msg(w->msg, w->msg_len, "%s: %s", src, strerror(errno));
            rc = ENV_EIO;
        } else if (S_ISDIR(st.st_mode)) {
            rc = walk_dir(w, src, sub, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            rc = add_file(w, sub, src, (uint64_t)st.st_size);
        }
    }
    closedir(d);
    return rc;
}

static int cmp_rel(const void *a, const void *b)
{
    return strcmp(((const file_ent_t *)a)->rel, ((const file_ent_t *)b)->rel);
}

static bool is_identifier(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return false;
    return true;
}

/* "textutils" from ".../textutils.py" or ".../textutils/" (malloc'd), or NULL with msg. */
static char *module_name(const char *path, bool *is_dir, char *msg, size_t len)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        env__msg(msg, len, "custom tools %s: %s", path, strerror(errno));
        return NULL;
    }
    *is_dir = S_ISDIR(st.st_mode);
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t start = n;
    while (start > 0 && path[start - 1] != '/')
        start--;
    const char *base = path + start;
    size_t blen = n - start;
    if (!*is_dir) {
        if (!S_ISREG(st.st_mode) || blen < 4 || strncmp(base + blen - 3, ".py", 3) != 0) {
            env__msg(msg, len, "custom tools %s: not a .py file or a package folder", path);
            return NULL;
        }
        blen -= 3;
    }
    if (!is_identifier(base, blen)) {
        env__msg(msg, len, "custom tools %s: \"%.*s\" is not a Python module name", path, (int)blen,
                 base);
        return NULL;
    }
    /* `tools` is the package of the configured servers' tools inside every run */
    if (blen == 5 && strncmp(base, "tools", 5) == 0) {
        env__msg(msg, len,
                 "custom tools %s: the module name \"tools\" is taken by the sandbox's "
                 "own tools package; rename it",
                 path);
        return NULL;
    }
    return strndup(base, blen);
}

static int hash_walk(const walk_t *w, char *hex)
{
    mbedtls_sha256_context ctx;
    mbedtls_sha256_init(&ctx);
    int rc = mbedtls_sha256_starts_ret(&ctx, 0);
    if (rc == 0) rc = mbedtls_sha256_update_ret(&ctx, (const unsigned char *)"ptc-custom-1", 13);
    unsigned char buf[16384];
    for (size_t i = 0; rc == 0 && i < w->n; i++) {
        const file_ent_t *f = &w->files[i];
        rc = mbedtls_sha256_update_ret(&ctx, (const unsigned char *)f->rel, strlen(f->rel) + 1);
        int fd = rc == 0 ? open(f->src, O_RDONLY | O_CLOEXEC) : -1;
        if (fd < 0) {
            rc = -1;
            break;
        }
        uint64_t left = f->size; /* exactly the size the walk saw: the copy uses the same */
        while (rc == 0 && left > 0) {
            ssize_t r = read(fd, buf, left < sizeof buf ? (size_t)left : sizeof buf);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                rc = -1;
                break;
            }
            rc = mbedtls_sha256_update_ret(&ctx, buf, (size_t)r);
            left -= (uint64_t)r;
        }
        close(fd);
        unsigned char sz[8];
        for (int b = 0; b < 8; b++)
            sz[b] = (unsigned char)(f->size >> (8 * b));
        if (rc == 0) rc = mbedtls_sha256_update_ret(&ctx, sz, sizeof sz);
    }
    unsigned char digest[32];
    if (rc == 0) rc = mbedtls_sha256_finish_ret(&ctx, digest);
    mbedtls_sha256_free(&ctx);
    if (rc != 0) return ENV_EIO;
    env__hex(digest, hex);
    return 0;
}

static int copy_file(const char *src, const char *dst, uint64_t size)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return ENV_EIO;
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        close(in);
        return ENV_EIO;
    }
    char buf[16384];
    int rc = 0;
    uint64_t left = size;
    while (rc == 0 && left > 0) {
        ssize_t r = read(in, buf, left < sizeof buf ? (size_t)left : sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            rc = ENV_EIO;
            break;
        }
        for (ssize_t off = 0; off < r;) {
            ssize_t wr = write(out, buf + off, (size_t)(r - off));
            if (wr < 0 && errno == EINTR) continue;
            if (wr <= 0) {
                rc = ENV_EIO;
                break;
            }
            off += wr;
        }
        left -= (uint64_t)r;
    }
    close(in);
    if (fchmod(out, 0644) != 0) rc = ENV_EIO; /* whatever the umask: the sandbox reads it */
    if (close(out) != 0) rc = ENV_EIO;
    return rc;
}

/* Copies every file into tmp, making the folders on the way (0755). */
static int copy_walk(const walk_t *w, const char *tmp, char *msg, size_t len)
{
    for (size_t i = 0; i < w->n; i++) {
        char dst[PATH_LEN];
        int n = snprintf(dst, sizeof dst, "%s/%s", tmp, w->files[i].rel);
        if (n < 0 || (size_t)n >= sizeof dst) return ENV_ETOOBIG;
        for (char *p = dst + strlen(tmp) + 1; (p = strchr(p, '/')) != NULL; p++) {
            *p = '\0';
            int mk = mkdir(dst, 0755);
            if (mk == 0) mk = chmod(dst, 0755);
            *p = '/';
            if (mk != 0 && errno != EEXIST) {
                env__msg(msg, len, "cannot make a folder in %s: %s", tmp, strerror(errno));
                return ENV_EIO;
            }
        }
        if (copy_file(w->files[i].src, dst, w->files[i].size) != 0) {
            env__msg(msg, len, "cannot copy %s into the cache: %s", w->files[i].src,
                     strerror(errno));
            return ENV_EIO;
        }
    }
    return 0;
}

void env_custom_free(env_custom_t *c)
{
    if (c == NULL) return;
    for (size_t i = 0; i < c->n_modules; i++) {
        free(c->modules[i]);
        free(c->sources[i]);
    }
    free(c->modules);
    free(c->sources);
    memset(c, 0, sizeof *c);
}

int env_custom_publish(const char *cache_dir, const char *const *paths, size_t n, env_custom_t *out,
                       char *msg, size_t msg_len)
{
    if (cache_dir == NULL || out == NULL || n == 0 || paths == NULL) return ENV_EINVAL;
    memset(out, 0, sizeof *out);
    if (n > ENV_MAX_CUSTOM_PATHS) {
        env__msg(msg, msg_len, "%zu custom tool paths: at most %u", n, ENV_MAX_CUSTOM_PATHS);
        return ENV_ETOOBIG;
    }
    walk_t w = {.msg = msg, .msg_len = msg_len};
    int rc = ENV_ENOMEM;
    out->modules = calloc(n, sizeof *out->modules);
    out->sources = calloc(n, sizeof *out->sources);
    if (out->modules == NULL || out->sources == NULL) goto fail;
    for (size_t i = 0; i < n; i++) {
        bool is_dir = false;
        char *mod = module_name(paths[i], &is_dir, msg, msg_len);
        if (mod == NULL) {
            rc = ENV_EINVAL;
            goto fail;
        }
        for (size_t j = 0; j < out->n_modules; j++) {
            if (strcmp(out->modules[j], mod) == 0) {
                env__msg(msg, msg_len, "custom tools %s and %s are both module \"%s\"",
                         out->sources[j], paths[i], mod);
                free(mod);
                rc = ENV_EINVAL;
                goto fail;
            }
        }
        out->modules[out->n_modules] = mod;
        out->sources[out->n_modules] = strdup(paths[i]);
        out->n_modules++;
        if (out->sources[i] == NULL) goto fail;
        if (is_dir) {
            rc = walk_dir(&w, paths[i], mod, 0);
        } else {
            struct stat st;
            char rel[PATH_LEN];
            snprintf(rel, sizeof rel, "%s.py", mod);
            rc = stat(paths[i], &st) == 0 ? add_file(&w, rel, paths[i], (uint64_t)st.st_size)
                                          : ENV_EIO;
        }
        if (rc != 0) goto fail;
    }
    qsort(w.files, w.n, sizeof *w.files, cmp_rel);
    rc = hash_walk(&w, out->hex);
    if (rc != 0) {
        env__msg(msg, msg_len, "a custom tool file could not be read");
        goto fail;
    }
    if (env__mkdirs(cache_dir) != 0) {
        env__msg(msg, msg_len, "cache folder %s: %s", cache_dir, strerror(errno));
        rc = ENV_EIO;
        goto fail;
    }
    int len = snprintf(out->dir, sizeof out->dir, "%s/custom-%s", cache_dir, out->hex);
    char tmp[PATH_LEN];
    int tlen = snprintf(tmp, sizeof tmp, "%s/.custom-%s.tmp-XXXXXX", cache_dir, out->hex);
    if (len < 0 || tlen < 0 || (size_t)len >= sizeof out->dir || (size_t)tlen >= sizeof tmp) {
        env__msg(msg, msg_len, "the cache folder's path is too long");
        rc = ENV_ETOOBIG;
        goto fail;
    }
    struct stat st;
    if (stat(out->dir, &st) == 0 && S_ISDIR(st.st_mode)) {
        (void)utimensat(AT_FDCWD, out->dir, NULL, 0); /* used: pruning goes by mtime */
        goto done;                                    /* published before */
    }
    if (mkdtemp(tmp) == NULL || chmod(tmp, 0755) != 0) {
        env__msg(msg, msg_len, "cannot make a folder in %s: %s", cache_dir, strerror(errno));
        rc = ENV_EIO;
        goto fail;
    }
    rc = copy_walk(&w, tmp, msg, msg_len);
    if (rc == 0 && rename(tmp, out->dir) != 0) {
        /* another server published the same content first: its folder is as good */
        if (errno != ENOTEMPTY && errno != EEXIST) {
            env__msg(msg, msg_len, "cannot publish %s: %s", out->dir, strerror(errno));
            rc = ENV_EIO;
        }
        env__remove_tree(tmp);
    } else if (rc != 0) {
        env__remove_tree(tmp);
    }
    if (rc != 0) goto fail;
done:
    walk_free(&w);
    return 0;
fail:
    walk_free(&w);
    env_custom_free(out);
    return rc;
}
