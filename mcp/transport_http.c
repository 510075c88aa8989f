/* transport_http.c - MCP over HTTP: Streamable HTTP at /mcp (2025-03-26 .. 2025-11-25) and the
 * legacy HTTP+SSE transport (2024-11-05) at /sse + /messages. Each HTTP session is an
 * mcp_session_t; its messages go to the stream of the request they belong to (the POST that
 * carried it), the rest to the session's standalone GET stream, kept for replay (Last-Event-ID)
 * in a bounded buffer per stream. */
#include "header_value.h"
#include "http_server_internal.h"

#include <http_parser.h>
#include <stdlib.h>
#include <string.h>

#define SESSION_ID_BYTES 16
/* A POST stream whose answer could not be delivered (the client went away) is kept this long
 * for a GET with Last-Event-ID. */
#define RETAIN_MS        120000
#define MAX_RETAINED     16 /* such streams per session */
#define SSE_RETRY_MS     1000
#define PRIMING_PROTOCOL "2025-11-25"

typedef struct ev {
    struct ev *next;
    uint64_t seq;
    size_t len;
    char *data; /* the formatted SSE event */
} ev_t;

struct mcp__hstream {
    mcp__hsess_t *sess;
    uint64_t num;       /* 0: the standalone stream */
    mcp__hconn_t *conn; /* the connection carrying it now, or NULL */
    bool sse;           /* event stream (else one JSON answer) */
    bool answered;
    cJSON *ids; /* request ids it answers (POST streams) */
    uint64_t next_seq, sent_seq;
    ev_t *head, *tail;
    size_t n_ev, ev_bytes;
    uint64_t last_write_ms, done_ms;
    mcp__hstream_t *prev, *next;
};

struct mcp__hsess {
    mcp_http_server_t *hs;
    char id[2 * SESSION_ID_BYTES + 1];
    bool legacy;
    bool ended;     /* no longer found by id */
    bool draining;  /* ended by a server stop: answers in flight still go out */
    bool lost;      /* legacy: the stream closed; ended from the next loop turn (also a
                       stateless session once its one request is answered or abandoned) */
    bool stateless; /* 2026-07-28: one POST without Mcp-Session-Id; never found by id */
    mcp_session_t *s;
    mcp__hstream_t *streams; /* POST streams */
    size_t n_open, n_retained;
    mcp__hstream_t *get;         /* standalone stream (legacy: the SSE stream) */
    mcp__hstream_t *dispatching; /* the POST being handed to the session */
    uint64_t next_stream;
    uint64_t last_active_ms;
    mcp__hsess_t *prev, *next;
};

static void end_session(mcp__hsess_t *se, bool cancel_now, bool drain);

/* --- lists -------------------------------------------------------------------------------- */

static void sess_link(mcp__hsess_t **head, mcp__hsess_t *se)
{
    se->prev = NULL;
    se->next = *head;
    if (*head) (*head)->prev = se;
    *head = se;
}

static void sess_unlink(mcp__hsess_t **head, mcp__hsess_t *se)
{
    if (se->prev)
        se->prev->next = se->next;
    else if (*head == se)
        *head = se->next;
    if (se->next) se->next->prev = se->prev;
    se->prev = se->next = NULL;
}

/* --- streams ------------------------------------------------------------------------------ */

static mcp__hstream_t *stream_new(mcp__hsess_t *se, bool sse, bool standalone)
{
    mcp__hstream_t *st = calloc(1, sizeof *st);
    if (st == NULL) return NULL;
    st->sess = se;
    st->sse = sse;
    st->last_write_ms = mcp__now_ms();
    if (!standalone) {
        st->num = ++se->next_stream;
        st->next = se->streams;
        if (se->streams) se->streams->prev = st;
        se->streams = st;
    }
    return st;
}

static void stream_free(mcp__hstream_t *st)
{
    mcp__hsess_t *se = st->sess;
    if (st != se->get) {
        if (st->prev)
            st->prev->next = st->next;
        else if (se->streams == st)
            se->streams = st->next;
        if (st->next) st->next->prev = st->prev;
        if (!st->answered) se->n_open--;
        if (st->answered && st->done_ms != 0) se->n_retained--;
    }
    if (se->dispatching == st) se->dispatching = NULL;
    while (st->head != NULL) {
        ev_t *e = st->head;
        st->head = e->next;
        free(e->data);
        free(e);
    }
    cJSON_Delete(st->ids);
    free(st);
}

/* Takes data: keeps the event for replay, dropping the oldest past the bounds. */
static void ring_push(mcp__hstream_t *st, uint64_t seq, char *data, size_t len)
{
    const mcp_http_server_opts_t *o = &st->sess->hs->o;
    ev_t *e = malloc(sizeof *e);
    if (e == NULL) {
        free(data);
        return;
    }
    e->next = NULL;
    e->seq = seq;
    e->len = len;
    e->data = data;
    if (st->tail)
        st->tail->next = e;
    else
        st->head = e;
    st->tail = e;
    st->n_ev++;
    st->ev_bytes += len;
    while (st->head != NULL && st->head != st->tail &&
           (st->n_ev > o->replay_events || st->ev_bytes > o->replay_bytes)) {
        ev_t *old = st->head;
        st->head = old->next;
        st->n_ev--;
        st->ev_bytes -= old->len;
        free(old->data);
        free(old);
    }
}

static void stream_write(mcp__hstream_t *st, const char *data, size_t len)
{
    if (st->conn == NULL) return;
    if (mcp__hconn_stream_write(st->conn, data, len) < 0) {
        st->conn = NULL; /* closed: conn_lost may already have said so */
        return;
    }
    st->last_write_ms = mcp__now_ms();
}

/* Sends one JSON-RPC message as an event of st (or keeps it for later). */
static void stream_emit(mcp__hstream_t *st, const char *json, size_t len)
{
    mcp__hsess_t *se = st->sess;
    char id[48];
    uint64_t seq = ++st->next_seq;
    if (!se->legacy)
        snprintf(id, sizeof id, "%llu_%llu", (unsigned long long)st->num, (unsigned long long)seq);
    size_t n = 0;
    char *ev = mcp__sse_format(se->legacy ? NULL : id, "message", 0, json, len, &n);
    if (ev == NULL) {
        mcp_log(se->hs->lg, MCP_LOG_ERROR, "http: out of memory; a message was dropped");
        return;
    }
    if (st->conn != NULL && st->sent_seq + 1 == seq) {
        stream_write(st, ev, n);
        if (st->conn != NULL) st->sent_seq = seq;
    }
    if (se->legacy)
        free(ev);
    else
        ring_push(st, seq, ev, n);
}

/* The stream st answers request id `related` (a null id: the POST being dispatched). */
static mcp__hstream_t *find_stream(mcp__hsess_t *se, const cJSON *related)
{
    if (cJSON_IsNull(related)) return se->dispatching;
    for (mcp__hstream_t *st = se->streams; st != NULL; st = st->next) {
        if (st->answered) continue;
        const cJSON *id;
        cJSON_ArrayForEach(id, st->ids) if (cJSON_Compare(id, related, true)) return st;
    }
    return NULL;
}

static void session_header(const mcp__hsess_t *se, char *buf, size_t size)
{
    if (se->stateless)
        buf[0] = '\0';
    else
        snprintf(buf, size, "Mcp-Session-Id: %s\r\n", se->id);
}

/* A stateless session is done: it ends from a fresh loop turn (we may be inside it here). */
static void stateless_done(mcp__hsess_t *se)
{
    se->lost = true;
    mcp__http_reap_later(se->hs);
}

/* The HTTP status of a stateless request's JSON answer: its error code calls for one. */
static int stateless_status(const char *json, size_t len)
{
    int status = 200;
    cJSON *msg = cJSON_ParseWithLength(json, len);
    const cJSON *code =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(msg, "error"), "code");
    if (cJSON_IsNumber(code)) status = mcp_modern_http_status(code->valueint);
    cJSON_Delete(msg);
    return status;
}

static void primer(mcp__hstream_t *st, uint64_t after)
{
    const char *pv = mcp_session_protocol(st->sess->s);
    if (st->sess->legacy || pv == NULL || mcp_protocol_cmp(pv, PRIMING_PROTOCOL) < 0) return;
    char id[48];
    snprintf(id, sizeof id, "%llu_%llu", (unsigned long long)st->num, (unsigned long long)after);
    size_t n = 0;
    char *ev = mcp__sse_format(id, NULL, SSE_RETRY_MS, "", 0, &n);
    if (ev == NULL) return;
    stream_write(st, ev, n);
    free(ev);
}

/* --- the session's transport -------------------------------------------------------------- */

static int sess_send(void *tdata, const char *json, size_t len, const cJSON *related, bool answer)
{
    mcp__hsess_t *se = tdata;
    if (se->ended && !se->draining) return MCP_OK; /* nobody can receive it any more */
    se->last_active_ms = mcp__now_ms();
    mcp__hstream_t *st = related != NULL ? find_stream(se, related) : NULL;
    if (se->stateless && json == NULL && !answer) return MCP_ENOTSUP; /* no resumption */
    if (json == NULL && !answer) {
        /* Close the stream early; its events wait for a GET with Last-Event-ID. */
        if (st == NULL || !st->sse || st->conn == NULL) return MCP_ENOTSUP;
        mcp__hconn_t *c = st->conn;
        st->conn = NULL;
        mcp__hconn_stream_end(c);
        return MCP_OK;
    }
    if (json == NULL) {
        /* The client cancelled the request: it waits for no answer, so its stream ends. */
        if (st == NULL) return MCP_OK;
        st->answered = true;
        se->n_open--;
        mcp__hconn_t *c = st->conn;
        st->conn = NULL;
        if (c != NULL && st->sse)
            mcp__hconn_stream_end(c);
        else if (c != NULL)
            mcp__hconn_respond(c, 202, NULL, NULL, "", 0);
        stream_free(st);
        if (se->stateless) stateless_done(se);
        return MCP_OK;
    }
    if (se->legacy) {
        stream_emit(se->get, json, len);
        return MCP_OK;
    }
    if (se->stateless && st != NULL && !st->sse && !answer && st->conn != NULL) {
        /* 2026-07-28: the answer is plain JSON unless something comes before it, which turns
         * the response into an event stream (the request's only way back). */
        st->sse = true;
        mcp__hconn_stream_begin(st->conn, NULL, st);
    }
    if (se->stateless && (st == NULL || !st->sse) && !answer) return MCP_OK; /* nowhere */
    if (st == NULL || (!st->sse && !answer)) {
        /* Unrelated, or a JSON answer stream that cannot carry it: the standalone stream. */
        stream_emit(se->get, json, len);
        return MCP_OK;
    }
    if (!st->sse) {
        st->answered = true;
        se->n_open--;
        mcp__hconn_t *c = st->conn;
        st->conn = NULL;
        if (c != NULL) {
            char h[96];
            session_header(se, h, sizeof h);
            mcp__hconn_respond(c, se->stateless ? stateless_status(json, len) : 200,
                               "application/json", h, json, len);
        }
        stream_free(st);
        if (se->stateless) stateless_done(se);
        return MCP_OK;
    }
    stream_emit(st, json, len);
    if (answer) {
        st->answered = true;
        se->n_open--;
        if (st->conn != NULL || se->stateless) {
            mcp__hconn_t *c = st->conn;
            st->conn = NULL;
            if (c != NULL) mcp__hconn_stream_end(c);
            stream_free(st);
            if (se->stateless) stateless_done(se);
        } else {
            /* Kept for a GET with Last-Event-ID; bounded in number and time. */
            st->done_ms = mcp__now_ms();
            se->n_retained++;
            if (se->dispatching == st) se->dispatching = NULL;
            while (se->n_retained > MAX_RETAINED) {
                mcp__hstream_t *oldest = NULL;
                for (mcp__hstream_t *x = se->streams; x != NULL; x = x->next)
                    if (x->answered && (oldest == NULL || x->done_ms <= oldest->done_ms))
                        oldest = x;
                if (oldest == NULL) break;
                stream_free(oldest);
            }
        }
    }
    return MCP_OK;
}

static const mcp_transport_ops_t sess_ops = {.send = NULL, .closed = NULL};

/* --- sessions ----------------------------------------------------------------------------- */

static mcp__hsess_t *sess_new(mcp_http_server_t *hs, bool legacy)
{
    mcp__hsess_t *se = calloc(1, sizeof *se);
    if (se == NULL) return NULL;
    se->hs = hs;
    se->legacy = legacy;
    unsigned char raw[SESSION_ID_BYTES];
    if (mbedtls_ctr_drbg_random(&hs->drbg, raw, sizeof raw) != 0) {
        free(se);
        return NULL;
    }
    mcp__hex(raw, sizeof raw, se->id);
    se->get = stream_new(se, true, true);
    if (se->get == NULL || mcp_session_new(hs->srv, &sess_ops, se, &se->s) < 0) {
        free(se->get);
        free(se);
        return NULL;
    }
    mcp_session_set_router(se->s, sess_send);
    /* Every request of the session passed the bearer check with this one token. */
    if (hs->token != NULL) mcp__session_set_credential(se->s, hs->token_digest);
    se->last_active_ms = mcp__now_ms();
    sess_link(&hs->sessions, se);
    hs->n_sessions++;
    return se;
}

static mcp__hsess_t *sess_find(mcp_http_server_t *hs, const char *id)
{
    size_t n = strlen(id);
    for (mcp__hsess_t *se = hs->sessions; se != NULL; se = se->next)
        if (mcp__http_secret_equal(id, n, se->id, strlen(se->id))) return se;
    return NULL;
}

static void sess_free(mcp__hsess_t *se)
{
    mcp_session_free(se->s);
    while (se->streams != NULL)
        stream_free(se->streams);
    stream_free(se->get);
    free(se);
}

/* Ends the responses a session's streams still carry. */
static void detach_streams(mcp__hsess_t *se)
{
    mcp__hstream_t *all[2] = {se->get, se->streams};
    for (int k = 0; k < 2; k++) {
        for (mcp__hstream_t *st = all[k]; st != NULL; st = k == 0 ? NULL : st->next) {
            mcp__hconn_t *c = st->conn;
            if (c == NULL) continue;
            st->conn = NULL;
            if (st->sse)
                mcp__hconn_stream_end(c);
            else
                mcp__hconn_error(c, 404, -32001, "Session ended", NULL);
        }
    }
}

static void on_session_idle(mcp_session_t *s, void *data)
{
    mcp__hsess_t *se = data;
    (void)s;
    detach_streams(se);
    mcp_http_server_t *hs = se->hs;
    sess_unlink(&hs->ending, se);
    sess_link(&hs->dead, se);
    /* Freed from a fresh loop turn: the session may be on the stack here. */
    mcp__http_reap_later(hs);
}

static void end_session(mcp__hsess_t *se, bool cancel_now, bool drain)
{
    mcp_http_server_t *hs = se->hs;
    if (se->ended) {
        if (cancel_now) mcp_session_shutdown(se->s, on_session_idle, se);
        return;
    }
    se->ended = true;
    se->draining = drain;
    sess_unlink(&hs->sessions, se);
    if (!se->stateless) hs->n_sessions--;
    sess_link(&hs->ending, se);
    if (!drain) detach_streams(se);
    mcp_session_shutdown(se->s, on_session_idle, se);
    /* Asked twice, the session cancels what still runs at once. */
    if (cancel_now && se->ended && !se->draining) mcp_session_shutdown(se->s, on_session_idle, se);
}

void mcp__http_reap(mcp_http_server_t *hs)
{
    for (mcp__hsess_t *se = hs->sessions, *next; se != NULL; se = next) {
        next = se->next;
        if (se->lost) {
            if (!se->stateless)
                mcp_log(hs->lg, MCP_LOG_INFO,
                        "http: an SSE client disconnected; ending its session");
            end_session(se, true, false);
        }
    }
    while (hs->dead != NULL) {
        mcp__hsess_t *se = hs->dead;
        sess_unlink(&hs->dead, se);
        sess_free(se);
    }
}

void mcp__http_end_all(mcp_http_server_t *hs, bool cancel_now)
{
    while (hs->sessions != NULL)
        end_session(hs->sessions, cancel_now, true);
    if (cancel_now) {
        for (mcp__hsess_t *se = hs->ending, *next; se != NULL; se = next) {
            next = se->next;
            mcp_session_shutdown(se->s, on_session_idle, se);
        }
    }
}

void mcp__http_free_all(mcp_http_server_t *hs)
{
    mcp__hsess_t **lists[3] = {&hs->sessions, &hs->ending, &hs->dead};
    for (int i = 0; i < 3; i++) {
        while (*lists[i] != NULL) {
            mcp__hsess_t *se = *lists[i];
            sess_unlink(lists[i], se);
            /* Connections are closed by the server; they must not call back into us. */
            mcp__hstream_t *all[2] = {se->get, se->streams};
            for (int k = 0; k < 2; k++)
                for (mcp__hstream_t *st = all[k]; st != NULL; st = k == 0 ? NULL : st->next) {
                    if (st->conn != NULL) mcp__hconn_abort(st->conn);
                    st->conn = NULL;
                }
            sess_free(se);
        }
    }
    hs->n_sessions = 0;
}

void mcp__http_conn_lost(mcp_http_server_t *hs, void *owner)
{
    mcp__hstream_t *st = owner;
    (void)hs;
    st->conn = NULL;
    mcp__hsess_t *se = st->sess;
    if (se->legacy && st == se->get && !se->ended) {
        /* The legacy transport has no way back: its stream is the session. It ends from a fresh
         * loop turn, since a failed write may have brought us here from inside the session. */
        se->lost = true;
        mcp__http_reap_later(se->hs);
    }
    if (se->stateless && !se->ended) {
        /* 2026-07-28: a request's connection is its only way back; its work is abandoned. */
        stateless_done(se);
        return;
    }
    /* Streamable HTTP: disconnection is not cancellation; the events wait for a resume. */
}

void mcp__http_tick(mcp_http_server_t *hs, uint64_t now)
{
    for (mcp__hsess_t *se = hs->sessions, *next; se != NULL; se = next) {
        next = se->next;
        bool live = se->get->conn != NULL;
        mcp__hstream_t *all[2] = {se->get, se->streams};
        for (int k = 0; k < 2; k++) {
            for (mcp__hstream_t *st = all[k], *sn; st != NULL; st = sn) {
                sn = k == 0 ? NULL : st->next;
                if (st->conn != NULL) {
                    live = true;
                    if (st->sse && now - st->last_write_ms >= hs->o.keepalive_ms)
                        stream_write(st, ": keep-alive\n\n", 14);
                } else if (st->answered && now - st->done_ms > RETAIN_MS) {
                    stream_free(st);
                }
            }
        }
        if (!live && now - se->last_active_ms > hs->o.session_idle_ms) {
            mcp_log(hs->lg, MCP_LOG_INFO, "http: session idle for %u s; ending it",
                    hs->o.session_idle_ms / 1000);
            end_session(se, true, false);
        }
    }
}

/* True when the session may take one more (the limit is reached: the session idle the longest,
 * with no open stream and nothing in flight, makes room; clients rarely DELETE). */
static bool room_for_session(mcp_http_server_t *hs)
{
    if (hs->stopping) return false;
    if (hs->n_sessions < hs->o.max_sessions) return true;
    mcp__hsess_t *oldest = NULL;
    for (mcp__hsess_t *se = hs->sessions; se != NULL; se = se->next) {
        if (se->stateless || se->n_open > 0 || se->get->conn != NULL) continue;
        bool live = false;
        for (mcp__hstream_t *st = se->streams; st != NULL && !live; st = st->next)
            live = st->conn != NULL;
        if (!live && (oldest == NULL || se->last_active_ms < oldest->last_active_ms)) oldest = se;
    }
    if (oldest == NULL) {
        mcp_log(hs->lg, MCP_LOG_WARNING,
                "http: %zu sessions open (the limit), all busy: refusing a new one",
                hs->n_sessions);
        return false;
    }
    mcp_log(hs->lg, MCP_LOG_INFO,
            "http: %zu sessions open (the limit): ending the one idle longest", hs->n_sessions);
    end_session(oldest, true, false);
    return true;
}

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
    mcp__hsess_t *se = sess_find(hs, sid);
    if (se == NULL || se->legacy || se->stateless) {
        mcp__hconn_error(c, 404, -32001,
                         "Session not found (it ended or expired): initialize "
                         "a new one",
                         NULL);
        return NULL;
    }
    return se;
}

/* What a POST body holds; false (answered 400) when it is not JSON-RPC. */
typedef struct body_info {
    cJSON *msg;
    size_t n_requests;
    bool has_init, wants_stream, is_batch;
} body_info_t;

static bool inspect_body(mcp__hconn_t *c, const mcp__hreq_t *req, body_info_t *bi)
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

/* --- Streamable HTTP, 2026-07-28: stateless requests ------------------------------------- */

/* Header `name` without the optional white space around it (RFC 9110 5.5), copied into buf;
 * NULL when absent. A value longer than buf is cut, which no valid value is. */
static const char *header_trimmed(const mcp__hconn_t *c, const char *name, char *buf, size_t size)
{
    const char *v = mcp__hconn_header(c, name);
    if (v == NULL) return NULL;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n >= size) n = size - 1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    return buf;
}

/* A POST is a stateless request when it names no session and either its
 * MCP-Protocol-Version is none of the legacy revisions or its body carries the 2026 _meta. */
static bool is_stateless_post(const mcp__hconn_t *c, const body_info_t *bi)
{
    if (mcp__hconn_header(c, "Mcp-Session-Id") != NULL) return false;
    char pv[64];
    if (header_trimmed(c, "MCP-Protocol-Version", pv, sizeof pv) != NULL)
        return !mcp_protocol_supported(pv);
    return !bi->is_batch &&
           mcp_params_are_modern(cJSON_GetObjectItemCaseSensitive(bi->msg, "params"));
}

static void reject(mcp__hconn_t *c, int status, const cJSON *id, int code, const char *msg)
{
    mcp__hconn_error_id(c, status, id, code, msg, NULL);
}

/* SEP-2243 custom headers: a tool's argument whose schema names "x-mcp-header": NAME travels
 * in the header Mcp-Param-NAME too, literally or as =?base64?...?= (strict base64). True when
 * every such argument the body has is in its header with the same value; why says otherwise. */
static bool custom_headers_match(const mcp__hconn_t *c, const mcp_server_t *srv,
                                 const cJSON *params, char *why, size_t why_size)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
    const mcp__entry_t *tool =
        cJSON_IsString(name) ? mcp__server_find_tool(srv, name->valuestring) : NULL;
    const cJSON *props =
        tool != NULL ? cJSON_GetObjectItemCaseSensitive(tool->input_schema, "properties") : NULL;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
    const cJSON *p;
    cJSON_ArrayForEach(p, props)
    {
        const cJSON *hname = cJSON_GetObjectItemCaseSensitive(p, "x-mcp-header");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, p->string);
        if (!cJSON_IsString(hname) || v == NULL || cJSON_IsNull(v)) continue;
        char header[160], raw[1024], decoded[1024];
        snprintf(header, sizeof header, "Mcp-Param-%.100s", hname->valuestring);
        char *body = cJSON_IsString(v) ? NULL : cJSON_PrintUnformatted(v);
        const char *want = cJSON_IsString(v) ? v->valuestring : body;
        const char *got = header_trimmed(c, header, raw, sizeof raw);
        if (got != NULL && (got = mcp__header_value_decode(got, decoded, sizeof decoded)) == NULL) {
            snprintf(why, why_size, "Header mismatch: %s is not valid base64", header);
            cJSON_free(body);
            return false;
        }
        bool same = got != NULL && want != NULL && strcmp(got, want) == 0;
        cJSON_free(body);
        if (!same) {
            snprintf(why, why_size, "Header mismatch: %s must carry argument %.80s's value", header,
                     p->string);
            return false;
        }
    }
    return true;
}

/* The standard headers must agree with the body (-32020 HeaderMismatch, 400 otherwise). */
static bool check_modern_headers(mcp__hconn_t *c, const mcp_server_t *srv, const cJSON *msg)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    const char *method = cJSON_GetObjectItemCaseSensitive(msg, "method")->valuestring;
    char pv[64], hm[256], hn[MCP_MAX_URI_BYTES + 1], m[512];
    if (header_trimmed(c, "MCP-Protocol-Version", pv, sizeof pv) == NULL) {
        reject(c, 400, id, MCP_ERR_HEADER_MISMATCH,
               "Header mismatch: a 2026-07-28 request needs the MCP-Protocol-Version header");
        return false;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(params, "_meta"), MCP_META_PROTOCOL_VERSION);
    if (cJSON_IsString(ver) && strcmp(ver->valuestring, pv) != 0) {
        snprintf(m, sizeof m,
                 "Header mismatch: MCP-Protocol-Version \"%.40s\" differs from _meta's \"%.40s\"",
                 pv, ver->valuestring);
        reject(c, 400, id, MCP_ERR_HEADER_MISMATCH, m);
        return false;
    }
    if (header_trimmed(c, "Mcp-Method", hm, sizeof hm) == NULL || strcmp(hm, method) != 0) {
        snprintf(m, sizeof m, "Header mismatch: Mcp-Method must be the body's method \"%.160s\"",
                 method);
        reject(c, 400, id, MCP_ERR_HEADER_MISMATCH, m);
        return false;
    }
    const char *name = mcp__modern_name_of(method, params);
    if (name != NULL &&
        (header_trimmed(c, "Mcp-Name", hn, sizeof hn) == NULL || strcmp(hn, name) != 0)) {
        snprintf(m, sizeof m, "Header mismatch: Mcp-Name must be the body's \"%.160s\"", name);
        reject(c, 400, id, MCP_ERR_HEADER_MISMATCH, m);
        return false;
    }
    if (strcmp(method, "tools/call") == 0 && !custom_headers_match(c, srv, params, m, sizeof m)) {
        reject(c, 400, id, MCP_ERR_HEADER_MISMATCH, m);
        return false;
    }
    return true;
}

/* Serves one stateless POST: a session of its own that ends with the answer. */
static void post_stateless(mcp_http_server_t *hs, mcp__hconn_t *c, const mcp__hreq_t *req,
                           const body_info_t *bi)
{
    if (bi->is_batch) {
        reject(c, 400, NULL, MCP_JSONRPC_INVALID_REQUEST,
               "Invalid Request: protocol 2026-07-28 has no JSON-RPC batches");
        return;
    }
    bool request = bi->n_requests > 0;
    if (request && !check_modern_headers(c, hs->srv, bi->msg)) return;
    /* A stateless request is bounded by its connection (max_connections), not by the session
     * limit: it must never make a legacy session give way. */
    if (hs->stopping) {
        mcp__hconn_error(c, 503, -32000, "Service Unavailable: the server is stopping", NULL);
        return;
    }
    mcp__hsess_t *se = sess_new(hs, false);
    if (se != NULL) {
        se->stateless = true;
        hs->n_sessions--; /* counted by sess_new; not a session of the limit */
        mcp_session_set_stateless(se->s);
    }
    if (se != NULL && !request) {
        /* A notification: nothing answers it. */
        mcp_session_receive(se->s, req->body, req->body_len);
        mcp__hconn_respond(c, 202, NULL, NULL, "", 0);
        stateless_done(se);
        return;
    }
    cJSON *ids = cJSON_CreateArray();
    cJSON *id = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(bi->msg, "id"), true);
    mcp__hstream_t *st = NULL;
    if (se != NULL && ids != NULL && id != NULL && cJSON_AddItemToArray(ids, id)) {
        id = NULL;
        st = stream_new(se, false, false);
    }
    cJSON_Delete(id);
    if (se == NULL || st == NULL) {
        cJSON_Delete(ids);
        mcp__hconn_error(c, 500, MCP_JSONRPC_INTERNAL_ERROR, "out of memory", NULL);
        if (se != NULL) end_session(se, true, false);
        return;
    }
    st->ids = ids;
    se->n_open++;
    st->conn = c;
    mcp__hconn_wait(c, st);
    se->dispatching = st;
    mcp_session_receive(se->s, req->body, req->body_len);
    if (se->dispatching == st) se->dispatching = NULL;
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
    body_info_t bi;
    if (!inspect_body(c, req, &bi)) {
        cJSON_Delete(bi.msg);
        return;
    }
    if (is_stateless_post(c, &bi)) {
        post_stateless(hs, c, req, &bi);
        cJSON_Delete(bi.msg);
        return;
    }
    mcp__hsess_t *se;
    bool fresh = false;
    if (bi.has_init) {
        if (!room_for_session(hs)) {
            mcp__hconn_error(c, 503, -32000, "Service Unavailable: too many sessions",
                             "Retry-After: 5\r\n");
            cJSON_Delete(bi.msg);
            return;
        }
        se = sess_new(hs, false);
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
        session_header(se, h, sizeof h);
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
        if (find_stream(se, id) != NULL) {
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
    mcp__hstream_t *st = ids != NULL ? stream_new(se, bi.wants_stream, false) : NULL;
    if (st == NULL) {
        cJSON_Delete(ids);
        mcp__hconn_error(c, 500, MCP_JSONRPC_INTERNAL_ERROR, "out of memory", NULL);
        if (fresh) end_session(se, true, false);
        return;
    }
    st->ids = ids;
    se->n_open++;
    st->conn = c;
    if (st->sse) {
        char h[96];
        session_header(se, h, sizeof h);
        mcp__hconn_stream_begin(c, h, st);
        primer(st, 0);
    } else {
        mcp__hconn_wait(c, st);
    }
    se->dispatching = st;
    mcp_session_receive(se->s, req->body, req->body_len);
    if (se->dispatching == st) se->dispatching = NULL;
    if (fresh && mcp_session_protocol(se->s) == NULL) {
        /* initialize was refused: nothing to keep. */
        end_session(se, true, false);
    } else if (fresh) {
        mcp_log(hs->lg, MCP_LOG_DEBUG, "http: session started (%zu open)", hs->n_sessions);
    }
}

static void attach(mcp__hsess_t *se, mcp__hstream_t *st, mcp__hconn_t *c, uint64_t after)
{
    if (st->conn != NULL && st->conn != c) {
        /* A client resuming a stream is done with the old connection. */
        mcp__hconn_t *old = st->conn;
        st->conn = NULL;
        mcp__hconn_stream_end(old);
    }
    char h[96];
    session_header(se, h, sizeof h);
    st->conn = c;
    mcp__hconn_stream_begin(c, h, st);
    primer(st, after);
    for (ev_t *e = st->head; e != NULL && st->conn != NULL; e = e->next)
        if (e->seq > after) stream_write(st, e->data, e->len);
    if (st->conn == NULL) return;
    st->sent_seq = st->next_seq;
    if (st->answered) {
        st->conn = NULL;
        mcp__hconn_stream_end(c);
        stream_free(st);
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
            attach(se, st, c, seq);
            return;
        }
    }
    if (se->get->conn != NULL) {
        mcp__hconn_error(c, 409, -32000, "Conflict: this session already has a GET stream open",
                         NULL);
        return;
    }
    attach(se, se->get, c, se->get->sent_seq);
}

static void delete_mcp(mcp_http_server_t *hs, mcp__hconn_t *c)
{
    mcp__hsess_t *se = session_of(hs, c);
    if (se == NULL || !check_protocol_header(c)) return;
    mcp_log(hs->lg, MCP_LOG_DEBUG, "http: session ended by the client");
    end_session(se, true, false);
    mcp__hconn_respond(c, 200, NULL, NULL, "", 0);
}

/* --- legacy HTTP+SSE ---------------------------------------------------------------------- */

static void get_sse(mcp_http_server_t *hs, mcp__hconn_t *c)
{
    if (!room_for_session(hs)) {
        mcp__hconn_error(c, 503, -32000, "Service Unavailable: too many sessions",
                         "Retry-After: 5\r\n");
        return;
    }
    mcp__hsess_t *se = sess_new(hs, true);
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
    if (ev != NULL) stream_write(se->get, ev, n);
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
    mcp__hsess_t *se = sess_find(hs, sid);
    if (se == NULL || !se->legacy || se->stateless) {
        mcp__hconn_error(c, 404, -32001, "Session not found: open a new one with GET /sse", NULL);
        return;
    }
    if (!mcp__http_media_is(mcp__hconn_header(c, "Content-Type"), "application/json")) {
        mcp__hconn_error(c, 415, -32000,
                         "Unsupported Media Type: Content-Type must be application/json", NULL);
        return;
    }
    body_info_t bi;
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
