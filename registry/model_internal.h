/*
 * model_internal.h - shared by the registry's model_*.c files only (not part of the public API).
 */
#ifndef PTC_REGISTRY_MODEL_INTERNAL_H
#define PTC_REGISTRY_MODEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "registry.h"

/* Longest sequence any model may use, whatever its config says: bounds the attention scratch
 * (scores are seq * seq floats per call). */
#define MODEL_MAX_SEQ 1024
/* Tokens run through the encoder together; texts are packed without padding up to this.
 * Products of 1024 rows already run at OpenBLAS's full speed, and a chunk this size bounds how
 * long a stop request waits (one layer of one chunk, reg_model_embed_stop). */
#define MODEL_CHUNK_TOKENS 1024
/* Bound on a WordPiece token's length in characters (BERT's max_input_chars_per_word cap). */
#define MODEL_MAX_WORD_CHARS 1000
/* Largest config/layer numbers accepted from config.json. */
#define MODEL_MAX_LAYERS 64
#define MODEL_MAX_HIDDEN 8192

/* ---- errors --------------------------------------------------------------------------- */

/** Formats a message into errmsg (may be NULL) and returns err, for one-line error returns. */
int model_fail(char *errmsg, size_t size, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/**
 * Reads a whole file of at most cap bytes. On success *data is a NUL-terminated malloc'd buffer
 * the caller frees, *len its length. Returns REG_MODEL_ENOENT when the file does not exist.
 */
int model_read_file(const char *path, size_t cap, char **data, size_t *len);

/** Joins dir and name into buf; returns REG_MODEL_EINVAL when it does not fit. */
int model_path(char *buf, size_t size, const char *dir, const char *name);

/** Reads and parses a JSON file; *json is freed with cJSON_Delete. ENOENT when absent. */
int model_read_json(const char *path, cJSON **json, char *errmsg, size_t size);

/* ---- Unicode tables (model_unicode_tables.c, generated) -------------------------------- */

enum model_uclass {
    MODEL_U_OTHER = 0,
    MODEL_U_DROP = 1,  /* control or format character: removed by BERT's text cleaning */
    MODEL_U_SPACE = 2, /* white space: separates words */
    MODEL_U_PUNCT = 3, /* punctuation: a token of its own */
    MODEL_U_MARK = 4,  /* non-spacing mark: removed when accents are stripped */
    MODEL_U_CJK = 5,   /* CJK ideograph: a token of its own */
};

typedef struct model_urun {
    uint32_t start; /* first code point of a run of one class */
    uint8_t cls;
} model_urun_t;

typedef struct model_umap_row {
    uint32_t cp;  /* code point that changes */
    uint16_t off; /* its replacement: seq[off .. off + len) */
    uint8_t len;
} model_umap_row_t;

extern const char model_unicode_version[];
extern const model_urun_t model_class_runs[];
extern const size_t model_class_run_count;
extern const model_umap_row_t model_map_strip_lower_rows[];
extern const size_t model_map_strip_lower_count;
extern const uint32_t *const model_map_strip_lower_seq;
extern const model_umap_row_t model_map_lower_rows[];
extern const size_t model_map_lower_count;
extern const uint32_t *const model_map_lower_seq;
extern const model_umap_row_t model_map_strip_rows[];
extern const size_t model_map_strip_count;
extern const uint32_t *const model_map_strip_seq;

/* ---- tokenizer (model_tokenizer.c) ---------------------------------------------------- */

typedef struct model_vocab_entry {
    uint32_t off; /* token text: strings + off, len bytes */
    uint32_t len;
    int32_t id;
} model_vocab_entry_t;

typedef struct model_tokenizer {
    char *strings;                /* all token texts, back to back */
    model_vocab_entry_t *entries; /* one per token */
    size_t n_entries;
    uint32_t *slots; /* open-addressing hash of entry index + 1 (0 = empty) */
    size_t n_slots;  /* power of two */
    size_t longest;  /* bytes of the longest token, "##" included */
    size_t vocab_size;
    int32_t cls_id, sep_id, unk_id;
    char prefix[8]; /* continuing-subword prefix, "##" */
    size_t prefix_len;
    size_t max_word_chars; /* longer words become [UNK] */
    bool lowercase, strip_accents, split_cjk, clean_text;
} model_tokenizer_t;

/**
 * Loads the vocabulary and normaliser settings from dir (vocab.txt and/or tokenizer.json,
 * tokenizer_config.json). On failure frees what it built and fills errmsg.
 */
int model_tokenizer_load(model_tokenizer_t *tok, const char *dir, char *errmsg, size_t size);
void model_tokenizer_free(model_tokenizer_t *tok);

/**
 * Writes [CLS] ids [SEP] for text (text_len bytes, borrowed) into ids (cap >= 2 entries),
 * truncating the word pieces so that the total fits cap. *n receives the count.
 */
int model_tokenizer_encode(const model_tokenizer_t *tok, const char *text, size_t text_len,
                           int32_t *ids, size_t cap, size_t *n);

/* ---- safetensors (model_safetensors.c) ------------------------------------------------ */

typedef enum model_dtype {
    MODEL_DT_F32,
    MODEL_DT_F16,
    MODEL_DT_BF16,
    MODEL_DT_OTHER,
} model_dtype_t;

#define MODEL_ST_MAX_DIMS 4

typedef struct model_tensor {
    model_dtype_t dtype;
    int ndim;
    uint64_t shape[MODEL_ST_MAX_DIMS];
    uint64_t count;   /* elements */
    const void *data; /* inside the mapping */
} model_tensor_t;

typedef struct model_st {
    void *map;
    size_t map_len;
    const unsigned char *data; /* start of the tensor data area */
    size_t data_len;
    cJSON *header;
    char path[4096];
} model_st_t;

/** Maps and validates a safetensors file. On failure nothing stays open and errmsg is set. */
int model_st_open(model_st_t *st, const char *path, char *errmsg, size_t size);
void model_st_close(model_st_t *st);

/** Looks a tensor up; REG_MODEL_ENOENT when absent, EFORMAT when its entry is malformed. */
int model_st_find(const model_st_t *st, const char *name, model_tensor_t *t);

/** Says that the len bytes at p, if they lie in the mapping, will not be read again: the whole
 *  pages among them leave the process's resident memory (a later read would fault them back in
 *  from the page cache, so this is never wrong, only slower). */
void model_st_drop(const model_st_t *st, const void *p, size_t len);

/* ---- BF16 linear layers (model_gemm.c) ----------------------------------------------- */

/* A [out, in] weight rounded to BF16 and packed for model_gemm_bf16 (layout in model_gemm.c). */
typedef struct model_bf16w {
    uint16_t *data; /* owned: a mapping of its own, page-aligned, not inherited by a fork */
    size_t bytes;   /* the mapping's length */
    size_t in, out; /* the product's inner and output sizes */
    size_t kp;      /* pairs of inputs, (in + 1) / 2 */
    size_t panels;  /* groups of 32 output columns */
} model_bf16w_t;

/** True when this CPU (and OS) runs AVX-512 BF16, so model_gemm_bf16 may be called. */
bool model_gemm_bf16_supported(void);

/** Allocates a zeroed packed weight for [out, in]; REG_MODEL_ENOMEM or EINVAL (a size 0). */
int model_bf16w_init(model_bf16w_t *w, size_t in, size_t out);
void model_bf16w_free(model_bf16w_t *w);

/** bytes of zeroed, page-aligned memory in a mapping of its own that a fork leaves out of the
 *  child (MADV_DONTFORK): for the weights the load lays out, which a forked child (that only
 *  execs) never reads, so that a fork need not copy their page tables. NULL on ENOMEM. */
void *model_weights_alloc(size_t bytes);
/** Frees what model_weights_alloc gave (bytes as asked); NULL allowed. */
void model_weights_free(void *p, size_t bytes);

/** Packs rows (n_rows rows of w->in floats, PyTorch's [out, in] layout, borrowed) as the
 * weight's output columns out0 .. out0 + n_rows - 1. */
void model_bf16w_set_rows(model_bf16w_t *w, size_t out0, const float *rows, size_t n_rows);

/** BF16 elements of the scratch model_gemm_bf16 needs for tokens rows of in inputs. */
size_t model_gemm_bf16_scratch(size_t tokens, size_t in);

/**
 * y[T, out] = x[T, in] W^T + bias (bias: out floats). xb is scratch of
 * model_gemm_bf16_scratch(T, in) elements. Only when model_gemm_bf16_supported().
 */
void model_gemm_bf16(const float *x, size_t T, const model_bf16w_t *w, const float *bias,
                     uint16_t *xb, float *y);

#endif /* PTC_REGISTRY_MODEL_INTERNAL_H */
