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
    if (method != REG_FUSE_RRF && method != REG_FUSE_MINMAX && method != REG_FUSE_SCORE)
        return REG_EINVAL;
    if (method == REG_FUSE_RRF && !(rrf_k >= 0)) return REG_EINVAL;
    size_t total = 0;
    for (size_t l = 0; l < nlists; l++) {
        if ((lists[l].n > 0 && lists[l].hits == NULL) || !(lists[l].weight >= 0) ||
            !(lists[l].half >= 0) || lists[l].n > REG_TOPK_MAX)
            return REG_EINVAL;
        total += lists[l].n;
    }
    if (k == 0 || total == 0) return 0;
    fused_t *f = calloc(total, sizeof *f);
    size_t cap = 16;
    while (cap < 2 * total)
        cap *= 2;
    size_t *slot = calloc(cap, sizeof *slot); /* 1 + index into f, by hash of the id */
    if (f == NULL || slot == NULL) {
        free(f);
        free(slot);
        return REG_ENOMEM;
    }
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
            if (method == REG_FUSE_RRF) {
                c = L->weight / (rrf_k + (float)(i + 1));
            } else if (method == REG_FUSE_SCORE) {
                float s = h->score > 0 ? h->score : 0;
                if (L->relative) s = hi > 0 ? s / hi : 0;
                c = L->weight * (L->half > 0 ? s / (s + L->half) : s);
            } else {
                /* A list whose scores are all equal says nothing about order: each gets 1. */
                c = L->weight * (hi > lo ? (h->score - lo) / (hi - lo) : 1.0f);
            }
            size_t j = (size_t)reg__hash(h->id, strlen(h->id), 0) & (cap - 1);
            while (slot[j] != 0 && strcmp(f[slot[j] - 1].hit.id, h->id) != 0)
                j = (j + 1) & (cap - 1);
            if (slot[j] == 0) {
                f[nf].hit = *h;
                f[nf].score = 0;
                slot[j] = ++nf;
            }
            f[slot[j] - 1].score += c;
        }
    }
    free(slot);
    qsort(f, nf, sizeof *f, cmp_fused);
    size_t n = nf < k ? nf : k;
    for (size_t i = 0; i < n; i++) {
        out[i] = f[i].hit;
        out[i].score = f[i].score;
    }
    free(f);
    return (int)n;
}
