/* Ids, collisions, catalog loading (good and bad files), per-server removal, index text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base.h"
#include "registry.h"

static int valid_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > REG_ID_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

static void test_sanitize_replaces_foreign_bytes(void **state)
{
    (void)state;
    char out[64];
    reg_sanitize_name("my server/v2", out, sizeof out);
    assert_string_equal(out, "my_server_v2");
    reg_sanitize_name("ok-name.1_x", out, sizeof out);
    assert_string_equal(out, "ok-name.1_x");
    reg_sanitize_name("caf\xc3\xa9", out, sizeof out);
    assert_string_equal(out, "caf_");
    reg_sanitize_name("", out, sizeof out);
    assert_string_equal(out, "_");
    char small[4];
    assert_int_equal(reg_sanitize_name("abcdef", small, sizeof small), 3);
    assert_string_equal(small, "abc");
}

static void test_make_id_fits_128(void **state)
{
    (void)state;
    char id[REG_ID_MAX + 1];
    reg_make_id("github", "search_issues", id);
    assert_string_equal(id, "github__search_issues");
    char longs[300], longt[300];
    memset(longs, 's', 299);
    longs[299] = 0;
    memset(longt, 't', 299);
    longt[299] = 0;
    reg_make_id(longs, longt, id);
    assert_int_equal(strlen(id), REG_ID_MAX);
    assert_true(valid_id(id));
    assert_non_null(strstr(id, "s__t")); /* both parts survive */
    /* A short tool leaves the long server more room than half. */
    reg_make_id(longs, "x", id);
    assert_int_equal(strlen(id), REG_ID_MAX);
    assert_string_equal(id + REG_ID_MAX - 3, "__x");
}

static cJSON *tool_json(const char *name, const char *desc)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", name);
    if (desc) cJSON_AddStringToObject(t, "description", desc);
    return t;
}

static void add_tool(reg_catalog_t *cat, const char *server, const char *name, const char **id)
{
    cJSON *t = tool_json(name, "d");
    const reg_tool_t *view = NULL;
    char msg[256];
    assert_int_equal(reg_catalog_add(cat, server, t, msg, sizeof msg, &view), REG_OK);
    cJSON_Delete(t);
    *id = view->id;
}

static void test_collisions_get_deterministic_suffixes(void **state)
{
    (void)state;
    const char *ids[2][4];
    for (int round = 0; round < 2; round++) {
        reg_catalog_t *cat;
        assert_int_equal(reg_catalog_new(&cat), REG_OK);
        /* "my server" and "my_server" sanitise alike; the same tool twice also collides. */
        add_tool(cat, "my server", "run", &ids[round][0]);
        add_tool(cat, "my_server", "run", &ids[round][1]);
        add_tool(cat, "my server", "run", &ids[round][2]);
        add_tool(cat, "other", "run", &ids[round][3]);
        assert_string_equal(ids[round][0], "my_server__run");
        assert_string_equal(ids[round][1], "my_server__run_2");
        assert_string_equal(ids[round][2], "my_server__run_3");
        assert_string_equal(ids[round][3], "other__run");
        /* The views keep the original names. */
        assert_string_equal(reg_catalog_find(cat, "my_server__run_2")->server, "my_server");
        assert_string_equal(reg_catalog_find(cat, "my_server__run")->server, "my server");
        reg_catalog_free(cat);
    }
}

static void test_collision_suffix_fits_128(void **state)
{
    (void)state;
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), REG_OK);
    char name[200];
    memset(name, 'n', 199);
    name[199] = 0;
    const char *a, *b;
    add_tool(cat, "srv", name, &a);
    add_tool(cat, "srv", name, &b);
    assert_int_equal(strlen(a), REG_ID_MAX);
    assert_int_equal(strlen(b), REG_ID_MAX);
    assert_true(valid_id(b));
    assert_string_equal(b + REG_ID_MAX - 2, "_2");
    assert_string_not_equal(a, b);
    reg_catalog_free(cat);
}

static char *write_temp(const char *content)
{
    const char *tmp = getenv("TMPDIR");
    char *path = malloc(4096);
    assert_non_null(path);
    snprintf(path, 4096, "%s/ptc-reg-catalog-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(content);
    assert_int_equal(write(fd, content, n), (ssize_t)n);
    close(fd);
    return path;
}

static int load_text(reg_catalog_t *cat, const char *text, const char *def, size_t *added,
                     char *msg, size_t msg_size)
{
    char *path = write_temp(text);
    int rc = reg_catalog_load_file(cat, path, def, added, msg, msg_size);
    unlink(path);
    free(path);
    return rc;
}

static const char good_array[] =
    "[{\"server\": \"github\", \"name\": \"search_issues\", \"title\": \"Search issues\","
    "  \"description\": \"Find issues by text\", \"inputSchema\": {\"type\": \"object\","
    "  \"properties\": {\"repoName\": {\"type\": \"string\", \"description\": \"Owner and "
    "repo\"}}},"
    "  \"annotations\": {\"readOnlyHint\": true}},"
    " {\"server\": \"github\", \"name\": \"create_issue\", \"category\": \"writes\"},"
    " {\"server\": \"slack\", \"name\": \"post_message\", \"_meta\": {\"category\": \"chat\"}}]";

static void test_load_good_array(void **state)
{
    (void)state;
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), REG_OK);
    char msg[512] = "";
    size_t added = 0;
    assert_int_equal(load_text(cat, good_array, NULL, &added, msg, sizeof msg), REG_OK);
    assert_int_equal(added, 3);
    assert_int_equal(reg_catalog_count(cat), 3);
    const reg_tool_t *t = reg_catalog_find(cat, "github__search_issues");
    assert_non_null(t);
    assert_string_equal(t->title, "Search issues");
    assert_string_equal(t->category, "github"); /* the server, by default */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(t->annotations, "readOnlyHint")));
    const reg_tool_t *c = reg_catalog_find(cat, "github__create_issue");
    assert_string_equal(c->category, "writes");
    assert_string_equal(c->description, "");
    assert_string_equal(cJSON_GetObjectItem(c->input_schema, "type")->valuestring, "object");
    assert_null(c->annotations);
    assert_string_equal(reg_catalog_find(cat, "slack__post_message")->category, "chat");
    assert_ptr_equal(reg_catalog_at(cat, 0), t);
    assert_null(reg_catalog_at(cat, 3));

    char *text = reg_tool_index_text(t);
    assert_non_null(text);
    /* The server's name comes first: users name the product, tools often do not. */
    assert_int_equal(strncmp(text, "github. search issues.", 22), 0);
    assert_non_null(strstr(text, "Search issues."));
    assert_non_null(strstr(text, "Find issues by text."));
    assert_non_null(strstr(text, "repo name."));
    assert_non_null(strstr(text, "Owner and repo."));
    free(text);
    reg_catalog_free(cat);
}

static void test_load_tools_object_and_default_server(void **state)
{
    (void)state;
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), REG_OK);
    char msg[512] = "";
    size_t added = 0;
    const char doc[] = "{\"tools\": [{\"name\": \"a\"}, {\"name\": \"b\", \"server\": \"own\"}]}";
    assert_int_equal(load_text(cat, doc, "fallback", &added, msg, sizeof msg), REG_OK);
    assert_int_equal(added, 2);
    assert_non_null(reg_catalog_find(cat, "fallback__a"));
    assert_non_null(reg_catalog_find(cat, "own__b"));
    reg_catalog_free(cat);
}

static void expect_load_error(const char *doc, int err, const char *needle)
{
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), REG_OK);
    /* A tool already present must survive a failed load (all or nothing). */
    const char *id;
    add_tool(cat, "keep", "me", &id);
    char msg[512] = "";
    size_t added = 99;
    assert_int_equal(load_text(cat, doc, NULL, &added, msg, sizeof msg), err);
    assert_int_equal(added, 0);
    if (strstr(msg, needle) == NULL) fail_msg("message \"%s\" lacks \"%s\"", msg, needle);
    assert_int_equal(reg_catalog_count(cat), 1);
    assert_non_null(reg_catalog_find(cat, "keep__me"));
    reg_catalog_free(cat);
}

static void test_load_bad_files(void **state)
{
    (void)state;
    expect_load_error("[{\"name\": \"a\", \"server\": \"s\"},\n {\"name\": ", REG_EINVAL, "line 2");
    expect_load_error("{\"servers\": []}", REG_EINVAL, "expected a JSON array");
    expect_load_error("[{\"name\": \"a\", \"server\": \"s\"}, {\"name\": \"b\"}]", REG_EINVAL,
                      "tool #1");
    expect_load_error("[{\"name\": \"b\"}]", REG_EINVAL, "no \"server\"");
    expect_load_error("[{\"server\": \"s\"}]", REG_EINVAL, "\"name\" must be");
    expect_load_error("[{\"server\": \"s\", \"name\": \"\"}]", REG_EINVAL, "\"name\" must be");
    expect_load_error("[{\"server\": \"s\", \"name\": \"a\", \"description\": 3}]", REG_EINVAL,
                      "\"description\" must be a string");
    expect_load_error("[{\"server\": \"s\", \"name\": \"a\", \"inputSchema\": []}]", REG_EINVAL,
                      "\"inputSchema\" must be an object");
    expect_load_error("[17]", REG_EINVAL, "not an object");

    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), REG_OK);
    char msg[512] = "";
    assert_int_equal(
        reg_catalog_load_file(cat, "/nonexistent/ptc/tools.json", NULL, NULL, msg, sizeof msg),
        REG_EIO);
    assert_non_null(strstr(msg, "/nonexistent/ptc/tools.json"));
    reg_catalog_free(cat);
}

static void test_remove_server_and_readd(void **state)
{
    (void)state;
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), REG_OK);
    char msg[512];
    assert_int_equal(load_text(cat, good_array, NULL, NULL, msg, sizeof msg), REG_OK);
    assert_int_equal(reg_catalog_remove_server(cat, "github"), 2);
    assert_int_equal(reg_catalog_count(cat), 1);
    assert_null(reg_catalog_find(cat, "github__search_issues"));
    const reg_tool_t *s = reg_catalog_find(cat, "slack__post_message");
    assert_non_null(s);
    assert_ptr_equal(reg_catalog_at(cat, 0), s);
    assert_int_equal(reg_catalog_remove_server(cat, "github"), 0);
    assert_int_equal(reg_catalog_remove_server(cat, "never-seen"), 0);
    /* A server name borrowed from one of the tools being removed is fine. */
    assert_int_equal(reg_catalog_remove_server(cat, s->server), 1);
    assert_int_equal(reg_catalog_count(cat), 0);
    /* The server's new tool list comes back under the same ids. */
    assert_int_equal(load_text(cat, good_array, NULL, NULL, msg, sizeof msg), REG_OK);
    assert_non_null(reg_catalog_find(cat, "github__search_issues"));
    assert_non_null(reg_catalog_find(cat, "slack__post_message"));
    assert_int_equal(reg_catalog_count(cat), 3);
    /* Loading the same file again collides: suffixes, deterministically. */
    assert_int_equal(load_text(cat, good_array, NULL, NULL, msg, sizeof msg), REG_OK);
    assert_non_null(reg_catalog_find(cat, "slack__post_message_2"));
    assert_int_equal(reg_catalog_count(cat), 6);
    assert_int_equal(reg_catalog_remove_server(cat, "slack"), 2);
    assert_int_equal(reg_catalog_count(cat), 4);
    reg_catalog_free(cat);
}

static void test_find_by_server_and_name(void **state)
{
    (void)state;
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), REG_OK);
    const char *id;
    /* Names whose concatenations agree ("ab"+"c", "a"+"bc") stay apart. */
    add_tool(cat, "ab", "c", &id);
    add_tool(cat, "a", "bc", &id);
    add_tool(cat, "a", "bc", &id); /* a duplicate: the first one is found */
    add_tool(cat, "git-hub", "list issues", &id);
    const reg_tool_t *t = reg_catalog_find_tool(cat, "a", "bc");
    assert_non_null(t);
    assert_ptr_equal(t, reg_catalog_at(cat, 1));
    assert_ptr_equal(reg_catalog_find_tool(cat, "ab", "c"), reg_catalog_at(cat, 0));
    /* The original names, not the sanitised id. */
    t = reg_catalog_find_tool(cat, "git-hub", "list issues");
    assert_non_null(t);
    assert_string_equal(t->name, "list issues");
    assert_null(reg_catalog_find_tool(cat, "git_hub", "list_issues"));
    assert_null(reg_catalog_find_tool(cat, "ab", "bc"));
    assert_null(reg_catalog_find_tool(cat, "a", NULL));
    assert_null(reg_catalog_find_tool(NULL, "a", "bc"));
    /* After a removal, positions shift and the lookup follows them. */
    assert_int_equal(reg_catalog_remove_server(cat, "ab"), 1);
    assert_null(reg_catalog_find_tool(cat, "ab", "c"));
    assert_ptr_equal(reg_catalog_find_tool(cat, "a", "bc"), reg_catalog_at(cat, 0));
    assert_ptr_equal(reg_catalog_find_tool(cat, "git-hub", "list issues"), reg_catalog_at(cat, 2));
    assert_int_equal(reg_catalog_remove_server(cat, "a"), 2);
    assert_null(reg_catalog_find_tool(cat, "a", "bc"));
    assert_ptr_equal(reg_catalog_find_tool(cat, "git-hub", "list issues"), reg_catalog_at(cat, 0));
    /* A failed load rolls back and leaves nothing findable. */
    char msg[512];
    assert_true(load_text(cat, "[{\"name\": \"x\"}, {\"nope\": 1}]", "srv", NULL, msg, sizeof msg) <
                0);
    assert_null(reg_catalog_find_tool(cat, "srv", "x"));
    reg_catalog_free(cat);
}

/* A description past the texts' caps is cut at a character boundary, never inside one. */
static void test_long_texts_are_cut_on_a_character(void **state)
{
    (void)state;
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), REG_OK);
    size_t n = 3 * (size_t)REG_TEXT_MAX; /* past the index text's cap too */
    char *desc = malloc(n + 1);
    assert_non_null(desc);
    /* "euros. x" and then U+20AC (3 bytes) up to the end: both caps fall inside one. */
    desc[0] = 'x';
    for (size_t i = 1; i + 3 <= n; i += 3)
        memcpy(desc + i, "\xE2\x82\xAC", 3);
    desc[1 + (n - 1) / 3 * 3] = '\0';
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", "euros");
    cJSON_AddStringToObject(t, "description", desc);
    const reg_tool_t *tool;
    char msg[256];
    assert_int_equal(reg_catalog_add(cat, "s", t, msg, sizeof msg, &tool), REG_OK);
    assert_true(ptc_utf8_valid(tool->description, strlen(tool->description)));
    char *e = reg_tool_embed_text(tool);
    assert_non_null(e);
    assert_true(strlen(e) < REG_EMBED_TEXT_MAX);
    assert_true(strlen(e) > REG_EMBED_TEXT_MAX - 4);
    assert_true(ptc_utf8_valid(e, strlen(e)));
    free(e);
    char *x = reg_tool_index_text(tool);
    assert_non_null(x);
    assert_true(strlen(x) < 2 * (size_t)REG_TEXT_MAX);
    assert_true(ptc_utf8_valid(x, strlen(x)));
    free(x);
    cJSON_Delete(t);
    free(desc);
    reg_catalog_free(cat);
}

static void test_part_texts_are_a_head_and_later_sentences(void **state)
{
    (void)state;
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), REG_OK);
    cJSON *t = cJSON_Parse(
        "{\"name\": \"listItems\", \"description\": \"Lists the items. - Second point "
        "here now.\\nThird line has words! ok. Version 1.2 is kept whole. Sixth one is here. "
        "Seventh is the last. Eighth is never seen.\"}");
    assert_non_null(t);
    const reg_tool_t *tool;
    char msg[256];
    assert_int_equal(reg_catalog_add(cat, "my-srv", t, msg, sizeof msg, &tool), REG_OK);
    char *p[REG_PARTS_MAX];
    int n = reg_tool_part_texts(tool, p, REG_PARTS_MAX);
    assert_int_equal(n, REG_PARTS_MAX);
    static const char *const want[] = {
        "my srv list items. Lists the items.", "list items: Second point here now.",
        "list items: Third line has words!",   "list items: Version 1.2 is kept whole.",
        "list items: Sixth one is here.",      "list items: Seventh is the last."};
    for (int i = 0; i < n; i++) {
        assert_string_equal(p[i], want[i]);
        free(p[i]);
    }
    assert_int_equal(reg_tool_part_texts(tool, p, 2), 2);
    free(p[0]);
    free(p[1]);
    cJSON_Delete(t);
    /* Without a sentence of three words: the head alone, the names. */
    t = cJSON_Parse("{\"name\": \"ping\", \"description\": \"Ping.\"}");
    assert_int_equal(reg_catalog_add(cat, "net", t, msg, sizeof msg, &tool), REG_OK);
    assert_int_equal(reg_tool_part_texts(tool, p, REG_PARTS_MAX), 1);
    assert_string_equal(p[0], "net ping");
    free(p[0]);
    assert_int_equal(reg_tool_part_texts(NULL, p, 1), REG_EINVAL);
    cJSON_Delete(t);
    reg_catalog_free(cat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sanitize_replaces_foreign_bytes),
        cmocka_unit_test(test_long_texts_are_cut_on_a_character),
        cmocka_unit_test(test_make_id_fits_128),
        cmocka_unit_test(test_part_texts_are_a_head_and_later_sentences),
        cmocka_unit_test(test_collisions_get_deterministic_suffixes),
        cmocka_unit_test(test_collision_suffix_fits_128),
        cmocka_unit_test(test_load_good_array),
        cmocka_unit_test(test_load_tools_object_and_default_server),
        cmocka_unit_test(test_load_bad_files),
        cmocka_unit_test(test_remove_server_and_readd),
        cmocka_unit_test(test_find_by_server_and_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
