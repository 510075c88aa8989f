/* bm25.c - Okapi BM25 over tokenised tool texts, with an inverted index. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct posting {
    uint32_t row, tf;
} posting_t;

typedef struct plist {
    posting_t *p;
    size_t n, cap;
} plist_t;

typedef struct doc {
    posting_t *terms; /* (term id, tf) pairs: what the row contributes to the postings */
    uint32_t nterms;
    uint32_t len; /* tokens */
} doc_t;

struct reg_bm25 {
    float k1, b;
    reg__rows_t rows;
    doc_t *docs; /* docs_cap entries (at least rows.n) */
    size_t docs_cap;
    char **terms;
    plist_t *post; /* per term */
    size_t nterms, terms_cap;
    reg__map_t vocab;
    double total_len;
    int dirty; /* postings still name removed or moved rows */
};

int reg_bm25_new(float k1, float b, reg_bm25_t **out)
{
    if (out == NULL) return REG_EINVAL;
    *out = NULL;
    if (!(k1 >= 0) || !(b >= 0 && b <= 1)) return REG_EINVAL;
    reg_bm25_t *bm = calloc(1, sizeof *bm);
    if (bm == NULL) return REG_ENOMEM;
    bm->k1 = k1;
    bm->b = b;
    *out = bm;
    return REG_OK;
}

void reg_bm25_free(reg_bm25_t *bm)
{
    if (bm == NULL) return;
    for (size_t i = 0; i < bm->rows.n; i++)
        free(bm->docs[i].terms);
    for (size_t i = 0; i < bm->nterms; i++) {
        free(bm->terms[i]);
        free(bm->post[i].p);
    }
    free(bm->docs);
    free(bm->terms);
    free(bm->post);
    reg__map_free(&bm->vocab);
    reg__rows_free(&bm->rows);
    free(bm);
}

static int term_id(reg_bm25_t *bm, const char *word, uint32_t *out)
{
    size_t v;
    if (reg__map_get(&bm->vocab, word, &v)) {
        *out = (uint32_t)v;
        return REG_OK;
    }
    /* Two arrays, one capacity, which moves only once both have room. A document names its
     * terms by a uint32_t: REG_ETOOBIG past UINT32_MAX terms. */
    size_t cap_terms = bm->terms_cap, cap_post = bm->terms_cap;
    int rc =
        ptc_array_reserve(&bm->terms, &cap_terms, bm->nterms + 1, sizeof *bm->terms, UINT32_MAX);
    if (rc == 0)
        rc = ptc_array_reserve(&bm->post, &cap_post, bm->nterms + 1, sizeof *bm->post, UINT32_MAX);
    if (rc < 0) return rc;
    bm->terms_cap = cap_terms; /* == cap_post: the same growth under the same cap */
    char *copy = reg__strdup(word);
    if (copy == NULL) return REG_ENOMEM;
    if (reg__map_put(&bm->vocab, copy, bm->nterms) < 0) {
        free(copy);
        return REG_ENOMEM;
    }
    bm->terms[bm->nterms] = copy;
    bm->post[bm->nterms] = (plist_t){0};
    *out = (uint32_t)bm->nterms++;
    return REG_OK;
}

static int plist_push(plist_t *l, uint32_t row, uint32_t tf)
{
    /* A term has at most one posting per row. Most terms are rare, so a list starts with room
     * for 4 (the first reserve is capped there; the doubling after it is not): base's first
     * 16 adds 38% to the whole registry's memory on bench/eval/dev. */
    size_t max = l->cap == 0 ? 4 : REG_CATALOG_MAX;
    int rc = ptc_array_reserve(&l->p, &l->cap, l->n + 1, sizeof *l->p, max);
    if (rc < 0) return rc;
    l->p[l->n++] = (posting_t){row, tf};
    return REG_OK;
}

static int cmp_posting(const void *a, const void *b)
{
    uint32_t x = ((const posting_t *)a)->row, y = ((const posting_t *)b)->row;
    return (x > y) - (x < y);
}

/* Builds a document's (term, tf) list. */
static int make_doc(reg_bm25_t *bm, const char *text, doc_t *d)
{
    reg__tokens_t tk;
    int rc = reg__tokenize(text, true, true, &tk);
    if (rc < 0) return rc;
    memset(d, 0, sizeof *d);
    if (tk.n > UINT32_MAX) tk.n = UINT32_MAX;
    d->len = (uint32_t)tk.n;
    d->terms = malloc((tk.n ? tk.n : 1) * sizeof *d->terms);
    if (d->terms == NULL) rc = REG_ENOMEM;
    for (size_t i = 0; i < tk.n && rc == 0; i++) {
        uint32_t t;
        rc = term_id(bm, tk.tok[i], &t);
        if (rc == 0) d->terms[i] = (posting_t){t, 1};
    }
    reg__tokens_free(&tk);
    if (rc < 0) {
        free(d->terms);
        d->terms = NULL;
        return rc;
    }
    /* Sort by term id (the row field holds it here) and merge repeats into tf. */
    qsort(d->terms, d->len, sizeof *d->terms, cmp_posting);
    uint32_t m = 0;
    for (uint32_t i = 0; i < d->len; i++) {
        if (m > 0 && d->terms[m - 1].row == d->terms[i].row)
            d->terms[m - 1].tf++;
        else
            d->terms[m++] = d->terms[i];
    }
    d->nterms = m;
    return REG_OK;
}

int reg_bm25_add(reg_bm25_t *bm, const char *id, const char *server, const char *category,
                 const char *text)
{
    if (bm == NULL || id == NULL || server == NULL || text == NULL) return REG_EINVAL;
    if (bm->rows.n >= REG_CATALOG_MAX) return REG_ETOOBIG;
    if (reg__map_get(&bm->rows.by_id, id, NULL)) return REG_EEXIST;
    doc_t d;
    int rc = make_doc(bm, text, &d);
    if (rc < 0) return rc;
    size_t row;
    rc = reg__rows_add(&bm->rows, id, server, category, &row);
    if (rc == 0 && ptc_array_reserve(&bm->docs, &bm->docs_cap, row + 1, sizeof *bm->docs,
                                     REG_CATALOG_MAX) < 0) {
        size_t moved;
        reg__rows_remove(&bm->rows, row, &moved);
        rc = REG_ENOMEM;
    }
    if (rc < 0) {
        free(d.terms);
        return rc;
    }
    bm->docs[row] = d;
    bm->total_len += d.len;
    if (!bm->dirty) {
        for (uint32_t i = 0; i < d.nterms; i++) {
            if (plist_push(&bm->post[d.terms[i].row], (uint32_t)row, d.terms[i].tf) < 0) {
                bm->dirty = 1; /* rebuilt (or failed again) at the next search */
                break;
            }
        }
    }
    return REG_OK;
}

static void remove_row(reg_bm25_t *bm, size_t row)
{
    size_t from;
    bm->total_len -= bm->docs[row].len;
    free(bm->docs[row].terms);
    reg__rows_remove(&bm->rows, row, &from);
    if (from != row) bm->docs[row] = bm->docs[from];
    bm->dirty = 1;
}

int reg_bm25_remove(reg_bm25_t *bm, const char *id)
{
    size_t row;
    if (bm == NULL || id == NULL) return REG_EINVAL;
    if (!reg__map_get(&bm->rows.by_id, id, &row)) return REG_ENOENT;
    remove_row(bm, row);
    return REG_OK;
}

size_t reg_bm25_remove_server(reg_bm25_t *bm, const char *server)
{
    if (bm == NULL || server == NULL) return 0;
    long s = reg__rows_name(&bm->rows, server);
    if (s < 0) return 0;
    size_t removed = 0;
    for (size_t i = bm->rows.n; i-- > 0;) {
        if ((long)bm->rows.server[i] == s) {
            remove_row(bm, i);
            removed++;
        }
    }
    return removed;
}

size_t reg_bm25_count(const reg_bm25_t *bm)
{
    return bm ? bm->rows.n : 0;
}

size_t reg_bm25_memory(const reg_bm25_t *bm)
{
    if (bm == NULL) return 0;
    size_t b = sizeof *bm + reg__rows_memory(&bm->rows) + bm->docs_cap * sizeof *bm->docs;
    for (size_t i = 0; i < bm->rows.n; i++)
        b += bm->docs[i].nterms * sizeof(posting_t);
    b += bm->terms_cap * (sizeof *bm->terms + sizeof *bm->post);
    for (size_t t = 0; t < bm->nterms; t++)
        b += strlen(bm->terms[t]) + 1 + bm->post[t].cap * sizeof(posting_t);
    b += bm->vocab.cap * (sizeof(char *) + sizeof(size_t));
    return b;
}

static int rebuild(reg_bm25_t *bm)
{
    for (size_t t = 0; t < bm->nterms; t++)
        bm->post[t].n = 0;
    for (size_t r = 0; r < bm->rows.n; r++) {
        const doc_t *d = &bm->docs[r];
        for (uint32_t i = 0; i < d->nterms; i++)
            if (plist_push(&bm->post[d->terms[i].row], (uint32_t)r, d->terms[i].tf) < 0)
                return REG_ENOMEM;
    }
    bm->dirty = 0;
    return REG_OK;
}

int reg_bm25_search(reg_bm25_t *bm, const char *query, size_t k, const reg_filter_t *filter,
                    reg_hit_t *hits)
{
    if (bm == NULL || query == NULL || (k > 0 && hits == NULL)) return REG_EINVAL;
    if (k > REG_TOPK_MAX) return REG_ETOOBIG;
    if (k == 0 || bm->rows.n == 0) return 0;
    if (bm->dirty) {
        int rc = rebuild(bm);
        if (rc < 0) return rc;
    }
    reg__where_t w;
    reg__where_resolve(&bm->rows, filter, &w);
    if (w.server == -2 || w.category == -2) return 0;

    char q[REG_QUERY_MAX + 1];
    snprintf(q, sizeof q, "%s", query);
    reg__tokens_t tk;
    int rc = reg__tokenize(q, true, true, &tk);
    if (rc < 0) return rc;
    float *score = calloc(bm->rows.n, sizeof *score);
    uint32_t *touched = malloc(bm->rows.n * sizeof *touched);
    if (score == NULL || touched == NULL) {
        free(score);
        free(touched);
        reg__tokens_free(&tk);
        return REG_ENOMEM;
    }
    size_t ntouched = 0;
    const double n = (double)bm->rows.n, avg = bm->total_len / n;
    const double k1 = (double)bm->k1, b = (double)bm->b;
    for (size_t i = 0; i < tk.n; i++) {
        size_t t;
        if (!reg__map_get(&bm->vocab, tk.tok[i], &t) || bm->post[t].n == 0) continue;
        const plist_t *l = &bm->post[t];
        double df = (double)l->n;
        double idf = log((n - df + 0.5) / (df + 0.5) + 1.0);
        for (size_t j = 0; j < l->n; j++) {
            uint32_t r = l->p[j].row;
            double tf = l->p[j].tf;
            double norm = k1 * (1.0 - b + b * bm->docs[r].len / (avg > 0 ? avg : 1));
            if (score[r] == 0) touched[ntouched++] = r;
            score[r] += (float)(idf * tf * (k1 + 1.0) / (tf + norm));
        }
    }
    reg__tokens_free(&tk);
    reg__cand_t heap[REG_TOPK_MAX];
    reg__topk_t top = {.heap = heap, .k = k, .ids = bm->rows.ids};
    for (size_t i = 0; i < ntouched; i++) {
        uint32_t r = touched[i];
        if (!reg__where_keeps(&bm->rows, &w, r) || score[r] < w.min_score) continue;
        reg__topk_push(&top, score[r], r);
    }
    free(score);
    free(touched);
    return (int)reg__topk_finish(&top, &bm->rows, hits);
}
