/* transport_http.c - MCP over HTTP: Streamable HTTP at /mcp (2025-03-26 .. 2025-11-25) and the
 * legacy HTTP+SSE transport (2024-11-05) at /sse + /messages: routing and the endpoints, which
 * check a request and hand it to its session (transport_http_sessions.c; 2026-07-28 stateless
 * requests: transport_http_stateless.c). */
#include "transport_http_internal.h"

#include <http_parser.h>
#include <stdlib.h>
#include <string.h>

/* --- Streamable HTTP ---------------------------------------------------------------------- */

static bool check_protocol_header(mcp__hconn_t *c)
{
    const char *pv = mcp__hconn_header(c, "MCP-Protocol-Version");
    if (pv == NULL || mcp_protocol_supported(pv)) return true;
    char m[200];
    snprintf(m, sizeof m, "Bad Request: unsupported MCP-Protocol-Version \"%.40s\" (newest: %s)",
             pv, MCP_PROTOCOL_LATEST);
    mcp__hconn_error(c, 400, -32000, m, NULL);
    return false;
}

/* The session named by the Mcp-Session-Id header; answers 400/404 itself when there is none. */
static mcp__hsess_t *session_of(mcp_http_server_t *hs, mcp__hconn_t *c)
{
    const char *sid = mcp__hconn_header(c, "Mcp-Session-Id");
    if (sid == NULL || sid[0] == '\0') {
        mcp__hconn_error(c, 400, -32000, "Bad Request: Mcp-Session-Id header is required", NULL);
        return NULL;
    }
    mcp__hsess_t *se = mcp__http_sess_find(hs, sid);
    if (se == NULL || se->legacy || se->stateless) {
        mcp__hconn_error(c, 404, -32001,
                         "Session not found (it ended or expired): initialize "
                         "a new one",
                         NULL);
        return NULL;
    }
    return se;
}

/* Reads a POST body into bi; false (answered 400) when it is not JSON-RPC. */
static bool inspect_body(mcp__hconn_t *c, const mcp__hreq_t *req, mcp__hbody_t *bi)
{
    memset(bi, 0, sizeof *bi);
    bi->msg = cJSON_ParseWithLength(req->body, req->body_len);
    if (bi->msg == NULL || !(cJSON_IsObject(bi->msg) || cJSON_IsArray(bi->msg))) {
        cJSON_Delete(bi->msg);
        bi->msg = NULL;
        mcp__hconn_error(c, 400, MCP_JSONRPC_PARSE_ERROR,
                         "Parse error: the body must be one JSON-RPC message or a batch", NULL);
        return false;
    }
    bi->is_batch = cJSON_IsArray(bi->msg);
    if (bi->is_batch && cJSON_GetArraySize(bi->msg) == 0) {
        mcp__hconn_error(c, 400, MCP_JSONRPC_INVALID_REQUEST, "Invalid Request: empty batch", NULL);
        return false;
    }
    const cJSON *m = bi->is_batch ? bi->msg->child : bi->msg;
    for (; m != NULL; m = bi->is_batch ? m->next : NULL) {
        const char *why = NULL;
        mcp_msg_kind_t k = mcp_jsonrpc_classify(m, &why);
        if (k == MCP_MSG_INVALID) {
            char t[256];
            snprintf(t, sizeof t, "Invalid Request: %s", why ? why : "not JSON-RPC 2.0");
            mcp__hconn_error(c, 400, MCP_JSONRPC_INVALID_REQUEST, t, NULL);
            return false;
        }
        if (k != MCP_MSG_REQUEST) continue;
        bi->n_requests++;
        const char *method = cJSON_GetObjectItemCaseSensitive(m, "method")->valuestring;
        if (strcmp(method, "initialize") == 0) bi->has_init = true;
        /* A tool may report progress, log or ask the client before it answers. */
        if (strcmp(method, "tools/call") == 0) bi->wants_stream = true;
    }
    if (bi->has_init && bi->is_batch) {
        mcp__hconn_error(c, 400, MCP_JSONRPC_INVALID_REQUEST,
                         "Invalid Request: initialize must be sent alone", NULL);
        return false;
    }
    return true;
}
static void post_mcp(mcp_http_server_t *hs, mcp__hconn_t *c, const mcp__hreq_t *req)
{
    const char *accept = mcp__hconn_header(c, "Accept");
    if (!mcp__http_accepts(accept, "application/json") ||
        !mcp__http_accepts(accept, "text/event-stream")) {
        mcp__hconn_error(c, 406, -32000,
                         "Not Acceptable: the Accept header must list both application/json and "
                         "text/event-stream",
                         NULL);
        return;
    }
    if (!mcp__http_media_is(mcp__hconn_header(c, "Content-Type"), "application/json")) {
        mcp__hconn_error(c, 415, -32000,
                         "Unsupported Media Type: Content-Type must be application/json", NULL);
        return;
    }
    mcp__hbody_t bi;
    if (!inspect_body(c, req, &bi)) {
        cJSON_Delete(bi.msg);
        return;
    }
    if (mcp__http_is_stateless_post(c, &bi)) {
        mcp__http_post_stateless(hs, c, req, &bi);
        cJSON_Delete(bi.msg);
        return;
    }
    mcp__hsess_t *se;
    bool fresh = false;
    if (bi.has_init) {
        if (!mcp__http_room_for_session(hs)) {
            mcp__hconn_error(c, 503, -32000, "Service Unavailable: too many sessions",
                             "Retry-After: 5\r\n");
            cJSON_Delete(bi.msg);
            return;
        }
        se = mcp__http_sess_new(hs, false);
        if (se == NULL) {
            mcp__hconn_error(c, 500, MCP_JSONRPC_INTERNAL_ERROR, "out of memory", NULL);
            cJSON_Delete(bi.msg);
            return;
        }
        fresh = true;
    } else {
        se = session_of(hs, c);
        if (se == NULL || !check_protocol_header(c)) {
            cJSON_Delete(bi.msg);
            return;
        }
    }
    se->last_active_ms = mcp__now_ms();
    if (bi.n_requests == 0) {
        cJSON_Delete(bi.msg);
        char h[96];
        mcp__http_session_header(se, h, sizeof h);
        mcp_session_receive(se->s, req->body, req->body_len);
        mcp__hconn_respond(c, 202, NULL, h, "", 0);
        return;
    }
    if (se->n_open >= hs->o.max_streams_per_session) {
        cJSON_Delete(bi.msg);
        mcp__hconn_error(c, 503, -32000,
                         "Service Unavailable: too many requests in flight on this session",
                         "Retry-After: 1\r\n");
        return;
    }
    cJSON *ids = cJSON_CreateArray();
    const cJSON *m = bi.is_batch ? bi.msg->child : bi.msg;
    for (; m != NULL && ids != NULL; m = bi.is_batch ? m->next : NULL) {
        if (mcp_jsonrpc_classify(m, NULL) != MCP_MSG_REQUEST) continue;
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
        if (mcp__http_find_stream(se, id) != NULL) {
            cJSON_Delete(ids);
            cJSON_Delete(bi.msg);
            mcp__hconn_error(c, 409, MCP_JSONRPC_INVALID_REQUEST,
                             "Conflict: a request with this id is still in flight", NULL);
            return;
        }
        cJSON *dup = cJSON_Duplicate(id, true);
        if (dup == NULL || !cJSON_AddItemToArray(ids, dup)) {
            cJSON_Delete(dup);
            cJSON_Delete(ids);
            ids = NULL;
        }
    }
    cJSON_Delete(bi.msg);
    mcp__hstream_t *st = ids != NULL ? mcp__http_stream_new(se, bi.wants_stream, false) : NULL;
    if (st == NULL) {
        cJSON_Delete(ids);
        mcp__hconn_error(c, 500, MCP_JSONRPC_INTERNAL_ERROR, "out of memory", NULL);
        if (fresh) mcp__http_end_session(se, true, false);
        return;
    }
    st->ids = ids;
    se->n_open++;
    st->conn = c;
    if (st->sse) {
        char h[96];
        mcp__http_session_header(se, h, sizeof h);
        mcp__hconn_stream_begin(c, h, st);
        mcp__http_primer(st, 0);
    } else {
        mcp__hconn_wait(c, st);
    }
    se->dispatching = st;
    mcp_session_receive(se->s, req->body, req->body_len);
    if (se->dispatching == st) se->dispatching = NULL;
    if (fresh && mcp_session_protocol(se->s) == NULL) {
        /* initialize was refused: nothing to keep. */
        mcp__http_end_session(se, true, false);
    } else if (fresh) {
        mcp_log(hs->lg, MCP_LOG_DEBUG, "http: session started (%zu open)", hs->n_sessions);
    }
}

static void get_mcp(mcp_http_server_t *hs, mcp__hconn_t *c)
{
    /* The standalone stream belongs to a session: without one there is none to offer, and
     * for a GET the spec's rule is text/event-stream or 405 (its 400 for a missing session id
     * is a SHOULD for requests in general). 405 is also what clients probing for the stream
     * (before initialize, or speaking 2026-07-28, which has no GET stream) take as "no stream
     * here, go on with POST"; checked before Accept, which does not matter then. */
    const char *sid = mcp__hconn_header(c, "Mcp-Session-Id");
    if (sid == NULL || sid[0] == '\0') {
        mcp__hconn_error(c, 405, -32000,
                         "Method Not Allowed: a GET stream needs a session (send initialize "
                         "first, then GET with its Mcp-Session-Id)",
                         "Allow: GET, POST, DELETE\r\n");
        return;
    }
    if (!mcp__http_accepts(mcp__hconn_header(c, "Accept"), "text/event-stream")) {
        mcp__hconn_error(c, 406, -32000,
                         "Not Acceptable: the Accept header must list "
                         "text/event-stream",
                         NULL);
        return;
    }
    mcp__hsess_t *se = session_of(hs, c);
    if (se == NULL || !check_protocol_header(c)) return;
    se->last_active_ms = mcp__now_ms();
    uint64_t num, seq;
    const char *last = mcp__hconn_header(c, "Last-Event-ID");
    if (last != NULL && mcp__sse_parse_event_id(last, &num, &seq) == 0) {
        mcp__hstream_t *st = num == 0 ? se->get : NULL;
        for (mcp__hstream_t *x = se->streams; x != NULL && st == NULL; x = x->next)
            if (x->num == num && x->sse) st = x;
        if (st != NULL) {
            mcp__http_attach(se, st, c, seq);
            return;
        }
    }
    if (se->get->conn != NULL) {
        mcp__hconn_error(c, 409, -32000, "Conflict: this session already has a GET stream open",
                         NULL);
        return;
    }
    mcp__http_attach(se, se->get, c, se->get->sent_seq);
}

static void delete_mcp(mcp_http_server_t *hs, mcp__hconn_t *c)
{
    mcp__hsess_t *se = session_of(hs, c);
    if (se == NULL || !check_protocol_header(c)) return;
    mcp_log(hs->lg, MCP_LOG_DEBUG, "http: session ended by the client");
    mcp__http_end_session(se, true, false);
    mcp__hconn_respond(c, 200, NULL, NULL, "", 0);
}

/* --- legacy HTTP+SSE ---------------------------------------------------------------------- */

static void get_sse(mcp_http_server_t *hs, mcp__hconn_t *c)
{
    if (!mcp__http_room_for_session(hs)) {
        mcp__hconn_error(c, 503, -32000, "Service Unavailable: too many sessions",
                         "Retry-After: 5\r\n");
        return;
    }
    mcp__hsess_t *se = mcp__http_sess_new(hs, true);
    if (se == NULL) {
        mcp__hconn_error(c, 500, MCP_JSONRPC_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    se->get->conn = c;
    mcp__hconn_stream_begin(c, NULL, se->get);
    char data[128];
    snprintf(data, sizeof data, "/messages?sessionId=%s", se->id);
    size_t n = 0;
    char *ev = mcp__sse_format(NULL, "endpoint", 0, data, strlen(data), &n);
    if (ev != NULL) mcp__http_stream_write(se->get, ev, n);
    free(ev);
}

static void post_messages(mcp_http_server_t *hs, mcp__hconn_t *c, const mcp__hreq_t *req)
{
    char sid[80];
    if (mcp__http_query_param(req->target, "sessionId", sid, sizeof sid) < 0) {
        mcp__hconn_error(c, 400, -32000, "Bad Request: sessionId query parameter is required",
                         NULL);
        return;
    }
    mcp__hsess_t *se = mcp__http_sess_find(hs, sid);
    if (se == NULL || !se->legacy || se->stateless) {
        mcp__hconn_error(c, 404, -32001, "Session not found: open a new one with GET /sse", NULL);
        return;
    }
    if (!mcp__http_media_is(mcp__hconn_header(c, "Content-Type"), "application/json")) {
        mcp__hconn_error(c, 415, -32000,
                         "Unsupported Media Type: Content-Type must be application/json", NULL);
        return;
    }
    mcp__hbody_t bi;
    bool ok = inspect_body(c, req, &bi);
    cJSON_Delete(bi.msg);
    if (!ok) return;
    se->last_active_ms = mcp__now_ms();
    mcp_session_receive(se->s, req->body, req->body_len);
    mcp__hconn_respond(c, 202, "text/plain", NULL, "Accepted", 8);
}

/* --- routing ------------------------------------------------------------------------------ */

static bool path_is(const mcp__hreq_t *req, const char *path)
{
    size_t n = strlen(path);
    return req->path_len == n && strncmp(req->target, path, n) == 0;
}

bool mcp__http_route(mcp_http_server_t *hs, mcp__hconn_t *c, const mcp__hreq_t *req)
{
    if (path_is(req, "/mcp")) {
        switch (req->method) {
        case HTTP_POST:
            post_mcp(hs, c, req);
            break;
        case HTTP_GET:
            get_mcp(hs, c);
            break;
        case HTTP_DELETE:
            delete_mcp(hs, c);
            break;
        default:
            mcp__hconn_error(c, 405, -32000, "Method Not Allowed", "Allow: GET, POST, DELETE\r\n");
        }
        return true;
    }
    if (path_is(req, "/sse")) {
        if (req->method == HTTP_GET)
            get_sse(hs, c);
        else
            mcp__hconn_error(c, 405, -32000, "Method Not Allowed", "Allow: GET\r\n");
        return true;
    }
    if (path_is(req, "/messages")) {
        if (req->method == HTTP_POST)
            post_messages(hs, c, req);
        else
            mcp__hconn_error(c, 405, -32000, "Method Not Allowed", "Allow: POST\r\n");
        return true;
    }
    return false;
}
