/* lexical.c - the built-in lexical embedder: hashed word, n-gram and word-pair features. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { G_WORD, G_NGRAM, G_BIGRAM, G_COUNT };

/* Seeds keep the groups' hash spaces apart, so "w:list" and the 4-gram "list" differ. */
static const uint64_t group_seed[G_COUNT] = {0x9e3779b97f4a7c15ULL, 0xc2b2ae3d27d4eb4fULL,
                                             0x165667b19e3779f9ULL};

#define WORD_MAX 64 /* longer "words" (hashes, base64) are cut: they are rarely searched */

/* base.h's reasoning for the cap of a text's features, in this file's terms. */
_Static_assert(PTC_CAP_TEXT_FEATURES >= (size_t)REG_TEXT_MAX * 4 * 3 * WORD_MAX,
               "a text's n-grams fit in PTC_CAP_TEXT_FEATURES");

typedef struct lexical {
    reg_lexical_opts_t o;
    /* document frequencies: open addressing on feature hashes (0 = empty slot) */
    uint64_t *keys;
    uint32_t *df;
    size_t cap, used;
    size_t ndocs;
} lexical_t;

/* A growable array of feature hashes for one group of one text. */
typedef struct feats {
    uint64_t *h;
    uint32_t *cnt; /* after dedupe: occurrences of h[i] */
    size_t n, cap;
} feats_t;

static int feats_push(feats_t *f, uint64_t h)
{
    /* the codes are base's (REG_ENOMEM is PTC_ENOMEM; past the cap PTC_ETOOBIG) */
    int rc = ptc_array_reserve(&f->h, &f->cap, f->n + 1, sizeof *f->h, PTC_CAP_TEXT_FEATURES);
    if (rc < 0) return rc;
    f->h[f->n++] = h ? h : 1; /* 0 marks an empty slot in the df table */
    return REG_OK;
}

/* Compacts f->h to its distinct hashes (first-seen order) and counts them into f->cnt, with
 * a scratch open-addressing table: linear in the number of features, where sorting was the
 * main cost of embedding a long description. */
static int dedupe(feats_t *f)
{
    if (f->n == 0) return REG_OK;
    size_t cap = 16;
    while (cap < 2 * f->n)
        cap *= 2;
    uint32_t *slot = calloc(cap, sizeof *slot); /* 1 + index into the compacted array */
    f->cnt = malloc(f->n * sizeof *f->cnt);
    if (slot == NULL || f->cnt == NULL) {
        free(slot);
        return REG_ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < f->n; i++) {
        uint64_t h = f->h[i];
        size_t j = (size_t)(h >> 17) & (cap - 1);
        while (slot[j] != 0 && f->h[slot[j] - 1] != h)
            j = (j + 1) & (cap - 1);
        if (slot[j] != 0) {
            f->cnt[slot[j] - 1]++;
            continue;
        }
        f->h[m] = h;
        f->cnt[m] = 1;
        slot[j] = (uint32_t)++m;
    }
    f->n = m;
    free(slot);
    return REG_OK;
}

void reg_lexical_opts_default(reg_lexical_opts_t *o)
{
    o->dim = 1024;
    o->ngram_min = 3;
    o->ngram_max = 5;
    o->word_weight = 1.0f;
    o->ngram_weight = 0.6f;
    o->bigram_weight = 0.2f;
    o->stem = true;
    o->stopwords = true;
}

/* Extracts the features of text into g[G_COUNT], each sorted (equal hashes adjacent). */
static int extract(const reg_lexical_opts_t *o, const char *text, feats_t g[G_COUNT])
{
    reg__tokens_t tk;
    int rc = reg__tokenize(text, false, o->stopwords, &tk);
    if (rc < 0) return rc;
    uint64_t prev = 0;
    int have_prev = 0;
    for (size_t i = 0; i < tk.n && rc == 0; i++) {
        char w[WORD_MAX + 3];
        size_t n = strnlen(tk.tok[i], WORD_MAX);
        memcpy(w + 1, tk.tok[i], n);
        w[n + 1] = 0;
        if (o->ngram_max > 0 && o->ngram_weight > 0) {
            /* n-grams of the unstemmed word with boundary marks, so "<get" and "ing>" are
             * distinct from inner pieces; short words give their whole marked form. */
            w[0] = '<';
            w[n + 1] = '>';
            size_t len = n + 2;
            if (len < o->ngram_min) {
                rc = feats_push(&g[G_NGRAM], reg__hash(w, len, group_seed[G_NGRAM]));
            } else {
                for (size_t gl = o->ngram_min; gl <= o->ngram_max && gl <= len && rc == 0; gl++)
                    for (size_t s = 0; s + gl <= len && rc == 0; s++)
                        rc = feats_push(&g[G_NGRAM], reg__hash(w + s, gl, group_seed[G_NGRAM]));
            }
            w[n + 1] = 0;
        }
        char *stem = w + 1;
        size_t sn = o->stem ? reg_text_stem(stem) : n;
        uint64_t h = reg__hash(stem, sn, group_seed[G_WORD]);
        if (rc == 0) rc = feats_push(&g[G_WORD], h);
        if (rc == 0 && have_prev && o->bigram_weight > 0) {
            uint64_t pair[2] = {prev, h};
            rc = feats_push(&g[G_BIGRAM], reg__hash(pair, sizeof pair, group_seed[G_BIGRAM]));
        }
        prev = h;
        have_prev = 1;
    }
    reg__tokens_free(&tk);
    for (int k = 0; k < G_COUNT && rc == 0; k++)
        rc = dedupe(&g[k]);
    return rc;
}

static void feats_free(feats_t g[G_COUNT])
{
    for (int k = 0; k < G_COUNT; k++) {
        free(g[k].h);
        free(g[k].cnt);
        g[k] = (feats_t){0};
    }
}

static size_t df_slot(const lexical_t *lx, uint64_t h)
{
    size_t i = (size_t)(h >> 7) & (lx->cap - 1);
    while (lx->keys[i] != 0 && lx->keys[i] != h)
        i = (i + 1) & (lx->cap - 1);
    return i;
}

static int df_grow(lexical_t *lx)
{
    size_t cap = lx->cap ? lx->cap * 2 : 4096;
    lexical_t g = {.cap = cap};
    g.keys = calloc(cap, sizeof *g.keys);
    g.df = calloc(cap, sizeof *g.df);
    if (g.keys == NULL || g.df == NULL) {
        free(g.keys);
        free(g.df);
        return REG_ENOMEM;
    }
    for (size_t i = 0; i < lx->cap; i++) {
        if (lx->keys[i] == 0) continue;
        size_t j = df_slot(&g, lx->keys[i]);
        g.keys[j] = lx->keys[i];
        g.df[j] = lx->df[i];
    }
    free(lx->keys);
    free(lx->df);
    lx->keys = g.keys;
    lx->df = g.df;
    lx->cap = cap;
    return REG_OK;
}

static int lexical_fit(reg_embedder_t *self, const char *const *docs, size_t n)
{
    lexical_t *lx = self->impl;
    memset(lx->keys, 0, lx->cap * sizeof *lx->keys);
    memset(lx->df, 0, lx->cap * sizeof *lx->df);
    lx->used = 0;
    lx->ndocs = 0;
    for (size_t d = 0; d < n; d++) {
        feats_t g[G_COUNT] = {{0}};
        int rc = extract(&lx->o, docs[d], g);
        for (int k = 0; k < G_COUNT && rc == 0; k++) {
            for (size_t i = 0; i < g[k].n && rc == 0; i++) {
                if ((lx->used + 1) * 2 > lx->cap) rc = df_grow(lx);
                if (rc < 0) break;
                size_t s = df_slot(lx, g[k].h[i]);
                if (lx->keys[s] == 0) {
                    lx->keys[s] = g[k].h[i];
                    lx->used++;
                }
                if (lx->df[s] < UINT32_MAX) lx->df[s]++;
            }
        }
        feats_free(g);
        if (rc < 0) return rc;
        lx->ndocs++;
    }
    return REG_OK;
}

static float idf(const lexical_t *lx, uint64_t h)
{
    if (lx->ndocs == 0) return 1.0f;
    size_t s = df_slot(lx, h);
    double df = lx->keys[s] == h ? lx->df[s] : 0;
    /* Smoothed IDF: features absent from the corpus get the largest weight, and a feature
     * in every document keeps a small positive one. */
    return (float)(log((1.0 + (double)lx->ndocs) / (1.0 + df)) + 1.0);
}

static int embed_one(const lexical_t *lx, const char *text, float *out)
{
    const reg_lexical_opts_t *o = &lx->o;
    memset(out, 0, o->dim * sizeof *out);
    feats_t g[G_COUNT] = {{0}};
    int rc = extract(o, text, g);
    if (rc < 0) {
        feats_free(g);
        return rc;
    }
    const float share[G_COUNT] = {o->word_weight, o->ngram_weight, o->bigram_weight};
    for (int k = 0; k < G_COUNT; k++) {
        if (g[k].n == 0 || share[k] <= 0) continue;
        /* Sublinear tf * idf weights, then the group is scaled to a norm of sqrt(share), so
         * that a dot product is a share-weighted sum of per-group cosines (up to hash
         * collisions). */
        size_t m = g[k].n;
        double norm2 = 0;
        float *wt = malloc(m * sizeof *wt);
        if (wt == NULL) {
            rc = REG_ENOMEM;
            break;
        }
        for (size_t i = 0; i < m; i++) {
            float w = (1.0f + logf((float)g[k].cnt[i])) * idf(lx, g[k].h[i]);
            wt[i] = w;
            norm2 += (double)w * (double)w;
        }
        float scale = (float)(sqrt((double)share[k]) / sqrt(norm2));
        for (size_t i = 0; i < m; i++) {
            uint64_t h = g[k].h[i];
            float v = wt[i] * scale;
            out[(h >> 1) % o->dim] += (h & 1) ? v : -v;
        }
        free(wt);
    }
    feats_free(g);
    if (rc < 0) return rc;
    double norm2 = 0;
    for (size_t i = 0; i < o->dim; i++)
        norm2 += (double)out[i] * (double)out[i];
    if (norm2 > 0) {
        float inv = (float)(1.0 / sqrt(norm2));
        for (size_t i = 0; i < o->dim; i++)
            out[i] *= inv;
    }
    return REG_OK;
}

static int lexical_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                         reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    (void)kind; /* words are words: queries and documents are treated alike */
    const lexical_t *lx = self->impl;
    for (size_t i = 0; i < n; i++) {
        int rc = embed_one(lx, texts[i], out + i * lx->o.dim);
        if (rc < 0)
            return reg__fail(msg, msg_size, rc, "lexical embedder: text #%zu: %s", i,
                             reg_strerror(rc));
    }
    return REG_OK;
}

static void lexical_destroy(reg_embedder_t *self)
{
    lexical_t *lx = self->impl;
    if (lx == NULL) return;
    free(lx->keys);
    free(lx->df);
    free(lx);
    self->impl = NULL;
}

int reg_lexical_new(const reg_lexical_opts_t *opts, reg_embedder_t **out)
{
    if (out == NULL) return REG_EINVAL;
    *out = NULL;
    reg_lexical_opts_t o;
    if (opts != NULL)
        o = *opts;
    else
        reg_lexical_opts_default(&o);
    if (o.dim == 0 || o.dim > REG_DIM_MAX || o.ngram_max > WORD_MAX ||
        (o.ngram_max > 0 && (o.ngram_min == 0 || o.ngram_min > o.ngram_max)) ||
        !(o.word_weight >= 0) || !(o.ngram_weight >= 0) || !(o.bigram_weight >= 0) ||
        o.word_weight + o.ngram_weight + o.bigram_weight <= 0)
        return REG_EINVAL;
    reg_embedder_t *e = calloc(1, sizeof *e);
    lexical_t *lx = calloc(1, sizeof *lx);
    if (e == NULL || lx == NULL || (lx->o = o, df_grow(lx)) < 0) {
        if (lx != NULL) {
            free(lx->keys);
            free(lx->df);
        }
        free(lx);
        free(e);
        return REG_ENOMEM;
    }
    e->name = "lexical";
    e->cache_provider = "lexical";
    e->cache_model = NULL; /* vectors depend on the fitted corpus: never cached */
    e->dim = o.dim;
    e->concurrent = true; /* embed() only reads the fitted tables */
    e->embed = lexical_embed;
    e->fit = lexical_fit;
    e->destroy = lexical_destroy;
    e->impl = lx;
    *out = e;
    return REG_OK;
}
