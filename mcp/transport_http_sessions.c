/* transport_http_sessions.c - the HTTP sessions of the MCP endpoints: each is an mcp_session_t
 * whose transport (sess_send) routes a message to the stream of the request it belongs to (the
 * POST that carried it), the rest to the session's standalone GET stream, each stream keeping
 * its events for replay (Last-Event-ID) in a bounded buffer; and their life: the session limit,
 * idle expiry, keep-alives, lost connections, ending and freeing. */
#include "transport_http_internal.h"

#include <stdlib.h>
#include <string.h>

/* A POST stream whose answer could not be delivered (the client went away) is kept this long
 * for a GET with Last-Event-ID. */
#define RETAIN_MS        120000
#define MAX_RETAINED     16 /* such streams per session */
#define SSE_RETRY_MS     1000
#define PRIMING_PROTOCOL "2025-11-25"

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

mcp__hstream_t *mcp__http_stream_new(mcp__hsess_t *se, bool sse, bool standalone)
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
        mcp__hev_t *e = st->head;
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
    mcp__hev_t *e = malloc(sizeof *e);
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
        mcp__hev_t *old = st->head;
        st->head = old->next;
        st->n_ev--;
        st->ev_bytes -= old->len;
        free(old->data);
        free(old);
    }
}

void mcp__http_stream_write(mcp__hstream_t *st, const char *data, size_t len)
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
        mcp__http_stream_write(st, ev, n);
        if (st->conn != NULL) st->sent_seq = seq;
    }
    if (se->legacy)
        free(ev);
    else
        ring_push(st, seq, ev, n);
}

/* The stream st answers request id `related` (a null id: the POST being dispatched). */
mcp__hstream_t *mcp__http_find_stream(mcp__hsess_t *se, const cJSON *related)
{
    if (cJSON_IsNull(related)) return se->dispatching;
    for (mcp__hstream_t *st = se->streams; st != NULL; st = st->next) {
        if (st->answered) continue;
        const cJSON *id;
        cJSON_ArrayForEach(id, st->ids) if (cJSON_Compare(id, related, true)) return st;
    }
    return NULL;
}

void mcp__http_session_header(const mcp__hsess_t *se, char *buf, size_t size)
{
    if (se->stateless)
        buf[0] = '\0';
    else
        snprintf(buf, size, "Mcp-Session-Id: %s\r\n", se->id);
}

/* A stateless session is done: it ends from a fresh loop turn (we may be inside it here). */
void mcp__http_stateless_done(mcp__hsess_t *se)
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

void mcp__http_primer(mcp__hstream_t *st, uint64_t after)
{
    const char *pv = mcp_session_protocol(st->sess->s);
    if (st->sess->legacy || pv == NULL || mcp_protocol_cmp(pv, PRIMING_PROTOCOL) < 0) return;
    char id[48];
    snprintf(id, sizeof id, "%llu_%llu", (unsigned long long)st->num, (unsigned long long)after);
    size_t n = 0;
    char *ev = mcp__sse_format(id, NULL, SSE_RETRY_MS, "", 0, &n);
    if (ev == NULL) return;
    mcp__http_stream_write(st, ev, n);
    free(ev);
}

/* Resumes a stream on connection c from the events after `after`. */
void mcp__http_attach(mcp__hsess_t *se, mcp__hstream_t *st, mcp__hconn_t *c, uint64_t after)
{
    if (st->conn != NULL && st->conn != c) {
        /* A client resuming a stream is done with the old connection. */
        mcp__hconn_t *old = st->conn;
        st->conn = NULL;
        mcp__hconn_stream_end(old);
    }
    char h[96];
    mcp__http_session_header(se, h, sizeof h);
    st->conn = c;
    mcp__hconn_stream_begin(c, h, st);
    mcp__http_primer(st, after);
    for (mcp__hev_t *e = st->head; e != NULL && st->conn != NULL; e = e->next)
        if (e->seq > after) mcp__http_stream_write(st, e->data, e->len);
    if (st->conn == NULL) return;
    st->sent_seq = st->next_seq;
    if (st->answered) {
        st->conn = NULL;
        mcp__hconn_stream_end(c);
        stream_free(st);
    }
}

/* --- the session's transport -------------------------------------------------------------- */

static int sess_send(void *tdata, const char *json, size_t len, const cJSON *related, bool answer)
{
    mcp__hsess_t *se = tdata;
    if (se->ended && !se->draining) return MCP_OK; /* nobody can receive it any more */
    se->last_active_ms = mcp__now_ms();
    mcp__hstream_t *st = related != NULL ? mcp__http_find_stream(se, related) : NULL;
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
        if (se->stateless) mcp__http_stateless_done(se);
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
            mcp__http_session_header(se, h, sizeof h);
            mcp__hconn_respond(c, se->stateless ? stateless_status(json, len) : 200,
                               "application/json", h, json, len);
        }
        stream_free(st);
        if (se->stateless) mcp__http_stateless_done(se);
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
            if (se->stateless) mcp__http_stateless_done(se);
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

mcp__hsess_t *mcp__http_sess_new(mcp_http_server_t *hs, bool legacy)
{
    mcp__hsess_t *se = calloc(1, sizeof *se);
    if (se == NULL) return NULL;
    se->hs = hs;
    se->legacy = legacy;
    unsigned char raw[MCP__HTTP_SESSION_ID_BYTES];
    if (mbedtls_ctr_drbg_random(&hs->drbg, raw, sizeof raw) != 0) {
        free(se);
        return NULL;
    }
    mcp__hex(raw, sizeof raw, se->id);
    se->get = mcp__http_stream_new(se, true, true);
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

mcp__hsess_t *mcp__http_sess_find(mcp_http_server_t *hs, const char *id)
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

void mcp__http_end_session(mcp__hsess_t *se, bool cancel_now, bool drain)
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
            mcp__http_end_session(se, true, false);
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
        mcp__http_end_session(hs->sessions, cancel_now, true);
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
        mcp__http_stateless_done(se);
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
                        mcp__http_stream_write(st, ": keep-alive\n\n", 14);
                } else if (st->answered && now - st->done_ms > RETAIN_MS) {
                    stream_free(st);
                }
            }
        }
        if (!live && now - se->last_active_ms > hs->o.session_idle_ms) {
            mcp_log(hs->lg, MCP_LOG_INFO, "http: session idle for %u s; ending it",
                    hs->o.session_idle_ms / 1000);
            mcp__http_end_session(se, true, false);
        }
    }
}

/* True when the session may take one more (the limit is reached: the session idle the longest,
 * with no open stream and nothing in flight, makes room; clients rarely DELETE). */
bool mcp__http_room_for_session(mcp_http_server_t *hs)
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
    mcp__http_end_session(oldest, true, false);
    return true;
}
