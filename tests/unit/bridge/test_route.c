/* The bridge's router: where a call from code goes (a served tool, the user's own helpers, a
 * tool only described), the --confirm-writes confirmation (asked, approved, declined, not
 * possible, cancelled), searches answered at once or later, and every cancel path. The router
 * is driven through its ops table as the host drives it; the routes are fakes that record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge.h"

typedef struct fx {
    reg_catalog_t *cat;
    ptc_bridge_router_t *r;
    /* routes' view */
    bool served, custom, refuse_confirm, search_at_once;
    int call_rc;
    int ncalls, nconfirms, nsearches, ncancels, naudits;
    ptc_bridge_route_op_t *op; /* the last op the routes saw */
    cJSON *params;             /* the last confirmation's params */
    char tool[64];
    unsigned timeout_ms;
    bool cancel_ends; /* cancel reports an end (dropped by the router) */
    int handle_token; /* what the routes hand back as the handle */
    /* host's view */
    int ndone, err;
    char message[700];
    char text[64];
} fx_t;

static const reg_tool_t *f_find(void *data, const char *server, const char *tool)
{
    fx_t *f = data;
    return reg_catalog_find_tool(f->cat, server, tool);
}

static bool f_served(void *data, const char *server)
{
    (void)server;
    return ((fx_t *)data)->served;
}

static bool f_custom(void *data, const char *server)
{
    (void)server;
    return ((fx_t *)data)->custom;
}

static int f_call(void *data, ptc_bridge_route_op_t *op, const char *server, const char *tool,
                  const cJSON *args, unsigned timeout_ms, void **handle, char *msg, size_t n)
{
    fx_t *f = data;
    (void)server;
    (void)args;
    f->ncalls++;
    f->op = op;
    f->timeout_ms = timeout_ms;
    snprintf(f->tool, sizeof f->tool, "%s", tool);
    assert_int_equal(ptc_bridge_route_kind(op), PTC_BRIDGE_ROUTE_CALL);
    if (f->call_rc < 0) {
        snprintf(msg, n, "the server is restarting");
        return f->call_rc;
    }
    *handle = &f->handle_token;
    return 0;
}

static int f_confirm(void *data, ptc_bridge_route_op_t *op, const reg_tool_t *tool, cJSON *params,
                     unsigned timeout_ms, void **handle, char *msg, size_t n)
{
    fx_t *f = data;
    (void)timeout_ms;
    f->nconfirms++;
    f->op = op;
    cJSON_Delete(f->params);
    f->params = params;
    assert_int_equal(ptc_bridge_route_kind(op), PTC_BRIDGE_ROUTE_CONFIRM);
    if (f->refuse_confirm) {
        snprintf(msg, n, "%s: this client cannot ask the user", tool->id);
        return MCP_EDENIED;
    }
    *handle = &f->handle_token;
    return 0;
}

static int f_search(void *data, ptc_bridge_route_op_t *op, const char *query, int top_k,
                    const char *server, const char *category, void **handle)
{
    fx_t *f = data;
    (void)top_k;
    (void)server;
    (void)category;
    f->nsearches++;
    f->op = op;
    assert_int_equal(ptc_bridge_route_kind(op), PTC_BRIDGE_ROUTE_SEARCH);
    if (f->search_at_once) {
        cJSON *sc = cJSON_CreateObject();
        cJSON_AddStringToObject(sc, "query", query);
        ptc_bridge_route_done(op, 0, sc, NULL);
        cJSON_Delete(sc);
        return 0;
    }
    *handle = &f->handle_token;
    return 0;
}

static void f_cancel(void *data, ptc_bridge_route_op_t *op, void *handle)
{
    fx_t *f = data;
    f->ncancels++;
    assert_ptr_equal(handle, &f->handle_token);
    if (f->cancel_ends) { /* as mcp_client_call_cancel does: the end comes during the cancel */
        if (ptc_bridge_route_kind(op) == PTC_BRIDGE_ROUTE_CONFIRM)
            ptc_bridge_route_confirmed(op, MCP_ECANCELED, NULL, "the run ended");
        else
            ptc_bridge_route_done(op, MCP_ECANCELED, NULL, "the run ended");
    }
}

static void f_audit(void *data, const cJSON *record)
{
    (void)record;
    ((fx_t *)data)->naudits++;
}

static const ptc_bridge_routes_t routes = {
    .find_tool = f_find,
    .served = f_served,
    .is_custom = f_custom,
    .call = f_call,
    .confirm = f_confirm,
    .search = f_search,
    .cancel = f_cancel,
    .audit = f_audit,
};

/* The host's done. */
static void host_done(void *data, int err, const cJSON *result, const char *message)
{
    fx_t *f = data;
    f->ndone++;
    f->err = err;
    snprintf(f->message, sizeof f->message, "%s", message ? message : "");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(result, "text");
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(result, "query");
    snprintf(f->text, sizeof f->text, "%s",
             cJSON_IsString(t)   ? t->valuestring
             : cJSON_IsString(q) ? q->valuestring
                                 : "");
}

static int fx_setup(fx_t *f, bool confirm_writes)
{
    memset(f, 0, sizeof *f);
    f->served = true;
    if (reg_catalog_new(&f->cat) != 0) return -1;
    const char *tools = "["
                        "{\"server\":\"fs\",\"name\":\"write_file\"},"
                        "{\"server\":\"fs\",\"name\":\"read_file\","
                        "\"annotations\":{\"readOnlyHint\":true}},"
                        "{\"server\":\"custom\",\"name\":\"stats.mean\"}"
                        "]";
    cJSON *doc = cJSON_Parse(tools);
    char msg[200];
    int rc = doc != NULL ? reg_catalog_load_json(f->cat, doc, NULL, NULL, msg, sizeof msg) : -1;
    cJSON_Delete(doc);
    if (rc == 0) rc = ptc_bridge_router_new(&routes, f, confirm_writes, &f->r);
    return rc;
}

static int setup_plain(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    *state = f;
    return f != NULL ? fx_setup(f, false) : -1;
}

static int setup_confirm(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    *state = f;
    return f != NULL ? fx_setup(f, true) : -1;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    ptc_bridge_router_free(f->r);
    reg_catalog_free(f->cat);
    cJSON_Delete(f->params);
    free(f);
    return 0;
}

/* Starts a call of fs/TOOL (or SERVER/TOOL) through the router as the host does. */
static int route_call(fx_t *f, const char *server, const char *tool, void **handle)
{
    const reg_tool_t *t = ptc_bridge_router_ops.find_tool(f->r, server, tool);
    assert_non_null(t);
    cJSON *args = cJSON_Parse("{\"path\":\"/tmp/x\",\"text\":\"hi\"}");
    assert_non_null(args);
    int rc = ptc_bridge_router_ops.call(f->r, t, args, 5000, host_done, f, handle);
    cJSON_Delete(args);
    return rc;
}

static void answer_text(ptc_bridge_route_op_t *op, const char *text)
{
    cJSON *r = cJSON_CreateObject();
    assert_non_null(r);
    cJSON_AddStringToObject(r, "text", text);
    ptc_bridge_route_done(op, 0, r, NULL);
    cJSON_Delete(r);
}

static void a_served_call_goes_to_the_wiring_and_its_answer_to_the_host(void **state)
{
    fx_t *f = *state;
    void *h = NULL;
    assert_int_equal(route_call(f, "fs", "write_file", &h), 0);
    assert_non_null(h);
    assert_int_equal(f->ncalls, 1);
    assert_string_equal(f->tool, "write_file");
    assert_int_equal(f->timeout_ms, 5000);
    assert_int_equal(f->ndone, 0);
    answer_text(f->op, "written");
    assert_int_equal(f->ndone, 1);
    assert_int_equal(f->err, 0);
    assert_string_equal(f->text, "written");
}

static void a_call_the_wiring_cannot_send_is_answered_with_its_sentence(void **state)
{
    fx_t *f = *state;
    f->call_rc = MCP_ECLOSED;
    void *h = &f->ncalls;
    assert_int_equal(route_call(f, "fs", "write_file", &h), 0);
    assert_null(h); /* answered: nothing to cancel */
    assert_int_equal(f->ndone, 1);
    assert_int_equal(f->err, MCP_ECLOSED);
    assert_string_equal(f->message, "the server is restarting");
}

static void a_tool_nobody_serves_is_refused_saying_where_it_lives(void **state)
{
    fx_t *f = *state;
    void *h = NULL;
    f->served = false;
    assert_int_equal(route_call(f, "fs", "write_file", &h), 0);
    assert_null(h);
    assert_int_equal(f->ncalls, 0);
    assert_int_equal(f->err, MCP_ENOTSUP);
    assert_non_null(strstr(f->message, "fs__write_file is only described (--tools-file)"));
    f->custom = true;
    assert_int_equal(route_call(f, "custom", "stats.mean", &h), 0);
    assert_int_equal(f->err, MCP_ENOTSUP);
    assert_non_null(strstr(f->message, "one of your own helpers (--custom-tools)"));
    assert_non_null(strstr(f->message, "import stats; stats.mean(...)"));
    assert_int_equal(f->ndone, 2);
}

static void cancelling_a_call_stops_the_wiring_and_drops_a_late_end(void **state)
{
    fx_t *f = *state;
    void *h = NULL;
    f->cancel_ends = true;
    assert_int_equal(route_call(f, "fs", "write_file", &h), 0);
    ptc_bridge_router_ops.cancel(f->r, h);
    assert_int_equal(f->ncancels, 1);
    assert_int_equal(f->ndone, 0); /* the end reported during the cancel went nowhere */
}

static void confirm_writes_asks_before_a_write_and_calls_on_approval(void **state)
{
    fx_t *f = *state;
    void *h = NULL;
    assert_int_equal(route_call(f, "fs", "write_file", &h), 0);
    assert_non_null(h);
    assert_int_equal(f->nconfirms, 1);
    assert_int_equal(f->ncalls, 0);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(f->params, "message");
    assert_true(cJSON_IsString(m));
    assert_non_null(strstr(m->valuestring, "wants to call fs__write_file with {\"path\""));
    cJSON *answer = cJSON_Parse("{\"action\":\"accept\",\"content\":{\"approve\":true}}");
    ptc_bridge_route_confirmed(f->op, 0, answer, NULL);
    cJSON_Delete(answer);
    assert_int_equal(f->ncalls, 1);
    assert_int_equal(f->ndone, 0);
    answer_text(f->op, "written");
    assert_int_equal(f->ndone, 1);
    assert_string_equal(f->text, "written");
}

static void confirm_writes_asks_nothing_for_a_read_only_tool(void **state)
{
    fx_t *f = *state;
    void *h = NULL;
    assert_int_equal(route_call(f, "fs", "read_file", &h), 0);
    assert_int_equal(f->nconfirms, 0);
    assert_int_equal(f->ncalls, 1);
    answer_text(f->op, "read");
    assert_int_equal(f->ndone, 1);
}

static void a_declined_or_unanswered_confirmation_is_denied(void **state)
{
    fx_t *f = *state;
    void *h = NULL;
    assert_int_equal(route_call(f, "fs", "write_file", &h), 0);
    cJSON *answer = cJSON_Parse("{\"action\":\"accept\",\"content\":{\"approve\":false}}");
    ptc_bridge_route_confirmed(f->op, 0, answer, NULL);
    cJSON_Delete(answer);
    assert_int_equal(f->ncalls, 0);
    assert_int_equal(f->err, MCP_EDENIED);
    assert_string_equal(f->message,
                        "fs__write_file was not confirmed by the user (--confirm-writes)");
    assert_int_equal(route_call(f, "fs", "write_file", &h), 0);
    ptc_bridge_route_confirmed(f->op, MCP_ETIMEDOUT, NULL, "no answer in time");
    assert_int_equal(f->err, MCP_ETIMEDOUT);
    assert_string_equal(f->message, "fs__write_file was not confirmed by the user "
                                    "(--confirm-writes): no answer in time");
    /* Approved, but the server went away meanwhile: nothing is called. */
    assert_int_equal(route_call(f, "fs", "write_file", &h), 0);
    f->served = false;
    answer = cJSON_Parse("{\"action\":\"accept\",\"content\":{\"approve\":true}}");
    ptc_bridge_route_confirmed(f->op, 0, answer, NULL);
    cJSON_Delete(answer);
    assert_int_equal(f->ncalls, 0);
    assert_int_equal(f->err, MCP_EDENIED);
    assert_int_equal(f->ndone, 3);
}

static void a_confirmation_that_cannot_be_asked_is_a_refusal(void **state)
{
    fx_t *f = *state;
    void *h = &f->ncalls;
    f->refuse_confirm = true;
    assert_int_equal(route_call(f, "fs", "write_file", &h), 0);
    assert_null(h);
    assert_int_equal(f->ndone, 1);
    assert_int_equal(f->err, MCP_EDENIED);
    assert_string_equal(f->message, "fs__write_file: this client cannot ask the user");
}

static void cancelling_a_confirmation_stops_it_without_a_call(void **state)
{
    fx_t *f = *state;
    void *h = NULL;
    f->cancel_ends = true;
    assert_int_equal(route_call(f, "fs", "write_file", &h), 0);
    ptc_bridge_router_ops.cancel(f->r, h);
    assert_int_equal(f->ncancels, 1);
    assert_int_equal(f->ncalls, 0);
    assert_int_equal(f->ndone, 0);
}

static void searches_are_answered_at_once_or_later_and_can_be_cancelled(void **state)
{
    fx_t *f = *state;
    void *h = &f->ncalls;
    f->search_at_once = true;
    assert_int_equal(ptc_bridge_router_ops.search(f->r, "weather", 5, NULL, NULL, host_done, f, &h),
                     0);
    assert_null(h); /* answered before it returned: nothing to cancel */
    assert_int_equal(f->ndone, 1);
    assert_string_equal(f->text, "weather");
    f->search_at_once = false;
    assert_int_equal(ptc_bridge_router_ops.search(f->r, "rain", 5, NULL, NULL, host_done, f, &h),
                     0);
    assert_non_null(h);
    ptc_bridge_route_done(f->op, 0, NULL, NULL);
    assert_int_equal(f->ndone, 2);
    assert_int_equal(ptc_bridge_router_ops.search(f->r, "snow", 5, NULL, NULL, host_done, f, &h),
                     0);
    ptc_bridge_router_ops.cancel(f->r, h);
    assert_int_equal(f->ncancels, 1);
    assert_int_equal(f->ndone, 2);
    assert_int_equal(f->nsearches, 3);
}

static void audit_records_reach_the_wiring(void **state)
{
    fx_t *f = *state;
    cJSON *rec = cJSON_CreateObject();
    ptc_bridge_router_ops.audit(f->r, rec);
    cJSON_Delete(rec);
    assert_int_equal(f->naudits, 1);
}

static void the_confirmation_asks_for_one_required_boolean(void **state)
{
    (void)state;
    cJSON *args = cJSON_Parse("{\"a\":1}");
    cJSON *p = ptc_bridge_confirm_params("s__t", args);
    assert_non_null(p);
    char *text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(p, "requestedSchema"));
    assert_string_equal(text,
                        "{\"properties\":{\"approve\":{\"type\":\"boolean\",\"title\":"
                        "\"Allow this call\"}},\"required\":[\"approve\"],\"type\":\"object\"}");
    cJSON_free(text);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(p, "message")->valuestring,
        "Code running in execute_code wants to call s__t with {\"a\":1}. Allow it?");
    cJSON_Delete(p);
    cJSON_Delete(args);
    const char *yes = "{\"action\":\"accept\",\"content\":{\"approve\":true}}";
    const char *no[] = {"{\"action\":\"decline\",\"content\":{\"approve\":true}}",
                        "{\"action\":\"accept\",\"content\":{\"approve\":\"yes\"}}",
                        "{\"action\":\"accept\"}", "{}"};
    cJSON *r = cJSON_Parse(yes);
    assert_true(ptc_bridge_confirm_approved(r));
    cJSON_Delete(r);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        r = cJSON_Parse(no[i]);
        assert_false(ptc_bridge_confirm_approved(r));
        cJSON_Delete(r);
    }
    assert_false(ptc_bridge_confirm_approved(NULL));
}

static void a_router_needs_its_routes(void **state)
{
    (void)state;
    ptc_bridge_router_t *r = (ptc_bridge_router_t *)&r;
    ptc_bridge_routes_t partial = routes;
    partial.confirm = NULL;
    assert_int_equal(ptc_bridge_router_new(&partial, NULL, true, &r), PTC_BRIDGE_EINVAL);
    assert_null(r);
    assert_int_equal(ptc_bridge_router_new(&partial, NULL, false, &r), 0);
    ptc_bridge_router_free(r);
    partial.call = NULL;
    assert_int_equal(ptc_bridge_router_new(&partial, NULL, false, &r), PTC_BRIDGE_EINVAL);
}

/* ptc_bridge_host_open hands back the sandbox's end of a working bridge. */
static void host_open_serves_the_router_on_a_socketpair(void **state)
{
    fx_t *f = *state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    mcp_logger_t lg = {.out = stderr, .level = MCP_LOG_WARNING};
    ptc_bridge_host_t *h = NULL;
    char msg[200];
    int fd = ptc_bridge_host_open(&loop, NULL, &routes, f, &lg, &h, msg, sizeof msg);
    assert_true(fd >= 0);
    assert_non_null(h);
    const char *req =
        "{\"id\":1,\"method\":\"call\",\"params\":{\"server\":\"fs\",\"tool\":\"read_file\"}}\n";
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    for (int i = 0; i < 1000 && f->ncalls == 0; i++)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(f->ncalls, 1);
    answer_text(f->op, "read");
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "\"id\":1,\"result\":{\"text\":\"read\"}"));
    assert_int_equal(ptc_bridge_host_harvest(h, NULL, NULL), 1); /* the call counts */
    ptc_bridge_host_close(h, NULL);
    close(fd);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_served_call_goes_to_the_wiring_and_its_answer_to_the_host,
                                        setup_plain, teardown),
        cmocka_unit_test_setup_teardown(a_call_the_wiring_cannot_send_is_answered_with_its_sentence,
                                        setup_plain, teardown),
        cmocka_unit_test_setup_teardown(a_tool_nobody_serves_is_refused_saying_where_it_lives,
                                        setup_plain, teardown),
        cmocka_unit_test_setup_teardown(cancelling_a_call_stops_the_wiring_and_drops_a_late_end,
                                        setup_plain, teardown),
        cmocka_unit_test_setup_teardown(confirm_writes_asks_before_a_write_and_calls_on_approval,
                                        setup_confirm, teardown),
        cmocka_unit_test_setup_teardown(confirm_writes_asks_nothing_for_a_read_only_tool,
                                        setup_confirm, teardown),
        cmocka_unit_test_setup_teardown(a_declined_or_unanswered_confirmation_is_denied,
                                        setup_confirm, teardown),
        cmocka_unit_test_setup_teardown(a_confirmation_that_cannot_be_asked_is_a_refusal,
                                        setup_confirm, teardown),
        cmocka_unit_test_setup_teardown(cancelling_a_confirmation_stops_it_without_a_call,
                                        setup_confirm, teardown),
        cmocka_unit_test_setup_teardown(searches_are_answered_at_once_or_later_and_can_be_cancelled,
                                        setup_plain, teardown),
        cmocka_unit_test_setup_teardown(audit_records_reach_the_wiring, setup_plain, teardown),
        cmocka_unit_test(the_confirmation_asks_for_one_required_boolean),
        cmocka_unit_test(a_router_needs_its_routes),
        cmocka_unit_test_setup_teardown(host_open_serves_the_router_on_a_socketpair, setup_plain,
                                        teardown),
    };
    return cmocka_run_group_tests_name("bridge_route", tests, NULL, NULL);
}
