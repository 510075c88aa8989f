/*
 * A load generator for MCP over stdio: starts a server command with pipes on its stdin and
 * stdout, does the handshake (initialize, then notifications/initialized), then sends N `ping`
 * requests without waiting for any answer and counts the answers as they come. A reply counts
 * when it is a line carrying "result" (server-everything also sends notifications of its own;
 * those are skipped) and the run fails when any answer is an error.
 *
 * Two shapes of load:
 *   pipelined  the pings are written while the answers are read (one thread, poll(2)): what a
 *              client that reads as it sends gets.
 *   burst      every ping is written before any answer is read: the server must take the whole
 *              burst in while its answers wait, which is where its memory peaks.
 *
 * Usage: stdio_load [--n N] [--mode pipelined|burst] -- COMMAND [ARG]...
 * Prints one JSON line: {"mode", "n", "seconds", "msgs_per_s", "peak_rss_kib"} where seconds
 * runs from the first ping written to the last answer read and peak_rss_kib is the server
 * process's VmHWM read after the last answer. Exits 1 on any failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOAD_MAX_N      10000000
#define LOAD_LINE_CAP   (1u << 20) /* a longer answer line is a failure, not an overflow */
#define LOAD_READ_CHUNK 65536
#define LOAD_TIMEOUT_MS 120000 /* no progress for this long: the server is stuck */
#define LOAD_INIT_REQUEST                                                                          \
    "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{"                  \
    "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"                                      \
    "\"clientInfo\":{\"name\":\"stdio_load\",\"version\":\"1\"}}}\n"
#define LOAD_INITIALIZED "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"

typedef struct {
    pid_t pid;
    int to_child, from_child;
    char *line; /* the answer line being assembled */
    size_t line_len;
    uint64_t results, errors, others;
} load_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int spawn(load_t *l, char **argv)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0) return -1;
    if (pipe2(out, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || devnull < 0 || dup2(devnull, 2) < 0)
            _exit(126);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    l->pid = pid;
    l->to_child = in[1];
    l->from_child = out[0];
    return 0;
}

/* Classifies one complete answer line. */
static void on_line(load_t *l, const char *s, size_t n)
{
    if (memmem(s, n, "\"result\"", 8) != NULL)
        l->results++;
    else if (memmem(s, n, "\"error\"", 7) != NULL)
        l->errors++;
    else
        l->others++;
}

/* Reads what is there and splits it into lines; -1 on EOF or error. */
static int read_some(load_t *l)
{
    static char buf[LOAD_READ_CHUNK];
    ssize_t r = read(l->from_child, buf, sizeof buf);
    if (r < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (r == 0) return -1;
    const char *p = buf, *end = buf + r;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t chunk = (size_t)((nl != NULL ? nl : end) - p);
        if (l->line_len + chunk > LOAD_LINE_CAP) return -1;
        if (nl != NULL && l->line_len == 0) {
            on_line(l, p, chunk);
        } else {
            memcpy(l->line + l->line_len, p, chunk);
            l->line_len += chunk;
            if (nl != NULL) {
                on_line(l, l->line, l->line_len);
                l->line_len = 0;
            }
        }
        if (nl == NULL) break;
        p = nl + 1;
    }
    return 0;
}

/* Writes all of data (may be empty) while reading answers, until `want` results are in or,
 * with want == 0, until data is written. burst: no reading until data is written. */
static int pump(load_t *l, const char *data, size_t len, uint64_t want, bool burst)
{
    size_t off = 0;
    while (off < len || (want > 0 && l->results < want)) {
        struct pollfd pf[2];
        int n = 0;
        if (off < len) pf[n++] = (struct pollfd){.fd = l->to_child, .events = POLLOUT};
        bool reading = want > 0 && (!burst || off == len);
        if (reading) pf[n++] = (struct pollfd){.fd = l->from_child, .events = POLLIN};
        int r = poll(pf, (nfds_t)n, LOAD_TIMEOUT_MS);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            fprintf(stderr, "stdio_load: %s\n", r == 0 ? "timed out" : strerror(errno));
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (pf[i].revents == 0) continue;
            if (pf[i].fd == l->to_child) {
                ssize_t w = write(l->to_child, data + off, len - off);
                if (w < 0 && errno != EAGAIN && errno != EINTR) {
                    fprintf(stderr, "stdio_load: write: %s\n", strerror(errno));
                    return -1;
                }
                if (w > 0) off += (size_t)w;
            } else if (read_some(l) < 0) {
                fprintf(stderr, "stdio_load: the server closed its output after %llu answers\n",
                        (unsigned long long)l->results);
                return -1;
            }
        }
    }
    return 0;
}

static long peak_rss_kib(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    char row[256];
    long kib = -1;
    while (fgets(row, sizeof row, f) != NULL)
        if (strncmp(row, "VmHWM:", 6) == 0) {
            kib = strtol(row + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    long n = 100000;
    bool burst = false;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
            n = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            i++;
            burst = strcmp(argv[i], "burst") == 0;
            if (!burst && strcmp(argv[i], "pipelined") != 0) break;
        } else {
            break;
        }
    }
    if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc || n < 1 || n > LOAD_MAX_N) {
        fprintf(stderr, "usage: stdio_load [--n N] [--mode pipelined|burst] -- COMMAND [ARG]...\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    /* The pings, ids 1..n, built before the clock starts. */
    size_t cap = (size_t)n * 48;
    char *pings = malloc(cap);
    load_t l = {0};
    l.line = malloc(LOAD_LINE_CAP);
    if (pings == NULL || l.line == NULL) {
        fprintf(stderr, "stdio_load: out of memory\n");
        free(pings);
        free(l.line);
        return 1;
    }
    size_t len = 0;
    for (long k = 1; k <= n; k++)
        len += (size_t)snprintf(pings + len, cap - len,
                                "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"ping\"}\n", k);
    if (spawn(&l, argv + i + 1) < 0) {
        fprintf(stderr, "stdio_load: cannot start %s: %s\n", argv[i + 1], strerror(errno));
        return 1;
    }
    fcntl(l.to_child, F_SETFL, fcntl(l.to_child, F_GETFL) | O_NONBLOCK);
    fcntl(l.from_child, F_SETFL, fcntl(l.from_child, F_GETFL) | O_NONBLOCK);
    int rc = 1;
    if (pump(&l, LOAD_INIT_REQUEST, strlen(LOAD_INIT_REQUEST), 1, false) < 0 ||
        pump(&l, LOAD_INITIALIZED, strlen(LOAD_INITIALIZED), 0, false) < 0)
        goto out;
    l.results = 0;
    double t0 = now_s();
    if (pump(&l, pings, len, (uint64_t)n, burst) < 0) goto out;
    double secs = now_s() - t0;
    long rss = peak_rss_kib(l.pid);
    if (l.errors > 0) {
        fprintf(stderr, "stdio_load: %llu answers were errors\n", (unsigned long long)l.errors);
        goto out;
    }
    printf(
        "{\"mode\":\"%s\",\"n\":%ld,\"seconds\":%.4f,\"msgs_per_s\":%.0f,\"peak_rss_kib\":%ld}\n",
        burst ? "burst" : "pipelined", n, secs, (double)n / secs, rss);
    rc = 0;
out:
    close(l.to_child); /* EOF: the server finishes and exits */
    int status;
    for (int waited = 0; waitpid(l.pid, &status, WNOHANG) == 0; waited++) {
        if (waited == 50) kill(l.pid, SIGTERM);
        if (waited == 100) kill(l.pid, SIGKILL);
        usleep(20000);
    }
    close(l.from_child);
    free(pings);
    free(l.line);
    return rc;
}
