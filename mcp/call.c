/* call.c - in-flight tools/call requests: argument checks, dispatch to the handler, progress
 * notifications, cancellation and the final result. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void link_call(mcp_session_t *s, mcp_call_t *c)
{
    c->next = s->calls;
    if (s->calls) s->calls->prev = c;
    s->calls = c;
}

static void unlink_call(mcp_call_t *c)
{
    mcp_session_t *s = c->s;
    if (s == NULL) return;
    if (c->prev)
        c->prev->next = c->next;
    else if (s->calls == c)
        s->calls = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void call_free(mcp_call_t *c)
{
    if (c->progress_timer != NULL) {
        c->progress_timer->data = NULL;
        mcp__close_free((uv_handle_t *)c->progress_timer);
    }
    cJSON_Delete(c->id);
    cJSON_Delete(c->params);
    cJSON_Delete(c->progress_token);
    cJSON_Delete(c->caps);
    free(c->state);
    free(c->pending_message);
    free(c->tool);
    free(c);
}

static void send_progress(mcp_call_t *c, double progress, double total, const char *message);

/* Answers (or, for a cancelled call, stays silent), then frees. Takes msg. */
static void complete(mcp_call_t *c, cJSON *msg)
{
    if (c->task != NULL) { /* no request waits: the task keeps the outcome */
        mcp__task_settle(c, msg);
        call_free(c);
        return;
    }
    mcp_session_t *s = c->s;
    if (s != NULL && !c->silenced) {
        if (c->have_pending) {
            /* The last progress update must precede the response. */
            c->have_pending = false;
            send_progress(c, c->pending_progress, c->pending_total, c->pending_message);
        }
        if (c->modern) mcp__modern_decorate(msg, "tools/call");
        mcp__session_answer(s, c->batch, msg);
    } else {
        cJSON_Delete(msg);
        if (s != NULL && c->batch == NULL) mcp__session_end_silent(s, c->id);
    }
    unlink_call(c);
    mcp__batch_t *batch = c->batch;
    call_free(c);
    if (s != NULL) {
        mcp__batch_done_one(s, batch);
        mcp__session_check_idle(s);
    }
}

void mcp__call_complete(mcp_call_t *c, cJSON *msg)
{
    complete(c, msg);
}

void mcp__call_answer_detach(mcp_call_t *c, cJSON *msg)
{
    mcp_session_t *s = c->s;
    mcp__batch_t *batch = c->batch;
    if (c->have_pending) {
        c->have_pending = false;
        send_progress(c, c->pending_progress, c->pending_total, c->pending_message);
    }
    if (c->modern) mcp__modern_decorate(msg, "tools/call");
    mcp__session_answer(s, batch, msg);
    unlink_call(c);
    c->s = NULL;
    c->batch = NULL;
    mcp__batch_done_one(s, batch);
    mcp__session_check_idle(s);
}

static void answer_now(mcp_session_t *s, mcp__batch_t *b, cJSON *msg)
{
    mcp__session_answer(s, b, msg);
    mcp__batch_done_one(s, b);
}

void mcp__call_start(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const cJSON *params)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
    if (!cJSON_IsString(name)) {
        answer_now(s, b,
                   mcp_jsonrpc_error(id, MCP_JSONRPC_INVALID_PARAMS,
                                     "tools/call needs params.name (a string)", NULL));
        return;
    }
    const mcp__entry_t *tool = mcp__server_find_tool(s->srv, name->valuestring);
    if (tool == NULL) {
        char m[220];
        snprintf(m, sizeof m, "Unknown tool: %.160s (tools/list shows the tools)",
                 name->valuestring);
        answer_now(s, b, mcp_jsonrpc_error(id, MCP_JSONRPC_INVALID_PARAMS, m, NULL));
        return;
    }
    mcp_call_t *c = calloc(1, sizeof *c);
    if (c == NULL || (c->id = cJSON_Duplicate(id, true)) == NULL ||
        (c->params = cJSON_Duplicate(params, true)) == NULL ||
        (c->tool = mcp__strdup(tool->key)) == NULL) {
        if (c != NULL) call_free(c);
        answer_now(s, b, mcp_jsonrpc_error(id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory", NULL));
        return;
    }
    c->s = s;
    c->srv = s->srv;
    c->batch = b;
    c->tool_ref = tool;
    mcp__request_identity(s, &c->who);
    snprintf(c->protocol, sizeof c->protocol, "%s", mcp__session_proto(s));
    if (mcp__session_modern(s)) {
        c->modern = true;
        c->log_on = s->cur->log_on;
        c->log_level = s->cur->log_level;
        if ((c->caps = cJSON_Duplicate(s->cur->caps, true)) == NULL) {
            call_free(c);
            answer_now(s, b,
                       mcp_jsonrpc_error(id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory", NULL));
            return;
        }
    }
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
    if (cJSON_IsString(tok) || cJSON_IsNumber(tok)) c->progress_token = cJSON_Duplicate(tok, true);
    link_call(s, c);

    cJSON *args = cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
    if (args == NULL || cJSON_IsNull(args)) {
        cJSON_DeleteItemFromObjectCaseSensitive(c->params, "arguments");
        args = cJSON_AddObjectToObject(c->params, "arguments");
        if (args == NULL) {
            mcp_call_finish_rpc_error(c, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
            return;
        }
    }
    if (!cJSON_IsObject(args)) {
        mcp_call_finish_text(c, true, "Invalid arguments for tool %s: arguments must be an object",
                             c->tool);
        return;
    }
    /* The parsed strings end at a NUL: refuse rather than hand the handler a shortened one. */
    for (size_t i = 0; i < s->rx_nul_n; i++) {
        if (s->rx_nul[i].member != s->rx_member) continue;
        mcp_call_finish_text(c, true,
                             "Invalid arguments for tool %s: argument \"%s\" contains a NUL "
                             "character (\\u0000) at offset %ld; remove it (strings cannot "
                             "carry NUL characters here)",
                             c->tool, s->rx_nul[i].arg, s->rx_nul[i].offset);
        return;
    }
    char why[512];
    if (c->modern && !mcp__mrtr_read(c, why, sizeof why)) {
        mcp_call_finish_rpc_error(c, MCP_JSONRPC_INVALID_PARAMS, why);
        return;
    }
    if (mcp_schema_validate(tool->input_schema, args, why, sizeof why) < 0) {
        mcp_call_finish_text(c, true, "Invalid arguments for tool %s: %s", c->tool, why);
        return;
    }
    if (tool->task_support == MCP_TASK_REQUIRED &&
        !mcp_call_client_has_extension(c, MCP_EXT_TASKS)) {
        cJSON *msg = mcp__missing_extension(c->id, MCP_EXT_TASKS, c->tool);
        if (msg == NULL)
            mcp_call_finish_rpc_error(c, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        else
            complete(c, msg);
        return;
    }
    tool->handler(c, args, tool->data);
}

mcp_call_t *mcp__call_round_new(mcp_server_t *srv, const char *tool, cJSON *params,
                                const cJSON *caps, const char *protocol, const mcp_identity_t *who)
{
    mcp_call_t *c = calloc(1, sizeof *c);
    if (c == NULL || (c->id = cJSON_CreateNull()) == NULL ||
        (c->tool = mcp__strdup(tool)) == NULL || (c->caps = cJSON_Duplicate(caps, true)) == NULL) {
        cJSON_Delete(params);
        if (c != NULL) call_free(c);
        return NULL;
    }
    c->params = params;
    c->srv = srv;
    c->modern = true;
    c->who = *who;
    snprintf(c->protocol, sizeof c->protocol, "%s", protocol);
    return c;
}

void mcp__call_round_run(mcp_call_t *c)
{
    const mcp__entry_t *entry = mcp__server_find_tool(c->srv, c->tool);
    char why[512];
    if (entry == NULL) {
        /* The tool went away (its downstream server left) while the task waited. */
        snprintf(why, sizeof why, "The tool %.160s is gone; the task cannot go on", c->tool);
        mcp_call_finish_rpc_error(c, MCP_JSONRPC_INVALID_PARAMS, why);
        return;
    }
    c->tool_ref = entry;
    if (!mcp__mrtr_parse(c->srv, c->params, c->tool, &c->input_responses, &c->state, why,
                         sizeof why)) {
        mcp_call_finish_rpc_error(c, MCP_JSONRPC_INVALID_PARAMS, why);
        return;
    }
    entry->handler(c, cJSON_GetObjectItemCaseSensitive(c->params, "arguments"), entry->data);
}

mcp_session_t *mcp_call_session(const mcp_call_t *call)
{
    return call->s;
}

bool mcp_call_is_modern(const mcp_call_t *call)
{
    return call->modern;
}

const char *mcp_call_protocol(const mcp_call_t *call)
{
    return call->protocol;
}

bool mcp_call_client_has(const mcp_call_t *call, const char *name)
{
    if (call->modern) return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(call->caps, name));
    return call->s != NULL && mcp_session_client_has(call->s, name);
}

void mcp_call_finish_missing_capability(mcp_call_t *call, const char *capability)
{
    cJSON *msg = mcp__missing_capability(call->id, capability, call->tool);
    if (msg == NULL) {
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    complete(call, msg);
}

const char *mcp_call_tool(const mcp_call_t *call)
{
    return call->tool;
}

bool mcp_call_cancelled(const mcp_call_t *call)
{
    return call->cancelled;
}

void mcp_call_on_cancel(mcp_call_t *call, void (*cb)(mcp_call_t *, void *), void *data)
{
    call->cancel_cb = cb;
    call->cancel_data = data;
}

void mcp__call_cancel(mcp_call_t *c, bool by_client)
{
    if (by_client) c->silenced = true;
    if (c->cancelled) return;
    c->cancelled = true;
    c->have_pending = false;
    void (*cb)(mcp_call_t *, void *) = c->cancel_cb;
    c->cancel_cb = NULL;
    if (cb != NULL) cb(c, c->cancel_data); /* may finish (and free) c */
}

void mcp__call_detach(mcp_call_t *c)
{
    mcp__batch_t *b = c->batch;
    mcp_session_t *s = c->s;
    unlink_call(c);
    c->s = NULL;
    c->batch = NULL;
    if (b != NULL && s != NULL && --b->pending == 0) {
        cJSON_Delete(b->responses);
        free(b);
    }
    mcp__call_cancel(c, true);
}

bool mcp_call_wants_progress(const mcp_call_t *call)
{
    return call->progress_token != NULL && call->s != NULL && !call->cancelled;
}

/* A value above last by one unit of its 15th significant digit, rounded to 15 digits: the next
 * double would do for the protocol, but cJSON prints a number with 15 digits when they read back
 * within an epsilon, which shows that one equal to last on the wire. */
static double raised(double last)
{
    double unit = pow(10.0, floor(log10(fmax(fabs(last), 1.0))) - 14.0);
    char num[32];
    snprintf(num, sizeof num, "%.14e", last + unit);
    return strtod(num, NULL); /* over last: the rounding moves it by half a unit at most */
}

static void send_progress(mcp_call_t *c, double progress, double total, const char *message)
{
    /* MCP wants each value above the one before, but the message of an update that is not (two
     * updates in one loop turn, a new message at the same step) is still news: the value is
     * raised just above the last one sent rather than the update dropped. A value that is not
     * a number (JSON has no NaN nor infinity) is treated as one that does not increase. */
    if (!isfinite(progress)) progress = c->sent_progress ? c->last_progress : 0;
    if (c->sent_progress && !(progress > c->last_progress)) progress = raised(c->last_progress);
    cJSON *p = cJSON_CreateObject();
    cJSON *tok = cJSON_Duplicate(c->progress_token, true);
    if (p == NULL || tok == NULL || !cJSON_AddItemToObject(p, "progressToken", tok)) {
        cJSON_Delete(tok);
        cJSON_Delete(p);
        return;
    }
    bool ok = cJSON_AddNumberToObject(p, "progress", progress) != NULL;
    if (ok && total >= 0 && isfinite(total))
        ok = cJSON_AddNumberToObject(p, "total", total) != NULL;
    /* The message field arrived with 2025-03-26. */
    if (ok && message != NULL && mcp_protocol_cmp(c->protocol, "2025-03-26") >= 0)
        ok = cJSON_AddStringToObject(p, "message", message) != NULL;
    if (!ok) {
        cJSON_Delete(p);
        return;
    }
    c->sent_progress = true;
    c->last_progress = progress;
    c->last_progress_ms = mcp__now_ms();
    mcp__session_send_related(c->s, mcp_jsonrpc_request(NULL, "notifications/progress", p), c->id);
}

static void on_progress_timer(uv_timer_t *t)
{
    mcp_call_t *c = t->data;
    if (c == NULL || !c->have_pending || c->s == NULL) return;
    c->have_pending = false;
    send_progress(c, c->pending_progress, c->pending_total, c->pending_message);
}

void mcp_call_progress(mcp_call_t *c, double progress, double total, const char *message)
{
    if (!mcp_call_wants_progress(c)) return;
    /* An update whose value does not increase is kept like any other: send_progress raises it. */
    uint64_t now = mcp__now_ms();
    unsigned gap = c->s->srv->progress_ms;
    if (!c->sent_progress || now - c->last_progress_ms >= gap) {
        c->have_pending = false;
        send_progress(c, progress, total, message);
        return;
    }
    /* Too soon: keep the newest update and send it when the interval has passed. */
    char *m = mcp__strdup(message);
    if (message != NULL && m == NULL) return;
    free(c->pending_message);
    c->pending_message = m;
    c->pending_progress = progress;
    c->pending_total = total;
    c->have_pending = true;
    if (c->progress_timer == NULL) {
        c->progress_timer = malloc(sizeof *c->progress_timer);
        if (c->progress_timer == NULL) return;
        if (uv_timer_init(c->s->srv->loop, c->progress_timer) < 0) {
            free(c->progress_timer);
            c->progress_timer = NULL;
            return;
        }
        c->progress_timer->data = c;
    }
    if (!uv_is_active((uv_handle_t *)c->progress_timer)) {
        /* A timer counts from the loop's clock, read when this turn began: brought up to now, or
         * a long turn would let the update out before the interval has passed. */
        uv_update_time(c->s->srv->loop);
        uv_timer_start(c->progress_timer, on_progress_timer, gap - (now - c->last_progress_ms), 0);
    }
}

cJSON *mcp_text_content(const char *text)
{
    cJSON *arr = cJSON_CreateArray();
    cJSON *item = cJSON_CreateObject();
    if (arr == NULL || item == NULL || cJSON_AddStringToObject(item, "type", "text") == NULL ||
        cJSON_AddStringToObject(item, "text", text) == NULL || !cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        cJSON_Delete(arr);
        return NULL;
    }
    return arr;
}

void mcp_call_finish(mcp_call_t *c, cJSON *content, cJSON *structured, bool is_error)
{
    cJSON *res = cJSON_CreateObject();
    bool ok = res != NULL && content != NULL && cJSON_AddItemToObject(res, "content", content);
    if (ok) content = NULL;
    if (ok && structured != NULL && (c->s != NULL || c->task != NULL) &&
        mcp_protocol_cmp(c->protocol, "2025-06-18") >= 0) {
        ok = cJSON_AddItemToObject(res, "structuredContent", structured);
        if (ok) structured = NULL;
    }
    if (ok && is_error) ok = cJSON_AddTrueToObject(res, "isError") != NULL;
    cJSON_Delete(content);
    cJSON_Delete(structured);
    if (!ok) {
        cJSON_Delete(res);
        complete(c, mcp_jsonrpc_error(c->id, MCP_JSONRPC_INTERNAL_ERROR,
                                      "out of memory building the tool result", NULL));
        return;
    }
    complete(c, mcp_jsonrpc_result(c->id, res));
}

void mcp_call_finish_text(mcp_call_t *c, bool is_error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (text != NULL) vsnprintf(text, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    if (text == NULL) {
        mcp_call_finish_rpc_error(c, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    cJSON *content = mcp_text_content(text);
    free(text);
    mcp_call_finish(c, content, NULL, is_error);
}

void mcp_call_finish_rpc_error(mcp_call_t *c, int code, const char *message)
{
    complete(c, mcp_jsonrpc_error(c->id, code, message, NULL));
}

void mcp_call_log(mcp_call_t *call, mcp_level_t level, const char *logger, cJSON *data)
{
    if (call->s == NULL || (call->modern && (!call->log_on || level > call->log_level))) {
        cJSON_Delete(data);
        return;
    }
    /* A stateless request asked for its log messages in its _meta; it has no session level. */
    if (call->modern)
        mcp__session_log_send(call->s, call->id, level, logger, data);
    else
        mcp__session_log(call->s, call->id, level, logger, data);
}

int mcp_call_request_ex(mcp_call_t *call, const char *method, cJSON *params,
                        const char *need_capability, unsigned timeout_ms, mcp_outreq_cb cb,
                        void *data, mcp_outreq_t **out)
{
    if (out != NULL) *out = NULL;
    if (call->s == NULL) {
        cJSON_Delete(params);
        return MCP_ESTATE;
    }
    if (call->modern) {
        /* 2026-07-28 has no server-to-client requests: input travels in an
         * InputRequiredResult instead. */
        cJSON_Delete(params);
        return MCP_ENOTSUP;
    }
    return mcp__session_request(call->s, call->id, method, params, need_capability, timeout_ms, cb,
                                data, out);
}

int mcp_call_request(mcp_call_t *call, const char *method, cJSON *params, mcp_outreq_cb cb,
                     void *data, mcp_outreq_t **out)
{
    const char *cap = NULL;
    if (method != NULL && strncmp(method, "sampling/", 9) == 0)
        cap = "sampling";
    else if (method != NULL && strncmp(method, "elicitation/", 12) == 0)
        cap = "elicitation";
    else if (method != NULL && strncmp(method, "roots/", 6) == 0)
        cap = "roots";
    return mcp_call_request_ex(call, method, params, cap, 0, cb, data, out);
}

int mcp_call_close_stream(mcp_call_t *call)
{
    mcp_session_t *s = call->s;
    if (s == NULL || s->send_related == NULL) return MCP_ENOTSUP;
    return s->send_related(s->tdata, NULL, 0, call->id, false);
}
