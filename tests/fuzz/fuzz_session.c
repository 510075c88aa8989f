/* fuzz_session.c - libFuzzer target: bytes -> line framing -> JSON-RPC dispatch of a session with
 * a few tools, including one that stays in flight until the session ends, and the 2026-07-28
 * request shapes (_meta, MRTR inputResponses/requestState, subscriptions/listen). Finds crashes,
 * leaks and undefined behaviour in everything a client can send. */
#include "base.h"
#include "mcp.h"

#include <stdlib.h>
#include <string.h>

typedef struct harness {
    uv_loop_t loop;
    mcp_logger_t log;
    mcp_server_t *srv;
    mcp_session_t *sess;
    size_t sent;
    ptc_buf_t out; /* reused by every answer, as stdio's output buffer is */
} harness_t;

static int discard(void *tdata, const char *json, size_t len)
{
    harness_t *h = tdata;
    /* Every answer must itself be valid JSON. */
    cJSON *m = cJSON_ParseWithLength(json, len);
    if (m == NULL) abort();
    cJSON_Delete(m);
    h->sent++;
    return 0;
}

/* What stdio does: the message printed by mcp_jsonrpc_print into a reused buffer, which must
 * be valid JSON too. */
static int discard_json(void *tdata, const cJSON *msg)
{
    harness_t *h = tdata;
    ptc_buf_truncate(&h->out, 0);
    int rc = mcp_jsonrpc_print(msg, &h->out);
    if (rc < 0) return rc;
    return discard(tdata, ptc_buf_cstr(&h->out), ptc_buf_len(&h->out));
}

static const mcp_transport_ops_t ops = {.send = discard, .send_json = discard_json};

static void tool_now(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)data;
    char *t = cJSON_PrintUnformatted(args);
    mcp_call_finish(call, mcp_text_content(t ? t : ""), cJSON_Duplicate(args, true), false);
    cJSON_free(t);
}

static void hold_cancel(mcp_call_t *call, void *data)
{
    (void)data;
    mcp_call_finish_text(call, true, "cancelled");
}

static void tool_hold(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)args;
    (void)data;
    mcp_call_progress(call, 1, 2, "half");
    mcp_call_on_cancel(call, hold_cancel, NULL);
}

static void tool_ask(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)args;
    (void)data;
    int rc = mcp_session_request(mcp_call_session(call), "roots/list", NULL, "roots", 0, NULL, NULL,
                                 NULL);
    mcp_call_finish_text(call, rc < 0, "%d", rc);
}

/* 2026-07-28 MRTR: asks (with state) until the client answered "k", then echoes the state. */
static void tool_mrtr(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)args;
    (void)data;
    const cJSON *in = mcp_call_input_responses(call);
    if (mcp_call_is_modern(call) && !cJSON_HasObjectItem(in, "k")) {
        mcp_call_finish_input_required(
            call, cJSON_Parse("{\"k\":{\"method\":\"roots/list\",\"params\":{}}}"), "s");
        return;
    }
    const char *st = mcp_call_request_state(call);
    mcp_call_finish_text(call, false, "%s", st != NULL ? st : "-");
}

static int get_any(const char *name, const cJSON *args, void *data, cJSON **messages, char *msg,
                   size_t msg_size);

/* A prompt that asks for "k" through its round before it renders. */
static int get_round(const char *name, const cJSON *args, mcp_prompt_round_t *round, void *data,
                     cJSON **messages, char *msg, size_t msg_size)
{
    if (round->modern && !cJSON_HasObjectItem(round->input_responses, "k")) {
        round->input_requests =
            cJSON_Parse("{\"k\":{\"method\":\"elicitation/create\",\"params\":{}}}");
        round->next_state = round->state != NULL ? strdup(round->state) : NULL;
        return MCP_OK;
    }
    return get_any(name, args, data, messages, msg, msg_size);
}

/* A resource read that echoes the URI and any template variables. */
static int read_any(const char *uri, const cJSON *vars, const mcp_identity_t *who, void *data,
                    cJSON **contents, char *msg, size_t msg_size)
{
    (void)who;
    (void)data;
    (void)msg;
    (void)msg_size;
    char *v = vars ? cJSON_PrintUnformatted(vars) : NULL;
    cJSON *arr = cJSON_CreateArray();
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, c);
    cJSON_AddStringToObject(c, "uri", uri);
    cJSON_AddStringToObject(c, "text", v ? v : "static");
    cJSON_free(v);
    *contents = arr;
    return MCP_OK;
}

static int get_any(const char *name, const cJSON *args, void *data, cJSON **messages, char *msg,
                   size_t msg_size)
{
    (void)name;
    (void)data;
    (void)msg;
    (void)msg_size;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(args, "a");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddItemToObject(m, "content", mcp_text_block(cJSON_IsString(a) ? a->valuestring : ""));
    *messages = cJSON_CreateArray();
    cJSON_AddItemToArray(*messages, m);
    return MCP_OK;
}

static int complete_any(const char *arg, const char *value, const cJSON *context, void *data,
                        cJSON **values)
{
    (void)context;
    (void)data;
    *values = cJSON_CreateArray();
    cJSON_AddItemToArray(*values, cJSON_CreateString(arg));
    cJSON_AddItemToArray(*values, cJSON_CreateString(value));
    return MCP_OK;
}

static void on_line(void *data, const char *line, size_t len, bool too_big)
{
    harness_t *h = data;
    if (too_big)
        mcp_session_reject_oversized(h->sess, len, 4096);
    else
        mcp_session_receive(h->sess, line, len);
}

static harness_t *harness(void)
{
    static harness_t h; /* libFuzzer runs inputs in one process; set up once */
    static bool ready;
    if (ready) return &h;
    uv_loop_init(&h.loop);
    ptc_buf_init(&h.out, 1u << 30);
    h.log.out = stderr;
    h.log.level = MCP_LOG_EMERGENCY;
    mcp_server_opts_t o;
    mcp_server_opts_default(&o);
    o.list_page_size = 2;
    o.shutdown_grace_ms = 0;
    if (mcp_server_new(&h.loop, &o, &h.log, &h.srv) < 0) abort();
    const char *schema =
        "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"maxLength\":8},"
        "\"n\":{\"type\":\"integer\",\"minimum\":0},\"a\":{\"type\":\"array\",\"items\":"
        "{\"type\":\"number\"}},\"e\":{\"enum\":[1,\"x\",null]}},\"required\":[\"s\"]}";
    mcp_tool_def_t defs[] = {
        {.name = "now", .input_schema = schema, .handler = tool_now},
        {.name = "hold", .handler = tool_hold},
        {.name = "ask", .handler = tool_ask},
        {.name = "z.last-tool_1", .handler = tool_now},
        {.name = "mrtr", .handler = tool_mrtr},
    };
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (mcp_server_add_tool(h.srv, &defs[i]) < 0) abort();
    /* Resources, a template, prompts and completions: their methods parse client input too. */
    mcp_resource_def_t r1 = {.uri = "test://a", .name = "a", .read = read_any};
    mcp_resource_def_t r2 = {.uri = "test://b", .name = "b", .title = "B", .read = read_any};
    mcp_resource_def_t t1 = {
        .uri = "test://t/{x}/y{z}", .name = "t", .read = read_any, .complete = complete_any};
    static const mcp_prompt_arg_t pargs[] = {{.name = "a", .required = true}, {.name = "b"}};
    mcp_prompt_def_t p1 = {
        .name = "p", .args = pargs, .n_args = 2, .get = get_any, .complete = complete_any};
    mcp_prompt_def_t p2 = {.name = "q", .title = "Q", .get = get_any};
    mcp_prompt_def_t p3 = {.name = "r", .get_round = get_round};
    if (mcp_server_add_resource(h.srv, &r1) < 0 || mcp_server_add_resource(h.srv, &r2) < 0 ||
        mcp_server_add_resource_template(h.srv, &t1) < 0 || mcp_server_add_prompt(h.srv, &p1) < 0 ||
        mcp_server_add_prompt(h.srv, &p2) < 0 || mcp_server_add_prompt(h.srv, &p3) < 0)
        abort();
    ready = true;
    return &h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    harness_t *h = harness();
    if (mcp_session_new(h->srv, &ops, h, &h->sess) < 0) abort();
    mcp_framer_t f;
    mcp_framer_init(&f, 4096, on_line, h);
    mcp_framer_feed(&f, (const char *)data, size);
    mcp_framer_finish(&f);
    mcp_framer_close(&f);
    mcp_session_free(h->sess);
    h->sess = NULL;
    uv_run(&h->loop, UV_RUN_NOWAIT);
    return 0;
}
