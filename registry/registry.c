/* registry.c - the registry: catalog, embedder, vector index and BM25 kept in step. */
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reg_registry {
    reg_catalog_t *cat;
    reg_embedder_t *emb; /* NULL: BM25 only */
    reg_index_t *ix;
    /* The parts' vectors (reg_tool_part_texts) of every tool in ix, row ids "TOOL\nK"; NULL
     * when the embedder is no sentence model or o.parts is off. Kept in step with ix. */
    reg_index_t *px;
    reg_bm25_t *bm;
    reg_registry_opts_t o;
    /* ids waiting for the vector index, oldest first; entries may be stale (tool removed or
     * already indexed) and are skipped when taken */
    char **pend;
    size_t pend_head, pend_n, pend_cap;
    bool fitted;
    size_t fitted_count;
    size_t in_flight; /* batches taken and not yet applied (at most o.batches_in_flight) */
    bool busy_fit;    /* one of them refits the embedder: it is the only one */
    /* Set by reg_registry_cancel (any thread); batch workers watch it between texts. */
    atomic_bool stop;
    /* Serialises embedder calls that may not overlap: a refit, and every call of an embedder
     * that is not `concurrent`, take it for writing; concurrent calls take it for reading.
     * Owner thread (inline queries), batch workers and query workers all go through it. */
    pthread_rwlock_t emb_lock;
    bool lock_ok;
};

struct reg_batch {
    reg_embedder_t *emb;
    pthread_rwlock_t *lock;
    const atomic_bool *stop;
    bool fit, embedded, cancelled;
    bool parts; /* the tools' parts are embedded too */
    size_t n, dim;
    char **ids;
    uint64_t *seq;
    char **texts;
    float *vecs;
    /* Parts: np texts, those of tool i contiguous and in order (powner[j] == i). */
    size_t np, pcap;
    char **ptexts;
    size_t *powner;
    float *pvecs;
};

void reg_registry_opts_default(reg_registry_opts_t *o)
{
    o->hybrid = true;
    o->fuse = REG_FUSE_AUTO; /* chosen by the embedder at reg_registry_new */
    o->dense_weight = 1.0f;
    o->bm25_weight = -1.0f; /* chosen by the embedder at reg_registry_new */
    o->storage = REG_INDEX_Q8;
    o->batches_in_flight = 1;
    o->parts = false;
}

int reg_registry_new(reg_embedder_t *emb, const reg_registry_opts_t *opts, reg_registry_t **out)
{
    if (out == NULL) {
        reg_embedder_free(emb);
        return REG_EINVAL;
    }
    *out = NULL;
    reg_registry_t *r = calloc(1, sizeof *r);
    if (r == NULL) {
        reg_embedder_free(emb);
        return REG_ENOMEM;
    }
    if (opts != NULL)
        r->o = *opts;
    else
        reg_registry_opts_default(&r->o);
    r->emb = emb;
    atomic_init(&r->stop, false);
    if (r->o.batches_in_flight == 0) r->o.batches_in_flight = 1;
    /* Chosen by cross-validation over the servers of two development sets (bench/eval). A
     * sentence model ranks paraphrases well and exact names less so: BM25 at a tenth of its
     * weight (relative to BM25's best hit) puts name matches on top without drowning the
     * paraphrases. The lexical embedder and BM25 see the same words; an equal
     * share does best there. */
    const bool sentence = emb != NULL && emb->sentence_model;
    if (r->o.bm25_weight < 0) r->o.bm25_weight = sentence ? REG_BM25_WEIGHT_SENTENCE : 1.0f;
    /* A model's cosine means the same in every catalog, so it is fused as it is: min-max
     * would give the best of a poor list (a filter, a half-built index) full marks, and
     * stretches the narrow spread of the top 50 of a large catalog. The lexical embedder's
     * scores have no such meaning and were tuned with min-max. */
    if (r->o.fuse == REG_FUSE_AUTO) r->o.fuse = sentence ? REG_FUSE_SCORE : REG_FUSE_MINMAX;
    int rc = REG_OK;
    if (pthread_rwlock_init(&r->emb_lock, NULL) != 0) {
        free(r);
        reg_embedder_free(emb);
        return REG_ENOMEM;
    }
    r->lock_ok = true;
    if (!(r->o.dense_weight >= 0) || !(r->o.bm25_weight >= 0) ||
        (r->o.fuse != REG_FUSE_RRF && r->o.fuse != REG_FUSE_MINMAX &&
         r->o.fuse != REG_FUSE_SCORE) ||
        r->o.dense_weight + r->o.bm25_weight <= 0 ||
        (emb != NULL && (emb->embed == NULL || emb->dim == 0)))
        rc = REG_EINVAL;
    if (rc == 0) rc = reg_catalog_new(&r->cat);
    if (rc == 0) rc = reg_bm25_new(1.2f, 0.75f, &r->bm);
    if (rc == 0 && emb != NULL) rc = reg_index_new(emb->dim, r->o.storage, &r->ix);
    /* A tool scored by the best of its whole text and its parts gains on paraphrases and exact
     * names alike (cross-validated over the servers of bench/eval/dev and dev2), for about 1.8
     * times the indexing CPU (docs/registry.md): off unless asked for. Only a sentence model:
     * the lexical embedder has no pooling to blur, and parts would only split its counts. */
    if (rc == 0 && emb != NULL && emb->sentence_model && r->o.parts)
        rc = reg_index_new(emb->dim, r->o.storage, &r->px);
    if (rc < 0) {
        reg_registry_free(r);
        return rc;
    }
    *out = r;
    return REG_OK;
}

void reg_registry_free(reg_registry_t *r)
{
    if (r == NULL) return;
    for (size_t i = r->pend_head; i < r->pend_n; i++)
        free(r->pend[i]);
    free(r->pend);
    reg_index_free(r->ix);
    reg_index_free(r->px);
    reg_bm25_free(r->bm);
    reg_catalog_free(r->cat);
    reg_embedder_free(r->emb);
    if (r->lock_ok) pthread_rwlock_destroy(&r->emb_lock);
    free(r);
}

const reg_catalog_t *reg_registry_catalog(const reg_registry_t *r)
{
    return r ? r->cat : NULL;
}

const char *reg_registry_embedder_name(const reg_registry_t *r)
{
    return r && r->emb ? reg_embedder_name(r->emb) : "bm25";
}

static int pend_push(reg_registry_t *r, const char *id)
{
    if (r->pend_n == r->pend_cap) {
        /* Reclaim the consumed head before growing. */
        if (r->pend_head > 0) {
            memmove(r->pend, r->pend + r->pend_head, (r->pend_n - r->pend_head) * sizeof *r->pend);
            r->pend_n -= r->pend_head;
            r->pend_head = 0;
        }
        /* Each id is a tool of the catalog waiting for its vector, so the catalog's cap bounds
         * them; the codes are base's (REG_ENOMEM is PTC_ENOMEM). */
        int rc = ptc_array_reserve(&r->pend, &r->pend_cap, r->pend_n + 1, sizeof *r->pend,
                                   REG_CATALOG_MAX);
        if (rc < 0) return rc;
    }
    char *copy = reg__strdup(id);
    if (copy == NULL) return REG_ENOMEM;
    r->pend[r->pend_n++] = copy;
    return REG_OK;
}

/* Registers catalog positions [from, count) with BM25 and the pending queue. */
static int on_added(reg_registry_t *r, size_t from, char *msg, size_t msg_size)
{
    for (size_t i = from; i < reg_catalog_count(r->cat); i++) {
        const reg_tool_t *t = reg_catalog_at(r->cat, i);
        char *text = reg_tool_index_text(t);
        int rc = text ? reg_bm25_add(r->bm, t->id, t->server, t->category, text) : REG_ENOMEM;
        free(text);
        if (rc == 0 && r->emb != NULL) rc = pend_push(r, t->id);
        if (rc < 0)
            return reg__fail(msg, msg_size, rc, "indexing tool %s failed: %s", t->id,
                             reg_strerror(rc));
    }
    return REG_OK;
}

int reg_registry_load_file(reg_registry_t *r, const char *path, char *msg, size_t msg_size)
{
    if (r == NULL) return reg__fail(msg, msg_size, REG_EINVAL, "no registry given");
    size_t from = reg_catalog_count(r->cat);
    int rc = reg_catalog_load_file(r->cat, path, NULL, NULL, msg, msg_size);
    if (rc < 0) return rc;
    return on_added(r, from, msg, msg_size);
}

size_t reg_registry_remove_server(reg_registry_t *r, const char *server)
{
    if (r == NULL || server == NULL) return 0;
    /* The name may belong to a tool about to be freed: keep a copy for the other indexes. */
    char name[REG_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s", server);
    size_t n = reg_catalog_remove_server(r->cat, name);
    reg_bm25_remove_server(r->bm, name);
    if (r->ix != NULL) reg_index_remove_server(r->ix, name);
    if (r->px != NULL) reg_index_remove_server(r->px, name);
    return n;
}

int reg_registry_set_server_tools(reg_registry_t *r, const char *server, const cJSON *tools,
                                  char *msg, size_t msg_size)
{
    if (r == NULL || server == NULL || server[0] == 0 || !cJSON_IsArray(tools))
        return reg__fail(msg, msg_size, REG_EINVAL,
                         "set_server_tools needs a server name and a JSON array of tools");
    /* Validate and copy into a scratch catalog first, so that a bad list leaves the
     * server's current tools in place. */
    reg_catalog_t *tmp;
    int rc = reg_catalog_new(&tmp);
    if (rc < 0) return reg__fail(msg, msg_size, rc, "out of memory");
    const cJSON *t;
    size_t i = 0;
    char why[256];
    cJSON_ArrayForEach(t, tools)
    {
        rc = reg_catalog_add(tmp, server, t, why, sizeof why, NULL);
        if (rc < 0) {
            reg_catalog_free(tmp);
            return reg__fail(msg, msg_size, rc, "server %s: tool #%zu %s", server, i, why);
        }
        i++;
    }
    reg_registry_remove_server(r, server);
    size_t from = reg_catalog_count(r->cat);
    i = 0;
    cJSON_ArrayForEach(t, tools)
    {
        rc = reg_catalog_add(r->cat, server, t, why, sizeof why, NULL);
        if (rc < 0) break;
        i++;
    }
    reg_catalog_free(tmp);
    if (rc < 0) {
        /* Only allocation can fail here: keep what was added, report the rest. */
        int rc2 = on_added(r, from, NULL, 0);
        (void)rc2;
        return reg__fail(msg, msg_size, rc, "server %s: only %zu tools added: %s", server, i, why);
    }
    return on_added(r, from, msg, msg_size);
}

size_t reg_registry_pending(const reg_registry_t *r)
{
    if (r == NULL || r->emb == NULL) return 0;
    size_t n = reg_catalog_count(r->cat), in = reg_index_count(r->ix);
    return n > in ? n - in : 0;
}

void reg_registry_stats(const reg_registry_t *r, reg_registry_stats_t *st)
{
    memset(st, 0, sizeof *st);
    st->embedder = reg_registry_embedder_name(r);
    if (r == NULL) return;
    st->dim = r->emb ? r->emb->dim : 0;
    st->tools = reg_catalog_count(r->cat);
    st->indexed = reg_index_count(r->ix);
    st->pending = reg_registry_pending(r);
    st->memory_bytes = reg_index_memory(r->ix) + reg_index_memory(r->px) + reg_bm25_memory(r->bm);
    st->hybrid = r->emb != NULL && r->o.hybrid;
}

static void batch_free(reg_batch_t *b)
{
    if (b == NULL) return;
    for (size_t i = 0; i < b->n; i++) {
        free(b->ids[i]);
        free(b->texts[i]);
    }
    for (size_t j = 0; j < b->np; j++)
        free(b->ptexts[j]);
    free(b->ids);
    free(b->texts);
    free(b->seq);
    free(b->vecs);
    free(b->ptexts);
    free(b->powner);
    free(b->pvecs);
    free(b);
}

/* Room for `more` part texts in b: two arrays, one capacity, which moves only once both have
 * room. A tool gives at most REG_PARTS_MAX parts. */
static int parts_reserve(reg_batch_t *b, size_t more)
{
    const size_t max = (size_t)REG_CATALOG_MAX * REG_PARTS_MAX;
    size_t cap_texts = b->pcap, cap_owner = b->pcap;
    int rc = ptc_array_reserve(&b->ptexts, &cap_texts, b->np + more, sizeof *b->ptexts, max);
    if (rc == 0)
        rc = ptc_array_reserve(&b->powner, &cap_owner, b->np + more, sizeof *b->powner, max);
    if (rc == 0) b->pcap = cap_texts; /* == cap_owner: the same growth under the same cap */
    return rc;
}

static int batch_put(reg_batch_t *b, const reg_tool_t *t)
{
    char *parts[REG_PARTS_MAX];
    int np = 0;
    if (b->parts) {
        np = reg_tool_part_texts(t, parts, REG_PARTS_MAX);
        if (np < 0) return np;
    }
    char *id = reg__strdup(t->id);
    char *text = b->emb->sentence_model ? reg_tool_embed_text(t) : reg_tool_index_text(t);
    if (id == NULL || text == NULL || parts_reserve(b, (size_t)np) < 0) {
        free(id);
        free(text);
        for (int j = 0; j < np; j++)
            free(parts[j]);
        return REG_ENOMEM;
    }
    for (int j = 0; j < np; j++) {
        b->ptexts[b->np] = parts[j];
        b->powner[b->np++] = b->n;
    }
    b->ids[b->n] = id;
    b->texts[b->n] = text;
    b->seq[b->n] = t->seq;
    b->n++;
    return REG_OK;
}

static bool needs_fit(const reg_registry_t *r)
{
    if (r->emb->fit == NULL) return false;
    size_t n = reg_catalog_count(r->cat);
    if (!r->fitted) return n > 0;
    double diff = fabs((double)n - (double)r->fitted_count);
    return diff > REG_REFIT_RATIO * (double)r->fitted_count;
}

void reg_registry_cancel(reg_registry_t *r)
{
    if (r != NULL) atomic_store(&r->stop, true);
}

bool reg_registry_cancelled(const reg_registry_t *r)
{
    return r != NULL && atomic_load(&r->stop);
}

size_t reg_registry_batches_in_flight(const reg_registry_t *r)
{
    return r ? r->in_flight : 0;
}

int reg_registry_next_batch(reg_registry_t *r, size_t max, reg_batch_t **out)
{
    if (r == NULL || out == NULL) return REG_EINVAL;
    *out = NULL;
    if (atomic_load(&r->stop)) return REG_ECANCELED;
    if (r->busy_fit || r->in_flight >= r->o.batches_in_flight) return REG_EBUSY;
    if (r->emb == NULL) return REG_OK;
    if (max == 0) max = r->emb->blocking ? REG_BATCH_BLOCKING : REG_BATCH_DEFAULT;
    bool fit = needs_fit(r);
    /* A refit re-embeds everything: it waits for the batches in flight to land first. */
    if (fit && r->in_flight > 0) return REG_EBUSY;
    size_t count = reg_catalog_count(r->cat);
    size_t cap = fit ? count : (max < count ? max : count);
    if (cap == 0) return REG_OK;
    reg_batch_t *b = calloc(1, sizeof *b);
    if (b == NULL) return REG_ENOMEM;
    b->emb = r->emb;
    b->lock = &r->emb_lock;
    b->stop = &r->stop;
    b->fit = fit;
    b->parts = r->px != NULL;
    b->dim = r->emb->dim;
    b->ids = calloc(cap, sizeof *b->ids);
    b->texts = calloc(cap, sizeof *b->texts);
    b->seq = calloc(cap, sizeof *b->seq);
    int rc = (b->ids && b->texts && b->seq) ? REG_OK : REG_ENOMEM;
    if (fit) {
        for (size_t i = 0; i < count && rc == 0; i++)
            rc = batch_put(b, reg_catalog_at(r->cat, i));
        if (rc == 0) {
            /* Everything is in this batch: the queue's entries are all stale now. */
            for (size_t i = r->pend_head; i < r->pend_n; i++)
                free(r->pend[i]);
            r->pend_head = r->pend_n = 0;
        }
    } else {
        reg__map_t seen = {0};
        while (rc == 0 && b->n < cap && r->pend_head < r->pend_n) {
            char *id = r->pend[r->pend_head];
            const reg_tool_t *t = reg_catalog_find(r->cat, id);
            if (t != NULL && !reg_index_contains(r->ix, id) && !reg__map_get(&seen, id, NULL)) {
                rc = batch_put(b, t);
                if (rc == 0) rc = reg__map_put(&seen, b->ids[b->n - 1], 1);
                if (rc < 0) break;
            }
            free(id);
            r->pend_head++;
        }
        reg__map_free(&seen);
    }
    if (rc < 0 || b->n == 0) {
        /* Put what was taken back in the queue so nothing is lost. */
        for (size_t i = 0; i < b->n; i++)
            (void)pend_push(r, b->ids[i]);
        batch_free(b);
        return rc;
    }
    r->in_flight++;
    r->busy_fit = fit;
    *out = b;
    return REG_OK;
}

size_t reg_batch_count(const reg_batch_t *b)
{
    return b ? b->n : 0;
}

static void emb_lock(pthread_rwlock_t *lock, bool exclusive)
{
    int rc = exclusive ? pthread_rwlock_wrlock(lock) : pthread_rwlock_rdlock(lock);
    if (rc != 0) abort(); /* only EDEADLK / EAGAIN: a broken invariant, not bad input */
}

static int batch_embed_locked(reg_batch_t *b, char *msg, size_t msg_size);

int reg_batch_embed(reg_batch_t *b, char *msg, size_t msg_size)
{
    if (b == NULL) return reg__fail(msg, msg_size, REG_EINVAL, "no batch given");
    if (atomic_load(b->stop)) {
        b->cancelled = true;
        return reg__fail(msg, msg_size, REG_ECANCELED, "indexing was cancelled");
    }
    emb_lock(b->lock, b->fit || !b->emb->concurrent);
    int rc = batch_embed_locked(b, msg, msg_size);
    pthread_rwlock_unlock(b->lock);
    return rc;
}

/* Embeds n of the batch's texts into a new *vecs (freed with the batch). */
static int batch_embed_texts(reg_batch_t *b, char **texts, size_t n, float **vecs, char *msg,
                             size_t msg_size)
{
    *vecs = malloc(n * b->dim * sizeof **vecs);
    if (*vecs == NULL) return reg__fail(msg, msg_size, REG_ENOMEM, "out of memory embedding");
    int rc = reg_embedder_embed_stop(b->emb, (const char *const *)texts, n, REG_EMBED_DOCUMENT,
                                     b->stop, *vecs, msg, msg_size);
    if (rc == REG_ECANCELED || (rc < 0 && atomic_load(b->stop))) {
        b->cancelled = true;
        return reg__fail(msg, msg_size, REG_ECANCELED, "indexing was cancelled");
    }
    return rc < 0 ? rc : REG_OK;
}

static int batch_embed_locked(reg_batch_t *b, char *msg, size_t msg_size)
{
    if (b->fit) {
        int rc = reg_embedder_fit(b->emb, (const char *const *)b->texts, b->n);
        if (rc < 0)
            return reg__fail(msg, msg_size, rc, "%s: learning corpus statistics failed: %s",
                             reg_embedder_name(b->emb), reg_strerror(rc));
    }
    int rc = batch_embed_texts(b, b->texts, b->n, &b->vecs, msg, msg_size);
    if (rc == 0 && b->np > 0) rc = batch_embed_texts(b, b->ptexts, b->np, &b->pvecs, msg, msg_size);
    if (rc < 0) return rc;
    b->embedded = true;
    return REG_OK;
}

/* Row id of part k of a tool: a newline never occurs in a tool's id. */
static void part_id(const char *tool_id, size_t k, char out[REG_ID_MAX + 24])
{
    snprintf(out, REG_ID_MAX + 24, "%s\n%zu", tool_id, k);
}

/* Adds the n part vectors of t (already in r->ix) to r->px; on failure takes t out of both,
 * so that it is embedded again whole. */
static int add_parts(reg_registry_t *r, const reg_tool_t *t, const float *vecs, size_t n)
{
    char pid[REG_ID_MAX + 24];
    int rc = REG_OK;
    size_t k = 0;
    for (; k < n && rc == 0; k++) {
        part_id(t->id, k, pid);
        rc = reg_index_add(r->px, pid, t->server, t->category, vecs + k * r->emb->dim);
    }
    if (rc == 0) return REG_OK;
    for (size_t x = 0; x + 1 < k; x++) {
        part_id(t->id, x, pid);
        (void)reg_index_remove(r->px, pid);
    }
    (void)reg_index_remove(r->ix, t->id);
    return rc;
}

int reg_registry_apply_batch(reg_registry_t *r, reg_batch_t *b)
{
    if (r == NULL || b == NULL) {
        batch_free(b);
        return REG_EINVAL;
    }
    if (r->in_flight > 0) r->in_flight--;
    if (b->fit) r->busy_fit = false;
    int rc = REG_OK;
    if (!b->embedded) {
        const bool cancelled = b->cancelled;
        if (b->fit)
            r->fitted = false; /* statistics may be half-built: refit next time */
        else
            for (size_t i = 0; i < b->n; i++)
                (void)pend_push(r, b->ids[i]);
        batch_free(b);
        return cancelled ? REG_ECANCELED : REG_EEMBED;
    }
    if (b->fit) {
        /* New statistics: every old vector is stale, so the index is rebuilt from the batch. */
        reg_index_t *ix;
        rc = reg_index_new(b->dim, r->o.storage, &ix);
        if (rc < 0) {
            batch_free(b);
            return rc;
        }
        reg_index_t *px = NULL;
        if (r->px != NULL && (rc = reg_index_new(b->dim, r->o.storage, &px)) < 0) {
            reg_index_free(ix);
            batch_free(b);
            return rc;
        }
        reg_index_free(r->ix);
        r->ix = ix;
        if (px != NULL) {
            reg_index_free(r->px);
            r->px = px;
        }
        r->fitted = true;
        r->fitted_count = b->n;
    }
    size_t j = 0; /* the first part of tool i */
    for (size_t i = 0; i < b->n && rc == 0; i++) {
        size_t j0 = j;
        while (j < b->np && b->powner[j] == i)
            j++;
        const reg_tool_t *t = reg_catalog_find(r->cat, b->ids[i]);
        /* Removed, or removed and added back with new content, while the batch ran. */
        if (t == NULL || t->seq != b->seq[i] || reg_index_contains(r->ix, t->id)) continue;
        rc = reg_index_add(r->ix, t->id, t->server, t->category, b->vecs + i * b->dim);
        if (rc == 0 && r->px != NULL && j > j0)
            rc = add_parts(r, t, b->pvecs + j0 * b->dim, j - j0);
        if (rc < 0) (void)pend_push(r, b->ids[i]);
    }
    batch_free(b);
    return rc;
}

int reg_registry_index_all(reg_registry_t *r, char *msg, size_t msg_size)
{
    for (;;) {
        reg_batch_t *b;
        int rc = reg_registry_next_batch(r, 0, &b);
        if (rc < 0) return reg__fail(msg, msg_size, rc, "indexing: %s", reg_strerror(rc));
        if (b == NULL) return REG_OK;
        rc = reg_batch_embed(b, msg, msg_size);
        int rc2 = reg_registry_apply_batch(r, b);
        if (rc < 0) return rc;
        if (rc2 < 0) return reg__fail(msg, msg_size, rc2, "indexing: %s", reg_strerror(rc2));
    }
}

bool reg_registry_query_blocking(const reg_registry_t *r)
{
    return r != NULL && r->emb != NULL && r->emb->blocking;
}

int reg_registry_embed_query(reg_registry_t *r, const char *query, float *out, char *msg,
                             size_t msg_size)
{
    if (r == NULL || query == NULL || out == NULL)
        return reg__fail(msg, msg_size, REG_EINVAL, "no registry, query or output given");
    if (r->emb == NULL)
        return reg__fail(msg, msg_size, REG_EINVAL, "the registry has no embedder (BM25 only)");
    /* A sentence model reads the query without its quoted values; the lexical embedder wants
     * every word. Long queries are cut: a pasted document's tail rarely helps ranking. */
    char *q = r->emb->sentence_model ? reg_query_embed_text(query) : malloc(REG_QUERY_MAX + 1);
    if (q == NULL) return reg__fail(msg, msg_size, REG_ENOMEM, "out of memory embedding a query");
    if (!r->emb->sentence_model) snprintf(q, REG_QUERY_MAX + 1, "%s", query);
    const char *t[1] = {q};
    emb_lock(&r->emb_lock, !r->emb->concurrent);
    int rc = reg_embedder_embed(r->emb, t, 1, REG_EMBED_QUERY, out, msg, msg_size);
    pthread_rwlock_unlock(&r->emb_lock);
    free(q);
    return rc;
}

static int cmp_hit_score(const void *a, const void *b)
{
    const reg_hit_t *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return strcmp(x->id, y->id);
}

/* Scores each tool by the best of its whole text's and its parts' cosines: a (na hits of the
 * whole texts, room for want) becomes the best want tools of a and the parts' hits p. A tool
 * found only by a part gets its part's score (its whole text's is lower: it missed a's top). */
static int merge_parts(const reg_registry_t *r, reg_hit_t *a, int na, size_t want,
                       const reg_hit_t *p, int np)
{
    reg_hit_t *m = malloc(((size_t)na + (size_t)np) * sizeof *m);
    reg__map_t at = {0}; /* tool id -> position in m */
    if (m == NULL) return REG_ENOMEM;
    memcpy(m, a, (size_t)na * sizeof *m);
    size_t n = 0;
    int rc = REG_OK;
    for (; n < (size_t)na && rc == 0; n++)
        rc = reg__map_put(&at, m[n].id, n);
    for (int i = 0; i < np && rc == 0; i++) {
        char id[REG_ID_MAX + 24];
        snprintf(id, sizeof id, "%s", p[i].id);
        char *nl = strchr(id, '\n');
        if (nl != NULL) *nl = 0;
        size_t pos;
        if (reg__map_get(&at, id, &pos)) {
            if (p[i].score > m[pos].score) m[pos].score = p[i].score;
            continue;
        }
        const reg_tool_t *t = reg_catalog_find(r->cat, id);
        if (t == NULL) continue;
        m[n] = (reg_hit_t){t->id, p[i].server, p[i].category, p[i].score};
        rc = reg__map_put(&at, t->id, n);
        n++;
    }
    reg__map_free(&at);
    if (rc < 0) {
        free(m);
        return rc;
    }
    qsort(m, n, sizeof *m, cmp_hit_score);
    if (n > want) n = want;
    memcpy(a, m, n * sizeof *m);
    free(m);
    return (int)n;
}

/* Runs the signals of one search into a (dense) and b (BM25). */
static int gather(reg_registry_t *r, const char *query, const float *qvec, bool dense, bool bm25,
                  size_t want, const reg_filter_t *f, reg_hit_t *a, int *na, reg_hit_t *b, int *nb,
                  char *msg, size_t msg_size)
{
    *na = *nb = 0;
    if (dense) {
        float *qv = NULL;
        if (qvec == NULL) {
            qv = malloc(r->emb->dim * sizeof *qv);
            if (qv == NULL) return reg__fail(msg, msg_size, REG_ENOMEM, "out of memory searching");
            int rc = reg_registry_embed_query(r, query, qv, msg, msg_size);
            if (rc < 0) {
                free(qv);
                return rc;
            }
            qvec = qv;
        }
        *na = reg_index_search(r->ix, qvec, want, f, a);
        if (*na >= 0 && r->px != NULL && reg_index_count(r->px) > 0) {
            /* Enough parts' hits that the best want tools are among them even when each has
             * all its parts on top. */
            size_t pk = want * REG_PARTS_MAX < REG_TOPK_MAX ? want * REG_PARTS_MAX : REG_TOPK_MAX;
            reg_hit_t *p = malloc(pk * sizeof *p);
            int np = p != NULL ? reg_index_search(r->px, qvec, pk, f, p) : REG_ENOMEM;
            *na = np < 0 ? np : merge_parts(r, a, *na, want, p, np);
            free(p);
        }
        free(qv);
        if (*na < 0)
            return reg__fail(msg, msg_size, *na, "vector search failed: %s", reg_strerror(*na));
    }
    if (bm25) {
        *nb = reg_bm25_search(r->bm, query, want, f, b);
        if (*nb < 0)
            return reg__fail(msg, msg_size, *nb, "BM25 search failed: %s", reg_strerror(*nb));
    }
    return REG_OK;
}

int reg_registry_search(reg_registry_t *r, const char *query, const float *qvec, size_t k,
                        const reg_filter_t *filter, reg_result_t *out, char *msg, size_t msg_size)
{
    return reg_registry_search_info(r, query, qvec, k, filter, out, NULL, msg, msg_size);
}

int reg_registry_search_info(reg_registry_t *r, const char *query, const float *qvec, size_t k,
                             const reg_filter_t *filter, reg_result_t *out, reg_search_info_t *info,
                             char *msg, size_t msg_size)
{
    if (info != NULL) memset(info, 0, sizeof *info);
    if (r == NULL || query == NULL || (k > 0 && out == NULL))
        return reg__fail(msg, msg_size, REG_EINVAL, "no registry, query or output given");
    if (k > REG_TOPK_MAX)
        return reg__fail(msg, msg_size, REG_ETOOBIG, "top_k must be at most %d", REG_TOPK_MAX);
    if (k == 0) return 0;
    reg_filter_t f;
    reg_filter_default(&f);
    if (filter != NULL) {
        f.server = filter->server;
        f.category = filter->category;
    }
    const float min_score = filter ? filter->min_score : -1e30f;
    /* Never a blocking embedder here: this is the event loop's thread. */
    const bool can_embed = r->emb != NULL && !r->emb->blocking &&
                           (r->in_flight == 0 || (r->emb->concurrent && !r->busy_fit));
    const bool dense = r->emb != NULL && reg_index_count(r->ix) > 0 && (qvec || can_embed);
    /* A hybrid registry fuses even while the vector index is empty or busy (BM25 alone then),
     * so that scores keep one scale and min_score one meaning during indexing. */
    const bool hybrid = r->emb != NULL && r->o.hybrid;
    const size_t want = hybrid ? (k > REG_CANDIDATES ? k : REG_CANDIDATES) : k;
    if (info != NULL) {
        info->tools = reg_catalog_count(r->cat);
        info->indexed = r->emb != NULL ? reg_index_count(r->ix) : 0;
        info->pending = reg_registry_pending(r);
        info->dense = dense;
        info->bm25 = !dense || hybrid;
    }
    reg_hit_t *a = calloc(want, sizeof *a), *b = calloc(want, sizeof *b);
    reg_hit_t *fused = calloc(k, sizeof *fused);
    int na, nb, n = 0;
    int rc = a && b && fused ? REG_OK : reg__fail(msg, msg_size, REG_ENOMEM, "out of memory");
    if (rc == 0)
        rc = gather(r, query, qvec, dense, !dense || hybrid, want, &f, a, &na, b, &nb, msg,
                    msg_size);
    const reg_hit_t *res = dense ? a : b; /* one signal alone */
    if (rc == 0) n = dense ? na : nb;
    if (rc == 0 && hybrid) {
        /* BM25 relative to its best hit: its raw scale grows with the catalog's size and
         * vocabulary, so a fixed squash tuned on one catalog over- or under-weights it on
         * the next; the cosine keeps its absolute meaning (a poor match stays poor). */
        reg_ranked_t lists[2] = {{a, (size_t)na, r->o.dense_weight, 0, false},
                                 {b, (size_t)nb, r->o.bm25_weight, 0, true}};
        const float rrf_k = 60.0f;
        n = reg_fuse(lists, 2, r->o.fuse, rrf_k, k, fused);
        if (n < 0) rc = reg__fail(msg, msg_size, n, "fusion failed: %s", reg_strerror(n));
        /* Scale fused scores to [0, 1] so that min_score means the same in every mode. */
        float top = r->o.dense_weight + r->o.bm25_weight;
        if (r->o.fuse == REG_FUSE_RRF) top /= rrf_k + 1.0f;
        for (int i = 0; i < n; i++)
            fused[i].score /= top;
        res = fused;
    }
    for (int i = 0; rc >= 0 && i < n && (size_t)rc < k; i++) {
        if (res[i].score < min_score) continue;
        const reg_tool_t *t = reg_catalog_find(r->cat, res[i].id);
        if (t == NULL) continue;
        out[rc].tool = t;
        out[rc].score = res[i].score;
        rc++;
    }
    free(a);
    free(b);
    free(fused);
    return rc;
}
