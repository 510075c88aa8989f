/*
 * Tests of the in-process sentence encoder (registry/model_*.c).
 *
 * Two kinds of model:
 * - a tiny synthetic BERT written by the test itself (always runs): loading, F16/BF16 weights,
 *   tokenizer rules, errors for missing and broken files, batching, threads;
 * - the real model in $PTC_TEST_MODEL_DIR (all-MiniLM-L6-v2) checked against
 *   tests/fixtures/model/reference.json, produced by sentence-transformers. These tests fail
 *   when the variable is unset, unless PTC_TEST_ALLOW_NO_MODEL=1 says to skip them.
 * ctest runs the program twice: as the CPU chooses (BF16 products where it has AVX-512 BF16)
 * and with PTC_MODEL_FP32=1 (OpenBLAS), so that both paths meet the same tolerances.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../test_util.h"

#include <math.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "model_internal.h" /* the BF16 kernel, tested against a double-precision reference */
#include "registry.h"

#ifndef PTC_MODEL_REFERENCE
#error "PTC_MODEL_REFERENCE must name tests/fixtures/model/reference.json"
#endif

/* ---- helpers ------------------------------------------------------------------------------ */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf != NULL) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (nb == NULL) {
            free(buf);
            buf = NULL;
        }
        buf = nb;
    }
    fclose(f);
    if (buf != NULL) {
        buf[n] = '\0';
        if (len) *len = n;
    }
    return buf;
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static char *make_tmpdir(void)
{
    return tu_temp_dir("ptc-model-test");
}

/* Removes dir and what is in it, and frees the path. */
static void remove_tree(char *dir)
{
    tu_remove_tree(dir);
    free(dir);
}

static double cosine(const float *a, const float *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * (double)b[i];
        aa += (double)a[i] * (double)a[i];
        bb += (double)b[i] * (double)b[i];
    }
    return ab / (sqrt(aa) * sqrt(bb));
}

static double norm(const float *a, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * (double)a[i];
    return sqrt(s);
}

/* ---- a tiny synthetic BERT ---------------------------------------------------------------- */

#define TINY_H     8
#define TINY_HEADS 2
#define TINY_I     16
#define TINY_L     2
#define TINY_POS   16

static const char *const tiny_vocab[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world",  "##s", "list", "files",
    ",",     "!",     "_",     "cafe",  "un",     "##aff", "##able", "中",  "a",    "ᄒ",
    "ᅡ",    "##ᆫ",  "##ᅡ",  "ᆫ",    "e",      "##e",   "x",      "##x", ".",    "é",
};
#define TINY_VOCAB (sizeof tiny_vocab / sizeof tiny_vocab[0])

typedef enum { DT_F32, DT_F16, DT_BF16 } dt_t;

/* Deterministic weights that F16 and BF16 hold exactly (7 significant bits at most), so a model
 * written in either dtype must embed exactly as the F32 one does. */
static float tiny_weight(size_t tensor, size_t i)
{
    uint32_t x = (uint32_t)(tensor * 7919u + i * 104729u + 12345u);
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    int k = (int)(x % 255u) - 127;
    return (float)k / 64.0f;
}

static uint16_t to_half(float f)
{
    /* Exact for the k/64 values above: normal halves, no rounding needed. */
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    uint32_t sign = (b >> 16) & 0x8000u;
    if ((b & 0x7FFFFFFFu) == 0) return (uint16_t)sign;
    int exp = (int)((b >> 23) & 0xFF) - 127 + 15;
    return (uint16_t)(sign | ((uint32_t)exp << 10) | ((b >> 13) & 0x3FFu));
}

typedef struct tdesc {
    char name[96];
    size_t rows, cols;
    bool ones; /* LayerNorm gain: keep activations sane */
} tdesc_t;

static size_t tiny_tensors(tdesc_t *t)
{
    size_t n = 0;
#define T(nm, r, c, o)                                                                             \
    do {                                                                                           \
        snprintf(t[n].name, sizeof t[n].name, "%s", nm);                                           \
        t[n].rows = r;                                                                             \
        t[n].cols = c;                                                                             \
        t[n].ones = o;                                                                             \
        n++;                                                                                       \
    } while (0)
    T("embeddings.word_embeddings.weight", TINY_VOCAB, TINY_H, false);
    T("embeddings.position_embeddings.weight", TINY_POS, TINY_H, false);
    T("embeddings.token_type_embeddings.weight", 2, TINY_H, false);
    T("embeddings.LayerNorm.weight", TINY_H, 0, true);
    T("embeddings.LayerNorm.bias", TINY_H, 0, false);
    for (int l = 0; l < TINY_L; l++) {
        char b[96];
        static const char *const lin[][2] = {
            {"attention.self.query", "HH"}, {"attention.self.key", "HH"},
            {"attention.self.value", "HH"}, {"attention.output.dense", "HH"},
            {"intermediate.dense", "IH"},   {"output.dense", "HI"},
        };
        for (size_t k = 0; k < 6; k++) {
            size_t r = lin[k][1][0] == 'H' ? TINY_H : TINY_I;
            size_t c = lin[k][1][1] == 'H' ? TINY_H : TINY_I;
            snprintf(b, sizeof b, "encoder.layer.%d.%s.weight", l, lin[k][0]);
            T(b, r, c, false);
            snprintf(b, sizeof b, "encoder.layer.%d.%s.bias", l, lin[k][0]);
            T(b, r, 0, false);
        }
        snprintf(b, sizeof b, "encoder.layer.%d.attention.output.LayerNorm.weight", l);
        T(b, TINY_H, 0, true);
        snprintf(b, sizeof b, "encoder.layer.%d.attention.output.LayerNorm.bias", l);
        T(b, TINY_H, 0, false);
        snprintf(b, sizeof b, "encoder.layer.%d.output.LayerNorm.weight", l);
        T(b, TINY_H, 0, true);
        snprintf(b, sizeof b, "encoder.layer.%d.output.LayerNorm.bias", l);
        T(b, TINY_H, 0, false);
    }
#undef T
    return n;
}

/* Writes model.safetensors; `skip` names a tensor to leave out, `bad_shape` one to mis-shape. */
/* Old checkpoints (BertForX heads, TF conversions) name tensors "bert.*" and LayerNorm
 * parameters gamma/beta. */
static void legacy_name(char *out, size_t size, const char *name)
{
    const char *ln = strstr(name, ".LayerNorm.");
    if (ln == NULL) {
        snprintf(out, size, "bert.%.100s", name);
        return;
    }
    bool weight = strcmp(ln, ".LayerNorm.weight") == 0;
    snprintf(out, size, "bert.%.*s.LayerNorm.%s", (int)(ln - name), name,
             weight ? "gamma" : "beta");
}

static void write_safetensors_ex(const char *dir, dt_t dt, const char *skip, const char *bad_shape,
                                 bool legacy)
{
    tdesc_t t[64];
    size_t n = tiny_tensors(t);
    size_t esz = dt == DT_F32 ? 4 : 2;
    cJSON *h = cJSON_CreateObject();
    cJSON_AddItemToObject(h, "__metadata__", cJSON_Parse("{\"format\":\"pt\"}"));
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (skip && strcmp(skip, t[i].name) == 0) continue;
        size_t count = t[i].rows * (t[i].cols ? t[i].cols : 1);
        char stored[128];
        if (legacy)
            legacy_name(stored, sizeof stored, t[i].name);
        else
            snprintf(stored, sizeof stored, "%.100s", t[i].name);
        cJSON *e = cJSON_AddObjectToObject(h, stored);
        cJSON_AddStringToObject(e, "dtype", dt == DT_F32 ? "F32" : dt == DT_F16 ? "F16" : "BF16");
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        bool mis = bad_shape && strcmp(bad_shape, t[i].name) == 0;
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)(mis ? 1 : t[i].rows)));
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)(mis         ? count
                                                                : t[i].cols ? t[i].cols
                                                                            : 0)));
        if (t[i].cols == 0 && !mis) cJSON_DeleteItemFromArray(shape, 1);
        cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + count * esz)));
        off += count * esz;
    }
    char *json = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    size_t hl = strlen(json);
    size_t padded = (hl + 7) / 8 * 8;

    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(json, 1, hl, f);
    for (size_t i = hl; i < padded; i++)
        fputc(' ', f);
    free(json);
    for (size_t i = 0; i < n; i++) {
        if (skip && strcmp(skip, t[i].name) == 0) continue;
        size_t count = t[i].rows * (t[i].cols ? t[i].cols : 1);
        for (size_t k = 0; k < count; k++) {
            float v = t[i].ones ? 1.0f + tiny_weight(i, k) / 2.0f : tiny_weight(i, k) / 4.0f;
            if (dt == DT_F32) {
                fwrite(&v, 4, 1, f);
            } else {
                uint32_t b;
                memcpy(&b, &v, 4);
                uint16_t hv = dt == DT_F16 ? to_half(v) : (uint16_t)(b >> 16);
                fwrite(&hv, 2, 1, f);
            }
        }
    }
    assert_int_equal(fclose(f), 0);
}

static void write_safetensors(const char *dir, dt_t dt, const char *skip, const char *bad_shape)
{
    write_safetensors_ex(dir, dt, skip, bad_shape, false);
}

static void write_tiny_config(const char *dir)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"bert\", \"hidden_size\": %d, \"num_hidden_layers\": %d, "
             "\"num_attention_heads\": %d, \"intermediate_size\": %d, \"vocab_size\": %zu, "
             "\"max_position_embeddings\": %d, \"type_vocab_size\": 2, \"layer_norm_eps\": 1e-12, "
             "\"hidden_act\": \"gelu\"}",
             TINY_H, TINY_L, TINY_HEADS, TINY_I, TINY_VOCAB, TINY_POS);
    write_text(dir, "config.json", cfg);
}

/* A complete tiny model folder; the caller removes it with remove_tree. */
static char *make_tiny(dt_t dt)
{
    char *dir = make_tmpdir();
    write_tiny_config(dir);
    char vocab[1024] = "";
    size_t at = 0;
    for (size_t i = 0; i < TINY_VOCAB; i++)
        at += (size_t)snprintf(vocab + at, sizeof vocab - at, "%s\n", tiny_vocab[i]);
    write_text(dir, "vocab.txt", vocab);
    write_safetensors(dir, dt, NULL, NULL);
    return dir;
}

static reg_model_t *load_ok(const char *dir)
{
    reg_model_t *m = NULL;
    char err[512];
    int rc = reg_model_load(dir, &m, err, sizeof err);
    if (rc != REG_MODEL_OK) fail_msg("reg_model_load(%s): %s: %s", dir, reg_strerror(rc), err);
    return m;
}

static void expect_load_error(const char *dir, int want, const char *needle)
{
    reg_model_t *m = (reg_model_t *)(uintptr_t)1;
    char err[512] = "";
    int rc = reg_model_load(dir, &m, err, sizeof err);
    assert_int_equal(rc, want);
    assert_null(m);
    if (strstr(err, needle) == NULL)
        fail_msg("error message \"%s\" does not mention \"%s\"", err, needle);
}

/* ---- synthetic-model tests ---------------------------------------------------------------- */

static void tokenize_expect(const reg_model_t *m, const char *text, const int32_t *want,
                            size_t nwant)
{
    int32_t ids[64];
    size_t n = 0;
    assert_int_equal(reg_model_tokenize(m, text, ids, 64, &n), REG_MODEL_OK);
    if (n != nwant || memcmp(ids, want, n * sizeof *ids) != 0) {
        char got[512] = "";
        for (size_t i = 0; i < n; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids[i]);
        fail_msg("tokenize(\"%s\") gave%s", text, got);
    }
}

static void test_tokenizer_splits_words_punctuation_and_pieces(void **state)
{
    (void)state;
    char *dir = make_tiny(DT_F32);
    reg_model_t *m = load_ok(dir);
    /* [CLS]=2 [SEP]=3 [UNK]=1 hello=5 world=6 ##s=7 list=8 files=9 ,=10 !=11 _=12 */
    tokenize_expect(m, "Hello, WORLDS!", (const int32_t[]){2, 5, 10, 6, 7, 11, 3}, 7);
    tokenize_expect(m, "list_files", (const int32_t[]){2, 8, 12, 9, 3}, 5);
    /* Accents go (NFD, marks dropped), case goes, a lone combining mark goes. */
    tokenize_expect(m, "CAFÉ cafe\xcc\x81", (const int32_t[]){2, 13, 13, 3}, 4);
    /* Greedy longest match with ##, and one unknown piece makes the whole word [UNK]. */
    tokenize_expect(m, "unaffable unaffablez", (const int32_t[]){2, 14, 15, 16, 1, 3}, 6);
    /* CJK ideographs stand alone; Hangul syllables decompose into jamo. */
    tokenize_expect(m, "a中a", (const int32_t[]){2, 18, 17, 18, 3}, 5);
    tokenize_expect(m, "한", (const int32_t[]){2, 19, 22, 21, 3}, 5);
    /* Control characters vanish, tabs and no-break spaces separate, bad UTF-8 is dropped. */
    tokenize_expect(m, "hel\x07lo\tworld\xc2\xa0hello\xff", (const int32_t[]){2, 5, 6, 5, 3}, 5);
    /* Empty text: just the markers. */
    tokenize_expect(m, "", (const int32_t[]){2, 3}, 2);
    reg_model_free(m);
    remove_tree(dir);
}

static void test_tokenizer_turns_overlong_words_into_unk(void **state)
{
    (void)state;
    char *dir = make_tiny(DT_F32);
    reg_model_t *m = load_ok(dir);
    char word[256];
    memset(word, 'x', 100);
    word[100] = '\0';
    int32_t ids[200];
    size_t n = 0;
    assert_int_equal(reg_model_tokenize(m, word, ids, 200, &n), REG_MODEL_OK);
    /* x ##x ##x ...: 100 characters is still a word (truncated to the 16-token window). */
    assert_int_equal(n, TINY_POS);
    assert_int_equal(ids[1], 26);
    assert_int_equal(ids[2], 27);
    memset(word, 'x', 101);
    word[101] = '\0';
    assert_int_equal(reg_model_tokenize(m, word, ids, 200, &n), REG_MODEL_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], 1);
    reg_model_free(m);
    remove_tree(dir);
}

static void test_tokenize_truncates_and_keeps_sep(void **state)
{
    (void)state;
    char *dir = make_tiny(DT_F32);
    reg_model_t *m = load_ok(dir);
    int32_t ids[64];
    size_t n = 0;
    assert_int_equal(reg_model_tokenize(m, "hello world hello world hello", ids, 4, &n),
                     REG_MODEL_OK);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 5);
    assert_int_equal(ids[2], 6);
    assert_int_equal(ids[3], 3);
    /* The model's own window (max_position_embeddings = 16 here) caps a larger buffer. */
    assert_int_equal(reg_model_max_tokens(m), TINY_POS);
    char text[400] = "";
    for (int i = 0; i < 40; i++)
        memcpy(text + 6 * i, "hello ", 7);
    assert_int_equal(reg_model_tokenize(m, text, ids, 64, &n), REG_MODEL_OK);
    assert_int_equal(n, TINY_POS);
    assert_int_equal(ids[TINY_POS - 1], 3);
    assert_int_equal(reg_model_tokenize(m, text, ids, 1, &n), REG_MODEL_EINVAL);
    reg_model_free(m);
    remove_tree(dir);
}

static void test_tiny_model_embeds_unit_vectors_and_batches_like_singles(void **state)
{
    (void)state;
    char *dir = make_tiny(DT_F32);
    reg_model_t *m = load_ok(dir);
    assert_int_equal(reg_model_dim(m), TINY_H);
    const char *texts[] = {"hello world", "list files", "", "hello, worlds!", "中 a 한"};
    enum { N = sizeof texts / sizeof texts[0] };
    float batch[N * TINY_H], one[TINY_H];
    assert_int_equal(reg_model_embed(m, texts, N, batch), REG_MODEL_OK);
    for (size_t i = 0; i < N; i++) {
        assert_true(fabs(norm(batch + i * TINY_H, TINY_H) - 1.0) < 1e-5);
        assert_int_equal(reg_model_embed(m, &texts[i], 1, one), REG_MODEL_OK);
        for (size_t k = 0; k < TINY_H; k++)
            assert_true(fabsf(one[k] - batch[i * TINY_H + k]) < 1e-5f);
    }
    /* Different texts give different vectors. */
    assert_true(cosine(batch, batch + TINY_H, TINY_H) < 0.9999);
    reg_model_free(m);
    remove_tree(dir);
}

/* A window cuts each text like the tokenizer's cap does: the long text seen through 4 tokens
 * is [CLS] hello world [SEP], the same ids as the short one; 0 and anything past the model's
 * own window change nothing. */
static void test_embed_window_truncates_each_text(void **state)
{
    (void)state;
    char *dir = make_tiny(DT_F32);
    reg_model_t *m = load_ok(dir);
    const char *texts[] = {"hello world hello world hello world", "hello world"};
    float full[2 * TINY_H], cut[2 * TINY_H], same[2 * TINY_H];
    assert_int_equal(reg_model_embed(m, texts, 2, full), REG_MODEL_OK);
    assert_int_equal(reg_model_embed_window(m, texts, 2, 4, NULL, cut), REG_MODEL_OK);
    for (size_t k = 0; k < TINY_H; k++) {
        assert_true(fabsf(cut[k] - full[TINY_H + k]) < 1e-6f);
        assert_true(fabsf(cut[TINY_H + k] - full[TINY_H + k]) < 1e-6f);
    }
    assert_true(cosine(full, full + TINY_H, TINY_H) < 0.9999);
    for (size_t w = 0; w <= TINY_POS + 1; w += TINY_POS) {
        assert_int_equal(reg_model_embed_window(m, texts, 2, w, NULL, same), REG_MODEL_OK);
        assert_memory_equal(same, full, sizeof full);
    }
    assert_int_equal(reg_model_embed_window(m, texts, 2, 1, NULL, same), REG_MODEL_EINVAL);
    reg_model_free(m);
    remove_tree(dir);
}

static void test_f16_and_bf16_weights_embed_like_f32(void **state)
{
    (void)state;
    const char *texts[] = {"hello world", "unaffable files!"};
    float want[2 * TINY_H], got[2 * TINY_H];
    char *dir = make_tiny(DT_F32);
    reg_model_t *m = load_ok(dir);
    assert_int_equal(reg_model_embed(m, texts, 2, want), REG_MODEL_OK);
    reg_model_free(m);
    remove_tree(dir);
    for (int dt = DT_F16; dt <= DT_BF16; dt++) {
        dir = make_tiny((dt_t)dt);
        m = load_ok(dir);
        assert_int_equal(reg_model_embed(m, texts, 2, got), REG_MODEL_OK);
        for (size_t k = 0; k < 2 * TINY_H; k++)
            assert_true(fabsf(got[k] - want[k]) < 1e-6f);
        reg_model_free(m);
        remove_tree(dir);
    }
}

/* ---- the BF16 path ------------------------------------------------------------------------ */

/* Round to nearest even, written apart from model_gemm.c's so that the test checks it. */
static double bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t lsb = (u >> 16) & 1u;
    u = (u + 0x7FFFu + lsb) & 0xFFFF0000u;
    float r;
    memcpy(&r, &u, sizeof r);
    return (double)r;
}

/* Products of odd and even widths, widths past and short of a 32-column panel and row counts
 * that use every tile size, against sums in double of the BF16-rounded operands: the kernel
 * may differ from them only by FP32 summation error. Each row also equals the row computed
 * alone, bit for bit, and nothing past y's end is written. */
static void test_bf16_products_match_a_double_reference(void **state)
{
    (void)state;
    if (!model_gemm_bf16_supported()) {
        printf("[ model ] this CPU has no AVX-512 BF16: the BF16 kernel is not run\n");
        skip();
    }
    static const size_t shapes[][3] = {{1, 1, 1},     {13, 7, 33},   {29, 384, 48}, {25, 66, 17},
                                       {110, 40, 64}, {3, 1536, 31}, {200, 33, 100}};
    uint32_t seed = 12345;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t T = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        float *x = malloc(T * in * sizeof *x), *w = malloc(out * in * sizeof *w);
        float *b = malloc(out * sizeof *b), *y = malloc((T * out + 16) * sizeof *y);
        float *one = malloc((out + 16) * sizeof *one);
        uint16_t *xb = malloc(model_gemm_bf16_scratch(T, in) * sizeof *xb);
        assert_true(x && w && b && y && one && xb);
        for (size_t i = 0; i < T * in; i++) {
            seed = seed * 1103515245u + 12345u;
            x[i] = (float)((seed >> 8) & 0xFFFF) / 32768.0f - 1.0f;
        }
        for (size_t i = 0; i < out * in; i++) {
            seed = seed * 1103515245u + 12345u;
            w[i] = ((float)((seed >> 8) & 0xFFFF) / 32768.0f - 1.0f) * 0.1f;
        }
        for (size_t i = 0; i < out; i++)
            b[i] = (float)i * 0.01f - 0.2f;
        for (size_t i = 0; i < 16; i++)
            y[T * out + i] = one[out + i] = 12345.0f;
        model_bf16w_t pw;
        assert_int_equal(model_bf16w_init(&pw, in, out), REG_MODEL_OK);
        /* Packed in two halves, as the query, key and value weights are. */
        model_bf16w_set_rows(&pw, 0, w, out / 2);
        model_bf16w_set_rows(&pw, out / 2, w + (out / 2) * in, out - out / 2);
        model_gemm_bf16(x, T, &pw, b, xb, y);
        for (size_t t = 0; t < T; t++) {
            for (size_t o = 0; o < out; o++) {
                double want = (double)b[o], mag = fabs((double)b[o]);
                for (size_t k = 0; k < in; k++) {
                    double p = bf16_round(x[t * in + k]) * bf16_round(w[o * in + k]);
                    want += p;
                    mag += fabs(p);
                }
                double got = (double)y[t * out + o];
                if (fabs(got - want) > 1e-6 * mag + 1e-7)
                    fail_msg("[%zu x %zu] x [%zu]: y[%zu][%zu] = %.9g, want %.9g", T, in, out, t, o,
                             got, want);
            }
            model_gemm_bf16(x + t * in, 1, &pw, b, xb, one);
            assert_memory_equal(one, y + t * out, out * sizeof *one);
            assert_true(one[out] == 12345.0f);
        }
        for (size_t i = 0; i < 16; i++)
            assert_true(y[T * out + i] == 12345.0f);
        model_bf16w_free(&pw);
        free(x);
        free(w);
        free(b);
        free(y);
        free(one);
        free(xb);
    }
}

/* Loads dir with PTC_MODEL_FP32 set to fp32 (NULL: unset) and restores the variable. */
static reg_model_t *load_with_fp32(const char *dir, const char *fp32)
{
    const char *old = getenv("PTC_MODEL_FP32");
    char *saved = old ? strdup(old) : NULL;
    if (fp32)
        assert_int_equal(setenv("PTC_MODEL_FP32", fp32, 1), 0);
    else
        assert_int_equal(unsetenv("PTC_MODEL_FP32"), 0);
    reg_model_t *m = load_ok(dir);
    if (saved) {
        assert_int_equal(setenv("PTC_MODEL_FP32", saved, 1), 0);
        free(saved);
    } else {
        assert_int_equal(unsetenv("PTC_MODEL_FP32"), 0);
    }
    return m;
}

static void test_precision_follows_the_cpu_and_ptc_model_fp32(void **state)
{
    (void)state;
    char *dir = make_tiny(DT_F32);
    const char *want = model_gemm_bf16_supported() ? "bf16" : "fp32";
    static const struct {
        const char *env;
        bool fp32;
    } cases[] = {{NULL, false}, {"", false}, {"0", false}, {"1", true}, {"yes", true}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        reg_model_t *m = load_with_fp32(dir, cases[i].env);
        assert_string_equal(reg_model_precision(m), cases[i].fp32 ? "fp32" : want);
        reg_model_free(m);
    }
    assert_string_equal(reg_model_precision(NULL), "");
    remove_tree(dir);
}

static void test_legacy_tensor_names_embed_like_current_ones(void **state)
{
    (void)state;
    const char *texts[] = {"hello world", "unaffable files!"};
    float want[2 * TINY_H], got[2 * TINY_H];
    char *dir = make_tiny(DT_F32);
    reg_model_t *m = load_ok(dir);
    assert_int_equal(reg_model_embed(m, texts, 2, want), REG_MODEL_OK);
    reg_model_free(m);
    write_safetensors_ex(dir, DT_F32, NULL, NULL, true);
    m = load_ok(dir);
    assert_int_equal(reg_model_embed(m, texts, 2, got), REG_MODEL_OK);
    assert_memory_equal(got, want, sizeof want);
    reg_model_free(m);
    remove_tree(dir);
}

static void test_pooling_config_is_honoured(void **state)
{
    (void)state;
    const char *texts[] = {"hello world list"};
    float mean[TINY_H], cls[TINY_H];
    char *dir = make_tiny(DT_F32);
    reg_model_t *m = load_ok(dir);
    assert_int_equal(reg_model_embed(m, texts, 1, mean), REG_MODEL_OK);
    reg_model_free(m);

    char pool[1024];
    snprintf(pool, sizeof pool, "%s/1_Pooling", dir);
    assert_int_equal(mkdir(pool, 0700), 0);
    write_text(dir, "modules.json",
               "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":"
               "\"sentence_transformers.models.Transformer\"},{\"idx\":1,\"name\":\"1\","
               "\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}]");
    write_text(dir, "1_Pooling/config.json",
               "{\"word_embedding_dimension\": 8, \"pooling_mode_cls_token\": true, "
               "\"pooling_mode_mean_tokens\": false}");
    m = load_ok(dir);
    assert_int_equal(reg_model_embed(m, texts, 1, cls), REG_MODEL_OK);
    assert_true(cosine(mean, cls, TINY_H) < 0.9999);
    assert_true(fabs(norm(cls, TINY_H) - 1.0) < 1e-5);
    reg_model_free(m);

    /* A module this encoder does not implement is refused, not ignored. */
    write_text(dir, "modules.json",
               "[{\"idx\":0,\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
               "{\"idx\":1,\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"}]");
    expect_load_error(dir, REG_MODEL_EFORMAT, "Dense");
    remove_tree(dir);
}

static void test_missing_files_are_named(void **state)
{
    (void)state;
    expect_load_error("/nonexistent/ptc-model", REG_MODEL_ENOENT, "config.json");

    char *dir = make_tiny(DT_F32);
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(unlink(path), 0);
    expect_load_error(dir, REG_MODEL_ENOENT, "model.safetensors");
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    assert_int_equal(unlink(path), 0);
    expect_load_error(dir, REG_MODEL_ENOENT, "vocab.txt");
    remove_tree(dir);

    reg_model_t *m = NULL;
    assert_int_equal(reg_model_load(NULL, &m, NULL, 0), REG_MODEL_EINVAL);
    assert_int_equal(reg_model_load("", &m, NULL, 0), REG_MODEL_EINVAL);
}

static void test_broken_files_are_named(void **state)
{
    (void)state;
    char *dir = make_tiny(DT_F32);

    write_text(dir, "config.json", "{\"hidden_size\": 8,");
    expect_load_error(dir, REG_MODEL_EFORMAT, "config.json");
    write_text(dir, "config.json", "{\"model_type\": \"bert\", \"hidden_size\": 8}");
    expect_load_error(dir, REG_MODEL_EFORMAT, "num_hidden_layers");
    write_text(dir, "config.json", "{\"model_type\": \"t5\"}");
    expect_load_error(dir, REG_MODEL_EFORMAT, "t5");
    write_tiny_config(dir);

    write_safetensors(dir, DT_F32, "encoder.layer.1.output.dense.weight", NULL);
    expect_load_error(dir, REG_MODEL_EFORMAT, "encoder.layer.1.output.dense.weight");
    write_safetensors(dir, DT_F32, NULL, "encoder.layer.0.attention.self.key.weight");
    expect_load_error(dir, REG_MODEL_EFORMAT, "encoder.layer.0.attention.self.key.weight");

    /* Truncated weights: the header promises more bytes than the file has. */
    write_safetensors(dir, DT_F32, NULL, NULL);
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - 100), 0);
    expect_load_error(dir, REG_MODEL_EFORMAT, "model.safetensors");
    /* Garbage: a header length past the end of the file. */
    write_text(dir, "model.safetensors", "\xff\xff\xff\xff\x00\x00\x00\x00{}");
    expect_load_error(dir, REG_MODEL_EFORMAT, "model.safetensors");
    write_text(dir, "model.safetensors", "\x02\x00\x00\x00\x00\x00\x00\x00[]");
    expect_load_error(dir, REG_MODEL_EFORMAT, "model.safetensors");
    write_safetensors(dir, DT_F32, NULL, NULL);

    /* A vocabulary larger than the embedding table would index past it. */
    char vocab[4096] = "";
    for (size_t i = 0; i < TINY_VOCAB + 5; i++)
        snprintf(vocab + strlen(vocab), sizeof vocab - strlen(vocab), "%s\n",
                 i < TINY_VOCAB ? tiny_vocab[i] : "extra");
    write_text(dir, "vocab.txt", vocab);
    expect_load_error(dir, REG_MODEL_EFORMAT, "vocab_size");
    write_text(dir, "vocab.txt", "hello\nworld\n");
    expect_load_error(dir, REG_MODEL_EFORMAT, "[CLS]");
    remove_tree(dir);
}

/* tokenizer.json alone (no vocab.txt) carries the vocabulary and the normaliser settings. */
static void test_tokenizer_json_alone_gives_vocab_and_casing(void **state)
{
    (void)state;
    char *dir = make_tiny(DT_F32);
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    assert_int_equal(unlink(path), 0);
    cJSON *root = cJSON_CreateObject();
    cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(norm, "type", "BertNormalizer");
    cJSON_AddBoolToObject(norm, "lowercase", false);
    cJSON_AddNullToObject(norm, "strip_accents");
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "BertPreTokenizer");
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "WordPiece");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (size_t i = 0; i < TINY_VOCAB; i++)
        cJSON_AddNumberToObject(vocab, tiny_vocab[i], (double)i);
    char *json = cJSON_Print(root);
    write_text(dir, "tokenizer.json", json);
    free(json);

    reg_model_t *m = load_ok(dir);
    /* Cased: "Hello" is not "hello", and accents stay (strip_accents follows lowercase). */
    tokenize_expect(m, "Hello hello, world!", (const int32_t[]){2, 1, 5, 10, 6, 11, 3}, 7);
    tokenize_expect(m, "é e", (const int32_t[]){2, 29, 24, 3}, 4);
    reg_model_free(m);

    /* A normaliser this tokenizer does not implement is refused by name. */
    cJSON_ReplaceItemInObject(norm, "type", cJSON_CreateString("Precompiled"));
    json = cJSON_Print(root);
    write_text(dir, "tokenizer.json", json);
    free(json);
    expect_load_error(dir, REG_MODEL_EFORMAT, "Precompiled");
    cJSON_Delete(root);
    remove_tree(dir);
}

/* Corrupting the safetensors header anywhere must give an error or a model, never a crash
 * (this runs under ASan/UBSan in the sanitizer build). */
static void test_corrupt_safetensors_headers_never_crash(void **state)
{
    (void)state;
    char *dir = make_tiny(DT_F32);
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t len = 0;
    char *orig = slurp(path, &len);
    assert_non_null(orig);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | (unsigned char)orig[i];
    assert_true(hlen + 8 <= len);
    uint32_t seed = 12345;
    size_t loaded = 0;
    for (int round = 0; round < 300; round++) {
        char *buf = malloc(len);
        assert_non_null(buf);
        memcpy(buf, orig, len);
        for (int k = 0; k < 1 + round % 4; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % (size_t)(hlen + 8);
            seed = seed * 1103515245u + 12345u;
            static const char pool[] = "0123456789[]{}\",:-.eE FUBI";
            buf[at] = round % 2 ? (char)(seed >> 16) : pool[(seed >> 16) % (sizeof pool - 1)];
        }
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fwrite(buf, 1, len, f);
        fclose(f);
        free(buf);
        reg_model_t *m = NULL;
        char err[512];
        int rc = reg_model_load(dir, &m, err, sizeof err);
        if (rc == REG_MODEL_OK) {
            float v[TINY_H];
            const char *t = "hello world";
            assert_int_equal(reg_model_embed(m, &t, 1, v), REG_MODEL_OK);
            reg_model_free(m);
            loaded++;
        } else {
            assert_null(m);
            assert_true(strlen(err) > 0);
        }
    }
    printf("[ model ] 300 corrupted headers: %zu still loaded\n", loaded);
    free(orig);
    remove_tree(dir);
}

/* Arbitrary bytes always give [CLS] ... [SEP] with in-vocabulary ids. */
static void test_tokenizer_survives_random_bytes(void **state)
{
    (void)state;
    char *dir = make_tiny(DT_F32);
    reg_model_t *m = load_ok(dir);
    uint32_t seed = 99;
    char text[512];
    int32_t ids[TINY_POS];
    for (int round = 0; round < 2000; round++) {
        size_t n = (size_t)(round % 500);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            text[i] = (char)((seed >> 16) % 255 + 1);
        }
        text[n] = '\0';
        size_t got = 0;
        assert_int_equal(reg_model_tokenize(m, text, ids, TINY_POS, &got), REG_MODEL_OK);
        assert_true(got >= 2 && got <= TINY_POS);
        assert_int_equal(ids[0], 2);
        assert_int_equal(ids[got - 1], 3);
        for (size_t i = 0; i < got; i++)
            assert_true(ids[i] >= 0 && (size_t)ids[i] < TINY_VOCAB);
    }
    reg_model_free(m);
    remove_tree(dir);
}

static void test_bad_arguments_are_refused(void **state)
{
    (void)state;
    char *dir = make_tiny(DT_F32);
    reg_model_t *m = load_ok(dir);
    float v[TINY_H];
    const char *texts[] = {"hello", NULL};
    assert_int_equal(reg_model_embed(m, texts, 2, v), REG_MODEL_EINVAL);
    assert_int_equal(reg_model_embed(NULL, texts, 1, v), REG_MODEL_EINVAL);
    assert_int_equal(reg_model_embed(m, texts, 0, NULL), REG_MODEL_OK);
    assert_int_equal(reg_model_tokenize(m, NULL, (int32_t[4]){0}, 4, &(size_t){0}),
                     REG_MODEL_EINVAL);
    assert_string_equal(reg_strerror(REG_MODEL_ENOENT), "not found");
    reg_model_free(m);
    reg_model_free(NULL);
    remove_tree(dir);
}

static void test_find_installed_looks_in_xdg_data_home(void **state)
{
    (void)state;
    char *xdg = make_tmpdir();
    char path[1024], found[1024];
    const char *parts[] = {"ptc-mcp", "ptc-mcp/models", "ptc-mcp/models/all-MiniLM-L6-v2"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", xdg, parts[i]);
        assert_int_equal(mkdir(path, 0700), 0);
    }
    write_text(path, "config.json", "{}");
    char *old = getenv("XDG_DATA_HOME") ? strdup(getenv("XDG_DATA_HOME")) : NULL;
    assert_int_equal(setenv("XDG_DATA_HOME", xdg, 1), 0);
    assert_int_equal(reg_model_find_installed(found, sizeof found), REG_MODEL_OK);
    /* The folder the build was configured with comes first; either way it holds a config. */
    char cfg[1100];
    snprintf(cfg, sizeof cfg, "%s/config.json", found);
    assert_int_equal(access(cfg, R_OK), 0);
    assert_int_equal(reg_model_find_installed(found, 4), REG_MODEL_EINVAL);
    if (old != NULL)
        setenv("XDG_DATA_HOME", old, 1);
    else
        unsetenv("XDG_DATA_HOME");
    free(old);
    remove_tree(xdg);
}

/* ---- real-model tests ---------------------------------------------------------------------- */

typedef struct real {
    reg_model_t *model;
    cJSON *ref;
} real_t;

static int real_setup(void **state)
{
    const char *dir = getenv("PTC_TEST_MODEL_DIR");
    if (dir == NULL || *dir == '\0') {
        const char *allow = getenv("PTC_TEST_ALLOW_NO_MODEL");
        if (allow != NULL && strcmp(allow, "1") == 0) {
            *state = NULL;
            return 0;
        }
        fprintf(stderr, "PTC_TEST_MODEL_DIR is not set: point it at the all-MiniLM-L6-v2 folder "
                        "(or set PTC_TEST_ALLOW_NO_MODEL=1 to skip the real-model tests)\n");
        return -1;
    }
    real_t *r = calloc(1, sizeof *r);
    char err[512];
    int rc = reg_model_load(dir, &r->model, err, sizeof err);
    if (rc != REG_MODEL_OK) {
        fprintf(stderr, "cannot load %s: %s\n", dir, err);
        free(r);
        return -1;
    }
    char *text = slurp(PTC_MODEL_REFERENCE, NULL);
    r->ref = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (r->ref == NULL) {
        fprintf(stderr, "cannot read %s\n", PTC_MODEL_REFERENCE);
        reg_model_free(r->model);
        free(r);
        return -1;
    }
    *state = r;
    return 0;
}

static int real_teardown(void **state)
{
    real_t *r = *state;
    if (r != NULL) {
        reg_model_free(r->model);
        cJSON_Delete(r->ref);
        free(r);
    }
    return 0;
}

static real_t *real_or_skip(void **state)
{
    if (*state == NULL) skip();
    return *state;
}

static void check_ids(const reg_model_t *m, const cJSON *cases, size_t *checked)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
    {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        const cJSON *want = cJSON_GetObjectItem(c, "ids");
        int32_t ids[1024];
        size_t n = 0;
        assert_int_equal(reg_model_tokenize(m, text, ids, 1024, &n), REG_MODEL_OK);
        bool same = (int)n == cJSON_GetArraySize(want);
        for (size_t i = 0; same && i < n; i++)
            same = ids[i] == cJSON_GetArrayItem(want, (int)i)->valueint;
        if (!same) {
            char got[256] = "";
            for (size_t i = 0; i < n && strlen(got) < 200; i++)
                snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids[i]);
            fail_msg("ids of \"%.60s\" differ from the reference: got%s", text, got);
        }
        (*checked)++;
    }
}

static void test_real_tokenizer_ids_equal_reference(void **state)
{
    real_t *r = real_or_skip(state);
    size_t checked = 0;
    assert_int_equal(reg_model_max_tokens(r->model),
                     (size_t)cJSON_GetObjectItem(r->ref, "max_seq_length")->valueint);
    check_ids(r->model, cJSON_GetObjectItem(r->ref, "sentences"), &checked);
    check_ids(r->model, cJSON_GetObjectItem(r->ref, "tokenizer_only"), &checked);
    assert_true(checked >= 300);
}

static void test_real_embeddings_match_reference(void **state)
{
    real_t *r = real_or_skip(state);
    size_t dim = reg_model_dim(r->model);
    assert_int_equal(dim, (size_t)cJSON_GetObjectItem(r->ref, "dim")->valueint);
    assert_string_equal(reg_model_name(r->model), "all-MiniLM-L6-v2");
    const cJSON *sents = cJSON_GetObjectItem(r->ref, "sentences");
    size_t n = (size_t)cJSON_GetArraySize(sents);
    const char **texts = calloc(n, sizeof *texts);
    float *got = calloc(n * dim, sizeof *got);
    float *want = calloc(dim, sizeof *want);
    assert_non_null(texts);
    assert_non_null(got);
    assert_non_null(want);
    for (size_t i = 0; i < n; i++)
        texts[i] = cJSON_GetObjectItem(cJSON_GetArrayItem(sents, (int)i), "text")->valuestring;
    assert_int_equal(reg_model_embed(r->model, texts, n, got), REG_MODEL_OK);
    double worst = 1.0;
    for (size_t i = 0; i < n; i++) {
        const cJSON *emb = cJSON_GetObjectItem(cJSON_GetArrayItem(sents, (int)i), "embedding");
        assert_int_equal((size_t)cJSON_GetArraySize(emb), dim);
        for (size_t k = 0; k < dim; k++)
            want[k] = (float)cJSON_GetArrayItem(emb, (int)k)->valuedouble;
        double c = cosine(got + i * dim, want, dim);
        if (c < worst) worst = c;
        if (c < 0.999) fail_msg("cosine %.6f < 0.999 for \"%.60s\"", c, texts[i]);
        assert_true(fabs(norm(got + i * dim, dim) - 1.0) < 1e-5);
    }
    printf("[ model ] %zu sentences, min cosine vs sentence-transformers = %.8f\n", n, worst);
    free(texts);
    free(got);
    free(want);
}

/* The BF16 path's vectors against the FP32 path's, on the reference sentences: the bound is
 * what bench/README.md measured over dev2's tool texts (min cosine 0.9999). */
static void test_real_bf16_vectors_stay_close_to_fp32(void **state)
{
    real_t *r = real_or_skip(state);
    const char *dir = getenv("PTC_TEST_MODEL_DIR");
    reg_model_t *fast = load_with_fp32(dir, NULL), *exact = load_with_fp32(dir, "1");
    assert_string_equal(reg_model_precision(exact), "fp32");
    size_t dim = reg_model_dim(fast);
    const cJSON *sents = cJSON_GetObjectItem(r->ref, "sentences");
    size_t n = (size_t)cJSON_GetArraySize(sents);
    const char **texts = calloc(n, sizeof *texts);
    float *a = calloc(n * dim, sizeof *a), *b = calloc(n * dim, sizeof *b);
    assert_true(texts && a && b);
    for (size_t i = 0; i < n; i++)
        texts[i] = cJSON_GetObjectItem(cJSON_GetArrayItem(sents, (int)i), "text")->valuestring;
    assert_int_equal(reg_model_embed(fast, texts, n, a), REG_MODEL_OK);
    assert_int_equal(reg_model_embed(exact, texts, n, b), REG_MODEL_OK);
    double worst = 1.0;
    for (size_t i = 0; i < n; i++) {
        double c = cosine(a + i * dim, b + i * dim, dim);
        worst = c < worst ? c : worst;
        if (c < 0.9999) fail_msg("cosine %.6f < 0.9999 for \"%.60s\"", c, texts[i]);
    }
    printf("[ model ] %s vs fp32: min cosine %.8f over %zu sentences\n", reg_model_precision(fast),
           worst, n);
    reg_model_free(fast);
    reg_model_free(exact);
    free(texts);
    free(a);
    free(b);
}

/* The resident KiB of this process's mapping that starts at addr (/proc/self/smaps), -1 if none. */
static long mapping_rss_kib(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[512];
    bool in = false;
    long rss = -1;
    while (rss < 0 && fgets(line, sizeof line, f) != NULL) {
        char *end;
        unsigned long lo = strtoul(line, &end, 16);
        if (end != line && *end == '-') /* a mapping's first line: LO-HI PERMS ... */
            in = lo == (unsigned long)(uintptr_t)addr;
        else if (in && strncmp(line, "Rss:", 4) == 0)
            rss = strtol(line + 4, NULL, 10);
    }
    fclose(f);
    return rss;
}

static uint64_t sum_bytes(const unsigned char *p, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s = s * 31u + p[i];
    return s;
}

/* model_st_drop takes a tensor's pages out of the resident set (what the load does with each
 * weight it packed or transposed), and a later read still sees the same bytes. */
static void test_real_dropped_weights_leave_rss_and_read_back_the_same(void **state)
{
    (void)real_or_skip(state);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", getenv("PTC_TEST_MODEL_DIR"));
    model_st_t st;
    char why[256];
    assert_int_equal(model_st_open(&st, path, why, sizeof why), REG_MODEL_OK);
    model_tensor_t t;
    assert_int_equal(model_st_find(&st, "encoder.layer.0.intermediate.dense.weight", &t),
                     REG_MODEL_OK);
    size_t len = (size_t)t.count * 4; /* F32 [1536, 384]: 2.25 MiB */
    uint64_t first = sum_bytes(t.data, len);
    long before = mapping_rss_kib(st.map);
    assert_true(before >= (long)(len / 1024) - 8);
    model_st_drop(&st, t.data, len);
    long after = mapping_rss_kib(st.map);
    assert_true(after >= 0 && after < before - (long)(len / 1024) + 16);
    assert_true(sum_bytes(t.data, len) == first);
    /* outside the mapping (a converted copy): nothing happens */
    unsigned char *copy = malloc(len);
    assert_non_null(copy);
    memcpy(copy, t.data, len);
    model_st_drop(&st, copy, len);
    assert_true(sum_bytes(copy, len) == first);
    free(copy);
    printf("[ model ] a dropped 2.25 MiB weight: mapping RSS %ld KiB, then %ld\n", before, after);
    model_st_close(&st);
}

static void test_real_batch_equals_singles(void **state)
{
    real_t *r = real_or_skip(state);
    size_t dim = reg_model_dim(r->model);
    const cJSON *sents = cJSON_GetObjectItem(r->ref, "sentences");
    size_t n = (size_t)cJSON_GetArraySize(sents);
    const char **texts = calloc(n, sizeof *texts);
    float *batch = calloc(n * dim, sizeof *batch);
    float *one = calloc(dim, sizeof *one);
    for (size_t i = 0; i < n; i++)
        texts[i] = cJSON_GetObjectItem(cJSON_GetArrayItem(sents, (int)i), "text")->valuestring;
    assert_int_equal(reg_model_embed(r->model, texts, n, batch), REG_MODEL_OK);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(reg_model_embed(r->model, &texts[i], 1, one), REG_MODEL_OK);
        assert_true(cosine(one, batch + i * dim, dim) > 0.99999);
        /* Packed with others or alone, every component agrees to float rounding. */
        for (size_t k = 0; k < dim; k++)
            assert_true(fabsf(one[k] - batch[i * dim + k]) < 1e-5f);
    }
    /* A stop flag that is already set stops before any work; an unset one changes nothing. */
    atomic_bool stop;
    atomic_init(&stop, true);
    assert_int_equal(reg_model_embed_stop(r->model, texts, n, &stop, batch), REG_MODEL_ECANCELED);
    atomic_store(&stop, false);
    assert_int_equal(reg_model_embed_stop(r->model, texts, 1, &stop, batch), REG_MODEL_OK);
    assert_int_equal(reg_model_embed(r->model, texts, 1, one), REG_MODEL_OK);
    for (size_t k = 0; k < dim; k++)
        assert_true(one[k] == batch[k]);
    assert_string_equal(reg_strerror(REG_MODEL_ECANCELED), "indexing was cancelled");
    free(texts);
    free(batch);
    free(one);
}

typedef struct job {
    const reg_model_t *m;
    const char *const *texts;
    size_t n;
    float *out;
    int rc;
} job_t;

static void *embed_job(void *arg)
{
    job_t *j = arg;
    for (int round = 0; round < 3 && j->rc == REG_MODEL_OK; round++)
        j->rc = reg_model_embed(j->m, j->texts, j->n, j->out);
    return NULL;
}

static void test_real_model_is_shared_by_threads(void **state)
{
    real_t *r = real_or_skip(state);
    size_t dim = reg_model_dim(r->model);
    static const char *const texts[] = {"read a file from disk", "send an email to a colleague",
                                        "query the database for recent orders"};
    enum { N = 3, THREADS = 3 };
    float want[N * 384];
    assert_true(dim <= 384);
    assert_int_equal(reg_model_embed(r->model, texts, N, want), REG_MODEL_OK);
    job_t jobs[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (job_t){r->model, texts, N, calloc(N * dim, sizeof(float)), REG_MODEL_OK};
        assert_int_equal(pthread_create(&th[t], NULL, embed_job, &jobs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_int_equal(jobs[t].rc, REG_MODEL_OK);
        for (size_t i = 0; i < N; i++)
            assert_true(cosine(jobs[t].out + i * dim, want + i * dim, dim) > 0.99999);
        free(jobs[t].out);
    }
}

static void test_real_similar_texts_score_higher(void **state)
{
    real_t *r = real_or_skip(state);
    size_t dim = reg_model_dim(r->model);
    static const char *const texts[] = {"list the files in a folder", "show directory contents",
                                        "send a message to a Slack channel"};
    float *v = calloc(3 * dim, sizeof *v);
    assert_int_equal(reg_model_embed(r->model, texts, 3, v), REG_MODEL_OK);
    assert_true(cosine(v, v + dim, dim) > cosine(v, v + 2 * dim, dim) + 0.1);
    free(v);
}

/* The real folder without vocab.txt: the vocabulary comes from tokenizer.json and the ids
 * stay those of the reference. */
static void test_real_tokenizer_json_vocab_equals_vocab_txt(void **state)
{
    real_t *r = real_or_skip(state);
    const char *src = getenv("PTC_TEST_MODEL_DIR");
    char *dir = make_tmpdir();
    static const char *const files[] = {
        "config.json",  "tokenizer.json", "tokenizer_config.json",    "model.safetensors",
        "modules.json", "README.md",      "sentence_bert_config.json"};
    char from[1024], to[1024];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(from, sizeof from, "%s/%s", src, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        assert_int_equal(symlink(from, to), 0);
    }
    reg_model_t *m = load_ok(dir);
    size_t checked = 0;
    check_ids(m, cJSON_GetObjectItem(r->ref, "sentences"), &checked);
    check_ids(m, cJSON_GetObjectItem(r->ref, "tokenizer_only"), &checked);
    reg_model_free(m);
    remove_tree(dir);
}

int main(void)
{
    const struct CMUnitTest synthetic[] = {
        cmocka_unit_test(test_tokenizer_splits_words_punctuation_and_pieces),
        cmocka_unit_test(test_tokenizer_turns_overlong_words_into_unk),
        cmocka_unit_test(test_tokenize_truncates_and_keeps_sep),
        cmocka_unit_test(test_tiny_model_embeds_unit_vectors_and_batches_like_singles),
        cmocka_unit_test(test_embed_window_truncates_each_text),
        cmocka_unit_test(test_f16_and_bf16_weights_embed_like_f32),
        cmocka_unit_test(test_bf16_products_match_a_double_reference),
        cmocka_unit_test(test_precision_follows_the_cpu_and_ptc_model_fp32),
        cmocka_unit_test(test_legacy_tensor_names_embed_like_current_ones),
        cmocka_unit_test(test_pooling_config_is_honoured),
        cmocka_unit_test(test_missing_files_are_named),
        cmocka_unit_test(test_broken_files_are_named),
        cmocka_unit_test(test_tokenizer_json_alone_gives_vocab_and_casing),
        cmocka_unit_test(test_corrupt_safetensors_headers_never_crash),
        cmocka_unit_test(test_tokenizer_survives_random_bytes),
        cmocka_unit_test(test_bad_arguments_are_refused),
        cmocka_unit_test(test_find_installed_looks_in_xdg_data_home),
    };
    const struct CMUnitTest real[] = {
        cmocka_unit_test(test_real_tokenizer_ids_equal_reference),
        cmocka_unit_test(test_real_embeddings_match_reference),
        cmocka_unit_test(test_real_bf16_vectors_stay_close_to_fp32),
        cmocka_unit_test(test_real_dropped_weights_leave_rss_and_read_back_the_same),
        cmocka_unit_test(test_real_batch_equals_singles),
        cmocka_unit_test(test_real_model_is_shared_by_threads),
        cmocka_unit_test(test_real_similar_texts_score_higher),
        cmocka_unit_test(test_real_tokenizer_json_vocab_equals_vocab_txt),
    };
    int failed = cmocka_run_group_tests_name("model_synthetic", synthetic, NULL, NULL);
    failed += cmocka_run_group_tests_name("model_real", real, real_setup, real_teardown);
    return failed != 0;
}
