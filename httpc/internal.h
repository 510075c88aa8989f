/*
 * internal.h - what the files of the outbound HTTP(S) client share: client.c (the client,
 * starting, finishing and tearing down requests), conn.c (DNS, connecting, reading, writing,
 * timeouts), response.c (parsing the response) and tls.c (mbedTLS over memory BIOs, the CA
 * bundle). Not part of the API (httpc.h).
 */
#ifndef PTC_HTTPC_INTERNAL_H
#define PTC_HTTPC_INTERNAL_H

#include "base.h"
#include "httpc.h"
#include "url.h"

#include <stdbool.h>

#include <http_parser.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

/* Bytes per socket read; also the most ciphertext handed to mbedTLS at once. */
#define PTC_HTTP_READ_CHUNK (64 * 1024)
/* Response header values we keep (Content-Type, Location); longer ones are a protocol error. */
#define PTC_HTTP_MAX_KEPT_VALUE 8192
/* Size of the error message handed to callbacks. */
#define PTC_HTTP_MSG 768

struct ptc_http_client {
    uv_loop_t *loop;
    ptc_http_log_fn log; /* may be NULL */
    void *log_data;
    unsigned connect_timeout_ms, total_timeout_ms;
    size_t max_response_bytes;
    bool have_ca;         /* a CA bundle was loaded: https is possible */
    bool freeing;         /* ptc_http_client_free is cancelling the requests */
    ptc_http_req_t *reqs; /* in flight, doubly linked */
    size_t n_reqs;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_x509_crt ca;
    mbedtls_ssl_config conf;
};

typedef enum ptc__hdr_kind {
    PTC__HDR_OTHER = 0,
    PTC__HDR_CONTENT_TYPE,
    PTC__HDR_LOCATION,
    PTC__HDR_SESSION
} ptc__hdr_kind_t;

struct ptc_http_req {
    ptc_http_client_t *client; /* NULL once finished */
    ptc_http_req_t *prev, *next;
    ptc_http_cb cb;
    void *data;
    bool done; /* the callback has run (or the request was abandoned before starting) */

    ptc__http_url_t url;
    char where[PTC__HTTP_MAX_HOST + 16]; /* "host:port" for messages */
    unsigned connect_timeout_ms, total_timeout_ms;
    bool head;         /* HEAD: the response has no body whatever its headers say */
    ptc_buf_t request; /* the request bytes until they are handed to the socket or to TLS */
    ptc_buf_t out;     /* ciphertext queued by mbedTLS, flushed after each TLS call */

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
    char *rbuf; /* PTC_HTTP_READ_CHUNK bytes for uv_read */

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
    int (*body_sink)(ptc_http_req_t *r, const char *p, size_t n);
    ptc_http_chunk_fn on_chunk; /* a streamed body's reader (ptc_http_request_stream), or NULL */
    ptc_buf_t body, content_type, location, session_id;
    char field[32]; /* the header name being read, enough to recognise the ones we keep */
    size_t field_len;
    bool field_long, in_value;
    ptc__hdr_kind_t cur_hdr;
    int perr; /* error set by a parser callback, with msg */
    char msg[PTC_HTTP_MSG];
};

/* client.c */
/* Formats one line for the client's log hook (nothing when it has none). */
void ptc__http_log(const ptc_http_client_t *c, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Runs the user callback exactly once and starts the teardown. */
void ptc__http_req_finish(ptc_http_req_t *r, int err, const ptc_http_response_t *resp,
                          const char *msg);
/* Finishes with an error message (formatted into the request's own buffer). */
void ptc__http_req_fail(ptc_http_req_t *r, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Finishes with the parsed response. */
void ptc__http_req_succeed(ptc_http_req_t *r);
/* Frees the request once nothing of it is open or pending any more. */
void ptc__http_req_maybe_free(ptc_http_req_t *r);

/* conn.c */
/* The timers and the DNS answer that start and bound a request. */
void ptc__http_req_on_connect_timeout(uv_timer_t *t);
void ptc__http_req_on_total_timeout(uv_timer_t *t);
void ptc__http_req_on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res);
/* Hands the ciphertext mbedTLS queued to the socket; false when the request failed. */
bool ptc__http_req_flush_out(ptc_http_req_t *r);

/* response.c */
/* The body sink that buffers the whole body (up to the response cap). */
int ptc__http_req_buffer_body(ptc_http_req_t *r, const char *at, size_t n);
/* The body sink of a streamed response: hands every chunk to r->on_chunk. */
int ptc__http_req_stream_body(ptc_http_req_t *r, const char *at, size_t n);
/* Parses response bytes; the request finishes when the response is complete or bad. */
void ptc__http_req_feed(ptc_http_req_t *r, const char *data, size_t n);
/* The server closed the connection: ends a body read to EOF, or fails. */
void ptc__http_req_on_eof(ptc_http_req_t *r);

/* tls.c */
/* Starts the TLS handshake on a connected request (fails it without a CA bundle). */
void ptc__http_req_start_tls(ptc_http_req_t *r);
/* Moves TLS along: handshake, then the request out and the response in. */
void ptc__http_req_tls_pump(ptc_http_req_t *r);
/* Loads ca_file, or the first system CA bundle found (none: a warning, https fails later). */
int ptc__http_client_load_ca(ptc_http_client_t *c, const char *ca_file);

#endif /* PTC_HTTPC_INTERNAL_H */
