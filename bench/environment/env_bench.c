/* env_bench: how long the first install of a package set takes (or that it is reused), then
 * what a run pays for the folder: median wall time of sandboxed runs of `pass` without it, of
 * `pass` with it bound read-only on sys.path, and of an import of what the set offers.
 *   env_bench CACHE_DIR PYTHON SPEC[,SPEC...] [RUNS (20)] [IMPORT_CODE]
 * PTC_BENCH_MEMORY_MB sets the runs' memory limit (default: the executor's, 256 MiB).
 * For a first-install figure from a fresh machine, point XDG_CACHE_HOME at an empty folder
 * (pip's own download cache) and CACHE_DIR at a new one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "environment.h"
#include "executor.h"

#define MAX_RUNS 200

typedef struct bench {
    uv_loop_t *loop;
    exec_pool_t *pool;
    uint64_t ms[MAX_RUNS];
    int n;
    bool failed;
} bench_t;

static void on_log(env_log_level_t level, const char *line, void *user)
{
    (void)user;
    if (level != ENV_LOG_PROGRESS) fprintf(stderr, "env: %s\n", line);
}

static void on_run(exec_run_t *run, const exec_result_t *res, void *user)
{
    (void)run;
    bench_t *b = user;
    if (res->status != EXEC_STATUS_OK) {
        fprintf(stderr, "run failed (%s): %.*s\n", exec_status_name(res->status), (int)res->err.len,
                (const char *)res->err.data);
        b->failed = true;
    }
    b->ms[b->n++] = res->duration_ms;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Median of runs of code, one after another (each waits for the previous one). */
static double median_ms(bench_t *b, const char *code, const char *ro_dir, int runs)
{
    b->n = 0;
    b->failed = false;
    exec_run_opts_t ro;
    exec_run_opts_init(&ro);
    ro.ro_dir = ro_dir;
    exec_callbacks_t cb = {.on_done = on_run, .user = b};
    /* one unmeasured run first: the warm sandboxes are made for this folder from then on */
    if (exec_run_start_ex(b->pool, code, 60000, &ro, &cb, NULL) != 0) return -1;
    uv_run(b->loop, UV_RUN_DEFAULT);
    b->n = 0;
    for (int i = 0; i < runs; i++) {
        if (exec_run_start_ex(b->pool, code, 60000, &ro, &cb, NULL) != 0) return -1;
        while (b->n == i)
            uv_run(b->loop, UV_RUN_ONCE);
    }
    if (b->failed) return -1;
    qsort(b->ms, (size_t)b->n, sizeof b->ms[0], cmp_u64);
    return b->n % 2 ? (double)b->ms[b->n / 2]
                    : ((double)b->ms[b->n / 2 - 1] + (double)b->ms[b->n / 2]) / 2.0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s CACHE_DIR PYTHON SPEC[,SPEC...] [RUNS] [IMPORT_CODE]\n",
                argv[0]);
        return 2;
    }
    int runs = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 20;
    if (runs < 1 || runs > MAX_RUNS) runs = 20;
    char *list = strdup(argv[3]);
    const char *specs[ENV_MAX_SPECS];
    size_t n = 0;
    char *save = NULL;
    for (char *s = strtok_r(list, ",", &save); s && n < ENV_MAX_SPECS;
         s = strtok_r(NULL, ",", &save))
        specs[n++] = s;

    uv_loop_t loop;
    if (list == NULL || uv_loop_init(&loop) != 0) return 1;
    env_options_t o;
    env_options_init(&o);
    o.python = argv[2];
    o.cache_dir = argv[1];
    o.specs = specs;
    o.n_specs = n;
    o.log = on_log;
    env_t *env;
    char msg[ENV_MESSAGE_MAX];
    uint64_t t0 = uv_hrtime();
    if (env_start(&loop, &o, &env, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s\n", msg);
        return 1;
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    double secs = (double)(uv_hrtime() - t0) / 1e9;
    env_status_t st;
    env_status(env, &st);
    if (st.state != ENV_STATE_READY) {
        fprintf(stderr, "%s\n%s", st.message, st.tail);
        return 1;
    }
    printf("environment %s in %.3f s (pip %.1f s): %s\n", st.reused ? "reused" : "installed", secs,
           (double)st.install_ms / 1000.0, st.installed);

    exec_options_t eo;
    exec_options_init(&eo);
    eo.python = argv[2];
    eo.launcher = BENCH_LAUNCHER;
    /* PTC_BENCH_MEMORY_MB: the runs' memory limit (default: the executor's) */
    const char *mem = getenv("PTC_BENCH_MEMORY_MB");
    long mem_mib = mem ? strtol(mem, NULL, 10) : 0;
    if (mem_mib > 0) eo.memory_bytes = (uint64_t)mem_mib << 20;
    bench_t b = {.loop = &loop};
    if (exec_pool_new(&loop, &eo, &b.pool) != 0 || exec_pool_refusing(b.pool)) {
        fprintf(stderr, "the sandbox refuses runs here\n");
        return 1;
    }
    const char *imports = argc > 5 ? argv[5] : NULL;
    double bare = median_ms(&b, "pass", NULL, runs);
    double with = median_ms(&b, "pass", st.site_dir, runs);
    printf("median of %d sandboxed runs (warm start %s): pass %.1f ms, pass with the folder "
           "%.1f ms\n",
           runs, exec_pool_probe(b.pool)->warm_start ? "on" : "off", bare, with);
    if (imports) printf("  %s: %.1f ms\n", imports, median_ms(&b, imports, st.site_dir, runs));
    exec_pool_free(b.pool);
    uv_run(&loop, UV_RUN_DEFAULT);
    env_free(env);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    free(list);
    return 0;
}
