/*
 * model_gemm.c - the encoder's linear layers in BF16 (AVX-512 BF16, vdpbf16ps) for CPUs that
 * have it: y[T, out] = x[T, in] W^T + b with W packed once at load and x rounded to BF16 per
 * call, the products summed in FP32.
 *
 * vdpbf16ps does 32 multiply-adds per instruction where an FP32 FMA does 16, which is the whole
 * point: OpenBLAS's sgemm already runs near the FP32 peak, and Debian's OpenBLAS has no
 * cblas_sbgemm. Everything here is compiled for the BF16 target by function attributes only,
 * so the rest of the program stays baseline x86-64 and model_gemm_bf16_supported() decides at
 * run time (the FP32 path in model_bert.c is the fallback).
 *
 * Layout. A weight is cut into panels of NR = 32 output columns; within a panel, for each pair
 * of inputs (k, k + 1), the 32 columns' two weights sit side by side: [kk][j][k & 1]. One
 * 64-byte load is then the second operand of vdpbf16ps for 16 columns, and the first operand
 * is one pair x[t, k..k+1] broadcast (the row-major BF16 copy of x already has the pairs
 * adjacent). Inputs are padded to an even count and columns to a multiple of NR with zeros.
 *
 * Each output element is its bias plus the pairs' products in increasing k, whatever tile it
 * falls in: a text's vector does not depend on the texts packed with it.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GEMM_HAVE_BF16 1
/* The sanitizers are off inside the kernel: their checks on each of its loads made a sanitized
 * build's encoder twice as slow as on the FP32 path, past the bound a stop request is tested
 * with. Its addresses all derive from the sizes model_bf16w_init and the caller's T set; the
 * unit test checks the results and that nothing past the output is written. */
#define GEMM_TARGET                                                                                \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"),                                 \
                   no_sanitize("address", "undefined")))
#endif

enum {
    NR = 32, /* output columns of a panel: two vectors of 16 */
    MR = 12, /* rows of the largest tile: 24 accumulators of the 32 vector registers */
    /* Rows of x run against each panel before the next panel: their BF16 copy (MC * in * 2
     * bytes, 288 KiB at in = 1536) stays in the 1 MiB L2 while the panels stream by. */
    MC = 96,
};

bool model_gemm_bf16_supported(void)
{
#ifdef GEMM_HAVE_BF16
    /* libgcc's and compiler-rt's checks include the OS's saving of the AVX-512 state. */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

/* Round to nearest even, as vcvtneps2bf16 does for x; NaN stays NaN (quieted). */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

int model_bf16w_init(model_bf16w_t *w, size_t in, size_t out)
{
    memset(w, 0, sizeof *w);
    if (in == 0 || out == 0) return REG_MODEL_EINVAL;
    w->in = in;
    w->out = out;
    w->kp = (in + 1) / 2;
    w->panels = (out + NR - 1) / NR;
    size_t bytes = w->panels * w->kp * NR * 2 * sizeof(uint16_t);
    /* page-aligned (the kernel wants 64-byte rows), zero-filled (the padding columns and the
     * odd input's partner) */
    w->data = model_weights_alloc(bytes);
    if (w->data == NULL) return REG_MODEL_ENOMEM;
    w->bytes = bytes;
    return REG_MODEL_OK;
}

void model_bf16w_free(model_bf16w_t *w)
{
    model_weights_free(w->data, w->bytes);
    memset(w, 0, sizeof *w);
}

/* The server forks each launcher it starts (uv_spawn), and copying the page tables of the
 * model's 21 MB of BF16 weights (all-MiniLM-L6-v2; 28 MB of transposed FP32 ones) was most of
 * that fork's cost. */
void *model_weights_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED)
        (void)madvise(p, bytes, MADV_DONTFORK); /* an optimisation: without it, forks copy more */
    return p != MAP_FAILED ? p : NULL;
}

void model_weights_free(void *p, size_t bytes)
{
    if (p != NULL) munmap(p, bytes);
}

void model_bf16w_set_rows(model_bf16w_t *w, size_t out0, const float *rows, size_t n_rows)
{
    for (size_t r = 0; r < n_rows; r++) {
        size_t n = out0 + r, p = n / NR, j = n % NR;
        uint16_t *panel = w->data + p * w->kp * NR * 2;
        for (size_t k = 0; k < w->in; k++)
            panel[((k / 2) * NR + j) * 2 + (k & 1)] = to_bf16(rows[r * w->in + k]);
    }
}

size_t model_gemm_bf16_scratch(size_t tokens, size_t in)
{
    return tokens * ((in + 1) & ~(size_t)1);
}

#ifdef GEMM_HAVE_BF16

/* The first min(n, 16) lanes. */
static inline __mmask16 mask16(size_t n)
{
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
}

/* x[T, in] floats to xb[T, 2 kp] BF16, the odd input's partner zero. */
GEMM_TARGET static void convert_rows(const float *x, size_t T, size_t in, uint16_t *xb)
{
    const size_t ld = (in + 1) & ~(size_t)1;
    for (size_t t = 0; t < T; t++) {
        const float *src = x + t * in;
        uint16_t *dst = xb + t * ld;
        for (size_t k = 0; k < ld; k += 32) {
            size_t left = in - k; /* k < ld <= in + 1, so k <= in */
            __mmask16 lo = mask16(left), hi = mask16(left > 16 ? left - 16 : 0);
            __m512 a = _mm512_maskz_loadu_ps(lo, src + k);
            __m512 b = _mm512_maskz_loadu_ps(hi, src + k + 16);
            __m512bh v = _mm512_cvtne2ps_pbh(b, a);
            size_t store = ld - k >= 32 ? 32 : ld - k;
            __mmask32 sm = store >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << store) - 1);
            _mm512_mask_storeu_epi16(dst + k, sm, (__m512i)v);
        }
    }
}

/*
 * One tile: rows [0, mr) of a (BF16, lda a row) against one panel b, bias (b0, b1) added first,
 * columns past the weight's end masked off the store. Inlined with a constant mr, so that the
 * accumulators are registers.
 */
GEMM_TARGET static inline __attribute__((always_inline)) void
tile(const uint16_t *a, size_t lda, const uint16_t *b, size_t kp, __m512 b0, __m512 b1, float *c,
     size_t ldc, __mmask16 m0, __mmask16 m1, const int mr)
{
    __m512 acc0[MR], acc1[MR];
    for (int i = 0; i < mr; i++) {
        acc0[i] = b0;
        acc1[i] = b1;
    }
    for (size_t kk = 0; kk < kp; kk++) {
        __m512bh w0 = (__m512bh)_mm512_load_si512((const void *)(b + kk * NR * 2));
        __m512bh w1 = (__m512bh)_mm512_load_si512((const void *)(b + kk * NR * 2 + 32));
        for (int i = 0; i < mr; i++) {
            int32_t pair;
            memcpy(&pair, a + (size_t)i * lda + kk * 2, sizeof pair);
            __m512bh x = (__m512bh)_mm512_set1_epi32(pair);
            acc0[i] = _mm512_dpbf16_ps(acc0[i], x, w0);
            acc1[i] = _mm512_dpbf16_ps(acc1[i], x, w1);
        }
    }
    for (int i = 0; i < mr; i++) {
        _mm512_mask_storeu_ps(c + (size_t)i * ldc, m0, acc0[i]);
        _mm512_mask_storeu_ps(c + (size_t)i * ldc + 16, m1, acc1[i]);
    }
}

GEMM_TARGET static void gemm(const float *x, size_t T, const model_bf16w_t *w, const float *bias,
                             uint16_t *xb, float *y)
{
    const size_t lda = 2 * w->kp, N = w->out;
    convert_rows(x, T, w->in, xb);
    for (size_t m0 = 0; m0 < T; m0 += MC) {
        size_t m1 = m0 + MC < T ? m0 + MC : T;
        for (size_t p = 0; p < w->panels; p++) {
            size_t n0 = p * NR, cols = N - n0 < NR ? N - n0 : NR;
            __mmask16 k0 = mask16(cols), k1 = mask16(cols > 16 ? cols - 16 : 0);
            __m512 bv0 = _mm512_maskz_loadu_ps(k0, bias + n0);
            __m512 bv1 = _mm512_maskz_loadu_ps(k1, bias + n0 + 16);
            const uint16_t *panel = w->data + p * w->kp * NR * 2;
            size_t r = m0;
            /* Smaller tiles for the rows left over: the sums are the same in any tile. */
            while (r < m1) {
                size_t left = m1 - r;
                const uint16_t *a = xb + r * lda;
                float *c = y + r * N + n0;
                if (left >= 12) {
                    tile(a, lda, panel, w->kp, bv0, bv1, c, N, k0, k1, 12);
                    r += 12;
                } else if (left >= 8) {
                    tile(a, lda, panel, w->kp, bv0, bv1, c, N, k0, k1, 8);
                    r += 8;
                } else if (left >= 4) {
                    tile(a, lda, panel, w->kp, bv0, bv1, c, N, k0, k1, 4);
                    r += 4;
                } else {
                    tile(a, lda, panel, w->kp, bv0, bv1, c, N, k0, k1, 1);
                    r += 1;
                }
            }
        }
    }
}

void model_gemm_bf16(const float *x, size_t T, const model_bf16w_t *w, const float *bias,
                     uint16_t *xb, float *y)
{
    gemm(x, T, w, bias, xb, y);
}

#else

void model_gemm_bf16(const float *x, size_t T, const model_bf16w_t *w, const float *bias,
                     uint16_t *xb, float *y)
{
    /* model_gemm_bf16_supported() is false here, so the encoder never packs a weight. */
    (void)x, (void)T, (void)w, (void)bias, (void)xb, (void)y;
    abort();
}

#endif
