/*
 * Start-up latency of runs with a bridge descriptor and a read-only package folder
 * (exec_run_start_ex), next to plain warm and cold runs of the same pool settings. Runs one at a
 * time, each kind in a block of its own (warm sandboxes are made for one package folder, told
 * ahead with exec_pool_warm_for as the server does). Usage: bridge_bench [N] [GAP_MS]. Each
 * bridge run writes one line to fd 3 and prints it back after the host's answer, so the
 * measured time includes one round trip.
 */
#include "bench_stats.h"
#include "executor.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_N 1000

enum { PLAIN, BRIDGE, BRIDGE_LIB, N_KINDS };

typedef struct {
    bool done, ok;
    const char *want;
} done_t;

static void on_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    (void)run;
    done_t *d = user;
    d->done = true;
    size_t len = strlen(d->want);
    d->ok =
        r->status == EXEC_STATUS_OK && r->out.len == len && memcmp(r->out.data, d->want, len) == 0;
}

/* the host's side, on the loop: answer the first line with "pong\n" */
typedef struct {
    uv_poll_t poll;
    int fd;
} host_t;

static void on_host(uv_poll_t *p, int status, int events)
{
    host_t *h = p->data;
    char buf[256];
    (void)events;
    ssize_t n = status < 0 ? -1 : read(h->fd, buf, sizeof buf);
    if (n > 0 && memchr(buf, '\n', (size_t)n)) {
        if (write(h->fd, "pong\n", 5) != 5) n = -1;
    }
    if (n <= 0) uv_poll_stop(p);
}

static int one(uv_loop_t *loop, exec_pool_t *pool, int kind, const char *dir, double *ms)
{
    static const char *const code[N_KINDS] = {
        "print(1)", "import os\nos.write(3, b'ping\\n')\nprint(os.read(3, 5).decode(), end='')",
        "import os, tools\nos.write(3, b'ping\\n')\nprint(os.read(3, 5).decode(), end='')"};
    done_t d = {.want = kind == PLAIN ? "1\n" : "pong\n"};
    exec_callbacks_t cb = {.on_done = on_done, .user = &d};
    exec_run_opts_t ro;
    exec_run_opts_init(&ro);
    host_t h = {.fd = -1};
    int sv[2];
    uint64_t t0 = uv_hrtime();
    if (kind != PLAIN) {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return -1;
        h.fd = sv[0];
        ro.bridge_fd = sv[1];
        uv_poll_init(loop, &h.poll, h.fd);
        h.poll.data = &h;
        uv_poll_start(&h.poll, UV_READABLE, on_host);
    }
    if (kind == BRIDGE_LIB) ro.ro_dir = dir;
    if (exec_run_start_ex(pool, code[kind], 10000, &ro, &cb, NULL) < 0) return -1;
    uv_run(loop, UV_RUN_DEFAULT);
    *ms = (double)(uv_hrtime() - t0) / 1e6;
    if (h.fd >= 0) {
        uv_close((uv_handle_t *)&h.poll, NULL);
        uv_run(loop, UV_RUN_DEFAULT);
        close(h.fd);
    }
    return d.ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 30;
    int gap = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 0;
    if (n < 3 || n > MAX_N) n = 30;
    static double t[2][N_KINDS][MAX_N];
    char dir[] = "/tmp/ptc-bridge-bench-XXXXXX", path[64];
    if (!mkdtemp(dir) || chmod(dir, 0755) < 0) return 1;
    snprintf(path, sizeof path, "%s/tools", dir);
    if (mkdir(path, 0755) < 0) return 1;
    snprintf(path, sizeof path, "%s/tools/__init__.py", dir);
    FILE *f = fopen(path, "w");
    if (!f || fputs("X = 1\n", f) < 0 || fclose(f) != 0) return 1;
    chmod(path, 0644);
    int rc = 0;
    for (int warm = 0; warm < 2 && rc == 0; warm++) {
        uv_loop_t loop;
        uv_loop_init(&loop);
        exec_options_t o;
        exec_options_init(&o);
        o.launcher = BENCH_LAUNCHER;
        o.max_concurrent = 1;
        o.keep_warm = warm;
        exec_pool_t *pool;
        if (exec_pool_new(&loop, &o, &pool) < 0 || exec_pool_refusing(pool)) {
            fprintf(stderr, "sandbox unavailable\n");
            return 1;
        }
        for (int k = 0; k < N_KINDS && rc == 0; k++) {
            exec_pool_warm_for(pool, k == BRIDGE_LIB ? dir : NULL);
            for (int i = 0; i < n && rc == 0; i++) {
                if (gap > 0) usleep((useconds_t)gap * 1000u);
                if (one(&loop, pool, k, dir, &t[warm][k][i]) < 0) {
                    fprintf(stderr, "run %d kind %d failed\n", i, k);
                    rc = 1;
                }
            }
        }
        exec_pool_free(pool);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
    }
    unlink(path);
    snprintf(path, sizeof path, "%s/tools", dir);
    rmdir(path);
    rmdir(dir);
    if (rc) return rc;
    static const char *const names[N_KINDS] = {"print(1)", "bridge round trip",
                                               "bridge + ro_dir, import tools"};
    printf("%d runs each, one kind after the other, %d ms idle between runs; ms\n", n, gap);
    for (int warm = 0; warm < 2; warm++)
        for (int k = 0; k < N_KINDS; k++)
            printf("keep_warm %-3s %-32s p50 %7.2f  p99 %7.2f\n", warm ? "on" : "off", names[k],
                   bench_pct(t[warm][k], n, 0.5), bench_pct(t[warm][k], n, 0.99));
    return 0;
}
