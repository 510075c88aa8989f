/* BM25 ranking, filters and removal; fusion of ranked lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "registry.h"

static reg_bm25_t *corpus(void)
{
    reg_bm25_t *bm;
    assert_int_equal(reg_bm25_new(1.2f, 0.75f, &bm), REG_OK);
    assert_int_equal(reg_bm25_add(bm, "gh__list_issues", "gh", NULL,
                                  "list issues. List the issues of a repository."),
                     REG_OK);
    assert_int_equal(reg_bm25_add(bm, "gh__create_issue", "gh", "writes",
                                  "create issue. Create a new issue in a repository."),
                     REG_OK);
    assert_int_equal(reg_bm25_add(bm, "chat__send_message", "chat", NULL,
                                  "send message. Send a chat message to a channel."),
                     REG_OK);
    assert_int_equal(reg_bm25_add(bm, "wx__forecast", "wx", NULL,
                                  "get forecast. Daily weather forecast for a location."),
                     REG_OK);
    return bm;
}

static void test_bm25_ranks_by_terms(void **state)
{
    (void)state;
    reg_bm25_t *bm = corpus();
    reg_hit_t hits[4];
    int n = reg_bm25_search(bm, "creating an issue", 4, NULL, hits);
    assert_true(n >= 2);
    assert_string_equal(hits[0].id, "gh__create_issue");
    assert_string_equal(hits[1].id, "gh__list_issues");
    assert_string_equal(hits[0].category, "writes");
    /* Documents sharing no term are not returned. */
    assert_int_equal(reg_bm25_search(bm, "weather", 4, NULL, hits), 1);
    assert_string_equal(hits[0].id, "wx__forecast");
    assert_int_equal(reg_bm25_search(bm, "zebra", 4, NULL, hits), 0);
    assert_int_equal(reg_bm25_add(bm, "wx__forecast", "wx", NULL, "x"), REG_EEXIST);
    reg_bm25_free(bm);
}

static void test_bm25_filters_and_removal(void **state)
{
    (void)state;
    reg_bm25_t *bm = corpus();
    reg_hit_t hits[4];
    reg_filter_t f;
    reg_filter_default(&f);
    f.server = "chat";
    assert_int_equal(reg_bm25_search(bm, "message issue", 4, &f, hits), 1);
    assert_string_equal(hits[0].id, "chat__send_message");
    reg_filter_default(&f);
    f.min_score = 1000;
    assert_int_equal(reg_bm25_search(bm, "issue", 4, &f, hits), 0);

    assert_int_equal(reg_bm25_remove(bm, "gh__create_issue"), REG_OK);
    assert_int_equal(reg_bm25_remove(bm, "gh__create_issue"), REG_ENOENT);
    assert_int_equal(reg_bm25_search(bm, "create issue", 4, NULL, hits), 1);
    assert_string_equal(hits[0].id, "gh__list_issues");
    assert_int_equal(reg_bm25_remove_server(bm, "gh"), 1);
    assert_int_equal(reg_bm25_search(bm, "issue", 4, NULL, hits), 0);
    assert_int_equal(reg_bm25_count(bm), 2);
    /* Added back after removals, found again. */
    assert_int_equal(reg_bm25_add(bm, "gh__create_issue", "gh", NULL, "create issue"), REG_OK);
    assert_int_equal(reg_bm25_search(bm, "issue", 4, NULL, hits), 1);
    assert_string_equal(hits[0].server, "gh");
    reg_bm25_free(bm);
}

static void test_rrf_fusion(void **state)
{
    (void)state;
    const reg_hit_t a[] = {{"x", "s", "s", 0.9f}, {"y", "s", "s", 0.8f}, {"z", "s", "s", 0.1f}};
    const reg_hit_t b[] = {{"y", "s", "s", 12.0f}, {"w", "s", "s", 11.0f}};
    reg_ranked_t lists[2] = {{a, 3, 1.0f, 0, false}, {b, 2, 1.0f, 0, false}};
    reg_hit_t out[4];
    assert_int_equal(reg_fuse(lists, 2, REG_FUSE_RRF, 60.0f, 4, out), 4);
    /* y: 1/62 + 1/61; x: 1/61; w: 1/62; z: 1/63. */
    assert_string_equal(out[0].id, "y");
    assert_true(fabsf(out[0].score - (1.0f / 62 + 1.0f / 61)) < 1e-6f);
    assert_string_equal(out[1].id, "x");
    assert_string_equal(out[2].id, "w");
    assert_string_equal(out[3].id, "z");
    assert_int_equal(reg_fuse(lists, 2, REG_FUSE_RRF, 60.0f, 2, out), 2);
}

static void test_minmax_fusion_and_weights(void **state)
{
    (void)state;
    const reg_hit_t a[] = {{"x", "s", "s", 1.0f}, {"y", "s", "s", 0.5f}, {"z", "s", "s", 0.0f}};
    const reg_hit_t b[] = {{"z", "s", "s", 30.0f}, {"y", "s", "s", 20.0f}, {"x", "s", "s", 10.0f}};
    reg_hit_t out[3];
    reg_ranked_t lists[2] = {{a, 3, 1.0f, 0, false}, {b, 3, 1.0f, 0, false}};
    assert_int_equal(reg_fuse(lists, 2, REG_FUSE_MINMAX, 0, 3, out), 3);
    /* x: 1 + 0; y: 0.5 + 0.5; z: 0 + 1: a three-way tie, broken by id. */
    assert_string_equal(out[0].id, "x");
    assert_string_equal(out[1].id, "y");
    assert_string_equal(out[2].id, "z");
    assert_true(fabsf(out[0].score - 1.0f) < 1e-6f);
    lists[1].weight = 2.0f;
    assert_int_equal(reg_fuse(lists, 2, REG_FUSE_MINMAX, 0, 3, out), 3);
    assert_string_equal(out[0].id, "z");
    assert_true(fabsf(out[0].score - 2.0f) < 1e-6f);
    /* Bad arguments. */
    lists[1].weight = -1.0f;
    assert_int_equal(reg_fuse(lists, 2, REG_FUSE_MINMAX, 0, 3, out), REG_EINVAL);
    assert_int_equal(reg_fuse(NULL, 0, REG_FUSE_RRF, 60, 3, out), 0);
}

static void test_score_fusion_relative(void **state)
{
    (void)state;
    const reg_hit_t a[] = {{"x", "s", "s", 0.6f}, {"y", "s", "s", 0.55f}};
    const reg_hit_t b[] = {{"y", "s", "s", 40.0f}, {"x", "s", "s", 10.0f}};
    reg_ranked_t lists[2] = {{a, 2, 1.0f, 0, false}, {b, 2, 0.1f, 0, true}};
    reg_hit_t out[2];
    assert_int_equal(reg_fuse(lists, 2, REG_FUSE_SCORE, 0, 2, out), 2);
    /* y: 0.55 + 0.1 * 40/40; x: 0.6 + 0.1 * 10/40. The cosine stays absolute. */
    assert_string_equal(out[0].id, "y");
    assert_true(fabsf(out[0].score - 0.65f) < 1e-6f);
    assert_true(fabsf(out[1].score - 0.625f) < 1e-6f);
    /* The same BM25 list on another scale (a larger catalog) fuses the same. */
    const reg_hit_t b10[] = {{"y", "s", "s", 400.0f}, {"x", "s", "s", 100.0f}};
    lists[1].hits = b10;
    assert_int_equal(reg_fuse(lists, 2, REG_FUSE_SCORE, 0, 2, out), 2);
    assert_true(fabsf(out[0].score - 0.65f) < 1e-6f);
    /* Not relative: raw BM25 at 0.1 swamps the cosine. */
    lists[1].relative = false;
    assert_int_equal(reg_fuse(lists, 2, REG_FUSE_SCORE, 0, 2, out), 2);
    assert_true(fabsf(out[0].score - 40.55f) < 1e-3f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bm25_ranks_by_terms),
        cmocka_unit_test(test_bm25_filters_and_removal),
        cmocka_unit_test(test_rrf_fusion),
        cmocka_unit_test(test_minmax_fusion_and_weights),
        cmocka_unit_test(test_score_fusion_relative),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
