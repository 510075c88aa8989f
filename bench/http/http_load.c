/*
 * A small keep-alive load generator for MCP's Streamable HTTP transport (what wrk would do,
 * plus the MCP session handshake wrk cannot script without Lua). N clients, each on its own
 * keep-alive connection, first initialize a session (POST initialize, read Mcp-Session-Id, POST
 * notifications/initialized), then send one JSON-RPC request after another for S seconds. One
 * request in flight per connection, as an MCP client holds. A response counts when it is a 200
 * whose body (JSON or an SSE event) carries a JSON-RPC "result"; anything else is an error.
 *
 * Usage: http_load --port P [--host 127.0.0.1] [--path /mcp] [--clients N] [--seconds S]
 *                  [--method ping|tools/list]
 * Prints one JSON line: {"method", "clients", "requests", "errors", "seconds", "rps",
 * "response_bytes"}. Exits 1 when a client could not set up its session or no request succeeded.
 */
#include <http_parser.h>
#include <uv.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOAD_MAX_CLIENTS  4096
#define LOAD_MAX_SECONDS  600
#define LOAD_BODY_CAP     (4u << 20) /* a larger response is an error, not a buffer overflow */
#define LOAD_SESSION_CAP  256
#define LOAD_VERSION_CAP  32
#define LOAD_REQUEST_CAP  2048
#define LOAD_CONNECT_WAIT 30 /* seconds for every client to finish its handshake */

typedef enum { ST_CONNECTING, ST_INIT, ST_INITIALIZED, ST_LOAD, ST_DONE } client_state_t;

struct bench;

typedef struct {
    struct bench *b;
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t write;
    http_parser parser;
    client_state_t state;
    char request[LOAD_REQUEST_CAP];
    char *body; /* the current response's body, grown up to LOAD_BODY_CAP */
    size_t body_len, body_size;
    bool body_overflow;
    /* The parser may hand a header's name or value over in pieces (split across reads). */
    char field[16]; /* the name being read, if it may still be Mcp-Session-Id */
    size_t field_len;
    bool in_value;
    char session[LOAD_SESSION_CAP];
    size_t session_len;
    uint64_t next_id;
    bool closed;
    bool writing;   /* c->write and c->request are in use until on_write */
    bool send_next; /* a response completed while writing: send from on_write */
} client_t;

typedef struct bench {
    uv_loop_t *loop;
    uv_timer_t timer;
    struct sockaddr_in addr;
    const char *host;
    int port;
    const char *path;
    const char *method;
    int n_clients;
    int seconds;
    client_t *clients;
    int ready; /* clients whose session is set up */
    int failed_setup;
    bool measuring;
    bool stopped;
    uint64_t t0, t1;
    uint64_t requests, errors, response_bytes;
    char version[LOAD_VERSION_CAP]; /* the protocol version the server answered */
    http_parser_settings settings;
    char readbuf[65536]; /* one loop thread: every read is parsed before the next */
} bench_t;

static void client_send(client_t *c);
static void client_fail(client_t *c, const char *why);

/* Sends the next request now, or once the previous write has completed. */
static void client_next(client_t *c)
{
    if (c->writing)
        c->send_next = true;
    else
        client_send(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    client_t *c = h->data;
    buf->base = c->b->readbuf;
    buf->len = sizeof c->b->readbuf;
}

static bool field_is_session(const client_t *c)
{
    return c->field_len == 14 && strncasecmp(c->field, "mcp-session-id", 14) == 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    client_t *c = p->data;
    if (c->in_value) c->field_len = 0; /* a new header begins */
    c->in_value = false;
    if (c->field_len + len <= sizeof c->field) memcpy(c->field + c->field_len, at, len);
    c->field_len += len; /* past the buffer: too long to be the one we want */
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    client_t *c = p->data;
    if (!c->in_value && field_is_session(c)) c->session_len = 0;
    c->in_value = true;
    if (field_is_session(c) && c->session_len + len < sizeof c->session) {
        memcpy(c->session + c->session_len, at, len);
        c->session_len += len;
        c->session[c->session_len] = '\0';
    }
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    client_t *c = p->data;
    c->field_len = 0;
    c->in_value = false;
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    client_t *c = p->data;
    if (c->body_overflow) return 0;
    if (c->body_len + len + 1 > c->body_size) {
        size_t want = c->body_size ? c->body_size : 4096;
        while (want < c->body_len + len + 1)
            want *= 2;
        char *nb = want <= LOAD_BODY_CAP ? realloc(c->body, want) : NULL;
        if (!nb) {
            c->body_overflow = true;
            return 0;
        }
        c->body = nb;
        c->body_size = want;
    }
    memcpy(c->body + c->body_len, at, len);
    c->body_len += len;
    return 0;
}

/* Copies the "protocolVersion" of an initialize result; the later requests must send it. */
static void take_version(bench_t *b, const char *body)
{
    const char *k = strstr(body, "\"protocolVersion\"");
    if (!k || b->version[0]) return;
    const char *q = strchr(k + 17, '"');
    if (!q) return;
    const char *e = strchr(q + 1, '"');
    if (!e || (size_t)(e - q - 1) >= sizeof b->version) return;
    memcpy(b->version, q + 1, (size_t)(e - q - 1));
    b->version[e - q - 1] = '\0';
}

static void start_measuring(bench_t *b);

static int on_message_complete(http_parser *p)
{
    client_t *c = p->data;
    bench_t *b = c->b;
    unsigned status = p->status_code;
    if (c->body) c->body[c->body_len] = '\0';
    bool has_result = !c->body_overflow && c->body && strstr(c->body, "\"result\"") != NULL;
    size_t body_len = c->body_len;
    c->body_len = 0;
    c->body_overflow = false;
    switch (c->state) {
    case ST_INIT:
        if (status != 200 || !has_result || !c->session[0]) {
            client_fail(c, "initialize was not answered with a result and a session id");
            return 0;
        }
        take_version(b, c->body);
        c->state = ST_INITIALIZED;
        break;
    case ST_INITIALIZED:
        if (status != 202 && status != 200 && status != 204) {
            client_fail(c, "notifications/initialized was refused");
            return 0;
        }
        c->state = ST_LOAD;
        /* Every client waits for the others so the rate is N clients' rate: the last one to
           get ready starts them all. */
        if (++b->ready + b->failed_setup == b->n_clients) start_measuring(b);
        return 0;
    case ST_LOAD:
        if (b->measuring) {
            if (status == 200 && has_result) {
                b->requests++;
                b->response_bytes += body_len;
            } else {
                b->errors++;
            }
        }
        break;
    default:
        return 0;
    }
    if (b->stopped) return 0;
    if (!http_should_keep_alive(p))
        client_fail(c, "the server closed the keep-alive connection");
    else
        client_next(c);
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    (void)h;
}

static void client_close(client_t *c)
{
    if (c->closed) return;
    c->closed = true;
    c->state = ST_DONE;
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void client_fail(client_t *c, const char *why)
{
    bench_t *b = c->b;
    if (c->state == ST_LOAD || c->state == ST_DONE) {
        if (b->measuring && !b->stopped) b->errors++;
    } else {
        fprintf(stderr, "http_load: client %d: %s\n", (int)(c - b->clients), why);
        if (++b->failed_setup + b->ready == b->n_clients) start_measuring(b);
    }
    client_close(c);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    client_t *c = s->data;
    if (n < 0) {
        client_fail(c, n == UV_EOF ? "the server closed the connection" : uv_strerror((int)n));
        return;
    }
    size_t used = http_parser_execute(&c->parser, &c->b->settings, buf->base, (size_t)n);
    if (!c->closed && (c->parser.http_errno != HPE_OK || used != (size_t)n))
        client_fail(c, http_errno_description(HTTP_PARSER_ERRNO(&c->parser)));
}

static void on_write(uv_write_t *w, int status)
{
    client_t *c = w->data;
    c->writing = false;
    if (c->closed) return;
    if (status < 0)
        client_fail(c, uv_strerror(status));
    else if (c->send_next) {
        c->send_next = false;
        client_send(c);
    }
}

static void client_send(client_t *c)
{
    bench_t *b = c->b;
    char json[256];
    int jn;
    if (c->state == ST_INIT)
        jn = snprintf(json, sizeof json,
                      "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                      "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
                      "\"clientInfo\":{\"name\":\"http_load\",\"version\":\"1\"}}}");
    else if (c->state == ST_INITIALIZED)
        jn = snprintf(json, sizeof json,
                      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    else
        jn = snprintf(json, sizeof json, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"%s\"}",
                      (unsigned long long)++c->next_id, b->method);
    if (jn < 0 || (size_t)jn >= sizeof json) {
        client_fail(c, "request too long");
        return;
    }
    char extra[LOAD_SESSION_CAP + LOAD_VERSION_CAP + 64] = "";
    if (c->state != ST_INIT)
        snprintf(extra, sizeof extra, "Mcp-Session-Id: %s\r\nMCP-Protocol-Version: %s\r\n",
                 c->session, b->version[0] ? b->version : "2025-11-25");
    int n =
        snprintf(c->request, sizeof c->request,
                 "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                 "Accept: application/json, text/event-stream\r\n%sContent-Length: %d\r\n\r\n%s",
                 b->path, b->host, b->port, extra, jn, json);
    if (n < 0 || (size_t)n >= sizeof c->request) {
        client_fail(c, "request too long");
        return;
    }
    uv_buf_t buf = uv_buf_init(c->request, (unsigned)n);
    c->write.data = c;
    int rc = uv_write(&c->write, (uv_stream_t *)&c->tcp, &buf, 1, on_write);
    if (rc < 0)
        client_fail(c, uv_strerror(rc));
    else
        c->writing = true;
}

static void on_connect(uv_connect_t *req, int status)
{
    client_t *c = req->data;
    if (status < 0) {
        client_fail(c, uv_strerror(status));
        return;
    }
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0) {
        client_fail(c, uv_strerror(rc));
        return;
    }
    c->state = ST_INIT;
    client_send(c);
}

static void on_timer(uv_timer_t *t)
{
    bench_t *b = t->data;
    if (!b->measuring) {
        fprintf(stderr, "http_load: sessions not set up within %d s (%d of %d ready)\n",
                LOAD_CONNECT_WAIT, b->ready, b->n_clients);
        b->t0 = b->t1 = uv_hrtime();
    } else {
        b->t1 = uv_hrtime();
    }
    b->stopped = true;
    for (int i = 0; i < b->n_clients; i++)
        client_close(&b->clients[i]);
    uv_close((uv_handle_t *)&b->timer, on_closed);
}

static void start_measuring(bench_t *b)
{
    if (b->measuring || b->stopped) return;
    b->measuring = true;
    b->t0 = uv_hrtime();
    uv_timer_stop(&b->timer);
    if (uv_timer_start(&b->timer, on_timer, (uint64_t)b->seconds * 1000, 0) < 0)
        on_timer(&b->timer);
    for (int i = 0; i < b->n_clients; i++)
        if (b->clients[i].state == ST_LOAD && !b->clients[i].closed) client_next(&b->clients[i]);
}

/* A decimal integer in [lo, hi], or -1. */
static long parse_long(const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < lo || n > hi) return -1;
    return n;
}

static int usage(void)
{
    fprintf(stderr, "usage: http_load --port P [--host 127.0.0.1] [--path /mcp] [--clients N] "
                    "[--seconds S] [--method ping|tools/list]\n");
    return 2;
}

int main(int argc, char **argv)
{
    bench_t b;
    memset(&b, 0, sizeof b);
    b.host = "127.0.0.1";
    b.path = "/mcp";
    b.method = "ping";
    b.n_clients = 16;
    b.seconds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--port") == 0)
            b.port = (int)strtol(v, NULL, 10);
        else if (strcmp(k, "--host") == 0)
            b.host = v;
        else if (strcmp(k, "--path") == 0)
            b.path = v;
        else if (strcmp(k, "--clients") == 0)
            b.n_clients = (int)parse_long(v, 1, LOAD_MAX_CLIENTS);
        else if (strcmp(k, "--seconds") == 0)
            b.seconds = (int)parse_long(v, 1, LOAD_MAX_SECONDS);
        else if (strcmp(k, "--method") == 0)
            b.method = v;
        else
            return usage();
    }
    if (argc % 2 != 1 || b.port <= 0 || b.port > 65535 || b.n_clients < 1 ||
        b.n_clients > LOAD_MAX_CLIENTS || b.seconds < 1 || b.seconds > LOAD_MAX_SECONDS ||
        strlen(b.method) > 64 || strlen(b.path) > 512 || strlen(b.host) > 256 ||
        strpbrk(b.method, "\"\\") != NULL)
        return usage();
    int rc = uv_ip4_addr(b.host, b.port, &b.addr);
    if (rc < 0) {
        fprintf(stderr, "http_load: %s is not an IPv4 address: %s\n", b.host, uv_strerror(rc));
        return 2;
    }
    b.loop = uv_default_loop();
    b.settings.on_header_field = on_header_field;
    b.settings.on_header_value = on_header_value;
    b.settings.on_headers_complete = on_headers_complete;
    b.settings.on_body = on_body;
    b.settings.on_message_complete = on_message_complete;
    b.clients = calloc((size_t)b.n_clients, sizeof *b.clients);
    if (!b.clients) {
        fprintf(stderr, "http_load: out of memory\n");
        return 1;
    }
    if ((rc = uv_timer_init(b.loop, &b.timer)) < 0 ||
        (rc = uv_timer_start(&b.timer, on_timer, LOAD_CONNECT_WAIT * 1000, 0)) < 0) {
        fprintf(stderr, "http_load: timer: %s\n", uv_strerror(rc));
        free(b.clients);
        return 1;
    }
    b.timer.data = &b;
    for (int i = 0; i < b.n_clients; i++) {
        client_t *c = &b.clients[i];
        c->b = &b;
        c->closed = true; /* until its handle exists */
        http_parser_init(&c->parser, HTTP_RESPONSE);
        c->parser.data = c;
        if ((rc = uv_tcp_init(b.loop, &c->tcp)) < 0) {
            client_fail(c, uv_strerror(rc));
            continue;
        }
        c->closed = false;
        c->tcp.data = c;
        c->connect.data = c;
        c->state = ST_CONNECTING;
        /* Small requests and answers: no Nagle delay between them. */
        if ((rc = uv_tcp_nodelay(&c->tcp, 1)) < 0 ||
            (rc = uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&b.addr,
                                 on_connect)) < 0) {
            client_fail(c, uv_strerror(rc));
            continue;
        }
    }
    uv_run(b.loop, UV_RUN_DEFAULT);
    double secs = (double)(b.t1 - b.t0) / 1e9;
    double rps = secs > 0 ? (double)b.requests / secs : 0;
    printf("{\"method\":\"%s\",\"clients\":%d,\"ready\":%d,\"requests\":%llu,\"errors\":%llu,"
           "\"seconds\":%.3f,\"rps\":%.1f,\"response_bytes\":%.1f}\n",
           b.method, b.n_clients, b.ready, (unsigned long long)b.requests,
           (unsigned long long)b.errors, secs, rps,
           b.requests ? (double)b.response_bytes / (double)b.requests : 0.0);
    for (int i = 0; i < b.n_clients; i++)
        free(b.clients[i].body);
    free(b.clients);
    uv_loop_close(b.loop);
    return b.failed_setup == 0 && b.requests > 0 ? 0 : 1;
}
