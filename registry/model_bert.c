/*
 * model_bert.c - the BERT encoder behind reg_model_*: configuration, weights and the forward
 * pass (embeddings, self-attention layers, pooling, L2 normalisation).
 *
 * Texts of one call are packed back to back without padding: the per-token layers (projections,
 * feed-forward, LayerNorm) run as one matrix product over every token of a chunk, and attention
 * runs per text, so no token ever attends to another text and no mask is needed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "internal.h"
#include "model_internal.h"

enum activation { ACT_GELU_ERF, ACT_GELU_TANH, ACT_RELU };

/*
 * One linear layer, y = x W^T + b, in the form the chosen path multiplies. On the FP32 path w
 * is either the transposed copy [in, out] row-major (transposed) or the tensor as stored
 * ([out, in], PyTorch's layout): with the copy OpenBLAS multiplies without transposing while it
 * packs, which measured 15-30% faster for the [T, 384] x [384, 1152 or 1536] products (and the
 * same for [T, 1536] x [1536, 384], which therefore stays as stored, saving the copy). On the
 * BF16 path w is NULL and packed holds the weight (model_gemm.c).
 */
typedef struct linear_w {
    const float *w;
    float *copy; /* the transposed copy w points at (owned by the model's list), else NULL */
    bool transposed;
    model_bf16w_t packed;
    const float *b; /* [out] */
    size_t in, out;
} linear_w_t;

typedef struct layer {
    linear_w_t qkv;  /* query, key and value side by side so one product makes all three */
    linear_w_t ao;   /* attention output projection [H, H] */
    linear_w_t up;   /* feed-forward up [I, H] */
    linear_w_t down; /* feed-forward down [H, I] */
    const float *ln1_g, *ln1_b; /* LayerNorm after attention */
    const float *ln2_g, *ln2_b; /* LayerNorm after the feed-forward block */
} layer_t;

struct reg_model {
    model_tokenizer_t tok;
    model_st_t st;
    size_t hidden, heads, head_dim, inter, n_layers, vocab, max_pos, type_vocab, max_seq;
    float ln_eps;
    enum activation act;
    bool pool_cls;
    bool bf16; /* linear layers through model_gemm_bf16 (chosen at load) */
    const float *word, *pos, *type, *emb_ln_g, *emb_ln_b;
    layer_t *layers;
    /* Tensors converted or copied at load (F16/BF16 widening, unaligned data, stacked QKV). */
    void **owned;
    size_t n_owned, cap_owned;
    char prefix[16]; /* "bert." in checkpoints saved from BertFor* heads, else "" */
    char name[128];
    char dir[4096];
};

/* ---- loading ------------------------------------------------------------------------------ */

static int own(reg_model_t *m, void *p)
{
    if (m->n_owned == m->cap_owned) {
        size_t cap = m->cap_owned ? m->cap_owned * 2 : 64;
        void **n = realloc(m->owned, cap * sizeof *n);
        if (n == NULL) return REG_MODEL_ENOMEM;
        m->owned = n;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return REG_MODEL_OK;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13); /* inf, nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {
        /* Subnormal half: renormalise into a float's exponent range. */
        exp = 113;
        while ((man & 0x400u) == 0) {
            man <<= 1;
            exp--;
        }
        bits = sign | (exp << 23) | ((man & 0x3FFu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/*
 * Finds tensor `name` (after the checkpoint's prefix) with shape [rows] (cols == 0) or
 * [rows, cols] and returns F32 data: the mapping itself when it is F32 and aligned, else a
 * converted copy owned by the model.
 */
static int tensor(reg_model_t *m, const char *name, size_t rows, size_t cols, const float **out,
                  char *errmsg, size_t size)
{
    char full[256];
    model_tensor_t t;
    snprintf(full, sizeof full, "%s%s", m->prefix, name);
    int rc = model_st_find(&m->st, full, &t);
    if (rc == REG_MODEL_ENOENT)
        return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                          "%s has no tensor \"%s\": not a BERT encoder this loader supports",
                          m->st.path, full);
    if (rc != REG_MODEL_OK)
        return model_fail(errmsg, size, rc, "%s: the header entry of \"%s\" is malformed",
                          m->st.path, full);
    bool shape_ok = cols == 0 ? (t.ndim == 1 && t.shape[0] == rows)
                              : (t.ndim == 2 && t.shape[0] == rows && t.shape[1] == cols);
    if (!shape_ok)
        return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                          "%s: tensor \"%s\" has shape [%llu%s%llu], config.json says [%zu, %zu]",
                          m->st.path, full, (unsigned long long)t.shape[0], t.ndim > 1 ? ", " : "",
                          (unsigned long long)(t.ndim > 1 ? t.shape[1] : 0), rows, cols);
    if (t.dtype == MODEL_DT_F32 && ((uintptr_t)t.data % sizeof(float)) == 0) {
        *out = t.data;
        return REG_MODEL_OK;
    }
    if (t.dtype == MODEL_DT_OTHER)
        return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                          "%s: tensor \"%s\" has a dtype other than F32, F16 or BF16", m->st.path,
                          full);
    float *f = malloc((size_t)t.count * sizeof *f);
    if (f == NULL || own(m, f) != REG_MODEL_OK) {
        free(f);
        return model_fail(errmsg, size, REG_MODEL_ENOMEM, "out of memory loading \"%s\"", full);
    }
    const unsigned char *src = t.data;
    for (size_t i = 0; i < t.count; i++) {
        if (t.dtype == MODEL_DT_F32) {
            memcpy(&f[i], src + i * 4, 4);
        } else {
            uint16_t h;
            memcpy(&h, src + i * 2, 2);
            if (t.dtype == MODEL_DT_F16) {
                f[i] = half_to_float(h);
            } else {
                uint32_t bits = (uint32_t)h << 16;
                memcpy(&f[i], &bits, sizeof bits);
            }
        }
    }
    *out = f;
    return REG_MODEL_OK;
}

/* LayerNorm parameters are "weight"/"bias" in current checkpoints, "gamma"/"beta" in old ones. */
static int layer_norm(reg_model_t *m, const char *base, const float **g, const float **b,
                      char *errmsg, size_t size)
{
    char n1[192], n2[192], full[256];
    model_tensor_t t;
    snprintf(full, sizeof full, "%s%s.weight", m->prefix, base);
    bool modern = model_st_find(&m->st, full, &t) != REG_MODEL_ENOENT;
    snprintf(n1, sizeof n1, "%s.%s", base, modern ? "weight" : "gamma");
    snprintf(n2, sizeof n2, "%s.%s", base, modern ? "bias" : "beta");
    int rc = tensor(m, n1, m->hidden, 0, g, errmsg, size);
    return rc != REG_MODEL_OK ? rc : tensor(m, n2, m->hidden, 0, b, errmsg, size);
}

/* dst[c * ld + r] = w[r * cols + c]: writes the [rows, cols] matrix w transposed into columns
 * of a row-major matrix with ld floats a row. */
static void transpose_into(const float *w, size_t rows, size_t cols, float *dst, size_t ld)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            dst[c * ld + r] = w[r * cols + c];
}

/* Makes the layer's product of in inputs and out outputs ready for the chosen path: a packed
 * BF16 weight, or (FP32, transposed) the [in, out] copy linear_set fills. */
static int linear_init(reg_model_t *m, linear_w_t *lw, size_t in, size_t out, bool transposed,
                       const char *what, char *errmsg, size_t size)
{
    lw->in = in;
    lw->out = out;
    lw->transposed = transposed;
    if (m->bf16) {
        if (model_bf16w_init(&lw->packed, in, out) != REG_MODEL_OK)
            return model_fail(errmsg, size, REG_MODEL_ENOMEM, "out of memory packing %s", what);
        return REG_MODEL_OK;
    }
    if (!transposed) return REG_MODEL_OK; /* the mapping's tensor, set by linear_set */
    float *t = malloc(in * out * sizeof *t);
    if (t == NULL || own(m, t) != REG_MODEL_OK) {
        free(t);
        return model_fail(errmsg, size, REG_MODEL_ENOMEM, "out of memory loading %s", what);
    }
    lw->w = lw->copy = t;
    return REG_MODEL_OK;
}

/* Puts rows [out0, out0 + rows) of the weight (as stored, [rows, in]) into lw. */
static void linear_set(linear_w_t *lw, size_t out0, const float *w, size_t rows)
{
    if (lw->packed.data != NULL)
        model_bf16w_set_rows(&lw->packed, out0, w, rows);
    else if (lw->transposed)
        transpose_into(w, rows, lw->in, lw->copy + out0, lw->out);
    else
        lw->w = w; /* out0 == 0, rows == out: the whole tensor */
}

static void linear_free(linear_w_t *lw)
{
    model_bf16w_free(&lw->packed);
}

static int load_layer(reg_model_t *m, size_t i, char *errmsg, size_t size)
{
    layer_t *L = &m->layers[i];
    size_t H = m->hidden, IN = m->inter;
    char name[192], ln[160];
    static const char *const qkv[3] = {"query", "key", "value"};
    int rc;

    float *qkv_b = malloc(3 * H * sizeof(float));
    if (qkv_b == NULL || own(m, qkv_b) != REG_MODEL_OK) {
        free(qkv_b);
        return model_fail(errmsg, size, REG_MODEL_ENOMEM, "out of memory loading layer %zu", i);
    }
    L->qkv.b = qkv_b;
    snprintf(name, sizeof name, "layer %zu's query, key and value", i);
    if ((rc = linear_init(m, &L->qkv, H, 3 * H, true, name, errmsg, size)) != REG_MODEL_OK)
        return rc;
    for (size_t k = 0; k < 3; k++) {
        const float *w, *b;
        snprintf(name, sizeof name, "encoder.layer.%zu.attention.self.%s.weight", i, qkv[k]);
        if ((rc = tensor(m, name, H, H, &w, errmsg, size)) != REG_MODEL_OK) return rc;
        snprintf(name, sizeof name, "encoder.layer.%zu.attention.self.%s.bias", i, qkv[k]);
        if ((rc = tensor(m, name, H, 0, &b, errmsg, size)) != REG_MODEL_OK) return rc;
        /* tensor() set w and b: it returned REG_MODEL_OK (the analyzer loses that) */
        // NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage)
        linear_set(&L->qkv, k * H, w, H);
        memcpy(qkv_b + k * H, b, H * sizeof(float));
    }
    struct {
        const char *prefix;
        size_t in, out;
        bool transposed;
        linear_w_t *lw;
    } plain[] = {
        {"attention.output.dense", H, H, true, &L->ao},
        {"intermediate.dense", H, IN, true, &L->up},
        {"output.dense", IN, H, false, &L->down},
    };
    for (size_t k = 0; k < sizeof plain / sizeof plain[0]; k++) {
        const float *w;
        linear_w_t *lw = plain[k].lw;
        snprintf(name, sizeof name, "encoder.layer.%zu.%s.weight", i, plain[k].prefix);
        if ((rc = linear_init(m, lw, plain[k].in, plain[k].out, plain[k].transposed, name, errmsg,
                              size)) != REG_MODEL_OK ||
            (rc = tensor(m, name, plain[k].out, plain[k].in, &w, errmsg, size)) != REG_MODEL_OK)
            return rc;
        linear_set(lw, 0, w, plain[k].out);
        snprintf(name, sizeof name, "encoder.layer.%zu.%s.bias", i, plain[k].prefix);
        if ((rc = tensor(m, name, plain[k].out, 0, &lw->b, errmsg, size)) != REG_MODEL_OK)
            return rc;
    }
    snprintf(ln, sizeof ln, "encoder.layer.%zu.attention.output.LayerNorm", i);
    rc = layer_norm(m, ln, &L->ln1_g, &L->ln1_b, errmsg, size);
    if (rc != REG_MODEL_OK) return rc;
    snprintf(ln, sizeof ln, "encoder.layer.%zu.output.LayerNorm", i);
    return layer_norm(m, ln, &L->ln2_g, &L->ln2_b, errmsg, size);
}

static bool json_size(const cJSON *obj, const char *key, size_t lo, size_t hi, size_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < (double)lo || v->valuedouble > (double)hi ||
        v->valuedouble != (double)(size_t)v->valuedouble)
        return false;
    *out = (size_t)v->valuedouble;
    return true;
}

static int load_config(reg_model_t *m, char *errmsg, size_t size)
{
    char path[4200];
    cJSON *c = NULL;
    int rc;
    if (model_path(path, sizeof path, m->dir, "config.json") != REG_MODEL_OK)
        return model_fail(errmsg, size, REG_MODEL_EINVAL, "model folder path is too long");
    rc = model_read_json(path, &c, errmsg, size);
    if (rc == REG_MODEL_ENOENT)
        return model_fail(errmsg, size, rc,
                          "%s is missing: %s is not a model folder (it needs config.json, "
                          "vocab.txt and model.safetensors)",
                          path, m->dir);
    if (rc != REG_MODEL_OK) return rc;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "model_type");
    const cJSON *pet = cJSON_GetObjectItemCaseSensitive(c, "position_embedding_type");
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(c, "hidden_act");
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(c, "layer_norm_eps");
    if (cJSON_IsString(type) && strcmp(type->valuestring, "bert") != 0) {
        rc = model_fail(errmsg, size, REG_MODEL_EFORMAT,
                        "%s: model_type \"%s\" is not supported (only \"bert\")", path,
                        type->valuestring);
        goto out;
    }
    if (cJSON_IsString(pet) && strcmp(pet->valuestring, "absolute") != 0) {
        rc = model_fail(errmsg, size, REG_MODEL_EFORMAT,
                        "%s: position_embedding_type \"%s\" is not supported", path,
                        pet->valuestring);
        goto out;
    }
    m->act = ACT_GELU_ERF;
    if (cJSON_IsString(act)) {
        if (strcmp(act->valuestring, "gelu") == 0)
            m->act = ACT_GELU_ERF;
        else if (strcmp(act->valuestring, "gelu_new") == 0 ||
                 strcmp(act->valuestring, "gelu_pytorch_tanh") == 0)
            m->act = ACT_GELU_TANH;
        else if (strcmp(act->valuestring, "relu") == 0)
            m->act = ACT_RELU;
        else {
            rc = model_fail(errmsg, size, REG_MODEL_EFORMAT,
                            "%s: hidden_act \"%s\" is not supported", path, act->valuestring);
            goto out;
        }
    }
    m->ln_eps = 1e-12f;
    if (cJSON_IsNumber(eps) && eps->valuedouble > 0 && eps->valuedouble < 1)
        m->ln_eps = (float)eps->valuedouble;
    m->type_vocab = 2;
    if (!json_size(c, "hidden_size", 1, MODEL_MAX_HIDDEN, &m->hidden) ||
        !json_size(c, "num_hidden_layers", 1, MODEL_MAX_LAYERS, &m->n_layers) ||
        !json_size(c, "num_attention_heads", 1, MODEL_MAX_HIDDEN, &m->heads) ||
        !json_size(c, "intermediate_size", 1, 8 * MODEL_MAX_HIDDEN, &m->inter) ||
        !json_size(c, "vocab_size", 1, REG_MODEL_MAX_VOCAB, &m->vocab) ||
        !json_size(c, "max_position_embeddings", 2, 1u << 20, &m->max_pos) ||
        (cJSON_GetObjectItemCaseSensitive(c, "type_vocab_size") != NULL &&
         !json_size(c, "type_vocab_size", 1, 1024, &m->type_vocab)) ||
        m->hidden % m->heads != 0) {
        rc = model_fail(errmsg, size, REG_MODEL_EFORMAT,
                        "%s: hidden_size, num_hidden_layers, num_attention_heads, "
                        "intermediate_size, vocab_size or max_position_embeddings is missing "
                        "or out of range",
                        path);
        goto out;
    }
    m->head_dim = m->hidden / m->heads;
    rc = REG_MODEL_OK;
out:
    cJSON_Delete(c);
    return rc;
}

/* sentence-transformers' modules.json lists the pipeline; this encoder implements Transformer,
 * Pooling (mean or CLS) and Normalize, and refuses anything else (a Dense head, say) because
 * its vectors would silently differ from the model card's. */
static int load_pooling(reg_model_t *m, char *errmsg, size_t size)
{
    char path[4200];
    char pool_dir[512] = "1_Pooling";
    cJSON *j = NULL;
    int rc;
    if (model_path(path, sizeof path, m->dir, "modules.json") != REG_MODEL_OK)
        return model_fail(errmsg, size, REG_MODEL_EINVAL, "model folder path is too long");
    rc = model_read_json(path, &j, errmsg, size);
    if (rc != REG_MODEL_OK && rc != REG_MODEL_ENOENT) return rc;
    if (j != NULL) {
        const cJSON *mod;
        if (!cJSON_IsArray(j)) {
            cJSON_Delete(j);
            return model_fail(errmsg, size, REG_MODEL_EFORMAT, "%s is not a JSON array", path);
        }
        cJSON_ArrayForEach(mod, j)
        {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(mod, "type");
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(mod, "path");
            const char *t = cJSON_IsString(type) ? type->valuestring : "";
            const char *dot = strrchr(t, '.');
            const char *base = dot ? dot + 1 : t;
            if (strcmp(base, "Pooling") == 0 && cJSON_IsString(p)) {
                snprintf(pool_dir, sizeof pool_dir, "%s", p->valuestring);
            } else if (strcmp(base, "Transformer") != 0 && strcmp(base, "Normalize") != 0) {
                rc = model_fail(errmsg, size, REG_MODEL_EFORMAT,
                                "%s: module \"%s\" is not supported (only Transformer, Pooling "
                                "and Normalize)",
                                path, t);
                cJSON_Delete(j);
                return rc;
            }
        }
        cJSON_Delete(j);
        j = NULL;
    }
    if (strstr(pool_dir, "..") != NULL)
        return model_fail(errmsg, size, REG_MODEL_EFORMAT, "modules.json: bad pooling path");
    char rel[600];
    snprintf(rel, sizeof rel, "%s/config.json", pool_dir);
    if (model_path(path, sizeof path, m->dir, rel) != REG_MODEL_OK)
        return model_fail(errmsg, size, REG_MODEL_EINVAL, "model folder path is too long");
    rc = model_read_json(path, &j, errmsg, size);
    if (rc == REG_MODEL_ENOENT) {
        m->pool_cls = false; /* sentence-transformers' default for a bare BERT folder */
        return REG_MODEL_OK;
    }
    if (rc != REG_MODEL_OK) return rc;
    bool cls = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "pooling_mode_cls_token"));
    bool mean = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "pooling_mode_mean_tokens"));
    /* Mean divided by sqrt(length) is mean pooling up to a scale, which normalising removes. */
    bool sqrt_mean =
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "pooling_mode_mean_sqrt_len_tokens"));
    bool other =
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "pooling_mode_max_tokens")) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "pooling_mode_weightedmean_tokens")) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "pooling_mode_lasttoken"));
    cJSON_Delete(j);
    if (other || (int)cls + (int)mean + (int)sqrt_mean != 1)
        return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                          "%s: only one of CLS or mean pooling is supported", path);
    m->pool_cls = cls;
    return REG_MODEL_OK;
}

static void load_max_seq(reg_model_t *m)
{
    char path[4200];
    cJSON *j = NULL;
    size_t v = 0;
    m->max_seq = 512;
    if (model_path(path, sizeof path, m->dir, "sentence_bert_config.json") == REG_MODEL_OK &&
        model_read_json(path, &j, NULL, 0) == REG_MODEL_OK) {
        if (json_size(j, "max_seq_length", 2, 1u << 20, &v)) m->max_seq = v;
        cJSON_Delete(j);
    }
    if (m->max_seq > m->max_pos) m->max_seq = m->max_pos;
    if (m->max_seq > MODEL_MAX_SEQ) m->max_seq = MODEL_MAX_SEQ;
}

/* The README's first "# title" when it is a plain model name, else the folder's base name. */
static void load_name(reg_model_t *m)
{
    char path[4200];
    char *text = NULL;
    size_t len = 0;
    const char *dir = m->dir;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    size_t b = dl;
    while (b > 0 && dir[b - 1] != '/')
        b--;
    snprintf(m->name, sizeof m->name, "%.*s", (int)(dl - b), dir + b);

    if (model_path(path, sizeof path, dir, "README.md") != REG_MODEL_OK ||
        model_read_file(path, REG_MODEL_MAX_JSON_BYTES, &text, &len) != REG_MODEL_OK)
        return;
    for (char *line = text; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');
        if (strncmp(line, "# ", 2) == 0) {
            char *s = line + 2;
            size_t n = nl ? (size_t)(nl - s) : strlen(s);
            while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' '))
                n--;
            bool plain = n > 0 && n < sizeof m->name;
            for (size_t i = 0; plain && i < n; i++)
                plain = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                        (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.';
            if (plain) snprintf(m->name, sizeof m->name, "%.*s", (int)n, s);
            break;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
}

static int load_weights(reg_model_t *m, char *errmsg, size_t size)
{
    int rc;
    model_tensor_t probe;
    m->prefix[0] = '\0';
    if (model_st_find(&m->st, "embeddings.word_embeddings.weight", &probe) == REG_MODEL_ENOENT &&
        model_st_find(&m->st, "bert.embeddings.word_embeddings.weight", &probe) != REG_MODEL_ENOENT)
        memcpy(m->prefix, "bert.", 6);
    size_t H = m->hidden;
    if ((rc = tensor(m, "embeddings.word_embeddings.weight", m->vocab, H, &m->word, errmsg,
                     size)) != REG_MODEL_OK ||
        (rc = tensor(m, "embeddings.position_embeddings.weight", m->max_pos, H, &m->pos, errmsg,
                     size)) != REG_MODEL_OK ||
        (rc = tensor(m, "embeddings.token_type_embeddings.weight", m->type_vocab, H, &m->type,
                     errmsg, size)) != REG_MODEL_OK ||
        (rc = layer_norm(m, "embeddings.LayerNorm", &m->emb_ln_g, &m->emb_ln_b, errmsg, size)) !=
            REG_MODEL_OK)
        return rc;
    m->layers = calloc(m->n_layers, sizeof *m->layers);
    if (m->layers == NULL) {
        return model_fail(errmsg, size, REG_MODEL_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < m->n_layers; i++)
        if ((rc = load_layer(m, i, errmsg, size)) != REG_MODEL_OK) return rc;
    return REG_MODEL_OK;
}

void reg_model_free(reg_model_t *m)
{
    if (m == NULL) return;
    for (size_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    for (size_t i = 0; m->layers != NULL && i < m->n_layers; i++) {
        linear_free(&m->layers[i].qkv);
        linear_free(&m->layers[i].ao);
        linear_free(&m->layers[i].up);
        linear_free(&m->layers[i].down);
    }
    free(m->layers);
    model_st_close(&m->st);
    model_tokenizer_free(&m->tok);
    free(m);
}

int reg_model_load(const char *dir, reg_model_t **out, char *errmsg, size_t size)
{
    char path[4200];
    char scratch_msg[8];
    int rc;
    reg_model_t *m = NULL;

    if (errmsg == NULL) {
        errmsg = scratch_msg;
        size = sizeof scratch_msg;
    }
    if (size > 0) errmsg[0] = '\0';
    if (out == NULL)
        return model_fail(errmsg, size, REG_MODEL_EINVAL, "reg_model_load: out is NULL");
    *out = NULL;
    if (dir == NULL || dir[0] == '\0')
        return model_fail(errmsg, size, REG_MODEL_EINVAL, "no model folder given");
    if (strlen(dir) >= sizeof m->dir - 64)
        return model_fail(errmsg, size, REG_MODEL_EINVAL, "model folder path is too long");
    m = calloc(1, sizeof *m);
    if (m == NULL) return model_fail(errmsg, size, REG_MODEL_ENOMEM, "out of memory");
    snprintf(m->dir, sizeof m->dir, "%s", dir);

    if ((rc = load_config(m, errmsg, size)) != REG_MODEL_OK) goto fail;
    if ((rc = load_pooling(m, errmsg, size)) != REG_MODEL_OK) goto fail;
    load_max_seq(m);
    load_name(m);
    if ((rc = model_tokenizer_load(&m->tok, dir, errmsg, size)) != REG_MODEL_OK) goto fail;
    if (m->tok.vocab_size > m->vocab) {
        rc = model_fail(errmsg, size, REG_MODEL_EFORMAT,
                        "the vocabulary in %s has %zu tokens but config.json's vocab_size is "
                        "%zu: the files belong to different models",
                        dir, m->tok.vocab_size, m->vocab);
        goto fail;
    }
    (void)model_path(path, sizeof path, dir, "model.safetensors");
    if ((rc = model_st_open(&m->st, path, errmsg, size)) != REG_MODEL_OK) goto fail;

    /* BF16 products where the CPU has them, unless PTC_MODEL_FP32 asks for the FP32 path (to
     * compare the two, or to rule BF16 out when a result looks wrong). */
    const char *fp32 = getenv("PTC_MODEL_FP32");
    m->bf16 =
        model_gemm_bf16_supported() && (fp32 == NULL || fp32[0] == '\0' || strcmp(fp32, "0") == 0);
    if ((rc = load_weights(m, errmsg, size)) != REG_MODEL_OK) goto fail;
    *out = m;
    return REG_MODEL_OK;
fail:
    reg_model_free(m);
    return rc;
}

size_t reg_model_dim(const reg_model_t *m)
{
    return m ? m->hidden : 0;
}

const char *reg_model_name(const reg_model_t *m)
{
    return m ? m->name : "";
}

const char *reg_model_precision(const reg_model_t *m)
{
    return m == NULL ? "" : m->bf16 ? "bf16" : "fp32";
}

size_t reg_model_max_tokens(const reg_model_t *m)
{
    return m ? m->max_seq : 0;
}

int reg_model_tokenize(const reg_model_t *m, const char *text, int32_t *ids, size_t ids_cap,
                       size_t *n_ids)
{
    if (m == NULL || text == NULL || ids == NULL || ids_cap < 2 || n_ids == NULL)
        return REG_MODEL_EINVAL;
    size_t cap = ids_cap < m->max_seq ? ids_cap : m->max_seq;
    return model_tokenizer_encode(&m->tok, text, strlen(text), ids, cap, n_ids);
}

void reg_model_set_blas_threads(int threads)
{
    if (threads >= 1) openblas_set_num_threads(threads);
}

/* ---- forward pass ------------------------------------------------------------------------- */

/* Per-call working memory, sized for the tokens of one chunk. */
typedef struct scratch {
    size_t tokens; /* capacity in tokens */
    float *x;      /* [T, H] hidden states */
    float *qkv;    /* [T, 3H] */
    float *ctx;    /* [T, H] attention output before projection */
    float *tmp;    /* [T, H] */
    float *inter;  /* [T, I] */
    float *scores; /* [S, S] one head's attention matrix */
    float *kt;     /* [d, S] one head's keys, transposed */
    uint16_t *xb;  /* [T, I] a product's input in BF16 (BF16 path only) */
} scratch_t;

static void scratch_free(scratch_t *s)
{
    free(s->x);
    free(s->qkv);
    free(s->ctx);
    free(s->tmp);
    free(s->inter);
    free(s->scores);
    free(s->kt);
    free(s->xb);
    memset(s, 0, sizeof *s);
}

static int scratch_reserve(scratch_t *s, const reg_model_t *m, size_t tokens)
{
    if (tokens <= s->tokens) return REG_MODEL_OK;
    scratch_free(s);
    size_t H = m->hidden;
    s->x = malloc(tokens * H * sizeof(float));
    s->qkv = malloc(tokens * 3 * H * sizeof(float));
    s->ctx = malloc(tokens * H * sizeof(float));
    s->tmp = malloc(tokens * H * sizeof(float));
    s->inter = malloc(tokens * m->inter * sizeof(float));
    /* Rows of scores and keys are padded to a multiple of 8 floats (attend_head). */
    size_t s8 = (m->max_seq + 7) & ~(size_t)7;
    s->scores = malloc(m->max_seq * s8 * sizeof(float));
    s->kt = malloc(m->head_dim * s8 * sizeof(float));
    size_t widest = m->inter > H ? m->inter : H;
    s->xb = m->bf16 ? malloc(model_gemm_bf16_scratch(tokens, widest) * sizeof(uint16_t)) : NULL;
    if (!s->x || !s->qkv || !s->ctx || !s->tmp || !s->inter || !s->scores || !s->kt ||
        (m->bf16 && !s->xb)) {
        scratch_free(s);
        return REG_MODEL_ENOMEM;
    }
    s->tokens = tokens;
    return REG_MODEL_OK;
}

/* y[T, out] = x[T, in] * W^T + b through the path the model chose at load. */
static void linear(const linear_w_t *lw, const float *x, size_t T, uint16_t *xb, float *y)
{
    if (lw->packed.data != NULL) {
        model_gemm_bf16(x, T, &lw->packed, lw->b, xb, y);
        return;
    }
    for (size_t r = 0; r < T; r++)
        memcpy(y + r * lw->out, lw->b, lw->out * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, lw->transposed ? CblasNoTrans : CblasTrans, (int)T,
                (int)lw->out, (int)lw->in, 1.0f, x, (int)lw->in, lw->w,
                lw->transposed ? (int)lw->out : (int)lw->in, 1.0f, y, (int)lw->out);
}

/* x = LayerNorm(x + r) row by row; the sums run in double to keep 384-wide rows exact enough. */
static void add_layer_norm(float *x, const float *r, size_t T, size_t H, const float *g,
                           const float *b, float eps)
{
    for (size_t t = 0; t < T; t++) {
        float *row = x + t * H;
        const float *res = r ? r + t * H : NULL;
        double sum = 0;
        for (size_t i = 0; i < H; i++) {
            if (res) row[i] += res[i];
            sum += (double)row[i];
        }
        double mean = sum / (double)H;
        double var = 0;
        for (size_t i = 0; i < H; i++) {
            double d = (double)row[i] - mean;
            var += d * d;
        }
        float inv = (float)(1.0 / sqrt(var / (double)H + (double)eps));
        float fm = (float)mean;
        for (size_t i = 0; i < H; i++)
            row[i] = (row[i] - fm) * inv * g[i] + b[i];
    }
}

/*
 * exp and erf written out so that the loops over them vectorise: glibc's erff and expf are
 * calls the compiler cannot vectorise, and took 16% of the encoder's time between them.
 */

/* e^x to about 1 ulp: x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor series to r^7
 * (remainder below 6e-9), 2^n put into the exponent bits. Inputs below -87 give e^-87
 * (~1.6e-38) and above 88 give e^88, which softmax and erf never come near. */
static inline float exp_approx(float x)
{
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    /* Adding and subtracting 1.5 * 2^23 rounds to the nearest integer without a call. */
    const float round = 12582912.0f;
    float n = (x * 1.44269504f + round) - round;
    /* ln 2 in two parts, the first with few mantissa bits so that n * hi is exact. */
    float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* erf(x) by Abramowitz and Stegun 7.1.26: absolute error below 1.5e-7 everywhere, which is
 * float rounding for GELU's 0.5 x (1 + erf(x / sqrt 2)). */
static inline float erf_approx(float x)
{
    float a = x < 0.0f ? -x : x;
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    float y = 1.0f - p * t * exp_approx(-a * a);
    return x < 0.0f ? -y : y;
}

REG_HOT static void activate(float *v, size_t n, enum activation act)
{
    const float inv_sqrt2 = 0.70710678118654752f;
    const float sqrt_2_over_pi = 0.79788456080286536f;
    switch (act) {
    case ACT_GELU_ERF:
        for (size_t i = 0; i < n; i++)
            v[i] = 0.5f * v[i] * (1.0f + erf_approx(v[i] * inv_sqrt2));
        break;
    case ACT_GELU_TANH:
        for (size_t i = 0; i < n; i++) {
            float x = v[i];
            v[i] = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
        }
        break;
    case ACT_RELU:
        for (size_t i = 0; i < n; i++)
            v[i] = v[i] > 0.0f ? v[i] : 0.0f;
        break;
    }
}

/* Softmax of each of n rows of n scores, rows ld floats apart. */
REG_HOT static void softmax_rows(float *s, size_t T, size_t ld)
{
    for (size_t r = 0; r < T; r++) {
        float *row = s + r * ld;
        /* Maximum and sum in eight lanes, each in order, combined at the end: one running
         * value would wait on every comparison's or addition's latency. */
        float m8[8], s8[8] = {0};
        for (size_t l = 0; l < 8; l++)
            m8[l] = row[0];
        size_t c = 0;
        for (; c + 8 <= T; c += 8)
            for (size_t l = 0; l < 8; l++)
                m8[l] = row[c + l] > m8[l] ? row[c + l] : m8[l];
        float mx = row[0];
        for (size_t l = 0; l < 8; l++)
            mx = m8[l] > mx ? m8[l] : mx;
        for (; c < T; c++)
            mx = row[c] > mx ? row[c] : mx;
        for (c = 0; c < T; c++)
            row[c] = exp_approx(row[c] - mx);
        for (c = 0; c + 8 <= T; c += 8)
            for (size_t l = 0; l < 8; l++)
                s8[l] += row[c + l];
        float sum = 0.0f;
        for (size_t l = 0; l < 8; l++)
            sum += s8[l];
        for (; c < T; c++)
            sum += row[c];
        float inv = 1.0f / sum;
        for (c = 0; c < T; c++)
            row[c] *= inv;
    }
}

/* Eight float lanes: the compiler maps them to one AVX or two SSE registers without
 * -ffast-math, since each lane's sum keeps its order. */
typedef float v8f __attribute__((vector_size(32)));

/* a += x * p[0..8); through pointers, since a vector return value would depend on the ABI. */
static inline void fma8(v8f *a, float x, const float *p)
{
    v8f v;
    memcpy(&v, p, sizeof v);
    *a += x * v;
}

/*
 * One head of self-attention over one text of n tokens: ctx = softmax(scale Q K^T) V, where Q,
 * K and V are [n, d] slices of rows ld floats apart and ctx rows are ldc apart. Written out
 * rather than as two sgemm calls: at n ~ 70 and d = 32, OpenBLAS spends more time packing
 * these small strided operands than multiplying. Keys are copied transposed (kt, [d, n8] with
 * n8 = n rounded up to 8, zero padded) so that eight scores are one vector of sums.
 */
REG_HOT static void attend_head(const float *Q, const float *K, const float *V, size_t ld, size_t n,
                                size_t d, float scale, float *scores, float *kt, float *ctx,
                                size_t ldc)
{
    const size_t n8 = (n + 7) & ~(size_t)7;
    for (size_t k = 0; k < d; k++) {
        for (size_t j = 0; j < n; j++)
            kt[k * n8 + j] = K[j * ld + k];
        for (size_t j = n; j < n8; j++)
            kt[k * n8 + j] = 0.0f;
    }
    /* Four independent sums at a time: one alone would wait on each addition's latency. */
    for (size_t i = 0; i < n; i++) {
        const float *qi = Q + i * ld;
        float *row = scores + i * n8;
        size_t jb = 0;
        for (; jb + 32 <= n8; jb += 32) {
            v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (size_t k = 0; k < d; k++) {
                const float q = qi[k] * scale, *kr = kt + k * n8 + jb;
                fma8(&a0, q, kr);
                fma8(&a1, q, kr + 8);
                fma8(&a2, q, kr + 16);
                fma8(&a3, q, kr + 24);
            }
            memcpy(row + jb, &a0, sizeof a0);
            memcpy(row + jb + 8, &a1, sizeof a1);
            memcpy(row + jb + 16, &a2, sizeof a2);
            memcpy(row + jb + 24, &a3, sizeof a3);
        }
        for (; jb < n8; jb += 8) {
            v8f acc = {0};
            for (size_t k = 0; k < d; k++)
                fma8(&acc, qi[k] * scale, kt + k * n8 + jb);
            memcpy(row + jb, &acc, sizeof acc);
        }
    }
    softmax_rows(scores, n, n8);
    for (size_t i = 0; i < n; i++) {
        float *out = ctx + i * ldc;
        const float *p = scores + i * n8;
        size_t k0 = 0;
        for (; k0 + 32 <= d; k0 += 32) {
            v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (size_t j = 0; j < n; j++) {
                const float *vj = V + j * ld + k0;
                fma8(&a0, p[j], vj);
                fma8(&a1, p[j], vj + 8);
                fma8(&a2, p[j], vj + 16);
                fma8(&a3, p[j], vj + 24);
            }
            memcpy(out + k0, &a0, sizeof a0);
            memcpy(out + k0 + 8, &a1, sizeof a1);
            memcpy(out + k0 + 16, &a2, sizeof a2);
            memcpy(out + k0 + 24, &a3, sizeof a3);
        }
        for (; k0 + 8 <= d; k0 += 8) {
            v8f acc = {0};
            for (size_t j = 0; j < n; j++)
                fma8(&acc, p[j], V + j * ld + k0);
            memcpy(out + k0, &acc, sizeof acc);
        }
        for (size_t k = k0; k < d; k++) {
            float sum = 0.0f;
            for (size_t j = 0; j < n; j++)
                sum += p[j] * V[j * ld + k];
            out[k] = sum;
        }
    }
}

static bool stopped(const atomic_bool *stop)
{
    return stop != NULL && atomic_load_explicit(stop, memory_order_relaxed);
}

/* Runs the encoder over ns texts packed in ids (seq_off/seq_len) and writes ns unit vectors.
 * Returns false, leaving out unfinished, when *stop is set (checked before each layer). */
static bool forward(const reg_model_t *m, scratch_t *s, const int32_t *ids, size_t T,
                    const size_t *seq_off, const size_t *seq_len, size_t ns,
                    const atomic_bool *stop, float *out)
{
    size_t H = m->hidden, d = m->head_dim, H3 = 3 * H;
    float scale = 1.0f / sqrtf((float)d);

    for (size_t q = 0; q < ns; q++)
        for (size_t p = 0; p < seq_len[q]; p++) {
            size_t t = seq_off[q] + p;
            const float *w = m->word + (size_t)ids[t] * H;
            const float *pe = m->pos + p * H;
            float *row = s->x + t * H;
            for (size_t i = 0; i < H; i++)
                row[i] = w[i] + pe[i] + m->type[i]; /* token type 0: single-segment input */
        }
    add_layer_norm(s->x, NULL, T, H, m->emb_ln_g, m->emb_ln_b, m->ln_eps);

    for (size_t l = 0; l < m->n_layers; l++) {
        if (stopped(stop)) return false;
        const layer_t *L = &m->layers[l];
        linear(&L->qkv, s->x, T, s->xb, s->qkv);
        for (size_t q = 0; q < ns; q++) {
            size_t n = seq_len[q];
            const float *base = s->qkv + seq_off[q] * H3;
            for (size_t h = 0; h < m->heads; h++) {
                const float *Q = base + h * d, *K = base + H + h * d, *V = base + 2 * H + h * d;
                attend_head(Q, K, V, H3, n, d, scale, s->scores, s->kt,
                            s->ctx + seq_off[q] * H + h * d, H);
            }
        }
        linear(&L->ao, s->ctx, T, s->xb, s->tmp);
        add_layer_norm(s->tmp, s->x, T, H, L->ln1_g, L->ln1_b, m->ln_eps);
        linear(&L->up, s->tmp, T, s->xb, s->inter);
        activate(s->inter, T * m->inter, m->act);
        linear(&L->down, s->inter, T, s->xb, s->x);
        add_layer_norm(s->x, s->tmp, T, H, L->ln2_g, L->ln2_b, m->ln_eps);
    }

    for (size_t q = 0; q < ns; q++) {
        float *v = out + q * H;
        const float *first = s->x + seq_off[q] * H;
        if (m->pool_cls) {
            memcpy(v, first, H * sizeof(float));
        } else {
            memset(v, 0, H * sizeof(float));
            for (size_t p = 0; p < seq_len[q]; p++)
                for (size_t i = 0; i < H; i++)
                    v[i] += first[p * H + i];
        }
        double norm = 0;
        for (size_t i = 0; i < H; i++)
            norm += (double)v[i] * (double)v[i];
        float inv = (float)(1.0 / (sqrt(norm) > 1e-12 ? sqrt(norm) : 1e-12));
        for (size_t i = 0; i < H; i++)
            v[i] *= inv;
    }
    return true;
}

int reg_model_embed(const reg_model_t *m, const char *const *texts, size_t n, float *out)
{
    return reg_model_embed_stop(m, texts, n, NULL, out);
}

int reg_model_embed_stop(const reg_model_t *m, const char *const *texts, size_t n,
                         const atomic_bool *stop, float *out)
{
    return reg_model_embed_window(m, texts, n, 0, stop, out);
}

int reg_model_embed_window(const reg_model_t *m, const char *const *texts, size_t n,
                           size_t max_tokens, const atomic_bool *stop, float *out)
{
    if (m == NULL || (n > 0 && (texts == NULL || out == NULL)) || max_tokens == 1)
        return REG_MODEL_EINVAL;
    /* The model's own window unless a smaller one is asked for. */
    const size_t window = max_tokens == 0 || max_tokens > m->max_seq ? m->max_seq : max_tokens;
    for (size_t i = 0; i < n; i++)
        if (texts[i] == NULL) return REG_MODEL_EINVAL;
    if (n == 0) return REG_MODEL_OK;

    /* Every text takes at least [CLS] and [SEP], which bounds the texts of a chunk. */
    enum { MAX_SEQS = MODEL_CHUNK_TOKENS / 2 };
    int32_t *ids = malloc(MODEL_CHUNK_TOKENS * sizeof *ids);
    size_t *seq_off = malloc(MAX_SEQS * sizeof *seq_off);
    size_t *seq_len = malloc(MAX_SEQS * sizeof *seq_len);
    scratch_t s = {0};
    int rc = REG_MODEL_OK;
    size_t i = 0;
    if (ids == NULL || seq_off == NULL || seq_len == NULL) {
        rc = REG_MODEL_ENOMEM;
        goto out;
    }
    while (i < n) {
        if (stopped(stop)) {
            rc = REG_MODEL_ECANCELED;
            goto out;
        }
        size_t T = 0, ns = 0, first = i;
        /* A chunk closes when the next text might not fit whole (window <= chunk). */
        while (i < n && ns < MAX_SEQS && MODEL_CHUNK_TOKENS - T >= window) {
            size_t len = 0;
            rc = model_tokenizer_encode(&m->tok, texts[i], strlen(texts[i]), ids + T, window, &len);
            if (rc != REG_MODEL_OK) goto out;
            seq_off[ns] = T;
            seq_len[ns] = len;
            T += len;
            ns++;
            i++;
        }
        if ((rc = scratch_reserve(&s, m, T)) != REG_MODEL_OK) goto out;
        if (!forward(m, &s, ids, T, seq_off, seq_len, ns, stop, out + first * m->hidden)) {
            rc = REG_MODEL_ECANCELED;
            goto out;
        }
    }
out:
    scratch_free(&s);
    free(ids);
    free(seq_off);
    free(seq_len);
    return rc;
}
