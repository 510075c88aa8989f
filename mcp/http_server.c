/* http_server.c - the HTTP/1.1 server under the MCP endpoints: a libuv TCP listener, accepting
 * connections (within the connection and descriptor limits), start, stop and free. A
 * connection's output and input are in http_conn.c, its requests (http-parser, limits,
 * timeouts, DNS-rebinding and bearer-token checks, /healthz) in http_request.c, the optional
 * TLS layer in http_tls.c. The endpoints live in transport_http.c. */
#include "http_conn_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

/* Descriptors kept for everything but connections (runs, pipes, downstream servers). */
#define RESERVED_FDS 256

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
    mcp__hconn_bufs_init(c);
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
        mcp__hconn_close(c, false);
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
            mcp__hconn_close(c, false);
        }
        return;
    }
    if (hs->tls) {
        if (mcp__hconn_tls_begin(c) < 0) {
            mcp__hconn_close(c, false);
            return;
        }
    } else {
        c->phase = MCP__PH_HEADERS;
    }
    uv_timer_start(&c->timer, mcp__hconn_on_timer, hs->o.header_timeout_ms, 0);
    mcp__hconn_start_reading(c);
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
    hs->read_buf = malloc(MCP__HTTP_READ_CHUNK);
    if (hs->host == NULL || hs->read_buf == NULL ||
        (opts->auth_token != NULL && opts->auth_token[0] && hs->token == NULL)) {
        rc = MCP_ENOMEM;
        goto fail;
    }
    hs->token_len = hs->token ? strlen(hs->token) : 0;
    if (hs->token != NULL) mcp__credential_digest(hs->token, hs->token_len, hs->token_digest);
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
    if (opts->tls_cert_file != NULL && (rc = mcp__http_setup_tls(hs, opts)) < 0) goto fail;

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
        if (c->phase != MCP__PH_WAIT && c->phase != MCP__PH_STREAM && c->phase != MCP__PH_LINGER)
            mcp__hconn_close(c, true);
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
        mcp__hconn_close(h->conns, false);
    uv_close((uv_handle_t *)&h->tick, on_server_handle_closed);
    uv_close((uv_handle_t *)&h->reap, on_server_handle_closed);
}
