/*
 * http_server_internal.h - the HTTP server's pieces shared between its files (http_server.c,
 * http_conn.c, http_request.c and http_tls.c: the listener, connections and HTTP/1.1;
 * transport_http*.c: the MCP endpoints, whose own shared pieces are in transport_http_internal.h;
 * http_util.c: pure helpers) and their unit tests. Not part of the public interface (mcp.h).
 */
#ifndef PTC_MCP_HTTP_SERVER_INTERNAL_H
#define PTC_MCP_HTTP_SERVER_INTERNAL_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --- pure helpers (http_util.c) ------------------------------------------------------------ */

/** True if the Accept header value lists media type `type` (exact, case-insensitive; parameters
 *  such as q= are ignored, wildcards do not count). accept may be NULL. */
bool mcp__http_accepts(const char *accept, const char *type);
/** True if a Content-Type value's media type is `type` (case-insensitive, parameters ignored). */
bool mcp__http_media_is(const char *content_type, const char *type);
/** Compares two byte strings in time that depends only on their lengths. */
bool mcp__http_secret_equal(const char *a, size_t alen, const char *b, size_t blen);
/** True for "localhost", 127.0.0.0/8 and ::1 (IPv6 without brackets). */
bool mcp__http_is_loopback(const char *host);
/**
 * DNS-rebinding checks. A Host header is allowed when its name is the listen host, localhost,
 * 127.0.0.1 or [::1] (case-insensitive) and its port, if written, is the bound port; host may
 * be NULL (HTTP/1.0): allowed. An Origin must be http(s)://NAME[:PORT] with one of those names
 * (any port: pages of other local programs are local too); "null" and anything else are
 * refused.
 */
bool mcp__http_host_allowed(const char *host_header, const char *listen_host, unsigned port);
bool mcp__http_origin_allowed(const char *origin, const char *listen_host);
/** Copies the value of query parameter `name` of a request target ("/messages?sessionId=x")
 *  into out (no percent-decoding: the values we read are plain tokens). MCP_EINVAL if absent
 *  or longer than size - 1. */
int mcp__http_query_param(const char *target, const char *name, char *out, size_t size);
/** Length of the path part of a request target (up to '?' or '#'). */
size_t mcp__http_path_len(const char *target);
/**
 * Formats one SSE event: "id: ID\n" (when id), "event: EVENT\n" (when event), "retry: N\n"
 * (when retry_ms > 0), one "data: " line per line of data (an empty data gives "data: \n"),
 * then a blank line. Returns a malloc'd buffer (caller frees) and its length, or NULL.
 */
char *mcp__sse_format(const char *id, const char *event, unsigned retry_ms, const char *data,
                      size_t len, size_t *out_len);
/** Lower-case hex of n bytes into out (2n + 1 bytes with the NUL). */
void mcp__hex(const unsigned char *bytes, size_t n, char *out);
/** Parses an SSE event id of ours, "STREAM_SEQ" (decimal); MCP_EINVAL otherwise. */
int mcp__sse_parse_event_id(const char *id, uint64_t *stream, uint64_t *seq);

/* --- the server object, shared by the server's files and transport_http*.c ----------------- */

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

typedef struct mcp__hconn mcp__hconn_t;     /* one TCP (or TLS) connection */
typedef struct mcp__hsess mcp__hsess_t;     /* one HTTP MCP session (transport_http_internal.h) */
typedef struct mcp__hstream mcp__hstream_t; /* one response stream of a session */

struct mcp_http_server {
    mcp_server_t *srv;
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    mcp_http_server_opts_t o; /* string members point at the copies below */
    char *host, *token;
    size_t token_len;
    unsigned char token_digest[MCP__CRED_BYTES]; /* what sessions' identities bind to */
    bool loopback;
    unsigned port;
    char url[300];
    char *read_buf; /* one read buffer: reads are consumed at once on the loop thread */

    uv_tcp_t listener;
    uv_timer_t tick, reap;
    int refs; /* open handles of ours plus connections not yet closed */
    bool listening;

    mcp__hconn_t *conns;
    size_t n_conns;
    mcp__hsess_t *sessions; /* live sessions, found by id */
    size_t n_sessions;
    mcp__hsess_t *ending; /* ended sessions waiting for their work to stop */
    mcp__hsess_t *dead;   /* idle ended sessions, freed by the reap timer */

    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    bool tls;
    mbedtls_ssl_config conf;
    mbedtls_x509_crt cert;
    mbedtls_pk_context key;

    bool stopping, stop_reported, freed;
    void (*done)(mcp_http_server_t *h, void *data);
    void *done_data;
};

/* A parsed request, valid while it is being handled (until its response has begun). */
typedef struct mcp__hreq {
    int method; /* enum http_method */
    const char *target;
    size_t path_len;
    const char *body;
    size_t body_len;
} mcp__hreq_t;

/* http_conn.c: what the endpoints use. */
/** A request header's value (case-insensitive name) or NULL; valid until the response. */
const char *mcp__hconn_header(const mcp__hconn_t *c, const char *name);
/** Writes a whole response; extra_headers are complete "Name: value\r\n" lines or NULL.
 *  The connection then reads the next request (or closes). */
void mcp__hconn_respond(mcp__hconn_t *c, int status, const char *content_type,
                        const char *extra_headers, const char *body, size_t len);
/** A JSON-RPC error body {"jsonrpc":"2.0","error":{"code":code,"message":msg},"id":null}. */
void mcp__hconn_error(mcp__hconn_t *c, int status, int code, const char *msg,
                      const char *extra_headers);
/* mcp__hconn_error answering request `id` (borrowed; NULL: null). */
void mcp__hconn_error_id(mcp__hconn_t *c, int status, const cJSON *id, int code, const char *msg,
                         const char *extra_headers);
/** Begins a 200 text/event-stream response (chunked). owner is told of a lost connection
 *  through mcp__http_conn_lost. */
void mcp__hconn_stream_begin(mcp__hconn_t *c, const char *extra_headers, void *owner);
/** Writes bytes to a stream; < 0 when the connection is gone or too far behind (closed). */
int mcp__hconn_stream_write(mcp__hconn_t *c, const char *data, size_t len);
/** Ends a stream response; the connection reads the next request (or closes). */
void mcp__hconn_stream_end(mcp__hconn_t *c);
/** Marks the connection as waiting for an asynchronous answer of owner. */
void mcp__hconn_wait(mcp__hconn_t *c, void *owner);
/** Closes a connection at once (its owner is not told). */
void mcp__hconn_abort(mcp__hconn_t *c);
/** Called by transport_http*.c when a session was freed, so a stop can complete. */
void mcp__http_maybe_done(mcp_http_server_t *hs);

/* The endpoints: mcp__http_route in transport_http.c, the rest in transport_http_sessions.c. */
/** Handles /mcp, /sse and /messages; false when the path is none of them. */
bool mcp__http_route(mcp_http_server_t *hs, mcp__hconn_t *c, const mcp__hreq_t *req);
/** A connection that carried owner's response closed before the response ended. */
void mcp__http_conn_lost(mcp_http_server_t *hs, void *owner);
/** Periodic work: idle sessions expire, quiet streams get a keep-alive comment. */
void mcp__http_tick(mcp_http_server_t *hs, uint64_t now_ms);
/** Ends every session (second call: cancels their calls at once). */
void mcp__http_end_all(mcp_http_server_t *hs, bool cancel_now);
/** Frees every session now (the server is being freed). */
void mcp__http_free_all(mcp_http_server_t *hs);
/** Runs mcp__http_reap (and reports a finished stop) from a fresh loop turn. */
void mcp__http_reap_later(mcp_http_server_t *hs);
/** Frees sessions on the dead list. */
void mcp__http_reap(mcp_http_server_t *hs);

#endif /* PTC_MCP_HTTP_SERVER_INTERNAL_H */
