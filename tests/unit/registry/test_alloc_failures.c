/*
 * Every allocation is checked: the registry's own malloc/calloc/realloc calls are routed
 * through wrappers (linker --wrap, this test only) that fail the Nth call, for every N a clean
 * run makes, and so are cJSON's (a shared library the wrap does not reach: cJSON_InitHooks
 * gives it the failing malloc), so that a parse, a copy or a print of JSON that runs out of
 * memory is a failure path tested like any other. Each run must end without a crash, return
 * errors rather than half-done work, and (under ASan) leak nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "registry.h"
#include "../test_util.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

static long fail_at = -1; /* index of the call to fail; -1: none */
static long calls;

static int should_fail(void)
{
    return fail_at >= 0 && calls++ == fail_at;
}

void *__wrap_malloc(size_t n)
{
    if (fail_at < 0) calls++;
    return should_fail() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    if (fail_at < 0) calls++;
    return should_fail() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (fail_at < 0) calls++;
    return should_fail() ? NULL : __real_realloc(p, n);
}

static const char tools_a[] =
    "[{\"name\": \"list_issues\", \"description\": \"List the issues of a repository.\","
    "  \"inputSchema\": {\"type\": \"object\", \"properties\": {\"repo\": {\"type\": \"string\","
    "  \"description\": \"Owner and repository\"}}, \"required\": [\"repo\"]}},"
    " {\"name\": \"create_issue\", \"description\": \"Open a new issue.\"}]";
static const char tools_b[] = "[{\"name\": \"send\", \"description\": \"Send a chat message.\"}]";
/* A tools file: the catalog parses it, and copies each tool's schemas and annotations. */
static const char tools_file[] =
    "{\"tools\": [{\"server\": \"files\", \"name\": \"read_file\", \"title\": \"Read\","
    "  \"description\": \"Read a text file.\", \"annotations\": {\"readOnlyHint\": true},"
    "  \"inputSchema\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}}},"
    "  \"outputSchema\": {\"type\": \"object\", \"properties\": {\"text\": {\"type\": "
    "\"string\"}}}},"
    " {\"server\": \"files\", \"name\": \"list\", \"description\": \"List a folder.\"}]}";

/* One scenario through every part; returns how many steps failed (for the clean-run check).
 * path is a tools file holding tools_file. */
static int scenario(cJSON *a, cJSON *b, const char *path)
{
    int failures = 0;
    char msg[256];
    reg_lexical_opts_t o;
    reg_lexical_opts_default(&o);
    o.dim = 32;
    reg_embedder_t *e = NULL;
    if (reg_lexical_new(&o, &e) < 0) return 1;
    reg_registry_t *r = NULL;
    if (reg_registry_new(e, NULL, &r) < 0) return 1; /* takes e even on failure */
    failures += reg_registry_set_server_tools(r, "github", a, msg, sizeof msg) < 0;
    failures += reg_registry_set_server_tools(r, "chat", b, msg, sizeof msg) < 0;
    failures += reg_registry_load_file(r, path, msg, sizeof msg) < 0;
    failures += reg_registry_index_all(r, msg, sizeof msg) < 0;
    reg_result_t res[4];
    int n = reg_registry_search(r, "issues", NULL, 4, NULL, res, msg, sizeof msg);
    if (n < 0) {
        failures++;
        n = 0;
    }
    reg_registry_remove_server(r, "chat");
    failures += reg_registry_set_server_tools(r, "chat", b, msg, sizeof msg) < 0;
    failures += reg_registry_index_all(r, msg, sizeof msg) < 0;
    n = reg_registry_search(r, "chat message", NULL, 4, NULL, res, msg, sizeof msg);
    failures += n < 0;
    reg_registry_free(r);

    /* Past the first growths of the vector arrays (two of them for Q8, grown one after the
     * other): a row whose add failed is not there, and every row that is has its vector. */
    for (int storage = REG_INDEX_F32; storage <= REG_INDEX_Q8; storage++) {
        reg_index_t *ix = NULL;
        if (reg_index_new(8, (reg_index_storage_t)storage, &ix) < 0) {
            failures++;
            continue;
        }
        const float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        char id[16];
        size_t added = 0;
        for (int i = 0; i < 80; i++) {
            snprintf(id, sizeof id, "s__t%d", i);
            int rc = reg_index_add(ix, id, i % 2 ? "s" : "t", NULL, v);
            failures += rc < 0;
            added += rc == 0;
            float back[8];
            assert_int_equal(reg_index_get_vector(ix, id, back), rc == 0 ? REG_OK : REG_ENOENT);
        }
        assert_int_equal(reg_index_count(ix), added);
        reg_hit_t hits[3];
        failures += reg_index_search(ix, v, 3, NULL, hits) < 0;
        reg_index_remove_server(ix, "s");
        reg_index_free(ix);
    }
    /* The same for BM25's rows, documents and terms (two arrays grown one after the other). */
    reg_bm25_t *bm = NULL;
    if (reg_bm25_new(1.2f, 0.75f, &bm) == 0) {
        char id[16], text[64];
        size_t added = 0;
        for (int i = 0; i < 40; i++) {
            snprintf(id, sizeof id, "s__t%d", i);
            snprintf(text, sizeof text, "common word%d other%d", i, i * 7);
            int rc = reg_bm25_add(bm, id, "s", NULL, text);
            failures += rc < 0;
            added += rc == 0;
        }
        assert_int_equal(reg_bm25_count(bm), added);
        reg_hit_t hits[3];
        failures += reg_bm25_search(bm, "common word39", 3, NULL, hits) < 0;
        reg_bm25_free(bm);
    } else {
        failures++;
    }
    const reg_hit_t h1[] = {{"x", "s", "s", 1.0f}, {"y", "s", "s", 0.5f}};
    reg_ranked_t lists[2] = {{h1, 2, 1.0f, 0, false}, {h1, 2, 1.0f, 0, false}};
    reg_hit_t out[2];
    failures += reg_fuse(lists, 2, REG_FUSE_MINMAX, 60, 2, out) < 0;
    return failures;
}

static void test_every_allocation_failure_is_survived(void **state)
{
    (void)state;
    cJSON_Hooks hooks = {__wrap_malloc, free};
    cJSON_InitHooks(&hooks);
    char *dir = tu_temp_dir("ptc-alloc");
    char path[TU_PATH_MAX];
    snprintf(path, sizeof path, "%s/tools.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(tools_file, f) >= 0);
    assert_int_equal(fclose(f), 0);
    cJSON *a = cJSON_Parse(tools_a), *b = cJSON_Parse(tools_b);
    assert_non_null(a);
    assert_non_null(b);
    fail_at = -1;
    calls = 0;
    assert_int_equal(scenario(a, b, path), 0);
    long total = calls;
    print_message("allocations in a clean run: %ld\n", total);
    assert_true(total > 100);
    long failed_runs = 0;
    for (long k = 0; k < total; k++) {
        fail_at = k;
        calls = 0;
        failed_runs += scenario(a, b, path) > 0;
    }
    fail_at = -1;
    /* Most injected failures must surface as errors (some hit optional work, such as a
     * cache of the query or a scratch table, and are absorbed by design). */
    assert_true(failed_runs > total / 2);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_InitHooks(NULL);
    assert_int_equal(tu_remove_tree(dir), 0);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_allocation_failure_is_survived),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
