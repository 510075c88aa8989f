/* The generated `tools` package (pybundle.c) and the bridge protocol codec (bridge_proto.c),
 * including an end-to-end run of the package under python3 against a host played by this test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../test_util.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bridge.h"
#include "pybundle.h"

#define PYTHON "/usr/bin/python3"

/* tests/unit/pybundle/test_pybundle.c -> tests/fixtures/<name> (CMake compiles by full path). */
static void fixture_path(const char *name, char *out, size_t size)
{
    const char *me = __FILE__;
    const char *cut = strstr(me, "unit/pybundle/test_pybundle.c");
    assert_non_null(cut);
    int n = snprintf(out, size, "%.*sfixtures/%s", (int)(cut - me), me, name);
    assert_true(n > 0 && (size_t)n < size);
}

static reg_catalog_t *load_catalog(void)
{
    char path[4096], msg[256];
    fixture_path("pybundle_catalog.json", path, sizeof path);
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), 0);
    size_t added = 0;
    int rc = reg_catalog_load_file(cat, path, NULL, &added, msg, sizeof msg);
    if (rc) fail_msg("%s", msg);
    assert_int_equal(added, 15);
    return cat;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat st;
    assert_int_equal(fstat(fileno(f), &st), 0);
    char *buf = malloc((size_t)st.st_size + 1);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (size_t)st.st_size, f);
    assert_int_equal(n, (size_t)st.st_size);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void make_cache(char *dir, size_t size)
{
    char *d = tu_temp_dir("ptc-pybundle-test");
    assert_true((size_t)snprintf(dir, size, "%s", d) < size);
    free(d);
}

static void remove_tree(const char *dir)
{
    assert_int_equal(tu_remove_tree(dir), 0);
}

static char *bundle_file(const ptc_pybundle_info_t *info, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tools/%s", info->root, name);
    return read_text(path);
}

/* ---------------------------------------------------------------------------------------- */

static void identifiers_are_sanitised(void **state)
{
    (void)state;
    char out[PTC_PYBUNDLE_IDENT_MAX + 1];
    assert_int_equal(ptc_pybundle_identifier("list-items", out, sizeof out), 10);
    assert_string_equal(out, "list_items");
    ptc_pybundle_identifier("class", out, sizeof out);
    assert_string_equal(out, "class_");
    ptc_pybundle_identifier("None", out, sizeof out);
    assert_string_equal(out, "None_");
    ptc_pybundle_identifier("match", out, sizeof out); /* a soft keyword is a fine name */
    assert_string_equal(out, "match");
    ptc_pybundle_identifier("2fast", out, sizeof out);
    assert_string_equal(out, "_2fast");
    ptc_pybundle_identifier("", out, sizeof out);
    assert_string_equal(out, "_");
    ptc_pybundle_identifier("caf\xc3\xa9 \xf0\x9f\x98\x80!", out, sizeof out); /* é, space, 😀, ! */
    assert_string_equal(out, "caf____"); /* one '_' per character, not per byte */
    ptc_pybundle_identifier("__getattr__", out, sizeof out);
    assert_string_equal(out, "__getattr___");
    ptc_pybundle_identifier("\xff\xfe", out, sizeof out);
    assert_string_equal(out, "__");
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    size_t n = ptc_pybundle_identifier(longname, out, sizeof out);
    assert_true(n <= PTC_PYBUNDLE_IDENT_MAX - 8);
    assert_int_equal(strlen(out), n);
}

static void bundle_has_modules_functions_and_escaped_text(void **state)
{
    (void)state;
    reg_catalog_t *cat = load_catalog();
    char cache[4096], msg[512] = "";
    make_cache(cache, sizeof cache);
    ptc_pybundle_info_t info;
    int rc = ptc_pybundle_build(cat, cache, &info, msg, sizeof msg);
    if (rc) fail_msg("%s", msg);
    assert_true(info.generated);
    assert_int_equal(info.modules, 6);
    assert_int_equal(info.functions, 15);
    assert_int_equal(info.skipped, 0);
    assert_int_equal(strlen(info.key), 64);
    assert_non_null(strstr(info.root, info.key));

    char *m = bundle_file(&info, "everything.py");
    assert_non_null(m);
    assert_non_null(strstr(m, "\ndef echo(message: _ptc_b.str, count: _ptc_b.int = None, "
                              "ratio: _ptc_b.float = None, flag: _ptc_b.bool = None, "
                              "tags: _ptc_b.list = None, extra: _ptc_b.dict = None, "
                              "maybe: _ptc_b.str = None, anything: _ptc_Any = None) -> _ptc_Any:"));
    assert_non_null(strstr(m, "return _ptc_rt._invoke(\"everything\", \"echo\", {\"message\": "
                              "message}, {\"count\": count, "));
    assert_non_null(strstr(m, "\ndef list_items() -> _ptc_Any:"));
    assert_non_null(strstr(m, "\ndef list_items_2() -> _ptc_Any:"));
    assert_non_null(strstr(m, "_invoke(\"everything\", \"list-items\""));
    assert_non_null(strstr(m, "\ndef class_() -> _ptc_Any:"));
    assert_non_null(strstr(m, "\ndef _2fast() -> _ptc_Any:"));
    assert_non_null(strstr(m, "\ndef print(from_: _ptc_b.str, lambda_: _ptc_b.int = None, "
                              "_ptc_rt_: _ptc_b.str = None, my_arg: _ptc_b.str = None, "
                              "my_arg_2: _ptc_b.str = None)"));
    /* The hostile tool: its name becomes a plain identifier and its texts stay inside
     * escaped literals; the file is pure ASCII and no line starts with injected code. */
    assert_non_null(strstr(m, "\ndef x____import_os__os__exit_7___(a_b: _ptc_b.str = None)"));
    assert_non_null(strstr(m, "\"Says \\\"\\\"\\\"hi\\\"\\\"\\\" and '''bye'''\\\\n \\\\ "
                              "\\\"quoted\\\" \\xe9\\u20ac\\U0001f600 \\x01\\x7f\\nimport os;"));
    assert_non_null(strstr(m, "_invoke(\"everything\", \"x\\\"); import os; os._exit(7) #\", "
                              "{}, {\"a\\\"b\": a_b})"));
    for (const unsigned char *p = (const unsigned char *)m; *p; p++)
        assert_true(*p == '\n' || (*p >= 0x20 && *p < 0x7f));
    assert_null(strstr(m, "\nimport os"));
    assert_null(strstr(m, "\nos._exit"));
    free(m);

    /* Modules: dashes, collisions after sanitising, package names, digits, dunders. */
    const char *files[] = {"my_server.py", "my_server_2.py", "call_.py",    "_2nd_server.py",
                           "__init___.py", "__init__.py",    "_runtime.py", "_catalog.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char *f = bundle_file(&info, files[i]);
        if (!f) fail_msg("missing %s", files[i]);
        free(f);
    }
    char *dunder = bundle_file(&info, "__init___.py");
    assert_non_null(strstr(dunder, "\ndef __getattr___() -> _ptc_Any:"));
    free(dunder);
    char *init = bundle_file(&info, "__init__.py");
    assert_non_null(strstr(init, "_MODULES = frozenset([\"everything\", \"my_server\", "
                                 "\"my_server_2\", \"call_\", \"_2nd_server\", \"__init___\"])"));
    free(init);

    char *json = bundle_file(&info, "_catalog.json");
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    const cJSON *mods = cJSON_GetObjectItem(root, "modules");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(mods, "my_server_2"), "server")->valuestring,
        "my_server");
    const cJSON *fns = cJSON_GetObjectItem(cJSON_GetObjectItem(mods, "everything"), "functions");
    assert_int_equal(cJSON_GetArraySize(fns), 10);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(fns, 0), "signature")->valuestring,
                        "echo(message: str, count: int = None, ratio: float = None, "
                        "flag: bool = None, tags: list = None, extra: dict = None, "
                        "maybe: str = None, anything: Any = None)");
    cJSON_Delete(root);
    free(json);

    reg_catalog_free(cat);
    remove_tree(cache);
}

static void unchanged_catalog_hits_the_cache_and_a_change_regenerates(void **state)
{
    (void)state;
    reg_catalog_t *cat = load_catalog();
    char cache[4096], msg[512] = "";
    make_cache(cache, sizeof cache);
    ptc_pybundle_info_t a, b, c;
    assert_int_equal(ptc_pybundle_build(cat, cache, &a, msg, sizeof msg), 0);
    assert_true(a.generated);
    char marker[4200];
    snprintf(marker, sizeof marker, "%s/tools/everything.py", a.root);
    struct stat st1, st2;
    assert_int_equal(stat(marker, &st1), 0);

    assert_int_equal(ptc_pybundle_build(cat, cache, &b, msg, sizeof msg), 0);
    assert_false(b.generated);
    assert_int_equal(b.functions, 0);
    assert_string_equal(a.root, b.root);
    assert_int_equal(stat(marker, &st2), 0);
    assert_int_equal(st1.st_ino, st2.st_ino); /* the same file, not rewritten */

    /* A description change is a new key and a new folder; the old one stays for running code. */
    cJSON *tool = cJSON_Parse("{\"name\":\"echo\",\"description\":\"changed\"}");
    assert_int_equal(reg_catalog_add(cat, "other", tool, msg, sizeof msg, NULL), 0);
    cJSON_Delete(tool);
    assert_int_equal(ptc_pybundle_build(cat, cache, &c, msg, sizeof msg), 0);
    assert_true(c.generated);
    assert_string_not_equal(c.key, a.key);
    assert_int_equal(c.modules, 7);
    assert_int_equal(stat(marker, &st2), 0);

    /* Only the two published folders are left: no temporary folders. */
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "test \"$(ls -A '%s' | wc -l)\" -eq 2", cache);
    assert_int_equal(system(cmd), 0);
    reg_catalog_free(cat);
    remove_tree(cache);
}

static void make_folder(const char *cache, const char *name, time_t mtime)
{
    char path[4200], file[4300];
    snprintf(path, sizeof path, "%s/%s", cache, name);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(file, sizeof file, "%s/tools", path);
    assert_int_equal(mkdir(file, 0700), 0);
    snprintf(file, sizeof file, "%s/tools/mod.py", path);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("x = 1\n", f);
    assert_int_equal(fclose(f), 0);
    struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static bool exists(const char *cache, const char *name)
{
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", cache, name);
    return lstat(path, &st) == 0;
}

static void prune_removes_packages_unused_past_the_age_but_never_the_one_in_use(void **state)
{
    (void)state;
    char cache[4096];
    make_cache(cache, sizeof cache);
    const time_t now = time(NULL);
    const long day = 24 * 60 * 60;
    make_folder(cache, "pybundle-old", now - 31 * day);
    make_folder(cache, "pybundle-recent", now - 29 * day);
    make_folder(cache, "pybundle-inuse", now - 60 * day);
    make_folder(cache, ".pybundle-0123456789abcdef-Ab12Cd", now - 31 * day);
    make_folder(cache, "embeddings", now - 90 * day); /* not a package: not ours to remove */
    char keep[4200];
    snprintf(keep, sizeof keep, "%s/pybundle-inuse", cache);

    assert_int_equal(ptc_pybundle_prune(cache, keep, now, 30 * day), 2);
    assert_false(exists(cache, "pybundle-old"));
    assert_false(exists(cache, ".pybundle-0123456789abcdef-Ab12Cd"));
    assert_true(exists(cache, "pybundle-recent"));
    assert_true(exists(cache, "pybundle-inuse/tools/mod.py"));
    assert_true(exists(cache, "embeddings/tools/mod.py"));
    /* Two days on, "recent" has passed the age too. */
    assert_int_equal(ptc_pybundle_prune(cache, keep, now + 2 * day, 30 * day), 1);
    assert_false(exists(cache, "pybundle-recent"));
    assert_true(exists(cache, "pybundle-inuse"));
    assert_int_equal(ptc_pybundle_prune(NULL, keep, now, 30 * day), PTC_PYBUNDLE_EINVAL);

    /* A build that finds its package touches it, so a package in use looks used. */
    reg_catalog_t *cat = load_catalog();
    char msg[512] = "";
    ptc_pybundle_info_t a, b;
    assert_int_equal(ptc_pybundle_build(cat, cache, &a, msg, sizeof msg), 0);
    struct timespec old[2] = {{now - 40 * day, 0}, {now - 40 * day, 0}};
    assert_int_equal(utimensat(AT_FDCWD, a.root, old, 0), 0);
    assert_int_equal(ptc_pybundle_build(cat, cache, &b, msg, sizeof msg), 0);
    assert_false(b.generated);
    /* Nothing kept by name now: the 60-day-old "inuse" goes, the touched package stays. */
    assert_int_equal(ptc_pybundle_prune(cache, NULL, now, 30 * day), 1);
    assert_false(exists(cache, "pybundle-inuse"));
    char probe[4300];
    snprintf(probe, sizeof probe, "%s/tools/_catalog.json", a.root);
    struct stat st;
    assert_int_equal(stat(probe, &st), 0);
    reg_catalog_free(cat);
    remove_tree(cache);
}

static void concurrent_builds_publish_one_complete_bundle(void **state)
{
    (void)state;
    reg_catalog_t *cat = load_catalog();
    char cache[4096];
    make_cache(cache, sizeof cache);
    enum { N = 4 };
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            ptc_pybundle_info_t info;
            _exit(ptc_pybundle_build(cat, cache, &info, NULL, 0) == 0 ? 0 : 1);
        }
    }
    for (int i = 0; i < N; i++) {
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    /* Whoever won, there is one bundle, it is whole, and no temporary folder is left. */
    ptc_pybundle_info_t info;
    assert_int_equal(ptc_pybundle_build(cat, cache, &info, NULL, 0), 0);
    assert_false(info.generated);
    char *init = bundle_file(&info, "__init__.py");
    assert_non_null(init);
    assert_non_null(strstr(init, "def __getattr__(name):"));
    free(init);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "test \"$(ls -A '%s')\" = 'pybundle-%s'", cache, info.key);
    assert_int_equal(system(cmd), 0);
    reg_catalog_free(cat);
    remove_tree(cache);
}

static void key_depends_on_schema_and_order(void **state)
{
    (void)state;
    reg_catalog_t *x, *y;
    assert_int_equal(reg_catalog_new(&x), 0);
    assert_int_equal(reg_catalog_new(&y), 0);
    cJSON *t1 = cJSON_Parse("{\"name\":\"a\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
                            "{\"p\":{\"type\":\"string\"}}}}");
    cJSON *t2 = cJSON_Parse("{\"name\":\"a\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
                            "{\"p\":{\"type\":\"integer\"}}}}");
    assert_int_equal(reg_catalog_add(x, "s", t1, NULL, 0, NULL), 0);
    assert_int_equal(reg_catalog_add(y, "s", t2, NULL, 0, NULL), 0);
    char kx[65], ky[65], kx2[65];
    assert_int_equal(ptc_pybundle_key(x, kx), 0);
    assert_int_equal(ptc_pybundle_key(y, ky), 0);
    assert_int_equal(ptc_pybundle_key(x, kx2), 0);
    assert_string_not_equal(kx, ky);
    assert_string_equal(kx, kx2);
    cJSON_Delete(t1);
    cJSON_Delete(t2);
    reg_catalog_free(x);
    reg_catalog_free(y);
}

static void tools_past_the_cap_get_no_function(void **state)
{
    (void)state;
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), 0);
    /* One server with more tools than the cap: the worst case of the name checks. */
    for (int i = 0; i < PTC_PYBUNDLE_TOOLS_MAX + 5; i++) {
        char json[200];
        snprintf(json, sizeof json,
                 "{\"name\":\"tool-%d\",\"inputSchema\":{\"type\":\"object\","
                 "\"properties\":{\"q\":{\"type\":\"string\"}},\"required\":[\"q\"]}}",
                 i);
        cJSON *tool = cJSON_Parse(json);
        assert_int_equal(reg_catalog_add(cat, "big", tool, NULL, 0, NULL), 0);
        cJSON_Delete(tool);
    }
    char cache[4096], msg[512] = "";
    make_cache(cache, sizeof cache);
    ptc_pybundle_info_t info;
    int rc = ptc_pybundle_build(cat, cache, &info, msg, sizeof msg);
    if (rc) fail_msg("%s", msg);
    assert_int_equal(info.functions, PTC_PYBUNDLE_TOOLS_MAX);
    assert_int_equal(info.skipped, 5);
    assert_int_equal(info.modules, 1);
    char *m = bundle_file(&info, "big.py");
    assert_non_null(m);
    assert_non_null(strstr(m, "\ndef tool_9999(q: _ptc_b.str) -> _ptc_Any:"));
    assert_null(strstr(m, "def tool_10000("));
    free(m);
    reg_catalog_free(cat);
    remove_tree(cache);
}

static void unwritable_cache_is_a_clear_error(void **state)
{
    (void)state;
    reg_catalog_t *cat = load_catalog();
    char msg[512] = "";
    ptc_pybundle_info_t info;
    int rc = ptc_pybundle_build(cat, "/proc/ptc-no-such-folder/cache", &info, msg, sizeof msg);
    assert_int_equal(rc, PTC_PYBUNDLE_EIO);
    assert_non_null(strstr(msg, "cache"));
    assert_int_equal(ptc_pybundle_build(cat, "", &info, msg, sizeof msg), PTC_PYBUNDLE_EINVAL);
    reg_catalog_free(cat);
}

/* ---------------------------------------------------------------------------------------- */
/* Protocol                                                                                 */

static int parse(const char *line, ptc_bridge_req_t *req, char *msg)
{
    return ptc_bridge_parse(line, strlen(line), 0, req, msg, 256);
}

static void bridge_parses_call_search_and_emit(void **state)
{
    (void)state;
    ptc_bridge_req_t r;
    char msg[256];
    assert_int_equal(parse("{\"id\":7,\"method\":\"call\",\"params\":{\"server\":\"my-server\","
                           "\"tool\":\"x y\",\"arguments\":{\"a\":[1,2]}}}\n",
                           &r, msg),
                     0);
    assert_int_equal(r.id, 7);
    assert_int_equal(r.method, PTC_BRIDGE_CALL);
    assert_string_equal(r.server, "my-server");
    assert_string_equal(r.tool, "x y");
    char *args = cJSON_PrintUnformatted(r.arguments);
    assert_string_equal(args, "{\"a\":[1,2]}");
    free(args);
    ptc_bridge_req_clear(&r);
    assert_int_equal(r.id, -1);

    assert_int_equal(
        parse("{\"id\":8,\"method\":\"call\",\"params\":{\"server\":\"s\",\"tool\":\"t\"}}", &r,
              msg),
        0);
    assert_true(cJSON_IsObject(r.arguments));
    assert_null(r.arguments->child);
    ptc_bridge_req_clear(&r);

    assert_int_equal(
        parse("{\"id\":9,\"method\":\"search\",\"params\":{\"query\":\"files\"}}\r\n", &r, msg), 0);
    assert_int_equal(r.method, PTC_BRIDGE_SEARCH);
    assert_string_equal(r.query, "files");
    assert_int_equal(r.top_k, PTC_BRIDGE_TOPK_DEF);
    assert_null(r.server);
    assert_null(r.category);
    ptc_bridge_req_clear(&r);
    assert_int_equal(parse("{\"id\":9,\"method\":\"search\",\"params\":{\"query\":\"q\","
                           "\"server\":\"files\",\"category\":\"storage\"}}",
                           &r, msg),
                     0);
    assert_string_equal(r.server, "files");
    assert_string_equal(r.category, "storage");
    ptc_bridge_req_clear(&r);
    assert_int_equal(
        parse("{\"id\":9,\"method\":\"search\",\"params\":{\"query\":\"q\",\"top_k\":50}}", &r,
              msg),
        0);
    assert_int_equal(r.top_k, 50);
    ptc_bridge_req_clear(&r);

    assert_int_equal(parse("{\"id\":9007199254740991,\"method\":\"emit\",\"params\":{\"record\":"
                           "null}}",
                           &r, msg),
                     0);
    assert_int_equal(r.id, PTC_BRIDGE_ID_MAX);
    assert_int_equal(r.method, PTC_BRIDGE_EMIT);
    assert_true(cJSON_IsNull(r.record));
    ptc_bridge_req_clear(&r);
}

static void bridge_rejects_malformed_lines_and_keeps_the_id(void **state)
{
    (void)state;
    static const struct {
        const char *line;
        int rc;
        int64_t id;
        const char *says;
    } cases[] = {
        {"", PTC_BRIDGE_EINVAL, -1, "not valid JSON"},
        {"{\"id\":1,", PTC_BRIDGE_EINVAL, -1, "not valid JSON"},
        {"[1,2]", PTC_BRIDGE_EINVAL, -1, "JSON object"},
        {"{\"id\":1,\"method\":\"call\",\"params\":{}} {}", PTC_BRIDGE_EINVAL, -1, "more than one"},
        {"{\"id\":0,\"method\":\"emit\",\"params\":{\"record\":1}}", PTC_BRIDGE_EINVAL, -1, "id"},
        {"{\"id\":1.5,\"method\":\"emit\",\"params\":{\"record\":1}}", PTC_BRIDGE_EINVAL, -1, "id"},
        {"{\"id\":\"3\",\"method\":\"emit\",\"params\":{\"record\":1}}", PTC_BRIDGE_EINVAL, -1,
         "id"},
        {"{\"id\":9007199254740992,\"method\":\"emit\",\"params\":{}}", PTC_BRIDGE_EINVAL, -1,
         "id"},
        {"{\"id\":3,\"method\":\"exec\",\"params\":{}}", PTC_BRIDGE_EINVAL, 3, "method"},
        {"{\"id\":3,\"method\":\"call\",\"params\":[]}", PTC_BRIDGE_EINVAL, 3, "params"},
        {"{\"id\":3,\"method\":\"call\",\"params\":{\"server\":\"s\"}}", PTC_BRIDGE_EINVAL, 3,
         "params.tool"},
        {"{\"id\":3,\"method\":\"call\",\"params\":{\"server\":\"\",\"tool\":\"t\"}}",
         PTC_BRIDGE_EINVAL, 3, "empty"},
        {"{\"id\":3,\"method\":\"call\",\"params\":{\"server\":\"s\",\"tool\":\"t\","
         "\"arguments\":[1]}}",
         PTC_BRIDGE_EINVAL, 3, "arguments"},
        {"{\"id\":4,\"method\":\"search\",\"params\":{\"query\":\"q\",\"top_k\":51}}",
         PTC_BRIDGE_EINVAL, 4, "top_k"},
        {"{\"id\":4,\"method\":\"search\",\"params\":{\"query\":\"q\",\"top_k\":0}}",
         PTC_BRIDGE_EINVAL, 4, "top_k"},
        {"{\"id\":4,\"method\":\"search\",\"params\":{\"query\":7}}", PTC_BRIDGE_EINVAL, 4,
         "params.query"},
        {"{\"id\":4,\"method\":\"search\",\"params\":{\"query\":\"q\",\"category\":[]}}",
         PTC_BRIDGE_EINVAL, 4, "params.category"},
        {"{\"id\":4,\"method\":\"search\",\"params\":{\"query\":\"q\",\"server\":\"\"}}",
         PTC_BRIDGE_EINVAL, 4, "params.server must not be empty"},
        {"{\"id\":5,\"method\":\"emit\",\"params\":{}}", PTC_BRIDGE_EINVAL, 5, "record"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ptc_bridge_req_t r;
        char msg[256] = "";
        int rc = parse(cases[i].line, &r, msg);
        if (rc != cases[i].rc || r.id != cases[i].id || !strstr(msg, cases[i].says))
            fail_msg("case %zu (%s): rc %d id %lld msg '%s'", i, cases[i].line, rc, (long long)r.id,
                     msg);
        assert_null(r.server);
        assert_null(r.category);
        assert_null(r.arguments);
        ptc_bridge_req_clear(&r);
    }

    /* A NUL inside the line, a line over the cap, a name over its cap. */
    ptc_bridge_req_t r;
    char msg[256];
    static const char nul[] = "{\"id\":1,\"method\":\"emit\",\"params\":{\"record\":1}}\0x";
    assert_int_equal(ptc_bridge_parse(nul, sizeof nul - 1, 0, &r, msg, sizeof msg),
                     PTC_BRIDGE_EINVAL);
    assert_non_null(strstr(msg, "NUL"));
    const char *ok = "{\"id\":1,\"method\":\"emit\",\"params\":{\"record\":1}}";
    assert_int_equal(ptc_bridge_parse(ok, strlen(ok), 10, &r, msg, sizeof msg), PTC_BRIDGE_ETOOBIG);
    assert_int_equal(r.id, -1);
    size_t big = PTC_BRIDGE_NAME_MAX + 100;
    char *line = malloc(big + 200);
    assert_non_null(line);
    int n = snprintf(line, big + 200, "{\"id\":2,\"method\":\"call\",\"params\":{\"server\":\"");
    memset(line + n, 's', PTC_BRIDGE_NAME_MAX + 1);
    snprintf(line + n + PTC_BRIDGE_NAME_MAX + 1, 100, "\",\"tool\":\"t\"}}");
    assert_int_equal(ptc_bridge_parse(line, strlen(line), 0, &r, msg, sizeof msg),
                     PTC_BRIDGE_ETOOBIG);
    assert_int_equal(r.id, 2);
    free(line);
}

static void bridge_answers_are_single_json_lines(void **state)
{
    (void)state;
    size_t len = 0;
    cJSON *res = cJSON_Parse("{\"content\":[{\"type\":\"text\",\"text\":\"a\\nb\"}]}");
    char *line = ptc_bridge_answer_result(12, res, &len);
    assert_string_equal(
        line, "{\"id\":12,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a\\nb\"}]}}\n");
    assert_int_equal(len, strlen(line));
    free(line);
    cJSON_Delete(res);
    line = ptc_bridge_answer_result(3, NULL, NULL);
    assert_string_equal(line, "{\"id\":3,\"result\":null}\n");
    free(line);
    line = ptc_bridge_answer_error(-1, PTC_BRIDGE_E_DENIED, "no \"x\"\nhere", &len);
    assert_string_equal(
        line,
        "{\"id\":null,\"error\":{\"code\":\"denied\",\"message\":\"no \\\"x\\\"\\nhere\"}}\n");
    assert_int_equal(len, strlen(line));
    assert_null(memchr(line, '\n', len - 1));
    free(line);
}

/* ---------------------------------------------------------------------------------------- */
/* End to end: python3 runs the package; this process is the host on the other socket end.  */

typedef struct host {
    const reg_catalog_t *cat;
    int calls, searches, errors;
    char *records[8];
    int nrecords;
} host_t;

static cJSON *text_result(const char *text, bool is_error)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(r, "content");
    cJSON *item = cJSON_CreateObject();
    cJSON_AddStringToObject(item, "type", "text");
    cJSON_AddStringToObject(item, "text", text);
    cJSON_AddItemToArray(content, item);
    if (is_error) cJSON_AddBoolToObject(r, "isError", true);
    return r;
}

/* The downstream tools of the fixture catalog, played here: echo answers its arguments as
 * structuredContent, fail answers isError, json_text answers JSON as text, plain answers text,
 * every other tool answers {"server", "tool", "arguments"} so the wire names can be checked. */
static char *host_answer(host_t *h, ptc_bridge_req_t *req)
{
    if (req->method == PTC_BRIDGE_EMIT) {
        assert_true(h->nrecords < 8);
        h->records[h->nrecords++] = cJSON_PrintUnformatted(req->record);
        return ptc_bridge_answer_result(req->id, NULL, NULL);
    }
    if (req->method == PTC_BRIDGE_SEARCH) {
        h->searches++;
        if (strcmp(req->query, "__hangup__") == 0) return NULL; /* the host goes away */
        cJSON *res = cJSON_CreateObject();
        cJSON_AddStringToObject(res, "embedder", "lexical");
        cJSON *list = cJSON_AddArrayToObject(res, "tools");
        for (size_t i = 0; i < reg_catalog_count(h->cat); i++) {
            const reg_tool_t *t = reg_catalog_at(h->cat, i);
            if (!strstr(t->name, req->query) || cJSON_GetArraySize(list) >= req->top_k) continue;
            if ((req->server && strcmp(t->server, req->server) != 0) ||
                (req->category && strcmp(t->category, req->category) != 0))
                continue; /* the filters, as the registry applies them */
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "id", t->id);
            cJSON_AddStringToObject(o, "server", t->server);
            cJSON_AddStringToObject(o, "name", t->name);
            cJSON_AddStringToObject(o, "description", t->description);
            cJSON_AddNumberToObject(o, "score", 1.0);
            cJSON_AddStringToObject(o, "category", t->category);
            cJSON_AddItemToArray(list, o);
        }
        char *line = ptc_bridge_answer_result(req->id, res, NULL);
        cJSON_Delete(res);
        return line;
    }
    h->calls++;
    const reg_tool_t *tool = NULL;
    for (size_t i = 0; i < reg_catalog_count(h->cat) && !tool; i++) {
        const reg_tool_t *t = reg_catalog_at(h->cat, i);
        if (strcmp(t->server, req->server) == 0 && strcmp(t->name, req->tool) == 0) tool = t;
    }
    if (!tool) {
        char msg[2200];
        snprintf(msg, sizeof msg, "no tool %s/%s in the registry", req->server, req->tool);
        h->errors++;
        return ptc_bridge_answer_error(req->id, PTC_BRIDGE_E_UNKNOWN, msg, NULL);
    }
    cJSON *res;
    if (strcmp(tool->name, "echo") == 0) {
        res = text_result("echoed", false);
        cJSON_AddItemToObject(res, "structuredContent", cJSON_Duplicate(req->arguments, true));
    } else if (strcmp(tool->name, "fail") == 0) {
        const cJSON *reason = cJSON_GetObjectItem(req->arguments, "reason");
        char msg[256];
        snprintf(msg, sizeof msg, "boom: %s",
                 cJSON_IsString(reason) ? reason->valuestring : "(no reason)");
        res = text_result(msg, true);
    } else if (strcmp(tool->name, "json_text") == 0) {
        char *text = cJSON_PrintUnformatted(req->arguments);
        res = text_result(text, false);
        free(text);
    } else if (strcmp(tool->name, "plain") == 0) {
        res = text_result("plain text, not JSON", false);
    } else {
        res = cJSON_CreateObject();
        cJSON *sc = cJSON_AddObjectToObject(res, "structuredContent");
        cJSON_AddStringToObject(sc, "server", tool->server);
        cJSON_AddStringToObject(sc, "tool", tool->name);
        cJSON_AddItemToObject(sc, "arguments", cJSON_Duplicate(req->arguments, true));
    }
    char *line = ptc_bridge_answer_result(req->id, res, NULL);
    cJSON_Delete(res);
    return line;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        assert_true(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

/* Serves requests until python closes its end; every line must parse. */
static void host_serve(host_t *h, int fd)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            char *grown = realloc(buf, cap);
            assert_non_null(grown);
            buf = grown;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        assert_true(r >= 0);
        if (r == 0) break;
        len += (size_t)r;
        char *start = buf, *nl;
        while ((nl = memchr(start, '\n', len - (size_t)(start - buf))) != NULL) {
            ptc_bridge_req_t req;
            char msg[256];
            int rc = ptc_bridge_parse(start, (size_t)(nl - start) + 1, 0, &req, msg, sizeof msg);
            if (rc) fail_msg("bad request from python: %s: %.*s", msg, (int)(nl - start), start);
            char *answer = host_answer(h, &req);
            if (!answer) {
                ptc_bridge_req_clear(&req);
                free(buf);
                return;
            }
            write_all(fd, answer, strlen(answer));
            free(answer);
            ptc_bridge_req_clear(&req);
            start = nl + 1;
        }
        len -= (size_t)(start - buf);
        memmove(buf, start, len);
    }
    fail_msg("python closed the bridge before the hang-up test");
}

static void python_calls_tools_through_the_bridge(void **state)
{
    (void)state;
    if (access(PYTHON, X_OK) != 0)
        fail_msg(PYTHON " is needed for this test (apt-get install python3)");
    reg_catalog_t *cat = load_catalog();
    char cache[4096], msg[512] = "", script[4096], catalog[4096];
    make_cache(cache, sizeof cache);
    fixture_path("pybundle_e2e.py", script, sizeof script);
    fixture_path("pybundle_catalog.json", catalog, sizeof catalog);
    ptc_pybundle_info_t info;
    int rc = ptc_pybundle_build(cat, cache, &info, msg, sizeof msg);
    if (rc) fail_msg("%s", msg);
    /* The sandbox mounts the bundle read-only: so does this test, as far as permissions go. */
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "chmod -R a-w '%s'", info.root);
    assert_int_equal(system(cmd), 0);

    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* The child's end must survive exec: a descriptor without FD_CLOEXEC, as the
         * launcher will pass it. */
        int fd = fcntl(sv[1], F_DUPFD, 10);
        if (fd < 0) _exit(120);
        /* A descriptor left non-blocking by the host must still work. */
        if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0) _exit(121);
        char num[16];
        snprintf(num, sizeof num, "%d", fd);
        setenv("PTC_BRIDGE_FD", num, 1);
        setenv("PYTHONPATH", info.root, 1);
        execl(PYTHON, "python3", "-B", script, catalog, (char *)NULL);
        _exit(127);
    }
    close(sv[1]);
    host_t h = {.cat = cat};
    host_serve(&h, sv[0]);
    close(sv[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    /* 8 threads x 25 echo calls, 10 async calls and the 19 single calls of the script (the
     * two with arguments that are not JSON never leave python). */
    assert_int_equal(h.calls, 200 + 10 + 19);
    assert_int_equal(h.errors, 1);
    assert_int_equal(h.searches, 8); /* 4 plain, 4 filtered */
    assert_int_equal(h.nrecords, 3);
    assert_string_equal(h.records[0], "{\"n\":1}");
    assert_string_equal(h.records[1], "\"\xc3\xa9\\\"\\n\"");
    assert_string_equal(h.records[2], "[1,2.5,null,true]");
    for (int i = 0; i < h.nrecords; i++)
        free(h.records[i]);

    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'", info.root);
    assert_int_equal(system(cmd), 0);
    reg_catalog_free(cat);
    remove_tree(cache);
}

/* ---------------------------------------------------------------------------------------- */
/* Random hostile names and texts: the package must import and round-trip every one.        */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void random_text(uint64_t *rng, char *out, size_t size, size_t min_parts)
{
    static const char *const parts[] = {
        "\"",
        "'",
        "\\",
        "\"\"\"",
        "'''",
        "\n",
        "\r",
        "\t",
        "\x01",
        "\x7f",
        "\xc3\xa9",
        "\xe2\x82\xac",
        "\xf0\x9f\x98\x80",
        "\xe2\x80\xa8",
        "#",
        ")",
        ":",
        "def ",
        "import os",
        " ",
        "-",
        "7",
        "a",
        "class",
        "None",
        "__",
        "_ptc_rt",
        "{",
        "}",
        "%s",
        "\\x41",
        "\\n",
    };
    size_t n = min_parts + rng_next(rng) % 10, len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *p = parts[rng_next(rng) % (sizeof parts / sizeof *parts)];
        size_t k = strlen(p);
        if (len + k + 1 > size) break;
        memcpy(out + len, p, k + 1);
        len += k;
    }
}

static int run_python(const char *root, const char *script, const char *arg)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("PYTHONPATH", root, 1);
        unsetenv("PTC_BRIDGE_FD");
        execl(PYTHON, "python3", "-B", script, arg, (char *)NULL);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void random_hostile_catalog_round_trips_through_python(void **state)
{
    (void)state;
    if (access(PYTHON, X_OK) != 0) fail_msg(PYTHON " is needed for this test");
    reg_catalog_t *cat;
    assert_int_equal(reg_catalog_new(&cat), 0);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    char servers[6][128], text[512];
    for (int i = 0; i < 6; i++)
        random_text(&rng, servers[i], sizeof servers[i], 1);
    for (int i = 0; i < 300; i++) {
        cJSON *tool = cJSON_CreateObject();
        random_text(&rng, text, sizeof text, 1);
        cJSON_AddStringToObject(tool, "name", text);
        random_text(&rng, text, sizeof text, 0);
        cJSON_AddStringToObject(tool, "description", text);
        cJSON *schema = cJSON_AddObjectToObject(tool, "inputSchema");
        cJSON_AddStringToObject(schema, "type", "object");
        cJSON *props = cJSON_AddObjectToObject(schema, "properties");
        int np = (int)(rng_next(&rng) % 6);
        for (int k = 0; k < np; k++) {
            random_text(&rng, text, 64, 1);
            if (cJSON_GetObjectItemCaseSensitive(props, text)) continue;
            cJSON *prop = cJSON_AddObjectToObject(props, text);
            cJSON_AddStringToObject(prop, "type", "string");
        }
        assert_int_equal(reg_catalog_add(cat, servers[rng_next(&rng) % 6], tool, NULL, 0, NULL), 0);
        cJSON_Delete(tool);
    }
    char cache[4096], msg[512] = "", script[4096], source[4200];
    make_cache(cache, sizeof cache);
    fixture_path("pybundle_roundtrip.py", script, sizeof script);
    ptc_pybundle_info_t info;
    int rc = ptc_pybundle_build(cat, cache, &info, msg, sizeof msg);
    if (rc) fail_msg("%s", msg);
    assert_int_equal(info.functions, 300);

    /* The source as the generator saw it: the catalog's own views. */
    cJSON *doc = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(doc, "tools");
    for (size_t i = 0; i < reg_catalog_count(cat); i++) {
        const reg_tool_t *t = reg_catalog_at(cat, i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", t->id);
        cJSON_AddStringToObject(o, "server", t->server);
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "description", t->description);
        cJSON_AddItemToObject(o, "inputSchema", cJSON_Duplicate(t->input_schema, true));
        cJSON_AddItemToArray(list, o);
    }
    char *json = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    snprintf(source, sizeof source, "%s/source.json", cache);
    FILE *f = fopen(source, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(json, 1, strlen(json), f), strlen(json));
    assert_int_equal(fclose(f), 0);
    free(json);

    assert_int_equal(run_python(info.root, script, source), 0);
    reg_catalog_free(cat);
    remove_tree(cache);
}

/* The repair request's signatures: the tools called first, then those the code names, and for
 * a module whose named functions match nothing, the module's functions. */
static void signatures_list_called_named_and_module_tools(void **state)
{
    (void)state;
    reg_catalog_t *cat = load_catalog();
    cJSON *used = cJSON_CreateArray();
    assert_non_null(used);
    assert_true(cJSON_AddItemToArray(used, cJSON_CreateString("everything__fail")));
    char *s = ptc_pybundle_signatures(cat, "from tools.everything import echo\necho(message='x')\n",
                                      used);
    assert_non_null(s);
    const char *fail = strstr(s, "- tools.everything.fail(reason: str)  # Always fails.\n");
    const char *echo = strstr(s, "- tools.everything.echo(count: int = None, message: str, ratio: "
                                 "float = None, flag: bool = None, tags: list = None");
    assert_non_null(fail);
    assert_non_null(echo);
    assert_true(fail < echo);                          /* the called tool first */
    assert_null(strstr(s, "tools.everything.plain(")); /* named functions matched: no others */
    free(s);
    /* A wrong name in a known module: the module's functions, so the repairer sees them. */
    s = ptc_pybundle_signatures(cat, "import tools.everything\ntools.everything.nosuch()\n", NULL);
    assert_non_null(s);
    assert_non_null(strstr(s, "- tools.everything.plain()  # Answers plain text.\n"));
    assert_non_null(strstr(s, "- tools.everything.echo("));
    free(s);
    /* No tools called or named: nothing. */
    assert_null(ptc_pybundle_signatures(cat, "print(1)\n", NULL));
    cJSON_Delete(used);
    reg_catalog_free(cat);
}

static void code_uses_the_package_when_it_names_the_word_tools(void **state)
{
    (void)state;
    assert_true(ptc_pybundle_code_uses("from tools.github import search"));
    assert_true(ptc_pybundle_code_uses("import tools\n"));
    assert_true(ptc_pybundle_code_uses("x = tools.search('q')"));
    assert_true(ptc_pybundle_code_uses("tools"));
    assert_true(ptc_pybundle_code_uses("print('my tools')")); /* a mention waits too */
    assert_false(ptc_pybundle_code_uses("import mytools\nprint(tools_x)"));
    assert_false(ptc_pybundle_code_uses("print(1)"));
    assert_false(ptc_pybundle_code_uses(""));
    assert_false(ptc_pybundle_code_uses("_tools toolsy 9tools"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(identifiers_are_sanitised),
        cmocka_unit_test(signatures_list_called_named_and_module_tools),
        cmocka_unit_test(bundle_has_modules_functions_and_escaped_text),
        cmocka_unit_test(unchanged_catalog_hits_the_cache_and_a_change_regenerates),
        cmocka_unit_test(prune_removes_packages_unused_past_the_age_but_never_the_one_in_use),
        cmocka_unit_test(concurrent_builds_publish_one_complete_bundle),
        cmocka_unit_test(key_depends_on_schema_and_order),
        cmocka_unit_test(tools_past_the_cap_get_no_function),
        cmocka_unit_test(unwritable_cache_is_a_clear_error),
        cmocka_unit_test(bridge_parses_call_search_and_emit),
        cmocka_unit_test(bridge_rejects_malformed_lines_and_keeps_the_id),
        cmocka_unit_test(bridge_answers_are_single_json_lines),
        cmocka_unit_test(python_calls_tools_through_the_bridge),
        cmocka_unit_test(random_hostile_catalog_round_trips_through_python),
        cmocka_unit_test(code_uses_the_package_when_it_names_the_word_tools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
