/* The relay (mcp_relay_*) with the fake stdio server (tests/fixtures/fake_downstream.py) and two
 * sink sessions of our own server, alice's and bob's: a downstream server's sampling and
 * elicitation go to the client whose call waits on it and to no other, a request nobody's call
 * owns goes to the only capable session or is refused; exposed tools are listed under the
 * owner's names and proxied; a stateless caller's proxied call whose legacy server asks for
 * input parks behind a handle that only its caller, with the same arguments, can continue,
 * once, before it expires, within the cap, and that the relay's stop ends; a legacy server's
 * request with calls of two clients waiting on it is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "client_wait.h"
#include "sink.h"

#define FMT(buf, n, ...) assert_true((size_t)snprintf(buf, n, __VA_ARGS__) < (n))

/* A guard against a hang, not a speed assertion. */
#define GUARD_MS 60000

/* The _meta of a 2026-07-28 request from a client that can sample and elicit. */
#define MODERN_META                                                                                \
    "\"_meta\":{\"" MCP_META_PROTOCOL_VERSION "\":\"2026-07-28\",\"" MCP_META_CLIENT_CAPABILITIES  \
    "\":{\"sampling\":{},\"elicitation\":{}}}"

#define SAMPLED                                                                                    \
    "{\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":\"hi\"},\"model\":"           \
    "\"relay-model\"}"

typedef struct env {
    client_env_t ce; /* the loop, its guard, the log */
    mcp_downstream_config_t cfg;
    mcp_server_t *srv;
    mcp_session_t *a, *b; /* alice's and bob's */
    sink_t sa, sb;
    mcp_client_hooks_t hooks;
    mcp_relay_t *relay;
    char id[200]; /* the name the tools callback gave last */
    /* relay_ask, the test's own tool calling the fake's "ask" for its caller */
    mcp_call_t *call;
    mcp_client_call_t *dcall;
    mcp_relay_owner_t *owner;
    const char *busy; /* what the asker says while set */
    /* a downstream call made by the test itself (no caller owns it) */
    bool done;
    char *text;
} env_t;

static void run_until(env_t *e, bool (*pred)(void *), void *arg)
{
    client_run_until(&e->ce.loop, &e->ce.guard, &e->ce.guard_fired, e->ce.logf, &e->ce.logbuf, pred,
                     arg);
}

/* --- the owner's side --------------------------------------------------------------------- */

/* The fake's tools under "fake__NAME", in its order (mcp_relay_tools_fn). */
static bool list_tools(void *data, const char *server, size_t *pos, mcp_relay_tool_t *out)
{
    env_t *e = data;
    const cJSON *t =
        cJSON_GetArrayItem(mcp_client_tools(mcp_relay_client(e->relay, server)), (int)*pos);
    const cJSON *name = cJSON_GetObjectItem(t, "name");
    if (!cJSON_IsString(name)) return false;
    (*pos)++;
    FMT(e->id, sizeof e->id, "%s__%s", server, name->valuestring);
    *out = (mcp_relay_tool_t){.id = e->id,
                              .name = name->valuestring,
                              .description =
                                  cJSON_GetStringValue(cJSON_GetObjectItem(t, "description")),
                              .input_schema = cJSON_GetObjectItem(t, "inputSchema")};
    return true;
}

static void on_tools(mcp_client_t *c, const cJSON *tools, void *data)
{
    env_t *e = data;
    (void)tools;
    mcp_relay_relist(e->relay, mcp_client_name(c));
}

static mcp_call_t *asker_call(void *data, const char **busy)
{
    env_t *e = data;
    *busy = e->busy;
    return e->busy != NULL ? NULL : e->call;
}

static void ask_done(void *data, int err, const cJSON *result, const cJSON *error,
                     const char *message)
{
    env_t *e = data;
    (void)error;
    mcp_relay_disown(e->owner);
    e->owner = NULL;
    char *text = result != NULL ? cJSON_PrintUnformatted(result) : NULL;
    mcp_call_finish_text(e->call, err < 0, "%s", text != NULL ? text : message);
    free(text);
    e->call = NULL;
}

/* Calls the fake's "ask" (which sends ping, roots/list, sampling, elicitation and foo/bar, and
 * answers with what each got) for its caller, noted with the relay. */
static void tool_relay_ask(mcp_call_t *call, const cJSON *args, void *data)
{
    env_t *e = data;
    (void)args;
    mcp_client_t *c = mcp_relay_client(e->relay, "fake");
    e->call = call;
    assert_int_equal(mcp_client_call_tool(c, "ask", NULL, 30000, NULL, ask_done, e, &e->dcall), 0);
    mcp_relay_asker_t asker = {.call = asker_call, .data = e};
    e->owner = mcp_relay_own(e->relay, c, e->dcall, &asker);
    assert_non_null(e->owner);
}

static void own_done(void *data, int err, const cJSON *result, const cJSON *error,
                     const char *message)
{
    env_t *e = data;
    (void)error;
    (void)message;
    assert_int_equal(err, 0);
    e->text = cJSON_PrintUnformatted(result);
    e->done = true;
}

/* --- fixture ------------------------------------------------------------------------------- */

static int setup(void **state)
{
    env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    client_env_open(&e->ce, GUARD_MS);
    mcp_server_opts_t so;
    mcp_server_opts_default(&so);
    assert_int_equal(mcp_server_new(&e->ce.loop, &so, &e->ce.lg, &e->srv), 0);
    assert_int_equal(mcp_session_new(e->srv, &sink_ops, &e->sa, &e->a), 0);
    assert_int_equal(mcp_session_new(e->srv, &sink_ops, &e->sb, &e->b), 0);
    sink_session_as(e->a, "alice");
    sink_session_as(e->b, "bob");
    mcp_tool_def_t ask = {.name = "relay_ask", .handler = tool_relay_ask, .data = e};
    assert_int_equal(mcp_server_add_tool(e->srv, &ask), 0);
    e->hooks = (mcp_client_hooks_t){.tools_changed = on_tools, .data = e};
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    mcp_relay_free(e->relay); /* calls still in flight end now, answered to their sessions */
    mcp_session_free(e->a);
    if (e->b != NULL) mcp_session_free(e->b);
    mcp_server_free(e->srv);
    /* fails on a handle left open (a leak), which closing every handle would hide */
    client_env_close(&e->ce, GUARD_MS);
    sink_clear(&e->sa);
    sink_clear(&e->sb);
    mcp_downstream_config_close(&e->cfg);
    free(e->text);
    free(e);
    return 0;
}

static bool fakes_ready(void *arg)
{
    env_t *e = arg;
    return mcp_client_state(mcp_relay_client(e->relay, "fake"), NULL) == MCP_CLIENT_READY &&
           mcp_client_state(mcp_relay_client(e->relay, "other"), NULL) == MCP_CLIENT_READY;
}

/* A relay whose two servers, "fake" and "other", are the fake, ready; requests nobody owns go
 * to srv's sessions. */
static void start_relay(env_t *e, unsigned tool_timeout_ms, size_t max_parked)
{
    char here[PATH_MAX], raw[PATH_MAX], fixtures[PATH_MAX], config[2 * PATH_MAX];
    FMT(here, sizeof here, "%s", __FILE__); /* tests/unit/mcp/this.c -> tests/fixtures */
    FMT(raw, sizeof raw, "%s/fixtures", dirname(dirname(dirname(here))));
    assert_non_null(realpath(raw, fixtures));
    FMT(config, sizeof config,
        "{\"mcpServers\":{\"fake\":{\"command\":\"python3\",\"args\":[\"%s/fake_downstream.py\","
        "\"--tools\",\"1\"]},\"other\":{\"command\":\"python3\",\"args\":["
        "\"%s/fake_downstream.py\",\"--tools\",\"1\"]}}}",
        fixtures, fixtures);
    char msg[256];
    assert_int_equal(mcp_downstream_config_parse(config, strlen(config), &e->cfg, msg, sizeof msg),
                     MCP_OK);
    mcp_relay_opts_t ro = {.tool_timeout_ms = tool_timeout_ms,
                           .max_parked = max_parked,
                           .tools = list_tools,
                           .tools_data = e};
    assert_int_equal(mcp_relay_new(&e->ce.loop, &ro, &e->hooks, &e->ce.lg, &e->relay), MCP_OK);
    mcp_client_opts_t co;
    mcp_client_opts_default(&co);
    co.can_sample = true;
    co.can_elicit = true;
    co.stop_grace_ms = 300;
    assert_int_equal(mcp_relay_start(e->relay, &e->cfg, &co), MCP_OK);
    assert_int_equal(mcp_relay_start(e->relay, &e->cfg, &co), MCP_ESTATE); /* once */
    mcp_relay_set_server(e->relay, e->srv);
    run_until(e, fakes_ready, e);
}

static void receive(mcp_session_t *s, const char *json)
{
    mcp_session_receive(s, json, strlen(json));
}

/* A legacy session whose client declared sampling and elicitation. */
static void initialize(mcp_session_t *s, sink_t *k)
{
    receive(s, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
               "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"sampling\":{},"
               "\"elicitation\":{}},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
    receive(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    sink_clear(k);
}

/* The requests (messages with a method and an id) the sink holds. */
static size_t requests_in(const sink_t *k)
{
    size_t n = 0;
    for (size_t i = 0; i < k->n; i++)
        n += cJSON_GetObjectItem(k->msgs[i], "method") != NULL &&
             cJSON_GetObjectItem(k->msgs[i], "id") != NULL;
    return n;
}

typedef struct want {
    sink_t *k;
    int id;   /* an answer to request id (a result or an error) */
    size_t n; /* or at least n requests */
} want_t;

static const cJSON *answer_in(const sink_t *k, int id)
{
    for (size_t i = 0; i < k->n; i++) {
        const cJSON *m = k->msgs[i];
        const cJSON *mid = cJSON_GetObjectItem(m, "id");
        if (cJSON_GetObjectItem(m, "method") == NULL && cJSON_IsNumber(mid) && mid->valueint == id)
            return m;
    }
    return NULL;
}

static bool wanted(void *arg)
{
    const want_t *w = arg;
    return w->n > 0 ? requests_in(w->k) >= w->n : answer_in(w->k, w->id) != NULL;
}

/* The text of the answer to request id (a tool result's first text block), after the loop ran
 * until it came. */
static const char *answer_text(env_t *e, sink_t *k, int id)
{
    want_t w = {.k = k, .id = id};
    run_until(e, wanted, &w);
    const cJSON *res = cJSON_GetObjectItem(answer_in(k, id), "result");
    const cJSON *block = cJSON_GetArrayItem(cJSON_GetObjectItem(res, "content"), 0);
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(block, "text"));
    assert_non_null(text);
    return text;
}

/* Answers every request in k (from our server's client) with result, on session s. */
static void answer_requests(mcp_session_t *s, sink_t *k, const char *result)
{
    char json[1024];
    for (size_t i = 0; i < k->n; i++) {
        const cJSON *id = cJSON_GetObjectItem(k->msgs[i], "id");
        if (cJSON_GetObjectItem(k->msgs[i], "method") == NULL || !cJSON_IsString(id)) continue;
        FMT(json, sizeof json, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":%s}", id->valuestring,
            result);
        receive(s, json);
    }
}

/* --- routing a downstream server's requests ---------------------------------------------- */

static void request_goes_to_the_client_whose_call_waits(void **state)
{
    env_t *e = *state;
    start_relay(e, 30000, 0);
    initialize(e->a, &e->sa);
    initialize(e->b, &e->sb);
    receive(e->b, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"relay_ask\"}}");
    want_t two = {.k = &e->sb, .n = 2};
    run_until(e, wanted, &two);
    assert_int_equal(e->sa.n, 0); /* alice, as able to answer, is never asked */
    const cJSON *first = e->sb.msgs[0];
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(first, "method")),
                        "sampling/createMessage");
    answer_requests(e->b, &e->sb, SAMPLED);
    const char *text = answer_text(e, &e->sb, 7);
    /* Both answers reached the server (its own foo/bar alone was refused, by the client). */
    const char *second = strstr(text, "relay-model");
    assert_non_null(second);
    assert_non_null(strstr(second + 1, "relay-model"));
    assert_int_equal(e->sa.n, 0);
}

static void request_of_a_busy_call_is_refused_with_why(void **state)
{
    env_t *e = *state;
    start_relay(e, 30000, 0);
    initialize(e->a, &e->sa);
    e->busy = "it waits for another answer";
    receive(e->a, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"relay_ask\"}}");
    const char *text = answer_text(e, &e->sa, 3);
    assert_non_null(strstr(text, "sampling/createMessage from server fake: it waits for another "
                                 "answer; refused"));
    assert_int_equal(requests_in(&e->sa), 0);
}

static bool own_call_done(void *arg)
{
    return ((env_t *)arg)->done;
}

static void unowned_request_goes_to_the_only_capable_session(void **state)
{
    env_t *e = *state;
    start_relay(e, 30000, 0);
    initialize(e->a, &e->sa);
    initialize(e->b, &e->sb);
    mcp_client_t *c = mcp_relay_client(e->relay, "fake");
    /* Two capable sessions and no call of theirs waiting: which one to ask cannot be told. */
    assert_int_equal(mcp_client_call_tool(c, "ask", NULL, 30000, NULL, own_done, e, NULL), 0);
    run_until(e, own_call_done, e);
    assert_non_null(strstr(e->text, "no single connected client supports sampling"));
    assert_non_null(strstr(e->text, "no single connected client supports elicitation"));
    assert_int_equal(e->sa.n + e->sb.n, 0);
    /* Bob leaves: alice's session is the only one, so she is asked. */
    mcp_session_free(e->b);
    e->b = NULL;
    free(e->text);
    e->text = NULL;
    e->done = false;
    assert_int_equal(mcp_client_call_tool(c, "ask", NULL, 30000, NULL, own_done, e, NULL), 0);
    want_t two = {.k = &e->sa, .n = 2};
    run_until(e, wanted, &two);
    answer_requests(e->a, &e->sa, SAMPLED);
    run_until(e, own_call_done, e);
    assert_non_null(strstr(e->text, "relay-model"));
    assert_null(strstr(e->text, "no single"));
}

/* --- the proxy of exposed tools ------------------------------------------------------------ */

static bool has_extra_tool(void *arg)
{
    env_t *e = arg;
    return mcp_server_tool_count(e->srv) == 28;
}

static void exposed_tools_are_listed_and_proxied(void **state)
{
    env_t *e = *state;
    start_relay(e, 30000, 0);
    assert_int_equal(mcp_server_tool_count(e->srv), 1); /* relay_ask: nothing exposed yet */
    mcp_relay_relist(e->relay, "fake");                 /* before mcp_relay_expose: nothing */
    assert_int_equal(mcp_server_tool_count(e->srv), 1);
    mcp_relay_expose(e->relay, e->srv);
    /* Each fake's 12 fixed tools and tool_00, under the owner's names. */
    assert_int_equal(mcp_server_tool_count(e->srv), 27);
    initialize(e->a, &e->sa);
    receive(e->a, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"fake__echo\",\"arguments\":{\"word\":\"relayed\"}}}");
    assert_string_equal(answer_text(e, &e->sa, 4), "{\"word\": \"relayed\"}");
    /* The server's list changes: its tools are listed again (a list_changed, not one per tool). */
    sink_clear(&e->sa);
    receive(e->a, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"fake__add_tool\"}}");
    run_until(e, has_extra_tool, e);
    size_t changed = 0;
    for (size_t i = 0; i < e->sa.n; i++) {
        const char *method = cJSON_GetStringValue(cJSON_GetObjectItem(e->sa.msgs[i], "method"));
        changed += method != NULL && strcmp(method, "notifications/tools/list_changed") == 0;
    }
    assert_int_equal(changed, 1);
}

/* Sends a first round of SERVER__ask, arguments {"x":1}, as request id of a stateless caller
 * able to sample and elicit. */
static void ask_modern(mcp_session_t *s, int id, const char *server)
{
    char json[1024];
    FMT(json, sizeof json,
        "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
        "\"%s__ask\",\"arguments\":{\"x\":1}," MODERN_META "}}",
        id, server);
    receive(s, json);
}

/* Freeing the relay with a proxied call in flight answers that call (as cancelled), and its
 * note goes with it. */
static void free_answers_a_proxied_call_in_flight(void **state)
{
    env_t *e = *state;
    start_relay(e, 30000, 0);
    mcp_relay_expose(e->relay, e->srv);
    initialize(e->a, &e->sa);
    receive(e->a, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"fake__hang\"}}");
    uv_run(&e->ce.loop, UV_RUN_NOWAIT); /* the call goes out */
    assert_null(answer_in(&e->sa, 6));
    mcp_relay_free(e->relay);
    e->relay = NULL;
    const cJSON *res = cJSON_GetObjectItem(answer_in(&e->sa, 6), "result");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(res, "isError")));
}

/* A first round of fake__ask from s (a stateless caller able to sample and elicit), answered
 * with an InputRequiredResult asking for sampling: its requestState is copied into state. */
static void first_round(env_t *e, mcp_session_t *s, sink_t *k, int id, char *state, size_t n)
{
    ask_modern(s, id, "fake");
    want_t w = {.k = k, .id = id};
    run_until(e, wanted, &w);
    const cJSON *res = cJSON_GetObjectItem(answer_in(k, id), "result");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(res, "resultType")),
                        "input_required");
    const cJSON *req =
        cJSON_GetObjectItem(cJSON_GetObjectItem(res, "inputRequests"), MCP_RELAY_INPUT_KEY);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(req, "method")),
                        "sampling/createMessage");
    FMT(state, n, "%s", cJSON_GetStringValue(cJSON_GetObjectItem(res, "requestState")));
}

/* The next round of fake__ask from s, with args x and state, answering the sampling request. */
static const char *next_round(env_t *e, mcp_session_t *s, sink_t *k, int id, int x,
                              const char *state)
{
    char json[2048];
    FMT(json, sizeof json,
        "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
        "\"fake__ask\",\"arguments\":{\"x\":%d},\"inputResponses\":{\"" MCP_RELAY_INPUT_KEY
        "\":" SAMPLED "},\"requestState\":\"%s\"," MODERN_META "}}",
        id, x, state);
    receive(s, json);
    return answer_text(e, k, id);
}

#define GONE "continues a proxied call that is no longer waiting"

typedef struct log_want {
    env_t *e;
    const char *text;
} log_want_t;

/* The log holds w->text (the relay's refusals are logged at debug level). */
static bool logged(void *arg)
{
    const log_want_t *w = arg;
    fflush(w->e->ce.logf);
    return w->e->ce.logbuf != NULL && strstr(w->e->ce.logbuf, w->text) != NULL;
}

/* A relay exposing its servers' tools, and alice's first round of fake__ask parked in it: its
 * requestState into st. */
static void park_alices(env_t *e, unsigned tool_timeout_ms, size_t max_parked, char *st, size_t n)
{
    start_relay(e, tool_timeout_ms, max_parked);
    mcp_relay_expose(e->relay, e->srv);
    first_round(e, e->a, &e->sa, 1, st, n);
    assert_int_equal(mcp_relay_parked(e->relay), 1);
    /* The server asks for an elicitation right after its sampling request: wait until it was
     * read and refused while the call is parked (read after the call went on, it would be that
     * call's next input request instead). */
    log_want_t refused = {e, "(one at a time); refused"};
    run_until(e, logged, &refused);
}

static void parked_call_continues_once_for_its_caller_only(void **state)
{
    env_t *e = *state;
    char st[4096];
    park_alices(e, 30000, 0, st, sizeof st);
    /* Bob presenting alice's state (signed by this server, for this tool) finds nothing. */
    assert_non_null(strstr(next_round(e, e->b, &e->sb, 2, 1, st), GONE));
    /* Alice with other arguments is refused; the call stays parked. */
    assert_non_null(strstr(next_round(e, e->a, &e->sa, 3, 2, st), "Invalid arguments"));
    assert_int_equal(mcp_relay_parked(e->relay), 1);
    /* Alice's round: the answer reaches the server, whose result answers the round. The
     * elicitation it asked while the call was parked was refused: one request at a time. */
    const char *text = next_round(e, e->a, &e->sa, 4, 1, st);
    assert_non_null(strstr(text, "relay-model"));
    assert_non_null(strstr(text, "one at a time"));
    assert_int_equal(mcp_relay_parked(e->relay), 0);
    /* The handle was used: the same round again finds nothing. */
    assert_non_null(strstr(next_round(e, e->a, &e->sa, 5, 1, st), GONE));
}

static bool none_parked(void *arg)
{
    env_t *e = arg;
    return mcp_relay_parked(e->relay) == 0;
}

static void parked_call_expires(void **state)
{
    env_t *e = *state;
    char st[4096];
    park_alices(e, 400, 0, st, sizeof st); /* the tool timeout bounds the wait for a round */
    run_until(e, none_parked, e);
    fflush(e->ce.logf);
    assert_non_null(strstr(e->ce.logbuf, "no next round came for proxy-"));
    assert_non_null(strstr(next_round(e, e->a, &e->sa, 2, 1, st), GONE));
}

static void parking_is_capped(void **state)
{
    env_t *e = *state;
    char st[4096];
    park_alices(e, 30000, 1, st, sizeof st);
    /* Bob's call to the other server cannot park: that server's requests are refused, saying
     * why, and the call ends with what the server made of that. */
    ask_modern(e->b, 2, "other");
    const char *text = answer_text(e, &e->sb, 2);
    assert_non_null(strstr(text, "sampling/createMessage from server other could not be passed to "
                                 "the client: too many proxied calls are waiting for their "
                                 "clients' answers"));
    assert_int_equal(mcp_relay_parked(e->relay), 1);
    /* Alice's call is still hers to continue. */
    assert_non_null(strstr(next_round(e, e->a, &e->sa, 3, 1, st), "relay-model"));
}

/* A legacy server's request names no call: with calls of two clients waiting on it, which
 * client it is for cannot be told, and neither is asked. */
static void legacy_request_with_two_callers_waiting_is_refused(void **state)
{
    env_t *e = *state;
    char st[4096];
    park_alices(e, 30000, 0, st, sizeof st);
    ask_modern(e->b, 2, "fake");
    assert_non_null(strstr(answer_text(e, &e->sb, 2),
                           "calls of several clients are waiting on this server, so which client "
                           "to ask cannot be told; refused"));
    assert_int_equal(mcp_relay_parked(e->relay), 1);
}

static void stop_ends_parked_calls(void **state)
{
    env_t *e = *state;
    char st[4096];
    park_alices(e, 30000, 0, st, sizeof st);
    mcp_relay_stop(e->relay);
    assert_int_equal(mcp_relay_parked(e->relay), 0);
    assert_non_null(strstr(next_round(e, e->a, &e->sa, 2, 1, st), GONE));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(request_goes_to_the_client_whose_call_waits, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(request_of_a_busy_call_is_refused_with_why, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(unowned_request_goes_to_the_only_capable_session, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(exposed_tools_are_listed_and_proxied, setup, teardown),
        cmocka_unit_test_setup_teardown(free_answers_a_proxied_call_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(parked_call_continues_once_for_its_caller_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(parked_call_expires, setup, teardown),
        cmocka_unit_test_setup_teardown(parking_is_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(legacy_request_with_two_callers_waiting_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(stop_ends_parked_calls, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
