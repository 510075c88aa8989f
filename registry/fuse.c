/* fuse.c - fusion of ranked hit lists from any two (or more) scorers: the hybrid mode. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define FUSE_MAX_LISTS 8

typedef struct fused {
    reg_hit_t hit;
    float score;
} fused_t;

static int cmp_fused(const void *a, const void *b)
{
    const fused_t *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return strcmp(x->hit.id, y->hit.id);
}

int reg_fuse(const reg_ranked_t *lists, size_t nlists, reg_fuse_method_t method, float rrf_k,
             size_t k, reg_hit_t *out)
{
    if ((nlists > 0 && lists == NULL) || nlists > FUSE_MAX_LISTS || (k > 0 && out == NULL))
        return REG_EINVAL;
    if (method != REG_FUSE_RRF && method != REG_FUSE_MINMAX) return REG_EINVAL;
    if (method == REG_FUSE_RRF && !(rrf_k >= 0)) return REG_EINVAL;
    size_t total = 0;
    for (size_t l = 0; l < nlists; l++) {
        if ((lists[l].n > 0 && lists[l].hits == NULL) || !(lists[l].weight >= 0) ||
            lists[l].n > REG_TOPK_MAX)
            return REG_EINVAL;
        total += lists[l].n;
    }
    if (k == 0 || total == 0) return 0;
    fused_t *f = calloc(total, sizeof *f);
    if (f == NULL) return REG_ENOMEM;
    /* Distinct ids by linear search: lists are short (top-k candidates, <= REG_TOPK_MAX). */
    size_t nf = 0;
    for (size_t l = 0; l < nlists; l++) {
        const reg_ranked_t *L = &lists[l];
        float lo = 0, hi = 0;
        for (size_t i = 0; i < L->n; i++) {
            if (i == 0 || L->hits[i].score < lo) lo = L->hits[i].score;
            if (i == 0 || L->hits[i].score > hi) hi = L->hits[i].score;
        }
        for (size_t i = 0; i < L->n; i++) {
            const reg_hit_t *h = &L->hits[i];
            float c;
            if (method == REG_FUSE_RRF) c = L->weight / (rrf_k + (float)(i + 1));
            /* A list whose scores are all equal says nothing about order: each gets 1. */
            else
                c = L->weight * (hi > lo ? (h->score - lo) / (hi - lo) : 1.0f);
            size_t j = 0;
            while (j < nf && strcmp(f[j].hit.id, h->id) != 0)
                j++;
            if (j == nf) {
                f[nf].hit = *h;
                f[nf].score = 0;
                nf++;
            }
            f[j].score += c;
        }
    }
    qsort(f, nf, sizeof *f, cmp_fused);
    size_t n = nf < k ? nf : k;
    for (size_t i = 0; i < n; i++) {
        out[i] = f[i].hit;
        out[i].score = f[i].score;
    }
    free(f);
    return (int)n;
}
