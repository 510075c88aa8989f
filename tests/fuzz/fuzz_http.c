/* fuzz_http.c - libFuzzer target: bytes a client writes on one TCP connection to the HTTP
 * server (HTTP/1.1 parsing, keep-alive and pipelining, chunked bodies, limits, the MCP
 * endpoints and their sessions). The server runs on a loop in this thread; each input is one
 * loopback connection that the client half-closes after writing, and the loop runs until the
 * server has closed it. "@SID@" in an input is replaced by the newest Mcp-Session-Id the server
 * gave out (to an earlier input), so that inputs reach the paths of live sessions. Finds
 * crashes, leaks and undefined behaviour in the whole request path. */
#include "mcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Loop turns one input may take before its connection is dropped (a server that never closes
 * would otherwise hang the fuzzer; the bound is far above what any input needs). */
#define MAX_TURNS 20000

typedef struct harness {
    uv_loop_t loop;
    mcp_logger_t log;
    mcp_server_t *srv;
    mcp_http_server_t *http;
    unsigned port;
    char sid[64]; /* the newest Mcp-Session-Id seen, or "" */
} harness_t;

static void tool_now(mcp_call_t *call, const cJSON *args, void *data)
{
    (void)data;
    char *t = cJSON_PrintUnformatted(args);
    mcp_call_log(call, MCP_LOG_INFO, "fuzz", cJSON_CreateString("working"));
    mcp_call_progress(call, 1, 2, "half");
    mcp_call_finish(call, mcp_text_content(t ? t : ""), NULL, false);
    cJSON_free(t);
}

static harness_t *harness(void)
{
    static harness_t *h;
    if (h != NULL) return h;
    h = calloc(1, sizeof *h);
    if (h == NULL || uv_loop_init(&h->loop) != 0) abort();
    h->log.out = stderr;
    h->log.level = MCP_LOG_EMERGENCY;
    mcp_server_opts_t so;
    mcp_server_opts_default(&so);
    so.name = "fuzz";
    so.version = "1";
    so.progress_min_interval_ms = 0;
    if (mcp_server_new(&h->loop, &so, &h->log, &h->srv) != 0) abort();
    mcp_tool_def_t d = {.name = "echo", .handler = tool_now};
    if (mcp_server_add_tool(h->srv, &d) != 0) abort();
    mcp_http_server_opts_t o;
    mcp_http_server_opts_default(&o);
    o.port = 0;
    o.max_message_bytes = 8192;
    o.max_header_bytes = 2048;
    o.max_headers = 16;
    o.max_sessions = 4; /* inputs that initialize evict each other */
    if (mcp_http_server_start(h->srv, &o, &h->http) != 0) abort();
    h->port = mcp_http_server_port(h->http);
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Copies the input with each "@SID@" replaced by the newest session id; caller frees. */
static uint8_t *with_sid(const harness_t *h, const uint8_t *data, size_t size, size_t *out)
{
    size_t sl = strlen(h->sid);
    uint8_t *b = malloc(size * (sl > 5 ? sl : 5) / 5 + 1);
    if (b == NULL) abort();
    size_t n = 0;
    for (size_t i = 0; i < size;) {
        if (i + 5 <= size && memcmp(data + i, "@SID@", 5) == 0) {
            memcpy(b + n, h->sid, sl);
            n += sl;
            i += 5;
        } else {
            b[n++] = data[i++];
        }
    }
    *out = n;
    return b;
}

static void note_sid(harness_t *h, const char *buf, size_t n)
{
    static const char key[] = "Mcp-Session-Id: ";
    for (size_t i = 0; i + sizeof key - 1 + 32 <= n; i++) {
        if (memcmp(buf + i, key, sizeof key - 1) == 0) {
            memcpy(h->sid, buf + i + sizeof key - 1, 32);
            h->sid[32] = '\0';
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *raw, size_t raw_size)
{
    harness_t *h = harness();
    size_t size = 0;
    uint8_t *data = with_sid(h, raw, raw_size, &size);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) abort();
    /* Each input comes from another 127.x.y.z: closed connections linger in TIME_WAIT, and
     * thousands of inputs a second would use up one source address's ports. */
    static uint32_t next_src;
    next_src = (next_src + 1) % 0xfffe;
    struct sockaddr_in src = {.sin_family = AF_INET};
    src.sin_addr.s_addr = htonl(0x7f010000u + next_src + 1);
    if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0) abort();
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)h->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* Non-blocking: the loop below runs the server, which accepts the connection. */
    fcntl(fd, F_SETFL, O_NONBLOCK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        perror("fuzz_http: connect");
        abort();
    }
    size_t off = 0;
    bool half_closed = false;
    char sink[65536];
    for (int turn = 0; turn < MAX_TURNS; turn++) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        if (off < size && poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLOUT)) {
            ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);
            if (w > 0) off += (size_t)w;
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) off = size; /* server closed */
        }
        if (off == size && !half_closed) {
            shutdown(fd, SHUT_WR);
            half_closed = true;
        }
        uv_run(&h->loop, UV_RUN_NOWAIT);
        ssize_t r = recv(fd, sink, sizeof sink, 0);
        if (r > 0) note_sid(h, sink, (size_t)r);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) break;
    }
    close(fd);
    free(data);
    /* Let the server see the close and finish with the connection. */
    for (int i = 0; i < 100; i++)
        uv_run(&h->loop, UV_RUN_NOWAIT);
    return 0;
}
