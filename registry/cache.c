/* cache.c - embedding vectors on disk, one checked file per (provider, model, text). */
#include "internal.h"

#include "base.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include <mbedtls/sha256.h>

/* File layout (native byte order: the cache belongs to one machine):
 *   magic[8] "PTCEMB01" | dim u32 | reserved u32 | key[32] | dim floats | sha256[32]
 * The trailing digest covers everything before it, so a torn or edited file is detected; the
 * key inside guards against a file renamed or copied under another name. */
#define MAGIC       "PTCEMB01"
#define HEADER_SIZE (8 + 4 + 4 + 32)
#define DIGEST_SIZE 32
#define EVICT_TO    0.9 /* after an eviction, keep at most this share of max_bytes */

struct reg_cache {
    char *dir;
    size_t max_bytes;
    pthread_mutex_t lock; /* guards bytes and eviction: workers may share one cache */
    size_t bytes;
};

int reg_cache_base(char *out, size_t out_size)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    /* The XDG spec says to ignore a relative XDG_CACHE_HOME. */
    if (xdg != NULL && xdg[0] == '/')
        n = snprintf(out, out_size, "%s/ptc-mcp", xdg);
    else if (home != NULL && home[0] == '/')
        n = snprintf(out, out_size, "%s/.cache/ptc-mcp", home);
    else
        return REG_EINVAL;
    return n < 0 || (size_t)n >= out_size ? REG_ETOOBIG : REG_OK;
}

static int mkdirs(char *path)
{
    /* mkdir -p: create each prefix in turn, tolerating the ones that exist. */
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int rc = mkdir(path, 0700);
        *p = '/';
        if (rc != 0 && errno != EEXIST) return -1;
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    return 0;
}

static int is_entry_name(const char *name)
{
    size_t n = strlen(name);
    return n == 64 + 4 && strcmp(name + 64, ".vec") == 0;
}

/* Calls fn for every entry file (dir/xx/<64 hex>.vec). */
typedef void (*entry_fn)(void *data, const char *path, const struct stat *st);

static void walk(const reg_cache_t *c, entry_fn fn, void *data)
{
    DIR *top = opendir(c->dir);
    if (top == NULL) return;
    struct dirent *d;
    char sub[PATH_MAX], path[PATH_MAX];
    while ((d = readdir(top)) != NULL) {
        if (strlen(d->d_name) != 2 || d->d_name[0] == '.') continue;
        if (snprintf(sub, sizeof sub, "%s/%s", c->dir, d->d_name) >= (int)sizeof sub) continue;
        DIR *s = opendir(sub);
        if (s == NULL) continue;
        struct dirent *e;
        while ((e = readdir(s)) != NULL) {
            if (!is_entry_name(e->d_name)) continue;
            if (snprintf(path, sizeof path, "%s/%s", sub, e->d_name) >= (int)sizeof path) continue;
            struct stat st;
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) fn(data, path, &st);
        }
        closedir(s);
    }
    closedir(top);
}

static void add_size(void *data, const char *path, const struct stat *st)
{
    (void)path;
    *(size_t *)data += (size_t)st->st_size;
}

int reg_cache_open(const char *dir, size_t max_bytes, reg_cache_t **out, char *msg, size_t msg_size)
{
    if (out == NULL) return reg__fail(msg, msg_size, REG_EINVAL, "no output pointer given");
    *out = NULL;
    char path[PATH_MAX];
    int n;
    if (dir != NULL) {
        n = snprintf(path, sizeof path, "%s", dir);
    } else {
        char base[PATH_MAX];
        if (reg_cache_base(base, sizeof base - 16) < 0)
            return reg__fail(msg, msg_size, REG_EINVAL,
                             "no cache directory: set XDG_CACHE_HOME or HOME to an absolute "
                             "path, or give a cache directory");
        n = snprintf(path, sizeof path, "%s/embeddings", base);
    }
    if (n <= 0 || (size_t)n >= sizeof path - 80)
        return reg__fail(msg, msg_size, REG_ETOOBIG, "cache directory path is too long");
    while (n > 1 && path[n - 1] == '/')
        path[--n] = 0;
    if (mkdirs(path) != 0)
        return reg__fail(msg, msg_size, REG_EIO,
                         "cannot create cache directory %s: %s (fix its permissions or choose "
                         "another directory)",
                         path, strerror(errno));
    reg_cache_t *c = calloc(1, sizeof *c);
    if (c == NULL || (c->dir = reg__strdup(path)) == NULL) {
        free(c);
        return reg__fail(msg, msg_size, REG_ENOMEM, "out of memory opening the cache");
    }
    c->max_bytes = max_bytes ? max_bytes : REG_CACHE_DEFAULT_MAX_BYTES;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c->dir);
        free(c);
        return reg__fail(msg, msg_size, REG_ENOMEM, "cannot create the cache lock");
    }
    walk(c, add_size, &c->bytes);
    *out = c;
    return REG_OK;
}

void reg_cache_close(reg_cache_t *c)
{
    if (c == NULL) return;
    pthread_mutex_destroy(&c->lock);
    free(c->dir);
    free(c);
}

const char *reg_cache_dir(const reg_cache_t *c)
{
    return c ? c->dir : NULL;
}

size_t reg_cache_bytes(reg_cache_t *c)
{
    if (c == NULL) return 0;
    pthread_mutex_lock(&c->lock);
    size_t n = c->bytes;
    pthread_mutex_unlock(&c->lock);
    return n;
}

static int sha_part(mbedtls_sha256_context *ctx, const char *s)
{
    /* Length-prefixed so that ("ab", "c") and ("a", "bc") differ. */
    uint64_t n = strlen(s);
    if (mbedtls_sha256_update_ret(ctx, (const unsigned char *)&n, sizeof n) != 0) return -1;
    return mbedtls_sha256_update_ret(ctx, (const unsigned char *)s, (size_t)n);
}

static int make_key(const char *provider, const char *model, const char *text,
                    unsigned char key[32])
{
    mbedtls_sha256_context ctx;
    mbedtls_sha256_init(&ctx);
    int rc = mbedtls_sha256_starts_ret(&ctx, 0);
    if (rc == 0) rc = sha_part(&ctx, "ptc-mcp embedding v1");
    if (rc == 0) rc = sha_part(&ctx, provider);
    if (rc == 0) rc = sha_part(&ctx, model);
    if (rc == 0) rc = sha_part(&ctx, text);
    if (rc == 0) rc = mbedtls_sha256_finish_ret(&ctx, key);
    mbedtls_sha256_free(&ctx);
    return rc == 0 ? REG_OK : REG_EINVAL;
}

/* Returns -1 when the paths do not fit (reg_cache_open bounds the directory's length, so
 * only a broken invariant gets there). */
static int entry_path(const reg_cache_t *c, const unsigned char key[32], char *sub, size_t sub_size,
                      char *path, size_t path_size)
{
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    int n = snprintf(sub, sub_size, "%s/%.2s", c->dir, hex);
    if (n < 0 || (size_t)n >= sub_size) return -1;
    n = snprintf(path, path_size, "%s/%s.vec", sub, hex);
    return n < 0 || (size_t)n >= path_size ? -1 : 0;
}

/* Caller holds c->lock. Returns whether the file was removed. */
static bool drop(reg_cache_t *c, const char *path, size_t size)
{
    if (unlink(path) != 0) return false;
    c->bytes = c->bytes > size ? c->bytes - size : 0;
    return true;
}

int reg_cache_get(reg_cache_t *c, const char *provider, const char *model, const char *text,
                  size_t dim, float *out)
{
    if (c == NULL || provider == NULL || model == NULL || text == NULL || out == NULL || dim == 0 ||
        dim > REG_DIM_MAX)
        return REG_EINVAL;
    unsigned char key[32];
    if (make_key(provider, model, text, key) < 0) return REG_EINVAL;
    char sub[PATH_MAX], path[PATH_MAX];
    if (entry_path(c, key, sub, sizeof sub, path, sizeof path) < 0) return REG_EIO;
    size_t max = HEADER_SIZE + (size_t)REG_DIM_MAX * sizeof(float) + DIGEST_SIZE;
    char *raw = NULL;
    size_t size = 0;
    int rrc = ptc_file_read(path, max, &raw, &size);
    if (rrc == REG_ENOENT || rrc == REG_ENOMEM) return rrc; /* base's codes are the registry's */
    struct stat st;
    if (rrc == PTC_ETOOBIG && stat(path, &st) == 0) {
        drop(c, path, (size_t)st.st_size);
        return REG_ECORRUPT;
    }
    if (rrc < 0) return REG_EIO;
    if (size < HEADER_SIZE + DIGEST_SIZE) {
        free(raw);
        drop(c, path, size);
        return REG_ECORRUPT;
    }
    unsigned char *buf = (unsigned char *)raw;
    int rc = REG_OK;
    uint32_t fdim;
    memcpy(&fdim, buf + 8, sizeof fdim);
    unsigned char digest[32];
    if (memcmp(buf, MAGIC, 8) != 0 ||
        size != HEADER_SIZE + (size_t)fdim * sizeof(float) + DIGEST_SIZE ||
        memcmp(buf + 16, key, 32) != 0 ||
        mbedtls_sha256_ret(buf, size - DIGEST_SIZE, digest, 0) != 0 ||
        memcmp(digest, buf + size - DIGEST_SIZE, DIGEST_SIZE) != 0) {
        rc = REG_ECORRUPT;
    } else if (fdim != dim) {
        rc = REG_EDIM;
    } else {
        memcpy(out, buf + HEADER_SIZE, dim * sizeof(float));
        /* Touch the entry: eviction removes the least recently used files first. */
        (void)utimensat(AT_FDCWD, path, NULL, 0);
    }
    free(buf);
    if (rc == REG_ECORRUPT) {
        pthread_mutex_lock(&c->lock);
        drop(c, path, size);
        pthread_mutex_unlock(&c->lock);
    }
    return rc;
}

typedef struct victim {
    char *path;
    struct timespec mtime;
    size_t size;
} victim_t;

typedef struct victims {
    victim_t *v;
    size_t n, cap;
    size_t total; /* bytes of every entry, listed or not */
} victims_t;

static void collect(void *data, const char *path, const struct stat *st)
{
    victims_t *vs = data;
    vs->total += (size_t)st->st_size;
    /* An entry left out of the list (past the cap: a directory other processes share may hold
     * anything; or out of memory) is only not evicted by this pass: those listed still are,
     * oldest first, and the next store that passes max_bytes tries again. */
    if (ptc_array_reserve(&vs->v, &vs->cap, vs->n + 1, sizeof *vs->v, PTC_CAP_CACHE_EVICT_SCAN) < 0)
        return;
    char *p = reg__strdup(path);
    if (p == NULL) return;
    vs->v[vs->n++] = (victim_t){p, st->st_mtim, (size_t)st->st_size};
}

static int cmp_victim(const void *a, const void *b)
{
    const victim_t *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* Recounts the directory (other processes may share it) and removes the least recently used
 * entries until the total is below EVICT_TO * max_bytes. Caller holds c->lock. */
static void evict(reg_cache_t *c)
{
    victims_t vs = {0};
    walk(c, collect, &vs);
    c->bytes = vs.total;
    if (vs.n > 0) qsort(vs.v, vs.n, sizeof *vs.v, cmp_victim);
    size_t target = (size_t)((double)c->max_bytes * EVICT_TO);
    for (size_t i = 0; i < vs.n && c->bytes > target; i++)
        drop(c, vs.v[i].path, vs.v[i].size);
    for (size_t i = 0; i < vs.n; i++)
        free(vs.v[i].path);
    free(vs.v);
}

typedef struct prune {
    reg_cache_t *c;
    int64_t before; /* entries with an older mtime go */
    long removed;
} prune_t;

static void prune_one(void *data, const char *path, const struct stat *st)
{
    prune_t *p = data;
    if ((int64_t)st->st_mtim.tv_sec < p->before && drop(p->c, path, (size_t)st->st_size))
        p->removed++;
}

long reg_cache_prune(reg_cache_t *c, int64_t now, long max_age_s)
{
    if (c == NULL || max_age_s < 0) return REG_EINVAL;
    prune_t p = {c, now - max_age_s, 0};
    pthread_mutex_lock(&c->lock);
    walk(c, prune_one, &p);
    pthread_mutex_unlock(&c->lock);
    return p.removed;
}

int reg_cache_put(reg_cache_t *c, const char *provider, const char *model, const char *text,
                  size_t dim, const float *vec)
{
    if (c == NULL || provider == NULL || model == NULL || text == NULL || vec == NULL || dim == 0 ||
        dim > REG_DIM_MAX)
        return REG_EINVAL;
    size_t size = HEADER_SIZE + dim * sizeof(float) + DIGEST_SIZE;
    if (size > c->max_bytes) return REG_ETOOBIG;
    unsigned char key[32];
    if (make_key(provider, model, text, key) < 0) return REG_EINVAL;
    unsigned char *buf = calloc(1, size);
    if (buf == NULL) return REG_ENOMEM;
    memcpy(buf, MAGIC, 8);
    uint32_t d32 = (uint32_t)dim;
    memcpy(buf + 8, &d32, sizeof d32);
    memcpy(buf + 16, key, 32);
    memcpy(buf + HEADER_SIZE, vec, dim * sizeof(float));
    if (mbedtls_sha256_ret(buf, size - DIGEST_SIZE, buf + size - DIGEST_SIZE, 0) != 0) {
        free(buf);
        return REG_EINVAL;
    }
    char sub[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX];
    if (entry_path(c, key, sub, sizeof sub, path, sizeof path) < 0 ||
        (mkdir(sub, 0700) != 0 && errno != EEXIST)) {
        free(buf);
        return REG_EIO;
    }
    int fd = -1;
    if (snprintf(tmp, sizeof tmp, "%s/.tmpXXXXXX", sub) < (int)sizeof tmp) fd = mkstemp(tmp);
    if (fd < 0) {
        free(buf);
        return REG_EIO;
    }
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, buf + done, size - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    free(buf);
    if (close(fd) != 0 || done != size) {
        unlink(tmp);
        return REG_EIO;
    }
    pthread_mutex_lock(&c->lock);
    struct stat old;
    int had = stat(path, &old) == 0;
    int rc = REG_OK;
    if (rename(tmp, path) != 0) {
        unlink(tmp);
        rc = REG_EIO;
    } else {
        if (had) c->bytes = c->bytes > (size_t)old.st_size ? c->bytes - (size_t)old.st_size : 0;
        c->bytes += size;
        if (c->bytes > c->max_bytes) evict(c);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* The caching wrapper                                                                       */

typedef struct cached {
    reg_embedder_t *inner;
    reg_cache_t *cache;
} cached_t;

static int cached_embed_stop(reg_embedder_t *self, const char *const *texts, size_t n,
                             reg_embed_kind_t kind, const atomic_bool *stop, float *out, char *msg,
                             size_t msg_size)
{
    cached_t *cw = self->impl;
    reg_embedder_t *in = cw->inner;
    const size_t dim = in->dim;
    /* Queries and documents may embed differently (instruction prefixes): the kind is part
     * of the model key. */
    char model[512];
    snprintf(model, sizeof model, "%s#%s", in->cache_model,
             kind == REG_EMBED_QUERY ? "query" : "doc");
    size_t *miss = malloc((n ? n : 1) * sizeof *miss);
    const char **mtext = malloc((n ? n : 1) * sizeof *mtext);
    if (miss == NULL || mtext == NULL) {
        free(miss);
        free(mtext);
        return reg__fail(msg, msg_size, REG_ENOMEM, "out of memory in the embedding cache");
    }
    size_t nm = 0;
    for (size_t i = 0; i < n; i++) {
        if (reg_cache_get(cw->cache, in->cache_provider, model, texts[i], dim, out + i * dim) ==
            REG_OK)
            continue;
        miss[nm] = i;
        mtext[nm++] = texts[i];
    }
    int rc = REG_OK;
    if (nm > 0) {
        float *v = malloc(nm * dim * sizeof *v);
        if (v == NULL)
            rc = reg__fail(msg, msg_size, REG_ENOMEM, "out of memory embedding");
        else
            rc = reg_embedder_embed_stop(in, mtext, nm, kind, stop, v, msg, msg_size);
        for (size_t j = 0; j < nm && rc == 0; j++) {
            memcpy(out + miss[j] * dim, v + j * dim, dim * sizeof *v);
            /* A full or read-only disk only costs speed: the vectors are still returned. */
            (void)reg_cache_put(cw->cache, in->cache_provider, model, mtext[j], dim, v + j * dim);
        }
        free(v);
    }
    free(miss);
    free(mtext);
    return rc;
}

static int cached_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                        reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    return cached_embed_stop(self, texts, n, kind, NULL, out, msg, msg_size);
}

static int cached_fit(reg_embedder_t *self, const char *const *docs, size_t n)
{
    cached_t *cw = self->impl;
    return reg_embedder_fit(cw->inner, docs, n);
}

static void cached_destroy(reg_embedder_t *self)
{
    cached_t *cw = self->impl;
    if (cw == NULL) return;
    reg_embedder_free(cw->inner);
    free(cw);
    self->impl = NULL;
}

int reg_cached_embedder_new(reg_embedder_t *inner, reg_cache_t *cache, reg_embedder_t **out)
{
    if (out == NULL) {
        reg_embedder_free(inner);
        return REG_EINVAL;
    }
    *out = NULL;
    if (inner == NULL || cache == NULL || inner->embed == NULL || inner->cache_provider == NULL) {
        reg_embedder_free(inner);
        return REG_EINVAL;
    }
    if (inner->cache_model == NULL) {
        *out = inner;
        return REG_OK;
    }
    reg_embedder_t *e = calloc(1, sizeof *e);
    cached_t *cw = calloc(1, sizeof *cw);
    if (e == NULL || cw == NULL) {
        free(e);
        free(cw);
        reg_embedder_free(inner);
        return REG_ENOMEM;
    }
    cw->inner = inner;
    cw->cache = cache;
    *e = (reg_embedder_t){.name = inner->name,
                          .cache_provider = inner->cache_provider,
                          .cache_model = inner->cache_model,
                          .dim = inner->dim,
                          .concurrent = inner->concurrent,
                          .blocking = inner->blocking,
                          .sentence_model = inner->sentence_model,
                          .embed = cached_embed,
                          .embed_stop = cached_embed_stop,
                          .fit = cached_fit,
                          .destroy = cached_destroy,
                          .impl = cw};
    *out = e;
    return REG_OK;
}
