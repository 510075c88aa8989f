/* The downstream config parser: Claude Desktop's format as users write it, and errors that
 * name the entry and field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "mcp.h"

static int parse(const char *json, mcp_downstream_config_t *cfg, char *msg, size_t n)
{
    return mcp_downstream_config_parse(json, strlen(json), cfg, msg, n);
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
    char msg[256];
    assert_int_equal(parse(json, &cfg, msg, sizeof msg), MCP_OK);
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

static void errors_name_the_entry_and_field(void **state)
{
    (void)state;
    expect_error("{\"mcpServers\": {\"a\": {\"command\": \"x\"},\n\"b\": {\"command\": 1}}}",
                 "mcpServers.b.command: expected a string");
    expect_error("{\"mcpServers\": {\"gh\": {\"command\": \"x\", \"args\": [\"a\", 2]}}}",
                 "mcpServers.gh.args[1]: expected a string");
    expect_error("{\"mcpServers\": {\"gh\": {\"command\": \"x\", \"env\": {\"PORT\": 8080}}}}",
                 "mcpServers.gh.env.PORT: expected a string");
    expect_error("{\"mcpServers\": {\"gh\": {\"args\": []}}}",
                 "mcpServers.gh: a stdio server needs");
    expect_error("{\"mcpServers\": {\"gh\": {\"type\": \"ws\", \"url\": \"x\"}}}",
                 "mcpServers.gh.type: \"ws\" is not one of");
    expect_error("{\"mcpServers\": {\"gh\": {\"type\": \"http\", \"url\": \"ftp://x\"}}}",
                 "mcpServers.gh.url");
    expect_error("{\"mcpServers\": {\"gh\": [1]}}", "mcpServers.gh: expected an object");
    expect_error("{\"mcpServers\": []}", "mcpServers: expected an object");
    expect_error("[]", "must be a JSON object");
    expect_error("{\"mcpServers\": {\"gh\": {\"command\": \"x\", \"args\": \"-y\"}}}",
                 "mcpServers.gh.args: expected an array");
}

static void invalid_json_names_the_line(void **state)
{
    (void)state;
    expect_error("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}", "near line 3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_stdio_and_http_entries),
        cmocka_unit_test(a_config_without_servers_is_empty),
        cmocka_unit_test(errors_name_the_entry_and_field),
        cmocka_unit_test(invalid_json_names_the_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
