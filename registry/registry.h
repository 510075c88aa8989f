/*
 * registry.h - the ptc-mcp tool registry: a catalog of downstream tools, embedders that turn
 * text into vectors, a dense vector index with top-k search, a BM25 scorer, score fusion for a
 * hybrid mode, an on-disk embedding cache, and the search service that keeps a registry indexed
 * behind a libuv loop (embeddings on its thread pool).
 *
 * The library knows nothing of transports or JSON-RPC: the wiring feeds it tools (from
 * downstream clients and --tools-file) and turns its hits into search_tools results.
 *
 * Conventions
 * - Functions return 0 (REG_OK) or a negative reg_err_t; reg_strerror() names it. Functions
 *   that can fail on user input also take an optional message buffer (msg, msg_size) that
 *   receives a sentence saying what was wrong and what to do.
 * - Every object has a *_new / *_free pair; nothing is global. Objects are not thread safe
 *   unless a function says otherwise; an embedder's embed() may run on a worker thread.
 * - "takes" means the callee owns the memory afterwards (even on error); "borrows" means it
 *   does not; returned pointers say who frees them and how long they stay valid.
 */
#ifndef PTC_REGISTRY_H
#define PTC_REGISTRY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct uv_loop_s; /* libuv's uv_loop_t: the search service runs on one */
#include "base.h"

/* ---------------------------------------------------------------------------------------- */
/* Errors                                                                                   */

/* The codes of the registry and its embedding model (base.h's error space): errno values, and
 * extras from PTC_ERR_REG down. X(NAME, VALUE, TEXT) */
#define REG_ERRORS(X)                                                                              \
    X(REG_OK, 0, "success")                                                                        \
    X(REG_ENOMEM, -ENOMEM, "out of memory")                                                        \
    X(REG_EINVAL, -EINVAL, "invalid argument or malformed input")                                  \
    X(REG_ETOOBIG, -E2BIG, "size limit exceeded") /* a size cap was reached */                     \
    X(REG_EIO, -EIO, "file input/output error")   /* a file could not be read or written */        \
    X(REG_ENOENT, -ENOENT, "not found") /* no such tool, server, cache entry or model file */      \
    X(REG_EEXIST, -EEXIST, "already present") /* the id is already present */                      \
    X(REG_EBUSY, -EBUSY, "an indexing batch is still in flight")                                   \
    X(REG_ENOTSUP, -ENOTSUP, "not built into this binary") /* the provider */                      \
    /* stopped by reg_registry_cancel (or a stop flag) before it finished */                       \
    X(REG_ECANCELED, -ECANCELED, "indexing was cancelled")                                         \
    X(REG_EDIM, PTC_ERR_REG, "vector dimension mismatch")                                          \
    /* a cache file failed its checks (it is removed) */                                           \
    X(REG_ECORRUPT, PTC_ERR_REG - 1, "corrupt cache entry (removed)")                              \
    /* the embedder failed (its own message says why) */                                           \
    X(REG_EEMBED, PTC_ERR_REG - 2, "embedder failed")                                              \
    /* a model file is malformed or describes an unsupported model */                              \
    X(REG_EFORMAT, PTC_ERR_REG - 3, "model file malformed or unsupported")

typedef enum reg_err { REG_ERRORS(PTC_ERR_ENUM) } reg_err_t;

/** A static English description of any code (never NULL): the registry's own, else the HTTP
 *  client's, else ptc_strerror's. */
const char *reg_strerror(int err);

/* ---------------------------------------------------------------------------------------- */
/* Limits (named so that the wiring can quote them in messages)                             */

#define REG_ID_MAX      128          /* MCP tool-name rule: [A-Za-z0-9_.-]{1,128} */
#define REG_NAME_MAX    1024         /* server / tool name bytes accepted */
#define REG_TEXT_MAX    65536        /* description bytes kept per tool */
#define REG_CATALOG_MAX 1000000      /* tools in one catalog */
#define REG_FILE_MAX    (256u << 20) /* largest --tools-file accepted */
#define REG_TOPK_MAX    1000         /* largest k for a search */
#define REG_DIM_MAX     8192         /* largest embedding dimension */
#define REG_QUERY_MAX   8192         /* query bytes considered (the rest is ignored) */
#define REG_SUFFIX_MAX  99999        /* collision suffixes tried before giving up */

/* ---------------------------------------------------------------------------------------- */
/* Names                                                                                    */

/**
 * Writes `in` with every character outside [A-Za-z0-9_.-] replaced by one '_' (a multi-byte
 * UTF-8 character too) into out (NUL terminated, at most out_size - 1 bytes kept; longer input
 * is cut). An empty input gives "_". Returns the length written. Borrows both.
 */
size_t reg_sanitize_name(const char *in, char *out, size_t out_size);

/**
 * Builds the id SERVER__TOOL from sanitised parts, cut to REG_ID_MAX bytes (the tool part is
 * cut first, the server part is kept to at most half so both stay readable). out must hold
 * REG_ID_MAX + 1 bytes. Collisions are the catalog's business (reg_catalog_add).
 */
void reg_make_id(const char *server, const char *tool, char out[REG_ID_MAX + 1]);

/* ---------------------------------------------------------------------------------------- */
/* Text                                                                                     */

/**
 * Splits identifiers and prose into lowercase words separated by one space: snake_case,
 * kebab-case, dotted.names, camelCase and HTTPServer-style acronyms are split; every byte that
 * is not an ASCII letter or digit separates words (UTF-8 letters are kept whole inside a
 * word). Writes a NUL-terminated string into out; returns its length, or REG_ETOOBIG when it
 * did not fit (out then holds a cut but valid prefix). Borrows both.
 */
int reg_text_split(const char *text, char *out, size_t out_size);

/** Light stemming of one lowercase word, in place: plural and -ing/-ed/-ly endings, so
 *  "issues"/"issue", "listing"/"list", "created"/"create" meet. Returns the new length. */
size_t reg_text_stem(char *word);

/** True for a short list of English function words ("the", "of", "my") that carry no topic. */
bool reg_text_is_stopword(const char *word);

/* ---------------------------------------------------------------------------------------- */
/* Catalog                                                                                  */

/** One tool. A view owned by the catalog: valid until the tool is removed or the catalog is
 *  freed. Strings are never NULL ("" when absent); the JSON members may be NULL. */
typedef struct reg_tool {
    const char *id;             /* SERVER__TOOL, unique in the catalog */
    const char *server;         /* original server name */
    const char *name;           /* original tool name (what tools/call needs) */
    const char *title;          /* "" when the tool has none */
    const char *description;    /* cut to REG_TEXT_MAX */
    const char *category;       /* the tool's "category" (or _meta.category), else its server */
    const cJSON *input_schema;  /* owned by the catalog; {"type":"object"} when absent */
    const cJSON *annotations;   /* owned by the catalog; NULL when absent */
    uint64_t seq;               /* unique per addition: a tool removed and added back differs */
    const cJSON *output_schema; /* owned by the catalog; NULL when absent or not an object */
} reg_tool_t;

typedef struct reg_catalog reg_catalog_t;

int reg_catalog_new(reg_catalog_t **out);
/** Frees the catalog and every tool view it handed out. NULL is allowed. */
void reg_catalog_free(reg_catalog_t *cat);

/**
 * Adds one MCP Tool object (name required; title, description, inputSchema, outputSchema,
 * annotations, category optional; an outputSchema that is not an object is ignored) for `server`
 * (if NULL, the object's own "server" member is used; one of them is required). Borrows tool
 * (copied). The id is SERVER__TOOL; if taken, "_2", "_3", ... is appended (the base is cut to fit
 * 128 bytes), so the same sequence of additions always yields the same ids. *out_tool (may be NULL)
 * receives the new tool's view.
 */
int reg_catalog_add(reg_catalog_t *cat, const char *server, const cJSON *tool, char *msg,
                    size_t msg_size, const reg_tool_t **out_tool);

/**
 * Adds every tool of a catalog document: a JSON array of Tool objects, or {"tools": [...]};
 * each may carry "server", else default_server is used (NULL: then each tool must have one).
 * All or nothing: on error the catalog is unchanged and msg names the element and the fault.
 * Borrows root. *added (may be NULL) receives the number of tools added.
 */
int reg_catalog_load_json(reg_catalog_t *cat, const cJSON *root, const char *default_server,
                          size_t *added, char *msg, size_t msg_size);

/** Reads and adds a --tools-file (see reg_catalog_load_json); msg names the file. */
int reg_catalog_load_file(reg_catalog_t *cat, const char *path, const char *default_server,
                          size_t *added, char *msg, size_t msg_size);

/** Removes every tool of `server` (views of them become invalid). Returns the number removed
 *  (0 when the server had none). */
size_t reg_catalog_remove_server(reg_catalog_t *cat, const char *server);

/** Number of tools. */
size_t reg_catalog_count(const reg_catalog_t *cat);
/** The i-th tool in insertion order (order shifts on removal); NULL if out of range. */
const reg_tool_t *reg_catalog_at(const reg_catalog_t *cat, size_t i);
/** The tool with this id, or NULL. */
const reg_tool_t *reg_catalog_find(const reg_catalog_t *cat, const char *id);
/** The tool `name` of `server` (the original names, as a bridge call gives them), or NULL; the
 *  first added when the server listed the name twice. A hash lookup, not a scan. */
const reg_tool_t *reg_catalog_find_tool(const reg_catalog_t *cat, const char *server,
                                        const char *name);

/**
 * The text a tool is indexed by: server name and tool name (both identifier-split), title,
 * description, then each parameter's name (split) and description, one sentence each. Returns a
 * malloc'd string the caller frees, or NULL on ENOMEM. At most REG_TEXT_MAX * 2 bytes.
 */
char *reg_tool_index_text(const reg_tool_t *tool);

/** Bytes of reg_tool_embed_text at most: a sentence model sees 256 tokens (~1 KiB) anyway. */
#define REG_EMBED_TEXT_MAX 4096

/**
 * The text a sentence-embedding model indexes a tool by (reg_embedder_t.sentence_model):
 * server name and tool name (identifier-split), title, description, then "Parameters: a, b, c."
 * with the parameter names split but without their descriptions. Short and topic-first because a
 * model reads only its first 256 tokens and mean pooling dilutes the topic with every format note.
 * Returns a malloc'd string the caller frees, or NULL on ENOMEM. At most REG_EMBED_TEXT_MAX
 * bytes (cut, possibly inside a UTF-8 character, which the model's tokenizer drops).
 */
char *reg_tool_embed_text(const reg_tool_t *tool);

/** Part texts of a tool at most (reg_tool_part_texts): a head and up to 5 later sentences. */
#define REG_PARTS_MAX 6

/**
 * The parts of a tool a sentence model also indexes it by, each embedded on its own, the tool
 * scoring the best of its whole text's and its parts' cosines: a "head" (server and tool
 * name, identifier-split, then the description's first sentence) and each later sentence of
 * the description (up to REG_PARTS_MAX - 1, those of at least 3 words) after the tool's split
 * name ("merge request: Lists the ..."). A mean-pooled vector of the whole text blurs a tool
 * that does several things, or says its purpose only in a later sentence; one sentence alone
 * keeps it sharp. Sentences end at '.', '!' or '?' before a blank or the end, and at newlines.
 * Writes up to max malloc'd strings to out (the caller frees each) and returns how many (at
 * least the head when max > 0), or REG_ENOMEM / REG_EINVAL (nothing to free then).
 */
int reg_tool_part_texts(const reg_tool_t *tool, char **out, size_t max);

/**
 * The text a sentence-embedding model embeds for a search query: the query (first
 * REG_QUERY_MAX bytes) without quoted literals ('prepare Q3 deck', "invoice"), which are
 * argument values rather than the intent and pull the vector towards unrelated tools; BM25
 * still sees them. A quote right after a letter is an apostrophe and stays; an unclosed quote
 * stays; a query that is nothing but quoted text is kept whole. Returns a malloc'd string
 * the caller frees, or NULL on ENOMEM.
 */
char *reg_query_embed_text(const char *query);

/* ---------------------------------------------------------------------------------------- */
/* Embedders                                                                                */

typedef enum reg_embed_kind {
    REG_EMBED_DOCUMENT = 0, /* a tool's index text */
    REG_EMBED_QUERY = 1,    /* a search query (some models prefix an instruction) */
} reg_embed_kind_t;

/**
 * The provider interface. A provider (lexical, model, remote) mallocs one of these in its
 * constructor and fills it in; reg_embedder_free() calls destroy() and then frees the struct.
 * Users only call the reg_embedder_* functions below.
 *
 * - name: "lexical", "model:NAME" or "remote:NAME"; what search results report.
 * - cache_provider / cache_model: the cache key parts ("model", "all-MiniLM-L6-v2@<sha>");
 *   cache_model NULL means "do not cache" (e.g. an embedder whose vectors depend on state).
 * - embed: writes n vectors of dim floats, each L2-normalised (an all-zero vector is allowed
 *   for text with no features), row after row into out. Borrows texts and out. msg receives
 *   the reason on failure. May run on any thread, but on one thread at a time unless
 *   `concurrent` is set, and never while fit() runs.
 * - concurrent: embed() may run on several threads at once (the lexical embedder: read-only
 *   state after fit; the model: read-only weights). The registry then embeds queries inline
 *   even while a batch is being embedded elsewhere; otherwise it answers from BM25 meanwhile.
 * - blocking: embed() takes milliseconds per text (a model) or waits on the network (a remote
 *   provider): the wiring must call it on a worker thread, never on the event loop
 *   (reg_registry_query_blocking, reg_registry_embed_query).
 * - sentence_model: a sentence encoder (the model, most remote ones): the registry embeds
 *   tools by reg_tool_embed_text and queries by reg_query_embed_text; otherwise by
 *   reg_tool_index_text and the raw query (the lexical embedder wants every word).
 * - embed_stop (may be NULL): embed() that also watches *stop (NULL: never stops), a flag
 *   another thread may set at any time, and returns REG_ECANCELED soon after it is set (the
 *   model: within one layer of one chunk). Without it, reg_embedder_embed_stop calls embed()
 *   on slices of REG_STOP_SLICE texts and checks the flag between them. A wrapper that copies
 *   another provider's struct and replaces embed must replace (or clear) embed_stop too.
 * - fit (may be NULL): learns corpus statistics (IDF) from the documents. Borrows docs.
 * - destroy: frees impl.
 */
typedef struct reg_embedder reg_embedder_t;
struct reg_embedder {
    const char *name;
    const char *cache_provider;
    const char *cache_model;
    size_t dim;
    bool concurrent;
    bool blocking;
    bool sentence_model;
    int (*embed)(reg_embedder_t *self, const char *const *texts, size_t n, reg_embed_kind_t kind,
                 float *out, char *msg, size_t msg_size);
    int (*embed_stop)(reg_embedder_t *self, const char *const *texts, size_t n,
                      reg_embed_kind_t kind, const atomic_bool *stop, float *out, char *msg,
                      size_t msg_size);
    int (*fit)(reg_embedder_t *self, const char *const *docs, size_t n);
    void (*destroy)(reg_embedder_t *self);
    void *impl;
};

/** Embeds n texts into out (n * reg_embedder_dim floats). See the embed member. */
int reg_embedder_embed(reg_embedder_t *e, const char *const *texts, size_t n, reg_embed_kind_t kind,
                       float *out, char *msg, size_t msg_size);
/* Texts per embed() call when an embedder without embed_stop is stopped between calls. */
#define REG_STOP_SLICE 8

/**
 * reg_embedder_embed that stops early, returning REG_ECANCELED, once *stop (borrowed, may be
 * NULL) is set by another thread: see the embed_stop member. out is unfinished then.
 */
int reg_embedder_embed_stop(reg_embedder_t *e, const char *const *texts, size_t n,
                            reg_embed_kind_t kind, const atomic_bool *stop, float *out, char *msg,
                            size_t msg_size);
/** Learns corpus statistics when the provider has any (a no-op returning 0 otherwise). */
int reg_embedder_fit(reg_embedder_t *e, const char *const *docs, size_t n);
const char *reg_embedder_name(const reg_embedder_t *e);
size_t reg_embedder_dim(const reg_embedder_t *e);
/** Destroys the provider and frees e (which must come from a provider constructor). NULL ok. */
void reg_embedder_free(reg_embedder_t *e);

/**
 * What --embedder and its companion flags ask for. kind: "auto" (the model when it can be
 * loaded, else lexical, saying so in note), "model", "lexical" or "remote". Strings may be
 * NULL when unused.
 *
 * "remote" is opened by open_remote (a constructor of a reg_embedder_t whose embed() may block
 * on a worker thread): the binary passes reg_embedder_remote_open, tests a fake; without it
 * "remote" fails with REG_ENOTSUP.
 */
typedef struct reg_embedder_spec reg_embedder_spec_t;
struct reg_embedder_spec {
    const char *kind;
    const char *model_dir;    /* --embed-model-dir */
    const char *url;          /* --embed-url */
    const char *remote_model; /* --embed-remote-model */
    const char *key_env;      /* --embed-key-env */
    int (*open_remote)(const reg_embedder_spec_t *spec, void *data, reg_embedder_t **out, char *msg,
                       size_t msg_size);
    void *open_remote_data; /* borrowed; passed to open_remote */
};

/**
 * The remote embedding provider (embedder_remote.c): OpenAI-compatible /v1/embeddings or
 * Ollama /api/embed (chosen by the URL's path), with the key from spec->key_env, batches of 64,
 * retries with backoff, L2-normalised vectors. data is the --ca-file path (borrowed, may be NULL).
 * Probes the endpoint once (blocking) to learn the dimension. Fits
 * reg_embedder_spec_t's open_remote.
 */
int reg_embedder_remote_open(const reg_embedder_spec_t *spec, void *data, reg_embedder_t **out,
                             char *msg, size_t msg_size);

/**
 * Opens the embedder a spec names; the one place where providers are chosen, so a provider
 * added to the library becomes available to the binary and the benchmarks at once. On
 * success *out is set and note (if not NULL) receives a line for the log when "auto" fell
 * back ("" otherwise). On failure msg says what is missing and what to do. A fallback is never
 * silent: callers that need a given provider check reg_embedder_name().
 *
 * "model" loads the in-process sentence encoder (model_*.c) from spec->model_dir, or from
 * reg_model_find_installed() when that is NULL: name "model:NAME" (model:all-MiniLM-L6-v2),
 * cache_model "NAME@FINGERPRINT/vN" (config.json and the edges of the weights, so a swapped
 * model never reuses cached vectors), concurrent, blocking and sentence_model set; query and
 * document prompts from config_sentence_transformers.json when the model names any. Loading
 * reads ~90 MB (tens of ms; call it at start-up) and sets OpenBLAS to one thread per call for
 * the process (reg_model_set_blas_threads(1)): embeddings run one per libuv worker. Errors:
 * REG_ENOENT (nothing installed), REG_EEMBED (a folder that does not load), with msg naming
 * the folder and what to do.
 *
 * Wrap the result with reg_cached_embedder_new() to keep vectors across restarts.
 */
int reg_embedder_open(const reg_embedder_spec_t *spec, reg_embedder_t **out, char *note,
                      size_t note_size, char *msg, size_t msg_size);

/** Settings of the built-in lexical embedder; reg_lexical_opts_default() fills them. */
typedef struct reg_lexical_opts {
    size_t dim;          /* hashed feature space (power of two not required), <= REG_DIM_MAX */
    unsigned ngram_min;  /* character n-grams of each word, with word-boundary marks */
    unsigned ngram_max;  /* 0 disables n-grams */
    float word_weight;   /* share of the vector's mass for whole words ... */
    float ngram_weight;  /* ... and for n-grams (relative; both >= 0) */
    float bigram_weight; /* adjacent word pairs (0 disables) */
    bool stem;           /* apply reg_text_stem to words */
    bool stopwords;      /* drop reg_text_is_stopword words */
} reg_lexical_opts_t;

void reg_lexical_opts_default(reg_lexical_opts_t *opts);

/**
 * Creates the lexical embedder: words and character n-grams (identifier-split, lowercased,
 * stemmed), weighted by sublinear term frequency times IDF learned by fit() (before fit every
 * feature has the same IDF), hashed with a sign bit into dim floats, L2-normalised. Pure
 * function of (opts, fitted corpus, text): deterministic across runs (feature positions are the
 * same on every machine; float values may differ in the last bits between math libraries).
 * opts NULL means the defaults. *out is freed with reg_embedder_free.
 */
int reg_lexical_new(const reg_lexical_opts_t *opts, reg_embedder_t **out);

/* ---------------------------------------------------------------------------------------- */
/* Search results and filters                                                               */

/** One search hit. id, server and category are borrowed from the index (or scorer) that
 *  produced it and stay valid until that object is next modified or freed. */
typedef struct reg_hit {
    const char *id;
    const char *server;
    const char *category;
    float score;
} reg_hit_t;

/** Restricts a search. NULL members mean "any"; min_score drops hits scoring below it (use
 *  -INFINITY or a very low value for none; reg_filter_default sets -1e30). */
typedef struct reg_filter {
    const char *server;
    const char *category;
    float min_score;
} reg_filter_t;

void reg_filter_default(reg_filter_t *f);

/* ---------------------------------------------------------------------------------------- */
/* Dense index                                                                              */

typedef struct reg_index reg_index_t;

typedef enum reg_index_storage {
    REG_INDEX_F32 = 0, /* 4 bytes per dimension: exact */
    REG_INDEX_Q8 = 1,  /* 1 byte per dimension + a scale per row: 4x less memory and memory
                          traffic, dot products within about 1e-3 of exact for unit vectors */
} reg_index_storage_t;

/** Creates an empty index of dim-float vectors stored as `storage`. */
int reg_index_new(size_t dim, reg_index_storage_t storage, reg_index_t **out);
void reg_index_free(reg_index_t *ix);

/**
 * Adds a row. Borrows all arguments (copied); vec is L2-normalised on the way in (a zero
 * vector stays zero and scores 0). category NULL means the server. REG_EEXIST if the id is
 * present (remove it first to replace it); REG_EINVAL for NaN or infinite components.
 */
int reg_index_add(reg_index_t *ix, const char *id, const char *server, const char *category,
                  const float *vec);
/** Removes one row; REG_ENOENT if absent. Row order is not preserved. */
int reg_index_remove(reg_index_t *ix, const char *id);
/** Removes every row of a server; returns how many. */
size_t reg_index_remove_server(reg_index_t *ix, const char *server);
size_t reg_index_count(const reg_index_t *ix);
size_t reg_index_dim(const reg_index_t *ix);
/** Bytes held by the index (matrix, strings, tables): for the benchmarks. */
size_t reg_index_memory(const reg_index_t *ix);
/** True if the index holds id. */
bool reg_index_contains(const reg_index_t *ix, const char *id);
/** Copies the stored (normalised; for Q8, dequantised) vector of id into out (dim floats).
 *  REG_ENOENT if absent. */
int reg_index_get_vector(const reg_index_t *ix, const char *id, float *out);

/**
 * Scores every row passing the filter by dot product with query (dim floats, normalised by
 * the caller or not: scores are then scaled) and writes the best min(k, matches) hits, best
 * first (ties broken by id, so results are deterministic), into hits. Returns the number
 * written (>= 0) or a negative error (k > REG_TOPK_MAX, NULL arguments). filter may be NULL.
 */
int reg_index_search(const reg_index_t *ix, const float *query, size_t k,
                     const reg_filter_t *filter, reg_hit_t *hits);

/* ---------------------------------------------------------------------------------------- */
/* BM25 scorer (a lexical baseline and the second signal of the hybrid mode)                 */

typedef struct reg_bm25 reg_bm25_t;

/** k1 and b: the usual Okapi parameters (1.2 and 0.75 are good defaults). */
int reg_bm25_new(float k1, float b, reg_bm25_t **out);
void reg_bm25_free(reg_bm25_t *bm);
/** Adds a document (tokenised like the lexical embedder: split, lowercased, stemmed, stop
 *  words dropped). Borrows all arguments. REG_EEXIST if the id is present. */
int reg_bm25_add(reg_bm25_t *bm, const char *id, const char *server, const char *category,
                 const char *text);
int reg_bm25_remove(reg_bm25_t *bm, const char *id);
size_t reg_bm25_remove_server(reg_bm25_t *bm, const char *server);
size_t reg_bm25_count(const reg_bm25_t *bm);
/** Bytes held (postings, documents, vocabulary, ids): for the benchmarks. */
size_t reg_bm25_memory(const reg_bm25_t *bm);
/** Like reg_index_search, with a text query. Documents sharing no term with the query are
 *  not returned. Not const: statistics removed documents left behind are rebuilt lazily. */
int reg_bm25_search(reg_bm25_t *bm, const char *query, size_t k, const reg_filter_t *filter,
                    reg_hit_t *hits);

/* ---------------------------------------------------------------------------------------- */
/* Fusion of ranked lists (hybrid mode)                                                      */

typedef enum reg_fuse_method {
    /* registry options only: REG_FUSE_SCORE for a sentence model, else REG_FUSE_MINMAX */
    REG_FUSE_AUTO = -1,
    /* sum over lists of weight / (rrf_k + rank), rank from 1: robust to score scales */
    REG_FUSE_RRF = 0,
    /* sum over lists of weight * (score - min) / (max - min) within each list */
    REG_FUSE_MINMAX = 1,
    /* sum over lists of weight * g(score), g(s) = max(s, 0), or max(s, 0) / (max(s, 0) + half)
     * when the list's `half` is > 0: absolute scores, so a list's best hit counts only as much
     * as it scores (a cosine of 0.2 stays 0.2 however poor the rest of the list is, and a
     * filter or a half-built index does not inflate it); `half` squashes unbounded scores
     * (BM25) into [0, 1); a `relative` list's scores are first divided by its best one, for a
     * scorer whose scale changes with the catalog (BM25's with its size and vocabulary) */
    REG_FUSE_SCORE = 2,
} reg_fuse_method_t;

/** One input of a fusion: a ranked list (best first), as a search returns it. */
typedef struct reg_ranked {
    const reg_hit_t *hits;
    size_t n;
    float weight;  /* >= 0 */
    float half;    /* REG_FUSE_SCORE: the score that maps to 0.5 (0: scores used as they are) */
    bool relative; /* REG_FUSE_SCORE: scores divided by the list's best first */
} reg_ranked_t;

/**
 * Fuses ranked lists of hits (matched by id) into out: the best min(k, distinct ids) hits,
 * best first, with fused scores. A hit missing from a list contributes nothing for it. out
 * borrows the input hits' strings. rrf_k is used by REG_FUSE_RRF only (60 is customary).
 * Returns the number written or a negative error.
 */
int reg_fuse(const reg_ranked_t *lists, size_t nlists, reg_fuse_method_t method, float rrf_k,
             size_t k, reg_hit_t *out);

/* ---------------------------------------------------------------------------------------- */
/* Embedding cache on disk                                                                   */

#define REG_CACHE_DEFAULT_MAX_BYTES (256u << 20)
/* Entries (and, in the server, other cache folders) unused this long are removed at start-up. */
#define REG_CACHE_PRUNE_AGE_S (30L * 24 * 60 * 60)

/**
 * Writes ptc-mcp's cache base into out: $XDG_CACHE_HOME/ptc-mcp when XDG_CACHE_HOME is an
 * absolute path, else $HOME/.cache/ptc-mcp. Creates nothing. Every cache of the program (the
 * embeddings here, the server's generated packages) lives under it. Returns REG_OK, REG_EINVAL
 * when neither variable is an absolute path, or REG_ETOOBIG when out is too small.
 */
int reg_cache_base(char *out, size_t out_size);

/* One cache handle may be shared by threads (its bookkeeping is locked) and processes (entries
 * are written to a temporary file and renamed into place). */
typedef struct reg_cache reg_cache_t;

/**
 * Opens (creating as needed) a cache directory. dir NULL means <reg_cache_base()>/embeddings.
 * max_bytes bounds the total size of entries (0 means REG_CACHE_DEFAULT_MAX_BYTES); the oldest
 * entries are evicted past it.
 */
int reg_cache_open(const char *dir, size_t max_bytes, reg_cache_t **out, char *msg,
                   size_t msg_size);
void reg_cache_close(reg_cache_t *c);
/** The directory in use (borrowed, valid until close). */
const char *reg_cache_dir(const reg_cache_t *c);

/**
 * Looks up the vector of (provider, model, text). On a hit copies dim floats into out and
 * returns 0; REG_ENOENT on a miss; REG_ECORRUPT when the file failed its checks (it is
 * deleted: treat as a miss); REG_EDIM when the entry has another dimension.
 */
int reg_cache_get(reg_cache_t *c, const char *provider, const char *model, const char *text,
                  size_t dim, float *out);
/** Stores a vector (written to a temporary file and renamed, so readers never see half a
 *  file). Borrows all arguments. */
int reg_cache_put(reg_cache_t *c, const char *provider, const char *model, const char *text,
                  size_t dim, const float *vec);
/** Total bytes of entries as counted by this handle. */
size_t reg_cache_bytes(reg_cache_t *c);
/**
 * Removes the entries last used (a hit touches its file's mtime) more than max_age_s seconds
 * before now (seconds since the epoch; pass time(NULL)). Blocking file I/O, one walk of the
 * folder, like reg_cache_open: call it at start-up or off the event loop. Returns the number
 * of entries removed, or REG_EINVAL.
 */
long reg_cache_prune(reg_cache_t *c, int64_t now, long max_age_s);

/**
 * Wraps an embedder so that each text is looked up in the cache first and only misses are
 * embedded (then stored). Takes inner (freed with the wrapper); borrows cache, which must
 * outlive the wrapper. An inner embedder with cache_model NULL is returned unwrapped.
 */
int reg_cached_embedder_new(reg_embedder_t *inner, reg_cache_t *cache, reg_embedder_t **out);

/* ---------------------------------------------------------------------------------------- */
/* The registry: catalog + embedder + index + BM25, what search_tools calls                 */

/*
 * Threading: every reg_registry_* call belongs to one owner thread (the event loop). Only
 * reg_batch_embed, reg_registry_embed_query and reg_registry_cancel may run elsewhere (worker
 * threads):
 * - Indexing: the owner takes a batch with reg_registry_next_batch, a worker embeds it
 *   (reg_batch_embed), the owner applies it (reg_registry_apply_batch). Up to
 *   opts.batches_in_flight batches may be out at once, each on its own worker, so that every
 *   core embeds (a refitting batch is always alone). Tools added or removed meanwhile are
 *   handled at apply time (stale vectors are dropped).
 * - Stopping: reg_registry_cancel (any thread, e.g. at shutdown) makes every batch being
 *   embedded return REG_ECANCELED within a bounded time (the model: one encoder layer of one
 *   chunk of texts, tens of ms) and no further batch be handed out; the owner still applies
 *   (drops) the batches that come back, then frees the registry.
 * - Queries: when reg_registry_query_blocking() is true (the model, a remote provider), the
 *   owner hands the query to a worker that calls reg_registry_embed_query, then passes the
 *   vector to reg_registry_search on the owner thread. Any number of those may run at once,
 *   also while a batch is embedded: the registry serialises embedder calls that may not
 *   overlap (an embedder that is not `concurrent`, a refit) with a lock, so a worker may wait
 *   for another but the owner thread never waits for a batch.
 * - A search without a query vector embeds the query inline (fine for the lexical embedder:
 *   tens of microseconds), unless the embedder is `blocking`, or a batch is in flight and the
 *   embedder is not `concurrent` or the batch refits it; then it answers from BM25 alone. So
 *   a search never blocks its thread, and a wiring whose query embedding failed (a remote
 *   provider down) still answers by passing qvec NULL.
 * The registry must outlive every batch and query call in flight.
 */

#define REG_BATCH_DEFAULT 256 /* tools per indexing batch: ~35 ms with the lexical embedder */
#define REG_BATCH_BLOCKING                                                                         \
    32                    /* ... with a blocking embedder: ~1 s of the model's time, so            \
                             progress shows and a worker is not held for minutes */
#define REG_CANDIDATES 50 /* hits each signal contributes to a hybrid fusion */
#define REG_BM25_WEIGHT_SENTENCE                                                                   \
    0.1f /* BM25's weight against a sentence model's 1, BM25 relative to its best hit: chosen by   \
            cross-validation over the servers of bench/eval/dev and dev2 (flat from 0.08 to        \
            0.15) */
#define REG_REFIT_RATIO                                                                            \
    0.25 /* refit corpus statistics when the catalog grew or shrank this much                      \
          */

typedef struct reg_registry_opts {
    bool hybrid;            /* fuse the embedder's cosine with BM25 (else the embedder alone) */
    reg_fuse_method_t fuse; /* REG_FUSE_AUTO by default: REG_FUSE_SCORE (cosine + BM25
                               relative to its best hit) for a sentence model, else MINMAX */
    float dense_weight;     /* weight of the embedder's cosine (default 1) */
    float bm25_weight;      /* weight of BM25; negative (the default): REG_BM25_WEIGHT_SENTENCE
                               for a sentence model, 1 for the lexical embedder */
    reg_index_storage_t storage; /* REG_INDEX_Q8 by default */
    size_t batches_in_flight;    /* batches reg_registry_next_batch hands out before one is
                                    applied: 1 by default; the number of cores (at most the
                                    worker pool's size) lets a blocking embedder use them all */
    bool parts; /* a sentence model also embeds each tool's parts (reg_tool_part_texts) and
                   scores a tool by the best of its vectors: off by default; recall@5 on
                   bench/eval/dev2 +0.015, dev unchanged, for about 1.8 times the indexing CPU
                   and 3.1 vectors a tool (docs/registry.md, "Parts") */
} reg_registry_opts_t;

void reg_registry_opts_default(reg_registry_opts_t *o);

typedef struct reg_registry reg_registry_t;
typedef struct reg_batch reg_batch_t;

/** Creates a registry. Takes emb (freed with the registry; NULL means BM25 only). opts NULL
 *  means the defaults. On error emb is freed too. */
int reg_registry_new(reg_embedder_t *emb, const reg_registry_opts_t *opts, reg_registry_t **out);
void reg_registry_free(reg_registry_t *reg);

/** The catalog (borrowed; read it, but change it only through the registry). */
const reg_catalog_t *reg_registry_catalog(const reg_registry_t *reg);
/** The embedder's name ("lexical", "model:NAME", "remote:NAME"), or "bm25" without one. */
const char *reg_registry_embedder_name(const reg_registry_t *reg);

/** Loads a --tools-file (see reg_catalog_load_file); the new tools are searchable by BM25 at
 *  once and by the embedder once indexed. */
int reg_registry_load_file(reg_registry_t *reg, const char *path, char *msg, size_t msg_size);
/**
 * Replaces every tool of `server` with `tools` (a JSON array of MCP Tool objects, as
 * tools/list returns them; their own "server" members are ignored). All or nothing. Borrows
 * tools. Use an empty array (or reg_registry_remove_server) when a server goes away.
 */
int reg_registry_set_server_tools(reg_registry_t *reg, const char *server, const cJSON *tools,
                                  char *msg, size_t msg_size);
/** Removes every tool of server; returns how many. */
size_t reg_registry_remove_server(reg_registry_t *reg, const char *server);

/** True when queries must be embedded on a worker thread (reg_registry_embed_query) because
 *  the embedder is `blocking` (the model: ~10 ms; a remote provider: a network round trip). */
bool reg_registry_query_blocking(const reg_registry_t *reg);

/**
 * Embeds a search query into out (reg_registry_stats().dim floats, borrowed) the way
 * reg_registry_search would (for a sentence model: reg_query_embed_text). Safe on any thread,
 * concurrently with the owner's calls and with reg_batch_embed (see Threading). Borrows query.
 * REG_EINVAL when the registry has no embedder.
 */
int reg_registry_embed_query(reg_registry_t *reg, const char *query, float *out, char *msg,
                             size_t msg_size);

/** Tools not yet in the vector index (search covers them through BM25 only). */
size_t reg_registry_pending(const reg_registry_t *reg);

/** What --check and the logs report about the registry. */
typedef struct reg_registry_stats {
    const char *embedder; /* reg_registry_embedder_name() */
    size_t dim;           /* 0 without an embedder */
    size_t tools;         /* in the catalog */
    size_t indexed;       /* with a vector */
    size_t pending;       /* waiting for one */
    size_t memory_bytes;  /* vector indexes (whole texts and parts) + BM25 */
    bool hybrid;
} reg_registry_stats_t;

void reg_registry_stats(const reg_registry_t *reg, reg_registry_stats_t *st);

/**
 * Stops indexing for good, from any thread (at shutdown): batches being embedded return
 * REG_ECANCELED soon (see Threading), reg_registry_next_batch hands out no more. Searches
 * keep working on what is indexed (BM25 covers the rest). Idempotent.
 */
void reg_registry_cancel(reg_registry_t *reg);
/** True once reg_registry_cancel was called. */
bool reg_registry_cancelled(const reg_registry_t *reg);
/** Batches handed out and not yet applied. */
size_t reg_registry_batches_in_flight(const reg_registry_t *reg);

/**
 * Takes the next batch of at most max tools to embed (0 means REG_BATCH_DEFAULT, or
 * REG_BATCH_BLOCKING for a blocking embedder); *out is NULL
 * when nothing is pending. A batch that refits the embedder (first run, or the catalog changed
 * by REG_REFIT_RATIO) holds every tool and waits until no other batch is in flight. REG_EBUSY
 * when opts.batches_in_flight batches (or a refitting one) are in flight, REG_ECANCELED after
 * reg_registry_cancel.
 */
int reg_registry_next_batch(reg_registry_t *reg, size_t max, reg_batch_t **out);
/** Embeds a batch; may run on a worker thread (see Threading). REG_ECANCELED when
 *  reg_registry_cancel stopped it. */
int reg_batch_embed(reg_batch_t *b, char *msg, size_t msg_size);
/** Number of tools in a batch (for progress reports). */
size_t reg_batch_count(const reg_batch_t *b);
/** Puts an embedded batch into the index (owner thread) and frees it; a batch that failed or
 *  was not embedded is dropped and its tools go back to pending (REG_EEMBED, or REG_ECANCELED
 *  for a cancelled one). Takes b. */
int reg_registry_apply_batch(reg_registry_t *reg, reg_batch_t *b);
/** Convenience for start-up and tests: runs batches on the calling thread until none is left. */
int reg_registry_index_all(reg_registry_t *reg, char *msg, size_t msg_size);

typedef struct reg_result {
    const reg_tool_t *tool; /* borrowed from the catalog: valid until it changes */
    float score;            /* cosine, BM25 score, or fused score in [0, 1] (hybrid) */
} reg_result_t;

/**
 * Finds the k best tools for query. qvec (may be NULL) is the query's embedding computed by
 * the caller with reg_registry_embed_query (on a worker thread for a blocking embedder);
 * without it the query is embedded here when that cannot block (see Threading), else BM25
 * answers alone.
 * filter's server/category restrict both signals; min_score applies to the reported score.
 * Writes min(k, matches) results, best first, into out; returns their number or an error.
 */
int reg_registry_search(reg_registry_t *reg, const char *query, const float *qvec, size_t k,
                        const reg_filter_t *filter, reg_result_t *out, char *msg, size_t msg_size);

/**
 * What one search covered, so that an answer from a partial index is never silent: the wiring
 * says "N of M tools indexed so far" (indexed of tools) when pending > 0, and that the
 * ranking is by words alone when an embedder exists but dense is false.
 */
typedef struct reg_search_info {
    size_t tools;   /* in the catalog (all servers, whatever the filter) */
    size_t indexed; /* of those, with a vector: ranked by meaning and words */
    size_t pending; /* of those, still waiting for a vector: found by words (BM25) only */
    bool dense;     /* the embedder's similarity took part in this ranking */
    bool bm25;      /* BM25 took part in this ranking */
} reg_search_info_t;

/** reg_registry_search that also fills *info (may be NULL). */
int reg_registry_search_info(reg_registry_t *reg, const char *query, const float *qvec, size_t k,
                             const reg_filter_t *filter, reg_result_t *out, reg_search_info_t *info,
                             char *msg, size_t msg_size);

/* ---------------------------------------------------------------------------------------- */
/* The search service (service.c): a registry kept indexed on a libuv loop                  */

/*
 * What a server runs: the registry behind one event loop. Indexing is kicked as tools change
 * and runs on the loop's thread pool (up to index_jobs batches at once); a query is embedded
 * on the pool when the embedder blocks, then ranked on the loop (the registry's owner thread:
 * ranking takes well under a millisecond); a failed or refused embedding (the pool busy with
 * query_jobs queries, a remote provider down) ranks by words alone. The loop never waits for
 * an embedding. Every function belongs to the loop's thread.
 */

#define REG_SERVICE_TOPK_MAX 50 /* largest top_k of a reg_service_query */
#define REG_SERVICE_QUERY_JOBS                                                                     \
    8 /* queries on the thread pool at once; past it BM25 answers                                  \
         (the pool also serves indexing, file I/O, DNS) */
#define REG_SERVICE_INDEX_JOBS                                                                     \
    2                                /* indexing batches at once at most: one per core up to       \
                                        this (libuv's pool has 4 workers; queries need some) */
#define REG_SERVICE_PROGRESS_MS 3000 /* a large catalog's progress is logged this often */

/* The severities of RFC 5424 (syslog), which MCP's logging levels use too. */
typedef enum reg_log_level {
    REG_LOG_ERROR = 3,
    REG_LOG_WARNING = 4,
    REG_LOG_INFO = 6,
} reg_log_level_t;

/** Where the service's lines go: one sentence (borrowed for the call), on the loop's thread. */
typedef void (*reg_log_fn)(void *data, reg_log_level_t level, const char *line);

typedef struct reg_service_opts {
    size_t index_jobs;      /* batches embedded at once; 0: one per core, at most
                               REG_SERVICE_INDEX_JOBS (more than one sets OpenBLAS to one thread) */
    size_t query_jobs;      /* queries embedded at once; 0: REG_SERVICE_QUERY_JOBS */
    bool cache;             /* keep vectors in the embedding cache (opened and pruned of entries
                               unused for REG_CACHE_PRUNE_AGE_S at reg_service_new); default true */
    const char *cache_dir;  /* NULL: <reg_cache_base()>/embeddings (borrowed for the call) */
    const char *tools_file; /* a catalog loaded at the start (--tools-file), or NULL */
    reg_registry_opts_t registry; /* batches_in_flight is index_jobs' */
    reg_log_fn log;               /* may be NULL */
    void *log_data;
} reg_service_opts_t;

void reg_service_opts_default(reg_service_opts_t *o);

typedef struct reg_service reg_service_t;
typedef struct reg_query reg_query_t;

/**
 * Creates the service on loop (borrowed; must outlive it): opens the embedder spec asks for
 * (reg_embedder_open; NULL: BM25 only), logging its note when "auto" fell back; "remote"
 * configured but failing to answer (REG_EEMBED) falls back to the lexical embedder with a
 * warning, so search still works. Then the embedding cache when opts->cache (one that cannot be
 * opened is logged and left out: everything works without it), the registry, and
 * opts->tools_file; indexing starts. Blocks for the model's load, the cache's walk and the
 * file: call before the loop serves anyone. opts NULL: the defaults. On failure msg says what
 * failed and why, naming the flag ("--embedder model: ...", "--tools-file F: ...").
 */
int reg_service_new(struct uv_loop_s *loop, const reg_embedder_spec_t *spec,
                    const reg_service_opts_t *opts, reg_service_t **out, char *msg,
                    size_t msg_size);
/** Frees; call once the loop has run every batch and query to its end (after reg_service_stop
 *  and the loop's last run). NULL is allowed. */
void reg_service_free(reg_service_t *svc);
/** The registry (borrowed): feed it tools, then call reg_service_changed. */
reg_registry_t *reg_service_registry(reg_service_t *svc);
/**
 * The registry's tools changed (a server's listing, a file): indexes what is new on the pool,
 * retries after a failed batch, then runs the change callback. Idempotent.
 */
void reg_service_changed(reg_service_t *svc);
/** cb(data) runs after every reg_service_changed (cb NULL: none). */
void reg_service_on_change(reg_service_t *svc, void (*cb)(void *data), void *data);
/** cb(data) runs after every indexing batch is applied (progress, or the index complete). */
void reg_service_on_indexed(reg_service_t *svc, void (*cb)(void *data), void *data);
/**
 * Stops indexing for good (shutdown): batches being embedded return within one encoder layer
 * (reg_registry_cancel) and none is handed out after; queries still answer. Idempotent.
 */
void reg_service_stop(reg_service_t *svc);

/**
 * A query's answer: err 0 and n hits, best first, or err < 0 and msg saying why (the
 * registry's message or reg_strerror). filter is the query's server and category. All borrowed
 * for the call (the hits point into the catalog, valid until it changes).
 */
typedef void (*reg_query_done_fn)(void *data, int err, const reg_result_t *res, size_t n,
                                  const reg_search_info_t *info, const reg_filter_t *filter,
                                  const char *msg);

/**
 * Ranks the top_k (1..REG_SERVICE_TOPK_MAX) tools for query (borrowed, copied), filtered by
 * server and category (borrowed, copied; NULL: any). With a blocking embedder the query is
 * embedded on the pool and done runs from a later loop turn; *handle (for
 * reg_service_query_cancel) is then set. Otherwise (or with query_jobs queries in flight, or
 * the pool refusing the work) done runs before this returns, ranked now (by words alone when
 * the embedder may not run on the loop), and *handle is NULL. REG_EINVAL (top_k, query NULL)
 * or REG_ENOMEM without done being called.
 */
int reg_service_query(reg_service_t *svc, const char *query, size_t top_k, const char *server,
                      const char *category, reg_query_done_fn done, void *data,
                      reg_query_t **handle);
/** done is not called for q after this returns; its embedding finishes (or never starts) on
 *  the pool and is dropped. q is not to be used again. */
void reg_service_query_cancel(reg_query_t *q);

#include "registry_model.h" /* the in-process sentence-embedding model */

#endif /* PTC_REGISTRY_H */
