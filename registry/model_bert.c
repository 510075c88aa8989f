/*
 * model_bert.c - the forward pass of the BERT encoder behind reg_model_* (embeddings,
 * self-attention layers, pooling, L2 normalisation): the hot loops, compiled with the options
 * registry/CMakeLists.txt gives them. Loading the model is model_bert_load.c.
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

#include "model_bert_internal.h"

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
