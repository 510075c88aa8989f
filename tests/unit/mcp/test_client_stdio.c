/* The downstream client against a fake stdio server (tests/fixtures/fake_downstream.py):
 * handshake, paging, list_changed, garbage, start timeout, crash and restart, timeouts,
 * cancellation, ${VAR} expansion, PATH lookup, stderr capture, server requests, stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp.h"
#include "client_wait.h"

/* snprintf that must not truncate. */
#define FMT(buf, n, ...) assert_true((size_t)snprintf(buf, n, __VA_ARGS__) < (n))

/* A guard against a hang, not a speed assertion: a broken client fails instead of stalling. */
#define GUARD_MS 60000

typedef struct rec {
    struct env *e;
    mcp_client_t *c;
    mcp_client_state_t states[64];
    char *reasons[64];
    size_t n_states;
    int tools_changed;
    int peer_reqs, peer_cancels;
    bool hold_peers; /* keep sampling requests unanswered until the server cancels them */
    mcp_client_peer_req_t *held;
    mcp_client_hooks_t hooks;
} rec_t;

typedef struct env {
    client_env_t ce; /* the loop, its guard, the log */
    mcp_downstream_config_t cfg;
    rec_t recs[2];
    char fixtures[PATH_MAX];
    char pathvar[4096]; /* "PATH=" ours, the last of a spec's environment */
} env_t;

typedef struct result {
    int calls;
    int err;
    char *text; /* content[0].text, or the message on error */
    cJSON *error;
    double progress[8];
    size_t n_progress;
    char *progress_msg;
} result_t;

/* The loop, its guard, the log and the fixtures folder: what every test has. */
static env_t *env_open(void)
{
    env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    client_env_open(&e->ce, GUARD_MS);
    /* tests/unit/mcp/this.c -> tests/fixtures */
    char here[PATH_MAX];
    FMT(here, sizeof here, "%s", __FILE__);
    char *dir = dirname(dirname(dirname(here)));
    char raw[PATH_MAX];
    FMT(raw, sizeof raw, "%s/fixtures", dir);
    assert_non_null(realpath(raw, e->fixtures));
    return e;
}

/* Frees the clients and checks that they left nothing on the loop, which closes empty. */
static int teardown(void **state)
{
    env_t *e = *state;
    for (int i = 0; i < 2; i++) {
        if (e->recs[i].c != NULL) mcp_client_free(e->recs[i].c);
        for (size_t j = 0; j < e->recs[i].n_states; j++)
            free(e->recs[i].reasons[j]);
    }
    client_env_close(&e->ce, GUARD_MS);
    mcp_downstream_config_close(&e->cfg);
    free(e);
    return 0;
}

static bool log_has(env_t *e, const char *needle)
{
    fflush(e->ce.logf);
    return e->ce.logbuf != NULL && strstr(e->ce.logbuf, needle) != NULL;
}

/* Runs the loop until pred holds. */
static void run_until(env_t *e, bool (*pred)(void *), void *arg)
{
    client_run_until(&e->ce.loop, &e->ce.guard, &e->ce.guard_fired, e->ce.logf, &e->ce.logbuf, pred,
                     arg);
}

/* --- hooks --------------------------------------------------------------------------------- */

static void on_state(mcp_client_t *c, mcp_client_state_t st, const char *reason, void *data)
{
    rec_t *r = data;
    (void)c;
    assert_true(r->n_states < 64);
    r->states[r->n_states] = st;
    r->reasons[r->n_states] = reason != NULL ? strdup(reason) : NULL;
    r->n_states++;
}

static void on_tools(mcp_client_t *c, const cJSON *tools, void *data)
{
    rec_t *r = data;
    (void)c;
    assert_true(cJSON_IsArray(tools));
    r->tools_changed++;
}

/* Holds a sampling request instead of answering it, until the server cancels it. */
static void on_peer_hold(mcp_client_t *c, mcp_client_peer_req_t *req, void *data)
{
    rec_t *r = data;
    (void)c;
    r->peer_reqs++;
    assert_false(mcp_client_peer_cancelled(req));
    r->held = req;
}

static void on_peer_cancelled(mcp_client_t *c, mcp_client_peer_req_t *req, void *data)
{
    rec_t *r = data;
    (void)c;
    assert_ptr_equal(req, r->held);
    assert_true(mcp_client_peer_cancelled(req));
    r->peer_cancels++;
    /* Answering a cancelled request sends nothing and frees it. */
    mcp_client_peer_fail(req, -32603, "never mind");
    r->held = NULL;
}

static void on_peer(mcp_client_t *c, mcp_client_peer_req_t *req, void *data)
{
    rec_t *r = data;
    if (r->hold_peers) {
        on_peer_hold(c, req, data);
        return;
    }
    r->peer_reqs++;
    assert_string_equal(mcp_client_peer_method(req), "sampling/createMessage");
    cJSON *res = cJSON_Parse("{\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":"
                             "\"hi\"},\"model\":\"fixture-model\"}");
    mcp_client_peer_reply(req, res);
}

static mcp_client_hooks_t hooks_for(rec_t *r, bool peer)
{
    mcp_client_hooks_t h = {on_state, on_tools, peer ? on_peer : NULL, on_peer_cancelled, r};
    return h;
}

static void test_opts(mcp_client_opts_t *o)
{
    mcp_client_opts_default(o);
    o->stop_grace_ms = 300;
    o->restart_base_ms = 50;
}

/* Parses a config and creates a client for its entry `idx` in recs[idx]. */
static mcp_client_t *make_client(env_t *e, int idx, const char *config,
                                 const mcp_client_opts_t *opts, bool peer)
{
    char msg[256];
    if (e->cfg.n_servers == 0)
        assert_int_equal(
            mcp_downstream_config_parse(config, strlen(config), &e->cfg, msg, sizeof msg), MCP_OK);
    rec_t *r = &e->recs[idx];
    r->e = e;
    r->hooks = hooks_for(r, peer);
    assert_int_equal(
        mcp_client_new(&e->ce.loop, &e->cfg.servers[idx], opts, &r->hooks, &e->ce.lg, &r->c), 0);
    return r->c;
}

/* A config with the fake server and extra args (a JSON fragment of strings, may be ""). */
static void fake_config(const env_t *e, char *buf, size_t n, const char *args)
{
    FMT(buf, n,
        "{\"mcpServers\": {\"fake\": {\"command\": \"python3\", \"args\": "
        "[\"%s/fake_downstream.py\"%s%s]}}}",
        e->fixtures, args[0] ? ", " : "", args);
}

/* A config from a template in which @FIXTURES@ stands for the fixtures folder. */
static void expand_config(const env_t *e, const char *tpl, char *buf, size_t n)
{
    static const char token[] = "@FIXTURES@";
    size_t len = 0;
    buf[0] = '\0';
    while (*tpl != '\0') {
        const char *t = strstr(tpl, token);
        size_t k = t != NULL ? (size_t)(t - tpl) : strlen(tpl);
        FMT(buf + len, n - len, "%.*s%s", (int)k, tpl, t != NULL ? e->fixtures : "");
        len += strlen(buf + len);
        tpl += k + (t != NULL ? sizeof token - 1 : 0);
    }
}

static bool is_ready(void *arg)
{
    rec_t *r = arg;
    return mcp_client_state(r->c, NULL) == MCP_CLIENT_READY;
}

static bool is_failed(void *arg)
{
    rec_t *r = arg;
    return mcp_client_state(r->c, NULL) == MCP_CLIENT_FAILED;
}

/* Runs the loop until client idx has failed; returns the reason it gives. */
static const char *failure(env_t *e, int idx)
{
    run_until(e, is_failed, &e->recs[idx]);
    const char *reason = NULL;
    mcp_client_state(e->recs[idx].c, &reason);
    assert_non_null(reason);
    return reason;
}

static bool call_done(void *arg)
{
    result_t *res = arg;
    return res->calls > 0;
}

static void on_result(void *data, int err, const cJSON *result, const cJSON *error,
                      const char *message)
{
    result_t *res = data;
    res->calls++;
    res->err = err;
    if (err == 0) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
        const cJSON *text =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(content, 0), "text");
        assert_true(cJSON_IsString(text));
        res->text = strdup(text->valuestring);
    } else {
        assert_non_null(message);
        res->text = strdup(message);
        if (error != NULL) res->error = cJSON_Duplicate(error, true);
    }
}

static void on_progress(void *data, double progress, double total, const char *message)
{
    result_t *res = data;
    assert_true(res->n_progress < 8);
    res->progress[res->n_progress++] = progress;
    assert_true(total == 2.0);
    free(res->progress_msg);
    res->progress_msg = message != NULL ? strdup(message) : NULL;
}

static void result_clear(result_t *res)
{
    free(res->text);
    free(res->progress_msg);
    cJSON_Delete(res->error);
    memset(res, 0, sizeof *res);
}

/* Calls a tool and waits for its answer; returns the parsed text (caller deletes). */
static cJSON *call_json(env_t *e, mcp_client_t *c, const char *tool, const char *args)
{
    result_t res = {0};
    cJSON *a = args != NULL ? cJSON_Parse(args) : NULL;
    assert_int_equal(mcp_client_call_tool(c, tool, a, 0, NULL, on_result, &res, NULL), 0);
    cJSON_Delete(a);
    run_until(e, call_done, &res);
    if (res.err != 0) fail_msg("%s failed: %s", tool, res.text);
    cJSON *j = cJSON_Parse(res.text);
    assert_non_null(j);
    result_clear(&res);
    return j;
}

static bool has_tool(const mcp_client_t *c, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, mcp_client_tools(c))
    {
        if (strcmp(cJSON_GetObjectItemCaseSensitive(t, "name")->valuestring, name) == 0)
            return true;
    }
    return false;
}

typedef struct stopped {
    int done;
} stopped_t;

static void on_stopped(mcp_client_t *c, void *data)
{
    stopped_t *s = data;
    assert_int_equal(mcp_client_state(c, NULL), MCP_CLIENT_STOPPED);
    s->done++;
}

static bool stop_done(void *arg)
{
    stopped_t *s = arg;
    return s->done > 0;
}

/* --- the fixture: the clients a test's spec asks for ----------------------------------------- */

/* How far setup takes the clients before the test runs. */
typedef enum up { UP_CREATED, UP_STARTED, UP_READY } up_t;

/* A test's fixture, given as its prestate: the config and the options that differ from
 * test_opts() (0, false and NULL: test_opts() as it is). */
typedef struct spec {
    const char *config; /* a template for expand_config; NULL: the fake server with args */
    const char *args;   /* the fake server's extra args, a JSON fragment of strings; NULL: none */
    bool second;        /* client 1 too, for the config's second entry, with test_opts() alone */
    bool library_defaults; /* client 0 with the library's defaults (NULL options) */
    bool peer;             /* the owner answers sampling (on_peer) */
    bool hold_peers;
    bool can_sample, has_roots;
    unsigned start_timeout_ms, stop_grace_ms, restart_max, restart_base_ms, healthy_ms;
    size_t max_message_bytes, max_stderr_line, max_calls;
    const char *environ; /* the base environment, "K=V" lines, PATH=ours (e->pathvar) added */
    const char *const *withheld_env; /* NULL-terminated, as the options' */
    up_t up;
} spec_t;

/* Client 0 (and 1) made from the config and options the prestate's spec_t gives, in recs[i].c,
 * taken as far as its up says. */
static int setup(void **state)
{
    const spec_t *s = *state;
    env_t *e = env_open();
    char cfg[2048];
    if (s->config != NULL)
        expand_config(e, s->config, cfg, sizeof cfg);
    else
        fake_config(e, cfg, sizeof cfg, s->args != NULL ? s->args : "");
    mcp_client_opts_t o;
    test_opts(&o);
    o.can_sample = s->can_sample;
    o.has_roots = s->has_roots;
    if (s->start_timeout_ms != 0) o.start_timeout_ms = s->start_timeout_ms;
    if (s->stop_grace_ms != 0) o.stop_grace_ms = s->stop_grace_ms;
    if (s->restart_max != 0) o.restart_max = s->restart_max;
    if (s->restart_base_ms != 0) o.restart_base_ms = s->restart_base_ms;
    if (s->healthy_ms != 0) o.healthy_ms = s->healthy_ms;
    if (s->max_message_bytes != 0) o.max_message_bytes = s->max_message_bytes;
    if (s->max_stderr_line != 0) o.max_stderr_line = s->max_stderr_line;
    if (s->max_calls != 0) o.max_calls = s->max_calls;
    o.withheld_env = s->withheld_env;
    /* The options borrow the environment for mcp_client_new only: a copy cut into lines. */
    char *lines = NULL, *envp[16] = {NULL};
    if (s->environ != NULL) {
        const char *path = getenv("PATH");
        FMT(e->pathvar, sizeof e->pathvar, "PATH=%s", path != NULL ? path : "/usr/bin:/bin");
        lines = strdup(s->environ);
        assert_non_null(lines);
        size_t n = 0;
        for (char *save = NULL, *kv = strtok_r(lines, "\n", &save); kv != NULL;
             kv = strtok_r(NULL, "\n", &save)) {
            assert_true(n + 2 < sizeof envp / sizeof envp[0]);
            envp[n++] = kv;
        }
        envp[n] = e->pathvar;
        o.environ = envp;
    }
    e->recs[0].hold_peers = s->hold_peers;
    make_client(e, 0, cfg, s->library_defaults ? NULL : &o, s->peer);
    free(lines);
    if (s->second) {
        mcp_client_opts_t o1;
        test_opts(&o1);
        make_client(e, 1, cfg, &o1, false);
    }
    int n = s->second ? 2 : 1;
    for (int i = 0; i < n && s->up >= UP_STARTED; i++)
        assert_int_equal(mcp_client_start(e->recs[i].c), 0);
    for (int i = 0; i < n && s->up == UP_READY; i++)
        run_until(e, is_ready, &e->recs[i]);
    *state = e;
    return 0;
}

/* A test run with setup and the spec given by the designated initialisers. */
#define FIXTURE(test, ...)                                                                         \
    {                                                                                              \
#test, test, setup, teardown, &(spec_t)                                                    \
        {                                                                                          \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    }

/* --- tests --------------------------------------------------------------------------------- */

static void lists_every_page_and_says_who_we_are(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    assert_int_equal(mcp_client_state(c, NULL), MCP_CLIENT_STOPPED);
    assert_int_equal(mcp_client_start(c), 0);
    assert_int_equal(mcp_client_start(c), MCP_ESTATE);
    run_until(e, is_ready, &e->recs[0]);
    /* 12 fixed tools + 7 numbered ones, in pages of 3: seven pages. */
    const cJSON *tools = mcp_client_tools(c);
    assert_int_equal(cJSON_GetArraySize(tools), 19);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tools, 0), "name")->valuestring,
        "echo");
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tools, 18), "name")->valuestring,
        "tool_06");
    assert_int_equal(e->recs[0].tools_changed, 1);
    assert_int_equal(e->recs[0].n_states, 1);
    assert_int_equal(e->recs[0].states[0], MCP_CLIENT_READY);
    assert_non_null(mcp_client_server_init(c));
    assert_true(mcp_client_pid(c) > 0);

    cJSON *init = call_json(e, c, "last_init", NULL);
    assert_string_equal(cJSON_GetObjectItem(init, "protocolVersion")->valuestring, "2025-11-25");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(init, "clientInfo"), "name")->valuestring,
        "ptc-mcp");
    const cJSON *caps = cJSON_GetObjectItem(init, "capabilities");
    assert_true(cJSON_IsObject(caps));
    assert_null(cJSON_GetObjectItem(caps, "sampling"));
    assert_null(cJSON_GetObjectItem(caps, "roots"));
    assert_null(cJSON_GetObjectItem(caps, "elicitation"));
    cJSON_Delete(init);
}

static void declares_what_the_owner_can_forward(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    cJSON *init = call_json(e, c, "last_init", NULL);
    const cJSON *caps = cJSON_GetObjectItem(init, "capabilities");
    assert_true(cJSON_IsObject(cJSON_GetObjectItem(caps, "sampling")));
    assert_true(
        cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(caps, "roots"), "listChanged")));
    assert_null(cJSON_GetObjectItem(caps, "elicitation"));
    cJSON_Delete(init);
}

static bool tools_changed_twice(void *arg)
{
    rec_t *r = arg;
    return r->tools_changed >= 2;
}

static void list_changed_relists(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    int before = cJSON_GetArraySize(mcp_client_tools(c));
    assert_false(has_tool(c, "extra_1"));
    cJSON *r = call_json(e, c, "add_tool", NULL);
    cJSON_Delete(r);
    run_until(e, tools_changed_twice, &e->recs[0]);
    assert_int_equal(cJSON_GetArraySize(mcp_client_tools(c)), before + 1);
    assert_true(has_tool(c, "extra_1"));
    assert_int_equal(mcp_client_state(c, NULL), MCP_CLIENT_READY);
}

static void garbage_and_huge_lines_are_dropped(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    assert_int_equal(cJSON_GetArraySize(mcp_client_tools(c)), 15);
    cJSON *r = call_json(e, c, "echo", "{\"x\": 42}");
    assert_int_equal(cJSON_GetObjectItem(r, "x")->valueint, 42);
    cJSON_Delete(r);
    /* An answer whose id comes back as a string of our integer still finds its call. */
    r = call_json(e, c, "string_id", NULL);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(r, "id")));
    cJSON_Delete(r);
    assert_true(log_has(e, "(the limit is 1048576)"));
    assert_true(log_has(e, "a line that is not JSON: this is not json"));
    assert_true(log_has(e, "sent an error for no request: noise"));
    assert_true(log_has(e, "no longer logged"));
}

/* A fake server that never answers the handshake (client 0) and one that is fine (client 1). */
static const char mute_and_fine[] =
    "{\"mcpServers\": {\"mute\": {\"command\": \"python3\", \"args\": "
    "[\"@FIXTURES@/fake_downstream.py\", \"--mode\", \"silent\"]}, \"fine\": {\"command\": "
    "\"python3\", \"args\": [\"@FIXTURES@/fake_downstream.py\"]}}}";

static void silent_server_times_out_without_blocking_others(void **state)
{
    env_t *e = *state;
    mcp_client_t *mute = e->recs[0].c, *fine = e->recs[1].c;
    /* A call made while the mute server starts waits, then fails with the reason. */
    result_t res = {0};
    assert_int_equal(mcp_client_call_tool(mute, "echo", NULL, 0, NULL, on_result, &res, NULL), 0);
    run_until(e, is_ready, &e->recs[1]);
    assert_int_equal(mcp_client_state(mute, NULL), MCP_CLIENT_STARTING);
    assert_non_null(strstr(failure(e, 0), "did not finish the handshake"));
    run_until(e, call_done, &res);
    assert_int_equal(res.err, MCP_ESTATE);
    assert_non_null(strstr(res.text, "did not finish the handshake"));
    result_clear(&res);
    /* A call to a failed server fails at once. */
    assert_int_equal(mcp_client_call_tool(mute, "echo", NULL, 0, NULL, on_result, &res, NULL),
                     MCP_ESTATE);
    assert_int_equal(res.calls, 0);
    cJSON *r = call_json(e, fine, "echo", "{\"ok\": true}");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")));
    cJSON_Delete(r);
}

static bool ready_after_restart(void *arg)
{
    rec_t *r = arg;
    return mcp_client_spawn_count(r->c) >= 2 && mcp_client_state(r->c, NULL) == MCP_CLIENT_READY;
}

static bool reason_seen(rec_t *r, const char *needle)
{
    for (size_t i = 0; i < r->n_states; i++)
        if (r->reasons[i] != NULL && strstr(r->reasons[i], needle) != NULL) return true;
    return false;
}

static void crash_fails_the_call_and_restarts(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    int pid = mcp_client_pid(c);
    result_t res = {0};
    assert_int_equal(mcp_client_call_tool(c, "crash", NULL, 0, NULL, on_result, &res, NULL), 0);
    run_until(e, call_done, &res);
    assert_int_equal(res.err, MCP_ECLOSED);
    assert_non_null(strstr(res.text, "exited with status 7"));
    assert_non_null(strstr(res.text, "crashing on purpose")); /* the last stderr line */
    result_clear(&res);
    run_until(e, ready_after_restart, &e->recs[0]);
    assert_int_not_equal(mcp_client_pid(c), pid);
    assert_true(reason_seen(&e->recs[0], "restarting in 50 ms (attempt 1 of 5)"));
    /* The same tools came back: the owner is not asked to re-index. */
    assert_int_equal(e->recs[0].tools_changed, 1);
    cJSON *r = call_json(e, c, "echo", "{\"again\": 1}");
    assert_int_equal(cJSON_GetObjectItem(r, "again")->valueint, 1);
    cJSON_Delete(r);
}

static void gives_up_after_the_restart_budget(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    run_until(e, is_failed, &e->recs[0]);
    assert_int_equal(mcp_client_spawn_count(c), 3);
    rec_t *r = &e->recs[0];
    /* The backoff doubles: 20 ms, then 40 ms. */
    assert_true(reason_seen(r, "restarting in 20 ms (attempt 1 of 2)"));
    assert_true(reason_seen(r, "restarting in 40 ms (attempt 2 of 2)"));
    const char *reason = NULL;
    mcp_client_state(c, &reason);
    assert_non_null(strstr(reason, "gave up after 2 restarts"));
    assert_non_null(strstr(reason, "exited with status 3"));
    /* A manual start tries again with a fresh budget. */
    assert_int_equal(mcp_client_start(c), 0);
    run_until(e, is_ready, r);
    assert_int_equal(mcp_client_spawn_count(c), 4);
}

static bool spawned_thrice(void *arg)
{
    rec_t *r = arg;
    return mcp_client_spawn_count(r->c) >= 3 && mcp_client_state(r->c, NULL) == MCP_CLIENT_READY;
}

static void a_healthy_period_resets_the_restart_budget(void **state)
{
    env_t *e = *state;
    run_until(e, spawned_thrice, &e->recs[0]);
    assert_false(reason_seen(&e->recs[0], "gave up"));
    assert_false(reason_seen(&e->recs[0], "attempt 2"));
    assert_true(reason_seen(&e->recs[0], "restarting in 10 ms (attempt 1 of 1)"));
}

static const char quits[] = "{\"mcpServers\": {\"quits\": {\"command\": \"sh\", \"args\": "
                            "[\"-c\", \"echo bad config >&2; exit 4\"]}}}";

static void exiting_before_the_handshake_fails_with_the_exit_status(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    const char *reason = failure(e, 0);
    assert_non_null(strstr(reason, "exited with status 4"));
    assert_non_null(strstr(reason, "bad config"));
    assert_non_null(strstr(reason, "before the handshake finished"));
    assert_int_equal(mcp_client_spawn_count(c), 1);
}

typedef struct freeing {
    env_t *e;
    int calls;
} freeing_t;

static void free_in_callback(void *data, int err, const cJSON *result, const cJSON *error,
                             const char *message)
{
    freeing_t *f = data;
    (void)result;
    (void)error;
    (void)message;
    assert_int_equal(err, MCP_ECLOSED);
    f->calls++;
    mcp_client_free(f->e->recs[0].c);
    f->e->recs[0].c = NULL;
}

static bool freed(void *arg)
{
    freeing_t *f = arg;
    return f->calls > 0;
}

static void freeing_from_a_callback_is_safe(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    freeing_t f = {e, 0};
    result_t other = {0};
    /* The crash fails both calls in flight; the first callback frees the client, and the
     * second still hears about it exactly once. */
    assert_int_equal(mcp_client_call_tool(c, "hang", NULL, 0, NULL, on_result, &other, NULL), 0);
    assert_int_equal(mcp_client_call_tool(c, "crash", NULL, 0, NULL, free_in_callback, &f, NULL),
                     0);
    run_until(e, freed, &f);
    assert_int_equal(f.calls, 1);
    assert_int_equal(other.calls, 1);
    assert_true(other.err == MCP_ECLOSED || other.err == MCP_ECANCELED);
    result_clear(&other);
}

static bool log_has_cancel(void *arg)
{
    env_t *e = arg;
    return log_has(e, "] cancelled ");
}

static void timeout_cancels_downstream_and_drops_late_answer(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    result_t res = {0};
    assert_int_equal(mcp_client_call_tool(c, "hang", NULL, 300, NULL, on_result, &res, NULL), 0);
    run_until(e, call_done, &res);
    assert_int_equal(res.err, MCP_ETIMEDOUT);
    assert_non_null(strstr(res.text, "did not answer tools/call within 300 ms"));
    run_until(e, log_has_cancel, e);
    assert_true(log_has(e, "timed out"));
    /* The fake answers the cancelled call anyway; the echo answer comes after it. */
    cJSON *r = call_json(e, c, "echo", NULL);
    cJSON_Delete(r);
    assert_int_equal(res.calls, 1);
    result_clear(&res);
}

static bool log_has_hanging(void *arg)
{
    env_t *e = arg;
    return log_has(e, "] hanging ");
}

static void cancel_calls_back_once(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    result_t res = {0};
    mcp_client_call_t *call = NULL;
    assert_int_equal(mcp_client_call_tool(c, "hang", NULL, 0, NULL, on_result, &res, &call), 0);
    assert_non_null(call);
    run_until(e, log_has_hanging, e);
    mcp_client_call_cancel(call, "user gave up");
    assert_int_equal(res.calls, 1);
    assert_int_equal(res.err, MCP_ECANCELED);
    run_until(e, log_has_cancel, e);
    assert_true(log_has(e, "user gave up"));
    cJSON *r = call_json(e, c, "echo", NULL);
    cJSON_Delete(r);
    assert_int_equal(res.calls, 1);
    result_clear(&res);
}

typedef struct many {
    result_t res[20];
} many_t;

static bool all_done(void *arg)
{
    many_t *m = arg;
    for (int i = 0; i < 20; i++)
        if (m->res[i].calls == 0) return false;
    return true;
}

static void many_calls_in_flight_get_their_own_answers(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    /* Made before the server is ready: they wait, then go out in order. */
    many_t m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < 20; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "i", i);
        assert_int_equal(mcp_client_call_tool(c, "echo", a, 0, NULL, on_result, &m.res[i], NULL),
                         0);
        cJSON_Delete(a);
    }
    run_until(e, all_done, &m);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(m.res[i].err, 0);
        cJSON *j = cJSON_Parse(m.res[i].text);
        assert_int_equal(cJSON_GetObjectItem(j, "i")->valueint, i);
        cJSON_Delete(j);
        result_clear(&m.res[i]);
    }
}

/* The command has no slash: it is found through the entry's PATH; python3 (for the script's
 * #!) through ours. */
static const char vars[] =
    "{\"mcpServers\": {\"vars\": {\"command\": \"fake_downstream.py\", \"args\": "
    "[\"x${PTC_T_A}y\", \"${PTC_T_UNSET}\", \"$PTC_T_A\", \"${not closed\"], "
    "\"env\": {\"FOO\": \"${PTC_T_A}-z\", \"PATH\": \"@FIXTURES@\"}, \"cwd\": \"@FIXTURES@\"}}}";

static void expands_vars_and_finds_the_command_on_the_entry_path(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    assert_true(log_has(e, "${PTC_T_UNSET} is not set"));
    assert_int_equal(mcp_client_start(c), 0);
    run_until(e, is_ready, &e->recs[0]);
    cJSON *r = call_json(e, c, "argv_env", NULL);
    const cJSON *argv = cJSON_GetObjectItem(r, "argv");
    assert_int_equal(cJSON_GetArraySize(argv), 4);
    assert_string_equal(cJSON_GetArrayItem(argv, 0)->valuestring, "xhelloy");
    assert_string_equal(cJSON_GetArrayItem(argv, 1)->valuestring, "");
    assert_string_equal(cJSON_GetArrayItem(argv, 2)->valuestring, "$PTC_T_A");
    assert_string_equal(cJSON_GetArrayItem(argv, 3)->valuestring, "${not closed");
    assert_string_equal(cJSON_GetObjectItem(r, "foo")->valuestring, "hello-z");
    /* ${VAR} reads the whole base, but the child inherits only the default set from it. */
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "inherited")));
    assert_string_equal(cJSON_GetObjectItem(r, "cwd")->valuestring, e->fixtures);
    const char *child_path = cJSON_GetObjectItem(r, "path")->valuestring;
    /* The entry's PATH, then ours (an interpreter shim such as pyenv's may prepend more). */
    char want[8192];
    FMT(want, sizeof want, "%s:%s", e->fixtures, e->pathvar + 5);
    assert_non_null(strstr(child_path, want));
    /* Every child carries the marker that stops a ptc-mcp started by us from starting more. */
    const cJSON *marker = cJSON_GetObjectItem(r, "parent_marker");
    assert_true(cJSON_IsString(marker));
    assert_int_equal(strtol(marker->valuestring, NULL, 10), (long)getpid());
    /* It dies with us even when we are SIGKILLed (PR_SET_PDEATHSIG, set in the child), and
     * leads its own process group, which a stop signals. */
    assert_int_equal(cJSON_GetObjectItem(r, "pdeathsig")->valueint, SIGKILL);
    assert_int_equal(cJSON_GetObjectItem(r, "pgid")->valueint,
                     cJSON_GetObjectItem(r, "pid")->valueint);
    cJSON_Delete(r);
}

static const char passes_env[] =
    "{\"mcpServers\": {\"env\": {\"command\": \"@FIXTURES@/fake_downstream.py\", \"env\": "
    "{\"MINE\": \"${PTC_T_SECRET}\", \"PTC_T_KEY\": \"given\"}}}}";

/* The base environment of the test below (PATH, ours, is added). */
static const char an_environ[] = "HOME=/home/t\nUSER=t\nLANG=C.UTF-8\nLC_TIME=en_GB.UTF-8\n"
                                 "TERM=() { :; }\nPTC_T_SECRET=s3\nPTC_T_TOKEN=t0k\n"
                                 "SHELL=/bin/sh\nPTC_T_KEY=k3y\nLC_ALL=C";

/* SHELL is in the default set but withheld: the exclusion wins. PTC_T_KEY is withheld too, but
 * the entry names it with its own value: that is the user's choice. */
static const char *const withheld[] = {"PTC_T_TOKEN", "SHELL", "PTC_T_KEY", "LC_ALL", NULL};

static void a_child_inherits_only_the_default_set_never_a_withheld_name(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    assert_true(log_has(e, "its \"env\" passes PTC_T_KEY"));
    assert_int_equal(mcp_client_start(c), 0);
    run_until(e, is_ready, &e->recs[0]);
    cJSON *r = call_json(e, c, "argv_env", NULL);
    const cJSON *env = cJSON_GetObjectItem(r, "env");
    assert_true(cJSON_IsObject(env));
    const char *want[][2] = {{"HOME", "/home/t"},        {"USER", "t"},  {"LANG", "C.UTF-8"},
                             {"LC_TIME", "en_GB.UTF-8"}, {"MINE", "s3"}, {"PTC_T_KEY", "given"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const cJSON *v = cJSON_GetObjectItem(env, want[i][0]);
        assert_true(cJSON_IsString(v));
        assert_string_equal(v->valuestring, want[i][1]);
    }
    /* Not in the set, withheld, or an exported shell function. */
    const char *absent[] = {"PTC_T_SECRET", "PTC_T_TOKEN", "SHELL", "LC_ALL", "TERM"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        assert_null(cJSON_GetObjectItem(env, absent[i]));
    assert_true(cJSON_IsString(cJSON_GetObjectItem(env, "PATH")));
    assert_true(cJSON_IsString(cJSON_GetObjectItem(env, "PTC_MCP_PARENT_PID")));
    cJSON_Delete(r);
}

static bool log_has_cut(void *arg)
{
    env_t *e = arg;
    return log_has(e, "[line cut") && log_has(e, "[fake] fake server starting");
}

static void stderr_lines_go_to_the_log_cut_to_size(void **state)
{
    env_t *e = *state;
    run_until(e, log_has_cut, e);
    fflush(e->ce.logf);
    /* The cut line holds exactly the limit's worth of the 10000 Ls. */
    char want[128];
    memset(want, 'L', 100);
    want[100] = ' ';
    want[101] = '[';
    want[102] = '\0';
    assert_non_null(strstr(e->ce.logbuf, want));
    assert_null(strstr(e->ce.logbuf,
                       "LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL"
                       "LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL"));
    run_until(e, is_ready, &e->recs[0]);
}

static bool log_has_suppressed(void *arg)
{
    env_t *e = arg;
    return log_has(e, "stderr lines were not logged (more than 200 a second)");
}

static void a_stderr_flood_is_counted_not_logged(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    /* The count is logged when the next second begins or stderr ends: stop the server. */
    stopped_t s = {0};
    mcp_client_stop(c, on_stopped, &s);
    run_until(e, log_has_suppressed, e);
    fflush(e->ce.logf);
    size_t lines = 0;
    for (const char *p = e->ce.logbuf; (p = strstr(p, "] flood ")) != NULL; p++)
        lines++;
    assert_true(lines >= 100); /* the first second's share */
    assert_true(lines < 20000);
}

static const char no_such_command[] =
    "{\"mcpServers\": {\"nope\": {\"command\": \"ptc-no-such-command-anywhere\"}}}";

static void unknown_command_fails_at_once(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    assert_non_null(
        strstr(failure(e, 0), "\"ptc-no-such-command-anywhere\" was not found in PATH"));
    result_t res = {0};
    assert_int_equal(mcp_client_call_tool(c, "x", NULL, 0, NULL, on_result, &res, NULL),
                     MCP_ESTATE);
    assert_int_equal(mcp_client_spawn_count(c), 0);
}

static void answers_the_servers_requests(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    cJSON *roots = cJSON_Parse("[{\"uri\": \"file:///srv/project\", \"name\": \"x\"}]");
    assert_int_equal(mcp_client_set_roots(c, roots), 0);
    cJSON_Delete(roots);
    assert_int_equal(mcp_client_start(c), 0);
    run_until(e, is_ready, &e->recs[0]);
    cJSON *r = call_json(e, c, "ask", NULL);
    assert_true(cJSON_IsObject(cJSON_GetObjectItem(r, "ping")));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "ping")), 0);
    const cJSON *rl = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "roots/list"), "roots");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(rl, 0), "uri")->valuestring,
                        "file:///srv/project");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(r, "sampling/createMessage"), "model")->valuestring,
        "fixture-model");
    assert_int_equal(e->recs[0].peer_reqs, 1);
    /* Elicitation was not declared: refused, like an unknown method. */
    const cJSON *el = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "elicitation/create"), "error");
    assert_int_equal(cJSON_GetObjectItem(el, "code")->valueint, -32601);
    const cJSON *fb = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "foo/bar"), "error");
    assert_int_equal(cJSON_GetObjectItem(fb, "code")->valueint, -32601);
    cJSON_Delete(r);
}

static bool peer_cancelled_once(void *arg)
{
    rec_t *r = arg;
    return r->peer_cancels > 0;
}

static void server_cancels_its_own_request(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    cJSON *r = call_json(e, c, "ask_then_cancel", NULL);
    cJSON_Delete(r);
    run_until(e, peer_cancelled_once, &e->recs[0]);
    assert_int_equal(e->recs[0].peer_reqs, 1);
    assert_int_equal(e->recs[0].peer_cancels, 1);
    assert_null(e->recs[0].held);
}

static bool log_has_server_note(void *arg)
{
    env_t *e = arg;
    return log_has(e, "[fake] log: {\"note\":\"from the server\"}");
}

static void logs_server_messages_and_sends_roots_changes(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    cJSON *r = call_json(e, c, "log", NULL);
    cJSON_Delete(r);
    run_until(e, log_has_server_note, e);
    assert_true(log_has(e, "warning: [fake] log:"));
    cJSON *roots = cJSON_Parse("[{\"uri\": \"file:///srv/a\"}]");
    assert_int_equal(mcp_client_set_roots(c, roots), 0);
    cJSON_Delete(roots);
    r = call_json(e, c, "roots_changed_seen", NULL);
    assert_int_equal(cJSON_GetObjectItem(r, "seen")->valueint, 1);
    cJSON_Delete(r);
    /* Any request goes through mcp_client_request: an unknown one gets the server's error. */
    result_t res = {0};
    assert_int_equal(mcp_client_request(c, "no/such", NULL, 0, on_result, &res, NULL), 0);
    run_until(e, call_done, &res);
    assert_int_equal(res.err, MCP_EREMOTE);
    assert_int_equal(cJSON_GetObjectItem(res.error, "code")->valueint, -32601);
    assert_non_null(strstr(res.text, "Method not found: no/such"));
    result_clear(&res);
}

static void calls_beyond_the_limit_are_refused(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    result_t a = {0}, b = {0}, x = {0};
    assert_int_equal(mcp_client_call_tool(c, "echo", NULL, 0, NULL, on_result, &a, NULL), 0);
    assert_int_equal(mcp_client_call_tool(c, "echo", NULL, 0, NULL, on_result, &b, NULL), 0);
    assert_int_equal(mcp_client_call_tool(c, "echo", NULL, 0, NULL, on_result, &x, NULL),
                     MCP_EBUSY);
    run_until(e, call_done, &a);
    run_until(e, call_done, &b);
    assert_int_equal(a.err, 0);
    assert_int_equal(b.err, 0);
    assert_int_equal(x.calls, 0);
    /* Room again once they finished. */
    cJSON *r = call_json(e, c, "echo", NULL);
    cJSON_Delete(r);
    result_clear(&a);
    result_clear(&b);
}

static void refuses_sampling_without_an_owner(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    cJSON *r = call_json(e, c, "ask", NULL);
    const cJSON *sm =
        cJSON_GetObjectItem(cJSON_GetObjectItem(r, "sampling/createMessage"), "error");
    assert_int_equal(cJSON_GetObjectItem(sm, "code")->valueint, -32601);
    assert_non_null(strstr(cJSON_GetObjectItem(sm, "message")->valuestring, "cannot forward"));
    assert_int_equal(
        cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "roots/list"), "roots")), 0);
    cJSON_Delete(r);
}

static void reports_progress(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    result_t res = {0};
    assert_int_equal(
        mcp_client_call_tool(c, "progress", NULL, 0, on_progress, on_result, &res, NULL), 0);
    run_until(e, call_done, &res);
    assert_int_equal(res.err, 0);
    assert_int_equal(res.n_progress, 2);
    assert_true(res.progress[0] == 1.0 && res.progress[1] == 2.0);
    assert_string_equal(res.progress_msg, "step 2");
    result_clear(&res);
}

static void stop_escalates_to_sigkill(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    result_t res = {0};
    assert_int_equal(mcp_client_call_tool(c, "hang", NULL, 0, NULL, on_result, &res, NULL), 0);
    stopped_t s = {0};
    mcp_client_stop(c, on_stopped, &s);
    assert_int_equal(res.calls, 1);
    assert_int_equal(res.err, MCP_ECANCELED);
    result_clear(&res);
    assert_int_equal(mcp_client_call_tool(c, "echo", NULL, 0, NULL, on_result, &res, NULL),
                     MCP_ESTATE);
    run_until(e, stop_done, &s);
    assert_int_equal(s.done, 1);
    assert_true(log_has(e, "sending SIGTERM"));
    assert_true(log_has(e, "ignoring SIGTERM"));
    assert_true(log_has(e, "sending SIGKILL"));
    assert_int_equal(mcp_client_pid(c), 0);
}

static const char an_http_entry[] =
    "{\"mcpServers\": {\"remote\": {\"type\": \"http\", \"url\": \"http://127.0.0.1:9/mcp\"}}}";

static void http_entries_without_an_http_client_fail_clearly(void **state)
{
    env_t *e = *state;
    assert_non_null(strstr(failure(e, 0), "need ptc-mcp's HTTP client"));
}

static const char a_legacy_sse_entry[] =
    "{\"mcpServers\": {\"old\": {\"type\": \"sse\", \"url\": \"http://127.0.0.1:9/sse\"}}}";

static void legacy_sse_entries_fail_clearly(void **state)
{
    env_t *e = *state;
    assert_non_null(strstr(failure(e, 0), "legacy SSE transport"));
}

static void free_with_calls_in_flight_cancels_them(void **state)
{
    env_t *e = *state;
    mcp_client_t *c = e->recs[0].c;
    result_t sent = {0}, waiting = {0};
    assert_int_equal(mcp_client_call_tool(c, "hang", NULL, 0, NULL, on_result, &sent, NULL), 0);
    mcp_client_free(c);
    e->recs[0].c = NULL;
    assert_int_equal(sent.calls, 1);
    assert_int_equal(sent.err, MCP_ECANCELED);
    result_clear(&sent);
    result_clear(&waiting);
}

int main(void)
{
    /* As in the binary: a server that exits while we write must not kill the test. */
    signal(SIGPIPE, SIG_IGN);
    /* CLIENT_TEST=pattern runs a subset while debugging. */
    const char *only = getenv("CLIENT_TEST");
    if (only != NULL) cmocka_set_test_filter(only);
    const struct CMUnitTest tests[] = {
        FIXTURE(lists_every_page_and_says_who_we_are,
                .args = "\"--tools\", \"7\", \"--page\", \"3\"", .up = UP_CREATED),
        FIXTURE(declares_what_the_owner_can_forward, .can_sample = true, .has_roots = true,
                .peer = true, .up = UP_READY),
        FIXTURE(list_changed_relists, .args = "\"--page\", \"4\"", .up = UP_READY),
        FIXTURE(garbage_and_huge_lines_are_dropped, .args = "\"--mode\", \"garbage\"",
                .max_message_bytes = 1u << 20, .up = UP_READY),
        /* The timeout only has to outlast the fine server's start (a python3 start and a
         * handshake), which the test's ordering checks: on a loaded 2-core machine that took more
         * than 1.5 s. */
        FIXTURE(silent_server_times_out_without_blocking_others, .config = mute_and_fine,
                .second = true, .start_timeout_ms = 5000, .up = UP_STARTED),
        FIXTURE(crash_fails_the_call_and_restarts, .up = UP_READY),
        FIXTURE(gives_up_after_the_restart_budget,
                .args = "\"--mode\", \"die-after-ready\", \"--exit-code\", \"3\"", .restart_max = 2,
                .restart_base_ms = 20, .up = UP_STARTED),
        /* Each run stays up far longer than the healthy period before it dies. */
        FIXTURE(a_healthy_period_resets_the_restart_budget,
                .args = "\"--mode\", \"die-after-ready\", \"--die-after-ms\", \"1000\"",
                .restart_max = 1, .restart_base_ms = 10, .healthy_ms = 50, .up = UP_STARTED),
        FIXTURE(exiting_before_the_handshake_fails_with_the_exit_status, .config = quits,
                .up = UP_STARTED),
        FIXTURE(freeing_from_a_callback_is_safe, .up = UP_READY),
        FIXTURE(timeout_cancels_downstream_and_drops_late_answer, .up = UP_READY),
        FIXTURE(cancel_calls_back_once, .up = UP_READY),
        FIXTURE(many_calls_in_flight_get_their_own_answers, .up = UP_STARTED),
        FIXTURE(expands_vars_and_finds_the_command_on_the_entry_path, .config = vars,
                .environ = "PTC_T_A=hello\nFOO=outer", .up = UP_CREATED),
        FIXTURE(a_child_inherits_only_the_default_set_never_a_withheld_name, .config = passes_env,
                .environ = an_environ, .withheld_env = withheld, .up = UP_CREATED),
        FIXTURE(stderr_lines_go_to_the_log_cut_to_size, .args = "\"--long-stderr\", \"10000\"",
                .max_stderr_line = 100, .up = UP_STARTED),
        FIXTURE(a_stderr_flood_is_counted_not_logged, .args = "\"--stderr-flood\", \"20000\"",
                .up = UP_READY),
        FIXTURE(unknown_command_fails_at_once, .config = no_such_command, .up = UP_STARTED),
        FIXTURE(answers_the_servers_requests, .can_sample = true, .has_roots = true, .peer = true,
                .up = UP_CREATED),
        FIXTURE(refuses_sampling_without_an_owner, .up = UP_READY),
        FIXTURE(server_cancels_its_own_request, .can_sample = true, .hold_peers = true,
                .peer = true, .up = UP_READY),
        FIXTURE(logs_server_messages_and_sends_roots_changes, .has_roots = true, .up = UP_READY),
        FIXTURE(calls_beyond_the_limit_are_refused, .max_calls = 2, .up = UP_STARTED),
        FIXTURE(reports_progress, .up = UP_READY),
        FIXTURE(stop_escalates_to_sigkill, .args = "\"--mode\", \"stubborn\"", .stop_grace_ms = 200,
                .up = UP_READY),
        FIXTURE(http_entries_without_an_http_client_fail_clearly, .config = an_http_entry,
                .library_defaults = true, .up = UP_STARTED),
        FIXTURE(legacy_sse_entries_fail_clearly, .config = a_legacy_sse_entry,
                .library_defaults = true, .up = UP_STARTED),
        FIXTURE(free_with_calls_in_flight_cancels_them, .up = UP_READY),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
