/*
 * client.c - the outbound HTTP(S)/1.1 client: libuv for DNS, TCP and timers, mbedTLS over
 * memory BIOs for TLS, http-parser for the response. This file holds the client, request
 * validation, and finishing and tearing down requests; the connection is in conn.c, the
 * response parser in response.c, TLS in tls.c.
 *
 * One request is one connection (Connection: close). Its life:
 *   uv_getaddrinfo -> uv_tcp_connect (each address in turn) -> [TLS handshake] -> write the
 *   request -> read and parse -> finish() -> handles closed -> freed in the last close callback.
 * finish() (ptc__http_req_finish) runs the user callback exactly once and starts the teardown;
 * nothing touches the client after it, so the client may be freed from inside any callback.
 */
#include "internal.h"

#include <mbedtls/error.h>
#include <mbedtls/version.h>

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if MBEDTLS_VERSION_NUMBER >= 0x03000000 && defined(MBEDTLS_PSA_CRYPTO_C)
#include <psa/crypto.h>
#define PTC__HTTP_NEED_PSA 1
#else
#define PTC__HTTP_NEED_PSA 0
#endif

void ptc__http_log(const ptc_http_client_t *c, int level, const char *fmt, ...)
{
    if (c == NULL || c->log == NULL) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->log(c->log_data, level, line);
}

const char *ptc_http_strerror(int err)
{
    switch (err) {
        PTC_HTTP_ERRORS(PTC_ERR_CASE)
    }
    return ptc_strerror(err);
}

/* ---------------------------------------------------------------------------------------- */
/* Teardown                                                                                  */

void ptc__http_req_maybe_free(ptc_http_req_t *r)
{
    if (!r->done || r->open_handles > 0 || r->gai_pending) return;
    if (r->addrs != NULL) uv_freeaddrinfo(r->addrs);
    ptc__http_url_free(&r->url);
    ptc_buf_free(&r->request);
    ptc_buf_free(&r->out);
    ptc_buf_free(&r->body);
    ptc_buf_free(&r->content_type);
    ptc_buf_free(&r->location);
    ptc_buf_free(&r->session_id);
    free(r->rbuf);
    free(r);
}

static void on_handle_closed(uv_handle_t *h)
{
    ptc_http_req_t *r = h->data;
    if (h == (uv_handle_t *)&r->tcp) r->tcp_open = false;
    r->open_handles--;
    ptc__http_req_maybe_free(r);
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h)) uv_close(h, on_handle_closed);
}

static void unlink_req(ptc_http_req_t *r)
{
    ptc_http_client_t *c = r->client;
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
static void teardown(ptc_http_req_t *r)
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

void ptc__http_req_finish(ptc_http_req_t *r, int err, const ptc_http_response_t *resp,
                          const char *msg)
{
    if (r->done) return;
    const ptc_http_client_t *c = r->client;
    if (err < 0)
        ptc__http_log(c, PTC_HTTP_LOG_DEBUG, "http %s: %s: %s", r->where, ptc_http_strerror(err),
                      msg);
    else
        ptc__http_log(c, PTC_HTTP_LOG_DEBUG, "http %s: status %d, %zu body bytes", r->where,
                      resp->status, resp->body_len);
    teardown(r);
    /* Close callbacks only run on a later loop turn, so r outlives the callback. */
    r->cb(r->data, err, err < 0 ? NULL : resp, err < 0 ? msg : NULL);
    ptc__http_req_maybe_free(r);
}

void ptc__http_req_fail(ptc_http_req_t *r, int err, const char *fmt, ...)
{
    if (r->done) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    /* A failure has no response: with a code that is not one, finish would read it. */
    ptc__http_req_finish(r, err < 0 ? err : PTC_HTTP_EIO, NULL, r->msg);
}

void ptc__http_req_succeed(ptc_http_req_t *r)
{
    if (r->body.p == NULL && ptc_buf_append(&r->body, "", 0) < 0) {
        ptc__http_req_fail(r, PTC_HTTP_ENOMEM, "out of memory while finishing the response from %s",
                           r->where);
        return;
    }
    ptc_http_response_t resp = {
        .status = r->status,
        .body = r->body.p,
        .body_len = r->body.len,
        .content_type = r->content_type.p,
        .session_id = r->session_id.p,
    };
    ptc__http_req_finish(r, PTC_HTTP_OK, &resp, NULL);
}

/* ---------------------------------------------------------------------------------------- */
/* Public API                                                                                */

void ptc_http_client_opts_default(ptc_http_client_opts_t *opts)
{
    opts->ca_file = NULL;
    opts->connect_timeout_ms = PTC_HTTP_DEFAULT_CONNECT_MS;
    opts->total_timeout_ms = PTC_HTTP_DEFAULT_TOTAL_MS;
    opts->max_response_bytes = PTC_HTTP_DEFAULT_MAX_BODY;
}

static void client_destroy(ptc_http_client_t *c)
{
    mbedtls_ssl_config_free(&c->conf);
    mbedtls_x509_crt_free(&c->ca);
    mbedtls_ctr_drbg_free(&c->drbg);
    mbedtls_entropy_free(&c->entropy);
    free(c);
}

int ptc_http_client_new(uv_loop_t *loop, const ptc_http_client_opts_t *opts, ptc_http_log_fn log,
                        void *log_data, ptc_http_client_t **out)
{
    if (loop == NULL || out == NULL) return PTC_HTTP_EINVAL;
    ptc_http_client_opts_t def;
    if (opts == NULL) {
        ptc_http_client_opts_default(&def);
        opts = &def;
    }
    ptc_http_client_t *c = calloc(1, sizeof *c);
    if (c == NULL) return PTC_HTTP_ENOMEM;
    c->loop = loop;
    c->log = log;
    c->log_data = log_data;
    c->connect_timeout_ms =
        opts->connect_timeout_ms ? opts->connect_timeout_ms : PTC_HTTP_DEFAULT_CONNECT_MS;
    c->total_timeout_ms =
        opts->total_timeout_ms ? opts->total_timeout_ms : PTC_HTTP_DEFAULT_TOTAL_MS;
    c->max_response_bytes =
        opts->max_response_bytes ? opts->max_response_bytes : PTC_HTTP_DEFAULT_MAX_BODY;
    mbedtls_entropy_init(&c->entropy);
    mbedtls_ctr_drbg_init(&c->drbg);
    mbedtls_x509_crt_init(&c->ca);
    mbedtls_ssl_config_init(&c->conf);

#if PTC__HTTP_NEED_PSA
    /* mbedTLS 3 runs its TLS 1.3 and part of 1.2 through PSA, which needs this first. */
    if (psa_crypto_init() != PSA_SUCCESS) {
        ptc__http_log(c, PTC_HTTP_LOG_ERROR, "cannot initialise mbedTLS's PSA crypto");
        client_destroy(c);
        return PTC_HTTP_ETLS;
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
        ptc__http_log(c, PTC_HTTP_LOG_ERROR, "cannot set up TLS: %s", err);
        client_destroy(c);
        return PTC_HTTP_ETLS;
    }
    int rc = ptc__http_client_load_ca(c, opts->ca_file);
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
    return PTC_HTTP_OK;
}

void ptc_http_client_free(ptc_http_client_t *c)
{
    if (c == NULL || c->freeing) return;
    c->freeing = true;
    while (c->reqs != NULL) {
        ptc_http_req_t *r = c->reqs;
        snprintf(r->msg, sizeof r->msg, "request to %s cancelled: the HTTP client was closed",
                 r->where);
        /* ptc__http_req_finish unlinks r from c->reqs (r->client is c, which clang-tidy's analyzer
         * does not see), so no freed request stays: a false positive */
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
        ptc__http_req_finish(r, PTC_HTTP_ECANCELED, NULL, r->msg);
    }
    client_destroy(c);
}

void ptc_http_cancel(ptc_http_req_t *r)
{
    if (r == NULL || r->done) return;
    ptc__http_req_fail(r, PTC_HTTP_ECANCELED, "request to %s cancelled", r->where);
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

static bool has_header(const ptc_http_header_t *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(h[i].name, name) == 0) return true;
    return false;
}

static int check_headers(const ptc_http_client_t *c, const ptc_http_header_t *h, size_t n)
{
    if (n > PTC_HTTP_MAX_USER_HEADERS) {
        ptc__http_log(c, PTC_HTTP_LOG_WARNING, "http: more than %d request headers",
                      PTC_HTTP_MAX_USER_HEADERS);
        return PTC_HTTP_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (h[i].name == NULL || h[i].value == NULL ||
            !is_token(h[i].name, PTC_HTTP_MAX_HEADER_NAME) || reserved_header(h[i].name)) {
            ptc__http_log(c, PTC_HTTP_LOG_WARNING,
                          "http: request header %zu has a bad or reserved name", i);
            return PTC_HTTP_EINVAL;
        }
        size_t vlen = strlen(h[i].value);
        /* CR or LF in a value would let it inject headers. */
        if (vlen > PTC_HTTP_MAX_HEADER_VALUE || strpbrk(h[i].value, "\r\n") != NULL) {
            ptc__http_log(c, PTC_HTTP_LOG_WARNING,
                          "http: value of header '%s' is too long or has a line "
                          "break",
                          h[i].name);
            return PTC_HTTP_EINVAL;
        }
    }
    return PTC_HTTP_OK;
}

static int build_request(ptc_http_req_t *r, const char *method, const ptc_http_header_t *h,
                         size_t n, const char *body, size_t body_len)
{
    ptc_buf_t *b = &r->request;
    char line[64];
    int rc = ptc_buf_str(b, method);
    if (rc == 0) rc = ptc_buf_str(b, " ");
    if (rc == 0) rc = ptc_buf_str(b, r->url.target);
    if (rc == 0) rc = ptc_buf_str(b, " HTTP/1.1\r\nHost: ");
    if (rc == 0 && r->url.ipv6) rc = ptc_buf_str(b, "[");
    if (rc == 0) rc = ptc_buf_str(b, r->url.host);
    if (rc == 0 && r->url.ipv6) rc = ptc_buf_str(b, "]");
    if (rc == 0 && !r->url.default_port) {
        snprintf(line, sizeof line, ":%u", (unsigned)r->url.port);
        rc = ptc_buf_str(b, line);
    }
    if (rc == 0) rc = ptc_buf_str(b, "\r\n");
    if (rc == 0 && !has_header(h, n, "user-agent"))
        rc = ptc_buf_str(b, "User-Agent: ptc-mcp/" PTC_VERSION "\r\n");
    if (rc == 0 && !has_header(h, n, "accept")) rc = ptc_buf_str(b, "Accept: */*\r\n");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = ptc_buf_str(b, h[i].name);
        if (rc == 0) rc = ptc_buf_str(b, ": ");
        if (rc == 0) rc = ptc_buf_str(b, h[i].value);
        if (rc == 0) rc = ptc_buf_str(b, "\r\n");
    }
    bool wants_length = body != NULL || body_len > 0 || strcmp(method, "POST") == 0 ||
                        strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0;
    if (rc == 0 && wants_length) {
        snprintf(line, sizeof line, "Content-Length: %zu\r\n", body_len);
        rc = ptc_buf_str(b, line);
    }
    if (rc == 0) rc = ptc_buf_str(b, "Connection: close\r\n\r\n");
    if (rc == 0 && body_len > 0) rc = ptc_buf_append(b, body, body_len);
    return rc;
}

static int start_request(ptc_http_client_t *c, const char *method, const char *url,
                         const ptc_http_header_t *headers, size_t n_headers, const char *body,
                         size_t body_len, ptc_http_chunk_fn on_chunk, ptc_http_cb cb, void *data,
                         ptc_http_req_t **out);

int ptc_http_request(ptc_http_client_t *c, const char *method, const char *url,
                     const ptc_http_header_t *headers, size_t n_headers, const char *body,
                     size_t body_len, ptc_http_cb cb, void *data, ptc_http_req_t **out)
{
    return start_request(c, method, url, headers, n_headers, body, body_len, NULL, cb, data, out);
}

int ptc_http_request_stream(ptc_http_client_t *c, const char *method, const char *url,
                            const ptc_http_header_t *headers, size_t n_headers, const char *body,
                            size_t body_len, ptc_http_chunk_fn on_chunk, ptc_http_cb cb, void *data,
                            ptc_http_req_t **out)
{
    if (on_chunk == NULL) {
        if (out != NULL) *out = NULL;
        return PTC_HTTP_EINVAL;
    }
    return start_request(c, method, url, headers, n_headers, body, body_len, on_chunk, cb, data,
                         out);
}

static int start_request(ptc_http_client_t *c, const char *method, const char *url,
                         const ptc_http_header_t *headers, size_t n_headers, const char *body,
                         size_t body_len, ptc_http_chunk_fn on_chunk, ptc_http_cb cb, void *data,
                         ptc_http_req_t **out)
{
    if (out != NULL) *out = NULL;
    if (c == NULL || method == NULL || url == NULL || cb == NULL ||
        (headers == NULL && n_headers > 0) || (body == NULL && body_len > 0))
        return PTC_HTTP_EINVAL;
    if (c->freeing) return PTC_HTTP_ESTATE;
    if (c->n_reqs >= PTC_HTTP_MAX_IN_FLIGHT) {
        ptc__http_log(c, PTC_HTTP_LOG_WARNING, "http: %d requests already in flight",
                      PTC_HTTP_MAX_IN_FLIGHT);
        return PTC_HTTP_EBUSY;
    }
    if (!is_token(method, PTC_HTTP_MAX_METHOD)) {
        ptc__http_log(c, PTC_HTTP_LOG_WARNING, "http: bad method name");
        return PTC_HTTP_EINVAL;
    }
    if (body_len > PTC_HTTP_MAX_REQUEST_BODY) return PTC_HTTP_ETOOBIG;
    int rc = check_headers(c, headers, n_headers);
    if (rc < 0) return rc;

    ptc_http_req_t *r = calloc(1, sizeof *r);
    if (r == NULL) return PTC_HTTP_ENOMEM;
    const char *why = NULL;
    rc = ptc__http_url_parse(url, &r->url, &why);
    if (rc < 0) {
        ptc__http_log(c, PTC_HTTP_LOG_WARNING, "http: bad URL: %s", why ? why : "?");
        ptc__http_url_free(&r->url);
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
    r->on_chunk = on_chunk;
    r->body_sink = on_chunk != NULL ? ptc__http_req_stream_body : ptc__http_req_buffer_body;
    ptc_buf_init(&r->request, PTC_HTTP_MAX_REQUEST_BODY + PTC__HTTP_MAX_URL +
                                  (size_t)PTC_HTTP_MAX_USER_HEADERS *
                                      (PTC_HTTP_MAX_HEADER_NAME + PTC_HTTP_MAX_HEADER_VALUE + 4) +
                                  1024);
    ptc_buf_init(&r->out, PTC_HTTP_MAX_TLS_OUT);
    ptc_buf_init(&r->body, c->max_response_bytes);
    ptc_buf_init(&r->content_type, PTC_HTTP_MAX_KEPT_VALUE);
    ptc_buf_init(&r->location, PTC_HTTP_MAX_KEPT_VALUE);
    ptc_buf_init(&r->session_id, PTC_HTTP_MAX_KEPT_VALUE);
    http_parser_init(&r->parser, HTTP_RESPONSE);
    r->parser.data = r;
    r->rbuf = malloc(PTC_HTTP_READ_CHUNK);
    rc = r->rbuf == NULL ? PTC_HTTP_ENOMEM
                         : build_request(r, method, headers, n_headers, body, body_len);
    if (rc < 0) {
        r->done = true;
        ptc__http_req_maybe_free(r);
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
    rc = uv_timer_start(&r->connect_timer, ptc__http_req_on_connect_timeout, r->connect_timeout_ms,
                        0);
    if (rc == 0 && on_chunk == NULL) /* a stream lasts as long as its ends want */
        rc =
            uv_timer_start(&r->total_timer, ptc__http_req_on_total_timeout, r->total_timeout_ms, 0);
    /* The lookup runs on libuv's thread pool, never on the loop. */
    if (rc == 0)
        rc = uv_getaddrinfo(c->loop, &r->gai, ptc__http_req_on_resolved, r->url.host, port, &hints);
    if (rc < 0) {
        ptc__http_log(c, PTC_HTTP_LOG_WARNING, "http: cannot start the request to %s: %s", r->where,
                      uv_strerror(rc));
        r->client = NULL;
        teardown(r); /* no callback: the caller learns it from the return value */
        return rc == UV_ENOMEM ? PTC_HTTP_ENOMEM : PTC_HTTP_EIO;
    }
    r->gai_pending = true;
    r->next = c->reqs;
    if (c->reqs != NULL) c->reqs->prev = r;
    c->reqs = r;
    c->n_reqs++;
    if (out != NULL) *out = r;
    ptc__http_log(c, PTC_HTTP_LOG_DEBUG, "http %s %s", method, url);
    return PTC_HTTP_OK;
}
