/* index.c - normalised vectors in one contiguous matrix; top-k by dot product. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct reg_index {
    size_t dim;
    reg_index_storage_t storage;
    float *m;     /* REG_INDEX_F32: cap * dim floats, row-major */
    int8_t *q;    /* REG_INDEX_Q8: cap * dim bytes, row-major ... */
    float *scale; /* ... and one scale per row: value = q * scale */
    size_t cap;   /* rows every array above holds (at least rows.n) */
    reg__rows_t rows;
};

int reg_index_new(size_t dim, reg_index_storage_t storage, reg_index_t **out)
{
    if (out == NULL) return REG_EINVAL;
    *out = NULL;
    if (dim == 0 || dim > REG_DIM_MAX) return REG_EDIM;
    if (storage != REG_INDEX_F32 && storage != REG_INDEX_Q8) return REG_EINVAL;
    reg_index_t *ix = calloc(1, sizeof *ix);
    if (ix == NULL) return REG_ENOMEM;
    ix->dim = dim;
    ix->storage = storage;
    *out = ix;
    return REG_OK;
}

void reg_index_free(reg_index_t *ix)
{
    if (ix == NULL) return;
    reg__rows_free(&ix->rows);
    free(ix->m);
    free(ix->q);
    free(ix->scale);
    free(ix);
}

/* Symmetric 8-bit quantisation with one scale per vector: the largest magnitude maps to 127.
 * For unit vectors the dot-product error is around 1e-3, far below score gaps that matter. */
static float quantize(const float *v, size_t dim, int8_t *out)
{
    float mx = 0;
    for (size_t i = 0; i < dim; i++)
        mx = fmaxf(mx, fabsf(v[i]));
    if (mx == 0) {
        memset(out, 0, dim);
        return 0;
    }
    float inv = 127.0f / mx;
    for (size_t i = 0; i < dim; i++)
        out[i] = (int8_t)lrintf(v[i] * inv);
    return mx / 127.0f;
}

/* Makes room for need rows in the vector arrays. Each array is grown on its own and ix->cap
 * only moves once all are large enough, so a failure leaves a consistent index. */
static int grow(reg_index_t *ix, size_t need)
{
    if (ix->storage == REG_INDEX_F32)
        return ptc_array_reserve(&ix->m, &ix->cap, need, ix->dim * sizeof *ix->m, REG_CATALOG_MAX);
    size_t cap_q = ix->cap, cap_scale = ix->cap;
    int rc = ptc_array_reserve(&ix->q, &cap_q, need, ix->dim * sizeof *ix->q, REG_CATALOG_MAX);
    if (rc == 0)
        rc = ptc_array_reserve(&ix->scale, &cap_scale, need, sizeof *ix->scale, REG_CATALOG_MAX);
    /* Grown from the same capacity to the same need under the same cap, the two agree. */
    if (rc == 0) ix->cap = cap_q;
    return rc;
}

int reg_index_add(reg_index_t *ix, const char *id, const char *server, const char *category,
                  const float *vec)
{
    if (ix == NULL || id == NULL || server == NULL || vec == NULL) return REG_EINVAL;
    if (ix->rows.n >= REG_CATALOG_MAX) return REG_ETOOBIG;
    for (size_t i = 0; i < ix->dim; i++)
        if (!isfinite(vec[i])) return REG_EINVAL;
    size_t row;
    int rc = reg__rows_add(&ix->rows, id, server, category, &row);
    if (rc < 0) return rc;
    if (grow(ix, row + 1) < 0) {
        size_t moved;
        reg__rows_remove(&ix->rows, row, &moved);
        return REG_ENOMEM;
    }
    double norm2 = 0;
    for (size_t i = 0; i < ix->dim; i++)
        norm2 += (double)vec[i] * (double)vec[i];
    float inv = norm2 > 0 ? (float)(1.0 / sqrt(norm2)) : 0.0f;
    if (ix->storage == REG_INDEX_F32) {
        float *dst = ix->m + row * ix->dim;
        for (size_t i = 0; i < ix->dim; i++)
            dst[i] = vec[i] * inv;
    } else {
        /* Scale is per row, so quantising the unnormalised vector and folding the norm into
         * the scale gives the same bytes as normalising first. */
        ix->scale[row] = quantize(vec, ix->dim, ix->q + row * ix->dim) * inv;
    }
    return REG_OK;
}

static void remove_row(reg_index_t *ix, size_t row)
{
    size_t from;
    reg__rows_remove(&ix->rows, row, &from);
    if (from == row) return;
    if (ix->storage == REG_INDEX_F32) {
        memcpy(ix->m + row * ix->dim, ix->m + from * ix->dim, ix->dim * sizeof(float));
    } else {
        memcpy(ix->q + row * ix->dim, ix->q + from * ix->dim, ix->dim);
        ix->scale[row] = ix->scale[from];
    }
}

int reg_index_remove(reg_index_t *ix, const char *id)
{
    size_t row;
    if (ix == NULL || id == NULL) return REG_EINVAL;
    if (!reg__map_get(&ix->rows.by_id, id, &row)) return REG_ENOENT;
    remove_row(ix, row);
    return REG_OK;
}

size_t reg_index_remove_server(reg_index_t *ix, const char *server)
{
    if (ix == NULL || server == NULL) return 0;
    long s = reg__rows_name(&ix->rows, server);
    if (s < 0) return 0;
    size_t removed = 0;
    /* Walking backwards, the row moved into a hole has already been looked at. */
    for (size_t i = ix->rows.n; i-- > 0;) {
        if ((long)ix->rows.server[i] == s) {
            remove_row(ix, i);
            removed++;
        }
    }
    return removed;
}

size_t reg_index_count(const reg_index_t *ix)
{
    return ix ? ix->rows.n : 0;
}

size_t reg_index_dim(const reg_index_t *ix)
{
    return ix ? ix->dim : 0;
}

size_t reg_index_memory(const reg_index_t *ix)
{
    if (ix == NULL) return 0;
    size_t per_row =
        ix->storage == REG_INDEX_F32 ? ix->dim * sizeof(float) : ix->dim + sizeof(float);
    return sizeof *ix + ix->cap * per_row + reg__rows_memory(&ix->rows);
}

bool reg_index_contains(const reg_index_t *ix, const char *id)
{
    return ix != NULL && id != NULL && reg__map_get(&ix->rows.by_id, id, NULL);
}

int reg_index_get_vector(const reg_index_t *ix, const char *id, float *out)
{
    size_t row;
    if (ix == NULL || id == NULL || out == NULL) return REG_EINVAL;
    if (!reg__map_get(&ix->rows.by_id, id, &row)) return REG_ENOENT;
    if (ix->storage == REG_INDEX_F32) {
        memcpy(out, ix->m + row * ix->dim, ix->dim * sizeof *out);
    } else {
        for (size_t i = 0; i < ix->dim; i++)
            out[i] = ix->q[row * ix->dim + i] * ix->scale[row];
    }
    return REG_OK;
}

/* Eight lanes of independent partial sums: the compiler maps them to SIMD registers (two SSE
 * or one AVX) without -ffast-math, because no reassociation of one sum is needed. */
typedef float v8f __attribute__((vector_size(32)));

REG_HOT static float dot(const float *a, const float *b, size_t n)
{
    v8f acc0 = {0}, acc1 = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v8f x0, y0, x1, y1;
        memcpy(&x0, a + i, sizeof x0);
        memcpy(&y0, b + i, sizeof y0);
        memcpy(&x1, a + i + 8, sizeof x1);
        memcpy(&y1, b + i + 8, sizeof y1);
        acc0 += x0 * y0;
        acc1 += x1 * y1;
    }
    acc0 += acc1;
    float s = 0;
    for (int l = 0; l < 8; l++)
        s += acc0[l];
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* The 8-bit scan takes the query widened to 16 bits once per search, so each row costs one
 * sign extension and one multiply-add of pairs (pmaddwd) per 16 bytes. Products of two
 * values in [-127, 127] summed over REG_DIM_MAX terms stay far inside int32. */
static int32_t dot_q8_c(const int16_t *q, const int8_t *row, size_t n)
{
    int32_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += (int32_t)q[i] * (int32_t)row[i];
    return s;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define REG_HAVE_AVX2_KERNEL 1

__attribute__((target("avx2"))) static int32_t dot_q8_avx2(const int16_t *q, const int8_t *row,
                                                           size_t n)
{
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i r0 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(row + i)));
        __m256i r1 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(row + i + 16)));
        __m256i q0 = _mm256_loadu_si256((const __m256i *)(const void *)(q + i));
        __m256i q1 = _mm256_loadu_si256((const __m256i *)(const void *)(q + i + 16));
        acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(r0, q0));
        acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(r1, q1));
    }
    acc0 = _mm256_add_epi32(acc0, acc1);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc0), _mm256_extracti128_si256(acc0, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    int32_t s = _mm_cvtsi128_si32(s4);
    for (; i < n; i++)
        s += (int32_t)q[i] * (int32_t)row[i];
    return s;
}
#endif

int reg_index_search(const reg_index_t *ix, const float *query, size_t k,
                     const reg_filter_t *filter, reg_hit_t *hits)
{
    if (ix == NULL || query == NULL || (k > 0 && hits == NULL)) return REG_EINVAL;
    if (k > REG_TOPK_MAX) return REG_ETOOBIG;
    if (k == 0 || ix->rows.n == 0) return 0;
    reg__where_t w;
    reg__where_resolve(&ix->rows, filter, &w);
    if (w.server == -2 || w.category == -2) return 0;
    reg__cand_t heap[REG_TOPK_MAX];
    reg__topk_t t = {.heap = heap, .k = k, .ids = ix->rows.ids};
    const int filtered = w.server != -1 || w.category != -1;
    int8_t qq[REG_DIM_MAX];
    int16_t qw[REG_DIM_MAX];
    float qscale = 0;
    int32_t (*dot_q8)(const int16_t *, const int8_t *, size_t) = dot_q8_c;
    if (ix->storage == REG_INDEX_Q8) {
        for (size_t i = 0; i < ix->dim; i++)
            if (!isfinite(query[i])) return REG_EINVAL;
        qscale = quantize(query, ix->dim, qq);
        for (size_t i = 0; i < ix->dim; i++)
            qw[i] = qq[i];
#ifdef REG_HAVE_AVX2_KERNEL
        if (__builtin_cpu_supports("avx2")) dot_q8 = dot_q8_avx2;
#endif
    }
    for (size_t r = 0; r < ix->rows.n; r++) {
        if (filtered && !reg__where_keeps(&ix->rows, &w, r)) continue;
        float s;
        if (ix->storage == REG_INDEX_F32)
            s = dot(query, ix->m + r * ix->dim, ix->dim);
        else
            s = (float)dot_q8(qw, ix->q + r * ix->dim, ix->dim) * qscale * ix->scale[r];
        if (s < w.min_score) continue;
        /* Most rows lose to the current k-th best: skip the heap call for them. */
        if (t.n == t.k && s < t.heap[0].score) continue;
        reg__topk_push(&t, s, r);
    }
    return (int)reg__topk_finish(&t, &ix->rows, hits);
}
