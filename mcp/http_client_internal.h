/*
 * http_client_internal.h - what the files of the outbound HTTP(S) client share: http_client.c
 * (the client, starting, finishing and tearing down requests), http_client_conn.c (DNS,
 * connecting, reading, writing, timeouts), http_client_response.c (parsing the response) and
 * http_client_tls.c (mbedTLS over memory BIOs, the CA bundle). Not part of the API (mcp.h).
 */
#ifndef PTC_MCP_HTTP_CLIENT_INTERNAL_H
#define PTC_MCP_HTTP_CLIENT_INTERNAL_H

#include "http_internal.h"
#include "mcp.h"

#include <http_parser.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

/* Bytes per socket read; also the most ciphertext handed to mbedTLS at once. */
#define MCP_HTTP_READ_CHUNK (64 * 1024)
/* Response header values we keep (Content-Type, Location); longer ones are a protocol error. */
#define MCP_HTTP_MAX_KEPT_VALUE 8192
/* Size of the error message handed to callbacks. */
#define MCP_HTTP_MSG 768

/* A growable byte buffer with a hard cap (one spare byte is kept for a terminating NUL). */
typedef struct mcp__hbuf {
    char *p;
    size_t len, cap, max;
} mcp__hbuf_t;

struct mcp_http_client {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    unsigned connect_timeout_ms, total_timeout_ms;
    size_t max_response_bytes;
    bool have_ca;         /* a CA bundle was loaded: https is possible */
    bool freeing;         /* mcp_http_client_free is cancelling the requests */
    mcp_http_req_t *reqs; /* in flight, doubly linked */
    size_t n_reqs;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_x509_crt ca;
    mbedtls_ssl_config conf;
};

typedef enum mcp__hdr_kind {
    MCP__HDR_OTHER = 0,
    MCP__HDR_CONTENT_TYPE,
    MCP__HDR_LOCATION,
    MCP__HDR_SESSION
} mcp__hdr_kind_t;

struct mcp_http_req {
    mcp_http_client_t *client; /* NULL once finished */
    mcp_http_req_t *prev, *next;
    mcp_http_cb cb;
    void *data;
    bool done; /* the callback has run (or the request was abandoned before starting) */

    mcp__http_url_t url;
    char where[MCP__HTTP_MAX_HOST + 16]; /* "host:port" for messages */
    unsigned connect_timeout_ms, total_timeout_ms;
    bool head;           /* HEAD: the response has no body whatever its headers say */
    mcp__hbuf_t request; /* the request bytes until they are handed to the socket or to TLS */
    mcp__hbuf_t out;     /* ciphertext queued by mbedTLS, flushed after each TLS call */

    /* libuv state. Every initialised handle counts in open_handles until its close callback;
     * the request is freed when nothing is open and no lookup is pending. */
    uv_getaddrinfo_t gai;
    bool gai_pending;
    struct addrinfo *addrs, *cur_addr;
    int tried, last_connect_err;
    uv_tcp_t tcp;
    bool tcp_open;
    uv_connect_t conn;
    uv_timer_t connect_timer, total_timer;
    int open_handles;
    char *rbuf; /* MCP_HTTP_READ_CHUNK bytes for uv_read */

    /* TLS over memory BIOs: recv takes from the chunk just read, send appends to out. */
    mbedtls_ssl_context ssl;
    bool ssl_inited, handshake_done;
    const char *tls_in;
    size_t tls_in_len;
    bool eof;

    /* Response. Bodies go through body_sink so that a streaming consumer (SSE for Streamable
     * HTTP) can later replace the buffering one without touching the parser glue. */
    http_parser parser;
    bool started, complete;
    int status;
    int (*body_sink)(mcp_http_req_t *r, const char *p, size_t n);
    mcp__hbuf_t body, content_type, location, session_id;
    char field[32]; /* the header name being read, enough to recognise the ones we keep */
    size_t field_len;
    bool field_long, in_value;
    mcp__hdr_kind_t cur_hdr;
    int perr; /* error set by a parser callback, with msg */
    char msg[MCP_HTTP_MSG];
};

/* http_client.c */
/* Appends n bytes (and keeps a NUL after them); MCP_ETOOBIG past the cap, MCP_ENOMEM. */
void mcp__hbuf_init(mcp__hbuf_t *b, size_t max);
void mcp__hbuf_free(mcp__hbuf_t *b);
int mcp__hbuf_append(mcp__hbuf_t *b, const void *data, size_t n);
int mcp__hbuf_str(mcp__hbuf_t *b, const char *s);
/* Runs the user callback exactly once and starts the teardown. */
void mcp__http_req_finish(mcp_http_req_t *r, int err, const mcp_http_response_t *resp,
                          const char *msg);
/* Finishes with an error message (formatted into the request's own buffer). */
void mcp__http_req_fail(mcp_http_req_t *r, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Finishes with the parsed response. */
void mcp__http_req_succeed(mcp_http_req_t *r);
/* Frees the request once nothing of it is open or pending any more. */
void mcp__http_req_maybe_free(mcp_http_req_t *r);

/* http_client_conn.c */
/* The timers and the DNS answer that start and bound a request. */
void mcp__http_req_on_connect_timeout(uv_timer_t *t);
void mcp__http_req_on_total_timeout(uv_timer_t *t);
void mcp__http_req_on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res);
/* Hands the ciphertext mbedTLS queued to the socket; false when the request failed. */
bool mcp__http_req_flush_out(mcp_http_req_t *r);

/* http_client_response.c */
/* The body sink that buffers the whole body (up to the response cap). */
int mcp__http_req_buffer_body(mcp_http_req_t *r, const char *at, size_t n);
/* Parses response bytes; the request finishes when the response is complete or bad. */
void mcp__http_req_feed(mcp_http_req_t *r, const char *data, size_t n);
/* The server closed the connection: ends a body read to EOF, or fails. */
void mcp__http_req_on_eof(mcp_http_req_t *r);

/* http_client_tls.c */
/* Starts the TLS handshake on a connected request (fails it without a CA bundle). */
void mcp__http_req_start_tls(mcp_http_req_t *r);
/* Moves TLS along: handshake, then the request out and the response in. */
void mcp__http_req_tls_pump(mcp_http_req_t *r);
/* Loads ca_file, or the first system CA bundle found (none: a warning, https fails later). */
int mcp__http_client_load_ca(mcp_http_client_t *c, const char *ca_file);

#endif /* PTC_MCP_HTTP_CLIENT_INTERNAL_H */
