/* util.c - error names, hashing, the string map, row metadata and top-k selection. */
#include "internal.h"

#include "httpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *reg_strerror(int err)
{
    switch (err) {
        REG_ERRORS(PTC_ERR_CASE)
    }
    return ptc_http_strerror(err);
}

int reg__fail(char *msg, size_t msg_size, int err, const char *fmt, ...)
{
    if (msg != NULL && msg_size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msg_size, fmt, ap);
        va_end(ap);
    }
    return err;
}

uint64_t reg__hash(const void *data, size_t n, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    /* FNV alone leaves the low bits weak for short keys; the splitmix64 finaliser spreads
     * every input bit over the whole word before we take h % dim. */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

char *reg__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL) memcpy(d, s, n);
    return d;
}

/* ---------------------------------------------------------------------------------------- */

void reg__map_free(reg__map_t *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static size_t map_slot(const reg__map_t *m, const char *key)
{
    return (size_t)reg__hash(key, strlen(key), 0) & (m->cap - 1);
}

int reg__map_get(const reg__map_t *m, const char *key, size_t *val)
{
    if (m->cap == 0) return 0;
    for (size_t i = map_slot(m, key);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == NULL) return 0;
        if (strcmp(m->keys[i], key) == 0) {
            if (val != NULL) *val = m->vals[i];
            return 1;
        }
    }
}

static int map_grow(reg__map_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    reg__map_t g = {.cap = cap};
    g.keys = calloc(cap, sizeof *g.keys);
    g.vals = calloc(cap, sizeof *g.vals);
    if (g.keys == NULL || g.vals == NULL) {
        reg__map_free(&g);
        return REG_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == NULL) continue;
        size_t j = map_slot(&g, m->keys[i]);
        while (g.keys[j] != NULL)
            j = (j + 1) & (cap - 1);
        g.keys[j] = m->keys[i];
        g.vals[j] = m->vals[i];
    }
    g.n = m->n;
    reg__map_free(m);
    *m = g;
    return REG_OK;
}

int reg__map_put(reg__map_t *m, const char *key, size_t val)
{
    /* Load factor at most 1/2 keeps probe sequences short. */
    if ((m->n + 1) * 2 > m->cap) {
        int rc = map_grow(m);
        if (rc < 0) return rc;
    }
    size_t i = map_slot(m, key);
    while (m->keys[i] != NULL) {
        if (strcmp(m->keys[i], key) == 0) {
            m->keys[i] = key;
            m->vals[i] = val;
            return REG_OK;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return REG_OK;
}

int reg__map_del(reg__map_t *m, const char *key)
{
    if (m->cap == 0) return 0;
    size_t mask = m->cap - 1, i = map_slot(m, key);
    while (m->keys[i] != NULL && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & mask;
    if (m->keys[i] == NULL) return 0;
    /* Backward-shift deletion: pull later members of the probe run into the hole when their
     * home slot does not lie cyclically between the hole and their position. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->keys[j] != NULL; j = (j + 1) & mask) {
        size_t home = map_slot(m, m->keys[j]);
        int between = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!between) {
            m->keys[hole] = m->keys[j];
            m->vals[hole] = m->vals[j];
            hole = j;
        }
    }
    m->keys[hole] = NULL;
    m->n--;
    return 1;
}

/* ---------------------------------------------------------------------------------------- */

void reg__rows_free(reg__rows_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->ids[i]);
    for (size_t i = 0; i < r->nnames; i++)
        free(r->names[i]);
    free(r->ids);
    free(r->server);
    free(r->category);
    free(r->names);
    reg__map_free(&r->by_id);
    reg__map_free(&r->by_name);
    memset(r, 0, sizeof *r);
}

static int intern(reg__rows_t *r, const char *name, uint32_t *out)
{
    size_t v;
    if (reg__map_get(&r->by_name, name, &v)) {
        *out = (uint32_t)v;
        return REG_OK;
    }
    /* The rows name theirs by a uint32_t: REG_ETOOBIG past UINT32_MAX names. */
    int rc =
        ptc_array_reserve(&r->names, &r->names_cap, r->nnames + 1, sizeof *r->names, UINT32_MAX);
    if (rc < 0) return rc;
    char *copy = reg__strdup(name);
    if (copy == NULL) return REG_ENOMEM;
    if (reg__map_put(&r->by_name, copy, r->nnames) < 0) {
        free(copy);
        return REG_ENOMEM;
    }
    r->names[r->nnames] = copy;
    *out = (uint32_t)r->nnames++;
    return REG_OK;
}

/* Makes room for one more row in one of the arrays that share r->cap (pv points to it), whose
 * capacity after growing goes to *grown: r->cap itself is left to the caller. */
static int grow_column(const reg__rows_t *r, void *pv, size_t elem, size_t *grown)
{
    *grown = r->cap;
    return ptc_array_reserve(pv, grown, r->n + 1, elem, REG_CATALOG_MAX);
}

int reg__rows_add(reg__rows_t *r, const char *id, const char *server, const char *category,
                  size_t *row)
{
    if (reg__map_get(&r->by_id, id, NULL)) return REG_EEXIST;
    /* Three arrays, one capacity: r->cap moves only once all three have room, so after a
     * failure each of them still holds r->cap rows (some may hold more, unused). Grown from
     * the same capacity to the same need under the same cap, the three agree on the new one. */
    size_t grown = 0;
    int rc = grow_column(r, &r->ids, sizeof *r->ids, &grown);
    if (rc == 0) rc = grow_column(r, &r->server, sizeof *r->server, &grown);
    if (rc == 0) rc = grow_column(r, &r->category, sizeof *r->category, &grown);
    if (rc < 0) return rc;
    r->cap = grown;
    uint32_t si, ci;
    rc = intern(r, server, &si);
    if (rc == 0) rc = intern(r, category != NULL ? category : server, &ci);
    if (rc < 0) return rc;
    char *copy = reg__strdup(id);
    if (copy == NULL) return REG_ENOMEM;
    if (reg__map_put(&r->by_id, copy, r->n) < 0) {
        free(copy);
        return REG_ENOMEM;
    }
    r->ids[r->n] = copy;
    r->server[r->n] = si;
    r->category[r->n] = ci;
    *row = r->n++;
    return REG_OK;
}

void reg__rows_remove(reg__rows_t *r, size_t row, size_t *moved_from)
{
    size_t last = r->n - 1;
    reg__map_del(&r->by_id, r->ids[row]);
    free(r->ids[row]);
    if (row != last) {
        r->ids[row] = r->ids[last];
        r->server[row] = r->server[last];
        r->category[row] = r->category[last];
        /* Same key pointer, new row: a put that replaces cannot fail. */
        (void)reg__map_put(&r->by_id, r->ids[row], row);
    }
    r->n--;
    *moved_from = last;
}

long reg__rows_name(const reg__rows_t *r, const char *name)
{
    size_t v;
    return reg__map_get(&r->by_name, name, &v) ? (long)v : -1;
}

size_t reg__rows_memory(const reg__rows_t *r)
{
    size_t b = r->cap * (sizeof(char *) + 2 * sizeof(uint32_t));
    for (size_t i = 0; i < r->n; i++)
        b += strlen(r->ids[i]) + 1;
    b += r->by_id.cap * (sizeof(char *) + sizeof(size_t));
    b += r->by_name.cap * (sizeof(char *) + sizeof(size_t));
    for (size_t i = 0; i < r->nnames; i++)
        b += strlen(r->names[i]) + 1;
    return b;
}

void reg__where_resolve(const reg__rows_t *r, const reg_filter_t *f, reg__where_t *w)
{
    w->server = -1;
    w->category = -1;
    w->min_score = -1e30f;
    if (f == NULL) return;
    w->min_score = f->min_score;
    if (f->server != NULL) {
        long v = reg__rows_name(r, f->server);
        w->server = v < 0 ? -2 : v;
    }
    if (f->category != NULL) {
        long v = reg__rows_name(r, f->category);
        w->category = v < 0 ? -2 : v;
    }
}

void reg_filter_default(reg_filter_t *f)
{
    f->server = NULL;
    f->category = NULL;
    f->min_score = -1e30f;
}

/* ---------------------------------------------------------------------------------------- */

/* a ranks below b */
static int worse(const reg__topk_t *t, const reg__cand_t *a, const reg__cand_t *b)
{
    if (a->score != b->score) return a->score < b->score;
    return strcmp(t->ids[a->row], t->ids[b->row]) > 0;
}

static void sift_down(reg__topk_t *t, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < t->n && worse(t, &t->heap[l], &t->heap[m])) m = l;
        if (r < t->n && worse(t, &t->heap[r], &t->heap[m])) m = r;
        if (m == i) return;
        reg__cand_t tmp = t->heap[i];
        t->heap[i] = t->heap[m];
        t->heap[m] = tmp;
        i = m;
    }
}

void reg__topk_push(reg__topk_t *t, float score, size_t row)
{
    if (t->k == 0) return;
    reg__cand_t c = {score, row};
    if (t->n < t->k) {
        size_t i = t->n++;
        t->heap[i] = c;
        while (i > 0) {
            size_t p = (i - 1) / 2;
            if (!worse(t, &t->heap[i], &t->heap[p])) break;
            reg__cand_t tmp = t->heap[i];
            t->heap[i] = t->heap[p];
            t->heap[p] = tmp;
            i = p;
        }
        return;
    }
    if (!worse(t, &t->heap[0], &c)) return;
    t->heap[0] = c;
    sift_down(t, 0);
}

size_t reg__topk_finish(reg__topk_t *t, const reg__rows_t *r, reg_hit_t *hits)
{
    /* Pop the worst repeatedly into the back of the output: best first without a sort. */
    size_t n = t->n;
    while (t->n > 0) {
        reg__cand_t c = t->heap[0];
        t->heap[0] = t->heap[--t->n];
        sift_down(t, 0);
        reg_hit_t *h = &hits[t->n];
        h->id = r->ids[c.row];
        h->server = r->names[r->server[c.row]];
        h->category = r->names[r->category[c.row]];
        h->score = c.score;
    }
    return n;
}
