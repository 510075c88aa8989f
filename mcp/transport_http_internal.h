/*
 * transport_http_internal.h - what the files of the MCP endpoints share: transport_http.c
 * (routing, the Streamable HTTP and legacy HTTP+SSE endpoints), transport_http_sessions.c (HTTP
 * sessions, their response streams and the replay buffers) and transport_http_stateless.c (the
 * 2026-07-28 stateless requests and their header checks). Not part of the public interface.
 */
#ifndef PTC_MCP_TRANSPORT_HTTP_INTERNAL_H
#define PTC_MCP_TRANSPORT_HTTP_INTERNAL_H

#include "http_server_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MCP__HTTP_SESSION_ID_BYTES 16

typedef struct ev {
    struct ev *next;
    uint64_t seq;
    size_t len;
    char *data; /* the formatted SSE event */
} mcp__hev_t;

struct mcp__hstream {
    mcp__hsess_t *sess;
    uint64_t num;       /* 0: the standalone stream */
    mcp__hconn_t *conn; /* the connection carrying it now, or NULL */
    bool sse;           /* event stream (else one JSON answer) */
    bool answered;
    cJSON *ids; /* request ids it answers (POST streams) */
    uint64_t next_seq, sent_seq;
    mcp__hev_t *head, *tail;
    size_t n_ev, ev_bytes;
    uint64_t last_write_ms, done_ms;
    mcp__hstream_t *prev, *next;
};

struct mcp__hsess {
    mcp_http_server_t *hs;
    char id[2 * MCP__HTTP_SESSION_ID_BYTES + 1];
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

/* What a POST body holds; false (answered 400) when it is not JSON-RPC. */
typedef struct mcp__hbody {
    cJSON *msg;
    size_t n_requests;
    bool has_init, wants_stream, is_batch;
} mcp__hbody_t;

/* transport_http_sessions.c: sessions and streams. */
/** A new stream of se: a POST stream (linked into se->streams, numbered) or, standalone, the
 *  session's GET stream; NULL when out of memory. */
mcp__hstream_t *mcp__http_stream_new(mcp__hsess_t *se, bool sse, bool standalone);
/** Writes to the connection carrying st, if any (a failed write forgets the connection). */
void mcp__http_stream_write(mcp__hstream_t *st, const char *data, size_t len);
/** The stream st answers request id `related` (a null id: the POST being dispatched). */
mcp__hstream_t *mcp__http_find_stream(mcp__hsess_t *se, const cJSON *related);
/** The Mcp-Session-Id header line of se ("" for a stateless session) into buf. */
void mcp__http_session_header(const mcp__hsess_t *se, char *buf, size_t size);
/** A stateless session is done: it ends from a fresh loop turn. */
void mcp__http_stateless_done(mcp__hsess_t *se);
/** The priming event (2025-11-25 on) of an SSE stream, its id after sequence number `after`. */
void mcp__http_primer(mcp__hstream_t *st, uint64_t after);
/** Resumes st on connection c from the events after `after` (Last-Event-ID). */
void mcp__http_attach(mcp__hsess_t *se, mcp__hstream_t *st, mcp__hconn_t *c, uint64_t after);
/** A new session with its id and mcp_session_t, counted and linked; NULL on failure. */
mcp__hsess_t *mcp__http_sess_new(mcp_http_server_t *hs, bool legacy);
/** The live session with this id (compared in constant time) or NULL. */
mcp__hsess_t *mcp__http_sess_find(mcp_http_server_t *hs, const char *id);
/** Ends a session: no longer found, its work stopped (cancel_now: at once), drain: answers in
 *  flight still go out. Freed once idle. */
void mcp__http_end_session(mcp__hsess_t *se, bool cancel_now, bool drain);
/** True when the session limit leaves room for one more (ending the idlest if it must). */
bool mcp__http_room_for_session(mcp_http_server_t *hs);

/* transport_http_stateless.c: 2026-07-28. */
/** True when a POST is a stateless request (no session, a 2026-07-28 version or _meta). */
bool mcp__http_is_stateless_post(const mcp__hconn_t *c, const mcp__hbody_t *bi);
/** Serves one stateless POST: a session of its own that ends with the answer. */
void mcp__http_post_stateless(mcp_http_server_t *hs, mcp__hconn_t *c, const mcp__hreq_t *req,
                              const mcp__hbody_t *bi);

#endif /* PTC_MCP_TRANSPORT_HTTP_INTERNAL_H */
