/*
 * test_http_server.c - the HTTP server's limits and timers with small values: slow headers and
 * bodies get 408, sessions and connections past their limit get 503, an idle session expires,
 * and a stop ends everything and reports once.
 *
 * The server runs on its own loop in a thread of this process; the tests speak raw HTTP over
 * blocking sockets to 127.0.0.1 (an ephemeral port).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "mcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* The server's timers are short so that the tests wait little; a socket read gives up after
 * READ_LIMIT_S so that a broken test fails instead of hanging. */
#define HEADER_TIMEOUT_MS 200
#define BODY_TIMEOUT_MS   200
#define SESSION_IDLE_MS   200
#define READ_LIMIT_S      10

typedef struct env {
    uv_loop_t loop;
    uv_async_t stop;
    mcp_logger_t log;
    mcp_server_t *srv;
    mcp_http_server_t *http;
    pthread_t thread;
    unsigned port;
    atomic_int done_calls;
} env_t;

static void hold_cancelled(mcp_call_t *call, void *data)
{
    (void)data;
    mcp_call_finish_text(call, true, "cancelled");
}

/* Stays in flight until cancelled. */
static void tool_hold(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)args;
    (void)data;
    mcp_call_on_cancel(call, hold_cancelled, NULL);
}

static void on_stopped(mcp_http_server_t *h, void *data)
{
    env_t *e = data;
    atomic_fetch_add(&e->done_calls, 1);
    mcp_http_server_free(h);
    uv_close((uv_handle_t *)&e->stop, NULL);
}

static void on_stop(uv_async_t *a)
{
    env_t *e = a->data;
    mcp_http_server_stop(e->http, on_stopped, e);
}

static void *run_loop(void *arg)
{
    env_t *e = arg;
    uv_run(&e->loop, UV_RUN_DEFAULT);
    return NULL;
}

static int setup(void **state)
{
    env_t *e = calloc(1, sizeof *e);
    assert_int_equal(uv_loop_init(&e->loop), 0);
    e->log.out = stderr;
    e->log.level = MCP_LOG_CRITICAL;
    mcp_server_opts_t so;
    mcp_server_opts_default(&so);
    so.name = "t";
    so.version = "1";
    assert_int_equal(mcp_server_new(&e->loop, &so, &e->log, &e->srv), 0);
    mcp_tool_def_t hold = {.name = "hold", .handler = tool_hold};
    assert_int_equal(mcp_server_add_tool(e->srv, &hold), 0);
    mcp_http_server_opts_t o;
    mcp_http_server_opts_default(&o);
    o.port = 0;
    o.header_timeout_ms = HEADER_TIMEOUT_MS;
    o.body_timeout_ms = BODY_TIMEOUT_MS;
    o.session_idle_ms = SESSION_IDLE_MS;
    o.max_sessions = 2;
    o.max_connections = 4;
    o.max_streams_per_session = 2;
    assert_int_equal(mcp_http_server_start(e->srv, &o, &e->http), 0);
    e->port = mcp_http_server_port(e->http);
    assert_true(e->port > 0);
    assert_int_equal(uv_async_init(&e->loop, &e->stop, on_stop), 0);
    e->stop.data = e;
    /* From here on only the loop's thread touches the loop. */
    assert_int_equal(pthread_create(&e->thread, NULL, run_loop, e), 0);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    uv_async_send(&e->stop);
    pthread_join(e->thread, NULL);
    assert_int_equal(atomic_load(&e->done_calls), 1);
    mcp_server_free(e->srv);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    free(e);
    return 0;
}

static int dial(const env_t *e)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = READ_LIMIT_S};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)e->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void send_all(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        assert_true(w > 0);
        s += w;
        n -= (size_t)w;
    }
}

/* Reads until the server closes the connection (or the read limit passes). */
static void read_all(int fd, char *buf, size_t size)
{
    size_t n = 0;
    for (;;) {
        ssize_t r = recv(fd, buf + n, size - 1 - n, 0);
        if (r <= 0) break;
        n += (size_t)r;
        if (n == size - 1) break;
    }
    buf[n] = '\0';
}

/* Reads one response with a Content-Length body (keep-alive). */
static void read_response(int fd, char *buf, size_t size)
{
    size_t n = 0;
    for (;;) {
        ssize_t r = recv(fd, buf + n, size - 1 - n, 0);
        assert_true(r > 0);
        n += (size_t)r;
        buf[n] = '\0';
        const char *end = strstr(buf, "\r\n\r\n");
        const char *cl = strstr(buf, "Content-Length: ");
        if (end != NULL && cl != NULL && n >= (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10))
            return;
    }
}

static char *request(const env_t *e, const char *method, const char *sid, const char *body,
                     char *buf, size_t size)
{
    char req[2048];
    snprintf(req, sizeof req,
             "%s /mcp HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nContent-Type: application/json\r\n"
             "Accept: application/json, text/event-stream\r\n%s%s%sContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             method, e->port, sid ? "Mcp-Session-Id: " : "", sid ? sid : "", sid ? "\r\n" : "",
             strlen(body), body);
    int fd = dial(e);
    send_all(fd, req);
    read_all(fd, buf, size);
    close(fd);
    return buf;
}

static const char init_body[] =
    "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
    "\"2025-11-25\",\"capabilities\":{}}}";

/* The Mcp-Session-Id of an initialize answer, copied into sid. */
static void session_id(const char *resp, char *sid, size_t size)
{
    const char *p = strstr(resp, "Mcp-Session-Id: ");
    assert_non_null(p);
    p += 16;
    size_t n = strcspn(p, "\r");
    assert_true(n < size);
    memcpy(sid, p, n);
    sid[n] = '\0';
}

static void slow_headers_and_bodies_get_408(void **state)
{
    env_t *e = *state;
    char buf[4096];
    int fd = dial(e);
    send_all(fd, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"); /* never finished */
    read_all(fd, buf, sizeof buf);
    close(fd);
    assert_non_null(strstr(buf, "HTTP/1.1 408 "));
    fd = dial(e);
    send_all(fd, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"js");
    read_all(fd, buf, sizeof buf);
    close(fd);
    assert_non_null(strstr(buf, "HTTP/1.1 408 "));
    assert_non_null(strstr(buf, "Connection: close"));
}

/* Opens the session's GET stream and returns its socket once the headers are in. */
static int open_get(const env_t *e, const char *sid)
{
    char req[512], buf[1024];
    snprintf(req, sizeof req,
             "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nAccept: text/event-stream\r\n"
             "Mcp-Session-Id: %s\r\n\r\n",
             e->port, sid);
    int fd = dial(e);
    send_all(fd, req);
    ssize_t r = recv(fd, buf, sizeof buf - 1, 0);
    assert_true(r > 0);
    buf[r] = '\0';
    assert_non_null(strstr(buf, "HTTP/1.1 200 "));
    assert_non_null(strstr(buf, "text/event-stream"));
    return fd;
}

static void sessions_past_the_limit_get_503_and_idle_ones_expire(void **state)
{
    env_t *e = *state;
    char buf[4096], sid1[64], sid2[64], sid3[64];
    const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    session_id(request(e, "POST", NULL, init_body, buf, sizeof buf), sid1, sizeof sid1);
    session_id(request(e, "POST", NULL, init_body, buf, sizeof buf), sid2, sizeof sid2);
    assert_string_not_equal(sid1, sid2);
    /* Both busy (a GET stream each): no room. */
    int g1 = open_get(e, sid1);
    int g2 = open_get(e, sid2);
    request(e, "POST", NULL, init_body, buf, sizeof buf);
    assert_non_null(strstr(buf, "HTTP/1.1 503 "));
    assert_non_null(strstr(buf, "Retry-After: "));
    /* DELETE frees a place. */
    request(e, "DELETE", sid1, "", buf, sizeof buf);
    assert_non_null(strstr(buf, "HTTP/1.1 200 "));
    read_all(g1, buf, sizeof buf); /* the deleted session's stream ends */
    close(g1);
    session_id(request(e, "POST", NULL, init_body, buf, sizeof buf), sid1, sizeof sid1);
    /* At the limit, the session idle the longest (no stream, nothing in flight) makes room. */
    session_id(request(e, "POST", NULL, init_body, buf, sizeof buf), sid3, sizeof sid3);
    request(e, "POST", sid1, ping, buf, sizeof buf);
    assert_non_null(strstr(buf, "HTTP/1.1 404 "));
    request(e, "POST", sid2, ping, buf, sizeof buf);
    assert_non_null(strstr(buf, "HTTP/1.1 200 "));
    close(g2);
    /* Idle sessions end once the sweep (every second) sees them past their limit. */
    for (int i = 0; i < 100; i++) {
        request(e, "POST", sid2, ping, buf, sizeof buf);
        if (strstr(buf, "HTTP/1.1 404 ") != NULL) break;
        /* A ping keeps the session alive, so ask seldom compared to the limit. */
        usleep(5 * SESSION_IDLE_MS * 1000);
    }
    assert_non_null(strstr(buf, "HTTP/1.1 404 "));
}

static void requests_in_flight_past_the_limit_get_503(void **state)
{
    env_t *e = *state;
    char buf[4096], sid[64], req[1024];
    session_id(request(e, "POST", NULL, init_body, buf, sizeof buf), sid, sizeof sid);
    int fds[2];
    for (int i = 0; i < 2; i++) {
        char body[160];
        snprintf(body, sizeof body,
                 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"hold\"}}",
                 i + 1);
        snprintf(req, sizeof req,
                 "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 "Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 sid, strlen(body), body);
        fds[i] = dial(e);
        send_all(fds[i], req);
        ssize_t r = recv(fds[i], buf, sizeof buf - 1, 0);
        assert_true(r > 0);
        buf[r] = '\0';
        assert_non_null(strstr(buf, "text/event-stream"));
    }
    const char third[] = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"
                         "\"name\":\"hold\"}}";
    request(e, "POST", sid, third, buf, sizeof buf);
    assert_non_null(strstr(buf, "HTTP/1.1 503 "));
    /* Ending the session cancels the held calls; their streams end without an answer. */
    request(e, "DELETE", sid, "", buf, sizeof buf);
    assert_non_null(strstr(buf, "HTTP/1.1 200 "));
    for (int i = 0; i < 2; i++) {
        struct timeval tv = {.tv_sec = 1};
        setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        read_all(fds[i], buf, sizeof buf); /* the stream's last chunk, then keep-alive */
        close(fds[i]);
        assert_non_null(strstr(buf, "0\r\n\r\n"));
        assert_null(strstr(buf, "\"result\"")); /* no answer to a cancelled request */
    }
}

static void connections_past_the_limit_get_503(void **state)
{
    env_t *e = *state;
    int fds[4];
    char buf[4096];
    for (int i = 0; i < 4; i++) {
        fds[i] = dial(e);
        /* Each connection is seen by the server before the next one is made. */
        send_all(fds[i], "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        read_response(fds[i], buf, sizeof buf);
        assert_non_null(strstr(buf, "HTTP/1.1 200 "));
    }
    int extra = dial(e);
    read_all(extra, buf, sizeof buf);
    close(extra);
    assert_non_null(strstr(buf, "HTTP/1.1 503 "));
    close(fds[0]);
    /* Once one closes, a new one is served (the server may need a moment to see the close). */
    bool served = false;
    for (int i = 0; i < 100 && !served; i++) {
        int fd = dial(e);
        send_all(fd, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        read_all(fd, buf, sizeof buf);
        close(fd);
        served = strstr(buf, "HTTP/1.1 200 ") != NULL;
        if (!served) usleep(20000);
    }
    assert_true(served);
    for (int i = 1; i < 4; i++)
        close(fds[i]);
}

static void start_refuses_a_public_address_without_a_token(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    mcp_logger_t lg = {stderr, MCP_LOG_EMERGENCY};
    mcp_server_opts_t so;
    mcp_server_opts_default(&so);
    so.name = "t";
    so.version = "1";
    mcp_server_t *srv = NULL;
    assert_int_equal(mcp_server_new(&loop, &so, &lg, &srv), 0);
    mcp_http_server_opts_t o;
    mcp_http_server_opts_default(&o);
    o.host = "0.0.0.0";
    o.port = 0;
    mcp_http_server_t *h = NULL;
    assert_int_equal(mcp_http_server_start(srv, &o, &h), MCP_EINVAL);
    assert_null(h);
    o.host = "not-an-address";
    assert_int_equal(mcp_http_server_start(srv, &o, &h), MCP_EINVAL);
    o.host = "127.0.0.1";
    o.tls_cert_file = "/nonexistent/cert.pem";
    o.tls_key_file = "/nonexistent/key.pem";
    assert_int_equal(mcp_http_server_start(srv, &o, &h), MCP_EINVAL);
    o.host = "0.0.0.0";
    o.tls_cert_file = o.tls_key_file = NULL;
    o.auth_token = "secret";
    assert_int_equal(mcp_http_server_start(srv, &o, &h), 0);
    assert_true(mcp_http_server_port(h) > 0);
    mcp_http_server_free(h);
    uv_run(&loop, UV_RUN_DEFAULT);
    mcp_server_free(srv);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(slow_headers_and_bodies_get_408, setup, teardown),
        cmocka_unit_test_setup_teardown(sessions_past_the_limit_get_503_and_idle_ones_expire, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(requests_in_flight_past_the_limit_get_503, setup, teardown),
        cmocka_unit_test_setup_teardown(connections_past_the_limit_get_503, setup, teardown),
        cmocka_unit_test(start_refuses_a_public_address_without_a_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
