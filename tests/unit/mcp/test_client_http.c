/* The downstream client over Streamable HTTP against a small fake server that answers with
 * plain JSON bodies (tests/fixtures/fake_http_downstream.py): session id, protocol version and
 * the entry's ${VAR}-expanded headers on every POST, and a reconnect when the server forgets
 * the session (HTTP 404). SSE answers are covered by the integration test's real server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"
#include "client_wait.h"

#define FMT(buf, n, ...) assert_true((size_t)snprintf(buf, n, __VA_ARGS__) < (n))
/* A guard against a hang, not a speed assertion. */
#define GUARD_MS 60000

typedef struct env {
    client_env_t ce; /* the loop, its guard, the log */
    FILE *server;
    int server_pid;
    char port[16];
    mcp_http_client_t *http;
    mcp_downstream_config_t cfg;
    mcp_client_t *c;
    mcp_client_hooks_t hooks;
    char *reasons[32];
    size_t n_reasons;
} env_t;

typedef struct result {
    int calls, err;
    char *text;
} result_t;

static int setup(void **state)
{
    env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    client_env_open(&e->ce, GUARD_MS);
    char here[PATH_MAX], cmd[PATH_MAX + 64];
    FMT(here, sizeof here, "%s", __FILE__);
    FMT(cmd, sizeof cmd, "exec python3 %s/fixtures/fake_http_downstream.py",
        dirname(dirname(dirname(here))));
    e->server = popen(cmd, "r");
    assert_non_null(e->server);
    /* A blocking read before the loop runs: the fixture prints its port, then serves. */
    assert_int_equal(fscanf(e->server, "%15s %d", e->port, &e->server_pid), 2);
    assert_int_equal(mcp_http_client_new(&e->ce.loop, NULL, &e->ce.lg, &e->http), 0);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    if (e->c != NULL) mcp_client_free(e->c);
    mcp_http_client_free(e->http);
    /* fails on a handle left open (a leak) */
    client_env_close(&e->ce, GUARD_MS);
    kill(e->server_pid, SIGTERM);
    pclose(e->server);
    for (size_t i = 0; i < e->n_reasons; i++)
        free(e->reasons[i]);
    mcp_downstream_config_close(&e->cfg);
    free(e);
    return 0;
}

static void run_until(env_t *e, bool (*pred)(void *), void *arg)
{
    client_run_until(&e->ce.loop, &e->ce.guard, &e->ce.guard_fired, e->ce.logf, &e->ce.logbuf, pred,
                     arg);
}

static void on_state(mcp_client_t *c, mcp_client_state_t st, const char *reason, void *data)
{
    env_t *e = data;
    (void)c;
    (void)st;
    if (reason != NULL && e->n_reasons < 32) e->reasons[e->n_reasons++] = strdup(reason);
}

static bool reason_seen(env_t *e, const char *needle)
{
    for (size_t i = 0; i < e->n_reasons; i++)
        if (strstr(e->reasons[i], needle) != NULL) return true;
    return false;
}

static bool is_ready(void *arg)
{
    env_t *e = arg;
    return mcp_client_state(e->c, NULL) == MCP_CLIENT_READY;
}

static bool ready_again(void *arg)
{
    env_t *e = arg;
    return mcp_client_spawn_count(e->c) >= 2 && is_ready(e);
}

static bool call_done(void *arg)
{
    result_t *r = arg;
    return r->calls > 0;
}

static void on_result(void *data, int err, const cJSON *result, const cJSON *error,
                      const char *message)
{
    result_t *r = data;
    (void)error;
    r->calls++;
    r->err = err;
    if (err == 0) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
        r->text = strdup(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(content, 0), "text")->valuestring);
    } else {
        r->text = strdup(message);
    }
}

static result_t call(env_t *e, const char *tool)
{
    result_t r = {0};
    assert_int_equal(mcp_client_call_tool(e->c, tool, NULL, 0, NULL, on_result, &r, NULL), 0);
    run_until(e, call_done, &r);
    return r;
}

static void http_session_headers_and_reconnect(void **state)
{
    env_t *e = *state;
    const char *json = "{\"mcpServers\": {\"web\": {\"type\": \"http\", \"url\": "
                       "\"http://127.0.0.1:${PTC_T_PORT}/mcp\", \"headers\": {\"X-Token\": "
                       "\"Bearer ${PTC_T_TOKEN}\"}}}}";
    char msg[256];
    assert_int_equal(mcp_downstream_config_parse(json, strlen(json), &e->cfg, msg, sizeof msg), 0);
    char portvar[64], token[] = "PTC_T_TOKEN=s3cret";
    FMT(portvar, sizeof portvar, "PTC_T_PORT=%s", e->port);
    char *const environ_[] = {portvar, token, NULL};
    mcp_client_opts_t o;
    mcp_client_opts_default(&o);
    o.environ = environ_;
    o.http = e->http;
    o.restart_base_ms = 20;
    e->hooks = (mcp_client_hooks_t){on_state, NULL, NULL, NULL, e};
    assert_int_equal(
        mcp_client_new(&e->ce.loop, &e->cfg.servers[0], &o, &e->hooks, &e->ce.lg, &e->c), 0);
    assert_int_equal(mcp_client_start(e->c), 0);
    run_until(e, is_ready, e);
    assert_int_equal(cJSON_GetArraySize(mcp_client_tools(e->c)), 5);
    assert_int_equal(mcp_client_pid(e->c), 0);

    result_t r = call(e, "headers");
    assert_int_equal(r.err, 0);
    cJSON *h = cJSON_Parse(r.text);
    assert_string_equal(cJSON_GetObjectItem(h, "x-token")->valuestring, "Bearer s3cret");
    assert_string_equal(cJSON_GetObjectItem(h, "mcp-protocol-version")->valuestring, "2025-11-25");
    assert_true(cJSON_IsString(cJSON_GetObjectItem(h, "mcp-session-id")));
    assert_non_null(strstr(cJSON_GetObjectItem(h, "accept")->valuestring, "text/event-stream"));
    cJSON_Delete(h);
    free(r.text);

    /* A call that times out ends its POST; the session goes on. */
    result_t slow = {0};
    assert_int_equal(mcp_client_call_tool(e->c, "slow", NULL, 300, NULL, on_result, &slow, NULL),
                     0);
    run_until(e, call_done, &slow);
    assert_int_equal(slow.err, MCP_ETIMEDOUT);
    free(slow.text);
    r = call(e, "echo");
    assert_int_equal(r.err, 0);
    free(r.text);

    r = call(e, "forget");
    assert_int_equal(r.err, 0);
    free(r.text);
    /* The server lost our session: the call fails with the reason and the client reconnects
     * with a fresh initialize. */
    r = call(e, "echo");
    assert_int_equal(r.err, MCP_ECLOSED);
    assert_non_null(strstr(r.text, "no longer knows our session"));
    free(r.text);
    run_until(e, ready_again, e);
    assert_true(reason_seen(e, "restarting in 20 ms (attempt 1 of 5)"));
    r = call(e, "echo");
    assert_int_equal(r.err, 0);
    free(r.text);
}

int main(void)
{
    /* As in the binary: a server that exits while we write must not kill the test. */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(http_session_headers_and_reconnect, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
