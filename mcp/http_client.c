/*
 * http_client.c - the outbound HTTP(S)/1.1 client: libuv for DNS, TCP and timers, mbedTLS over
 * memory BIOs for TLS, http-parser for the response.
 *
 * One request is one connection (Connection: close). Its life:
 *   uv_getaddrinfo -> uv_tcp_connect (each address in turn) -> [TLS handshake] -> write the
 *   request -> read and parse -> finish() -> handles closed -> freed in the last close callback.
 * finish() runs the user callback exactly once and starts the teardown; nothing touches the
 * client after it, so the client may be freed from inside any callback.
 */
#include "http_internal.h"
#include "mcp.h"

#include <http_parser.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/ssl.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crt.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if MBEDTLS_VERSION_NUMBER >= 0x03000000 && defined(MBEDTLS_PSA_CRYPTO_C)
#include <psa/crypto.h>
#define MCP__HTTP_NEED_PSA 1
#else
#define MCP__HTTP_NEED_PSA 0
#endif

/* Defaults of mcp_http_client_opts_default(). */
#define MCP_HTTP_DEFAULT_CONNECT_MS 10000u
#define MCP_HTTP_DEFAULT_TOTAL_MS   60000u
#define MCP_HTTP_DEFAULT_MAX_BODY   ((size_t)16 * 1024 * 1024)

/* Largest request body accepted from the caller. */
#define MCP_HTTP_MAX_REQUEST_BODY ((size_t)64 * 1024 * 1024)
/* Requests in flight per client; more are refused with MCP_EBUSY. */
#define MCP_HTTP_MAX_IN_FLIGHT 256
/* Most caller headers per request, and the longest name and value. */
#define MCP_HTTP_MAX_USER_HEADERS 64
#define MCP_HTTP_MAX_HEADER_NAME  256
#define MCP_HTTP_MAX_HEADER_VALUE 8192
/* Longest method name ("GET", "POST", or an extension token). */
#define MCP_HTTP_MAX_METHOD 32
/* Response header values we keep (Content-Type, Location); longer ones are a protocol error. */
#define MCP_HTTP_MAX_KEPT_VALUE 8192
/* Bytes per socket read; also the most ciphertext handed to mbedTLS at once. */
#define MCP_HTTP_READ_CHUNK (64 * 1024)
/* Plaintext bytes taken out of mbedTLS per mbedtls_ssl_read(). */
#define MCP_HTTP_PLAIN_CHUNK (16 * 1024)
/* Ciphertext queued for one write; a TLS record adds at most a few hundred bytes. */
#define MCP_HTTP_MAX_TLS_OUT (MCP_HTTP_MAX_REQUEST_BODY + (size_t)1024 * 1024)
/* Size of the error message handed to callbacks. */
#define MCP_HTTP_MSG 768

/* Where distributions keep the system CA bundle; the first readable one is used. */
static const char *const system_ca_files[] = {
    "/etc/ssl/certs/ca-certificates.crt",                /* Debian, Ubuntu, Arch, Gentoo */
    "/etc/pki/tls/certs/ca-bundle.crt",                  /* Fedora, RHEL, CentOS */
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", /* RHEL 7+ */
    "/etc/ssl/ca-bundle.pem",                            /* openSUSE */
    "/etc/ssl/cert.pem",                                 /* Alpine, macOS, OpenBSD */
    "/usr/local/share/certs/ca-root-nss.crt",            /* FreeBSD */
};

/* A growable byte buffer with a hard cap (one spare byte is kept for a terminating NUL). */
typedef struct hbuf {
    char *p;
    size_t len, cap, max;
} hbuf_t;

static void hbuf_init(hbuf_t *b, size_t max)
{
    b->p = NULL;
    b->len = b->cap = 0;
    b->max = max;
}

static void hbuf_free(hbuf_t *b)
{
    free(b->p);
    hbuf_init(b, b->max);
}

static int hbuf_append(hbuf_t *b, const void *data, size_t n)
{
    if (n > b->max - b->len) return MCP_ETOOBIG;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
        if (cap > b->max + 1) cap = b->max + 1;
        char *p = realloc(b->p, cap);
        if (p == NULL) return MCP_ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    if (n > 0) memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return MCP_OK;
}

static int hbuf_str(hbuf_t *b, const char *s)
{
    return hbuf_append(b, s, strlen(s));
}

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

typedef enum hdr_kind { HDR_OTHER = 0, HDR_CONTENT_TYPE, HDR_LOCATION, HDR_SESSION } hdr_kind_t;

struct mcp_http_req {
    mcp_http_client_t *client; /* NULL once finished */
    mcp_http_req_t *prev, *next;
    mcp_http_cb cb;
    void *data;
    bool done; /* the callback has run (or the request was abandoned before starting) */

    mcp__http_url_t url;
    char where[MCP__HTTP_MAX_HOST + 16]; /* "host:port" for messages */
    unsigned connect_timeout_ms, total_timeout_ms;
    bool head;      /* HEAD: the response has no body whatever its headers say */
    hbuf_t request; /* the request bytes until they are handed to the socket or to TLS */
    hbuf_t out;     /* ciphertext queued by mbedTLS, flushed after each TLS call */

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
    hbuf_t body, content_type, location, session_id;
    char field[32]; /* the header name being read, enough to recognise the ones we keep */
    size_t field_len;
    bool field_long, in_value;
    hdr_kind_t cur_hdr;
    int perr; /* error set by a parser callback, with msg */
    char msg[MCP_HTTP_MSG];
};

typedef struct write_req {
    uv_write_t w;
    mcp_http_req_t *r;
    char *bytes; /* owned */
} write_req_t;

static void finish(mcp_http_req_t *r, int err, const mcp_http_response_t *resp, const char *msg);

/* ---------------------------------------------------------------------------------------- */
/* Teardown                                                                                  */

static void maybe_free(mcp_http_req_t *r)
{
    if (!r->done || r->open_handles > 0 || r->gai_pending) return;
    if (r->addrs != NULL) uv_freeaddrinfo(r->addrs);
    mcp__http_url_free(&r->url);
    hbuf_free(&r->request);
    hbuf_free(&r->out);
    hbuf_free(&r->body);
    hbuf_free(&r->content_type);
    hbuf_free(&r->location);
    hbuf_free(&r->session_id);
    free(r->rbuf);
    free(r);
}

static void on_handle_closed(uv_handle_t *h)
{
    mcp_http_req_t *r = h->data;
    if (h == (uv_handle_t *)&r->tcp) r->tcp_open = false;
    r->open_handles--;
    maybe_free(r);
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h)) uv_close(h, on_handle_closed);
}

static void unlink_req(mcp_http_req_t *r)
{
    mcp_http_client_t *c = r->client;
    if (c == NULL) return;
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        c->reqs = r->next;
    if (r->next != NULL) r->next->prev = r->prev;
    r->prev = r->next = NULL;
    c->n_reqs--;
    r->client = NULL;
}

/* Stops everything the request has going; memory goes in the last close callback. */
static void teardown(mcp_http_req_t *r)
{
    r->done = true;
    unlink_req(r);
    /* The TLS context points at the client's config, which may be freed by the callback. */
    if (r->ssl_inited) {
        mbedtls_ssl_free(&r->ssl);
        r->ssl_inited = false;
    }
    close_handle((uv_handle_t *)&r->connect_timer);
    close_handle((uv_handle_t *)&r->total_timer);
    if (r->tcp_open) close_handle((uv_handle_t *)&r->tcp);
    if (r->gai_pending) uv_cancel((uv_req_t *)&r->gai); /* a running lookup still calls back */
}

static void finish(mcp_http_req_t *r, int err, const mcp_http_response_t *resp, const char *msg)
{
    if (r->done) return;
    const mcp_logger_t *lg = r->client ? r->client->lg : NULL;
    if (err < 0)
        mcp_log(lg, MCP_LOG_DEBUG, "http %s: %s: %s", r->where, mcp_strerror(err), msg);
    else
        mcp_log(lg, MCP_LOG_DEBUG, "http %s: status %d, %zu body bytes", r->where, resp->status,
                resp->body_len);
    teardown(r);
    /* Close callbacks only run on a later loop turn, so r outlives the callback. */
    r->cb(r->data, err, err < 0 ? NULL : resp, err < 0 ? msg : NULL);
    maybe_free(r);
}

static void fail(mcp_http_req_t *r, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(mcp_http_req_t *r, int err, const char *fmt, ...)
{
    if (r->done) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    finish(r, err, NULL, r->msg);
}

static void succeed(mcp_http_req_t *r)
{
    if (r->body.p == NULL && hbuf_append(&r->body, "", 0) < 0) {
        fail(r, MCP_ENOMEM, "out of memory while finishing the response from %s", r->where);
        return;
    }
    mcp_http_response_t resp = {
        .status = r->status,
        .body = r->body.p,
        .body_len = r->body.len,
        .content_type = r->content_type.p,
        .session_id = r->session_id.p,
    };
    finish(r, MCP_OK, &resp, NULL);
}

/* ---------------------------------------------------------------------------------------- */
/* Response parsing (http-parser callbacks)                                                  */

static mcp_http_req_t *req_of(http_parser *p)
{
    return p->data;
}

static int on_message_begin(http_parser *p)
{
    mcp_http_req_t *r = req_of(p);
    r->started = true;
    r->status = 0;
    r->body.len = 0;
    hbuf_free(&r->content_type);
    hbuf_free(&r->location);
    hbuf_free(&r->session_id);
    r->field_len = 0;
    r->field_long = false;
    r->in_value = false;
    r->cur_hdr = HDR_OTHER;
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    mcp_http_req_t *r = req_of(p);
    if (r->in_value) { /* a new header begins */
        r->in_value = false;
        r->field_len = 0;
        r->field_long = false;
    }
    if (n >= sizeof r->field - r->field_len) {
        r->field_long = true;
        return 0;
    }
    memcpy(r->field + r->field_len, at, n);
    r->field_len += n;
    return 0;
}

/* The buffer keeping the current header's value, or NULL for headers we skip. */
static hbuf_t *kept_value(mcp_http_req_t *r)
{
    switch (r->cur_hdr) {
    case HDR_CONTENT_TYPE:
        return &r->content_type;
    case HDR_LOCATION:
        return &r->location;
    case HDR_SESSION:
        return &r->session_id;
    case HDR_OTHER:
        break;
    }
    return NULL;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    mcp_http_req_t *r = req_of(p);
    if (!r->in_value) {
        r->in_value = true;
        r->field[r->field_len] = '\0';
        r->cur_hdr = HDR_OTHER;
        if (!r->field_long && strcasecmp(r->field, "content-type") == 0)
            r->cur_hdr = HDR_CONTENT_TYPE;
        else if (!r->field_long && strcasecmp(r->field, "location") == 0)
            r->cur_hdr = HDR_LOCATION;
        else if (!r->field_long && strcasecmp(r->field, "mcp-session-id") == 0)
            r->cur_hdr = HDR_SESSION;
        hbuf_t *b = kept_value(r);
        if (b != NULL) hbuf_free(b); /* a repeated header: the last one wins */
    }
    hbuf_t *b = kept_value(r);
    if (b == NULL) return 0;
    int rc = hbuf_append(b, at, n);
    if (rc < 0) {
        r->perr = rc == MCP_ETOOBIG ? MCP_EPROTO : rc;
        snprintf(r->msg, sizeof r->msg, "%s sent a %s header longer than %d bytes", r->where,
                 r->cur_hdr == HDR_LOCATION  ? "Location"
                 : r->cur_hdr == HDR_SESSION ? "Mcp-Session-Id"
                                             : "Content-Type",
                 MCP_HTTP_MAX_KEPT_VALUE);
        return -1;
    }
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    mcp_http_req_t *r = req_of(p);
    r->status = (int)p->status_code;
    if (r->status >= 300 && r->status < 400 && r->location.p != NULL) {
        r->perr = MCP_EREDIRECT;
        snprintf(r->msg, sizeof r->msg,
                 "%s answered %d, a redirect to '%.300s'; redirects are refused: use the final "
                 "URL instead",
                 r->where, r->status, r->location.p);
        return -1;
    }
    size_t cap = r->body.max;
    /* content_length is ULLONG_MAX when the header is absent. */
    if (p->content_length != ULLONG_MAX && p->content_length > (unsigned long long)cap) {
        r->perr = MCP_ETOOBIG;
        snprintf(r->msg, sizeof r->msg,
                 "%s announced a %llu-byte response body, over the cap of %zu bytes", r->where,
                 (unsigned long long)p->content_length, cap);
        return -1;
    }
    return r->head ? 1 : 0; /* 1: no body follows */
}

static int buffer_body(mcp_http_req_t *r, const char *at, size_t n)
{
    int rc = hbuf_append(&r->body, at, n);
    if (rc == MCP_ETOOBIG) {
        r->perr = rc;
        snprintf(r->msg, sizeof r->msg, "the response body from %s is over the cap of %zu bytes",
                 r->where, r->body.max);
    } else if (rc < 0) {
        r->perr = rc;
        snprintf(r->msg, sizeof r->msg, "out of memory buffering the response from %s", r->where);
    }
    return rc;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    mcp_http_req_t *r = req_of(p);
    return r->body_sink(r, at, n) < 0 ? -1 : 0;
}

static int on_message_complete(http_parser *p)
{
    mcp_http_req_t *r = req_of(p);
    /* An interim 1xx answer (100 Continue) is followed by the real one. */
    if (r->status >= 100 && r->status < 200 && r->status != 101) return 0;
    r->complete = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* Feeds response bytes (plaintext); n == 0 reports the end of the stream. */
static void feed(mcp_http_req_t *r, const char *data, size_t n)
{
    size_t used = http_parser_execute(&r->parser, &parser_settings, data, n);
    if (r->done) return;
    if (r->complete) {
        succeed(r);
        return;
    }
    if (r->perr < 0) {
        finish(r, r->perr, NULL, r->msg);
        return;
    }
    enum http_errno e = HTTP_PARSER_ERRNO(&r->parser);
    if (e != HPE_OK || used != n) {
        fail(r, MCP_EPROTO, "malformed HTTP response from %s: %s (%s)", r->where,
             http_errno_description(e), http_errno_name(e));
    }
}

static void on_eof(mcp_http_req_t *r)
{
    if (!r->started) {
        fail(r, MCP_ECLOSED, "%s closed the connection without answering", r->where);
        return;
    }
    /* An empty read tells http-parser the stream ended: that completes a body that runs until
     * the close, and is an error for any other unfinished message. */
    http_parser_execute(&r->parser, &parser_settings, NULL, 0);
    if (r->done) return;
    if (r->complete) {
        succeed(r);
        return;
    }
    if (r->perr < 0) {
        finish(r, r->perr, NULL, r->msg);
        return;
    }
    fail(r, MCP_EPROTO, "%s closed the connection before the response was complete", r->where);
}

/* ---------------------------------------------------------------------------------------- */
/* Writing                                                                                   */

static void on_written(uv_write_t *w, int status)
{
    write_req_t *wr = (write_req_t *)w;
    mcp_http_req_t *r = wr->r;
    free(wr->bytes);
    free(wr);
    /* A server may answer and close before reading all of a request; the answer counts. */
    if (status < 0 && status != UV_ECANCELED && !r->done && !r->started)
        fail(r, MCP_EIO, "sending the request to %s failed: %s", r->where, uv_strerror(status));
}

/* Hands the bytes of b to libuv (the write request takes the buffer; b is left empty). */
static int write_buf(mcp_http_req_t *r, hbuf_t *b)
{
    if (b->len == 0) return MCP_OK;
    write_req_t *wr = calloc(1, sizeof *wr);
    if (wr == NULL) return MCP_ENOMEM;
    wr->r = r;
    wr->bytes = b->p;
    uv_buf_t ub = uv_buf_init(b->p, (unsigned)b->len);
    hbuf_init(b, b->max);
    int rc = uv_write(&wr->w, (uv_stream_t *)&r->tcp, &ub, 1, on_written);
    if (rc < 0) {
        free(wr->bytes);
        free(wr);
        return rc;
    }
    return MCP_OK;
}

/* Sends what mbedTLS queued; false (and the request failed) if that went wrong. */
static bool flush_out(mcp_http_req_t *r)
{
    int rc = write_buf(r, &r->out);
    if (rc < 0)
        fail(r, MCP_EIO, "sending to %s failed: %s", r->where,
             rc == MCP_ENOMEM ? "out of memory" : uv_strerror(rc));
    return rc == MCP_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* TLS                                                                                       */

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    mcp_http_req_t *r = ctx;
    return hbuf_append(&r->out, buf, len) < 0 ? MBEDTLS_ERR_SSL_ALLOC_FAILED : (int)len;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    mcp_http_req_t *r = ctx;
    if (r->tls_in_len == 0) return r->eof ? 0 : MBEDTLS_ERR_SSL_WANT_READ;
    size_t n = len < r->tls_in_len ? len : r->tls_in_len;
    memcpy(buf, r->tls_in, n);
    r->tls_in += n;
    r->tls_in_len -= n;
    return (int)n;
}

static bool tls_retry(int ret)
{
    if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE) return true;
#ifdef MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET
    if (ret == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET) return true;
#endif
    return false;
}

static void tls_fail(mcp_http_req_t *r, int ret)
{
    char err[200];
    mbedtls_strerror(ret, err, sizeof err);
    uint32_t flags = r->ssl_inited ? mbedtls_ssl_get_verify_result(&r->ssl) : 0;
    if (ret == MBEDTLS_ERR_SSL_CONN_EOF || (r->eof && (ret == 0 || tls_retry(ret)))) {
        fail(r, MCP_ETLS, "%s closed the connection during the TLS handshake", r->where);
    } else if (flags != 0 && flags != (uint32_t)-1) {
        char info[400];
        int n = mbedtls_x509_crt_verify_info(info, sizeof info, "", flags);
        if (n < 0) n = 0;
        /* verify_info writes one line per reason; join them. */
        for (int i = 0; i < n && info[i]; i++)
            if (info[i] == '\n') info[i] = (i + 1 < n && info[i + 1]) ? ';' : '\0';
        fail(r, MCP_ETLS,
             "TLS handshake with %s failed: %s (certificate rejected: %s); check the host name, "
             "or pass --ca-file if the server uses a private CA",
             r->where, err, info);
    } else {
        fail(r, MCP_ETLS, "TLS handshake with %s failed: %s (-0x%04x)", r->where, err,
             (unsigned)-ret);
    }
}

/* Writes the whole request through TLS (the memory BIO never blocks), then drops it. */
static int tls_write_request(mcp_http_req_t *r)
{
    size_t off = 0;
    while (off < r->request.len) {
        int n = mbedtls_ssl_write(&r->ssl, (const unsigned char *)r->request.p + off,
                                  r->request.len - off);
        if (n < 0) return n;
        off += (size_t)n;
    }
    hbuf_free(&r->request);
    return 0;
}

/* Runs the TLS state machine over the ciphertext in tls_in (all of it is consumed). */
static void tls_pump(mcp_http_req_t *r)
{
    if (!r->handshake_done) {
        int ret = mbedtls_ssl_handshake(&r->ssl);
        if (!flush_out(r)) return;
        if (ret != 0 && tls_retry(ret) && !r->eof) return;
        if (ret != 0) {
            tls_fail(r, ret);
            return;
        }
        r->handshake_done = true;
        uv_timer_stop(&r->connect_timer);
        ret = tls_write_request(r);
        if (ret != 0) {
            tls_fail(r, ret);
            return;
        }
        if (!flush_out(r)) return;
    }
    for (;;) {
        unsigned char plain[MCP_HTTP_PLAIN_CHUNK];
        int n = mbedtls_ssl_read(&r->ssl, plain, sizeof plain);
        if (n > 0) {
            feed(r, (const char *)plain, (size_t)n);
            if (r->done) return;
            continue;
        }
        if (n == 0 || n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || n == MBEDTLS_ERR_SSL_CONN_EOF) {
            on_eof(r);
            return;
        }
        if (tls_retry(n)) {
            if (r->tls_in_len > 0) continue;
            break;
        }
        char err[200];
        mbedtls_strerror(n, err, sizeof err);
        fail(r, MCP_ETLS, "TLS error reading from %s: %s (-0x%04x)", r->where, err, (unsigned)-n);
        return;
    }
    /* Reading may have produced records to send (alerts, key updates). */
    flush_out(r);
}

/* ---------------------------------------------------------------------------------------- */
/* Connection                                                                                */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    mcp_http_req_t *r = h->data;
    *buf = uv_buf_init(r->rbuf, MCP_HTTP_READ_CHUNK);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    mcp_http_req_t *r = s->data;
    if (r->done || nread == 0) return;
    if (nread < 0 && nread != UV_EOF) {
        fail(r, MCP_EIO, "reading the response from %s failed: %s", r->where,
             uv_strerror((int)nread));
        return;
    }
    if (nread == UV_EOF) r->eof = true;
    if (r->url.tls) {
        r->tls_in = nread > 0 ? buf->base : NULL;
        r->tls_in_len = nread > 0 ? (size_t)nread : 0;
        tls_pump(r);
        r->tls_in_len = 0;
    } else if (nread == UV_EOF) {
        on_eof(r);
    } else {
        feed(r, buf->base, (size_t)nread);
    }
}

static void try_connect(mcp_http_req_t *r);

static void on_retry_closed(uv_handle_t *h)
{
    mcp_http_req_t *r = h->data;
    r->tcp_open = false;
    r->open_handles--;
    if (r->done)
        maybe_free(r);
    else
        try_connect(r);
}

static void next_address(mcp_http_req_t *r, int err)
{
    r->last_connect_err = err;
    r->cur_addr = r->cur_addr->ai_next;
    /* The handle cannot be reused after a failed connect; a fresh one follows its close. */
    uv_close((uv_handle_t *)&r->tcp, on_retry_closed);
}

static void start_tls(mcp_http_req_t *r);

static void on_connect(uv_connect_t *cr, int status)
{
    mcp_http_req_t *r = cr->data;
    if (r->done) return; /* the handle is closing; this is its UV_ECANCELED */
    if (status < 0) {
        next_address(r, status);
        return;
    }
    int rc = uv_read_start((uv_stream_t *)&r->tcp, on_alloc, on_read);
    if (rc < 0) {
        fail(r, MCP_EIO, "reading from %s failed: %s", r->where, uv_strerror(rc));
        return;
    }
    if (r->url.tls) {
        start_tls(r);
        return;
    }
    uv_timer_stop(&r->connect_timer);
    rc = write_buf(r, &r->request);
    if (rc < 0)
        fail(r, MCP_EIO, "sending the request to %s failed: %s", r->where,
             rc == MCP_ENOMEM ? "out of memory" : uv_strerror(rc));
}

static void start_tls(mcp_http_req_t *r)
{
    mcp_http_client_t *c = r->client;
    if (!c->have_ca) {
        fail(r, MCP_ETLS, "cannot verify %s: no CA bundle was found on this system; pass --ca-file",
             r->where);
        return;
    }
    mbedtls_ssl_init(&r->ssl);
    r->ssl_inited = true;
    int ret = mbedtls_ssl_setup(&r->ssl, &c->conf);
    if (ret == 0) ret = mbedtls_ssl_set_hostname(&r->ssl, r->url.host); /* SNI + name check */
    if (ret != 0) {
        tls_fail(r, ret);
        return;
    }
    mbedtls_ssl_set_bio(&r->ssl, r, bio_send, bio_recv, NULL);
    r->tls_in_len = 0;
    tls_pump(r); /* sends the ClientHello */
}

static void try_connect(mcp_http_req_t *r)
{
    mcp_http_client_t *c = r->client;
    if (r->cur_addr == NULL) {
        fail(r, MCP_ECONNECT, "cannot connect to %s: %s (%d address%s tried)", r->where,
             uv_strerror(r->last_connect_err), r->tried, r->tried == 1 ? "" : "es");
        return;
    }
    int rc = uv_tcp_init(c->loop, &r->tcp);
    if (rc < 0) {
        fail(r, MCP_EIO, "cannot create a socket for %s: %s", r->where, uv_strerror(rc));
        return;
    }
    r->tcp.data = r;
    r->tcp_open = true;
    /* Requests and TLS flights are written whole; Nagle would only add a round trip. */
    (void)uv_tcp_nodelay(&r->tcp, 1);
    r->open_handles++;
    r->tried++;
    r->conn.data = r;
    rc = uv_tcp_connect(&r->conn, &r->tcp, r->cur_addr->ai_addr, on_connect);
    if (rc < 0) next_address(r, rc);
}

static void on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
    mcp_http_req_t *r = g->data;
    r->gai_pending = false;
    if (r->done) {
        if (res != NULL) uv_freeaddrinfo(res);
        maybe_free(r);
        return;
    }
    if (status < 0 || res == NULL) {
        if (res != NULL) uv_freeaddrinfo(res);
        fail(r, MCP_ERESOLVE, "cannot resolve host '%s': %s", r->url.host,
             status < 0 ? uv_strerror(status) : "no address");
        return;
    }
    r->addrs = r->cur_addr = res;
    r->last_connect_err = UV_ECONNREFUSED;
    try_connect(r);
}

static void on_connect_timeout(uv_timer_t *t)
{
    mcp_http_req_t *r = t->data;
    fail(r, MCP_ETIMEDOUT,
         "connecting to %s timed out after %u ms (name lookup, TCP and TLS handshake); check "
         "the URL or that the server is up",
         r->where, r->connect_timeout_ms);
}

static void on_total_timeout(uv_timer_t *t)
{
    mcp_http_req_t *r = t->data;
    fail(r, MCP_ETIMEDOUT, "no complete response from %s within %u ms", r->where,
         r->total_timeout_ms);
}

/* ---------------------------------------------------------------------------------------- */
/* Public API                                                                                */

void mcp_http_client_opts_default(mcp_http_client_opts_t *opts)
{
    opts->ca_file = NULL;
    opts->connect_timeout_ms = MCP_HTTP_DEFAULT_CONNECT_MS;
    opts->total_timeout_ms = MCP_HTTP_DEFAULT_TOTAL_MS;
    opts->max_response_bytes = MCP_HTTP_DEFAULT_MAX_BODY;
}

static int load_ca(mcp_http_client_t *c, const char *ca_file)
{
    const char *path = ca_file;
    if (path == NULL) {
        for (size_t i = 0; i < sizeof system_ca_files / sizeof system_ca_files[0]; i++) {
            if (access(system_ca_files[i], R_OK) == 0) {
                path = system_ca_files[i];
                break;
            }
        }
        if (path == NULL) {
            mcp_log(c->lg, MCP_LOG_WARNING,
                    "no system CA bundle found; https requests will fail until --ca-file is "
                    "given");
            return MCP_OK;
        }
    }
    /* A positive result counts certificates that did not parse; the others are usable. */
    int ret = mbedtls_x509_crt_parse_file(&c->ca, path);
    /* For PEM input a negative result means not one certificate parsed. */
    if (ret < 0) {
        char err[200];
        mbedtls_strerror(ret, err, sizeof err);
        mcp_log(c->lg, MCP_LOG_ERROR, "cannot load the CA bundle %s: %s; give a PEM file", path,
                err);
        return ca_file != NULL ? MCP_EINVAL : MCP_OK;
    }
    if (ret > 0)
        mcp_log(c->lg, MCP_LOG_DEBUG, "CA bundle %s: %d certificates skipped (unparsable)", path,
                ret);
    c->have_ca = true;
    return MCP_OK;
}

static void client_destroy(mcp_http_client_t *c)
{
    mbedtls_ssl_config_free(&c->conf);
    mbedtls_x509_crt_free(&c->ca);
    mbedtls_ctr_drbg_free(&c->drbg);
    mbedtls_entropy_free(&c->entropy);
    free(c);
}

int mcp_http_client_new(uv_loop_t *loop, const mcp_http_client_opts_t *opts, const mcp_logger_t *lg,
                        mcp_http_client_t **out)
{
    if (loop == NULL || out == NULL) return MCP_EINVAL;
    mcp_http_client_opts_t def;
    if (opts == NULL) {
        mcp_http_client_opts_default(&def);
        opts = &def;
    }
    mcp_http_client_t *c = calloc(1, sizeof *c);
    if (c == NULL) return MCP_ENOMEM;
    c->loop = loop;
    c->lg = lg;
    c->connect_timeout_ms =
        opts->connect_timeout_ms ? opts->connect_timeout_ms : MCP_HTTP_DEFAULT_CONNECT_MS;
    c->total_timeout_ms =
        opts->total_timeout_ms ? opts->total_timeout_ms : MCP_HTTP_DEFAULT_TOTAL_MS;
    c->max_response_bytes =
        opts->max_response_bytes ? opts->max_response_bytes : MCP_HTTP_DEFAULT_MAX_BODY;
    mbedtls_entropy_init(&c->entropy);
    mbedtls_ctr_drbg_init(&c->drbg);
    mbedtls_x509_crt_init(&c->ca);
    mbedtls_ssl_config_init(&c->conf);

#if MCP__HTTP_NEED_PSA
    /* mbedTLS 3 runs its TLS 1.3 and part of 1.2 through PSA, which needs this first. */
    if (psa_crypto_init() != PSA_SUCCESS) {
        mcp_log(lg, MCP_LOG_ERROR, "cannot initialise mbedTLS's PSA crypto");
        client_destroy(c);
        return MCP_ETLS;
    }
#endif
    static const char pers[] = "ptc-mcp http client";
    int ret = mbedtls_ctr_drbg_seed(&c->drbg, mbedtls_entropy_func, &c->entropy,
                                    (const unsigned char *)pers, sizeof pers - 1);
    if (ret == 0)
        ret = mbedtls_ssl_config_defaults(&c->conf, MBEDTLS_SSL_IS_CLIENT,
                                          MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
    if (ret != 0) {
        char err[200];
        mbedtls_strerror(ret, err, sizeof err);
        mcp_log(lg, MCP_LOG_ERROR, "cannot set up TLS: %s", err);
        client_destroy(c);
        return MCP_ETLS;
    }
    int rc = load_ca(c, opts->ca_file);
    if (rc < 0) {
        client_destroy(c);
        return rc;
    }
    mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
    mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, NULL);
    mbedtls_ssl_conf_rng(&c->conf, mbedtls_ctr_drbg_random, &c->drbg);
#if MBEDTLS_VERSION_NUMBER < 0x03000000
    /* mbedTLS 3 speaks TLS 1.2 and newer only; 2.x must be told. */
    mbedtls_ssl_conf_min_version(&c->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
#endif
    *out = c;
    return MCP_OK;
}

void mcp_http_client_free(mcp_http_client_t *c)
{
    if (c == NULL || c->freeing) return;
    c->freeing = true;
    while (c->reqs != NULL) {
        mcp_http_req_t *r = c->reqs;
        snprintf(r->msg, sizeof r->msg, "request to %s cancelled: the HTTP client was closed",
                 r->where);
        finish(r, MCP_ECANCELED, NULL, r->msg);
    }
    client_destroy(c);
}

void mcp_http_cancel(mcp_http_req_t *r)
{
    if (r == NULL || r->done) return;
    fail(r, MCP_ECANCELED, "request to %s cancelled", r->where);
}

static bool is_tchar(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static bool is_token(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++)
        if (n >= max || !is_tchar(s[n])) return false;
    return n > 0;
}

/* Header names the client writes itself. */
static bool reserved_header(const char *name)
{
    static const char *const names[] = {"host", "content-length", "transfer-encoding",
                                        "connection"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(name, names[i]) == 0) return true;
    return false;
}

static bool has_header(const mcp_http_header_t *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(h[i].name, name) == 0) return true;
    return false;
}

static int check_headers(const mcp_logger_t *lg, const mcp_http_header_t *h, size_t n)
{
    if (n > MCP_HTTP_MAX_USER_HEADERS) {
        mcp_log(lg, MCP_LOG_WARNING, "http: more than %d request headers",
                MCP_HTTP_MAX_USER_HEADERS);
        return MCP_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (h[i].name == NULL || h[i].value == NULL ||
            !is_token(h[i].name, MCP_HTTP_MAX_HEADER_NAME) || reserved_header(h[i].name)) {
            mcp_log(lg, MCP_LOG_WARNING, "http: request header %zu has a bad or reserved name", i);
            return MCP_EINVAL;
        }
        size_t vlen = strlen(h[i].value);
        /* CR or LF in a value would let it inject headers. */
        if (vlen > MCP_HTTP_MAX_HEADER_VALUE || strpbrk(h[i].value, "\r\n") != NULL) {
            mcp_log(lg, MCP_LOG_WARNING,
                    "http: value of header '%s' is too long or has a line "
                    "break",
                    h[i].name);
            return MCP_EINVAL;
        }
    }
    return MCP_OK;
}

static int build_request(mcp_http_req_t *r, const char *method, const mcp_http_header_t *h,
                         size_t n, const char *body, size_t body_len)
{
    hbuf_t *b = &r->request;
    char line[64];
    int rc = hbuf_str(b, method);
    if (rc == 0) rc = hbuf_str(b, " ");
    if (rc == 0) rc = hbuf_str(b, r->url.target);
    if (rc == 0) rc = hbuf_str(b, " HTTP/1.1\r\nHost: ");
    if (rc == 0 && r->url.ipv6) rc = hbuf_str(b, "[");
    if (rc == 0) rc = hbuf_str(b, r->url.host);
    if (rc == 0 && r->url.ipv6) rc = hbuf_str(b, "]");
    if (rc == 0 && !r->url.default_port) {
        snprintf(line, sizeof line, ":%u", (unsigned)r->url.port);
        rc = hbuf_str(b, line);
    }
    if (rc == 0) rc = hbuf_str(b, "\r\n");
    if (rc == 0 && !has_header(h, n, "user-agent"))
        rc = hbuf_str(b, "User-Agent: ptc-mcp/" PTC_VERSION "\r\n");
    if (rc == 0 && !has_header(h, n, "accept")) rc = hbuf_str(b, "Accept: */*\r\n");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = hbuf_str(b, h[i].name);
        if (rc == 0) rc = hbuf_str(b, ": ");
        if (rc == 0) rc = hbuf_str(b, h[i].value);
        if (rc == 0) rc = hbuf_str(b, "\r\n");
    }
    bool wants_length = body != NULL || body_len > 0 || strcmp(method, "POST") == 0 ||
                        strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0;
    if (rc == 0 && wants_length) {
        snprintf(line, sizeof line, "Content-Length: %zu\r\n", body_len);
        rc = hbuf_str(b, line);
    }
    if (rc == 0) rc = hbuf_str(b, "Connection: close\r\n\r\n");
    if (rc == 0 && body_len > 0) rc = hbuf_append(b, body, body_len);
    return rc;
}

int mcp_http_request(mcp_http_client_t *c, const char *method, const char *url,
                     const mcp_http_header_t *headers, size_t n_headers, const char *body,
                     size_t body_len, mcp_http_cb cb, void *data, mcp_http_req_t **out)
{
    if (out != NULL) *out = NULL;
    if (c == NULL || method == NULL || url == NULL || cb == NULL ||
        (headers == NULL && n_headers > 0) || (body == NULL && body_len > 0))
        return MCP_EINVAL;
    if (c->freeing) return MCP_ESTATE;
    if (c->n_reqs >= MCP_HTTP_MAX_IN_FLIGHT) {
        mcp_log(c->lg, MCP_LOG_WARNING, "http: %d requests already in flight",
                MCP_HTTP_MAX_IN_FLIGHT);
        return MCP_EBUSY;
    }
    if (!is_token(method, MCP_HTTP_MAX_METHOD)) {
        mcp_log(c->lg, MCP_LOG_WARNING, "http: bad method name");
        return MCP_EINVAL;
    }
    if (body_len > MCP_HTTP_MAX_REQUEST_BODY) return MCP_ETOOBIG;
    int rc = check_headers(c->lg, headers, n_headers);
    if (rc < 0) return rc;

    mcp_http_req_t *r = calloc(1, sizeof *r);
    if (r == NULL) return MCP_ENOMEM;
    const char *why = NULL;
    rc = mcp__http_url_parse(url, &r->url, &why);
    if (rc < 0) {
        mcp_log(c->lg, MCP_LOG_WARNING, "http: bad URL: %s", why ? why : "?");
        mcp__http_url_free(&r->url);
        free(r);
        return rc;
    }
    snprintf(r->where, sizeof r->where, "%s%s%s:%u", r->url.ipv6 ? "[" : "", r->url.host,
             r->url.ipv6 ? "]" : "", (unsigned)r->url.port);
    r->cb = cb;
    r->data = data;
    r->head = strcmp(method, "HEAD") == 0;
    r->connect_timeout_ms = c->connect_timeout_ms;
    r->total_timeout_ms = c->total_timeout_ms;
    r->body_sink = buffer_body;
    hbuf_init(&r->request, MCP_HTTP_MAX_REQUEST_BODY + MCP__HTTP_MAX_URL +
                               (size_t)MCP_HTTP_MAX_USER_HEADERS *
                                   (MCP_HTTP_MAX_HEADER_NAME + MCP_HTTP_MAX_HEADER_VALUE + 4) +
                               1024);
    hbuf_init(&r->out, MCP_HTTP_MAX_TLS_OUT);
    hbuf_init(&r->body, c->max_response_bytes);
    hbuf_init(&r->content_type, MCP_HTTP_MAX_KEPT_VALUE);
    hbuf_init(&r->location, MCP_HTTP_MAX_KEPT_VALUE);
    hbuf_init(&r->session_id, MCP_HTTP_MAX_KEPT_VALUE);
    http_parser_init(&r->parser, HTTP_RESPONSE);
    r->parser.data = r;
    r->rbuf = malloc(MCP_HTTP_READ_CHUNK);
    rc =
        r->rbuf == NULL ? MCP_ENOMEM : build_request(r, method, headers, n_headers, body, body_len);
    if (rc < 0) {
        r->done = true;
        maybe_free(r);
        return rc;
    }

    /* From here on, memory goes through the close callbacks. */
    uv_timer_init(c->loop, &r->connect_timer);
    uv_timer_init(c->loop, &r->total_timer);
    r->connect_timer.data = r->total_timer.data = r;
    r->open_handles = 2;
    r->client = c;
    r->gai.data = r;
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)r->url.port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = AI_NUMERICSERV;
    rc = uv_timer_start(&r->connect_timer, on_connect_timeout, r->connect_timeout_ms, 0);
    if (rc == 0) rc = uv_timer_start(&r->total_timer, on_total_timeout, r->total_timeout_ms, 0);
    /* The lookup runs on libuv's thread pool, never on the loop. */
    if (rc == 0) rc = uv_getaddrinfo(c->loop, &r->gai, on_resolved, r->url.host, port, &hints);
    if (rc < 0) {
        mcp_log(c->lg, MCP_LOG_WARNING, "http: cannot start the request to %s: %s", r->where,
                uv_strerror(rc));
        r->client = NULL;
        teardown(r); /* no callback: the caller learns it from the return value */
        return rc == UV_ENOMEM ? MCP_ENOMEM : MCP_EIO;
    }
    r->gai_pending = true;
    r->next = c->reqs;
    if (c->reqs != NULL) c->reqs->prev = r;
    c->reqs = r;
    c->n_reqs++;
    if (out != NULL) *out = r;
    mcp_log(c->lg, MCP_LOG_DEBUG, "http %s %s", method, url);
    return MCP_OK;
}
