/* Resources, resource templates, subscriptions, prompts, completions and content blocks, driven
 * through a session with a capturing transport. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h" /* mcp__session_set_credential: what the HTTP transport does */
#include "mcp.h"
#include "sink.h"

typedef struct env {
    uv_loop_t loop;
    mcp_logger_t log;
    mcp_server_t *srv;
    mcp_session_t *a, *b;
    sink_t sa, sb;
    int reads;
    mcp_identity_t seen; /* the identity of the last read (read_who) */
    mcp_identity_t ended[4];
    int n_ended;
} env_t;

static int setup(void **state)
{
    env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    mcp_server_opts_t o;
    mcp_server_opts_default(&o);
    o.list_page_size = 3;
    /* the refusals below are logged on purpose: only emergencies are shown */
    sink_sessions_open(&e->loop, &e->log, MCP_LOG_EMERGENCY, &o, &e->srv, &e->a, &e->sa, &e->b,
                       &e->sb);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    sink_sessions_close(&e->loop, e->srv, e->a, &e->sa, e->b, &e->sb);
    free(e);
    return 0;
}

/* Sends one request and returns the session's last message (owned by the sink). */
static cJSON *ask(mcp_session_t *s, sink_t *k, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t before = k->n;
    mcp_session_receive(s, buf, strlen(buf));
    assert_true(k->n > before);
    return k->msgs[k->n - 1];
}

static cJSON *init(mcp_session_t *s, sink_t *k)
{
    return ask(s, k,
               "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
               "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}");
}

static const cJSON *get(const cJSON *o, const char *path)
{
    /* path: dot-separated keys; a number selects an array element. */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *cur = o;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ".", &save); tok != NULL && cur != NULL;
         tok = strtok_r(NULL, ".", &save)) {
        if (tok[0] >= '0' && tok[0] <= '9')
            cur = cJSON_GetArrayItem(cur, (int)strtol(tok, NULL, 10));
        else
            cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
    }
    return cur;
}

static const char *get_str(const cJSON *o, const char *path)
{
    const cJSON *v = get(o, path);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int error_code(const cJSON *resp)
{
    const cJSON *c = get(resp, "error.code");
    return cJSON_IsNumber(c) ? c->valueint : 0;
}

/* --- fixtures -------------------------------------------------------------------------- */

static int read_static(const char *uri, const cJSON *vars, const mcp_identity_t *who, void *data,
                       cJSON **contents, char *msg, size_t msg_size)
{
    (void)who;
    (void)msg;
    (void)msg_size;
    env_t *e = data;
    e->reads++;
    assert_null(vars);
    cJSON *arr = cJSON_CreateArray();
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "uri", uri);
    cJSON_AddStringToObject(c, "mimeType", "text/plain");
    cJSON_AddStringToObject(c, "text", "static body");
    cJSON_AddItemToArray(arr, c);
    *contents = arr;
    return MCP_OK;
}

/* A template read that echoes its variables, and refuses id "missing". */
static int read_item(const char *uri, const cJSON *vars, const mcp_identity_t *who, void *data,
                     cJSON **contents, char *msg, size_t msg_size)
{
    (void)who;
    (void)data;
    const char *id = cJSON_GetObjectItemCaseSensitive(vars, "id")->valuestring;
    const char *part = cJSON_GetObjectItemCaseSensitive(vars, "part")->valuestring;
    if (strcmp(id, "missing") == 0) {
        snprintf(msg, msg_size, "no item %s", id);
        return MCP_EINVAL;
    }
    char text[256];
    snprintf(text, sizeof text, "item %s part %s", id, part);
    cJSON *arr = cJSON_CreateArray();
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "uri", uri);
    cJSON_AddStringToObject(c, "text", text);
    cJSON_AddItemToArray(arr, c);
    *contents = arr;
    return MCP_OK;
}

/* A buggy handler: contents without text or blob. */
static int read_broken(const char *uri, const cJSON *vars, const mcp_identity_t *who, void *data,
                       cJSON **contents, char *msg, size_t msg_size)
{
    (void)who;
    (void)vars;
    (void)data;
    (void)msg;
    (void)msg_size;
    cJSON *arr = cJSON_CreateArray();
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "uri", uri);
    cJSON_AddItemToArray(arr, c);
    *contents = arr;
    return MCP_OK;
}

/* Records who reads. */
static int read_who(const char *uri, const cJSON *vars, const mcp_identity_t *who, void *data,
                    cJSON **contents, char *msg, size_t msg_size)
{
    (void)vars;
    (void)msg;
    (void)msg_size;
    env_t *e = data;
    e->seen = *who;
    *contents = cJSON_CreateArray();
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "uri", uri);
    cJSON_AddStringToObject(c, "text", "x");
    cJSON_AddItemToArray(*contents, c);
    return MCP_OK;
}

static void on_end(const mcp_identity_t *who, void *data)
{
    env_t *e = data;
    assert_true(e->n_ended < 4);
    e->ended[e->n_ended++] = *who;
}

static void add_res(env_t *e, const char *uri, mcp_resource_read_fn fn)
{
    mcp_resource_def_t d = {.uri = uri, .name = uri, .description = "d", .read = fn, .data = e};
    assert_int_equal(mcp_server_add_resource(e->srv, &d), 0);
}

static int greet(const char *name, const cJSON *args, void *data, cJSON **messages, char *msg,
                 size_t msg_size)
{
    (void)name;
    (void)data;
    const char *who = cJSON_GetObjectItemCaseSensitive(args, "who")->valuestring;
    if (strcmp(who, "nobody") == 0) {
        snprintf(msg, msg_size, "who: nobody cannot be greeted");
        return MCP_EINVAL;
    }
    const cJSON *style = cJSON_GetObjectItemCaseSensitive(args, "style");
    char text[256];
    snprintf(text, sizeof text, "Greet %s %s", who,
             cJSON_IsString(style) ? style->valuestring : "");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddItemToObject(m, "content", mcp_text_block(text));
    *messages = cJSON_CreateArray();
    cJSON_AddItemToArray(*messages, m);
    return MCP_OK;
}

static int bad_prompt(const char *name, const cJSON *args, void *data, cJSON **messages, char *msg,
                      size_t msg_size)
{
    (void)name;
    (void)args;
    (void)data;
    (void)msg;
    (void)msg_size;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "system"); /* not a role MCP knows */
    cJSON_AddItemToObject(m, "content", mcp_text_block("x"));
    *messages = cJSON_CreateArray();
    cJSON_AddItemToArray(*messages, m);
    return MCP_OK;
}

/* Completes "who" with 150 names that start with the typed value. */
static int complete_who(const char *arg, const char *value, const cJSON *context, void *data,
                        cJSON **values)
{
    (void)context;
    (void)data;
    *values = cJSON_CreateArray();
    for (int i = 0; i < 150 && strcmp(arg, "who") == 0; i++) {
        char v[64];
        snprintf(v, sizeof v, "%s%03d", value, i);
        cJSON_AddItemToArray(*values, cJSON_CreateString(v));
    }
    return MCP_OK;
}

static const mcp_prompt_arg_t greet_args[] = {
    {.name = "who", .description = "whom to greet", .required = true},
    {.name = "style", .required = false},
};

static void add_greet(env_t *e)
{
    mcp_prompt_def_t p = {.name = "greet",
                          .description = "Greets someone.",
                          .args = greet_args,
                          .n_args = 2,
                          .get = greet,
                          .complete = complete_who};
    assert_int_equal(mcp_server_add_prompt(e->srv, &p), 0);
}

/* --- tests ------------------------------------------------------------------------------ */

static void capabilities_are_advertised_only_for_what_was_registered(void **state)
{
    env_t *e = *state;
    cJSON *r = init(e->a, &e->sa);
    assert_non_null(get(r, "result.capabilities.tools"));
    assert_null(get(r, "result.capabilities.resources"));
    assert_null(get(r, "result.capabilities.prompts"));
    assert_null(get(r, "result.capabilities.completions"));
    r = ask(e->a, &e->sa, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}");
    assert_int_equal(error_code(r), MCP_JSONRPC_METHOD_NOT_FOUND);
    r = ask(e->a, &e->sa, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"prompts/list\"}");
    assert_int_equal(error_code(r), MCP_JSONRPC_METHOD_NOT_FOUND);

    add_res(e, "test://a", read_static);
    add_greet(e);
    r = init(e->b, &e->sb);
    assert_true(cJSON_IsTrue(get(r, "result.capabilities.resources.subscribe")));
    assert_true(cJSON_IsTrue(get(r, "result.capabilities.resources.listChanged")));
    assert_true(cJSON_IsTrue(get(r, "result.capabilities.prompts.listChanged")));
    assert_non_null(get(r, "result.capabilities.completions"));
    assert_int_equal(mcp_server_declare(e->srv, "sampling"), MCP_EINVAL);
}

static void declared_capability_is_advertised_before_anything_is_registered(void **state)
{
    env_t *e = *state;
    assert_int_equal(mcp_server_declare(e->srv, "resources"), 0);
    cJSON *r = init(e->a, &e->sa);
    assert_non_null(get(r, "result.capabilities.resources"));
    assert_null(get(r, "result.capabilities.prompts"));
    r = ask(e->a, &e->sa, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}");
    assert_int_equal(cJSON_GetArraySize(get(r, "result.resources")), 0);
    assert_null(get(r, "result.nextCursor"));
}

static void resource_pages_follow_cursors_and_refuse_forged_ones(void **state)
{
    env_t *e = *state;
    const char *uris[] = {"test://e", "test://b", "test://d", "test://a", "test://c"};
    for (size_t i = 0; i < 5; i++)
        add_res(e, uris[i], read_static);
    init(e->a, &e->sa);
    cJSON *r = ask(e->a, &e->sa, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}");
    assert_int_equal(cJSON_GetArraySize(get(r, "result.resources")), 3);
    assert_string_equal(get_str(r, "result.resources.0.uri"), "test://a");
    assert_string_equal(get_str(r, "result.resources.2.uri"), "test://c");
    assert_string_equal(get_str(r, "result.resources.0.description"), "d");
    char cursor[256];
    snprintf(cursor, sizeof cursor, "%s", get_str(r, "result.nextCursor"));
    /* A resource added before the cursor's position does not shift the next page. */
    add_res(e, "test://aa", read_static);
    r = ask(e->a, &e->sa,
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/list\",\"params\":{\"cursor\":"
            "\"%s\"}}",
            cursor);
    assert_int_equal(cJSON_GetArraySize(get(r, "result.resources")), 2);
    assert_string_equal(get_str(r, "result.resources.0.uri"), "test://d");
    assert_null(get(r, "result.nextCursor"));
    r = ask(e->a, &e->sa,
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/list\",\"params\":{\"cursor\":"
            "\"bm9wZQ\"}}");
    assert_int_equal(error_code(r), MCP_JSONRPC_INVALID_PARAMS);
    /* The addition was announced to the initialized session only. */
    bool announced = false;
    for (size_t i = 0; i < e->sa.n; i++)
        announced = announced || (get_str(e->sa.msgs[i], "method") &&
                                  strcmp(get_str(e->sa.msgs[i], "method"),
                                         "notifications/resources/list_changed") == 0);
    assert_true(announced);
    assert_int_equal(e->sb.n, 0);
}

static void reading_resolves_resources_and_template_variables(void **state)
{
    env_t *e = *state;
    add_res(e, "test://static", read_static);
    mcp_resource_def_t t = {.uri = "test://item/{id}/part-{part}",
                            .name = "item",
                            .mime_type = "text/plain",
                            .read = read_item};
    assert_int_equal(mcp_server_add_resource_template(e->srv, &t), 0);
    init(e->a, &e->sa);
    cJSON *r = ask(e->a, &e->sa,
                   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\",\"params\":{"
                   "\"uri\":\"test://static\"}}");
    assert_string_equal(get_str(r, "result.contents.0.text"), "static body");
    assert_int_equal(e->reads, 1);
    r = ask(e->a, &e->sa,
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":{"
            "\"uri\":\"test://item/123/part-x7\"}}");
    assert_string_equal(get_str(r, "result.contents.0.text"), "item 123 part x7");
    assert_string_equal(get_str(r, "result.contents.0.uri"), "test://item/123/part-x7");
    /* A variable never spans a '/', and must not be empty. */
    r = ask(e->a, &e->sa,
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/read\",\"params\":{"
            "\"uri\":\"test://item/1/2/part-x\"}}");
    assert_int_equal(error_code(r), MCP_RESOURCE_NOT_FOUND);
    assert_string_equal(get_str(r, "error.data.uri"), "test://item/1/2/part-x");
    r = ask(e->a, &e->sa,
            "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/read\",\"params\":{"
            "\"uri\":\"test://item//part-x\"}}");
    assert_int_equal(error_code(r), MCP_RESOURCE_NOT_FOUND);
    /* The handler's own "not found", with its reason. */
    r = ask(e->a, &e->sa,
            "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/read\",\"params\":{"
            "\"uri\":\"test://item/missing/part-1\"}}");
    assert_int_equal(error_code(r), MCP_RESOURCE_NOT_FOUND);
    assert_non_null(strstr(get_str(r, "error.message"), "no item missing"));
    r = ask(e->a, &e->sa,
            "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/read\",\"params\":{}}");
    assert_int_equal(error_code(r), MCP_JSONRPC_INVALID_PARAMS);
    r = ask(e->a, &e->sa, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"resources/templates/list\"}");
    assert_string_equal(get_str(r, "result.resourceTemplates.0.uriTemplate"),
                        "test://item/{id}/part-{part}");
    assert_string_equal(get_str(r, "result.resourceTemplates.0.mimeType"), "text/plain");
}

/* The identity resources/read passes: of the session, and of the credential for a stateless
 * request, which has no session. */
static mcp_identity_t read_as(env_t *e, mcp_session_t *s, sink_t *k, bool modern)
{
    cJSON *r =
        ask(s, k,
            modern ? "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"resources/read\",\"params\":{"
                     "\"uri\":\"test://who\",\"_meta\":{\"io.modelcontextprotocol/"
                     "protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/"
                     "clientCapabilities\":{}}}}"
                   : "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"resources/read\",\"params\":{"
                     "\"uri\":\"test://who\"}}");
    assert_string_equal(get_str(r, "result.contents.0.text"), "x");
    return e->seen;
}

static void identities_tell_sessions_and_credentials_apart(void **state)
{
    env_t *e = *state;
    add_res(e, "test://who", read_who);
    init(e->a, &e->sa);
    init(e->b, &e->sb);
    mcp_identity_t a1 = read_as(e, e->a, &e->sa, false);
    mcp_identity_t a2 = read_as(e, e->a, &e->sa, false);
    mcp_identity_t b1 = read_as(e, e->b, &e->sb, false);
    assert_true(mcp_identity_equal(&a1, &a2));
    assert_false(mcp_identity_equal(&a1, &b1));
    mcp_identity_t sa;
    mcp_session_identity(e->a, &sa);
    assert_true(mcp_identity_equal(&sa, &a1));
    /* Without a credential, stateless requests on either session are one client. */
    mcp_identity_t ma = read_as(e, e->a, &e->sa, true);
    mcp_identity_t mb = read_as(e, e->b, &e->sb, true);
    assert_true(mcp_identity_equal(&ma, &mb));
    assert_false(mcp_identity_equal(&ma, &a1));
    /* The same credential: still two sessions, but one stateless client. */
    unsigned char t1[MCP__CRED_BYTES], t2[MCP__CRED_BYTES];
    mcp__credential_digest("token-one", 9, t1);
    mcp__credential_digest("token-two", 9, t2);
    mcp__session_set_credential(e->a, t1);
    mcp__session_set_credential(e->b, t1);
    mcp_identity_t a_t1 = read_as(e, e->a, &e->sa, false);
    assert_false(mcp_identity_equal(&a_t1, &a1));
    mcp_identity_t b_t1 = read_as(e, e->b, &e->sb, false);
    assert_false(mcp_identity_equal(&a_t1, &b_t1));
    mcp_identity_t ma_t1 = read_as(e, e->a, &e->sa, true);
    mcp_identity_t mb_t1 = read_as(e, e->b, &e->sb, true);
    assert_true(mcp_identity_equal(&ma_t1, &mb_t1));
    assert_false(mcp_identity_equal(&ma_t1, &ma));
    /* Another credential is another client, with or without a session. */
    mcp__session_set_credential(e->b, t2);
    mcp_identity_t mb_t2 = read_as(e, e->b, &e->sb, true);
    assert_false(mcp_identity_equal(&ma_t1, &mb_t2));
    mcp_session_identity(e->b, &sa);
    mcp_identity_t b_t2 = read_as(e, e->b, &e->sb, false);
    assert_true(mcp_identity_equal(&sa, &b_t2));
    assert_false(mcp_identity_equal(&b_t2, &b1));
}

static void idle_after_shutdown(mcp_session_t *s, void *data)
{
    (void)s;
    (void)data;
}

static void the_end_hook_hears_once_of_each_ended_session(void **state)
{
    env_t *e = *state;
    mcp_server_on_session_end(e->srv, on_end, e);
    init(e->a, &e->sa);
    mcp_identity_t a, b;
    mcp_session_identity(e->a, &a);
    mcp_session_identity(e->b, &b);
    /* Shut down with nothing in flight: told at once, and not again when freed. */
    mcp_session_shutdown(e->a, idle_after_shutdown, NULL);
    assert_int_equal(e->n_ended, 1);
    assert_true(mcp_identity_equal(&e->ended[0], &a));
    mcp_session_free(e->a);
    e->a = NULL;
    assert_int_equal(e->n_ended, 1);
    /* Freed without a shutdown: told then. */
    mcp_session_free(e->b);
    e->b = NULL;
    assert_int_equal(e->n_ended, 2);
    assert_true(mcp_identity_equal(&e->ended[1], &b));
    /* A stateless session's state belongs to its credential: nothing to tell. */
    mcp_session_t *st;
    sink_t ks = {0};
    assert_int_equal(mcp_session_new(e->srv, &sink_ops, &ks, &st), 0);
    mcp_session_set_stateless(st);
    mcp_session_free(st);
    assert_int_equal(e->n_ended, 2);
    /* Unregistered: nothing is called. */
    mcp_server_on_session_end(e->srv, NULL, NULL);
    assert_int_equal(mcp_session_new(e->srv, &sink_ops, &ks, &st), 0);
    mcp_session_free(st);
    assert_int_equal(e->n_ended, 2);
}

static void a_handler_returning_invalid_contents_gets_an_internal_error(void **state)
{
    env_t *e = *state;
    add_res(e, "test://broken", read_broken);
    init(e->a, &e->sa);
    cJSON *r = ask(e->a, &e->sa,
                   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\",\"params\":{"
                   "\"uri\":\"test://broken\"}}");
    assert_int_equal(error_code(r), MCP_JSONRPC_INTERNAL_ERROR);
    assert_non_null(strstr(get_str(r, "error.message"), "text or blob"));
}

static void bad_templates_and_duplicates_are_refused(void **state)
{
    env_t *e = *state;
    const char *bad[] = {"test://{}", "test://{a", "test://a}", "test://{a}{b}", "test://{a{b}}"};
    for (size_t i = 0; i < 5; i++) {
        mcp_resource_def_t t = {.uri = bad[i], .name = "t", .read = read_item};
        assert_int_equal(mcp_server_add_resource_template(e->srv, &t), MCP_EINVAL);
    }
    add_res(e, "test://x", read_static);
    mcp_resource_def_t d = {.uri = "test://x", .name = "x", .read = read_static};
    assert_int_equal(mcp_server_add_resource(e->srv, &d), MCP_EINVAL);
    d.read = NULL;
    d.uri = "test://y";
    assert_int_equal(mcp_server_add_resource(e->srv, &d), MCP_EINVAL);
    assert_int_equal(mcp_server_remove_resource(e->srv, "test://x"), 0);
    assert_int_equal(mcp_server_remove_resource(e->srv, "test://x"), MCP_EINVAL);
}

static size_t count_updates(const sink_t *k, const char *uri)
{
    size_t n = 0;
    for (size_t i = 0; i < k->n; i++) {
        const char *m = get_str(k->msgs[i], "method");
        if (m && strcmp(m, "notifications/resources/updated") == 0 &&
            strcmp(get_str(k->msgs[i], "params.uri"), uri) == 0)
            n++;
    }
    return n;
}

static void updates_reach_only_subscribed_sessions_until_they_unsubscribe(void **state)
{
    env_t *e = *state;
    add_res(e, "test://watched", read_static);
    mcp_resource_def_t t = {.uri = "test://item/{id}/part-{part}", .name = "i", .read = read_item};
    assert_int_equal(mcp_server_add_resource_template(e->srv, &t), 0);
    init(e->a, &e->sa);
    init(e->b, &e->sb);
    const char *sub = "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"resources/%s\",\"params\":{"
                      "\"uri\":\"%s\"}}";
    cJSON *r = ask(e->a, &e->sa, sub, 1, "subscribe", "test://watched");
    assert_non_null(get(r, "result"));
    r = ask(e->a, &e->sa, sub, 2, "subscribe", "test://watched"); /* twice is once */
    assert_non_null(get(r, "result"));
    r = ask(e->a, &e->sa, sub, 3, "subscribe", "test://item/7/part-1");
    assert_non_null(get(r, "result"));
    r = ask(e->a, &e->sa, sub, 4, "subscribe", "test://nothing-here");
    assert_int_equal(error_code(r), MCP_RESOURCE_NOT_FOUND);
    assert_true(mcp_session_subscribed(e->a, "test://watched"));
    assert_false(mcp_session_subscribed(e->b, "test://watched"));

    mcp_server_resource_updated(e->srv, "test://watched");
    mcp_server_resource_updated(e->srv, "test://item/7/part-1");
    assert_int_equal(count_updates(&e->sa, "test://watched"), 1);
    assert_int_equal(count_updates(&e->sa, "test://item/7/part-1"), 1);
    assert_int_equal(count_updates(&e->sb, "test://watched"), 0);

    r = ask(e->a, &e->sa, sub, 5, "unsubscribe", "test://watched");
    assert_non_null(get(r, "result"));
    assert_false(mcp_session_subscribed(e->a, "test://watched"));
    mcp_server_resource_updated(e->srv, "test://watched");
    assert_int_equal(count_updates(&e->sa, "test://watched"), 1);
}

static void prompt_arguments_are_validated_before_the_handler_runs(void **state)
{
    env_t *e = *state;
    add_greet(e);
    init(e->a, &e->sa);
    cJSON *r = ask(e->a, &e->sa, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/list\"}");
    assert_string_equal(get_str(r, "result.prompts.0.name"), "greet");
    assert_true(cJSON_IsTrue(get(r, "result.prompts.0.arguments.0.required")));
    assert_true(cJSON_IsFalse(get(r, "result.prompts.0.arguments.1.required")));
    const char *req = "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"prompts/get\",\"params\":{"
                      "\"name\":\"%s\",\"arguments\":%s}}";
    r = ask(e->a, &e->sa, req, 2, "greet", "{\"who\":\"Ada\",\"style\":\"warmly\"}");
    assert_string_equal(get_str(r, "result.messages.0.content.text"), "Greet Ada warmly");
    assert_string_equal(get_str(r, "result.description"), "Greets someone.");
    r = ask(e->a, &e->sa, req, 3, "greet", "{}");
    assert_int_equal(error_code(r), MCP_JSONRPC_INVALID_PARAMS);
    assert_non_null(strstr(get_str(r, "error.message"), "missing required argument who"));
    r = ask(e->a, &e->sa, req, 4, "greet", "{\"who\":\"Ada\",\"mood\":\"x\"}");
    assert_non_null(strstr(get_str(r, "error.message"), "unknown argument mood"));
    r = ask(e->a, &e->sa, req, 5, "greet", "{\"who\":3}");
    assert_non_null(strstr(get_str(r, "error.message"), "must be a string"));
    r = ask(e->a, &e->sa, req, 6, "nope", "{}");
    assert_int_equal(error_code(r), MCP_JSONRPC_INVALID_PARAMS);
    r = ask(e->a, &e->sa, req, 7, "greet", "{\"who\":\"nobody\"}");
    assert_int_equal(error_code(r), MCP_JSONRPC_INVALID_PARAMS);
    assert_non_null(strstr(get_str(r, "error.message"), "nobody cannot be greeted"));
}

static void a_prompt_handler_building_invalid_messages_gets_an_internal_error(void **state)
{
    env_t *e = *state;
    mcp_prompt_def_t p = {.name = "bad", .get = bad_prompt};
    assert_int_equal(mcp_server_add_prompt(e->srv, &p), 0);
    assert_int_equal(mcp_server_add_prompt(e->srv, &p), MCP_EINVAL);
    mcp_prompt_arg_t dup[] = {{.name = "x"}, {.name = "x"}};
    mcp_prompt_def_t q = {.name = "dup", .args = dup, .n_args = 2, .get = bad_prompt};
    assert_int_equal(mcp_server_add_prompt(e->srv, &q), MCP_EINVAL);
    init(e->a, &e->sa);
    cJSON *r = ask(e->a, &e->sa,
                   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/get\",\"params\":{\"name\":"
                   "\"bad\"}}");
    assert_int_equal(error_code(r), MCP_JSONRPC_INTERNAL_ERROR);
    assert_non_null(strstr(get_str(r, "error.message"), "role"));
}

static void completions_are_capped_and_checked_against_the_reference(void **state)
{
    env_t *e = *state;
    add_greet(e);
    init(e->a, &e->sa);
    const char *req = "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"completion/complete\","
                      "\"params\":{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"%s\"},"
                      "\"argument\":{\"name\":\"%s\",\"value\":\"Ad\"}}}";
    cJSON *r = ask(e->a, &e->sa, req, 1, "greet", "who");
    assert_int_equal(cJSON_GetArraySize(get(r, "result.completion.values")),
                     MCP_MAX_COMPLETION_VALUES);
    assert_string_equal(get_str(r, "result.completion.values.0"), "Ad000");
    assert_int_equal(get(r, "result.completion.total")->valueint, 150);
    assert_true(cJSON_IsTrue(get(r, "result.completion.hasMore")));
    /* An argument the completer has nothing for gets an empty answer; unknown ones an error. */
    r = ask(e->a, &e->sa, req, 2, "greet", "style");
    assert_int_equal(cJSON_GetArraySize(get(r, "result.completion.values")), 0);
    assert_int_equal(get(r, "result.completion.total")->valueint, 0);
    r = ask(e->a, &e->sa, req, 3, "greet", "mood");
    assert_int_equal(error_code(r), MCP_JSONRPC_INVALID_PARAMS);
    r = ask(e->a, &e->sa, req, 4, "nope", "who");
    assert_int_equal(error_code(r), MCP_JSONRPC_INVALID_PARAMS);
    r = ask(e->a, &e->sa,
            "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"completion/complete\",\"params\":{"
            "\"ref\":{\"type\":\"ref/other\"},\"argument\":{\"name\":\"a\",\"value\":\"\"}}}");
    assert_int_equal(error_code(r), MCP_JSONRPC_INVALID_PARAMS);
}

static void template_variables_complete_through_their_template(void **state)
{
    env_t *e = *state;
    mcp_resource_def_t t = {.uri = "test://item/{id}/part-{part}", .name = "i", .read = read_item};
    assert_int_equal(mcp_server_add_resource_template(e->srv, &t), 0);
    cJSON *r = init(e->a, &e->sa);
    /* No completer registered: no completions capability, but the method still answers. */
    assert_null(get(r, "result.capabilities.completions"));
    r = ask(e->a, &e->sa,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"completion/complete\",\"params\":{"
            "\"ref\":{\"type\":\"ref/resource\",\"uri\":\"test://item/{id}/part-{part}\"},"
            "\"argument\":{\"name\":\"part\",\"value\":\"\"}}}");
    assert_int_equal(cJSON_GetArraySize(get(r, "result.completion.values")), 0);
    assert_false(cJSON_IsTrue(get(r, "result.completion.hasMore")));
    r = ask(e->a, &e->sa,
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"completion/complete\",\"params\":{"
            "\"ref\":{\"type\":\"ref/resource\",\"uri\":\"test://item/{id}/part-{part}\"},"
            "\"argument\":{\"name\":\"par\",\"value\":\"\"}}}");
    assert_int_equal(error_code(r), MCP_JSONRPC_INVALID_PARAMS);
}

static void list_changes_are_held_and_sent_once(void **state)
{
    env_t *e = *state;
    init(e->a, &e->sa);
    size_t before = e->sa.n;
    mcp_server_hold_notifications(e->srv, true);
    add_res(e, "test://1", read_static);
    add_res(e, "test://2", read_static);
    add_greet(e);
    assert_int_equal(e->sa.n, before);
    mcp_server_hold_notifications(e->srv, false);
    assert_int_equal(e->sa.n, before + 2);
    assert_string_equal(get_str(e->sa.msgs[before], "method"),
                        "notifications/resources/list_changed");
    assert_string_equal(get_str(e->sa.msgs[before + 1], "method"),
                        "notifications/prompts/list_changed");
    assert_int_equal(mcp_server_remove_prompt(e->srv, "greet"), 0);
    assert_string_equal(get_str(e->sa.msgs[e->sa.n - 1], "method"),
                        "notifications/prompts/list_changed");
}

static void titles_are_listed_only_for_revisions_that_know_them(void **state)
{
    env_t *e = *state;
    mcp_prompt_def_t p = {.name = "p", .title = "The P", .get = greet};
    assert_int_equal(mcp_server_add_prompt(e->srv, &p), 0);
    mcp_resource_def_t d = {.uri = "test://t", .name = "t", .title = "The T", .read = read_static};
    assert_int_equal(mcp_server_add_resource(e->srv, &d), 0);
    init(e->a, &e->sa);
    ask(e->b, &e->sb,
        "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
        "\"protocolVersion\":\"2025-03-26\",\"capabilities\":{}}}");
    const char *lp = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/list\"}";
    const char *lr = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/list\"}";
    assert_string_equal(get_str(ask(e->a, &e->sa, "%s", lp), "result.prompts.0.title"), "The P");
    assert_string_equal(get_str(ask(e->a, &e->sa, "%s", lr), "result.resources.0.title"), "The T");
    assert_null(get(ask(e->b, &e->sb, "%s", lp), "result.prompts.0.title"));
    assert_null(get(ask(e->b, &e->sb, "%s", lr), "result.resources.0.title"));
    assert_string_equal(get_str(ask(e->b, &e->sb, "%s", lr), "result.resources.0.name"), "t");
}

static void content_blocks_are_built_and_validated(void **state)
{
    (void)state;
    char msg[200];
    cJSON *b = mcp_media_block("image", "iVBORw0KGgo=", "image/png");
    assert_int_equal(mcp_content_validate(b, msg, sizeof msg), 0);
    cJSON_Delete(b);
    b = mcp_media_block("audio", "not base64!", "audio/wav");
    assert_int_equal(mcp_content_validate(b, msg, sizeof msg), MCP_EINVAL);
    assert_non_null(strstr(msg, "audio block: data"));
    cJSON_Delete(b);
    b = mcp_media_block("image", "iVBORw0KGgo=", "image/png");
    cJSON_DeleteItemFromObject(b, "mimeType");
    assert_int_equal(mcp_content_validate(b, msg, sizeof msg), MCP_EINVAL);
    cJSON_Delete(b);
    b = mcp_resource_block("test://r", "text/plain", "hello", NULL);
    assert_int_equal(mcp_content_validate(b, msg, sizeof msg), 0);
    assert_string_equal(get_str(b, "resource.text"), "hello");
    cJSON_Delete(b);
    b = mcp_resource_block("test://r", NULL, NULL, "AAEC");
    assert_int_equal(mcp_content_validate(b, msg, sizeof msg), 0);
    cJSON_Delete(b);
    assert_null(mcp_resource_block("test://r", NULL, "both", "AAEC"));
    b = cJSON_Parse("{\"type\":\"video\"}");
    assert_int_equal(mcp_content_validate(b, msg, sizeof msg), MCP_EINVAL);
    cJSON_Delete(b);
    b = cJSON_Parse("{\"type\":\"resource_link\",\"uri\":\"test://x\",\"name\":\"x\"}");
    assert_int_equal(mcp_content_validate(b, msg, sizeof msg), 0);
    cJSON_Delete(b);
    b = mcp_text_block("t");
    assert_int_equal(mcp_content_validate(b, msg, sizeof msg), 0);
    cJSON_Delete(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
        T(capabilities_are_advertised_only_for_what_was_registered),
        T(declared_capability_is_advertised_before_anything_is_registered),
        T(resource_pages_follow_cursors_and_refuse_forged_ones),
        T(reading_resolves_resources_and_template_variables),
        T(identities_tell_sessions_and_credentials_apart),
        T(the_end_hook_hears_once_of_each_ended_session),
        T(a_handler_returning_invalid_contents_gets_an_internal_error),
        T(bad_templates_and_duplicates_are_refused),
        T(updates_reach_only_subscribed_sessions_until_they_unsubscribe),
        T(prompt_arguments_are_validated_before_the_handler_runs),
        T(a_prompt_handler_building_invalid_messages_gets_an_internal_error),
        T(completions_are_capped_and_checked_against_the_reference),
        T(template_variables_complete_through_their_template),
        T(list_changes_are_held_and_sent_once),
        T(titles_are_listed_only_for_revisions_that_know_them),
        T(content_blocks_are_built_and_validated),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
