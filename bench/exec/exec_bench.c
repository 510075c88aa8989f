/*
 * Start-up latency of a sandboxed `print(1)` through the executor pool (what execute_code pays
 * per run, minus JSON-RPC), side by side with the bare interpreter in the same process and run.
 * Runs one at a time. Usage: exec_bench [N] [GAP_MS] [PYTHON] [only]. GAP_MS (default 0) idles
 * between runs as a client would between calls; it lets the pool's warm sandbox finish setting
 * up. "only" skips the bare runs, so that `perf stat` or `/usr/bin/time` around the bench counts
 * the sandboxes' CPU alone.
 */
#include "bench_stats.h"
#include "executor.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#define MAX_N 1000

static double bare(const char *python, const char *const *extra, int n_extra)
{
    char *argv[8];
    int k = 0;
    argv[k++] = (char *)(uintptr_t)python;
    for (int i = 0; i < n_extra; i++)
        argv[k++] = (char *)(uintptr_t)extra[i];
    argv[k] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    uint64_t t0 = uv_hrtime();
    pid_t pid;
    if (posix_spawn(&pid, python, &fa, NULL, argv, environ) != 0) return -1;
    int st;
    waitpid(pid, &st, 0);
    posix_spawn_file_actions_destroy(&fa);
    return (double)(uv_hrtime() - t0) / 1e6;
}

typedef struct {
    bool done;
    bool ok;
    uv_loop_t *loop;
} done_t;

static void on_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    (void)run;
    done_t *d = user;
    d->done = true;
    d->ok = r->status == EXEC_STATUS_OK && r->out.len == 2 && memcmp(r->out.data, "1\n", 2) == 0;
    /* the answer is what a caller waits for; the sandbox's end goes on in the loop */
    uv_stop(d->loop);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 30;
    int gap = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 0;
    const char *python = argc > 3 ? argv[3] : EXEC_DEFAULT_PYTHON;
    bool only = argc > 4 && strcmp(argv[4], "only") == 0;
    if (n < 3 || n > MAX_N) n = 30;
    static double sb[MAX_N], b_is[MAX_N], b_i[MAX_N];
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_options_t o;
    exec_options_init(&o);
    o.python = python;
    o.launcher = BENCH_LAUNCHER;
    o.max_concurrent = 1;
    exec_pool_t *pool;
    if (exec_pool_new(&loop, &o, &pool) < 0 || exec_pool_refusing(pool)) {
        fprintf(stderr, "sandbox unavailable\n");
        return 1;
    }
    const char *is[] = {"-I", "-S", "-c", "print(1)"};
    const char *i_[] = {"-I", "-c", "print(1)"};
    for (int i = 0; i < n; i++) {
        if (gap > 0) usleep((useconds_t)gap * 1000u);
        done_t d = {.loop = &loop};
        exec_callbacks_t cb = {.on_done = on_done, .user = &d};
        uint64_t t0 = uv_hrtime();
        if (exec_run_start(pool, "print(1)", 10000, &cb, NULL) < 0) return 1;
        while (!d.done)
            if (uv_run(&loop, UV_RUN_DEFAULT) == 0 && !d.done) return 1;
        sb[i] = (double)(uv_hrtime() - t0) / 1e6;
        if (!d.ok) {
            fprintf(stderr, "run %d failed\n", i);
            return 1;
        }
        if (only) continue;
        b_is[i] = bare(python, is, 4);
        b_i[i] = bare(python, i_, 3);
    }
    double s50 = bench_pct(sb, n, 0.5), s99 = bench_pct(sb, n, 0.99);
    if (only) {
        printf("sandboxed print(1) via pool, %d runs, %d ms idle: p50 %.2f p99 %.2f ms\n", n, gap,
               s50, s99);
    } else {
        double a50 = bench_pct(b_is, n, 0.5), a99 = bench_pct(b_is, n, 0.99);
        double c50 = bench_pct(b_i, n, 0.5), c99 = bench_pct(b_i, n, 0.99);
        printf("python: %s, %d runs each, interleaved, %d ms idle between runs; ms\n", python, n,
               gap);
        printf("%-44s p50 %7.2f  p99 %7.2f\n", "sandboxed print(1) via pool (-I -B -u)", s50, s99);
        printf("%-44s p50 %7.2f  p99 %7.2f\n", "bare python3 -I -c 'print(1)'", c50, c99);
        printf("%-44s p50 %7.2f  p99 %7.2f\n", "bare python3 -I -S -c 'print(1)'", a50, a99);
        printf("ratio sandboxed / bare -I: %.2fx, / bare -I -S: %.2fx (p50)\n", s50 / c50,
               s50 / a50);
    }
    exec_pool_free(pool);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return 0;
}
