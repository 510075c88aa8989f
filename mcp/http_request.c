/* http_request.c - the HTTP server's requests: http-parser callbacks with the header, body
 * and target limits, the timeouts, DNS-rebinding and bearer-token checks, /healthz, and the
 * hand-over to the endpoints (transport_http.c). */
#include "http_conn_internal.h"

#include <string.h>
#include <strings.h>

/* --- requests ----------------------------------------------------------------------------- */

static mcp__hconn_t *conn_of(http_parser *p)
{
    return p->data;
}

static bool hbuf_add(mcp__hconn_t *c, const char *p, size_t n)
{
    /* The buffer's spare byte (its cap is one more) is for the NUL that ends the last string. */
    size_t len = ptc_buf_len(&c->hbuf);
    if (len > c->hs->o.max_header_bytes || n > c->hs->o.max_header_bytes - len ||
        ptc_buf_append(&c->hbuf, p, n) < 0) {
        c->fail_status = 431;
        return false;
    }
    return true;
}

static bool hbuf_nul(mcp__hconn_t *c)
{
    return ptc_buf_append(&c->hbuf, "", 1) == 0;
}

static int on_message_begin(http_parser *p)
{
    mcp__hconn_t *c = conn_of(p);
    mcp__hconn_reset_request(c);
    c->resume = false;
    if (c->phase == MCP__PH_IDLE)
        uv_timer_start(&c->timer, mcp__hconn_on_timer, c->hs->o.header_timeout_ms, 0);
    c->phase = MCP__PH_HEADERS;
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
    if (c->phase == MCP__PH_BODY) return 0; /* trailers of a chunked body: ignored */
    if (c->n_hdrs == 0 && !c->in_value && ptc_buf_len(&c->hbuf) == c->url_len) {
        if (!hbuf_nul(c)) return -1; /* ends the URL */
    }
    if (c->in_value || c->n_hdrs == 0) {
        if (c->in_value && !hbuf_nul(c)) return -1; /* ends the previous value */
        if (c->n_hdrs == c->hs->o.max_headers) {
            c->fail_status = 431;
            return -1;
        }
        c->hdrs[c->n_hdrs].name = ptc_buf_len(&c->hbuf);
        c->hdrs[c->n_hdrs].value = 0;
        c->n_hdrs++;
        c->in_value = false;
    }
    return hbuf_add(c, at, n) ? 0 : -1;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    mcp__hconn_t *c = conn_of(p);
    if (c->phase == MCP__PH_BODY) return 0;
    if (!c->in_value) {
        if (!hbuf_nul(c)) return -1; /* ends the name */
        c->hdrs[c->n_hdrs - 1].value = ptc_buf_len(&c->hbuf);
        c->in_value = true;
    }
    return hbuf_add(c, at, n) ? 0 : -1;
}

static int on_headers_complete(http_parser *p)
{
    mcp__hconn_t *c = conn_of(p);
    if (c->n_hdrs == 0 && ptc_buf_len(&c->hbuf) == c->url_len && !hbuf_nul(c)) return -1;
    if (c->in_value && !hbuf_nul(c)) return -1;
    if (c->n_hdrs > 0 && !c->in_value) {
        /* A name without a value: give it an empty one. */
        if (!hbuf_nul(c)) return -1;
        c->hdrs[c->n_hdrs - 1].value = ptc_buf_len(&c->hbuf) - 1;
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
        mcp__hconn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    c->phase = MCP__PH_BODY;
    uv_timer_start(&c->timer, mcp__hconn_on_timer, c->hs->o.body_timeout_ms, 0);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    mcp__hconn_t *c = conn_of(p);
    if (ptc_buf_append(&c->body, at, n) < 0 || ptc_buf_len(&c->body) > c->hs->o.max_message_bytes) {
        c->fail_status = 413;
        return -1;
    }
    return 0;
}

static int on_message_complete(http_parser *p)
{
    mcp__hconn_t *c = conn_of(p);
    c->keep_alive = http_should_keep_alive(p) != 0;
    c->phase = MCP__PH_WAIT;
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
        .target = ptc_buf_cstr(&c->hbuf),
        .path_len = mcp__http_path_len(ptc_buf_cstr(&c->hbuf)),
        .body = ptc_buf_cstr(&c->body),
        .body_len = ptc_buf_len(&c->body),
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
        if (mcp__hconn_header_lines(c, single[i]) > 1) {
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

void mcp__hconn_process(mcp__hconn_t *c)
{
    if (c->processing) return;
    c->processing = true;
    size_t off = 0;
    while (!c->closing && !c->shutting && off < ptc_buf_len(&c->in) &&
           (c->phase == MCP__PH_IDLE || c->phase == MCP__PH_HEADERS || c->phase == MCP__PH_BODY)) {
        size_t n = http_parser_execute(&c->parser, &settings, ptc_buf_cstr(&c->in) + off,
                                       ptc_buf_len(&c->in) - off);
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
            off = ptc_buf_len(&c->in);
            break;
        }
    }
    if (!c->closing) {
        ptc_buf_consume(&c->in, off);
        if (c->read_eof && !c->shutting && ptc_buf_len(&c->in) == 0) {
            /* The client half-closed: answer what it asked, then close. */
            if (c->phase == MCP__PH_HEADERS || c->phase == MCP__PH_BODY) {
                if (ptc_buf_len(&c->hbuf) > 0 || c->phase == MCP__PH_BODY)
                    fail(c, 400);
                else
                    mcp__hconn_close(c, true);
            } else if (c->phase == MCP__PH_IDLE) {
                mcp__hconn_finish(c); /* after the last answer has been written */
            }
        }
        if (!c->closing && !c->reading && ptc_buf_len(&c->in) < PTC_CAP_HTTP_PENDING_INPUT / 2)
            mcp__hconn_start_reading(c);
    }
    c->processing = false;
}

void mcp__hconn_next(mcp__hconn_t *c)
{
    mcp__hconn_reset_request(c);
    c->phase = MCP__PH_IDLE;
    if (c->hs->stopping) {
        mcp__hconn_finish(c);
        return;
    }
    http_parser_pause(&c->parser, 0);
    mcp__hconn_start_reading(c);
    if (ptc_buf_len(&c->in) > 0 || c->read_eof) {
        /* Pipelined input (or a half-close) is handled from a fresh loop turn: we may be inside
         * the session that just answered, which must not be entered again from here. */
        c->resume = true;
        uv_timer_start(&c->timer, mcp__hconn_on_timer, 0, 0);
        return;
    }
    uv_timer_start(&c->timer, mcp__hconn_on_timer, c->hs->o.idle_timeout_ms, 0);
}

void mcp__hconn_on_timer(uv_timer_t *t)
{
    mcp__hconn_t *c = t->data;
    if (c->resume) {
        c->resume = false;
        uv_timer_start(&c->timer, mcp__hconn_on_timer, c->hs->o.idle_timeout_ms, 0);
        mcp__hconn_process(c);
        return;
    }
    switch (c->phase) {
    case MCP__PH_HEADERS:
    case MCP__PH_BODY:
        mcp_log(c->hs->lg, MCP_LOG_INFO, "http: a client was too slow sending its request (408)");
        fail(c, 408);
        break;
    case MCP__PH_WAIT:
    case MCP__PH_STREAM:
        break;
    case MCP__PH_HANDSHAKE:
    case MCP__PH_IDLE:
    case MCP__PH_LINGER:
        mcp__hconn_close(c, true);
        break;
    }
}
