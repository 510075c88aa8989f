/* The dense index: top-k against brute force, filters, min_score, removal, quantisation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "registry.h"

#define DIM  48
#define ROWS 500

static uint64_t rng = 0x1234567887654321ULL;

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void random_unit(float *v)
{
    double n = 0;
    for (int i = 0; i < DIM; i++) {
        v[i] = (float)(uniform() * 2 - 1);
        n += (double)v[i] * (double)v[i];
    }
    for (int i = 0; i < DIM; i++)
        v[i] = (float)((double)v[i] / sqrt(n));
}

typedef struct ref {
    double score;
    char id[32];
    int server;
} ref_t;

static int cmp_ref(const void *a, const void *b)
{
    const ref_t *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return strcmp(x->id, y->id);
}

typedef struct fixture {
    reg_index_t *ix;
    float vecs[ROWS][DIM];
    int alive[ROWS];
} fixture_t;

static void make_id(int i, char *out)
{
    snprintf(out, 32, "srv%d__tool%03d", i % 5, i);
}

static void make_server(int i, char *out)
{
    snprintf(out, 32, "srv%d", i % 5);
}

static fixture_t *build(reg_index_storage_t storage)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(reg_index_new(DIM, storage, &f->ix), REG_OK);
    for (int i = 0; i < ROWS; i++) {
        char id[32], srv[32];
        make_id(i, id);
        make_server(i, srv);
        random_unit(f->vecs[i]);
        /* Category: even rows "even", odd rows default to the server. */
        assert_int_equal(reg_index_add(f->ix, id, srv, i % 2 == 0 ? "even" : NULL, f->vecs[i]),
                         REG_OK);
        f->alive[i] = 1;
    }
    return f;
}

static void destroy(fixture_t *f)
{
    reg_index_free(f->ix);
    free(f);
}

/* Brute-force reference over live rows passing the filter. */
static size_t reference(const fixture_t *f, const float *q, const reg_filter_t *flt, ref_t *out)
{
    size_t n = 0;
    for (int i = 0; i < ROWS; i++) {
        if (!f->alive[i]) continue;
        char srv[32];
        make_server(i, srv);
        if (flt && flt->server && strcmp(flt->server, srv) != 0) continue;
        if (flt && flt->category) {
            const char *cat = i % 2 == 0 ? "even" : srv;
            if (strcmp(flt->category, cat) != 0) continue;
        }
        double s = 0;
        for (int d = 0; d < DIM; d++)
            s += (double)q[d] * (double)f->vecs[i][d];
        if (flt && s < (double)flt->min_score) continue;
        out[n].score = s;
        make_id(i, out[n].id);
        out[n].server = i % 5;
        n++;
    }
    qsort(out, n, sizeof *out, cmp_ref);
    return n;
}

static void check_exact(fixture_t *f, const reg_filter_t *flt, size_t k)
{
    static ref_t ref[ROWS];
    reg_hit_t hits[64];
    for (int trial = 0; trial < 20; trial++) {
        float q[DIM];
        random_unit(q);
        size_t want = reference(f, q, flt, ref);
        int got = reg_index_search(f->ix, q, k, flt, hits);
        assert_int_equal(got, (int)(want < k ? want : k));
        for (int i = 0; i < got; i++) {
            assert_string_equal(hits[i].id, ref[i].id);
            assert_true(fabs((double)hits[i].score - ref[i].score) < 1e-4);
            if (i > 0) assert_true(hits[i - 1].score >= hits[i].score);
        }
    }
}

static void test_topk_matches_brute_force(void **state)
{
    (void)state;
    fixture_t *f = build(REG_INDEX_F32);
    assert_int_equal(reg_index_count(f->ix), ROWS);
    for (size_t k = 1; k <= 64; k *= 4)
        check_exact(f, NULL, k);
    destroy(f);
}

static void test_filters_and_min_score(void **state)
{
    (void)state;
    fixture_t *f = build(REG_INDEX_F32);
    reg_filter_t flt;
    reg_filter_default(&flt);
    flt.server = "srv3";
    check_exact(f, &flt, 10);
    reg_filter_default(&flt);
    flt.category = "even";
    check_exact(f, &flt, 10);
    flt.server = "srv2";
    check_exact(f, &flt, 10);
    reg_filter_default(&flt);
    flt.min_score = 0.3f;
    check_exact(f, &flt, 64);
    /* Unknown names match nothing. */
    reg_filter_default(&flt);
    flt.server = "nope";
    float q[DIM];
    random_unit(q);
    reg_hit_t hits[5];
    assert_int_equal(reg_index_search(f->ix, q, 5, &flt, hits), 0);
    /* A row scores 1 against itself and reports its metadata. */
    reg_filter_default(&flt);
    flt.min_score = 0.999f;
    assert_int_equal(reg_index_search(f->ix, f->vecs[7], 5, &flt, hits), 1);
    assert_string_equal(hits[0].id, "srv2__tool007");
    assert_string_equal(hits[0].server, "srv2");
    assert_string_equal(hits[0].category, "srv2");
    destroy(f);
}

static void test_remove_and_readd(void **state)
{
    (void)state;
    fixture_t *f = build(REG_INDEX_F32);
    char id[32];
    for (int i = 0; i < ROWS; i += 7) {
        make_id(i, id);
        assert_int_equal(reg_index_remove(f->ix, id), REG_OK);
        f->alive[i] = 0;
    }
    assert_int_equal(reg_index_remove(f->ix, "srv0__tool000"), REG_ENOENT);
    check_exact(f, NULL, 16);
    /* Removing a whole server, then bringing some of its tools back with new vectors. */
    size_t expect = 0;
    for (int i = 0; i < ROWS; i++)
        if (i % 5 == 1 && f->alive[i]) expect++;
    assert_int_equal(reg_index_remove_server(f->ix, "srv1"), expect);
    for (int i = 0; i < ROWS; i++)
        if (i % 5 == 1) f->alive[i] = 0;
    check_exact(f, NULL, 16);
    for (int i = 1; i < ROWS; i += 10) {
        char srv[32];
        make_id(i, id);
        make_server(i, srv);
        random_unit(f->vecs[i]);
        assert_int_equal(reg_index_add(f->ix, id, srv, i % 2 == 0 ? "even" : NULL, f->vecs[i]),
                         REG_OK);
        f->alive[i] = 1;
    }
    check_exact(f, NULL, 16);
    float back[DIM];
    make_id(11, id);
    assert_int_equal(reg_index_get_vector(f->ix, id, back), REG_OK);
    for (int d = 0; d < DIM; d++)
        assert_true(fabsf(back[d] - f->vecs[11][d]) < 1e-6f);
    assert_int_equal(reg_index_add(f->ix, id, "srv1", NULL, f->vecs[11]), REG_EEXIST);
    destroy(f);
}

static void test_ties_break_by_id_and_bad_input(void **state)
{
    (void)state;
    reg_index_t *ix;
    assert_int_equal(reg_index_new(4, REG_INDEX_F32, &ix), REG_OK);
    const float v[4] = {1, 0, 0, 0};
    const char *ids[] = {"c__x", "a__x", "b__x"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(reg_index_add(ix, ids[i], "s", NULL, v), REG_OK);
    reg_hit_t hits[3];
    assert_int_equal(reg_index_search(ix, v, 2, NULL, hits), 2);
    assert_string_equal(hits[0].id, "a__x");
    assert_string_equal(hits[1].id, "b__x");
    const float bad[4] = {NAN, 0, 0, 0};
    assert_int_equal(reg_index_add(ix, "d__x", "s", NULL, bad), REG_EINVAL);
    assert_int_equal(reg_index_search(ix, v, REG_TOPK_MAX + 1, NULL, hits), REG_ETOOBIG);
    assert_int_equal(reg_index_search(ix, v, 0, NULL, hits), 0);
    /* Vectors are normalised on the way in. */
    const float big[4] = {0, 3, 4, 0};
    assert_int_equal(reg_index_add(ix, "e__x", "s", NULL, big), REG_OK);
    float back[4];
    assert_int_equal(reg_index_get_vector(ix, "e__x", back), REG_OK);
    assert_true(fabsf(back[1] - 0.6f) < 1e-6f && fabsf(back[2] - 0.8f) < 1e-6f);
    reg_index_free(ix);
    assert_int_equal(reg_index_new(0, REG_INDEX_F32, &ix), REG_EDIM);
}

static void test_q8_is_close_to_exact(void **state)
{
    (void)state;
    fixture_t *f = build(REG_INDEX_Q8);
    static ref_t ref[ROWS];
    reg_hit_t hits[10];
    for (int trial = 0; trial < 20; trial++) {
        float q[DIM];
        random_unit(q);
        size_t n = reference(f, q, NULL, ref);
        assert_int_equal(reg_index_search(f->ix, q, 10, NULL, hits), 10);
        for (int i = 0; i < 10; i++) {
            /* Each hit's exact score is within quantisation error of the exact i-th best. */
            double exact = -2;
            for (size_t j = 0; j < n; j++)
                if (strcmp(ref[j].id, hits[i].id) == 0) exact = ref[j].score;
            assert_true(fabs(exact - (double)hits[i].score) < 0.02);
            assert_true(exact > ref[i].score - 0.04);
        }
    }
    destroy(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk_matches_brute_force),
        cmocka_unit_test(test_filters_and_min_score),
        cmocka_unit_test(test_remove_and_readd),
        cmocka_unit_test(test_ties_break_by_id_and_bad_input),
        cmocka_unit_test(test_q8_is_close_to_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
