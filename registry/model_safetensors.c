/*
 * model_safetensors.c - reads the safetensors weight format: an 8-byte little-endian header
 * length, a JSON header {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...}, then
 * the raw tensor bytes. The file is mapped read-only, so the weights are shared by every
 * thread and the page cache, and untouched rows of the embedding table never reach memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_internal.h"

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

void model_st_close(model_st_t *st)
{
    if (st == NULL) return;
    if (st->map != NULL) munmap(st->map, st->map_len);
    cJSON_Delete(st->header);
    st->map = NULL;
    st->header = NULL;
}

void model_st_drop(const model_st_t *st, const void *p, size_t len)
{
    uintptr_t lo = (uintptr_t)p, hi = lo + len;
    uintptr_t map_lo = st != NULL ? (uintptr_t)st->map : 0;
    uintptr_t map_hi = st != NULL ? map_lo + st->map_len : 0;
    long page = sysconf(_SC_PAGESIZE);
    /* Only the file's pages (not a converted copy), inward to whole pages: a page shared with a
     * tensor still in use stays. They are clean private pages of a read-only mapping: dropping
     * them loses nothing. */
    if (map_lo != 0 && p != NULL && lo >= map_lo && hi <= map_hi && hi >= lo && page > 0) {
        uintptr_t mask = (uintptr_t)page - 1;
        uintptr_t a = (lo + mask) & ~mask, b = hi & ~mask;
        if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED);
    }
}

static model_dtype_t parse_dtype(const char *s, size_t *elem)
{
    if (strcmp(s, "F32") == 0) {
        *elem = 4;
        return MODEL_DT_F32;
    }
    if (strcmp(s, "F16") == 0) {
        *elem = 2;
        return MODEL_DT_F16;
    }
    if (strcmp(s, "BF16") == 0) {
        *elem = 2;
        return MODEL_DT_BF16;
    }
    *elem = 0;
    return MODEL_DT_OTHER;
}

int model_st_find(const model_st_t *st, const char *name, model_tensor_t *t)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(st->header, name);
    if (e == NULL) return REG_MODEL_ENOENT;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs) ||
        cJSON_GetArraySize(offs) != 2 || cJSON_GetArraySize(shape) > MODEL_ST_MAX_DIMS)
        return REG_MODEL_EFORMAT;
    memset(t, 0, sizeof *t);
    size_t elem = 0;
    t->dtype = parse_dtype(dt->valuestring, &elem);
    t->ndim = cJSON_GetArraySize(shape);
    t->count = 1;
    for (int i = 0; i < t->ndim; i++) {
        const cJSON *d = cJSON_GetArrayItem(shape, i);
        /* 2^40 elements is far past any sentence encoder and keeps the products exact. */
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 1099511627776.0)
            return REG_MODEL_EFORMAT;
        t->shape[i] = (uint64_t)d->valuedouble;
        if (t->shape[i] != 0 && t->count > UINT64_MAX / 8 / t->shape[i]) return REG_MODEL_EFORMAT;
        t->count *= t->shape[i];
    }
    const cJSON *b = cJSON_GetArrayItem(offs, 0);
    const cJSON *en = cJSON_GetArrayItem(offs, 1);
    if (!cJSON_IsNumber(b) || !cJSON_IsNumber(en) || b->valuedouble < 0 ||
        en->valuedouble < b->valuedouble || en->valuedouble > (double)st->data_len)
        return REG_MODEL_EFORMAT;
    uint64_t begin = (uint64_t)b->valuedouble;
    uint64_t end = (uint64_t)en->valuedouble;
    if (end > st->data_len || begin > end) return REG_MODEL_EFORMAT;
    if (t->dtype != MODEL_DT_OTHER && end - begin != t->count * elem) return REG_MODEL_EFORMAT;
    t->data = st->data + begin;
    return REG_MODEL_OK;
}

int model_st_open(model_st_t *st, const char *path, char *errmsg, size_t size)
{
    memset(st, 0, sizeof *st);
    snprintf(st->path, sizeof st->path, "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return model_fail(errmsg, size, REG_MODEL_ENOENT,
                              "%s is missing: the model folder needs its weights in safetensors "
                              "format (model.safetensors)",
                              path);
        return model_fail(errmsg, size, REG_MODEL_EIO, "cannot open %s: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return model_fail(errmsg, size, REG_MODEL_EIO, "%s is not a regular file", path);
    }
    if ((uint64_t)sb.st_size > REG_MODEL_MAX_WEIGHTS_BYTES) {
        close(fd);
        return model_fail(errmsg, size, REG_MODEL_ETOOBIG, "%s is larger than the %zu-byte cap",
                          path, REG_MODEL_MAX_WEIGHTS_BYTES);
    }
    if (sb.st_size < 8) {
        close(fd);
        return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                          "%s is too short to be a safetensors file", path);
    }
    size_t len = (size_t)sb.st_size;
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return model_fail(errmsg, size, REG_MODEL_EIO, "cannot map %s: %s", path, strerror(errno));
    st->map = map;
    st->map_len = len;

    const unsigned char *base = map;
    uint64_t hlen = read_le64(base);
    if (hlen == 0 || hlen > REG_MODEL_MAX_SAFETENSORS_HEADER || hlen > len - 8) {
        model_st_close(st);
        return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                          "%s: header length %llu does not fit the file: not a safetensors "
                          "file, or truncated (reinstall the model)",
                          path, (unsigned long long)hlen);
    }
    st->header = cJSON_ParseWithLength((const char *)base + 8, (size_t)hlen);
    if (!cJSON_IsObject(st->header)) {
        model_st_close(st);
        return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                          "%s: the safetensors header is not a JSON object", path);
    }
    st->data = base + 8 + hlen;
    st->data_len = len - 8 - (size_t)hlen;
    return REG_MODEL_OK;
}
