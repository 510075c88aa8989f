/* http_server.c - the HTTP/1.1 server under the MCP endpoints: a libuv TCP listener, an
 * optional TLS layer (mbedTLS over the connection's byte stream), http-parser, keep-alive,
 * limits and timeouts, DNS-rebinding and bearer-token checks, /healthz. The endpoints live in
 * transport_http.c. */
#include "http_server_internal.h"

#include <http_parser.h>
#include <mbedtls/error.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#define READ_CHUNK 65536
/* Unparsed input held while a response is pending (pipelined requests): past it we stop
 * reading until the response is done. */
#define MAX_PENDING_INPUT (256u << 10)
/* After an error response the connection drains what the client still sends for this long,
 * so that the client reads the response instead of a reset. */
#define LINGER_MS 2000
/* Bodies up to this size keep their buffer for the next request of the connection. */
#define KEEP_BODY_BUF 65536
/* Descriptors kept for everything but connections (runs, pipes, downstream servers). */
#define RESERVED_FDS 256

typedef enum phase {
    PH_HANDSHAKE, /* TLS handshake */
    PH_IDLE,      /* keep-alive: between requests */
    PH_HEADERS,   /* reading the request line and headers */
    PH_BODY,      /* reading the body */
    PH_WAIT,      /* request complete; the answer will come (JSON) */
    PH_STREAM,    /* an event-stream response is open */
    PH_LINGER,    /* closing: draining input */
} phase_t;

typedef struct hdr {
    size_t name, value; /* offsets into hbuf of NUL-terminated strings */
} hdr_t;

struct mcp__hconn {
    mcp_http_server_t *hs;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown_req;
    int handles;
    bool closing, shutting;
    phase_t phase;
    http_parser parser;

    char *in; /* plaintext not parsed yet */
    size_t in_len, in_cap;
    bool reading, read_eof, processing, resume;

    bool tls_on, handshake_done;
    mbedtls_ssl_context ssl;
    char *tin; /* ciphertext not consumed by mbedTLS yet */
    size_t tin_len, tin_off, tin_cap;

    char *hbuf; /* URL, then header names and values, NUL-terminated */
    size_t hlen, hcap;
    hdr_t *hdrs;
    size_t n_hdrs;
    bool in_value;
    size_t url_len;
    char *body;
    size_t body_len, body_cap;
    int fail_status;
    bool keep_alive;

    bool chunked, close_after; /* close_after: the response says Connection: close */
    bool finishing;            /* conn_finish waits for the queued output */
    size_t out_queued;
    void *owner;
    mcp__hconn_t *prev, *next;
};

typedef struct wreq {
    uv_write_t req;
    mcp__hconn_t *c;
    size_t len;
    char data[];
} wreq_t;

static void conn_close(mcp__hconn_t *c, bool tell_owner);
static void conn_finish(mcp__hconn_t *c);
static void conn_process(mcp__hconn_t *c);
static void conn_next(mcp__hconn_t *c);
static void start_reading(mcp__hconn_t *c);

/* --- small buffers ----------------------------------------------------------------------- */

/* Appends n bytes to a growable buffer capped at max; false past the cap or on ENOMEM. */
static bool buf_add(char **buf, size_t *len, size_t *cap, size_t max, const char *p, size_t n)
{
    /* Callers may pass different caps for one buffer (one spare byte for a final NUL). */
    if (*len > max || n > max - *len) return false;
    if (*len + n > *cap) {
        size_t nc = *cap ? *cap : 256;
        while (nc < *len + n)
            nc *= 2;
        if (nc > max) nc = max;
        char *nb = realloc(*buf, nc);
        if (nb == NULL) return false;
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    return true;
}

/* --- output ------------------------------------------------------------------------------- */

static const char *status_text(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 202:
        return "Accepted";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

static void on_written(uv_write_t *req, int status)
{
    wreq_t *w = req->data;
    mcp__hconn_t *c = w->c;
    c->out_queued -= w->len;
    free(w);
    if (status < 0) {
        conn_close(c, true);
        return;
    }
    if (c->finishing && c->out_queued == 0 && !c->closing) conn_finish(c);
}

/* Queues bytes on the socket as they are (ciphertext with TLS). */
static int raw_write(mcp__hconn_t *c, const char *data, size_t len)
{
    if (c->closing || c->shutting) return MCP_ECLOSED;
    wreq_t *w = malloc(sizeof *w + len);
    if (w == NULL) return MCP_ENOMEM;
    w->c = c;
    w->len = len;
    memcpy(w->data, data, len);
    w->req.data = w;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc < 0) {
        free(w);
        return MCP_EIO;
    }
    c->out_queued += len;
    return MCP_OK;
}

static int conn_write(mcp__hconn_t *c, const char *data, size_t len)
{
    if (c->closing || c->shutting) return MCP_ECLOSED;
    int rc = MCP_OK;
    if (!c->tls_on) {
        rc = raw_write(c, data, len);
    } else {
        size_t off = 0;
        while (off < len) {
            int n = mbedtls_ssl_write(&c->ssl, (const unsigned char *)data + off, len - off);
            if (n <= 0) {
                rc = MCP_ETLS;
                break;
            }
            off += (size_t)n;
        }
    }
    if (rc < 0) {
        conn_close(c, true);
        return rc;
    }
    /* A client that does not read its stream must not make us buffer without bound. */
    if (c->out_queued > c->hs->o.max_output_bytes) {
        mcp_log(c->hs->lg, MCP_LOG_WARNING,
                "http: a client is not reading its responses (%zu bytes queued); closing it",
                c->out_queued);
        conn_close(c, true);
        return MCP_ECLOSED;
    }
    return MCP_OK;
}

static void reset_request(mcp__hconn_t *c)
{
    c->hlen = 0;
    c->n_hdrs = 0;
    c->in_value = false;
    c->url_len = 0;
    c->body_len = 0;
    if (c->body_cap > KEEP_BODY_BUF) {
        free(c->body);
        c->body = NULL;
        c->body_cap = 0;
    }
    c->fail_status = 0;
    c->owner = NULL;
    c->chunked = false;
}

/* Our side is half-closed; the linger timer or the client's EOF closes the rest. */
static void on_shutdown(uv_shutdown_t *req, int status)
{
    mcp__hconn_t *c = req->data;
    (void)status;
    if (!c->closing && c->read_eof) conn_close(c, true);
}

static void on_timer(uv_timer_t *t);

static void conn_finish(mcp__hconn_t *c)
{
    if (c->closing || c->shutting) return;
    c->close_after = true;
    c->finishing = true;
    if (c->out_queued > 0) return; /* on_written calls again */
    if (c->tls_on && c->handshake_done) mbedtls_ssl_close_notify(&c->ssl);
    c->shutting = true;
    void *owner = c->owner;
    c->owner = NULL;
    /* A response still owned by someone ends here: they must hear of it. */
    if (owner != NULL) mcp__http_conn_lost(c->hs, owner);
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        conn_close(c, false);
        return;
    }
    c->phase = PH_LINGER;
    uv_timer_start(&c->timer, on_timer, LINGER_MS, 0);
    start_reading(c);
}

static void write_head(mcp__hconn_t *c, int status, const char *content_type,
                       const char *extra_headers, bool stream, size_t len)
{
    char head[2048];
    int n = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\n", status, status_text(status));
    if (content_type != NULL)
        n += snprintf(head + n, sizeof head - (size_t)n, "Content-Type: %s\r\n", content_type);
    if (stream) {
        n += snprintf(head + n, sizeof head - (size_t)n,
                      "Cache-Control: no-cache, no-transform\r\nX-Accel-Buffering: no\r\n");
        if (c->chunked)
            n += snprintf(head + n, sizeof head - (size_t)n, "Transfer-Encoding: chunked\r\n");
    } else {
        n += snprintf(head + n, sizeof head - (size_t)n, "Content-Length: %zu\r\n", len);
    }
    bool close = c->close_after || !c->keep_alive || c->read_eof || c->hs->stopping;
    if (close) c->close_after = true;
    n += snprintf(head + n, sizeof head - (size_t)n, "%s%s\r\n\r\n",
                  extra_headers != NULL ? extra_headers : "",
                  close ? "Connection: close" : "Connection: keep-alive");
    if ((size_t)n >= sizeof head) n = (int)sizeof head - 1;
    conn_write(c, head, (size_t)n);
}

void mcp__hconn_respond(mcp__hconn_t *c, int status, const char *content_type,
                        const char *extra_headers, const char *body, size_t len)
{
    if (c->closing || c->shutting) return;
    c->owner = NULL;
    if (status >= 400 && c->phase != PH_WAIT && c->phase != PH_STREAM) c->close_after = true;
    /* RFC 9110 9.3.2: a HEAD answer has the Content-Length GET would have, and no body. The
     * method is only this request's once its request line is parsed (PH_BODY on). */
    bool head = (c->phase == PH_BODY || c->phase == PH_WAIT) && c->parser.method == HTTP_HEAD;
    write_head(c, status, content_type, extra_headers, false, len);
    if (len > 0 && !head && !c->closing) conn_write(c, body, len);
    if (c->closing) return;
    if (c->close_after)
        conn_finish(c);
    else
        conn_next(c);
}

void mcp__hconn_error(mcp__hconn_t *c, int status, int code, const char *msg,
                      const char *extra_headers)
{
    cJSON *e = mcp_jsonrpc_error(NULL, code, msg, NULL);
    char *text = e != NULL ? cJSON_PrintUnformatted(e) : NULL;
    cJSON_Delete(e);
    mcp__hconn_respond(c, status, "application/json", extra_headers, text ? text : "",
                       text ? strlen(text) : 0);
    cJSON_free(text);
}

void mcp__hconn_stream_begin(mcp__hconn_t *c, const char *extra_headers, void *owner)
{
    if (c->closing || c->shutting) return;
    c->phase = PH_STREAM;
    c->owner = owner;
    c->chunked = c->parser.http_major == 1 && c->parser.http_minor >= 1;
    /* HTTP/1.0 has no chunks: the end of the stream is the end of the connection. */
    if (!c->chunked) c->close_after = true;
    write_head(c, 200, "text/event-stream", extra_headers, true, 0);
}

int mcp__hconn_stream_write(mcp__hconn_t *c, const char *data, size_t len)
{
    if (c->closing || c->shutting || c->phase != PH_STREAM) return MCP_ECLOSED;
    if (!c->chunked) return conn_write(c, data, len);
    char *b = malloc(len + 32);
    if (b == NULL) return MCP_ENOMEM;
    int n = snprintf(b, 32, "%zx\r\n", len);
    memcpy(b + n, data, len);
    memcpy(b + (size_t)n + len, "\r\n", 2);
    int rc = conn_write(c, b, (size_t)n + len + 2);
    free(b);
    return rc;
}

void mcp__hconn_stream_end(mcp__hconn_t *c)
{
    if (c->closing || c->shutting || c->phase != PH_STREAM) return;
    c->owner = NULL;
    if (c->chunked) conn_write(c, "0\r\n\r\n", 5);
    if (c->closing) return;
    if (c->close_after)
        conn_finish(c);
    else
        conn_next(c);
}

void mcp__hconn_wait(mcp__hconn_t *c, void *owner)
{
    c->owner = owner;
}

void mcp__hconn_abort(mcp__hconn_t *c)
{
    conn_close(c, false);
}

const char *mcp__hconn_header(const mcp__hconn_t *c, const char *name)
{
    for (size_t i = 0; i < c->n_hdrs; i++)
        if (strcasecmp(c->hbuf + c->hdrs[i].name, name) == 0) return c->hbuf + c->hdrs[i].value;
    return NULL;
}

/* How many lines of header `name` the request has. */
static size_t header_lines(const mcp__hconn_t *c, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_hdrs; i++)
        if (strcasecmp(c->hbuf + c->hdrs[i].name, name) == 0) n++;
    return n;
}

/* --- closing ------------------------------------------------------------------------------ */

static void on_conn_closed(uv_handle_t *h)
{
    mcp__hconn_t *c = h->data;
    if (--c->handles > 0) return;
    mcp_http_server_t *hs = c->hs;
    if (c->tls_on) mbedtls_ssl_free(&c->ssl);
    free(c->in);
    free(c->tin);
    free(c->hbuf);
    free(c->hdrs);
    free(c->body);
    free(c);
    hs->refs--;
    mcp__http_maybe_done(hs);
}

static void conn_close(mcp__hconn_t *c, bool tell_owner)
{
    if (c->closing) return;
    c->closing = true;
    mcp_http_server_t *hs = c->hs;
    void *owner = c->owner;
    c->owner = NULL;
    if (c->prev)
        c->prev->next = c->next;
    else
        hs->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    hs->n_conns--;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_closed);
    if (tell_owner && owner != NULL) mcp__http_conn_lost(hs, owner);
}

/* --- requests ----------------------------------------------------------------------------- */

static mcp__hconn_t *conn_of(http_parser *p)
{
    return p->data;
}

static bool hbuf_add(mcp__hconn_t *c, const char *p, size_t n)
{
    /* One spare byte for the NUL that ends the last string. */
    if (!buf_add(&c->hbuf, &c->hlen, &c->hcap, c->hs->o.max_header_bytes, p, n)) {
        c->fail_status = 431;
        return false;
    }
    return true;
}

static bool hbuf_nul(mcp__hconn_t *c)
{
    return buf_add(&c->hbuf, &c->hlen, &c->hcap, c->hs->o.max_header_bytes + 1, "", 1);
}

static int on_message_begin(http_parser *p)
{
    mcp__hconn_t *c = conn_of(p);
    reset_request(c);
    c->resume = false;
    if (c->phase == PH_IDLE) uv_timer_start(&c->timer, on_timer, c->hs->o.header_timeout_ms, 0);
    c->phase = PH_HEADERS;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    mcp__hconn_t *c = conn_of(p);
    if (!hbuf_add(c, at, n)) {
        c->fail_status = 414;
        return -1;
    }
    c->url_len += n;
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    mcp__hconn_t *c = conn_of(p);
    if (c->phase == PH_BODY) return 0; /* trailers of a chunked body: ignored */
    if (c->n_hdrs == 0 && !c->in_value && c->hlen == c->url_len) {
        if (!hbuf_nul(c)) return -1; /* ends the URL */
    }
    if (c->in_value || c->n_hdrs == 0) {
        if (c->in_value && !hbuf_nul(c)) return -1; /* ends the previous value */
        if (c->n_hdrs == c->hs->o.max_headers) {
            c->fail_status = 431;
            return -1;
        }
        c->hdrs[c->n_hdrs].name = c->hlen;
        c->hdrs[c->n_hdrs].value = 0;
        c->n_hdrs++;
        c->in_value = false;
    }
    return hbuf_add(c, at, n) ? 0 : -1;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    mcp__hconn_t *c = conn_of(p);
    if (c->phase == PH_BODY) return 0;
    if (!c->in_value) {
        if (!hbuf_nul(c)) return -1; /* ends the name */
        c->hdrs[c->n_hdrs - 1].value = c->hlen;
        c->in_value = true;
    }
    return hbuf_add(c, at, n) ? 0 : -1;
}

static int on_headers_complete(http_parser *p)
{
    mcp__hconn_t *c = conn_of(p);
    if (c->n_hdrs == 0 && c->hlen == c->url_len && !hbuf_nul(c)) return -1;
    if (c->in_value && !hbuf_nul(c)) return -1;
    if (c->n_hdrs > 0 && !c->in_value) {
        /* A name without a value: give it an empty one. */
        if (!hbuf_nul(c)) return -1;
        c->hdrs[c->n_hdrs - 1].value = c->hlen - 1;
    }
    c->in_value = false;
    if (p->http_major != 1) {
        c->fail_status = 505;
        return -1;
    }
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > c->hs->o.max_message_bytes) {
        c->fail_status = 413;
        return -1;
    }
    const char *expect = mcp__hconn_header(c, "Expect");
    if (expect != NULL && strcasecmp(expect, "100-continue") == 0 && p->http_minor >= 1)
        conn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    c->phase = PH_BODY;
    uv_timer_start(&c->timer, on_timer, c->hs->o.body_timeout_ms, 0);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    mcp__hconn_t *c = conn_of(p);
    if (!buf_add(&c->body, &c->body_len, &c->body_cap, c->hs->o.max_message_bytes + 1, at, n) ||
        c->body_len > c->hs->o.max_message_bytes) {
        c->fail_status = 413;
        return -1;
    }
    return 0;
}

static int on_message_complete(http_parser *p)
{
    mcp__hconn_t *c = conn_of(p);
    c->keep_alive = http_should_keep_alive(p) != 0;
    c->phase = PH_WAIT;
    uv_timer_stop(&c->timer);
    /* One request at a time: later bytes wait until this one is answered. */
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static bool authorized(mcp__hconn_t *c, bool *had_token)
{
    mcp_http_server_t *hs = c->hs;
    *had_token = false;
    if (hs->token == NULL) return true;
    const char *a = mcp__hconn_header(c, "Authorization");
    if (a == NULL) return false;
    *had_token = true;
    if (strncasecmp(a, "Bearer ", 7) != 0) return false;
    a += 7;
    while (*a == ' ')
        a++;
    size_t n = strlen(a);
    while (n > 0 && (a[n - 1] == ' ' || a[n - 1] == '\t'))
        n--;
    return mcp__http_secret_equal(a, n, hs->token, hs->token_len);
}

/* The origin a browser page would send for a page served by this Host. */
static bool origin_is_host(const char *origin, const char *host)
{
    if (host == NULL) return false;
    const char *rest = strncasecmp(origin, "http://", 7) == 0    ? origin + 7
                       : strncasecmp(origin, "https://", 8) == 0 ? origin + 8
                                                                 : NULL;
    return rest != NULL && strcasecmp(rest, host) == 0;
}

static void dispatch(mcp__hconn_t *c)
{
    mcp_http_server_t *hs = c->hs;
    mcp__hreq_t req = {
        .method = (int)c->parser.method,
        .target = c->hbuf,
        .path_len = mcp__http_path_len(c->hbuf),
        .body = c->body != NULL ? c->body : "",
        .body_len = c->body_len,
    };
    if (req.path_len == 8 && strncmp(req.target, "/healthz", 8) == 0) {
        if (req.method != HTTP_GET && req.method != HTTP_HEAD) {
            mcp__hconn_respond(c, 405, "text/plain", "Allow: GET, HEAD\r\n", "", 0);
            return;
        }
        /* No session and no secrets: load balancers call it without a token. */
        static const char ok[] = "{\"status\":\"ok\"}";
        mcp__hconn_respond(c, 200, "application/json", NULL, ok, sizeof ok - 1);
        return;
    }
    const char *host = mcp__hconn_header(c, "Host");
    const char *origin = mcp__hconn_header(c, "Origin");
    if (host == NULL && c->parser.http_minor >= 1) {
        /* RFC 9112 3.2: an HTTP/1.1 request without Host is answered 400. */
        mcp__hconn_error(c, 400, -32600, "Bad Request: Host header required", NULL);
        return;
    }
    /* A second Host (RFC 9112 3.2), Origin or Authorization line would carry a name or token
     * that the checks below, which read the first, never looked at. */
    static const char *const single[] = {"Host", "Origin", "Authorization"};
    for (size_t i = 0; i < sizeof single / sizeof single[0]; i++) {
        if (header_lines(c, single[i]) > 1) {
            mcp_log(hs->lg, MCP_LOG_WARNING, "http: refused a request with %s twice (400)",
                    single[i]);
            mcp__hconn_error(c, 400, -32600, "Bad Request: a header that must appear once repeats",
                             NULL);
            return;
        }
    }
    if (hs->loopback && !mcp__http_host_allowed(host, hs->host, hs->port)) {
        mcp_log(hs->lg, MCP_LOG_WARNING, "http: refused a request for Host \"%.100s\" (403)", host);
        mcp__hconn_error(c, 403, -32000, "Forbidden: Host header not allowed", NULL);
        return;
    }
    if (origin != NULL && !mcp__http_origin_allowed(origin, hs->host) &&
        (hs->loopback || !origin_is_host(origin, host))) {
        mcp_log(hs->lg, MCP_LOG_WARNING, "http: refused a request from Origin \"%.100s\" (403)",
                origin);
        mcp__hconn_error(c, 403, -32000, "Forbidden: Origin not allowed", NULL);
        return;
    }
    bool had = false;
    if (!authorized(c, &had)) {
        mcp__hconn_error(c, 401, -32001,
                         had ? "Unauthorized: wrong bearer token"
                             : "Unauthorized: send Authorization: Bearer TOKEN",
                         had ? "WWW-Authenticate: Bearer realm=\"ptc-mcp\", "
                               "error=\"invalid_token\"\r\n"
                             : "WWW-Authenticate: Bearer realm=\"ptc-mcp\"\r\n");
        return;
    }
    if (!mcp__http_route(hs, c, &req)) mcp__hconn_error(c, 404, -32000, "Not Found", NULL);
}

static void fail(mcp__hconn_t *c, int status)
{
    c->close_after = true;
    const char *m = status == 413   ? "Request body too large (--max-message-bytes)"
                    : status == 431 ? "Request headers too large"
                    : status == 408 ? "Request timed out"
                    : status == 414 ? "Request target too long"
                    : status == 505 ? "HTTP version not supported"
                                    : "Bad Request: malformed HTTP";
    mcp__hconn_error(c, status, status == 413 ? MCP_JSONRPC_INVALID_REQUEST : -32000, m, NULL);
}

static void conn_process(mcp__hconn_t *c)
{
    if (c->processing) return;
    c->processing = true;
    size_t off = 0;
    while (!c->closing && !c->shutting && off < c->in_len &&
           (c->phase == PH_IDLE || c->phase == PH_HEADERS || c->phase == PH_BODY)) {
        size_t n = http_parser_execute(&c->parser, &settings, c->in + off, c->in_len - off);
        off += n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (e == HPE_PAUSED) {
            dispatch(c);
            continue;
        }
        if (e != HPE_OK) {
            if (c->fail_status == 0)
                mcp_log(c->hs->lg, MCP_LOG_DEBUG, "http: malformed request: %s",
                        http_errno_description(e));
            fail(c, c->fail_status ? c->fail_status : 400);
            off = c->in_len;
            break;
        }
    }
    if (!c->closing) {
        if (off > 0) {
            memmove(c->in, c->in + off, c->in_len - off);
            c->in_len -= off;
        }
        if (c->read_eof && !c->shutting && c->in_len == 0) {
            /* The client half-closed: answer what it asked, then close. */
            if (c->phase == PH_HEADERS || c->phase == PH_BODY) {
                if (c->hlen > 0 || c->phase == PH_BODY)
                    fail(c, 400);
                else
                    conn_close(c, true);
            } else if (c->phase == PH_IDLE) {
                conn_finish(c); /* after the last answer has been written */
            }
        }
        if (!c->closing && !c->reading && c->in_len < MAX_PENDING_INPUT / 2) start_reading(c);
    }
    c->processing = false;
}

static void conn_next(mcp__hconn_t *c)
{
    reset_request(c);
    c->phase = PH_IDLE;
    if (c->hs->stopping) {
        conn_finish(c);
        return;
    }
    http_parser_pause(&c->parser, 0);
    start_reading(c);
    if (c->in_len > 0 || c->read_eof) {
        /* Pipelined input (or a half-close) is handled from a fresh loop turn: we may be inside
         * the session that just answered, which must not be entered again from here. */
        c->resume = true;
        uv_timer_start(&c->timer, on_timer, 0, 0);
        return;
    }
    uv_timer_start(&c->timer, on_timer, c->hs->o.idle_timeout_ms, 0);
}

static void on_timer(uv_timer_t *t)
{
    mcp__hconn_t *c = t->data;
    if (c->resume) {
        c->resume = false;
        uv_timer_start(&c->timer, on_timer, c->hs->o.idle_timeout_ms, 0);
        conn_process(c);
        return;
    }
    switch (c->phase) {
    case PH_HEADERS:
    case PH_BODY:
        mcp_log(c->hs->lg, MCP_LOG_INFO, "http: a client was too slow sending its request (408)");
        fail(c, 408);
        break;
    case PH_WAIT:
    case PH_STREAM:
        break;
    case PH_HANDSHAKE:
    case PH_IDLE:
    case PH_LINGER:
        conn_close(c, true);
        break;
    }
}

/* --- input -------------------------------------------------------------------------------- */

static void plain_in(mcp__hconn_t *c, const char *data, size_t n)
{
    if (c->phase == PH_LINGER) return;
    if (!buf_add(&c->in, &c->in_len, &c->in_cap, MAX_PENDING_INPUT + READ_CHUNK, data, n)) {
        conn_close(c, true);
        return;
    }
    if (c->in_len > MAX_PENDING_INPUT && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    conn_process(c);
}

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    mcp__hconn_t *c = ctx;
    return raw_write(c, (const char *)buf, len) == 0 ? (int)len : MBEDTLS_ERR_SSL_INTERNAL_ERROR;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    mcp__hconn_t *c = ctx;
    if (c->tin_off == c->tin_len) return MBEDTLS_ERR_SSL_WANT_READ;
    size_t n = c->tin_len - c->tin_off;
    if (n > len) n = len;
    memcpy(buf, c->tin + c->tin_off, n);
    c->tin_off += n;
    return (int)n;
}

static void tls_in(mcp__hconn_t *c, const char *data, size_t n)
{
    if (c->tin_off > 0) {
        memmove(c->tin, c->tin + c->tin_off, c->tin_len - c->tin_off);
        c->tin_len -= c->tin_off;
        c->tin_off = 0;
    }
    if (!buf_add(&c->tin, &c->tin_len, &c->tin_cap, MAX_PENDING_INPUT + READ_CHUNK, data, n)) {
        conn_close(c, true);
        return;
    }
    if (!c->handshake_done) {
        int ret = mbedtls_ssl_handshake(&c->ssl);
        if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE) return;
        if (ret != 0) {
            char err[160];
            mbedtls_strerror(ret, err, sizeof err);
            mcp_log(c->hs->lg, MCP_LOG_INFO, "https: TLS handshake with a client failed: %s", err);
            conn_close(c, true);
            return;
        }
        c->handshake_done = true;
        c->phase = PH_HEADERS;
        uv_timer_start(&c->timer, on_timer, c->hs->o.header_timeout_ms, 0);
    }
    unsigned char plain[16384];
    while (!c->closing) {
        int r = mbedtls_ssl_read(&c->ssl, plain, sizeof plain);
        if (r > 0) {
            plain_in(c, (const char *)plain, (size_t)r);
            continue;
        }
        if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE) break;
        if (r == 0 || r == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) {
            c->read_eof = true;
            conn_process(c);
            break;
        }
        conn_close(c, true);
        break;
    }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    mcp__hconn_t *c = h->data;
    (void)suggested;
    buf->base = c->hs->read_buf;
    buf->len = READ_CHUNK;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    mcp__hconn_t *c = s->data;
    if (c->closing) return;
    if (n > 0) {
        if (c->tls_on)
            tls_in(c, buf->base, (size_t)n);
        else
            plain_in(c, buf->base, (size_t)n);
        return;
    }
    if (n == 0) return;
    uv_read_stop(s);
    c->reading = false;
    if (n != UV_EOF || c->phase == PH_LINGER || c->phase == PH_STREAM || c->phase == PH_HANDSHAKE) {
        /* A client that closes an event stream is gone; one that half-closes while we still
         * owe it a JSON answer is not. */
        conn_close(c, true);
        return;
    }
    c->read_eof = true;
    conn_process(c);
}

static void start_reading(mcp__hconn_t *c)
{
    if (c->closing || c->reading || c->read_eof) return;
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read) == 0) c->reading = true;
}

/* --- accepting ---------------------------------------------------------------------------- */

static void on_connection(uv_stream_t *server, int status)
{
    mcp_http_server_t *hs = server->data;
    if (status < 0) {
        mcp_log(hs->lg, MCP_LOG_WARNING, "http: accept failed: %s", uv_strerror(status));
        return;
    }
    mcp__hconn_t *c = calloc(1, sizeof *c);
    if (c != NULL) c->hdrs = calloc(hs->o.max_headers, sizeof *c->hdrs);
    if (c == NULL || c->hdrs == NULL || uv_tcp_init(hs->loop, &c->tcp) < 0) {
        if (c != NULL) free(c->hdrs);
        free(c);
        /* Take the connection off the backlog and drop it, or libuv keeps calling us. */
        uv_tcp_t *tmp = malloc(sizeof *tmp);
        if (tmp != NULL && uv_tcp_init(hs->loop, tmp) == 0) {
            (void)uv_accept(server, (uv_stream_t *)tmp);
            mcp__close_free((uv_handle_t *)tmp);
        } else {
            free(tmp);
        }
        return;
    }
    c->hs = hs;
    c->tcp.data = c;
    c->handles = 1;
    hs->refs++;
    c->next = hs->conns;
    if (hs->conns) hs->conns->prev = c;
    hs->conns = c;
    hs->n_conns++;
    uv_timer_init(hs->loop, &c->timer);
    c->timer.data = c;
    c->handles = 2;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c, false);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->keep_alive = true;
    if (hs->n_conns > hs->o.max_connections || hs->stopping) {
        mcp_log(hs->lg, MCP_LOG_WARNING, "http: %zu connections open (the limit): refusing one",
                hs->n_conns - 1);
        if (!hs->tls) {
            c->close_after = true;
            mcp__hconn_error(c, 503, -32000, "Service Unavailable: too many connections",
                             "Retry-After: 1\r\n");
        } else {
            conn_close(c, false);
        }
        return;
    }
    if (hs->tls) {
        mbedtls_ssl_init(&c->ssl);
        c->tls_on = true;
        if (mbedtls_ssl_setup(&c->ssl, &hs->conf) != 0) {
            conn_close(c, false);
            return;
        }
        mbedtls_ssl_set_bio(&c->ssl, c, bio_send, bio_recv, NULL);
        c->phase = PH_HANDSHAKE;
    } else {
        c->phase = PH_HEADERS;
    }
    uv_timer_start(&c->timer, on_timer, hs->o.header_timeout_ms, 0);
    start_reading(c);
}

/* --- the server --------------------------------------------------------------------------- */

void mcp_http_server_opts_default(mcp_http_server_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8765;
    o->max_message_bytes = 16u << 20;
    o->max_connections = MCP_HTTP_DEFAULT_MAX_CONNECTIONS;
    o->max_sessions = MCP_HTTP_DEFAULT_MAX_SESSIONS;
    o->max_streams_per_session = MCP_HTTP_DEFAULT_MAX_STREAMS;
    o->max_header_bytes = MCP_HTTP_DEFAULT_MAX_HEADER_BYTES;
    o->max_headers = MCP_HTTP_DEFAULT_MAX_HEADERS;
    o->header_timeout_ms = MCP_HTTP_DEFAULT_HEADER_TIMEOUT_MS;
    o->body_timeout_ms = MCP_HTTP_DEFAULT_BODY_TIMEOUT_MS;
    o->idle_timeout_ms = MCP_HTTP_DEFAULT_IDLE_TIMEOUT_MS;
    o->session_idle_ms = MCP_HTTP_DEFAULT_SESSION_IDLE_MS;
    o->keepalive_ms = MCP_HTTP_DEFAULT_KEEPALIVE_MS;
    o->replay_events = MCP_HTTP_DEFAULT_REPLAY_EVENTS;
    o->replay_bytes = MCP_HTTP_DEFAULT_REPLAY_BYTES;
    o->max_output_bytes = MCP_HTTP_DEFAULT_MAX_OUTPUT_BYTES;
}

static void on_tick(uv_timer_t *t)
{
    mcp__http_tick(t->data, mcp__now_ms());
}

static void on_reap(uv_timer_t *t)
{
    mcp_http_server_t *hs = t->data;
    mcp__http_reap(hs);
    if (hs->stopping && !hs->stop_reported && !hs->freed && hs->sessions == NULL &&
        hs->ending == NULL && hs->dead == NULL && hs->conns == NULL) {
        hs->stop_reported = true;
        if (hs->done != NULL) hs->done(hs, hs->done_data);
    }
}

static void on_server_handle_closed(uv_handle_t *h)
{
    mcp_http_server_t *hs = h->data;
    if (--hs->refs > 0) return;
    mbedtls_ssl_config_free(&hs->conf);
    mbedtls_x509_crt_free(&hs->cert);
    mbedtls_pk_free(&hs->key);
    mbedtls_ctr_drbg_free(&hs->drbg);
    mbedtls_entropy_free(&hs->entropy);
    free(hs->read_buf);
    free(hs->host);
    free(hs->token);
    free(hs);
}

void mcp__http_maybe_done(mcp_http_server_t *hs)
{
    if (!hs->stopping || hs->stop_reported || hs->freed) return;
    if (hs->sessions != NULL || hs->ending != NULL || hs->conns != NULL) return;
    mcp__http_reap_later(hs);
}

void mcp__http_reap_later(mcp_http_server_t *hs)
{
    /* From a fresh loop turn, with nothing of ours on the stack. */
    if (!hs->freed && !uv_is_active((uv_handle_t *)&hs->reap))
        uv_timer_start(&hs->reap, on_reap, 0, 0);
}

static void tls_log_error(mcp_http_server_t *hs, const char *what, const char *file, int ret)
{
    char err[200];
    mbedtls_strerror(ret, err, sizeof err);
    mcp_log(hs->lg, MCP_LOG_ERROR, "https: cannot load the %s %s: %s (give a PEM file)", what, file,
            err);
}

static int setup_tls(mcp_http_server_t *hs, const mcp_http_server_opts_t *o)
{
    int ret = mbedtls_x509_crt_parse_file(&hs->cert, o->tls_cert_file);
    if (ret != 0) {
        tls_log_error(hs, "certificate (--tls-cert)", o->tls_cert_file, ret);
        return MCP_EINVAL;
    }
    ret = mbedtls_pk_parse_keyfile(&hs->key, o->tls_key_file, NULL);
    if (ret != 0) {
        tls_log_error(hs, "private key (--tls-key)", o->tls_key_file, ret);
        return MCP_EINVAL;
    }
    ret = mbedtls_ssl_config_defaults(&hs->conf, MBEDTLS_SSL_IS_SERVER,
                                      MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
    if (ret == 0) ret = mbedtls_ssl_conf_own_cert(&hs->conf, &hs->cert, &hs->key);
    if (ret != 0) {
        tls_log_error(hs, "certificate and key pair", o->tls_cert_file, ret);
        return MCP_EINVAL;
    }
    mbedtls_ssl_conf_rng(&hs->conf, mbedtls_ctr_drbg_random, &hs->drbg);
    mbedtls_ssl_conf_min_version(&hs->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    hs->tls = true;
    return MCP_OK;
}

int mcp_http_server_start(mcp_server_t *srv, const mcp_http_server_opts_t *opts,
                          mcp_http_server_t **out)
{
    *out = NULL;
    if (srv == NULL || opts == NULL || opts->host == NULL || opts->max_message_bytes == 0 ||
        opts->max_headers == 0 || opts->max_header_bytes == 0 || opts->port > 65535)
        return MCP_EINVAL;
    const mcp_logger_t *lg = srv->lg;
    mcp_http_server_t *hs = calloc(1, sizeof *hs);
    if (hs == NULL) return MCP_ENOMEM;
    hs->srv = srv;
    hs->loop = srv->loop;
    hs->lg = lg;
    hs->o = *opts;
    mbedtls_entropy_init(&hs->entropy);
    mbedtls_ctr_drbg_init(&hs->drbg);
    mbedtls_ssl_config_init(&hs->conf);
    mbedtls_x509_crt_init(&hs->cert);
    mbedtls_pk_init(&hs->key);
    /* Timers first, so that every failure below can close the same way. */
    uv_timer_init(hs->loop, &hs->tick);
    uv_timer_init(hs->loop, &hs->reap);
    hs->tick.data = hs->reap.data = hs;
    hs->refs = 2;
    int rc = MCP_OK;
    const char *h = opts->host;
    if (strcasecmp(h, "localhost") == 0) h = "127.0.0.1";
    hs->host = mcp__strdup(opts->host);
    hs->token =
        opts->auth_token != NULL && opts->auth_token[0] ? mcp__strdup(opts->auth_token) : NULL;
    hs->read_buf = malloc(READ_CHUNK);
    if (hs->host == NULL || hs->read_buf == NULL ||
        (opts->auth_token != NULL && opts->auth_token[0] && hs->token == NULL)) {
        rc = MCP_ENOMEM;
        goto fail;
    }
    hs->token_len = hs->token ? strlen(hs->token) : 0;
    hs->o.host = hs->host;
    hs->o.auth_token = hs->token;
    hs->o.tls_cert_file = hs->o.tls_key_file = NULL;
    hs->loopback = mcp__http_is_loopback(opts->host);
    /* Past the descriptor limit accept fails; answer 503 before getting there. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur > 2 * RESERVED_FDS && hs->o.max_connections > rl.rlim_cur - RESERVED_FDS) {
        hs->o.max_connections = (size_t)(rl.rlim_cur - RESERVED_FDS);
        mcp_log(lg, MCP_LOG_INFO,
                "http: at most %zu connections (the open-file limit is %llu; raise it with "
                "ulimit -n for more)",
                hs->o.max_connections, (unsigned long long)rl.rlim_cur);
    }
    if (!hs->loopback && hs->token == NULL) {
        mcp_log(lg, MCP_LOG_ERROR,
                "http: refusing to listen on %s without a bearer token: anyone who can reach "
                "that address could run code. Set a token in an environment variable and pass "
                "--auth-token-env NAME, or listen on 127.0.0.1",
                opts->host);
        rc = MCP_EINVAL;
        goto fail;
    }
    static const char pers[] = "ptc-mcp http server";
    if (mbedtls_ctr_drbg_seed(&hs->drbg, mbedtls_entropy_func, &hs->entropy,
                              (const unsigned char *)pers, sizeof pers - 1) != 0) {
        mcp_log(lg, MCP_LOG_ERROR, "http: cannot seed the random generator for session ids");
        rc = MCP_EIO;
        goto fail;
    }
    if ((opts->tls_cert_file != NULL) != (opts->tls_key_file != NULL)) {
        mcp_log(lg, MCP_LOG_ERROR, "https: give both --tls-cert and --tls-key");
        rc = MCP_EINVAL;
        goto fail;
    }
    if (opts->tls_cert_file != NULL && (rc = setup_tls(hs, opts)) < 0) goto fail;

    struct sockaddr_storage addr;
    bool v6 = strchr(h, ':') != NULL;
    int urc = v6 ? uv_ip6_addr(h, (int)opts->port, (struct sockaddr_in6 *)&addr)
                 : uv_ip4_addr(h, (int)opts->port, (struct sockaddr_in *)&addr);
    if (urc != 0) {
        mcp_log(lg, MCP_LOG_ERROR,
                "http: --listen host \"%s\" is not an IP address (use e.g. 127.0.0.1, ::1, "
                "0.0.0.0 or localhost)",
                opts->host);
        rc = MCP_EINVAL;
        goto fail;
    }
    urc = uv_tcp_init(hs->loop, &hs->listener);
    if (urc == 0) {
        hs->listener.data = hs;
        hs->refs++;
        urc = uv_tcp_bind(&hs->listener, (const struct sockaddr *)&addr, 0);
    }
    if (urc == 0) urc = uv_listen((uv_stream_t *)&hs->listener, 511, on_connection);
    if (urc != 0) {
        mcp_log(lg, MCP_LOG_ERROR, "http: cannot listen on %s port %u: %s", opts->host, opts->port,
                uv_strerror(urc));
        rc = MCP_EIO;
        goto fail;
    }
    hs->listening = true;
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&hs->listener, (struct sockaddr *)&bound, &blen);
    hs->port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    snprintf(hs->url, sizeof hs->url, "%s://%s%s%s:%u/mcp", hs->tls ? "https" : "http",
             v6 ? "[" : "", opts->host, v6 ? "]" : "", hs->port);
    uv_timer_start(&hs->tick, on_tick, 1000, 1000);
    uv_unref((uv_handle_t *)&hs->tick);
    if (hs->token == NULL)
        mcp_log(lg, MCP_LOG_WARNING,
                "http: NO AUTHENTICATION: any local process or user can use this server and run "
                "code through it; pass --auth-token-env NAME to require a bearer token");
    *out = hs;
    return MCP_OK;
fail:
    hs->freed = true;
    if (hs->refs == 3) uv_close((uv_handle_t *)&hs->listener, on_server_handle_closed);
    uv_close((uv_handle_t *)&hs->tick, on_server_handle_closed);
    uv_close((uv_handle_t *)&hs->reap, on_server_handle_closed);
    return rc;
}

unsigned mcp_http_server_port(const mcp_http_server_t *h)
{
    return h->port;
}

const char *mcp_http_server_url(const mcp_http_server_t *h)
{
    return h->url;
}

size_t mcp_http_server_session_count(const mcp_http_server_t *h)
{
    return h->n_sessions;
}

static void close_listener(mcp_http_server_t *hs)
{
    if (!hs->listening) return;
    hs->listening = false;
    uv_close((uv_handle_t *)&hs->listener, on_server_handle_closed);
}

void mcp_http_server_stop(mcp_http_server_t *h, void (*done)(mcp_http_server_t *h, void *data),
                          void *data)
{
    if (h->stopping) {
        mcp__http_end_all(h, true);
        return;
    }
    h->stopping = true;
    h->done = done;
    h->done_data = data;
    close_listener(h);
    mcp__http_end_all(h, false);
    /* Connections not carrying a response close now; the others when their response ends. */
    for (mcp__hconn_t *c = h->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (c->phase != PH_WAIT && c->phase != PH_STREAM && c->phase != PH_LINGER)
            conn_close(c, true);
    }
    mcp__http_maybe_done(h);
}

void mcp_http_server_free(mcp_http_server_t *h)
{
    if (h == NULL) return;
    h->freed = true;
    close_listener(h);
    mcp__http_free_all(h);
    while (h->conns != NULL)
        conn_close(h->conns, false);
    uv_close((uv_handle_t *)&h->tick, on_server_handle_closed);
    uv_close((uv_handle_t *)&h->reap, on_server_handle_closed);
}
