/* http_conn.c - one connection of the HTTP server: writing responses and event streams
 * (bounded output queue), closing (graceful with a linger, or at once) and reading. Parsing is
 * in http_request.c, TLS in http_tls.c, the listener in http_server.c. */
#include "http_conn_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* After an error response the connection drains what the client still sends for this long,
 * so that the client reads the response instead of a reset. */
#define LINGER_MS 2000
/* Bodies up to this size keep their buffer for the next request of the connection. */
#define KEEP_BODY_BUF 65536

typedef struct wreq {
    uv_write_t req;
    mcp__hconn_t *c;
    size_t len;
    char data[];
} wreq_t;

/* --- buffers ------------------------------------------------------------------------------ */

void mcp__hconn_bufs_init(mcp__hconn_t *c)
{
    /* Input waits at most a read past the point where reading stops. */
    ptc_buf_init(&c->in, PTC_CAP_HTTP_PENDING_INPUT + MCP__HTTP_READ_CHUNK);
    ptc_buf_init(&c->tin, PTC_CAP_HTTP_PENDING_INPUT + MCP__HTTP_READ_CHUNK);
    /* One spare byte for the NUL that ends the last header string. */
    ptc_buf_init(&c->hbuf, c->hs->o.max_header_bytes + 1);
    /* One byte past the cap, so that a body over it is seen as such. */
    ptc_buf_init(&c->body, c->hs->o.max_message_bytes + 1);
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
        mcp__hconn_close(c, true);
        return;
    }
    if (c->finishing && c->out_queued == 0 && !c->closing) mcp__hconn_finish(c);
}

/* Queues bytes on the socket as they are (ciphertext with TLS). */
int mcp__hconn_raw_write(mcp__hconn_t *c, const char *data, size_t len)
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

int mcp__hconn_write(mcp__hconn_t *c, const char *data, size_t len)
{
    if (c->closing || c->shutting) return MCP_ECLOSED;
    int rc = MCP_OK;
    if (!c->tls_on) {
        rc = mcp__hconn_raw_write(c, data, len);
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
        mcp__hconn_close(c, true);
        return rc;
    }
    /* A client that does not read its stream must not make us buffer without bound. */
    if (c->out_queued > c->hs->o.max_output_bytes) {
        mcp_log(c->hs->lg, MCP_LOG_WARNING,
                "http: a client is not reading its responses (%zu bytes queued); closing it",
                c->out_queued);
        mcp__hconn_close(c, true);
        return MCP_ECLOSED;
    }
    return MCP_OK;
}

void mcp__hconn_reset_request(mcp__hconn_t *c)
{
    ptc_buf_truncate(&c->hbuf, 0);
    c->n_hdrs = 0;
    c->in_value = false;
    c->url_len = 0;
    if (c->body.cap > KEEP_BODY_BUF)
        ptc_buf_free(&c->body);
    else
        ptc_buf_truncate(&c->body, 0);
    c->fail_status = 0;
    c->owner = NULL;
    c->chunked = false;
}

/* Our side is half-closed; the linger timer or the client's EOF closes the rest. */
static void on_shutdown(uv_shutdown_t *req, int status)
{
    mcp__hconn_t *c = req->data;
    (void)status;
    if (!c->closing && c->read_eof) mcp__hconn_close(c, true);
}

void mcp__hconn_finish(mcp__hconn_t *c)
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
        mcp__hconn_close(c, false);
        return;
    }
    c->phase = MCP__PH_LINGER;
    uv_timer_start(&c->timer, mcp__hconn_on_timer, LINGER_MS, 0);
    mcp__hconn_start_reading(c);
}

/* The status line and headers; a head past PTC_CAP_HTTP_HEAD (only the server makes them) or
   out of memory closes the connection rather than sending a cut one. */
static int write_head(mcp__hconn_t *c, int status, const char *content_type,
                      const char *extra_headers, bool stream, size_t len)
{
    ptc_buf_t head;
    ptc_buf_init(&head, PTC_CAP_HTTP_HEAD);
    ptc_buf_printf(&head, "HTTP/1.1 %d %s\r\n", status, status_text(status));
    if (content_type != NULL) ptc_buf_printf(&head, "Content-Type: %s\r\n", content_type);
    if (stream) {
        ptc_buf_str(&head, "Cache-Control: no-cache, no-transform\r\nX-Accel-Buffering: no\r\n");
        if (c->chunked) ptc_buf_str(&head, "Transfer-Encoding: chunked\r\n");
    } else {
        ptc_buf_printf(&head, "Content-Length: %zu\r\n", len);
    }
    bool close = c->close_after || !c->keep_alive || c->read_eof || c->hs->stopping;
    if (close) c->close_after = true;
    ptc_buf_printf(&head, "%s%s\r\n\r\n", extra_headers != NULL ? extra_headers : "",
                   close ? "Connection: close" : "Connection: keep-alive");
    int rc = ptc_buf_error(&head);
    if (rc < 0) {
        mcp_log(c->hs->lg, MCP_LOG_ERROR, "http: cannot send a %d response's head: %s; closing",
                status, ptc_strerror(rc));
        mcp__hconn_close(c, true);
    } else {
        rc = mcp__hconn_write(c, head.p, head.len);
    }
    ptc_buf_free(&head);
    return rc;
}

void mcp__hconn_respond(mcp__hconn_t *c, int status, const char *content_type,
                        const char *extra_headers, const char *body, size_t len)
{
    if (c->closing || c->shutting) return;
    c->owner = NULL;
    if (status >= 400 && c->phase != MCP__PH_WAIT && c->phase != MCP__PH_STREAM)
        c->close_after = true;
    /* RFC 9110 9.3.2: a HEAD answer has the Content-Length GET would have, and no body. The
     * method is only this request's once its request line is parsed (MCP__PH_BODY on). */
    bool head =
        (c->phase == MCP__PH_BODY || c->phase == MCP__PH_WAIT) && c->parser.method == HTTP_HEAD;
    if (write_head(c, status, content_type, extra_headers, false, len) < 0) return;
    if (len > 0 && !head && !c->closing) mcp__hconn_write(c, body, len);
    if (c->closing) return;
    if (c->close_after)
        mcp__hconn_finish(c);
    else
        mcp__hconn_next(c);
}

void mcp__hconn_error(mcp__hconn_t *c, int status, int code, const char *msg,
                      const char *extra_headers)
{
    mcp__hconn_error_id(c, status, NULL, code, msg, extra_headers);
}

void mcp__hconn_error_id(mcp__hconn_t *c, int status, const cJSON *id, int code, const char *msg,
                         const char *extra_headers)
{
    cJSON *e = mcp_jsonrpc_error(id, code, msg, NULL);
    char *text = e != NULL ? cJSON_PrintUnformatted(e) : NULL;
    cJSON_Delete(e);
    mcp__hconn_respond(c, status, "application/json", extra_headers, text ? text : "",
                       text ? strlen(text) : 0);
    cJSON_free(text);
}

void mcp__hconn_stream_begin(mcp__hconn_t *c, const char *extra_headers, void *owner)
{
    if (c->closing || c->shutting) return;
    c->phase = MCP__PH_STREAM;
    c->owner = owner;
    c->chunked = c->parser.http_major == 1 && c->parser.http_minor >= 1;
    /* HTTP/1.0 has no chunks: the end of the stream is the end of the connection. */
    if (!c->chunked) c->close_after = true;
    /* a head that cannot be sent closed the connection, which tells the owner */
    (void)write_head(c, 200, "text/event-stream", extra_headers, true, 0);
}

int mcp__hconn_stream_write(mcp__hconn_t *c, const char *data, size_t len)
{
    if (c->closing || c->shutting || c->phase != MCP__PH_STREAM) return MCP_ECLOSED;
    if (!c->chunked) return mcp__hconn_write(c, data, len);
    char *b = malloc(len + 32);
    if (b == NULL) return MCP_ENOMEM;
    int n = snprintf(b, 32, "%zx\r\n", len);
    memcpy(b + n, data, len);
    memcpy(b + (size_t)n + len, "\r\n", 2);
    int rc = mcp__hconn_write(c, b, (size_t)n + len + 2);
    free(b);
    return rc;
}

void mcp__hconn_stream_end(mcp__hconn_t *c)
{
    if (c->closing || c->shutting || c->phase != MCP__PH_STREAM) return;
    c->owner = NULL;
    if (c->chunked) mcp__hconn_write(c, "0\r\n\r\n", 5);
    if (c->closing) return;
    if (c->close_after)
        mcp__hconn_finish(c);
    else
        mcp__hconn_next(c);
}

void mcp__hconn_wait(mcp__hconn_t *c, void *owner)
{
    c->owner = owner;
}

void mcp__hconn_abort(mcp__hconn_t *c)
{
    mcp__hconn_close(c, false);
}

const char *mcp__hconn_header(const mcp__hconn_t *c, const char *name)
{
    for (size_t i = 0; i < c->n_hdrs; i++)
        if (strcasecmp(ptc_buf_cstr(&c->hbuf) + c->hdrs[i].name, name) == 0)
            return ptc_buf_cstr(&c->hbuf) + c->hdrs[i].value;
    return NULL;
}

/* How many lines of header `name` the request has. */
size_t mcp__hconn_header_lines(const mcp__hconn_t *c, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_hdrs; i++)
        if (strcasecmp(ptc_buf_cstr(&c->hbuf) + c->hdrs[i].name, name) == 0) n++;
    return n;
}

/* --- closing ------------------------------------------------------------------------------ */

static void on_conn_closed(uv_handle_t *h)
{
    mcp__hconn_t *c = h->data;
    if (--c->handles > 0) return;
    mcp_http_server_t *hs = c->hs;
    if (c->tls_on) mbedtls_ssl_free(&c->ssl);
    ptc_buf_free(&c->in);
    ptc_buf_free(&c->tin);
    ptc_buf_free(&c->hbuf);
    free(c->hdrs);
    ptc_buf_free(&c->body);
    free(c);
    hs->refs--;
    mcp__http_maybe_done(hs);
}

void mcp__hconn_close(mcp__hconn_t *c, bool tell_owner)
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

/* --- input -------------------------------------------------------------------------------- */

void mcp__hconn_plain_in(mcp__hconn_t *c, const char *data, size_t n)
{
    if (c->phase == MCP__PH_LINGER) return;
    if (ptc_buf_append(&c->in, data, n) < 0) {
        mcp__hconn_close(c, true);
        return;
    }
    if (ptc_buf_len(&c->in) > PTC_CAP_HTTP_PENDING_INPUT && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    mcp__hconn_process(c);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    mcp__hconn_t *c = h->data;
    (void)suggested;
    buf->base = c->hs->read_buf;
    buf->len = MCP__HTTP_READ_CHUNK;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    mcp__hconn_t *c = s->data;
    if (c->closing) return;
    if (n > 0) {
        if (c->tls_on)
            mcp__hconn_tls_in(c, buf->base, (size_t)n);
        else
            mcp__hconn_plain_in(c, buf->base, (size_t)n);
        return;
    }
    if (n == 0) return;
    uv_read_stop(s);
    c->reading = false;
    if (n != UV_EOF || c->phase == MCP__PH_LINGER || c->phase == MCP__PH_STREAM ||
        c->phase == MCP__PH_HANDSHAKE) {
        /* A client that closes an event stream is gone; one that half-closes while we still
         * owe it a JSON answer is not. */
        mcp__hconn_close(c, true);
        return;
    }
    c->read_eof = true;
    mcp__hconn_process(c);
}

void mcp__hconn_start_reading(mcp__hconn_t *c)
{
    if (c->closing || c->reading || c->read_eof) return;
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read) == 0) c->reading = true;
}
