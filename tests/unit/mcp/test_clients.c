/* The questions asked of a set of downstream clients (mcp_clients_*): two clients that were
 * never started, then one http client started without an HTTP client, which fails at once,
 * and a set created and started from the config. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

typedef struct env {
    uv_loop_t loop;
    FILE *logf;
    char *logbuf;
    size_t loglen;
    mcp_logger_t lg;
    mcp_downstream_config_t cfg;
    mcp_client_hooks_t hooks;
    mcp_client_t *c[2];
} env_t;

static int setup(void **state)
{
    env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    assert_int_equal(uv_loop_init(&e->loop), 0);
    e->logf = open_memstream(&e->logbuf, &e->loglen);
    assert_non_null(e->logf);
    e->lg.out = e->logf;
    e->lg.level = MCP_LOG_DEBUG;
    cJSON *root = cJSON_Parse("{\"mcpServers\":{\"alpha\":{\"command\":\"true\"},"
                              "\"beta\":{\"type\":\"http\",\"url\":\"http://127.0.0.1:9/mcp\"}}}");
    assert_non_null(root);
    char msg[256];
    assert_int_equal(mcp_downstream_config_from_json(root, &e->cfg, msg, sizeof msg), MCP_OK);
    cJSON_Delete(root);
    assert_int_equal(e->cfg.n_servers, 2);
    mcp_client_opts_t co;
    mcp_client_opts_default(&co);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(
            mcp_client_new(&e->loop, &e->cfg.servers[i], &co, &e->hooks, &e->lg, &e->c[i]), MCP_OK);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    for (size_t i = 0; i < 2; i++)
        mcp_client_free(e->c[i]);
    /* A freed client closes its handles on the loop: the loop closes once they have. */
    uv_run(&e->loop, UV_RUN_DEFAULT);
    int closed = uv_loop_close(&e->loop);
    fclose(e->logf);
    free(e->logbuf);
    mcp_downstream_config_close(&e->cfg);
    free(e);
    assert_int_equal(closed, 0);
    return 0;
}

/* The config's order is kept by the parser or not: the tests name clients by name. */
static mcp_client_t *named(env_t *e, const char *name)
{
    mcp_client_t *c = mcp_clients_find(e->c, 2, name);
    assert_non_null(c);
    assert_string_equal(mcp_client_name(c), name);
    return c;
}

static void test_never_started(void **state)
{
    env_t *e = *state;
    named(e, "alpha");
    named(e, "beta");
    assert_null(mcp_clients_find(e->c, 2, "gamma"));
    assert_null(mcp_clients_find(e->c, 2, NULL));
    assert_null(mcp_clients_find(e->c, 0, "alpha"));

    char buf[256];
    size_t need = mcp_clients_status(e->c, 2, buf, sizeof buf);
    assert_int_equal(need, strlen(buf));
    assert_non_null(strstr(buf, "alpha: stopped, 0 tools\n"));
    assert_non_null(strstr(buf, "beta: stopped, 0 tools\n"));
    /* Truncated: still terminated, and the length the whole text needs is returned. */
    char small[8];
    assert_int_equal(mcp_clients_status(e->c, 2, small, sizeof small), need);
    assert_int_equal(strlen(small), sizeof small - 1);

    cJSON *j = mcp_clients_status_json(e->c, 2);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(j), 2);
    const cJSON *o;
    cJSON_ArrayForEach(o, j)
    {
        assert_string_equal(cJSON_GetObjectItem(o, "state")->valuestring, "stopped");
        assert_int_equal(cJSON_GetObjectItem(o, "tools")->valueint, 0);
        assert_null(cJSON_GetObjectItem(o, "reason"));
    }
    cJSON_Delete(j);

    assert_int_equal(mcp_clients_count_in(e->c, 2, MCP_CLIENT_STOPPED), 2);
    assert_int_equal(mcp_clients_count_in(e->c, 2, MCP_CLIENT_FAILED), 0);
    assert_false(mcp_clients_settled(e->c, 2));
    assert_true(mcp_clients_settled(e->c, 0));
    assert_int_equal(mcp_clients_starting(e->c, 2, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
}

static void test_http_without_client_fails(void **state)
{
    env_t *e = *state;
    mcp_client_t *beta = named(e, "beta");
    assert_int_equal(mcp_client_start(beta), MCP_OK);
    char buf[256];
    assert_int_equal(mcp_clients_starting(e->c, 2, buf, sizeof buf), 1);
    assert_string_equal(buf, "beta");
    assert_false(mcp_clients_settled(e->c, 2));
    for (int i = 0; i < 100 && mcp_client_state(beta, NULL) == MCP_CLIENT_STARTING; i++)
        uv_run(&e->loop, UV_RUN_ONCE);
    assert_int_equal(mcp_client_state(beta, NULL), MCP_CLIENT_FAILED);
    assert_int_equal(mcp_clients_count_in(e->c, 2, MCP_CLIENT_FAILED), 1);
    assert_int_equal(mcp_clients_starting(e->c, 2, buf, sizeof buf), 0);

    const char *reason = NULL;
    mcp_client_state(beta, &reason);
    assert_non_null(reason);
    mcp_clients_status(e->c, 2, buf, sizeof buf);
    char line[200];
    snprintf(line, sizeof line, "beta: failed, 0 tools; %s\n", reason);
    assert_non_null(strstr(buf, line));
    cJSON *j = mcp_clients_status_json(e->c, 2);
    assert_non_null(j);
    bool seen = false;
    const cJSON *o;
    cJSON_ArrayForEach(o, j)
    {
        if (strcmp(cJSON_GetObjectItem(o, "name")->valuestring, "beta") != 0) continue;
        assert_string_equal(cJSON_GetObjectItem(o, "reason")->valuestring, reason);
        seen = true;
    }
    assert_true(seen);
    cJSON_Delete(j);

    mcp_client_refusal(beta, MCP_ESTATE, buf, sizeof buf);
    snprintf(line, sizeof line, "server beta cannot take the call (failed: %s): %s", reason,
             mcp_strerror(MCP_ESTATE));
    assert_string_equal(buf, line);
    /* The stopped one: no reason, no colon after the state. */
    mcp_client_refusal(named(e, "alpha"), MCP_ESTATE, buf, sizeof buf);
    snprintf(line, sizeof line, "server alpha cannot take the call (stopped): %s",
             mcp_strerror(MCP_ESTATE));
    assert_string_equal(buf, line);
}

/* Every entry gets a client, started at once; the http one without an HTTP client fails. */
static void test_start_all(void **state)
{
    env_t *e = *state;
    mcp_client_opts_t co;
    mcp_client_opts_default(&co);
    mcp_client_t **set = NULL;
    size_t n = 0;
    assert_int_equal(mcp_clients_start_all(&e->loop, &e->cfg, &co, &e->hooks, &e->lg, &set, &n),
                     MCP_OK);
    assert_int_equal(n, 2);
    assert_int_equal(mcp_clients_count_in(set, n, MCP_CLIENT_STOPPED), 0);
    mcp_client_t *beta = mcp_clients_find(set, n, "beta");
    assert_non_null(beta);
    for (int i = 0; i < 100 && mcp_client_state(beta, NULL) == MCP_CLIENT_STARTING; i++)
        uv_run(&e->loop, UV_RUN_NOWAIT);
    assert_int_equal(mcp_client_state(beta, NULL), MCP_CLIENT_FAILED);
    mcp_clients_free(set, n);

    mcp_downstream_config_t none = {0};
    assert_int_equal(mcp_clients_start_all(&e->loop, &none, &co, &e->hooks, &e->lg, &set, &n),
                     MCP_OK);
    assert_null(set);
    assert_int_equal(n, 0);
}

int main(void)
{
    /* alpha ("true") exits while its client writes the handshake: as in ptc-mcp, a write to
     * a closed pipe is an error code, not a signal. */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_never_started, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_without_client_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_all, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
