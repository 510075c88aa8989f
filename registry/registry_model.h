/* registry_model.h - part of registry.h, the library's one public header: the in-process
 * sentence-embedding model. Include registry.h, never this file: it is read at its place inside
 * registry.h (the declarations above it there are in scope), and it is a file of its own only to
 * keep each file short. */
#ifndef PTC_REGISTRY_MODEL_H
#define PTC_REGISTRY_MODEL_H
#ifndef PTC_REGISTRY_H
#error "include registry.h, not registry_model.h"
#endif

/* ---- sentence-embedding model (model_*.c) ---- */
/*
 * An in-process BERT-family sentence encoder (all-MiniLM-L6-v2, bge-small-en-v1.5 and the like)
 * loaded from a sentence-transformers model folder:
 *   config.json            architecture (hidden size, layers, heads, LayerNorm epsilon, ...)
 *   vocab.txt              WordPiece vocabulary (or the "model.vocab" of tokenizer.json)
 *   tokenizer.json / tokenizer_config.json   lower-casing and accent stripping (optional)
 *   model.safetensors      weights, F32, F16 or BF16 (F16/BF16 are widened to F32 at load)
 *   modules.json, 1_Pooling/config.json      mean or CLS pooling (optional; default mean)
 *   sentence_bert_config.json                max_seq_length (optional; default 512 capped
 *                                            by the position table)
 * Output vectors are always L2-normalised, so a dot product is the cosine similarity.
 *
 * Threads: a loaded model is read-only; reg_model_embed and reg_model_tokenize may run on any
 * number of threads at once (each call allocates its own scratch memory). Matrix products go
 * through cblas_sgemm; the number of OpenBLAS threads is the process's business
 * (OPENBLAS_NUM_THREADS or openblas_set_num_threads), not the model's.
 */

/* The model's codes are the registry's (REG_ERRORS); these names say where they come from. */
#define REG_MODEL_OK        REG_OK
#define REG_MODEL_ENOMEM    REG_ENOMEM
#define REG_MODEL_EINVAL    REG_EINVAL    /* bad argument */
#define REG_MODEL_ENOENT    REG_ENOENT    /* a required model file is missing */
#define REG_MODEL_EFORMAT   REG_EFORMAT   /* a model file is malformed or unsupported */
#define REG_MODEL_EIO       REG_EIO       /* a model file could not be read or mapped */
#define REG_MODEL_ETOOBIG   REG_ETOOBIG   /* a model file passes a size cap */
#define REG_MODEL_ECANCELED REG_ECANCELED /* *stop was set (reg_model_embed_stop) */

/* Caps on what a model folder may hold; a file past its cap is refused with REG_MODEL_ETOOBIG. */
#define REG_MODEL_MAX_JSON_BYTES         (64u * 1024u * 1024u)            /* tokenizer.json etc. */
#define REG_MODEL_MAX_VOCAB              500000u                          /* tokens */
#define REG_MODEL_MAX_WEIGHTS_BYTES      ((size_t)4 * 1024 * 1024 * 1024) /* model.safetensors */
#define REG_MODEL_MAX_SAFETENSORS_HEADER (100u * 1024u * 1024u)
/* Only the first this many bytes of a text are tokenized (the model sees at most
 * reg_model_max_tokens() tokens anyway). */
#define REG_MODEL_MAX_TEXT_BYTES (1024u * 1024u)
/* Tokens of a tool's text the embedder gives the model (queries get the model's window).
 * all-MiniLM-L6-v2 was trained on pairs cut at 128 tokens although its config allows 256; on
 * bench/eval/dev and dev2 recall@5 is the same or better at 128, and indexing is about 30%
 * faster (bench/README.md). */
#define REG_MODEL_DOC_TOKENS 128u

typedef struct reg_model reg_model_t;

/**
 * Loads the model in folder `dir` (borrowed). On success *out is a new model that the caller
 * frees with reg_model_free(). On failure returns a negative reg_err_t, leaves *out NULL
 * and, when errmsg is not NULL, writes a NUL-terminated message of at most errmsg_size bytes
 * that names the file at fault and says what to do. Reads and maps files (tens of ms for F32
 * weights, more for F16): call it at start-up or on a worker thread, not on the event loop.
 */
int reg_model_load(const char *dir, reg_model_t **out, char *errmsg, size_t errmsg_size);

/** Frees a model from reg_model_load (NULL is ignored). No call may be running on it. */
void reg_model_free(reg_model_t *model);

/** Length of every embedding vector (the hidden size, 384 for all-MiniLM-L6-v2). */
size_t reg_model_dim(const reg_model_t *model);

/**
 * The model's name (borrowed, lives as long as the model): the title of the folder's README.md
 * when it has one ("all-MiniLM-L6-v2"), else the folder's base name.
 */
const char *reg_model_name(const reg_model_t *model);

/** Longest token sequence the model sees, [CLS] and [SEP] included (256 for MiniLM). */
size_t reg_model_max_tokens(const reg_model_t *model);

/**
 * How the model's linear layers multiply (static string): "bf16" when the CPU has AVX-512 BF16
 * (weights and each product's input rounded to BF16, sums in FP32: about twice the FP32 rate,
 * vectors within cosine 0.9999 of FP32's), else "fp32" (OpenBLAS). Chosen at reg_model_load;
 * the environment variable PTC_MODEL_FP32=1 at that time forces "fp32".
 */
const char *reg_model_precision(const reg_model_t *model);

/**
 * Embeds n NUL-terminated UTF-8 texts (borrowed; invalid UTF-8 bytes are dropped). Writes n
 * rows of reg_model_dim() floats, unit length, into out_vectors (borrowed, n * dim floats).
 * Texts longer than the model's window are truncated like sentence-transformers does. Runs on
 * the calling thread and may take tens of milliseconds per text: never call it on an event loop.
 */
int reg_model_embed(const reg_model_t *model, const char *const *texts, size_t n,
                    float *out_vectors);

/**
 * reg_model_embed that watches *stop (borrowed; NULL: never stops), which another thread may
 * set at any time: it is read before every chunk of texts and every layer of the encoder, so
 * the call returns REG_MODEL_ECANCELED within one layer's work on one chunk (at most
 * MODEL_CHUNK_TOKENS tokens: about 30 ms of one core for MiniLM) of it being set. The vectors
 * of a stopped call are not to be used.
 */
int reg_model_embed_stop(const reg_model_t *model, const char *const *texts, size_t n,
                         const atomic_bool *stop, float *out_vectors);

/**
 * reg_model_embed_stop with each text truncated to max_tokens ids ([CLS] and [SEP] included)
 * when that is below reg_model_max_tokens(); 0 means the model's window, 1 is REG_MODEL_EINVAL.
 * A shorter window costs less (every layer's work grows with the tokens, attention with their
 * square) and is what models trained on short pairs saw (REG_MODEL_DOC_TOKENS).
 */
int reg_model_embed_window(const reg_model_t *model, const char *const *texts, size_t n,
                           size_t max_tokens, const atomic_bool *stop, float *out_vectors);

/**
 * Tokenizes one NUL-terminated text the way the model sees it: [CLS], WordPiece ids, [SEP],
 * truncated to min(ids_cap, reg_model_max_tokens()) ids. ids (borrowed) must hold ids_cap >= 2
 * entries; *n_ids receives the count written.
 */
int reg_model_tokenize(const reg_model_t *model, const char *text, int32_t *ids, size_t ids_cap,
                       size_t *n_ids);

/**
 * Sets how many threads OpenBLAS uses for each matrix product, for the whole process. Call it
 * once at start-up, before any embedding runs. One is right when embeddings run on a thread
 * pool (each worker then uses one core); the OpenBLAS default is one thread per core.
 */
void reg_model_set_blas_threads(int threads);

/* Where reg_model_find_installed() looks, after the folder the build found (see
 * registry/CMakeLists.txt, PTC_MODEL_DIR): $XDG_DATA_HOME (or ~/.local/share), then
 * /usr/local/share and /usr/share, each followed by this relative path. */
#define REG_MODEL_INSTALLED_SUBDIR "ptc-mcp/models/all-MiniLM-L6-v2"

/**
 * Finds an installed model folder (one holding config.json): first the one the build was
 * configured with, then the REG_MODEL_INSTALLED_SUBDIR places. Writes its path into dir
 * (borrowed, size bytes). Returns REG_MODEL_ENOENT when none exists, REG_MODEL_EINVAL when a
 * path does not fit. Reads the environment: call it before starting threads that change it.
 */
int reg_model_find_installed(char *dir, size_t size);

/* ---- end model ---- */

#endif /* PTC_REGISTRY_MODEL_H */
