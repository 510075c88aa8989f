/* The downstream config parser: Claude Desktop's format as users write it, and errors that
 * name the entry and field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp.h"

static int parse(const char *json, mcp_downstream_config_t *cfg, char *msg, size_t n)
{
    return mcp_downstream_config_parse(json, strlen(json), cfg, msg, n);
}

static void parse_ok(const char *json, mcp_downstream_config_t *cfg)
{
    char msg[512];
    if (parse(json, cfg, msg, sizeof msg) != MCP_OK) fail_msg("parse failed: %s", msg);
}

static void parses_stdio_and_http_entries(void **state)
{
    (void)state;
    const char *json = "{\"ptc\": {\"log-level\": \"debug\"}, \"mcpServers\": {"
                       "\"files\": {\"command\": \"npx\", \"args\": [\"-y\", \"srv\", \"${HOME}\"],"
                       " \"env\": {\"TOKEN\": \"${GH}\", \"MODE\": \"x\"}, \"cwd\": \"/srv\", "
                       "\"disabled\": false},"
                       "\"remote\": {\"type\": \"http\", \"url\": \"https://example.invalid/mcp\","
                       " \"headers\": {\"Authorization\": \"Bearer ${T}\"}},"
                       "\"bare\": {\"url\": \"http://127.0.0.1:9/mcp\"}}}";
    mcp_downstream_config_t cfg;
    parse_ok(json, &cfg);
    assert_int_equal(cfg.n_servers, 3);
    const mcp_downstream_server_t *s = &cfg.servers[0];
    assert_string_equal(s->name, "files");
    assert_int_equal(s->kind, MCP_DOWNSTREAM_STDIO);
    assert_string_equal(s->command, "npx");
    assert_int_equal(s->n_args, 3);
    assert_string_equal(s->args[2], "${HOME}"); /* expanded by the client, not the parser */
    assert_int_equal(s->n_env, 2);
    assert_string_equal(s->env[0].name, "TOKEN");
    assert_string_equal(s->env[0].value, "${GH}");
    assert_string_equal(s->cwd, "/srv");
    s = &cfg.servers[1];
    assert_int_equal(s->kind, MCP_DOWNSTREAM_HTTP);
    assert_string_equal(s->url, "https://example.invalid/mcp");
    assert_int_equal(s->n_headers, 1);
    assert_string_equal(s->headers[0].name, "Authorization");
    assert_int_equal(cfg.servers[2].kind, MCP_DOWNSTREAM_HTTP);
    mcp_downstream_config_close(&cfg);
    assert_int_equal(cfg.n_servers, 0);
}

static void a_config_without_servers_is_empty(void **state)
{
    (void)state;
    mcp_downstream_config_t cfg;
    char msg[256];
    assert_int_equal(parse("{\"ptc\": {}}", &cfg, msg, sizeof msg), MCP_OK);
    assert_int_equal(cfg.n_servers, 0);
    assert_int_equal(parse("{\"mcpServers\": {}}", &cfg, msg, sizeof msg), MCP_OK);
    assert_int_equal(cfg.n_servers, 0);
    mcp_downstream_config_close(&cfg);
}

static void expect_error(const char *json, const char *needle)
{
    mcp_downstream_config_t cfg;
    char msg[512];
    assert_int_equal(parse(json, &cfg, msg, sizeof msg), MCP_EINVAL);
    assert_int_equal(cfg.n_servers, 0);
    if (strstr(msg, needle) == NULL) fail_msg("message \"%s\" lacks \"%s\"", msg, needle);
}

/* The problem of cfg whose message has needle, or NULL. */
static const mcp_downstream_problem_t *problem(const mcp_downstream_config_t *cfg,
                                               const char *needle)
{
    for (size_t i = 0; i < cfg->n_problems; i++)
        if (strstr(cfg->problems[i].message, needle) != NULL) return &cfg->problems[i];
    return NULL;
}

static void show_problems(const mcp_downstream_config_t *cfg)
{
    for (size_t i = 0; i < cfg->n_problems; i++)
        print_message("problem %zu: %s\n", i, cfg->problems[i].message);
}

/* The entry is dropped with a message naming it and the field; the file still parses. */
static void expect_dropped(const char *json, const char *server, const char *needle)
{
    mcp_downstream_config_t cfg;
    parse_ok(json, &cfg);
    for (size_t i = 0; i < cfg.n_servers; i++)
        if (strcmp(cfg.servers[i].name, server) == 0) fail_msg("%s was not dropped", server);
    const mcp_downstream_problem_t *pr = problem(&cfg, needle);
    if (pr == NULL) {
        show_problems(&cfg);
        fail_msg("no problem says \"%s\"", needle);
    }
    // cppcheck-suppress nullPointerRedundantCheck ; fail_msg does not return
    assert_true(pr->dropped);
    // cppcheck-suppress nullPointerRedundantCheck ; fail_msg does not return
    assert_string_equal(pr->server, server);
    mcp_downstream_config_close(&cfg);
    assert_int_equal(cfg.n_problems, 0);
}

static void errors_name_the_entry_and_field(void **state)
{
    (void)state;
    expect_dropped("{\"mcpServers\": {\"a\": {\"command\": \"x\"},\n\"b\": {\"command\": 1}}}", "b",
                   "mcpServers.b.command: expected a string");
    expect_dropped("{\"mcpServers\": {\"gh\": {\"command\": \"x\", \"args\": [\"a\", 2]}}}", "gh",
                   "mcpServers.gh.args[1]: expected a string");
    expect_dropped("{\"mcpServers\": {\"gh\": {\"command\": \"x\", \"env\": {\"PORT\": 8080}}}}",
                   "gh", "mcpServers.gh.env.PORT: expected a string");
    expect_dropped("{\"mcpServers\": {\"gh\": {\"args\": []}}}", "gh",
                   "mcpServers.gh: a stdio server needs");
    expect_dropped("{\"mcpServers\": {\"gh\": {\"type\": \"ws\", \"url\": \"x\"}}}", "gh",
                   "mcpServers.gh.type: \"ws\" is not one of");
    expect_dropped("{\"mcpServers\": {\"gh\": {\"type\": \"http\", \"url\": \"ftp://x\"}}}", "gh",
                   "mcpServers.gh.url");
    expect_dropped("{\"mcpServers\": {\"gh\": [1]}}", "gh", "mcpServers.gh: expected an object");
    expect_dropped("{\"mcpServers\": {\"gh\": {\"command\": \"x\", \"args\": \"-y\"}}}", "gh",
                   "mcpServers.gh.args: expected an array");
    expect_error("{\"mcpServers\": []}", "mcpServers: expected an object");
    expect_error("[]", "must be a JSON object");
}

/* One entry without "command" used to fail the whole file, so no server started. */
static void a_bad_entry_drops_only_itself(void **state)
{
    (void)state;
    const char *json = "{\"mcpServers\": {\"time\": {\"command\": \"t\"},"
                       " \"broken\": {\"args\": [\"x\"]},"
                       " \"git\": {\"command\": \"g\", \"env\": {\"A\": true}},"
                       " \"memory\": {\"command\": \"m\"}}}";
    mcp_downstream_config_t cfg;
    parse_ok(json, &cfg);
    assert_int_equal(cfg.n_servers, 2);
    assert_string_equal(cfg.servers[0].name, "time");
    assert_string_equal(cfg.servers[1].name, "memory");
    assert_int_equal(cfg.n_problems, 2);
    assert_string_equal(cfg.problems[0].server, "broken");
    assert_true(cfg.problems[0].dropped);
    assert_non_null(strstr(cfg.problems[0].message, "mcpServers.broken: a stdio server needs"));
    assert_string_equal(cfg.problems[1].server, "git");
    assert_non_null(strstr(cfg.problems[1].message, "mcpServers.git.env.A: expected a string"));
    mcp_downstream_config_close(&cfg);
}

static void a_duplicate_name_drops_the_second(void **state)
{
    (void)state;
    const char *json = "{\"mcpServers\": {\"a\": {\"command\": \"one\"}, \"a\": {\"command\": "
                       "\"two\"}}}";
    mcp_downstream_config_t cfg;
    parse_ok(json, &cfg);
    assert_int_equal(cfg.n_servers, 1);
    assert_string_equal(cfg.servers[0].command, "one");
    assert_non_null(problem(&cfg, "mcpServers.a: the name appears twice"));
    mcp_downstream_config_close(&cfg);
}

static void invalid_json_names_the_line_and_column(void **state)
{
    (void)state;
    /* The trailing comma: the parser stops just after the "}" that follows it. */
    expect_error("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}",
                 "near line 3, column 27");
    /* Columns count characters, not bytes: "é" is two bytes. */
    expect_error("{\"mcpServers\": {\"é\": {\"command\": \"x\"} x}}", "line 1, column 39");
    expect_error("{\"mcpServers\": {\n", "the JSON ends too early");
    char msg[128];
    assert_null(mcp_json_parse_located("[1,\n 2,,]", 9, msg, sizeof msg));
    assert_non_null(strstr(msg, "line 2, column 4"));
}

static void unknown_keys_are_warnings_naming_them(void **state)
{
    (void)state;
    const char *json = "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"arg\": [\"-y\"], "
                       "\"alwaysLoad\": true, \"disabled\": false}}}";
    mcp_downstream_config_t cfg;
    parse_ok(json, &cfg);
    assert_int_equal(cfg.n_servers, 1); /* a warning: the entry still starts */
    assert_int_equal(cfg.n_problems, 1);
    assert_false(cfg.problems[0].dropped);
    assert_string_equal(cfg.problems[0].server, "a");
    assert_non_null(strstr(cfg.problems[0].message, "mcpServers.a.arg: unknown key"));
    mcp_downstream_config_close(&cfg);
}

/* head, then n members "KEY<i>": VALUE joined with ", ", then tail: a config with many keys
 * (caller frees). */
static char *config_of(const char *head, const char *key, const char *value, size_t n,
                       const char *tail)
{
    size_t size = strlen(head) + n * (strlen(key) + strlen(value) + 32) + strlen(tail) + 1;
    char *json = malloc(size);
    assert_non_null(json);
    size_t at = (size_t)snprintf(json, size, "%s", head);
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(json + at, size - at, "%s\"%s%zu\": %s", i > 0 ? ", " : "", key, i,
                               value);
    snprintf(json + at, size - at, "%s", tail);
    return json;
}

/* A config of one entry with `unknown` keys nobody reads (caller frees). */
static char *config_with_unknown_keys(size_t unknown)
{
    return config_of("{\"mcpServers\": {\"a\": {\"command\": \"x\", ", "k", "1", unknown, "}}}");
}

/* Every problem of a config is reported or the config is refused: never a list cut short. */
static void a_config_past_the_problems_cap_is_refused_whole(void **state)
{
    (void)state;
    mcp_downstream_config_t cfg;
    char *json = config_with_unknown_keys(MCP_DOWNSTREAM_MAX_PROBLEMS);
    parse_ok(json, &cfg);
    assert_int_equal(cfg.n_servers, 1);
    assert_int_equal(cfg.n_problems, MCP_DOWNSTREAM_MAX_PROBLEMS);
    mcp_downstream_config_close(&cfg);
    free(json);

    json = config_with_unknown_keys(MCP_DOWNSTREAM_MAX_PROBLEMS + 1);
    char msg[512];
    assert_int_equal(parse(json, &cfg, msg, sizeof msg), MCP_ETOOBIG);
    assert_int_equal(cfg.n_servers, 0);
    assert_int_equal(cfg.n_problems, 0);
    assert_non_null(strstr(msg, "more than 4096 problems"));
    free(json);
}

/* A config of one http entry "h" with `n` headers (caller frees). */
static char *config_with_headers(size_t n)
{
    return config_of(
        "{\"mcpServers\": {\"h\": {\"url\": \"http://127.0.0.1:9/mcp\", \"headers\": {", "X-H",
        "\"v\"", n, "}}}}");
}

/* The HTTP client sends at most 64 headers; an entry with more of its own than fit beside a
 * request's is left out, saying why, instead of having the rest cut from every request. */
static void an_entry_with_too_many_headers_is_left_out(void **state)
{
    (void)state;
    mcp_downstream_config_t cfg;
    char *json = config_with_headers(MCP_DOWNSTREAM_MAX_HEADERS);
    parse_ok(json, &cfg);
    assert_int_equal(cfg.n_servers, 1);
    assert_int_equal(cfg.servers[0].n_headers, MCP_DOWNSTREAM_MAX_HEADERS);
    mcp_downstream_config_close(&cfg);
    free(json);

    json = config_with_headers(MCP_DOWNSTREAM_MAX_HEADERS + 1);
    parse_ok(json, &cfg);
    assert_int_equal(cfg.n_servers, 0);
    const mcp_downstream_problem_t *pr =
        problem(&cfg, "mcpServers.h.headers: more than 32 entries");
    assert_non_null(pr);
    assert_true(pr->dropped);
    mcp_downstream_config_close(&cfg);
    free(json);
}

/* "disabled": true (Cline and others) means the user asked for the server not to run; VS Code's
 * "envFile" is not read, so the server would miss variables without a word. */
static void disabled_entries_stay_off_and_env_file_warns(void **state)
{
    (void)state;
    const char *json = "{\"mcpServers\": {\"off\": {\"command\": \"x\", \"disabled\": true},"
                       " \"on\": {\"command\": \"y\", \"disabled\": false, \"envFile\": \".env\"},"
                       " \"odd\": {\"command\": \"z\", \"disabled\": \"yes\"}}}";
    mcp_downstream_config_t cfg;
    parse_ok(json, &cfg);
    assert_int_equal(cfg.n_servers, 1);
    assert_string_equal(cfg.servers[0].name, "on");
    const mcp_downstream_problem_t *pr = problem(&cfg, "mcpServers.off: \"disabled\": true");
    assert_non_null(pr);
    assert_true(pr->dropped);
    pr = problem(&cfg, "mcpServers.odd.disabled: expected true or false");
    assert_non_null(pr);
    assert_true(pr->dropped);
    pr = problem(&cfg, "mcpServers.on.envFile: not read");
    assert_non_null(pr);
    assert_false(pr->dropped);
    mcp_downstream_config_close(&cfg);
}

/* A config that lists the program itself (here the test binary, as ptc-mcp in real use) would
 * start an endless chain of processes. */
static void an_entry_that_starts_itself_is_refused(void **state)
{
    (void)state;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    assert_non_null(slash);
    char json[10000];
    snprintf(
        json, sizeof json,
        "{\"mcpServers\": {\"ok\": {\"command\": \"/bin/sh\"}, \"me\": {\"command\": \"%s\"}}}",
        self);
    expect_dropped(json, "me", "is ptc-mcp itself");
    /* Found through the entry's PATH, as the client would find it. */
    *slash = '\0';
    snprintf(json, sizeof json,
             "{\"mcpServers\": {\"me\": {\"command\": \"%s\", \"env\": {\"PATH\": "
             "\"/nonexistent:%s\"}}}}",
             slash + 1, self);
    expect_dropped(json, "me", "is ptc-mcp itself");
    mcp_downstream_config_t cfg;
    parse_ok("{\"mcpServers\": {\"sh\": {\"command\": \"/bin/sh\"}}}", &cfg);
    assert_int_equal(cfg.n_servers, 1);
    mcp_downstream_config_close(&cfg);
}

/* A ptc-mcp started by a ptc-mcp (through any wrapper) starts no processes; http entries are
 * fine. */
static void a_downstream_ptc_mcp_starts_no_processes(void **state)
{
    (void)state;
    assert_int_equal(setenv(MCP_DOWNSTREAM_PARENT_ENV, "4242", 1), 0);
    const char *json = "{\"mcpServers\": {\"sh\": {\"command\": \"/bin/sh\"}, "
                       "\"web\": {\"url\": \"http://127.0.0.1:9/mcp\"}}}";
    mcp_downstream_config_t cfg;
    char msg[256];
    int rc = parse(json, &cfg, msg, sizeof msg);
    unsetenv(MCP_DOWNSTREAM_PARENT_ENV);
    assert_int_equal(rc, MCP_OK);
    assert_int_equal(cfg.n_servers, 1);
    assert_string_equal(cfg.servers[0].name, "web");
    const mcp_downstream_problem_t *pr = problem(&cfg, "started as a downstream server by ptc-mcp");
    assert_non_null(pr);
    assert_true(pr->dropped);
    assert_non_null(strstr(pr->message, "pid 4242"));
    mcp_downstream_config_close(&cfg);
}

/* --check's report: every problem under the source's name, dropped ones counted; an unusable
 * config says why. */
static void check_reports_every_problem(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    cJSON *root = cJSON_Parse("{\"mcpServers\":{\"good\":{\"command\":\"true\",\"bogus\":1},"
                              "\"broken\":{\"args\":[]}}}");
    assert_int_equal(mcp_downstream_config_check(root, "--config F", out), 1);
    cJSON_Delete(root);
    root = cJSON_Parse("{\"mcpServers\":[]}");
    assert_int_equal(mcp_downstream_config_check(root, "--config G", out), MCP_EINVAL);
    cJSON_Delete(root);
    root = cJSON_Parse("{\"mcpServers\":{\"fine\":{\"command\":\"true\"}}}");
    assert_int_equal(mcp_downstream_config_check(root, "--config H", out), 0);
    cJSON_Delete(root);
    fclose(out);
    assert_non_null(strstr(buf, "config problems (--config F):\n"));
    assert_non_null(strstr(buf, "broken: left out: mcpServers.broken"));
    assert_non_null(strstr(buf, "good: warning: mcpServers.good"));
    assert_non_null(strstr(buf, "downstream servers: --config G: "));
    assert_null(strstr(buf, "(--config H)")); /* nothing to say */
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_stdio_and_http_entries),
        cmocka_unit_test(check_reports_every_problem),
        cmocka_unit_test(a_config_without_servers_is_empty),
        cmocka_unit_test(errors_name_the_entry_and_field),
        cmocka_unit_test(a_bad_entry_drops_only_itself),
        cmocka_unit_test(a_duplicate_name_drops_the_second),
        cmocka_unit_test(invalid_json_names_the_line_and_column),
        cmocka_unit_test(unknown_keys_are_warnings_naming_them),
        cmocka_unit_test(a_config_past_the_problems_cap_is_refused_whole),
        cmocka_unit_test(an_entry_with_too_many_headers_is_left_out),
        cmocka_unit_test(disabled_entries_stay_off_and_env_file_warns),
        cmocka_unit_test(an_entry_that_starts_itself_is_refused),
        cmocka_unit_test(a_downstream_ptc_mcp_starts_no_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
