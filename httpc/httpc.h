/*
 * httpc.h - the outbound HTTP(S) client (libuv + mbedTLS + http-parser): one request at a time
 * per handle, many in flight per client, every size and time bounded. Used by the downstream
 * MCP client for HTTP servers (mcp/), the fallback repairer (repair/) and the remote embedder
 * (registry/). Certificate verification is always on; redirects are refused.
 *
 * - Functions return 0 or a negative ptc_http_err_t; ptc_http_strerror() names it.
 * - Everything runs on the thread of the loop the client was made with; callbacks never run
 *   from inside the function that started the request.
 */
#ifndef PTC_HTTPC_H
#define PTC_HTTPC_H

#include <stddef.h>

#include <uv.h>

#include "base.h"

/* The codes of the HTTP client (base.h's error space): errno values, and extras from
 * PTC_ERR_HTTP down. X(NAME, VALUE, TEXT) */
#define PTC_HTTP_ERRORS(X)                                                                         \
    X(PTC_HTTP_OK, 0, "success")                                                                   \
    X(PTC_HTTP_ENOMEM, -ENOMEM, "out of memory")                                                   \
    X(PTC_HTTP_EINVAL, -EINVAL, "invalid argument or malformed input") /* URL, header ... */       \
    X(PTC_HTTP_ETOOBIG, -E2BIG, "size limit exceeded") /* the response body, the request */        \
    X(PTC_HTTP_EIO, -EIO, "input/output error")        /* a socket read or write failed */         \
    X(PTC_HTTP_ETIMEDOUT, -ETIMEDOUT, "timed out")     /* the connect or the whole request */      \
    X(PTC_HTTP_ECANCELED, -ECANCELED, "cancelled")     /* ptc_http_cancel, ptc_http_client_free */ \
    /* EPIPE: the server closed the connection before the response ended */                        \
    X(PTC_HTTP_ECLOSED, -EPIPE, "connection or object closed")                                     \
    X(PTC_HTTP_EPROTO, -EPROTO, "protocol error from the peer")      /* the server broke HTTP */   \
    X(PTC_HTTP_ECONNECT, -ECONNREFUSED, "connection failed")         /* TCP connect failed */      \
    X(PTC_HTTP_EBUSY, -EBUSY, "too much work in flight")             /* too many requests */       \
    X(PTC_HTTP_ESTATE, -ESHUTDOWN, "not valid in the current state") /* client being freed */      \
    X(PTC_HTTP_ETLS, PTC_ERR_HTTP, "TLS handshake or certificate verification failed")             \
    X(PTC_HTTP_ERESOLVE, PTC_ERR_HTTP - 1, "host name lookup failed")                              \
    X(PTC_HTTP_EREDIRECT, PTC_ERR_HTTP - 2, "redirect refused") /* redirects are refused */

typedef enum ptc_http_err { PTC_HTTP_ERRORS(PTC_ERR_ENUM) } ptc_http_err_t;

/** A static sentence naming any code: the client's own, else ptc_strerror's. */
const char *ptc_http_strerror(int err);

/* Severities of the lines handed to the log hook (syslog's numbers). */
#define PTC_HTTP_LOG_ERROR   3
#define PTC_HTTP_LOG_WARNING 4
#define PTC_HTTP_LOG_DEBUG   7

/* The client's limits (every size it caps, named here: base.h's rule). */
/* Defaults of ptc_http_client_opts_default(). */
#define PTC_HTTP_DEFAULT_CONNECT_MS 10000u
#define PTC_HTTP_DEFAULT_TOTAL_MS   60000u
#define PTC_HTTP_DEFAULT_MAX_BODY   ((size_t)16 * 1024 * 1024)

/* Largest request body accepted from the caller. */
#define PTC_HTTP_MAX_REQUEST_BODY ((size_t)64 * 1024 * 1024)
/* Requests in flight per client; more are refused with PTC_HTTP_EBUSY. */
#define PTC_HTTP_MAX_IN_FLIGHT 256
/* Most caller headers per request, and the longest name and value. */
#define PTC_HTTP_MAX_USER_HEADERS 64
#define PTC_HTTP_MAX_HEADER_NAME  256
#define PTC_HTTP_MAX_HEADER_VALUE 8192
/* Longest method name ("GET", "POST", or an extension token). */
#define PTC_HTTP_MAX_METHOD 32
/* Ciphertext queued for one write; a TLS record adds at most a few hundred bytes. */
#define PTC_HTTP_MAX_TLS_OUT (PTC_HTTP_MAX_REQUEST_BODY + (size_t)1024 * 1024)

/** Receives one log line (no newline) at a syslog severity; line is borrowed. */
typedef void (*ptc_http_log_fn)(void *data, int level, const char *line);

typedef struct ptc_http_client ptc_http_client_t;
typedef struct ptc_http_req ptc_http_req_t;

typedef struct ptc_http_client_opts {
    const char *ca_file;         /* PEM bundle; NULL: the system bundle (found at run time) */
    unsigned connect_timeout_ms; /* DNS + TCP + TLS handshake (default 10000; 0: default) */
    unsigned total_timeout_ms;   /* whole request (default 60000; 0: default) */
    size_t max_response_bytes;   /* body cap (default 16 MiB; 0: default) */
} ptc_http_client_opts_t;

void ptc_http_client_opts_default(ptc_http_client_opts_t *opts);
/**
 * Creates a client: loads the CA bundle once (a blocking file read: call it at start-up).
 * Borrows loop and log_data (log may be NULL: nothing is logged); opts may be NULL (defaults) and
 * its strings are not kept. An unreadable opts->ca_file fails with PTC_HTTP_EINVAL (logged); a
 * missing system bundle only makes https requests fail with PTC_HTTP_ETLS. *out is set on 0.
 */
int ptc_http_client_new(uv_loop_t *loop, const ptc_http_client_opts_t *opts, ptc_http_log_fn log,
                        void *log_data, ptc_http_client_t **out);
/**
 * Frees the client; requests in flight are cancelled (their callbacks run with ECANCELED before
 * this returns). May be called from an HTTP callback. Their handles close on the next loop
 * turns, so run the loop once more before uv_loop_close.
 */
void ptc_http_client_free(ptc_http_client_t *c);

typedef struct ptc_http_response {
    int status;       /* HTTP status code */
    const char *body; /* NUL-terminated copy of the body (may contain NULs before it) */
    size_t body_len;
    const char *content_type; /* may be NULL */
    const char *session_id;   /* the Mcp-Session-Id header (Streamable HTTP), or NULL */
} ptc_http_response_t;

/**
 * Called once. On err < 0, resp is NULL and message says what failed (PTC_HTTP_ERESOLVE,
 * PTC_HTTP_ECONNECT, PTC_HTTP_ETLS, PTC_HTTP_ETIMEDOUT, PTC_HTTP_EREDIRECT naming the target,
 * PTC_HTTP_ETOOBIG, PTC_HTTP_EPROTO, PTC_HTTP_ECLOSED, PTC_HTTP_EIO, PTC_HTTP_ECANCELED); on
 * success message is NULL. resp and message are borrowed (valid during the call). The request
 * handle is gone after the call.
 */
typedef void (*ptc_http_cb)(void *data, int err, const ptc_http_response_t *resp,
                            const char *message);

typedef struct ptc_http_header {
    const char *name, *value;
} ptc_http_header_t;

/**
 * Starts a request: method "GET"/"POST"/... (an HTTP token), url "http://" or "https://"
 * (no user@ part), headers (copied; at most 64, no CR/LF in values; Host, Content-Length,
 * Transfer-Encoding and Connection are written by the client and refused here), body (copied,
 * may be NULL). Every redirect is refused. On error returns < 0 (PTC_HTTP_EINVAL for a bad URL,
 * method or header; PTC_HTTP_EBUSY with 256 requests in flight) and never calls cb. *out (may be
 * NULL) is valid until the callback has run.
 */
int ptc_http_request(ptc_http_client_t *c, const char *method, const char *url,
                     const ptc_http_header_t *headers, size_t n_headers, const char *body,
                     size_t body_len, ptc_http_cb cb, void *data, ptc_http_req_t **out);
/**
 * Receives a streamed response body as it arrives: the response's status and Content-Type (may
 * be NULL), and the next n bytes at p (all borrowed). Returns 0 to go on, < 0 to end the
 * request, whose callback then runs with PTC_HTTP_ECANCELED.
 */
typedef int (*ptc_http_chunk_fn)(void *data, int status, const char *content_type, const char *p,
                                 size_t n);
/**
 * As ptc_http_request, for a response that stays open until either side ends it (a
 * Server-Sent Events stream): the body goes to on_chunk as it arrives instead of being
 * buffered (so no body cap applies, and the response cb gets has an empty body), and no total
 * timeout bounds the request (the connect timeout still does). data goes to both callbacks.
 */
int ptc_http_request_stream(ptc_http_client_t *c, const char *method, const char *url,
                            const ptc_http_header_t *headers, size_t n_headers, const char *body,
                            size_t body_len, ptc_http_chunk_fn on_chunk, ptc_http_cb cb, void *data,
                            ptc_http_req_t **out);
/** Cancels a request; its callback runs with PTC_HTTP_ECANCELED before this returns. Does nothing
 *  if called from the request's own callback. */
void ptc_http_cancel(ptc_http_req_t *r);

#endif /* PTC_HTTPC_H */
