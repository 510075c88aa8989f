/* Bad input never crashes or corrupts: mutated catalogs, random bytes through the text path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "registry.h"

static const char seed_doc[] =
    "[{\"server\": \"github\", \"name\": \"search_issues\", \"title\": \"Search\","
    " \"description\": \"Find issues\", \"inputSchema\": {\"type\": \"object\", \"properties\":"
    " {\"q\": {\"type\": \"string\", \"description\": \"Query text\"}}, \"required\": [\"q\"]},"
    " \"annotations\": {\"readOnlyHint\": true}, \"category\": \"code\"},"
    " {\"server\": \"chat\", \"name\": \"send\", \"_meta\": {\"category\": \"talk\"}}]";

static uint64_t rng = 0x243F6A8885A308D3ULL;

static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static void test_mutated_catalogs_fail_cleanly(void **state)
{
    (void)state;
    const size_t len = sizeof seed_doc - 1;
    char buf[sizeof seed_doc + 16];
    size_t parsed = 0, loaded = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, seed_doc, len + 1);
        size_t n = len;
        int edits = 1 + (int)(next() % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = next() % n;
            switch (next() % 3) {
            case 0:
                buf[at] = (char)(next() & 0xff);
                break; /* flip a byte */
            case 1:
                n = at;
                break; /* truncate */
            default:
                memmove(buf + at, buf + at + 1, n - at);
                n--; /* delete */
            }
            if (n == 0) break;
        }
        buf[n] = 0;
        cJSON *root = cJSON_ParseWithLength(buf, n);
        if (root == NULL) continue;
        parsed++;
        reg_catalog_t *cat;
        assert_int_equal(reg_catalog_new(&cat), REG_OK);
        char msg[512] = "";
        size_t added = 7;
        int rc = reg_catalog_load_json(cat, root, NULL, &added, msg, sizeof msg);
        if (rc == REG_OK) {
            loaded++;
            assert_int_equal(reg_catalog_count(cat), added);
            for (size_t i = 0; i < added; i++) {
                const reg_tool_t *t = reg_catalog_at(cat, i);
                assert_true(strlen(t->id) >= 3 && strlen(t->id) <= REG_ID_MAX);
                char *text = reg_tool_index_text(t);
                assert_non_null(text);
                free(text);
            }
        } else {
            assert_true(rc == REG_EINVAL || rc == REG_ETOOBIG);
            assert_int_equal(reg_catalog_count(cat), 0);
            assert_int_equal(added, 0);
            assert_true(msg[0] != 0);
        }
        reg_catalog_free(cat);
        cJSON_Delete(root);
    }
    /* The mutations must have exercised both paths for the test to mean anything. */
    assert_true(parsed > 50);
    assert_true(loaded > 10 && loaded < parsed);
}

static void test_random_bytes_through_text_paths(void **state)
{
    (void)state;
    reg_embedder_t *e;
    reg_lexical_opts_t o;
    reg_lexical_opts_default(&o);
    o.dim = 64;
    assert_int_equal(reg_lexical_new(&o, &e), REG_OK);
    reg_bm25_t *bm;
    assert_int_equal(reg_bm25_new(1.2f, 0.75f, &bm), REG_OK);
    char text[300], split[700], id[32];
    float v[64];
    for (int iter = 0; iter < 500; iter++) {
        size_t n = next() % (sizeof text - 1);
        for (size_t i = 0; i < n; i++) {
            text[i] = (char)(1 + next() % 255);
        }
        text[n] = 0;
        int rc = reg_text_split(text, split, sizeof split);
        assert_true(rc >= 0 && (size_t)rc < sizeof split);
        const char *t[1] = {text};
        assert_int_equal(reg_embedder_embed(e, t, 1, REG_EMBED_QUERY, v, NULL, 0), REG_OK);
        double norm = 0;
        for (int d = 0; d < 64; d++)
            norm += (double)v[d] * (double)v[d];
        assert_true(norm == 0.0 || (norm > 0.9999 && norm < 1.0001));
        snprintf(id, sizeof id, "s__t%d", iter);
        assert_int_equal(reg_bm25_add(bm, id, "s", NULL, text), REG_OK);
        reg_hit_t hits[3];
        assert_true(reg_bm25_search(bm, text, 3, NULL, hits) >= 0);
    }
    reg_bm25_free(bm);
    reg_embedder_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutated_catalogs_fail_cleanly),
        cmocka_unit_test(test_random_bytes_through_text_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
