/* internal.h - helpers shared by the registry's files (not part of the public interface). */
#ifndef PTC_REGISTRY_INTERNAL_H
#define PTC_REGISTRY_INTERNAL_H

#include "registry.h"

#include <stdarg.h>

/* On x86-64 the loader picks an AVX2+FMA build of the hot loops when the CPU has them
 * (GCC function multi-versioning), while the rest of the code stays baseline x86-64. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define REG_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define REG_HOT
#endif

/* Writes a formatted message into msg (if not NULL) and returns err, so that error paths can
 * be one line: return reg__fail(msg, msg_size, REG_EINVAL, "...", ...). */
int reg__fail(char *msg, size_t msg_size, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* 64-bit hash of bytes (FNV-1a with a final avalanche): stable across runs and machines,
 * because hashed feature positions are part of what the lexical embedder computes. */
uint64_t reg__hash(const void *data, size_t n, uint64_t seed);

char *reg__strdup(const char *s);

/* String -> size_t map with linear probing and backward-shift deletion. Keys are borrowed
 * (the caller keeps them alive while they are in the map). */
typedef struct reg__map {
    const char **keys;
    size_t *vals;
    size_t cap; /* power of two, or 0 */
    size_t n;
} reg__map_t;

void reg__map_free(reg__map_t *m);
/* Returns 1 and sets *val if found, else 0. */
int reg__map_get(const reg__map_t *m, const char *key, size_t *val);
/* Inserts or replaces. REG_ENOMEM on failure (map unchanged). */
int reg__map_put(reg__map_t *m, const char *key, size_t val);
/* Removes key if present; returns 1 if it was. */
int reg__map_del(reg__map_t *m, const char *key);

/* Row metadata shared by the dense index and BM25: ids, interned server/category names and
 * an id -> row map. Removal moves the last row into the hole; the owner moves its own
 * per-row data the same way. */
typedef struct reg__rows {
    char **ids;
    uint32_t *server;
    uint32_t *category;
    size_t n, cap;
    reg__map_t by_id;
    char **names; /* interned server and category names, never freed before the rows */
    size_t nnames, names_cap;
    reg__map_t by_name;
} reg__rows_t;

void reg__rows_free(reg__rows_t *r);
/* Appends a row (strings copied); returns its index via *row. REG_EEXIST, REG_ENOMEM,
 * REG_ETOOBIG past REG_CATALOG_MAX rows. The caller then grows its own per-row arrays to hold
 * row + 1 entries (or removes the row again). */
int reg__rows_add(reg__rows_t *r, const char *id, const char *server, const char *category,
                  size_t *row);
/* Removes row; the row that moved into it (the old last row) is reported in *moved_from
 * (== row when nothing moved). */
void reg__rows_remove(reg__rows_t *r, size_t row, size_t *moved_from);
/* Interned index of a name, or -1 if never seen. */
long reg__rows_name(const reg__rows_t *r, const char *name);
size_t reg__rows_memory(const reg__rows_t *r);

/* A resolved filter: interned indexes (-1 = any, -2 = matches nothing). */
typedef struct reg__where {
    long server;
    long category;
    float min_score;
} reg__where_t;

void reg__where_resolve(const reg__rows_t *r, const reg_filter_t *f, reg__where_t *w);
static inline int reg__where_keeps(const reg__rows_t *r, const reg__where_t *w, size_t row)
{
    if (w->server != -1 && (long)r->server[row] != w->server) return 0;
    if (w->category != -1 && (long)r->category[row] != w->category) return 0;
    return 1;
}

/* Bounded top-k selection: a min-heap of the k best (score, row) seen so far. Ties are
 * broken by id (smaller id ranks higher) so that results never depend on row order. */
typedef struct reg__cand {
    float score;
    size_t row;
} reg__cand_t;

typedef struct reg__topk {
    reg__cand_t *heap; /* caller-provided, k slots */
    size_t n, k;
    char *const *ids;
} reg__topk_t;

void reg__topk_push(reg__topk_t *t, float score, size_t row);
/* Sorts the kept candidates best first and writes hits; returns their number. */
size_t reg__topk_finish(reg__topk_t *t, const reg__rows_t *r, reg_hit_t *hits);

/* Tokens of a text for BM25 and the lexical embedder's word features: split, lowercased,
 * optionally stemmed and stop words dropped. Returns an array of n pointers into one buffer;
 * free both with reg__tokens_free. */
typedef struct reg__tokens {
    char *buf;
    char **tok;
    size_t n;
} reg__tokens_t;

int reg__tokenize(const char *text, bool stem, bool drop_stopwords, reg__tokens_t *out);
void reg__tokens_free(reg__tokens_t *t);

/* Opens the sentence-embedding model in model_dir (NULL or "": the installed one) as an
 * embedder (embedder_model.c). */
int reg__model_embedder_open(const char *model_dir, reg_embedder_t **out, char *msg,
                             size_t msg_size);

#endif /* PTC_REGISTRY_INTERNAL_H */
