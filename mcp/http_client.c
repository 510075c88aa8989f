/*
 * http_client.c - the outbound HTTP(S)/1.1 client: libuv for DNS, TCP and timers, mbedTLS over
 * memory BIOs for TLS, http-parser for the response. This file holds the client, request
 * validation, and finishing and tearing down requests; the connection is in http_client_conn.c,
 * the response parser in http_client_response.c, TLS in http_client_tls.c.
 *
 * One request is one connection (Connection: close). Its life:
 *   uv_getaddrinfo -> uv_tcp_connect (each address in turn) -> [TLS handshake] -> write the
 *   request -> read and parse -> finish() -> handles closed -> freed in the last close callback.
 * finish() (mcp__http_req_finish) runs the user callback exactly once and starts the teardown;
 * nothing touches the client after it, so the client may be freed from inside any callback.
 */
#include "http_client_internal.h"

#include <mbedtls/error.h>
#include <mbedtls/version.h>

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
/* Ciphertext queued for one write; a TLS record adds at most a few hundred bytes. */
#define MCP_HTTP_MAX_TLS_OUT (MCP_HTTP_MAX_REQUEST_BODY + (size_t)1024 * 1024)

void mcp__hbuf_init(mcp__hbuf_t *b, size_t max)
{
    b->p = NULL;
    b->len = b->cap = 0;
    b->max = max;
}

void mcp__hbuf_free(mcp__hbuf_t *b)
{
    free(b->p);
    mcp__hbuf_init(b, b->max);
}

int mcp__hbuf_append(mcp__hbuf_t *b, const void *data, size_t n)
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

int mcp__hbuf_str(mcp__hbuf_t *b, const char *s)
{
    return mcp__hbuf_append(b, s, strlen(s));
}

/* ---------------------------------------------------------------------------------------- */
/* Teardown                                                                                  */

void mcp__http_req_maybe_free(mcp_http_req_t *r)
{
    if (!r->done || r->open_handles > 0 || r->gai_pending) return;
    if (r->addrs != NULL) uv_freeaddrinfo(r->addrs);
    mcp__http_url_free(&r->url);
    mcp__hbuf_free(&r->request);
    mcp__hbuf_free(&r->out);
    mcp__hbuf_free(&r->body);
    mcp__hbuf_free(&r->content_type);
    mcp__hbuf_free(&r->location);
    mcp__hbuf_free(&r->session_id);
    free(r->rbuf);
    free(r);
}

static void on_handle_closed(uv_handle_t *h)
{
    mcp_http_req_t *r = h->data;
    if (h == (uv_handle_t *)&r->tcp) r->tcp_open = false;
    r->open_handles--;
    mcp__http_req_maybe_free(r);
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

void mcp__http_req_finish(mcp_http_req_t *r, int err, const mcp_http_response_t *resp,
                          const char *msg)
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
    mcp__http_req_maybe_free(r);
}

void mcp__http_req_fail(mcp_http_req_t *r, int err, const char *fmt, ...)
{
    if (r->done) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    mcp__http_req_finish(r, err, NULL, r->msg);
}

void mcp__http_req_succeed(mcp_http_req_t *r)
{
    if (r->body.p == NULL && mcp__hbuf_append(&r->body, "", 0) < 0) {
        mcp__http_req_fail(r, MCP_ENOMEM, "out of memory while finishing the response from %s",
                           r->where);
        return;
    }
    mcp_http_response_t resp = {
        .status = r->status,
        .body = r->body.p,
        .body_len = r->body.len,
        .content_type = r->content_type.p,
        .session_id = r->session_id.p,
    };
    mcp__http_req_finish(r, MCP_OK, &resp, NULL);
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
    int rc = mcp__http_client_load_ca(c, opts->ca_file);
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
        mcp__http_req_finish(r, MCP_ECANCELED, NULL, r->msg);
    }
    client_destroy(c);
}

void mcp_http_cancel(mcp_http_req_t *r)
{
    if (r == NULL || r->done) return;
    mcp__http_req_fail(r, MCP_ECANCELED, "request to %s cancelled", r->where);
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
    mcp__hbuf_t *b = &r->request;
    char line[64];
    int rc = mcp__hbuf_str(b, method);
    if (rc == 0) rc = mcp__hbuf_str(b, " ");
    if (rc == 0) rc = mcp__hbuf_str(b, r->url.target);
    if (rc == 0) rc = mcp__hbuf_str(b, " HTTP/1.1\r\nHost: ");
    if (rc == 0 && r->url.ipv6) rc = mcp__hbuf_str(b, "[");
    if (rc == 0) rc = mcp__hbuf_str(b, r->url.host);
    if (rc == 0 && r->url.ipv6) rc = mcp__hbuf_str(b, "]");
    if (rc == 0 && !r->url.default_port) {
        snprintf(line, sizeof line, ":%u", (unsigned)r->url.port);
        rc = mcp__hbuf_str(b, line);
    }
    if (rc == 0) rc = mcp__hbuf_str(b, "\r\n");
    if (rc == 0 && !has_header(h, n, "user-agent"))
        rc = mcp__hbuf_str(b, "User-Agent: ptc-mcp/" PTC_VERSION "\r\n");
    if (rc == 0 && !has_header(h, n, "accept")) rc = mcp__hbuf_str(b, "Accept: */*\r\n");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = mcp__hbuf_str(b, h[i].name);
        if (rc == 0) rc = mcp__hbuf_str(b, ": ");
        if (rc == 0) rc = mcp__hbuf_str(b, h[i].value);
        if (rc == 0) rc = mcp__hbuf_str(b, "\r\n");
    }
    bool wants_length = body != NULL || body_len > 0 || strcmp(method, "POST") == 0 ||
                        strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0;
    if (rc == 0 && wants_length) {
        snprintf(line, sizeof line, "Content-Length: %zu\r\n", body_len);
        rc = mcp__hbuf_str(b, line);
    }
    if (rc == 0) rc = mcp__hbuf_str(b, "Connection: close\r\n\r\n");
    if (rc == 0 && body_len > 0) rc = mcp__hbuf_append(b, body, body_len);
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
    r->body_sink = mcp__http_req_buffer_body;
    mcp__hbuf_init(&r->request, MCP_HTTP_MAX_REQUEST_BODY + MCP__HTTP_MAX_URL +
                                    (size_t)MCP_HTTP_MAX_USER_HEADERS *
                                        (MCP_HTTP_MAX_HEADER_NAME + MCP_HTTP_MAX_HEADER_VALUE + 4) +
                                    1024);
    mcp__hbuf_init(&r->out, MCP_HTTP_MAX_TLS_OUT);
    mcp__hbuf_init(&r->body, c->max_response_bytes);
    mcp__hbuf_init(&r->content_type, MCP_HTTP_MAX_KEPT_VALUE);
    mcp__hbuf_init(&r->location, MCP_HTTP_MAX_KEPT_VALUE);
    mcp__hbuf_init(&r->session_id, MCP_HTTP_MAX_KEPT_VALUE);
    http_parser_init(&r->parser, HTTP_RESPONSE);
    r->parser.data = r;
    r->rbuf = malloc(MCP_HTTP_READ_CHUNK);
    rc =
        r->rbuf == NULL ? MCP_ENOMEM : build_request(r, method, headers, n_headers, body, body_len);
    if (rc < 0) {
        r->done = true;
        mcp__http_req_maybe_free(r);
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
    rc = uv_timer_start(&r->connect_timer, mcp__http_req_on_connect_timeout, r->connect_timeout_ms,
                        0);
    if (rc == 0)
        rc =
            uv_timer_start(&r->total_timer, mcp__http_req_on_total_timeout, r->total_timeout_ms, 0);
    /* The lookup runs on libuv's thread pool, never on the loop. */
    if (rc == 0)
        rc = uv_getaddrinfo(c->loop, &r->gai, mcp__http_req_on_resolved, r->url.host, port, &hints);
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
