/*
 * A session cell's `print(1)`, timed on the server side (exec_session_run to on_done: what
 * execute_code with a session pays per call, minus JSON-RPC), and the memory of an idle
 * session (the RSS of its launcher, init and interpreter, read from /proc).
 * Usage: session_bench [N] [PYTHON].
 */
#include "bench_stats.h"
#include "executor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_N 5000

typedef struct {
    bool done, ok;
} done_t;

static void on_done(exec_session_t *s, const exec_result_t *r, void *user)
{
    (void)s;
    done_t *d = user;
    d->done = true;
    d->ok = r->status == EXEC_STATUS_OK && r->out.len == 2 && memcmp(r->out.data, "1\n", 2) == 0;
}

/* VmRSS of pid (when self) and every descendant, in KiB */
static long tree_rss(int pid, bool self)
{
    char path[96], line[256];
    long kib = 0;
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "re");
    while (self && f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
    f = fopen(path, "re");
    int child;
    while (f && fscanf(f, "%d", &child) == 1)
        kib += tree_rss(child, true);
    if (f) fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 500;
    if (n < 1 || n > MAX_N) n = 500;
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_options_t o;
    exec_options_init(&o);
    o.python = argc > 2 ? argv[2] : EXEC_DEFAULT_PYTHON;
    o.launcher = BENCH_LAUNCHER;
    o.keep_warm = false;
    exec_pool_t *pool = NULL;
    if (exec_pool_new(&loop, &o, &pool) < 0 || exec_pool_refusing(pool)) {
        fprintf(stderr, "no usable sandbox here\n");
        return 1;
    }
    exec_session_t *s = NULL;
    if (exec_session_new(pool, NULL, &s) < 0) return 1;
    static double t[MAX_N];
    exec_session_callbacks_t cb = {.on_done = on_done};
    for (int i = -5; i < n; i++) { /* 5 cells to settle, not counted */
        done_t d = {0};
        cb.user = &d;
        uint64_t t0 = uv_hrtime();
        if (exec_session_run(s, "print(1)", 10000, &cb) < 0) return 1;
        while (!d.done)
            uv_run(&loop, UV_RUN_ONCE);
        if (!d.ok) {
            fprintf(stderr, "cell %d failed\n", i);
            return 1;
        }
        if (i >= 0) t[i] = (double)(uv_hrtime() - t0) / 1e6;
    }
    usleep(200 * 1000);
    long idle = tree_rss((int)getpid(), false); /* the pool keeps no warm sandbox here */
    double p50 = bench_pct(t, n, 0.5), p99 = bench_pct(t, n, 0.99);
    printf("session cell print(1), server side, %d cells: p50 %.3f ms  p99 %.3f ms\n", n, p50, p99);
    printf("idle session RSS (launcher + init + interpreter): %.1f MiB\n", (double)idle / 1024.0);
    exec_session_close(s);
    exec_pool_free(pool);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return 0;
}
