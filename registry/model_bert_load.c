/*
 * model_bert_load.c - loading the BERT encoder behind reg_model_*: config.json and the
 * sentence-transformers files beside it (modules.json, its pooling, sentence_bert_config.json),
 * the tokenizer, the safetensors weights converted to F32 where they are stored otherwise and
 * laid out for the chosen product path (BF16 packed, or FP32 transposed or as stored); freeing
 * it, and its getters. The forward pass is model_bert.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cblas.h>

#include "model_bert_internal.h"

/* ---- loading ------------------------------------------------------------------------------ */

/* What own() is called for at most: per layer its fused query, key and value bias and 16
 * tensors converted to F32 (q, k, v, three dense layers: a weight and a bias each; two layer
 * norms: two each); for the embeddings 3 tables and a layer norm's two. */
#define LAYER_OWNED 17
#define EMBED_OWNED 5
_Static_assert(PTC_CAP_MODEL_OWNED >= MODEL_MAX_LAYERS * LAYER_OWNED + EMBED_OWNED,
               "a model's F32 copies fit in PTC_CAP_MODEL_OWNED");

static int own(reg_model_t *m, void *p)
{
    if (ptc_array_reserve(&m->owned, &m->cap_owned, m->n_owned + 1, sizeof *m->owned,
                          PTC_CAP_MODEL_OWNED) < 0)
        return REG_MODEL_ENOMEM;
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
    float *t = model_weights_alloc(in * out * sizeof *t);
    if (t == NULL)
        return model_fail(errmsg, size, REG_MODEL_ENOMEM, "out of memory loading %s", what);
    lw->w = lw->copy = t;
    return REG_MODEL_OK;
}

/* Puts rows [out0, out0 + rows) of the weight (as stored, [rows, in]) into lw. A packed or
 * transposed weight is a copy: the stored one is not read again, so its pages of the mapping
 * leave the resident set (42 MB for all-MiniLM-L6-v2 on the BF16 path, which reads them all
 * once to pack them). */
static void linear_set(reg_model_t *m, linear_w_t *lw, size_t out0, const float *w, size_t rows)
{
    if (lw->packed.data != NULL)
        model_bf16w_set_rows(&lw->packed, out0, w, rows);
    else if (lw->transposed)
        transpose_into(w, rows, lw->in, lw->copy + out0, lw->out);
    else
        lw->w = w; /* out0 == 0, rows == out: the whole tensor */
    if (lw->w != w) model_st_drop(&m->st, w, rows * lw->in * sizeof *w);
}

static void linear_free(linear_w_t *lw)
{
    model_bf16w_free(&lw->packed);
    if (lw->copy != NULL) model_weights_free(lw->copy, lw->in * lw->out * sizeof *lw->copy);
    lw->copy = NULL;
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
        linear_set(m, &L->qkv, k * H, w, H);
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
        linear_set(m, lw, 0, w, plain[k].out);
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
#ifdef __GLIBC__
    /* The load's temporaries (the tokenizer's and the config's JSON trees, a few MB) were freed
     * below what stays: give their pages back rather than keep them resident in the heap. */
    (void)malloc_trim(0);
#endif
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
