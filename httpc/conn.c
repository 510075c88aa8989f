/* conn.c - one request's connection for the outbound HTTP client: DNS, connecting
 * to each address in turn, the connect and total timeouts, reading, and writing (plain bytes,
 * or the ciphertext mbedTLS queued). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct write_req {
    uv_write_t w;
    ptc_http_req_t *r;
    char *bytes; /* owned */
} write_req_t;

/* ---------------------------------------------------------------------------------------- */
/* Writing                                                                                   */

static void on_written(uv_write_t *w, int status)
{
    write_req_t *wr = (write_req_t *)w;
    ptc_http_req_t *r = wr->r;
    free(wr->bytes);
    free(wr);
    /* A server may answer and close before reading all of a request; the answer counts. */
    if (status < 0 && status != UV_ECANCELED && !r->done && !r->started)
        ptc__http_req_fail(r, PTC_HTTP_EIO, "sending the request to %s failed: %s", r->where,
                           uv_strerror(status));
}

/* Hands the bytes of b to libuv (the write request takes the buffer; b is left empty). */
static int write_buf(ptc_http_req_t *r, ptc_buf_t *b)
{
    if (b->len == 0) return PTC_HTTP_OK;
    write_req_t *wr = calloc(1, sizeof *wr);
    if (wr == NULL) return PTC_HTTP_ENOMEM;
    wr->r = r;
    wr->bytes = b->p;
    uv_buf_t ub = uv_buf_init(b->p, (unsigned)b->len);
    ptc_buf_init(b, b->max);
    int rc = uv_write(&wr->w, (uv_stream_t *)&r->tcp, &ub, 1, on_written);
    if (rc < 0) {
        free(wr->bytes);
        free(wr);
        return rc;
    }
    return PTC_HTTP_OK;
}

/* Sends what mbedTLS queued; false (and the request failed) if that went wrong. */
bool ptc__http_req_flush_out(ptc_http_req_t *r)
{
    int rc = write_buf(r, &r->out);
    if (rc < 0)
        ptc__http_req_fail(r, PTC_HTTP_EIO, "sending to %s failed: %s", r->where,
                           rc == PTC_HTTP_ENOMEM ? "out of memory" : uv_strerror(rc));
    return rc == PTC_HTTP_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Connection                                                                                */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    ptc_http_req_t *r = h->data;
    *buf = uv_buf_init(r->rbuf, PTC_HTTP_READ_CHUNK);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    ptc_http_req_t *r = s->data;
    if (r->done || nread == 0) return;
    if (nread < 0 && nread != UV_EOF) {
        ptc__http_req_fail(r, PTC_HTTP_EIO, "reading the response from %s failed: %s", r->where,
                           uv_strerror((int)nread));
        return;
    }
    if (nread == UV_EOF) r->eof = true;
    if (r->url.tls) {
        r->tls_in = nread > 0 ? buf->base : NULL;
        r->tls_in_len = nread > 0 ? (size_t)nread : 0;
        ptc__http_req_tls_pump(r);
        r->tls_in_len = 0;
    } else if (nread == UV_EOF) {
        ptc__http_req_on_eof(r);
    } else {
        ptc__http_req_feed(r, buf->base, (size_t)nread);
    }
}

static void try_connect(ptc_http_req_t *r);

static void on_retry_closed(uv_handle_t *h)
{
    ptc_http_req_t *r = h->data;
    r->tcp_open = false;
    r->open_handles--;
    if (r->done)
        ptc__http_req_maybe_free(r);
    else
        try_connect(r);
}

static void next_address(ptc_http_req_t *r, int err)
{
    r->last_connect_err = err;
    r->cur_addr = r->cur_addr->ai_next;
    /* The handle cannot be reused after a failed connect; a fresh one follows its close. */
    uv_close((uv_handle_t *)&r->tcp, on_retry_closed);
}

static void on_connect(uv_connect_t *cr, int status)
{
    ptc_http_req_t *r = cr->data;
    if (r->done) return; /* the handle is closing; this is its UV_ECANCELED */
    if (status < 0) {
        next_address(r, status);
        return;
    }
    int rc = uv_read_start((uv_stream_t *)&r->tcp, on_alloc, on_read);
    if (rc < 0) {
        ptc__http_req_fail(r, PTC_HTTP_EIO, "reading from %s failed: %s", r->where,
                           uv_strerror(rc));
        return;
    }
    if (r->url.tls) {
        ptc__http_req_start_tls(r);
        return;
    }
    uv_timer_stop(&r->connect_timer);
    rc = write_buf(r, &r->request);
    if (rc < 0)
        ptc__http_req_fail(r, PTC_HTTP_EIO, "sending the request to %s failed: %s", r->where,
                           rc == PTC_HTTP_ENOMEM ? "out of memory" : uv_strerror(rc));
}

static void try_connect(ptc_http_req_t *r)
{
    ptc_http_client_t *c = r->client;
    if (r->cur_addr == NULL) {
        ptc__http_req_fail(r, PTC_HTTP_ECONNECT, "cannot connect to %s: %s (%d address%s tried)",
                           r->where, uv_strerror(r->last_connect_err), r->tried,
                           r->tried == 1 ? "" : "es");
        return;
    }
    int rc = uv_tcp_init(c->loop, &r->tcp);
    if (rc < 0) {
        ptc__http_req_fail(r, PTC_HTTP_EIO, "cannot create a socket for %s: %s", r->where,
                           uv_strerror(rc));
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

void ptc__http_req_on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
    ptc_http_req_t *r = g->data;
    r->gai_pending = false;
    if (r->done) {
        if (res != NULL) uv_freeaddrinfo(res);
        ptc__http_req_maybe_free(r);
        return;
    }
    if (status < 0 || res == NULL) {
        if (res != NULL) uv_freeaddrinfo(res);
        ptc__http_req_fail(r, PTC_HTTP_ERESOLVE, "cannot resolve host '%s': %s", r->url.host,
                           status < 0 ? uv_strerror(status) : "no address");
        return;
    }
    r->addrs = r->cur_addr = res;
    r->last_connect_err = UV_ECONNREFUSED;
    try_connect(r);
}

void ptc__http_req_on_connect_timeout(uv_timer_t *t)
{
    ptc_http_req_t *r = t->data;
    ptc__http_req_fail(
        r, PTC_HTTP_ETIMEDOUT,
        "connecting to %s timed out after %u ms (name lookup, TCP and TLS handshake); check "
        "the URL or that the server is up",
        r->where, r->connect_timeout_ms);
}

void ptc__http_req_on_total_timeout(uv_timer_t *t)
{
    ptc_http_req_t *r = t->data;
    ptc__http_req_fail(r, PTC_HTTP_ETIMEDOUT, "no complete response from %s within %u ms", r->where,
                       r->total_timeout_ms);
}
