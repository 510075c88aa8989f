/* session.c - one client's MCP session: parsing, lifecycle (initialize, shutdown), dispatch of
 * requests and notifications, batches, logging. Tool calls live in call.c and requests to the
 * client in outreq.c. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define BATCH_PROTOCOL "2025-03-26"

int mcp_session_new(mcp_server_t *srv, const mcp_transport_ops_t *ops, void *tdata,
                    mcp_session_t **out)
{
    *out = NULL;
    if (srv == NULL || ops == NULL) return MCP_EINVAL;
    mcp_session_t *s = calloc(1, sizeof *s);
    if (s == NULL) return MCP_ENOMEM;
    s->srv = srv;
    s->ops = ops;
    s->tdata = tdata;
    s->log_level = MCP_LOG_INFO;
    mcp__server_link_session(srv, s);
    *out = s;
    return MCP_OK;
}

void mcp_session_set_router(mcp_session_t *s, mcp_send_related_fn fn)
{
    s->send_related = fn;
}

void mcp_session_set_stateless(mcp_session_t *s)
{
    s->stateless = true;
}

const char *mcp__session_proto(const mcp_session_t *s)
{
    return s->cur != NULL ? s->cur->protocol : s->protocol;
}

bool mcp__session_modern(const mcp_session_t *s)
{
    return s->cur != NULL && s->cur->modern;
}

const char *mcp_session_protocol(const mcp_session_t *s)
{
    return s->protocol[0] != '\0' ? s->protocol : NULL;
}

const cJSON *mcp_session_client_capabilities(const mcp_session_t *s)
{
    return s->client_caps;
}

bool mcp_session_client_has(const mcp_session_t *s, const char *name)
{
    return s->client_caps != NULL &&
           cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(s->client_caps, name));
}

int mcp__session_send_related(mcp_session_t *s, cJSON *msg, const cJSON *related)
{
    if (msg == NULL) return MCP_ENOMEM;
    if (s->send_related == NULL && s->ops->send_json != NULL) {
        int rc = s->ops->send_json(s->tdata, msg);
        cJSON_Delete(msg);
        return rc;
    }
    char *text = cJSON_PrintUnformatted(msg);
    if (text == NULL) {
        cJSON_Delete(msg);
        return MCP_ENOMEM;
    }
    int rc = MCP_OK;
    if (s->send_related != NULL) {
        /* A response, or a batch of them (an array holds only responses), answers its id. */
        const cJSON *first = cJSON_IsArray(msg) ? msg->child : msg;
        bool answer = first != NULL && !cJSON_HasObjectItem(first, "method");
        if (answer) related = cJSON_GetObjectItemCaseSensitive(first, "id");
        rc = s->send_related(s->tdata, text, strlen(text), related, answer);
    } else if (s->ops->send != NULL) {
        rc = s->ops->send(s->tdata, text, strlen(text));
    }
    cJSON_Delete(msg);
    cJSON_free(text);
    return rc;
}

void mcp__session_end_silent(mcp_session_t *s, const cJSON *id)
{
    if (s->send_related != NULL) s->send_related(s->tdata, NULL, 0, id, true);
}

int mcp__session_send(mcp_session_t *s, cJSON *msg)
{
    return mcp__session_send_related(s, msg, NULL);
}

void mcp__session_answer(mcp_session_t *s, mcp__batch_t *batch, cJSON *msg)
{
    if (msg == NULL) {
        mcp_log(s->srv->lg, MCP_LOG_ERROR, "out of memory building a response");
        return;
    }
    if (mcp__session_modern(s)) mcp__modern_decorate(msg, s->cur->method);
    if (batch == NULL) {
        mcp__session_send(s, msg);
        return;
    }
    if (!cJSON_AddItemToArray(batch->responses, msg)) cJSON_Delete(msg);
}

void mcp__batch_done_one(mcp_session_t *s, mcp__batch_t *batch)
{
    if (batch == NULL || --batch->pending > 0) return;
    cJSON *arr = batch->responses;
    free(batch);
    /* A batch of notifications only is answered with nothing at all. */
    if (cJSON_GetArraySize(arr) > 0)
        mcp__session_send(s, arr);
    else
        cJSON_Delete(arr);
}

int mcp_session_notify(mcp_session_t *s, const char *method, cJSON *params)
{
    return mcp__session_send(s, mcp_jsonrpc_request(NULL, method, params));
}

void mcp_session_log(mcp_session_t *s, mcp_level_t level, const char *logger, cJSON *data)
{
    mcp__session_log(s, NULL, level, logger, data);
}

void mcp__session_log(mcp_session_t *s, const cJSON *related, mcp_level_t level, const char *logger,
                      cJSON *data)
{
    if (s->protocol[0] == '\0' || level > s->log_level) {
        cJSON_Delete(data);
        return;
    }
    mcp__session_log_send(s, related, level, logger, data);
}

void mcp__session_log_send(mcp_session_t *s, const cJSON *related, mcp_level_t level,
                           const char *logger, cJSON *data)
{
    cJSON *p = cJSON_CreateObject();
    if (p == NULL || cJSON_AddStringToObject(p, "level", mcp_level_name(level)) == NULL ||
        (logger != NULL && cJSON_AddStringToObject(p, "logger", logger) == NULL)) {
        cJSON_Delete(p);
        cJSON_Delete(data);
        return;
    }
    if (data == NULL) data = cJSON_CreateNull();
    if (data == NULL || !cJSON_AddItemToObject(p, "data", data)) {
        cJSON_Delete(data);
        cJSON_Delete(p);
        return;
    }
    mcp__session_send_related(s, mcp_jsonrpc_request(NULL, "notifications/message", p), related);
}

/* --- requests ----------------------------------------------------------------------------- */

static void answer_error(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, int code,
                         const char *msg)
{
    mcp__session_answer(s, b, mcp_jsonrpc_error(id, code, msg, NULL));
}

cJSON *mcp__server_capabilities(const mcp_server_t *srv)
{
    cJSON *caps = cJSON_CreateObject();
    cJSON *tools = cJSON_AddObjectToObject(caps, "tools");
    if (tools == NULL || cJSON_AddTrueToObject(tools, "listChanged") == NULL ||
        cJSON_AddObjectToObject(caps, "logging") == NULL ||
        mcp__features_capabilities(srv, caps) < 0) {
        cJSON_Delete(caps);
        return NULL;
    }
    return caps;
}

static void handle_initialize(mcp_session_t *s, mcp__batch_t *b, const cJSON *id,
                              const cJSON *params)
{
    if (s->protocol[0] != '\0') {
        answer_error(s, b, id, MCP_JSONRPC_INVALID_REQUEST,
                     "initialize was already called on this session");
        return;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
    if (!cJSON_IsString(ver)) {
        answer_error(
            s, b, id, MCP_JSONRPC_INVALID_PARAMS,
            "initialize needs params.protocolVersion (a string such as \"" MCP_PROTOCOL_LATEST
            "\")");
        return;
    }
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(params, "capabilities");
    if (caps != NULL && !cJSON_IsObject(caps)) {
        answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                     "initialize: params.capabilities must be an object");
        return;
    }
    const char *chosen = mcp_protocol_negotiate(ver->valuestring);
    mcp_server_t *srv = s->srv;

    cJSON *res = cJSON_CreateObject();
    cJSON *info = cJSON_CreateObject();
    cJSON *scaps = mcp__server_capabilities(srv);
    bool ok = res && info && scaps &&
              cJSON_AddStringToObject(res, "protocolVersion", chosen) != NULL &&
              cJSON_AddStringToObject(info, "name", srv->name) != NULL &&
              cJSON_AddStringToObject(info, "version", srv->version) != NULL;
    if (ok && srv->title && mcp_protocol_cmp(chosen, "2025-06-18") >= 0)
        ok = cJSON_AddStringToObject(info, "title", srv->title) != NULL;
    if (ok) ok = cJSON_AddItemToObject(res, "capabilities", scaps);
    if (ok) scaps = NULL;
    if (ok) ok = cJSON_AddItemToObject(res, "serverInfo", info);
    if (ok) info = NULL;
    if (ok && srv->instructions)
        ok = cJSON_AddStringToObject(res, "instructions", srv->instructions) != NULL;
    cJSON_Delete(info);
    cJSON_Delete(scaps);
    if (!ok) {
        cJSON_Delete(res);
        answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    cJSON_Delete(s->client_caps);
    cJSON_Delete(s->client_info);
    s->client_caps = caps != NULL ? cJSON_Duplicate(caps, true) : cJSON_CreateObject();
    const cJSON *ci = cJSON_GetObjectItemCaseSensitive(params, "clientInfo");
    s->client_info = ci != NULL ? cJSON_Duplicate(ci, true) : NULL;
    snprintf(s->protocol, sizeof s->protocol, "%s", chosen);
    const cJSON *cname = cJSON_GetObjectItemCaseSensitive(ci, "name");
    mcp_log(srv->lg, MCP_LOG_INFO, "session initialized: client %s asked %s, speaking %s",
            cJSON_IsString(cname) ? cname->valuestring : "(unnamed)", ver->valuestring, chosen);
    mcp__session_answer(s, b, mcp_jsonrpc_result(id, res));
}

static void handle_set_level(mcp_session_t *s, mcp__batch_t *b, const cJSON *id,
                             const cJSON *params)
{
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(params, "level");
    mcp_level_t level;
    if (!cJSON_IsString(lv) || mcp_level_parse(lv->valuestring, &level) < 0) {
        answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                     "logging/setLevel: params.level must be one of debug, info, notice, warning, "
                     "error, critical, alert, emergency");
        return;
    }
    s->log_level = level;
    mcp__session_answer(s, b, mcp_jsonrpc_result(id, cJSON_CreateObject()));
}

static void handle_tools_list(mcp_session_t *s, mcp__batch_t *b, const cJSON *id,
                              const cJSON *params)
{
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(params, "cursor");
    if (cur != NULL && !cJSON_IsString(cur) && !cJSON_IsNull(cur)) {
        answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS, "tools/list: cursor must be a string");
        return;
    }
    mcp__tools_list(s, b, id, cJSON_IsString(cur) ? cur->valuestring : NULL);
}

static void handle_request(mcp_session_t *s, mcp__batch_t *b, const cJSON *msg)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const char *method = cJSON_GetObjectItemCaseSensitive(msg, "method")->valuestring;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    if (params != NULL && !cJSON_IsObject(params)) {
        answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS, "params must be an object");
        return;
    }
    if (s->stateless || mcp_params_are_modern(params)) {
        /* 2026-07-28: the request brings its own version and capabilities. */
        mcp__modern_request(s, b, id, method, params);
        return;
    }
    if (strcmp(method, "ping") == 0) {
        mcp__session_answer(s, b, mcp_jsonrpc_result(id, cJSON_CreateObject()));
        return;
    }
    if (strcmp(method, "initialize") == 0) {
        if (b != NULL) {
            answer_error(s, b, id, MCP_JSONRPC_INVALID_REQUEST,
                         "initialize must not be part of a JSON-RPC batch");
            return;
        }
        handle_initialize(s, b, id, params);
        return;
    }
    if (s->protocol[0] == '\0') {
        char m[200];
        snprintf(m, sizeof m, "%s refused: the session is not initialized (send initialize first)",
                 method);
        answer_error(s, b, id, MCP_JSONRPC_INVALID_REQUEST, m);
        return;
    }
    if (s->shutting_down) {
        answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "the server is shutting down");
        return;
    }
    if (strcmp(method, "logging/setLevel") == 0)
        handle_set_level(s, b, id, params);
    else
        mcp__session_dispatch(s, b, id, method, params);
}

void mcp__session_dispatch(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                           const cJSON *params)
{
    if (strcmp(method, "tools/list") == 0) {
        handle_tools_list(s, b, id, params);
    } else if (strcmp(method, "tools/call") == 0) {
        if (b != NULL) b->pending++; /* answered when the call finishes */
        mcp__call_start(s, b, id, params);
    } else if (mcp__features_handle(s, b, id, method, params)) {
        /* resources, prompts, completion: answered */
    } else {
        char m[200];
        snprintf(m, sizeof m, "Method not found: %.160s", method);
        answer_error(s, b, id, MCP_JSONRPC_METHOD_NOT_FOUND, m);
    }
}

static void handle_notification(mcp_session_t *s, const cJSON *msg)
{
    const char *method = cJSON_GetObjectItemCaseSensitive(msg, "method")->valuestring;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    if (strcmp(method, "notifications/cancelled") == 0) {
        const cJSON *rid = cJSON_GetObjectItemCaseSensitive(params, "requestId");
        if (rid == NULL || mcp__listen_cancel(s, rid) || mcp__lists_cancel(s, rid)) return;
        for (mcp_call_t *c = s->calls; c != NULL; c = c->next) {
            if (cJSON_Compare(c->id, rid, true)) {
                const cJSON *why = cJSON_GetObjectItemCaseSensitive(params, "reason");
                mcp_log(s->srv->lg, MCP_LOG_INFO, "call %s cancelled by the client%s%s", c->tool,
                        cJSON_IsString(why) ? ": " : "",
                        cJSON_IsString(why) ? why->valuestring : "");
                mcp__call_cancel(c, true);
                return;
            }
        }
    } else if (strcmp(method, "notifications/initialized") == 0) {
        mcp_log(s->srv->lg, MCP_LOG_DEBUG, "client sent notifications/initialized");
    }
    /* Other notifications (progress, roots/list_changed, ...) need no action here. */
}

/* Handles one parsed message; b is the batch it belongs to, or NULL. */
static void handle_one(mcp_session_t *s, mcp__batch_t *b, const cJSON *msg)
{
    const char *why = NULL;
    switch (mcp_jsonrpc_classify(msg, &why)) {
    case MCP_MSG_REQUEST:
        handle_request(s, b, msg);
        break;
    case MCP_MSG_NOTIFICATION:
        handle_notification(s, msg);
        break;
    case MCP_MSG_RESPONSE:
    case MCP_MSG_ERROR:
        if (!mcp__outreq_route(s, msg, mcp_jsonrpc_classify(msg, NULL)))
            mcp_log(s->srv->lg, MCP_LOG_WARNING, "dropped a response to no pending request");
        break;
    case MCP_MSG_INVALID: {
        /* Answer with the id when one can be read, as JSON-RPC asks. */
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
        if (!(cJSON_IsString(id) || cJSON_IsNumber(id))) id = NULL;
        char m[256];
        snprintf(m, sizeof m, "Invalid Request: %s", why);
        answer_error(s, b, id, MCP_JSONRPC_INVALID_REQUEST, m);
        break;
    }
    }
}

static void receive_batch(mcp_session_t *s, const cJSON *arr)
{
    if (strcmp(s->protocol, BATCH_PROTOCOL) != 0) {
        char m[200];
        snprintf(m, sizeof m,
                 "Invalid Request: JSON-RPC batches are only accepted in protocol version %s "
                 "(this session: %s)",
                 BATCH_PROTOCOL, s->protocol[0] ? s->protocol : "not initialized");
        answer_error(s, NULL, NULL, MCP_JSONRPC_INVALID_REQUEST, m);
        return;
    }
    if (cJSON_GetArraySize(arr) == 0) {
        answer_error(s, NULL, NULL, MCP_JSONRPC_INVALID_REQUEST, "Invalid Request: empty batch");
        return;
    }
    mcp__batch_t *b = calloc(1, sizeof *b);
    if (b == NULL || (b->responses = cJSON_CreateArray()) == NULL) {
        free(b);
        answer_error(s, NULL, NULL, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    b->pending = 1; /* held until every member is dispatched */
    const cJSON *m;
    s->rx_member = 0;
    cJSON_ArrayForEach(m, arr)
    {
        handle_one(s, b, m);
        s->rx_member++;
    }
    mcp__batch_done_one(s, b);
}

void mcp_session_receive(mcp_session_t *s, const char *json, size_t len)
{
    const char *end = NULL;
    cJSON *msg = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (msg != NULL) {
        /* Only white space may follow the value. */
        for (const char *p = end; p < json + len; p++) {
            if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
                cJSON_Delete(msg);
                msg = NULL;
                break;
            }
        }
    }
    if (msg == NULL) {
        answer_error(s, NULL, NULL, MCP_JSONRPC_PARSE_ERROR,
                     "Parse error: the message is not valid JSON (one JSON-RPC message per line)");
        return;
    }
    mcp__nul_hit_t hits[16];
    s->rx_nul = hits;
    s->rx_nul_n = mcp__nul_scan(json, len, hits, sizeof hits / sizeof hits[0]);
    s->rx_member = 0;
    if (cJSON_IsArray(msg))
        receive_batch(s, msg);
    else
        handle_one(s, NULL, msg);
    s->rx_nul = NULL;
    s->rx_nul_n = 0;
    cJSON_Delete(msg);
}

void mcp_session_reject_oversized(mcp_session_t *s, size_t bytes, size_t max_bytes)
{
    char m[200];
    snprintf(m, sizeof m,
             "Invalid Request: message of at least %zu bytes exceeds the limit of %zu bytes "
             "(--max-message-bytes); it was discarded",
             bytes, max_bytes);
    mcp_log(s->srv->lg, MCP_LOG_WARNING, "%s", m);
    answer_error(s, NULL, NULL, MCP_JSONRPC_INVALID_REQUEST, m);
}

/* --- shutdown ----------------------------------------------------------------------------- */

void mcp__session_check_idle(mcp_session_t *s)
{
    if (!s->shutting_down || s->calls != NULL || s->outreqs != NULL || s->parked_lists != NULL ||
        s->idle_cb == NULL)
        return;
    mcp_session_idle_cb cb = s->idle_cb;
    s->idle_cb = NULL;
    mcp__close_free((uv_handle_t *)s->grace_timer);
    s->grace_timer = NULL;
    mcp__session_tell_end(s); /* nothing is in flight: its client's state can go now */
    cb(s, s->idle_data);
}

static void cancel_all_calls(mcp_session_t *s)
{
    /* A cancel callback may finish other calls too: look for the next one afresh each time. */
    for (;;) {
        mcp_call_t *c = s->calls;
        while (c != NULL && c->cancelled)
            c = c->next;
        if (c == NULL) return;
        mcp__call_cancel(c, false);
    }
}

static void on_grace(uv_timer_t *t)
{
    mcp_session_t *s = t->data;
    mcp_log(s->srv->lg, MCP_LOG_WARNING, "shutdown: cancelling calls still running after %u ms",
            s->srv->grace_ms);
    cancel_all_calls(s);
}

void mcp_session_shutdown(mcp_session_t *s, mcp_session_idle_cb idle_cb, void *data)
{
    if (s->shutting_down) {
        /* Asked again (a second signal): no more grace, cancel what still runs. */
        cancel_all_calls(s);
        return;
    }
    s->shutting_down = true;
    s->idle_cb = idle_cb;
    s->idle_data = data;
    /* The client can no longer answer our requests once its side is closing. */
    mcp__outreq_fail_all(s, MCP_ECLOSED, "the client connection is closing");
    mcp__listen_end_all(s, true);
    mcp__lists_release(s);
    if (s->calls != NULL) {
        s->grace_timer = malloc(sizeof *s->grace_timer);
        if (s->grace_timer == NULL || uv_timer_init(s->srv->loop, s->grace_timer) < 0) {
            free(s->grace_timer);
            s->grace_timer = NULL;
            cancel_all_calls(s);
        } else {
            s->grace_timer->data = s;
            uv_timer_start(s->grace_timer, on_grace, s->srv->grace_ms, 0);
        }
    }
    mcp__session_check_idle(s);
}

void mcp_session_free(mcp_session_t *s)
{
    if (s == NULL) return;
    s->idle_cb = NULL;
    mcp__session_tell_end(s);
    mcp__outreq_fail_all(s, MCP_ECLOSED, "the session was closed");
    mcp__listen_end_all(s, false);
    while (s->calls != NULL)
        mcp__call_detach(s->calls);
    mcp__lists_drop(s);
    mcp__close_free((uv_handle_t *)s->grace_timer);
    mcp__server_unlink_session(s->srv, s);
    if (s->ops->closed) s->ops->closed(s->tdata);
    cJSON_Delete(s->client_caps);
    cJSON_Delete(s->client_info);
    cJSON_Delete(s->subscriptions);
    free(s);
}
