/*
 * retrieval.c - retrieval quality of the registry's rankers on a catalog + queries file.
 *
 * usage: bench_retrieval CATALOG.json QUERIES.jsonl [options]
 *
 * Prints recall@1, recall@5 and MRR@10, overall and per query kind, for a BM25 baseline
 * written here independently of the library (k1 1.2, b 0.75, \w+ tokens, stop words), the
 * library's BM25, every available embedder and the hybrid (fusion of the best embedder with
 * the library's BM25). With --min-recall5 / --min-paraphrase-recall5 / --min-lexical-recall5 it
 * exits 1 when the gated method (--gate, default "hybrid") is below them.
 */
#include "registry.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_KINDS   8
#define MAX_METHODS 12
#define TOP         10 /* ranks looked at by the metrics */
#define CANDIDATES  50 /* hits each list contributes to a fusion */
#define LINE_MAX_B  (1 << 20)

typedef struct query {
    char *text;
    char **rel;
    size_t nrel;
    int kind;
} query_t;

typedef struct bench {
    reg_catalog_t *cat;
    char **texts; /* index text per catalog position */
    query_t *q;
    size_t nq;
    char *kinds[MAX_KINDS];
    int nkinds;
} bench_t;

/* ---------------------------------------------------------------------------------------- */
/* Loading                                                                                  */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench_retrieval: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (d == NULL) die("out of memory");
    return d;
}

static int kind_of(bench_t *B, const char *name)
{
    for (int i = 0; i < B->nkinds; i++)
        if (strcmp(B->kinds[i], name) == 0) return i;
    if (B->nkinds == MAX_KINDS) die("too many query kinds (at most 8): %s", name);
    B->kinds[B->nkinds] = xstrdup(name);
    return B->nkinds++;
}

static void load_queries(bench_t *B, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) die("cannot open queries file %s", path);
    char *line = malloc(LINE_MAX_B);
    size_t cap = 0, lineno = 0;
    if (line == NULL) die("out of memory");
    while (fgets(line, LINE_MAX_B, f) != NULL) {
        lineno++;
        char where[64];
        snprintf(where, sizeof where, "line %zu", lineno);
        if (strspn(line, " \t\r\n") == strlen(line)) continue;
        cJSON *o = cJSON_Parse(line);
        const cJSON *qt = cJSON_GetObjectItemCaseSensitive(o, "query");
        const cJSON *rel = cJSON_GetObjectItemCaseSensitive(o, "relevant");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
        if (!cJSON_IsString(qt) || !cJSON_IsArray(rel) || cJSON_GetArraySize(rel) == 0)
            die("%s: %s: expected {\"query\": string, \"relevant\": [ids], \"kind\": string}", path,
                where);
        if (ptc_array_reserve(&B->q, &cap, B->nq + 1, sizeof *B->q, SIZE_MAX) < 0)
            die("out of memory");
        query_t *q = &B->q[B->nq++];
        q->text = xstrdup(qt->valuestring);
        q->kind = kind_of(B, cJSON_IsString(kind) ? kind->valuestring : "unspecified");
        q->nrel = (size_t)cJSON_GetArraySize(rel);
        q->rel = calloc(q->nrel, sizeof *q->rel);
        if (q->rel == NULL) die("out of memory");
        size_t i = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, rel)
        {
            if (!cJSON_IsString(r)) die("%s: %s: relevant ids must be strings", path, where);
            if (reg_catalog_find(B->cat, r->valuestring) == NULL)
                fprintf(stderr, "bench_retrieval: warning: %s: %s names an id not in the catalog\n",
                        where, r->valuestring);
            q->rel[i++] = xstrdup(r->valuestring);
        }
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    if (B->nq == 0) die("%s holds no queries", path);
}

/* ---------------------------------------------------------------------------------------- */
/* The baseline: BM25 written independently of the library, as the README's reference     */

static const char *const base_stop[] = {
    "a",     "an",    "the",   "of",    "to",     "in",    "on",   "for",   "and",  "or",
    "is",    "are",   "was",   "be",    "by",     "with",  "from", "at",    "as",   "it",
    "this",  "that",  "these", "those", "i",      "me",    "my",   "we",    "our",  "you",
    "your",  "what",  "which", "who",   "whom",   "how",   "when", "where", "why",  "do",
    "does",  "did",   "can",   "could", "should", "would", "will", "shall", "may",  "might",
    "must",  "have",  "has",   "had",   "not",    "no",    "all",  "any",   "some", "into",
    "about", "over",  "under", "up",    "down",   "out",   "if",   "then",  "than", "so",
    "such",  "there", "their", "them",  "they",   "he",    "she",  "his",   "her",  "its",
};

typedef struct bdoc {
    char **tok;
    size_t n;
} bdoc_t;

typedef struct baseline {
    bdoc_t *docs;
    size_t n;
    double avg;
    const reg_catalog_t *cat;
} baseline_t;

static int base_is_stop(const char *w)
{
    for (size_t i = 0; i < sizeof base_stop / sizeof base_stop[0]; i++)
        if (strcmp(w, base_stop[i]) == 0) return 1;
    return 0;
}

static int is_w(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c >= 0x80;
}

/* \w+ runs, lowercased, stop words dropped. */
static bdoc_t base_tokens(const char *s)
{
    bdoc_t d = {0};
    size_t cap = 0;
    for (size_t i = 0; s[i];) {
        if (!is_w((unsigned char)s[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (s[j] && is_w((unsigned char)s[j]))
            j++;
        char *w = malloc(j - i + 1);
        if (w == NULL) die("out of memory");
        for (size_t k = i; k < j; k++)
            w[k - i] = (s[k] >= 'A' && s[k] <= 'Z') ? (char)(s[k] - 'A' + 'a') : s[k];
        w[j - i] = 0;
        i = j;
        if (base_is_stop(w)) {
            free(w);
            continue;
        }
        if (ptc_array_reserve(&d.tok, &cap, d.n + 1, sizeof *d.tok, SIZE_MAX) < 0)
            die("out of memory");
        d.tok[d.n++] = w;
    }
    return d;
}

static void bdoc_free(bdoc_t *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->tok[i]);
    free(d->tok);
}

/* The reference text: name, description, parameter names and descriptions, raw. */
static char *base_text(const reg_tool_t *t)
{
    size_t cap = strlen(t->name) + strlen(t->description) + 16;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(t->input_schema, "properties");
    const cJSON *p;
    cJSON_ArrayForEach(p, props)
    {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(p, "description");
        cap += strlen(p->string ? p->string : "") + 2 +
               (cJSON_IsString(d) ? strlen(d->valuestring) : 0) + 2;
    }
    char *s = malloc(cap);
    if (s == NULL) die("out of memory");
    size_t n = (size_t)snprintf(s, cap, "%s %s", t->name, t->description);
    cJSON_ArrayForEach(p, props)
    {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(p, "description");
        n += (size_t)snprintf(s + n, cap - n, " %s %s", p->string ? p->string : "",
                              cJSON_IsString(d) ? d->valuestring : "");
    }
    return s;
}

static void baseline_init(baseline_t *b, const reg_catalog_t *cat)
{
    b->cat = cat;
    b->n = reg_catalog_count(cat);
    b->docs = calloc(b->n, sizeof *b->docs);
    if (b->docs == NULL) die("out of memory");
    double total = 0;
    for (size_t i = 0; i < b->n; i++) {
        char *t = base_text(reg_catalog_at(cat, i));
        b->docs[i] = base_tokens(t);
        free(t);
        total += (double)b->docs[i].n;
    }
    b->avg = b->n ? total / (double)b->n : 1;
}

typedef struct scored {
    double s;
    size_t i;
} scored_t;

static int cmp_scored(const void *a, const void *b)
{
    const scored_t *x = a, *y = b;
    if (x->s != y->s) return x->s < y->s ? 1 : -1;
    return (x->i > y->i) - (x->i < y->i); /* catalog order on ties, like a stable sort */
}

static size_t baseline_rank(baseline_t *b, const char *query, size_t k, const char **ids)
{
    const double k1 = 1.2, bb = 0.75;
    bdoc_t q = base_tokens(query);
    scored_t *sc = calloc(b->n, sizeof *sc);
    if (sc == NULL) die("out of memory");
    for (size_t i = 0; i < b->n; i++)
        sc[i].i = i;
    for (size_t t = 0; t < q.n; t++) {
        size_t df = 0;
        for (size_t i = 0; i < b->n; i++)
            for (size_t j = 0; j < b->docs[i].n; j++)
                if (strcmp(b->docs[i].tok[j], q.tok[t]) == 0) {
                    df++;
                    break;
                }
        if (df == 0) continue;
        double idf = log(((double)b->n - (double)df + 0.5) / ((double)df + 0.5) + 1.0);
        for (size_t i = 0; i < b->n; i++) {
            double tf = 0;
            for (size_t j = 0; j < b->docs[i].n; j++)
                tf += strcmp(b->docs[i].tok[j], q.tok[t]) == 0;
            if (tf == 0) continue;
            double norm = k1 * (1 - bb + bb * (double)b->docs[i].n / b->avg);
            sc[i].s += idf * tf * (k1 + 1) / (tf + norm);
        }
    }
    bdoc_free(&q);
    qsort(sc, b->n, sizeof *sc, cmp_scored);
    size_t n = 0;
    for (; n < k && n < b->n && sc[n].s > 0; n++)
        ids[n] = reg_catalog_at(b->cat, sc[n].i)->id;
    free(sc);
    return n;
}

/* ---------------------------------------------------------------------------------------- */
/* Library rankers                                                                           */

typedef struct ranker {
    const char *name;
    reg_embedder_t *emb; /* dense: embedder + index */
    bool raw_query;      /* embed the query as given, even for a sentence model */
    reg_index_t *ix;
    reg_bm25_t *bm;                 /* or BM25 */
    struct ranker *fuse_a, *fuse_b; /* or a fusion of two rankers */
    reg_fuse_method_t method;
    float bm25_weight;   /* weight of the second list in a fusion (the first has 1) */
    float bm25_half;     /* REG_FUSE_SCORE: the second list's squash (0: none) ... */
    bool bm25_relative;  /* ... or its scores relative to its best */
    baseline_t *base;    /* or the baseline */
    reg_registry_t *reg; /* or the registry facade, as the binary searches */
    double ms;           /* total query time */
    float *qvec;         /* dense: query vectors by query number (a fusion reuses them) */
    bool *have_qvec;
} ranker_t;

/* Query qi's vector for a dense ranker, embedded once: every fusion of that ranker reuses it,
 * so the bench's time goes to ranking rather than to re-encoding the same queries. */
static const float *query_vector(ranker_t *r, size_t qi, const char *query)
{
    size_t dim = reg_embedder_dim(r->emb);
    float *v = r->qvec + qi * dim;
    if (r->have_qvec[qi]) return v;
    char msg[256] = "";
    /* A sentence model sees the query as the registry gives it (quoted values dropped). */
    char *q = r->emb->sentence_model && !r->raw_query ? reg_query_embed_text(query) : strdup(query);
    if (q == NULL) die("out of memory");
    const char *t[1] = {q};
    int rc = reg_embedder_embed(r->emb, t, 1, REG_EMBED_QUERY, v, msg, sizeof msg);
    free(q);
    if (rc < 0) die("embedding a query failed: %s", msg);
    r->have_qvec[qi] = true;
    return v;
}

static int rank_hits(ranker_t *r, size_t qi, const char *query, size_t k, reg_hit_t *hits)
{
    if (r->emb != NULL) return reg_index_search(r->ix, query_vector(r, qi, query), k, NULL, hits);
    if (r->bm != NULL) return reg_bm25_search(r->bm, query, k, NULL, hits);
    reg_hit_t a[CANDIDATES], b[CANDIDATES];
    int na = rank_hits(r->fuse_a, qi, query, CANDIDATES, a);
    int nb = rank_hits(r->fuse_b, qi, query, CANDIDATES, b);
    if (na < 0 || nb < 0) return na < 0 ? na : nb;
    reg_ranked_t lists[2] = {{a, (size_t)na, 1.0f, 0, false},
                             {b, (size_t)nb, r->bm25_weight, r->bm25_half, r->bm25_relative}};
    return reg_fuse(lists, 2, r->method, 60.0f, k, hits);
}

static size_t rank(ranker_t *r, size_t qi, const char *query, size_t k, const char **ids)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t n;
    if (r->base != NULL) {
        n = baseline_rank(r->base, query, k, ids);
    } else if (r->reg != NULL) {
        reg_result_t res[TOP];
        char msg[256];
        /* As search_tools: a blocking embedder's query vector comes first (a worker's job in
         * the server), then the search. */
        float *qv = NULL;
        if (reg_registry_query_blocking(r->reg)) {
            reg_registry_stats_t st;
            reg_registry_stats(r->reg, &st);
            qv = malloc(st.dim * sizeof *qv);
            if (qv == NULL) die("out of memory");
            if (reg_registry_embed_query(r->reg, query, qv, msg, sizeof msg) < 0)
                die("query embedding failed: %s", msg);
        }
        int rc = reg_registry_search(r->reg, query, qv, k, NULL, res, msg, sizeof msg);
        free(qv);
        if (rc < 0) die("registry search failed: %s", msg);
        n = (size_t)rc;
        for (size_t i = 0; i < n; i++)
            ids[i] = res[i].tool->id;
    } else {
        reg_hit_t hits[TOP];
        int rc = rank_hits(r, qi, query, k, hits);
        if (rc < 0) die("search failed: %s", reg_strerror(rc));
        n = (size_t)rc;
        for (size_t i = 0; i < n; i++)
            ids[i] = hits[i].id;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->ms += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    return n;
}

/* ---------------------------------------------------------------------------------------- */
/* Metrics                                                                                   */

typedef struct sums {
    double r1, r5, mrr;
    size_t n;
} sums_t;

static int is_rel(const query_t *q, const char *id)
{
    for (size_t i = 0; i < q->nrel; i++)
        if (strcmp(q->rel[i], id) == 0) return 1;
    return 0;
}

static double recall_at(const query_t *q, const char **ids, size_t n, size_t k)
{
    size_t hit = 0;
    for (size_t i = 0; i < n && i < k; i++)
        hit += is_rel(q, ids[i]);
    return (double)hit / (double)(q->nrel < k ? q->nrel : k);
}

static void evaluate(bench_t *B, ranker_t *r, sums_t *per_kind, sums_t *all, FILE *misses)
{
    memset(all, 0, sizeof *all);
    memset(per_kind, 0, MAX_KINDS * sizeof *per_kind);
    for (size_t qi = 0; qi < B->nq; qi++) {
        const query_t *q = &B->q[qi];
        const char *ids[TOP];
        size_t n = rank(r, qi, q->text, TOP, ids);
        double r1 = recall_at(q, ids, n, 1), r5 = recall_at(q, ids, n, 5), mrr = 0;
        for (size_t i = 0; i < n; i++)
            if (is_rel(q, ids[i])) {
                mrr = 1.0 / (double)(i + 1);
                break;
            }
        sums_t *s[2] = {all, &per_kind[q->kind]};
        for (int j = 0; j < 2; j++) {
            s[j]->r1 += r1;
            s[j]->r5 += r5;
            s[j]->mrr += mrr;
            s[j]->n++;
        }
        if (misses != NULL && r5 < 1.0)
            fprintf(misses, "  miss [%s] %s -> want %s, got %s, %s\n", B->kinds[q->kind], q->text,
                    q->rel[0], n > 0 ? ids[0] : "-", n > 1 ? ids[1] : "-");
    }
}

static void print_row(const char *method, const char *kind, const sums_t *s)
{
    if (s->n == 0) return;
    double n = (double)s->n;
    printf("%-22s %-11s %5zu  %6.3f  %6.3f  %6.3f\n", method, kind, s->n, s->r1 / n, s->r5 / n,
           s->mrr / n);
}

/* One JSON string (ids and names are [A-Za-z0-9_.-], but the query text is free). */
static void put_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void dump_list(FILE *f, const char *key, const reg_hit_t *h, int n)
{
    fprintf(f, ", \"%s\": [", key);
    for (int i = 0; i < n; i++) {
        fputs(i ? ", [" : "[", f);
        put_json_string(f, h[i].id);
        fprintf(f, ", %.6g]", (double)h[i].score);
    }
    fputc(']', f);
}

/* A dump line's start: {"query": ..., "kind": ..., "relevant": [...] (the caller ends it). */
static void dump_query(FILE *f, const bench_t *B, const query_t *q)
{
    fputs("{\"query\": ", f);
    put_json_string(f, q->text);
    fprintf(f, ", \"kind\": \"%s\", \"relevant\": [", B->kinds[q->kind]);
    for (size_t j = 0; j < q->nrel; j++) {
        if (j) fputs(", ", f);
        put_json_string(f, q->rel[j]);
    }
    fputc(']', f);
}

static void dump_candidates(bench_t *B, ranker_t *dense, ranker_t *bm, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) die("cannot write %s", path);
    for (size_t qi = 0; qi < B->nq; qi++) {
        const query_t *q = &B->q[qi];
        reg_hit_t a[CANDIDATES], b[CANDIDATES];
        int na = rank_hits(dense, qi, q->text, CANDIDATES, a);
        int nb = rank_hits(bm, qi, q->text, CANDIDATES, b);
        if (na < 0 || nb < 0) die("search failed while dumping");
        dump_query(f, B, q);
        dump_list(f, "dense", a, na);
        dump_list(f, "bm25", b, nb);
        fputs("}\n", f);
    }
    if (fclose(f) != 0) die("cannot write %s", path);
}

/* ---------------------------------------------------------------------------------------- */
/* Study dump: the cosine of every query to several texts of every tool                      */

/* Appends text's words split as identifiers ("listMergeRequests" -> "list merge requests"). */
static void put_split(char *buf, size_t size, const char *text)
{
    char tmp[2048];
    if (text == NULL || text[0] == 0 || reg_text_split(text, tmp, sizeof tmp) <= 0) return;
    size_t n = strlen(buf);
    snprintf(buf + n, size - n, "%s%s", n ? " " : "", tmp);
}

/* For fusion_study.py --variants: per tool the texts "full" (reg_tool_embed_text), its parts
 * (reg_tool_part_texts: the head, then the later sentences) and "name" (server, name,
 * title); per query the cosine to each of them and
 * BM25's top 50. The first line names the tools and their texts' kinds. */
static void dump_variants(bench_t *B, ranker_t *dense, ranker_t *bm, const char *path)
{
    reg_embedder_t *em = dense->emb;
    size_t nt = reg_catalog_count(B->cat), dim = reg_embedder_dim(em);
    size_t cap = nt * (2 + REG_PARTS_MAX), n = 0;
    char **texts = calloc(cap, sizeof *texts);
    size_t *owner = calloc(cap, sizeof *owner);
    int *kind = calloc(cap, sizeof *kind); /* 0 full, 1 head, 2 name, 2 + k sentence k */
    if (texts == NULL || owner == NULL || kind == NULL) die("out of memory");
    for (size_t i = 0; i < nt; i++) {
        const reg_tool_t *t = reg_catalog_at(B->cat, i);
        char *parts[REG_PARTS_MAX];
        int np = reg_tool_part_texts(t, parts, REG_PARTS_MAX);
        if (np < 1) die("out of memory");
        texts[n] = reg_tool_embed_text(t);
        owner[n] = i, kind[n++] = 0;
        texts[n] = parts[0]; /* the head */
        owner[n] = i, kind[n++] = 1;
        char buf[4096] = "";
        put_split(buf, sizeof buf, t->server);
        put_split(buf, sizeof buf, t->name);
        if (t->title && t->title[0]) {
            size_t u = strlen(buf);
            snprintf(buf + u, sizeof buf - u, ". %s", t->title);
        }
        texts[n] = strdup(buf);
        owner[n] = i, kind[n++] = 2;
        for (int k = 1; k < np; k++) {
            texts[n] = parts[k];
            owner[n] = i, kind[n++] = 2 + k;
        }
    }
    for (size_t j = 0; j < n; j++)
        if (texts[j] == NULL) die("out of memory");
    float *m = malloc(n * dim * sizeof *m);
    if (m == NULL) die("out of memory");
    char msg[256];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (reg_embedder_embed(em, (const char *const *)texts, n, REG_EMBED_DOCUMENT, m, msg,
                           sizeof msg) < 0)
        die("%s", msg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "variants: %zu texts of %zu tools embedded in %.1f ms\n", n, nt,
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    FILE *f = fopen(path, "w");
    if (f == NULL) die("cannot write %s", path);
    fputs("{\"tools\": [", f);
    for (size_t i = 0; i < nt; i++) {
        if (i) fputs(", ", f);
        put_json_string(f, reg_catalog_at(B->cat, i)->id);
    }
    fputs("], \"owner\": [", f);
    for (size_t j = 0; j < n; j++)
        fprintf(f, "%s%zu", j ? ", " : "", owner[j]);
    fputs("], \"kind\": [", f);
    for (size_t j = 0; j < n; j++)
        fprintf(f, "%s%d", j ? ", " : "", kind[j]);
    fputs("]}\n", f);
    for (size_t qi = 0; qi < B->nq; qi++) {
        const query_t *q = &B->q[qi];
        const float *v = query_vector(dense, qi, q->text);
        reg_hit_t b[CANDIDATES];
        int nb = rank_hits(bm, qi, q->text, CANDIDATES, b);
        if (nb < 0) die("search failed while dumping");
        dump_query(f, B, q);
        fputs(", \"cos\": [", f);
        for (size_t j = 0; j < n; j++) {
            double d = 0;
            for (size_t x = 0; x < dim; x++)
                d += (double)v[x] * (double)m[j * dim + x];
            fprintf(f, "%s%.4f", j ? ", " : "", d);
        }
        fputc(']', f);
        dump_list(f, "bm25", b, nb);
        fputs("}\n", f);
    }
    if (fclose(f) != 0) die("cannot write %s", path);
    for (size_t j = 0; j < n; j++)
        free(texts[j]);
    free(texts);
    free(owner);
    free(kind);
    free(m);
}

/* ---------------------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_retrieval CATALOG.json QUERIES.jsonl [options]\n"
            "  --min-recall5 X             exit 1 if the gated method's overall R@5 < X\n"
            "  --min-paraphrase-recall5 Y  exit 1 if its R@5 on paraphrase queries < Y\n"
            "  --min-lexical-recall5 Z     exit 1 if its R@5 on lexical queries < Z\n"
            "  --gate NAME                 method the thresholds apply to (default registry)\n"
            "  --lexical-dim N             lexical embedder dimension\n"
            "  --ngram-weight F / --bigram-weight F / --word-weight F\n"
            "  --ngram-min N / --ngram-max N\n"
            "  --storage q8|f32            dense index storage (default q8)\n"
            "  --embedder KIND             auto|model|lexical|remote, as the binary's flag\n"
            "  --embed-model-dir DIR       model files for --embedder model/auto\n"
            "  --expect-embedder PREFIX    exit 1 unless the first embedder's name starts so\n"
            "                              (e.g. model: catches a silent fall-back)\n"
            "  --bm25-weight W             weight of BM25 against the embedder's 1 (default:\n"
            "                              the registry's: 0.1 with a model, 1 with lexical);\n"
            "                              applies to every hybrid row but hybrid-squash-0.4\n"
            "  --ablation                  also a sentence model on the full index text with\n"
            "                              raw queries (what the text choices bring)\n"
            "  --misses NAME               list the queries NAME misses in its top 5\n"
            "  --dump FILE                 write each query's candidate lists (the first\n"
            "                              embedder's and BM25's top 50 with scores) as JSON\n"
            "                              lines, for studying fusions outside the bench\n"
            "  --parts                     the registry also indexes each tool's parts\n"
            "  --dump-variants FILE        write each query's cosine to several texts of every\n"
            "                              tool (whole, head, name, sentences) and BM25's top\n"
            "                              50, for fusion_study.py --variants\n");
    exit(2);
}

static double num_arg(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) usage();
    char *end;
    double v = strtod(argv[++*i], &end);
    if (*end != 0) usage();
    return v;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows when piped to a log */
    if (argc < 3) usage();
    double min_r5 = -1, min_para_r5 = -1, min_lex_r5 = -1;
    const char *gate = "registry", *misses = NULL, *expect = NULL, *dump = NULL;
    const char *dump_var = NULL;
    reg_embedder_spec_t spec = {.kind = "auto"};
    reg_lexical_opts_t lo;
    reg_lexical_opts_default(&lo);
    reg_index_storage_t storage = REG_INDEX_Q8;
    reg_registry_opts_t ropts;
    reg_registry_opts_default(&ropts);
    float bm25_w = -1; /* the registry's choice for the embedder */
    bool ablation = false;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--min-recall5") == 0)
            min_r5 = num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--min-paraphrase-recall5") == 0)
            min_para_r5 = num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--min-lexical-recall5") == 0)
            min_lex_r5 = num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--gate") == 0 && i + 1 < argc)
            gate = argv[++i];
        else if (strcmp(argv[i], "--storage") == 0 && i + 1 < argc)
            storage = strcmp(argv[++i], "f32") == 0 ? REG_INDEX_F32 : REG_INDEX_Q8;
        else if (strcmp(argv[i], "--embedder") == 0 && i + 1 < argc)
            spec.kind = argv[++i];
        else if (strcmp(argv[i], "--embed-model-dir") == 0 && i + 1 < argc)
            spec.model_dir = argv[++i];
        else if (strcmp(argv[i], "--expect-embedder") == 0 && i + 1 < argc)
            expect = argv[++i];
        else if (strcmp(argv[i], "--bm25-weight") == 0)
            bm25_w = (float)num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--ablation") == 0)
            ablation = true;
        else if (strcmp(argv[i], "--parts") == 0)
            ropts.parts = true;
        else if (strcmp(argv[i], "--misses") == 0 && i + 1 < argc)
            misses = argv[++i];
        else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc)
            dump = argv[++i];
        else if (strcmp(argv[i], "--dump-variants") == 0 && i + 1 < argc)
            dump_var = argv[++i];
        else if (strcmp(argv[i], "--lexical-dim") == 0)
            lo.dim = (size_t)num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--ngram-weight") == 0)
            lo.ngram_weight = (float)num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--bigram-weight") == 0)
            lo.bigram_weight = (float)num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--word-weight") == 0)
            lo.word_weight = (float)num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--ngram-min") == 0)
            lo.ngram_min = (unsigned)num_arg(argc, argv, &i);
        else if (strcmp(argv[i], "--ngram-max") == 0)
            lo.ngram_max = (unsigned)num_arg(argc, argv, &i);
        else
            usage();
    }

    bench_t B = {0};
    char msg[1024];
    if (reg_catalog_new(&B.cat) < 0) die("out of memory");
    if (reg_catalog_load_file(B.cat, argv[1], NULL, NULL, msg, sizeof msg) < 0) die("%s", msg);
    size_t nt = reg_catalog_count(B.cat);
    load_queries(&B, argv[2]);
    B.texts = calloc(nt, sizeof *B.texts);
    if (B.texts == NULL) die("out of memory");
    for (size_t i = 0; i < nt; i++)
        if ((B.texts[i] = reg_tool_index_text(reg_catalog_at(B.cat, i))) == NULL)
            die("out of memory");

    /* Rankers. A model provider adds one more dense ranker here; the hybrid then fuses the
     * first dense ranker (the best embedder available) with the library's BM25. */
    static ranker_t rk[MAX_METHODS];
    int nr = 0;
    baseline_t base;
    baseline_init(&base, B.cat);
    rk[nr++] = (ranker_t){.name = "bm25-baseline", .base = &base};

    reg_bm25_t *bm;
    if (reg_bm25_new(1.2f, 0.75f, &bm) < 0) die("out of memory");
    for (size_t i = 0; i < nt; i++) {
        const reg_tool_t *t = reg_catalog_at(B.cat, i);
        if (reg_bm25_add(bm, t->id, t->server, t->category, B.texts[i]) < 0)
            die("bm25 add failed for %s", t->id);
    }
    ranker_t *bm_r = &rk[nr++];
    *bm_r = (ranker_t){.name = "bm25", .bm = bm};

    /* Dense rankers: the embedder the spec opens (as the binary would), then the lexical one
     * with the bench's options if the first is something else. */
    reg_embedder_t *embs[3] = {NULL, NULL, NULL};
    size_t nembs = 0;
    char note[512];
    if (strcmp(spec.kind, "lexical") != 0) {
        if (reg_embedder_open(&spec, &embs[nembs], note, sizeof note, msg, sizeof msg) < 0)
            die("%s", msg);
        if (note[0]) fprintf(stderr, "bench_retrieval: %s\n", note);
        if (strcmp(reg_embedder_name(embs[nembs]), "lexical") == 0)
            reg_embedder_free(embs[nembs]);
        else
            nembs++;
    }
    if (reg_lexical_new(&lo, &embs[nembs++]) < 0) die("bad lexical options");
    /* The ablation row shares the model (read-only) under another name. */
    ranker_t *dense = NULL;
    for (size_t e = 0; e < nembs + (ablation && embs[0]->sentence_model); e++) {
        const bool abl = e == nembs;
        reg_embedder_t *em = embs[abl ? 0 : e];
        char **texts = B.texts;
        if (em->sentence_model && !abl) {
            /* What the registry indexes for a sentence model. */
            texts = calloc(nt, sizeof *texts);
            if (texts == NULL) die("out of memory");
            for (size_t i = 0; i < nt; i++)
                if ((texts[i] = reg_tool_embed_text(reg_catalog_at(B.cat, i))) == NULL)
                    die("out of memory");
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (reg_embedder_fit(em, (const char *const *)texts, nt) < 0)
            die("fit failed for %s", reg_embedder_name(em));
        size_t dim = reg_embedder_dim(em);
        float *m = malloc(nt * dim * sizeof *m);
        reg_index_t *ix;
        if (m == NULL || reg_index_new(dim, storage, &ix) < 0) die("out of memory");
        if (reg_embedder_embed(em, (const char *const *)texts, nt, REG_EMBED_DOCUMENT, m, msg,
                               sizeof msg) < 0)
            die("%s", msg);
        if (texts != B.texts) {
            for (size_t i = 0; i < nt; i++)
                free(texts[i]);
            free(texts);
        }
        for (size_t i = 0; i < nt; i++) {
            const reg_tool_t *t = reg_catalog_at(B.cat, i);
            if (reg_index_add(ix, t->id, t->server, t->category, m + i * dim) < 0)
                die("index add failed for %s", t->id);
        }
        free(m);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        fprintf(stderr, "indexed %zu tools with %s (dim %zu) in %.1f ms\n", nt,
                reg_embedder_name(em), dim,
                (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
        ranker_t *r = &rk[nr++];
        *r = (ranker_t){.name = abl ? "model-fulltext-rawq" : reg_embedder_name(em),
                        .emb = em,
                        .ix = ix,
                        .raw_query = abl,
                        .qvec = malloc(B.nq * dim * sizeof(float)),
                        .have_qvec = calloc(B.nq, sizeof(bool))};
        if (r->qvec == NULL || r->have_qvec == NULL) die("out of memory");
        if (dense == NULL) dense = r;
    }
    ropts.bm25_weight = bm25_w;
    if (bm25_w < 0) bm25_w = dense->emb->sentence_model ? REG_BM25_WEIGHT_SENTENCE : 1.0f;
    /* The registry's fusion for this embedder, then the other methods for comparison. */
    const bool sentence = dense->emb->sentence_model;
    rk[nr++] = (ranker_t){.name = "hybrid",
                          .fuse_a = dense,
                          .fuse_b = bm_r,
                          .method = sentence ? REG_FUSE_SCORE : REG_FUSE_MINMAX,
                          .bm25_weight = bm25_w,
                          .bm25_relative = sentence};
    /* The registry's fusion before the dev2 set: BM25 squashed by a fixed half-score of 8
     * at 0.4, which did not carry over to larger catalogs (BM25's scale grows with them). */
    if (sentence)
        rk[nr++] = (ranker_t){.name = "hybrid-squash-0.4",
                              .fuse_a = dense,
                              .fuse_b = bm_r,
                              .method = REG_FUSE_SCORE,
                              .bm25_weight = 0.4f,
                              .bm25_half = 8.0f};
    if (sentence)
        rk[nr++] = (ranker_t){.name = "hybrid-minmax",
                              .fuse_a = dense,
                              .fuse_b = bm_r,
                              .method = REG_FUSE_MINMAX,
                              .bm25_weight = bm25_w};
    rk[nr++] = (ranker_t){.name = "hybrid-rrf",
                          .fuse_a = dense,
                          .fuse_b = bm_r,
                          .method = REG_FUSE_RRF,
                          .bm25_weight = bm25_w};

    /* The facade with its defaults and the spec's embedder: exactly what search_tools does. */
    reg_registry_t *reg = NULL;
    {
        reg_embedder_t *re;
        if (reg_embedder_open(&spec, &re, note, sizeof note, msg, sizeof msg) < 0) die("%s", msg);
        if (note[0]) fprintf(stderr, "bench_retrieval: registry: %s\n", note);
        if (reg_registry_new(re, &ropts, &reg) < 0) die("out of memory");
        if (reg_registry_load_file(reg, argv[1], msg, sizeof msg) < 0) die("%s", msg);
        struct timespec t0, t1, c0, c1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        if (reg_registry_index_all(reg, msg, sizeof msg) < 0) die("%s", msg);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        reg_registry_stats_t st;
        reg_registry_stats(reg, &st);
        fprintf(stderr,
                "registry: indexed %zu tools (whole texts%s) in %.1f ms (%.1f ms of CPU), "
                "%zu bytes\n",
                st.indexed, ropts.parts ? " and parts" : "",
                (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
                (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e6,
                st.memory_bytes);
        rk[nr++] = (ranker_t){.name = "registry", .reg = reg};
    }

    printf("embedder: %s\n", reg_registry_embedder_name(reg));
    printf("catalog: %zu tools; queries: %zu; hybrid = %s + %.2f x bm25 (%s; "
           "hybrid-squash-0.4: cosine + 0.4 x bm25 / (bm25 + 8), the fusion before; "
           "hybrid-minmax: min-max normalised; hybrid-rrf: reciprocal rank); registry = the "
           "library's search_tools path (%s)\n",
           nt, B.nq, dense->name, (double)bm25_w,
           sentence ? "cosine + bm25 / best bm25" : "min-max normalised",
           reg_registry_embedder_name(reg));
    if (expect != NULL && strncmp(reg_registry_embedder_name(reg), expect, strlen(expect)) != 0) {
        fprintf(stderr, "FAIL: the embedder is %s, expected %s* (fell back; see the note above)\n",
                reg_registry_embedder_name(reg), expect);
        return 1;
    }
    printf("%-22s %-11s %5s  %6s  %6s  %6s\n", "method", "kind", "n", "R@1", "R@5", "MRR@10");
    int para = -1, lex = -1;
    for (int k = 0; k < B.nkinds; k++) {
        if (strcmp(B.kinds[k], "paraphrase") == 0) para = k;
        if (strcmp(B.kinds[k], "lexical") == 0) lex = k;
    }
    int status = 0, gated = 0;
    for (int i = 0; i < nr; i++) {
        sums_t per[MAX_KINDS], all;
        FILE *mf = misses && strcmp(misses, rk[i].name) == 0 ? stdout : NULL;
        evaluate(&B, &rk[i], per, &all, mf);
        print_row(rk[i].name, "all", &all);
        for (int k = 0; k < B.nkinds; k++)
            print_row(rk[i].name, B.kinds[k], &per[k]);
        if (strcmp(rk[i].name, gate) != 0) continue;
        gated = 1;
        double r5 = all.r5 / (double)all.n;
        if (min_r5 >= 0 && r5 < min_r5) {
            fprintf(stderr, "FAIL: %s recall@5 %.3f < %.3f\n", gate, r5, min_r5);
            status = 1;
        }
        if (min_para_r5 >= 0) {
            double pr5 = para >= 0 && per[para].n ? per[para].r5 / (double)per[para].n : 0;
            if (pr5 < min_para_r5) {
                fprintf(stderr, "FAIL: %s paraphrase recall@5 %.3f < %.3f\n", gate, pr5,
                        min_para_r5);
                status = 1;
            }
        }
        if (min_lex_r5 >= 0) {
            double lr5 = lex >= 0 && per[lex].n ? per[lex].r5 / (double)per[lex].n : 0;
            if (lr5 < min_lex_r5) {
                fprintf(stderr, "FAIL: %s lexical recall@5 %.3f < %.3f\n", gate, lr5, min_lex_r5);
                status = 1;
            }
        }
    }
    if (dump != NULL) dump_candidates(&B, dense, bm_r, dump);
    if (dump_var != NULL && dense->emb->sentence_model) dump_variants(&B, dense, bm_r, dump_var);
    for (int i = 0; i < nr; i++)
        printf("%-22s mean query time %.3f ms\n", rk[i].name, rk[i].ms / (double)B.nq);
    if ((min_r5 >= 0 || min_para_r5 >= 0 || min_lex_r5 >= 0) && !gated) {
        fprintf(stderr, "FAIL: no method named %s\n", gate);
        status = 1;
    }

    for (int i = 0; i < nr; i++) {
        reg_index_free(rk[i].ix);
        free(rk[i].qvec);
        free(rk[i].have_qvec);
    }
    for (size_t e = 0; e < nembs; e++)
        reg_embedder_free(embs[e]);
    reg_registry_free(reg);
    reg_bm25_free(bm);
    for (size_t i = 0; i < base.n; i++)
        bdoc_free(&base.docs[i]);
    free(base.docs);
    for (size_t i = 0; i < nt; i++)
        free(B.texts[i]);
    free(B.texts);
    for (size_t i = 0; i < B.nq; i++) {
        for (size_t j = 0; j < B.q[i].nrel; j++)
            free(B.q[i].rel[j]);
        free(B.q[i].rel);
        free(B.q[i].text);
    }
    free(B.q);
    for (int k = 0; k < B.nkinds; k++)
        free(B.kinds[k]);
    reg_catalog_free(B.cat);
    return status;
}
