/* executor: runs through the real launcher and sandbox, as root and (via run_as_user.sh) as an
   ordinary user. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "executor.h"

#define PYTHON       "/usr/bin/python3"
#define T_TIMEOUT_MS 20000u
#define MAX_CAPTURE  (8u << 20)

typedef struct {
    bool done;
    int calls;
    exec_status_t status;
    int exit_code, sig;
    char signame[16];
    unsigned char *out, *err;
    size_t out_len, err_len;
    uint64_t out_total, err_total;
    bool out_trunc, err_trunc;
    uint64_t duration_ms;
    exec_sandbox_level_t sandbox;
    char message[800];
    int progress_calls;
    uint64_t last_elapsed, last_bytes;
    bool warm;
    bool zygote;             /* the run's sandbox was forked by the zygote */
    bool cancel_on_progress; /* cancel the run through the handle on_progress gets */
    uint64_t done_ns;        /* uv_hrtime() at on_done */
    size_t n_files;
    char file0[64], data0[64]; /* the first file's name and (start of its) bytes */
} capture_t;

static void capture_free(capture_t *c)
{
    free(c->out);
    free(c->err);
    memset(c, 0, sizeof *c);
}

static void on_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    (void)run;
    capture_t *c = user;
    c->done = true;
    c->calls++;
    c->status = r->status;
    c->exit_code = r->exit_code;
    c->sig = r->signal;
    snprintf(c->signame, sizeof c->signame, "%s", r->signal_name ? r->signal_name : "");
    c->out = malloc(r->out.len + 1);
    c->err = malloc(r->err.len + 1);
    assert_non_null(c->out);
    assert_non_null(c->err);
    if (r->out.len) memcpy(c->out, r->out.data, r->out.len);
    if (r->err.len) memcpy(c->err, r->err.data, r->err.len);
    c->out[r->out.len] = 0;
    c->err[r->err.len] = 0;
    c->out_len = r->out.len;
    c->err_len = r->err.len;
    c->out_total = r->out.total;
    c->err_total = r->err.total;
    c->out_trunc = r->out.truncated;
    c->err_trunc = r->err.truncated;
    c->duration_ms = r->duration_ms;
    c->sandbox = r->sandbox;
    c->warm = r->warm_start;
    c->zygote = r->zygote;
    c->done_ns = uv_hrtime();
    snprintf(c->message, sizeof c->message, "%s", r->message ? r->message : "");
    c->n_files = r->n_files;
    if (r->n_files) {
        snprintf(c->file0, sizeof c->file0, "%s", r->files[0].name);
        size_t n = r->files[0].len < sizeof c->data0 - 1 ? r->files[0].len : sizeof c->data0 - 1;
        memcpy(c->data0, r->files[0].data, n);
        c->data0[n] = 0;
    }
}

static void on_progress(exec_run_t *run, uint64_t elapsed, uint64_t bytes, void *user)
{
    (void)run;
    capture_t *c = user;
    c->progress_calls++;
    c->last_elapsed = elapsed;
    c->last_bytes = bytes;
    if (c->cancel_on_progress) exec_run_cancel(run);
}

static bool as_root(void)
{
    return geteuid() == 0;
}

static void base_opts(exec_options_t *o)
{
    exec_options_init(o);
    o->python = PYTHON;
    o->launcher = TEST_LAUNCHER;
    o->max_concurrent = 4;
}

static exec_pool_t *new_pool(uv_loop_t *loop, const exec_options_t *o)
{
    exec_pool_t *pool = NULL;
    int r = exec_pool_new(loop, o, &pool);
    assert_int_equal(r, 0);
    assert_non_null(pool);
    if (!o->unsafe_no_sandbox && !o->test_disable_layer) {
        if (exec_pool_refusing(pool)) {
            char rep[4096];
            exec_probe_report(exec_pool_probe(pool), rep, sizeof rep);
            fprintf(stderr, "%s", rep);
        }
        assert_false(exec_pool_refusing(pool));
    }
    return pool;
}

static void start(exec_pool_t *pool, const char *code, uint64_t timeout, capture_t *c,
                  exec_run_t **run)
{
    exec_callbacks_t cb = {.on_done = on_done, .on_progress = on_progress, .user = c};
    assert_int_equal(exec_run_start(pool, code, timeout, &cb, run), 0);
}

/* ---- the fixture: a loop and a pool per test, made from the base options and what the test
   changes in them (data only, given as the test's prestate; NULL: the base options) ---- */

typedef struct {
    unsigned max_concurrent, max_queue, cpu_millis, progress_ms; /* 0: the base's */
    size_t stdout_keep, stderr_keep;                             /* 0: the base's */
    unsigned warm_sandboxes, warm_idle_ms;                       /* 0: the base's */
    bool cold;                                                   /* keep_warm off */
    bool unsafe_no_sandbox, zygote;                              /* false: the base's */
    const char *test_disable_layer;                              /* NULL: none */
    const char *python;                                          /* NULL: PYTHON */
    const char *launcher;                                        /* NULL: TEST_LAUNCHER */
    const char *const *mounts;
    size_t n_mounts;
    const char *const *pass_env;
    size_t n_pass_env;
} pool_opts_t;

typedef struct {
    uv_loop_t loop;
    exec_pool_t *pool; /* NULL once a test freed it itself */
} fixture_t;

#define SET_IF(field)                                                                              \
    do {                                                                                           \
        if (want->field) o.field = want->field;                                                    \
    } while (0)

/* A loop and a pool made from the base options and want (NULL: the base options alone). */
static fixture_t *fixture_open(const pool_opts_t *want)
{
    static const pool_opts_t base = {0};
    if (want == NULL) want = &base;
    fixture_t *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    exec_options_t o;
    base_opts(&o);
    SET_IF(max_concurrent);
    SET_IF(max_queue);
    SET_IF(cpu_millis);
    SET_IF(progress_ms);
    SET_IF(stdout_keep);
    SET_IF(stderr_keep);
    SET_IF(warm_sandboxes);
    SET_IF(warm_idle_ms);
    SET_IF(unsafe_no_sandbox);
    SET_IF(zygote);
    SET_IF(test_disable_layer);
    SET_IF(python);
    SET_IF(launcher);
    SET_IF(mounts);
    SET_IF(n_mounts);
    SET_IF(pass_env);
    SET_IF(n_pass_env);
    if (want->cold) o.keep_warm = false;
    fx->pool = new_pool(&fx->loop, &o);
    return fx;
}

/* Frees the pool, lets its handles close and checks that nothing was left on the loop. */
static void fixture_close(fixture_t *fx)
{
    if (fx->pool != NULL) exec_pool_free(fx->pool);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    free(fx);
}

/* cmocka's per-test fixture: the prestate is the test's pool_opts_t (or NULL). */
static int pool_setup(void **state)
{
    *state = fixture_open(*state);
    return 0;
}

static int pool_teardown(void **state)
{
    fixture_close(*state);
    return 0;
}

/* one run on the test's pool (the base options) */
static void run1(fixture_t *fx, const char *code, uint64_t timeout, capture_t *c)
{
    start(fx->pool, code, timeout, c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_true(c->done);
    assert_int_equal(c->calls, 1);
}

static void test_hello_world_runs_in_the_sandbox(void **state)
{
    fixture_t *fx = *state;
    capture_t c = {0};
    run1(fx, "print('hello world')", T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_int_equal(c.exit_code, 0);
    assert_int_equal(c.sig, 0);
    assert_string_equal((char *)c.out, "hello world\n");
    assert_int_equal(c.err_len, 0);
    assert_false(c.out_trunc);
    /* root gets every layer; an ordinary user has no cgroup here */
    assert_int_equal(c.sandbox, as_root() ? EXEC_SANDBOX_FULL : EXEC_SANDBOX_DEGRADED);
    capture_free(&c);
}

static void test_identity_inside_is_unprivileged(void **state)
{
    fixture_t *fx = *state;
    capture_t c = {0};
    run1(fx,
         "import os\n"
         "st = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() "
         "if ':\\t' in l)\n"
         "print(os.getuid(), os.getgid(), os.getpid(), os.getcwd(), st['CapEff'], st['CapBnd'], "
         "st['NoNewPrivs'], st['Seccomp'])",
         T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal((char *)c.out, "1000 1000 2 /tmp 0000000000000000 0000000000000000 1 2\n");
    capture_free(&c);
}

static void test_exception_is_error_with_traceback(void **state)
{
    fixture_t *fx = *state;
    capture_t c = {0};
    run1(fx, "print('before')\n1/0\n", T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_ERROR);
    assert_int_equal(c.exit_code, 1);
    assert_string_equal((char *)c.out, "before\n");
    assert_non_null(strstr((char *)c.err, "Traceback (most recent call last)"));
    assert_non_null(strstr((char *)c.err, "ZeroDivisionError: division by zero"));
    capture_free(&c);
}

static void test_exit_code_is_reported(void **state)
{
    fixture_t *fx = *state;
    capture_t c = {0};
    run1(fx, "import sys; sys.exit(7)", T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_ERROR);
    assert_int_equal(c.exit_code, 7);
    assert_int_equal(c.sig, 0);
    capture_free(&c);
}

static void test_signal_death_is_killed_with_its_name(void **state)
{
    fixture_t *fx = *state;
    capture_t c = {0};
    run1(fx, "import os; os.abort()", T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_KILLED);
    assert_int_equal(c.exit_code, -1);
    assert_string_equal(c.signame, "SIGABRT");
    capture_free(&c);
}

static void test_stdin_is_empty(void **state)
{
    fixture_t *fx = *state;
    capture_t c = {0};
    run1(fx, "import sys; print(repr(sys.stdin.read()))", T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal((char *)c.out, "''\n");
    capture_free(&c);
}

static void test_unicode_and_invalid_utf8_pass_through(void **state)
{
    fixture_t *fx = *state;
    capture_t c = {0};
    run1(fx,
         "import sys\n"
         "print('h\\u00e9llo \\u2713 \\U0001F600')\n"
         "sys.stdout.flush()\n"
         "sys.stdout.buffer.write(b'\\xff\\xfe\\x00end')\n"
         "sys.stderr.buffer.write(b'\\xc3\\x28')\n",
         T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    static const unsigned char want[] = "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80\n\xff\xfe\0end";
    assert_int_equal(c.out_len, sizeof want - 1);
    assert_memory_equal(c.out, want, sizeof want - 1);
    assert_int_equal(c.err_len, 2);
    assert_memory_equal(c.err, "\xc3\x28", 2);
    capture_free(&c);
}

static void test_output_beyond_the_cap_is_counted_not_kept(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t c = {0};
    start(pool,
          "import sys\nsys.stdout.write('a' * 300000)\nsys.stderr.write('e' * 50)\n"
          "sys.stdout.write('z')\n",
          T_TIMEOUT_MS, &c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_int_equal(c.out_len, 1000);
    assert_int_equal(c.out_total, 300001);
    assert_true(c.out_trunc);
    assert_int_equal(c.out[999], 'a');
    assert_int_equal(c.err_len, 10);
    assert_int_equal(c.err_total, 50);
    assert_true(c.err_trunc);
    capture_free(&c);
}

static void test_timeout_kills_a_spinning_run(void **state)
{
    fixture_t *fx = *state;
    capture_t c = {0};
    run1(fx, "print('spinning', flush=True)\nwhile True: pass", 700, &c);
    assert_int_equal(c.status, EXEC_STATUS_TIMEOUT);
    assert_string_equal(c.signame, "SIGKILL");
    assert_string_equal((char *)c.out, "spinning\n"); /* output before the kill survives */
    assert_true(c.duration_ms >= 700);
    capture_free(&c);
}

/* init kills the code, not itself, at the timeout, and sends what the code left in
   /tmp/outputs first; with and without a PID namespace (then only the interpreter is killed by
   init, its children by the launcher) and without a user namespace */
static void test_timeout_returns_the_files_written_before(void **state)
{
    (void)state;
    const char *layers[] = {NULL, "pid-ns", "user-ns"};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        fixture_t *fx = fixture_open(&(pool_opts_t){.test_disable_layer = layers[i]});
        exec_pool_t *pool = fx->pool;
        capture_t c = {0};
        start(pool,
              "import os, time\n"
              "open(os.environ['PTC_OUTPUT_DIR'] + '/kept.txt', 'w').write('before')\n"
              "if os.fork() == 0:\n    time.sleep(60)\n"
              "print('waiting', flush=True)\nwhile True: time.sleep(0.05)\n",
              1000, &c, NULL);
        uv_run(&fx->loop, UV_RUN_DEFAULT);
        assert_int_equal(c.status, EXEC_STATUS_TIMEOUT);
        assert_string_equal((char *)c.out, "waiting\n");
        assert_int_equal(c.n_files, 1);
        assert_string_equal(c.file0, "kept.txt");
        assert_string_equal(c.data0, "before");
        /* the files' grace (1 s), not the kill's: the sleeping child did not hold the end up */
        assert_true(c.duration_ms < 1000 + EXEC_TIMEOUT_FILES_MS + 500);
        fixture_close(fx);
        capture_free(&c);
    }
}

/* cpu_millis sets the cgroup's cpu.max: the layer says the share, and a spinning run gets no
   more of a core than that (the bound holds on a loaded machine too: load only lowers it) */
static void test_cpu_share_is_the_cgroup_quota(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    const exec_probe_t *p = exec_pool_probe(pool);
    bool cpu_cg = p->state[EXEC_LAYER_CGROUP_CPU] == EXEC_LAYER_ACTIVE;
    if (cpu_cg) assert_non_null(strstr(p->reason[EXEC_LAYER_CGROUP_CPU], "0.100 CPU"));
    capture_t c = {0};
    start(pool,
          "import time\nt = time.monotonic(); c = time.process_time()\n"
          "while time.monotonic() - t < 1.5: pass\n"
          "print(int(1000 * (time.process_time() - c) / (time.monotonic() - t)))\n",
          T_TIMEOUT_MS, &c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    if (cpu_cg) assert_true(strtol((char *)c.out, NULL, 10) <= 180); /* thousandths of a core */
    capture_free(&c);
}

static void test_queue_time_does_not_count_against_timeout(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t a = {0}, b = {0};
    start(pool, "import time; time.sleep(2.5)", T_TIMEOUT_MS, &a, NULL);
    /* b waits ~2.5 s in the queue; it would time out if the queue counted */
    start(pool, "print('b ran')", 2000, &b, NULL);
    assert_int_equal(exec_pool_running(pool), 1);
    assert_int_equal(exec_pool_queued(pool), 1);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(a.status, EXEC_STATUS_OK);
    assert_int_equal(b.status, EXEC_STATUS_OK);
    assert_string_equal((char *)b.out, "b ran\n");
    capture_free(&a);
    capture_free(&b);
}

#define N_CONC 20
static void test_twenty_concurrent_runs_all_correct(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t c[N_CONC];
    memset(c, 0, sizeof c);
    for (int i = 0; i < N_CONC; i++) {
        char code[200];
        snprintf(code, sizeof code,
                 "import os\nopen('/tmp/me', 'w').write('%d')\nprint(%d * 3, "
                 "open('/tmp/me').read(), os.listdir('/tmp'))",
                 i, i);
        start(pool, code, T_TIMEOUT_MS, &c[i], NULL);
    }
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    for (int i = 0; i < N_CONC; i++) {
        char want[64];
        snprintf(want, sizeof want, "%d %d ['me', 'outputs']\n", i * 3, i);
        assert_int_equal(c[i].status, EXEC_STATUS_OK);
        assert_string_equal((char *)c[i].out, want);
        capture_free(&c[i]);
    }
}

static void test_concurrent_runs_do_not_share_tmp(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t a = {0}, b = {0};
    start(pool, "import time; open('/tmp/secret-a', 'w').write('x'); time.sleep(2)", T_TIMEOUT_MS,
          &a, NULL);
    start(pool, "import os, time; time.sleep(0.8); print(os.listdir('/tmp'))", T_TIMEOUT_MS, &b,
          NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(a.status, EXEC_STATUS_OK);
    assert_int_equal(b.status, EXEC_STATUS_OK);
    assert_string_equal((char *)b.out, "['outputs']\n");
    capture_free(&a);
    capture_free(&b);
}

static void test_full_queue_is_an_error(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t a = {0}, b = {0};
    start(pool, "import time; time.sleep(0.5)", T_TIMEOUT_MS, &a, NULL);
    start(pool, "print(2)", T_TIMEOUT_MS, &b, NULL);
    exec_callbacks_t cb = {.on_done = on_done, .user = NULL};
    exec_run_t *third = (exec_run_t *)&cb;
    assert_int_equal(exec_run_start(pool, "print(3)", T_TIMEOUT_MS, &cb, &third), EXEC_EQUEUEFULL);
    assert_null(third);
    assert_non_null(strstr(exec_error_hint(EXEC_EQUEUEFULL), "--max-queue"));
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(a.status, EXEC_STATUS_OK);
    assert_string_equal((char *)b.out, "2\n");
    capture_free(&a);
    capture_free(&b);
}

typedef struct {
    exec_run_t *run;
    uv_timer_t timer;
} cancel_ctx_t;

static void cancel_cb(uv_timer_t *t)
{
    cancel_ctx_t *x = t->data;
    exec_run_cancel(x->run);
    uv_close((uv_handle_t *)t, NULL);
}

static void test_cancel_kills_a_running_run_without_callback(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t a = {0}, b = {0}, q = {0};
    cancel_ctx_t x;
    start(pool, "import time\nwhile True: time.sleep(1)", T_TIMEOUT_MS, &a, &x.run);
    exec_run_t *queued = NULL;
    start(pool, "print('queued')", T_TIMEOUT_MS, &q, &queued);
    exec_run_cancel(queued); /* still in the queue: dropped at once */
    assert_int_equal(exec_pool_queued(pool), 0);
    uv_timer_init(&fx->loop, &x.timer);
    x.timer.data = &x;
    uv_timer_start(&x.timer, cancel_cb, 500, 0);
    uint64_t t0 = uv_hrtime();
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    /* the loop ended long before the 20 s timeout: the tree is gone, nothing called back */
    assert_true((uv_hrtime() - t0) / 1000000u < T_TIMEOUT_MS);
    assert_false(a.done);
    assert_false(q.done);
    assert_int_equal(exec_pool_running(pool), 0);
    start(pool, "print('after')", T_TIMEOUT_MS, &b, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_string_equal((char *)b.out, "after\n");
    capture_free(&b);
}

static void test_progress_reports_time_and_bytes(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t c = {0};
    start(pool, "import time\nprint('x' * 99)\ntime.sleep(1.2)", T_TIMEOUT_MS, &c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_true(c.progress_calls >= 2);
    assert_true(c.last_elapsed >= 100);
    assert_int_equal(c.last_bytes, 100);
    capture_free(&c);
}

static void test_pool_free_with_live_runs_calls_nothing(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t a = {0}, b = {0};
    start(pool, "while True: pass", T_TIMEOUT_MS, &a, NULL);
    start(pool, "print(1)", T_TIMEOUT_MS, &b, NULL);
    uv_run(&fx->loop, UV_RUN_NOWAIT);
    exec_pool_free(pool);
    fx->pool = NULL; /* the teardown checks that the loop has nothing left */
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_false(a.done);
    assert_false(b.done);
}

static void test_probe_finds_the_mandatory_layers(void **state)
{
    (void)state;
    exec_options_t o;
    base_opts(&o);
    exec_probe_t p;
    assert_int_equal(exec_probe(&o, &p), 0);
    assert_true(p.mandatory_ok);
    assert_true(p.python_ok);
    assert_int_equal(p.state[EXEC_LAYER_SECCOMP], EXEC_LAYER_ACTIVE);
    assert_int_equal(p.state[EXEC_LAYER_PID_NS], EXEC_LAYER_ACTIVE);
    assert_int_equal(p.state[EXEC_LAYER_ROOTFS], EXEC_LAYER_ACTIVE);
    assert_int_equal(p.state[EXEC_LAYER_NO_NEW_PRIVS], EXEC_LAYER_ACTIVE);
    assert_int_equal(p.state[EXEC_LAYER_CGROUP_MEMORY],
                     as_root() ? EXEC_LAYER_ACTIVE : EXEC_LAYER_UNAVAILABLE);
    char rep[4096];
    size_t need = exec_probe_report(&p, rep, sizeof rep);
    assert_true(need < sizeof rep);
    assert_non_null(strstr(rep, "seccomp        active"));
    assert_non_null(strstr(rep, "present"));
    assert_true(p.warm_start);
    assert_non_null(strstr(rep, "warm start: active"));
    o.keep_warm = false;
    exec_probe_t cold;
    assert_int_equal(exec_probe(&o, &cold), 0);
    assert_false(cold.warm_start);
    char rep2[4096];
    exec_probe_report(&cold, rep2, sizeof rep2);
    assert_non_null(strstr(rep2, "warm start: inactive"));
    /* a too-small buffer is still terminated and the needed size is reported */
    char small[16];
    assert_int_equal(exec_probe_report(&p, small, sizeof small), need);
    assert_int_equal(strlen(small), sizeof small - 1);
}

static void test_missing_launcher_refuses_runs(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_options_t o;
    base_opts(&o);
    o.launcher = "/nonexistent/ptc-sandbox-launch";
    exec_pool_t *pool = NULL;
    assert_int_equal(exec_pool_new(&loop, &o, &pool), 0);
    assert_true(exec_pool_refusing(pool));
    capture_t c = {0};
    start(pool, "print(1)", T_TIMEOUT_MS, &c, NULL);
    assert_false(c.done); /* never called back from inside exec_run_start */
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_REFUSED);
    assert_non_null(strstr(c.message, "ptc-sandbox-launch"));
    exec_pool_free(pool);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    capture_free(&c);
}

static void test_unsafe_mode_runs_without_a_sandbox(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t c = {0};
    char code[128];
    snprintf(code, sizeof code, "import os; print(os.getuid() == %d, os.getpid() != 2)",
             (int)getuid());
    start(pool, code, T_TIMEOUT_MS, &c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_int_equal(c.sandbox, EXEC_SANDBOX_NONE);
    assert_string_equal((char *)c.out, "True True\n");
    capture_free(&c);
}

/* one run with dir bound at /data (mode: "" or ":rw") */
static void run_with_mount(const char *dir, const char *mode, const char *code, capture_t *c)
{
    char spec[256];
    snprintf(spec, sizeof spec, "%s:/data%s", dir, mode);
    const char *mounts[] = {spec};
    fixture_t *fx = fixture_open(&(pool_opts_t){.mounts = mounts, .n_mounts = 1});
    exec_pool_t *pool = fx->pool;
    start(pool, code, T_TIMEOUT_MS, c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    fixture_close(fx);
}

static void test_mounts_are_read_only_unless_rw(void **state)
{
    (void)state;
    char dir[] = "/tmp/ptc-exec-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    char file[128];
    snprintf(file, sizeof file, "%s/data.txt", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("42", f);
    fclose(f);
    chmod(file, 0644);
    capture_t c = {0};
    run_with_mount(dir, "",
                   "import errno\nprint(open('/data/data.txt').read())\n"
                   "try:\n    open('/data/new', 'w')\nexcept OSError as e:\n"
                   "    print(errno.errorcode[e.errno])\n",
                   &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal((char *)c.out, "42\nEROFS\n");
    capture_free(&c);
    unlink(file);
    rmdir(dir);
}

/* one run with dir bound read-write that creates /data/made; the file's host owner */
static uid_t owner_of_made(const char *dir)
{
    capture_t c = {0};
    run_with_mount(dir, ":rw", "open('/data/made', 'w').write('x')\n", &c);
    if (c.status != EXEC_STATUS_OK) fprintf(stderr, "%s%s\n", c.err, c.message);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    capture_free(&c);
    char file[160];
    snprintf(file, sizeof file, "%s/made", dir);
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    unlink(file);
    return st.st_uid;
}

/* What the code writes into an rw mount belongs on the host to the server's user (an ordinary
   user's sandbox maps to it), or as root to the folder's owner through an idmapped mount; a
   root-owned folder is never mapped to root (setuid-root files), so there it stays nobody's. */
static void test_rw_mount_files_belong_to_the_folder_owner(void **state)
{
    (void)state;
    char dir[] = "/tmp/ptc-exec-own-XXXXXX";
    assert_non_null(mkdtemp(dir));
    if (!as_root()) {
        assert_int_equal(owner_of_made(dir), getuid());
        rmdir(dir);
        return;
    }
    assert_int_equal(chown(dir, 4321, 4321), 0);
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(owner_of_made(dir), 4321);
    assert_int_equal(chown(dir, 0, 0), 0);
    assert_int_equal(chmod(dir, 0777), 0);
    assert_int_equal(owner_of_made(dir), 65534);
    rmdir(dir);
}

static void test_only_passed_variables_reach_the_run(void **state)
{
    (void)state;
    setenv("PTC_TEST_PASSED", "yes", 1);
    setenv("PTC_TEST_SECRET", "hidden", 1);
    const char *names[] = {"PTC_TEST_PASSED", "PTC_TEST_UNSET_VAR"};
    fixture_t *fx = fixture_open(&(pool_opts_t){.pass_env = names, .n_pass_env = 2});
    exec_pool_t *pool = fx->pool;
    capture_t c = {0};
    start(pool,
          "import os\nprint(sorted(k for k in os.environ if k not in ('LC_CTYPE',)))\n"
          "print(os.environ['PTC_TEST_PASSED'], os.environ['HOME'], os.environ['LANG'])",
          T_TIMEOUT_MS, &c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal((char *)c.out,
                        "['HOME', 'LANG', 'LC_ALL', 'LOGNAME', 'MPLBACKEND', 'PATH', "
                        "'PTC_OUTPUT_DIR', 'PTC_TEST_PASSED', 'PYTHONDONTWRITEBYTECODE', "
                        "'PYTHONUNBUFFERED', 'TMPDIR', 'USER']\n"
                        "yes /tmp C.UTF-8\n");
    fixture_close(fx);
    capture_free(&c);
}

static void test_bad_options_are_rejected(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_pool_t *pool = NULL;
    exec_options_t o;
    static const char *const bad_mounts[] = {
        "relative:/x",   "/tmp:/proc/x", "/tmp:/",           "/tmp",
        "/tmp:/data:rx", "/tmp:/a/../b", "/nonexistent-x:/x"};
    for (size_t i = 0; i < sizeof bad_mounts / sizeof bad_mounts[0]; i++) {
        base_opts(&o);
        o.mounts = &bad_mounts[i];
        o.n_mounts = 1;
        assert_int_equal(exec_pool_new(&loop, &o, &pool), EXEC_EINVAL);
        assert_null(pool);
    }
    const char *ld[] = {"LD_PRELOAD"};
    base_opts(&o);
    o.pass_env = ld;
    o.n_pass_env = 1;
    assert_int_equal(exec_pool_new(&loop, &o, &pool), EXEC_EINVAL);
    /* a pyenv-style shim is a shell script: refused with a hint to pass the real binary */
    char shim[] = "/tmp/ptc-shim-XXXXXX";
    int fd = mkstemp(shim);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "#!/bin/sh\n", 10), 10);
    close(fd);
    chmod(shim, 0755);
    base_opts(&o);
    o.python = shim;
    assert_int_equal(exec_pool_new(&loop, &o, &pool), EXEC_EPYTHON);
    unlink(shim);
    base_opts(&o);
    o.test_disable_layer = "no-such-layer";
    assert_int_equal(exec_pool_new(&loop, &o, &pool), EXEC_EINVAL);
    base_opts(&o);
    o.cpu_millis = EXEC_MIN_CPU_MILLIS - 1;
    assert_int_equal(exec_pool_new(&loop, &o, &pool), EXEC_EINVAL);
    o.cpu_millis = EXEC_MAX_CPU_MILLIS + 1;
    assert_int_equal(exec_pool_new(&loop, &o, &pool), EXEC_EINVAL);

    base_opts(&o);
    pool = new_pool(&loop, &o);
    exec_callbacks_t cb = {.on_done = on_done};
    size_t big = EXEC_MAX_CODE_BYTES + 1;
    char *code = malloc(big + 1);
    assert_non_null(code);
    memset(code, '#', big);
    code[big] = 0;
    assert_int_equal(exec_run_start(pool, code, 1000, &cb, NULL), EXEC_ETOOBIG);
    free(code);
    assert_int_equal(exec_run_start(pool, "pass", 0, &cb, NULL), EXEC_EINVAL);
    exec_pool_free(pool);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}

static void test_names_round_trip(void **state)
{
    (void)state;
    for (int i = 0; i < EXEC_LAYER_COUNT; i++)
        assert_int_equal(exec_layer_from_name(exec_layer_name((exec_layer_id_t)i)), i);
    assert_null(exec_layer_name(EXEC_LAYER_COUNT));
    assert_string_equal(exec_status_name(EXEC_STATUS_OOM), "oom");
    assert_string_equal(exec_sandbox_level_name(EXEC_SANDBOX_DEGRADED), "degraded");
    assert_string_equal(exec_strerror(EXEC_EQUEUEFULL), "run queue full");
}

static void free_pool_cb(exec_run_t *run, const exec_result_t *r, void *user)
{
    on_done(run, r, ((void **)user)[0]);
    exec_pool_free(((void **)user)[1]);
}

static void test_pool_free_inside_on_done(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t a = {0}, b = {0};
    void *ctx[2] = {&a, pool};
    exec_callbacks_t cb = {.on_done = free_pool_cb, .user = ctx};
    assert_int_equal(exec_run_start(pool, "print('a')", T_TIMEOUT_MS, &cb, NULL), 0);
    start(pool, "print('b')", T_TIMEOUT_MS, &b, NULL); /* queued, dropped by the free */
    fx->pool = NULL; /* free_pool_cb frees it; the teardown checks the loop is left empty */
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_string_equal((char *)a.out, "a\n");
    assert_false(b.done);
    capture_free(&a);
}

static void test_largest_code_runs(void **state)
{
    fixture_t *fx = *state;
    char *code = malloc(EXEC_MAX_CODE_BYTES + 1);
    assert_non_null(code);
    const char *tail = "\nprint('big ok')";
    size_t fill = EXEC_MAX_CODE_BYTES - strlen(tail);
    code[0] = '#';
    memset(code + 1, 'x', fill - 1);
    memcpy(code + fill, tail, strlen(tail) + 1);
    assert_int_equal(strlen(code), EXEC_MAX_CODE_BYTES);
    capture_t c = {0};
    run1(fx, code, T_TIMEOUT_MS, &c);
    free(code);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal((char *)c.out, "big ok\n");
    capture_free(&c);
}

static void test_cold_and_warm_starts_give_the_same_result(void **state)
{
    (void)state;
    exec_sandbox_level_t cold_level = EXEC_SANDBOX_NONE;
    for (int warm = 0; warm < 2; warm++) {
        fixture_t *fx = fixture_open(&(pool_opts_t){.cold = !warm});
        exec_pool_t *pool = fx->pool;
        /* sequential runs: with keep_warm each one takes the sandbox the previous end made */
        for (int i = 0; i < 3; i++) {
            capture_t c = {0};
            char code[64];
            snprintf(code, sizeof code, "import os; print(%d, os.getpid(), os.listdir('/tmp'))", i);
            start(pool, code, T_TIMEOUT_MS, &c, NULL);
            uv_run(&fx->loop, UV_RUN_DEFAULT);
            char want[64];
            snprintf(want, sizeof want, "%d 2 ['outputs']\n", i);
            assert_int_equal(c.status, EXEC_STATUS_OK);
            assert_string_equal((char *)c.out, want);
            /* a warm sandbox's layer report is read only when a run takes it: the same level */
            if (!warm) cold_level = c.sandbox;
            if (warm && i > 0) assert_true(c.warm);
            assert_int_equal(c.sandbox, cold_level);
            assert_int_not_equal(c.sandbox, EXEC_SANDBOX_NONE);
            capture_free(&c);
        }
        fixture_close(fx);
    }
}

/* an interpreter outside /usr (pyenv, conda, a venv): its prefix is bound read-only */
static void test_python_prefix_outside_usr_is_bound_read_only(void **state)
{
    (void)state;
    char dir[] = "/tmp/ptc-prefix-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    char bin[64], py[80], real[4096];
    snprintf(bin, sizeof bin, "%s/bin", dir);
    snprintf(py, sizeof py, "%s/python3", bin);
    assert_int_equal(mkdir(bin, 0755), 0);
    assert_non_null(realpath(PYTHON, real));
    /* a copy of the system binary: with no stdlib next to it, it falls back to its build
       prefix, which is enough to start */
    int in = open(real, O_RDONLY), outfd = open(py, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    assert_true(in >= 0 && outfd >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        assert_int_equal(write(outfd, buf, (size_t)n), n);
    close(in);
    close(outfd);
    fixture_t *fx = fixture_open(&(pool_opts_t){.python = py});
    exec_pool_t *pool = fx->pool;
    capture_t c = {0};
    char code[256];
    snprintf(code, sizeof code,
             "import sys, errno\nprint(sys.executable)\n"
             "try:\n    open('%s/x', 'w')\nexcept OSError as e:\n"
             "    print(errno.errorcode[e.errno])\n",
             dir);
    start(pool, code, T_TIMEOUT_MS, &c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    char want[160];
    snprintf(want, sizeof want, "%s\nEROFS\n", py);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal((char *)c.out, want);
    fixture_close(fx);
    capture_free(&c);
    unlink(py);
    rmdir(bin);
    rmdir(dir);
}

/* The processes whose command line holds token (zombies have none), up to max of them. */
static int pids_with_cmdline(const char *token, pid_t *pids, int max)
{
    DIR *d = opendir("/proc");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], buf[4096];
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0) continue;
        for (ssize_t i = 0; i < len; i++)
            if (!buf[i]) buf[i] = ' ';
        buf[len] = 0;
        if (strstr(buf, token) && n < max) pids[n++] = (pid_t)strtol(e->d_name, NULL, 10);
    }
    closedir(d);
    return n;
}

/* Waits up to timeout_ms for every process whose command line holds token to exit: a pidfd
 * becomes readable when its process exits, whether or not it is our child (each gets up to
 * timeout_ms). Returns how many are left. */
static int wait_gone_with(const char *token, int timeout_ms)
{
    pid_t pids[16];
    int n = pids_with_cmdline(token, pids, 16);
    for (int i = 0; i < n; i++) {
        int pfd = (int)syscall(SYS_pidfd_open, pids[i], 0);
        if (pfd < 0) continue; /* gone already (ESRCH) */
        struct pollfd p = {.fd = pfd, .events = POLLIN};
        (void)poll(&p, 1, timeout_ms);
        close(pfd);
    }
    return pids_with_cmdline(token, pids, 16);
}

/* root: namespaces without a user namespace; an ordinary user: the Landlock-only mode */
static void test_without_user_namespace_still_confines(void **state)
{
    fixture_t *fx = *state;
    char secret[] = "/tmp/ptc-secret-XXXXXX";
    int fd = mkstemp(secret);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "s", 1), 1);
    close(fd);
    chmod(secret, 0644);
    exec_pool_t *pool = fx->pool;
    capture_t c = {0};
    char token[64], code[1024];
    snprintf(token, sizeof token, "ptc-nouserns-%d", (int)getpid());
    snprintf(code, sizeof code,
             "import os, time\n"
             "tok = '%s'\n"
             "print(os.getuid() != 0, os.geteuid() != 0)\n"
             "open('mine', 'w').write('x'); print(open('mine').read())\n"
             "try:\n    open('%s').read(); print('read secret')\n"
             "except OSError as e: print('secret', e.errno in (2, 13))\n"
             "if os.fork() == 0:\n"
             "    os.setsid()\n"
             "    if os.fork() == 0: time.sleep(60)\n"
             "    os._exit(0)\n"
             "os.wait()\n",
             token, secret);
    start(pool, code, T_TIMEOUT_MS, &c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal((char *)c.out, "True True\nx\nsecret True\n");
    assert_int_equal(c.sandbox, EXEC_SANDBOX_DEGRADED);
    /* the setsid grandchild did not survive the run */
    assert_int_equal(wait_gone_with(token, 3000), 0);
    capture_free(&c);
    unlink(secret);
}

/* the code (bigger than a pipe buffer) is still being written when the run is cancelled */
static void test_cancel_while_the_code_is_in_flight(void **state)
{
    (void)state;
    char *code = malloc(EXEC_MAX_CODE_BYTES + 1);
    assert_non_null(code);
    memset(code, '#', EXEC_MAX_CODE_BYTES);
    code[EXEC_MAX_CODE_BYTES] = 0;
    for (int warm = 0; warm < 2; warm++) {
        fixture_t *fx = fixture_open(&(pool_opts_t){.cold = !warm});
        exec_pool_t *pool = fx->pool;
        capture_t c = {0};
        exec_run_t *run = NULL;
        start(pool, code, T_TIMEOUT_MS, &c, &run);
        exec_run_cancel(run);
        uv_run(&fx->loop, UV_RUN_DEFAULT);
        assert_false(c.done);
        fixture_close(fx);
    }
    free(code);
}

/* ---- warm sandboxes: set up ahead, interpreter waiting; every run still starts fresh ---- */

static void idle_cb(uv_timer_t *t)
{
    (void)t;
}

/* runs the loop for ms with nothing else to do (warm sandboxes do not keep it alive) */
static void idle(uv_loop_t *loop, uint64_t ms)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, idle_cb, ms, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
}

static void warm_run(uv_loop_t *loop, exec_pool_t *pool, const char *code, uint64_t timeout,
                     capture_t *c)
{
    start(pool, code, timeout, c, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_true(c->done);
    if (!c->warm) fprintf(stderr, "not warm: %s\n", c->message);
    assert_true(c->warm);
}

static void test_warm_runs_share_no_state(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t c = {0};
    warm_run(&fx->loop, pool,
             "import builtins, json, os, sys\n"
             "open('/tmp/leak', 'w').write('x')\n"
             "leak_var = 1\n"
             "json.leak = 1\n"
             "builtins.leak = 1\n"
             "os.environ['PTC_LEAK'] = '1'\n"
             "sys.modules['leakmod'] = sys\n"
             "sys.path.append('/leak')\n"
             "print('set', os.listdir('/tmp'))\n",
             T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal((char *)c.out, "set ['leak', 'outputs']\n");
    capture_free(&c);
    /* the next runs take sandboxes made ahead (before and after the first run): none of it */
    for (int i = 0; i < 3; i++) {
        warm_run(&fx->loop, pool,
                 "import builtins, json, os, sys\n"
                 "print(os.path.exists('/tmp/leak'), 'leak_var' in globals(), hasattr(json, "
                 "'leak'), hasattr(builtins, 'leak'), 'PTC_LEAK' in os.environ, 'leakmod' in "
                 "sys.modules, '/leak' in sys.path, os.listdir('/tmp'), os.getpid())\n",
                 T_TIMEOUT_MS, &c);
        assert_int_equal(c.status, EXEC_STATUS_OK);
        assert_string_equal((char *)c.out,
                            "False False False False False False False ['outputs'] 2\n");
        capture_free(&c);
    }
}

/* a run looks like `python3 -c CODE`: globals, argv, tracebacks without the bootstrap */
static void test_warm_run_looks_like_python_c(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t c = {0};
    warm_run(&fx->loop, pool,
             "from __future__ import annotations\n"
             "import sys\n"
             "print(sys.argv, sorted(globals()), __name__)\n"
             "def f():\n"
             "    raise ValueError('v')\n"
             "f()\n",
             T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_ERROR);
    assert_int_equal(c.exit_code, 1);
    assert_string_equal((char *)c.out,
                        "['-c'] ['__annotations__', '__builtins__', '__doc__', '__loader__', "
                        "'__name__', '__package__', '__spec__', 'annotations', 'sys'] __main__\n");
    assert_string_equal((char *)c.err, "Traceback (most recent call last):\n"
                                       "  File \"<string>\", line 6, in <module>\n"
                                       "  File \"<string>\", line 5, in f\n"
                                       "ValueError: v\n");
    capture_free(&c);
    warm_run(&fx->loop, pool, "x = (\n", T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_ERROR);
    assert_non_null(strstr((char *)c.err, "SyntaxError"));
    assert_null(strstr((char *)c.err, "Traceback"));
    capture_free(&c);
}

/* the sandbox waited 1.5 s before the code came; the 1 s timeout still counts from the code */
static void test_warm_run_timeout_counts_from_the_code(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    idle(&fx->loop, 1500);
    capture_t c = {0};
    warm_run(&fx->loop, pool, "import time; time.sleep(0.3); print('ok')", 1000, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal((char *)c.out, "ok\n");
    capture_free(&c);
    warm_run(&fx->loop, pool, "print('spinning', flush=True)\nwhile True: pass", 700, &c);
    assert_int_equal(c.status, EXEC_STATUS_TIMEOUT);
    assert_string_equal((char *)c.out, "spinning\n");
    assert_true(c.duration_ms >= 700);
    capture_free(&c);
}

/* RLIMIT_CPU is the run's (timeout + 2 s, plus the start-up's whole second at most), not the
   ceiling the waiting interpreter had */
static void test_warm_run_cpu_limit_is_the_runs(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    idle(&fx->loop, 300);
    capture_t c = {0};
    warm_run(&fx->loop, pool, "import resource; print(*resource.getrlimit(resource.RLIMIT_CPU))",
             5000, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    char *end;
    long soft = strtol((char *)c.out, &end, 10);
    long hard = strtol(end, NULL, 10);
    assert_int_equal(soft, hard);
    assert_true(soft >= 7 && soft <= 8);
    capture_free(&c);
}

static void test_warm_run_memory_bomb_is_contained(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    bool memcg = exec_pool_probe(pool)->state[EXEC_LAYER_CGROUP_MEMORY] == EXEC_LAYER_ACTIVE;
    capture_t c = {0};
    warm_run(&fx->loop, pool, "x = []\nwhile True: x.append(bytearray(16 << 20))", T_TIMEOUT_MS,
             &c);
    /* the memory cgroup OOM-kills; without one RLIMIT_AS makes it a MemoryError */
    assert_int_equal(c.status, memcg ? EXEC_STATUS_OOM : EXEC_STATUS_ERROR);
    if (!memcg) assert_non_null(strstr((char *)c.err, "MemoryError"));
    capture_free(&c);
    warm_run(&fx->loop, pool, "print('after')", T_TIMEOUT_MS, &c);
    assert_string_equal((char *)c.out, "after\n");
    capture_free(&c);
}

/* a warm run cancelled, and a queued run that a warm sandbox took over, cancelled through the
   handle its callbacks get: no on_done, and the pool goes on */
static void noop_timer(uv_timer_t *t)
{
    (void)t;
}

/* The live children of this process that are not zombies (the pool's launchers). */
static size_t children_of(pid_t parent, pid_t *out, size_t max)
{
    size_t n = 0;
    DIR *d = opendir("/proc");
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        char path[300], buf[512];
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%.255s/stat", e->d_name);
        FILE *f = fopen(path, "re");
        if (f == NULL) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *rp = strrchr(buf, ')'); /* the command name may hold spaces */
        if (rp == NULL || rp[1] != ' ' || rp[2] == '\0' || rp[3] != ' ') continue;
        char st = rp[2]; /* "...) S PPID ..." */
        long ppid = strtol(rp + 4, NULL, 10);
        if (ppid == parent && st != 'Z') out[n++] = (pid_t)strtol(e->d_name, NULL, 10);
    }
    closedir(d);
    return n;
}

static size_t live_children(pid_t *out, size_t max)
{
    return children_of(getpid(), out, max);
}

/* A warm sandbox that dies unused (a stray kill) is replaced: warm start stays on. */
static void test_a_warm_sandbox_killed_while_idle_is_replaced(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t c = {0};
    start(pool, "print(1)", T_TIMEOUT_MS, &c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    capture_free(&c);
    /* The run's end made one warm sandbox: kill its launcher and let the pool see it go. With
       the zygote (our only child) the launcher is its child. */
    pid_t kids[8];
    size_t n = live_children(kids, 8);
    assert_int_equal(n, 1);
    pid_t zygote = exec_pool_probe(pool)->zygote ? kids[0] : 0;
    if (zygote) {
        for (int i = 0; i < 500 && (n = children_of(zygote, kids, 8)) == 0; i++)
            idle(&fx->loop, 10);
        assert_int_equal(n, 1);
    }
    assert_int_equal(kill(kids[0], SIGKILL), 0);
    /* Reaped (kill(pid, 0) fails) only once libuv's child watcher ran, which marks it exited;
     * a ref'd timer makes each turn really wait for events. */
    uv_timer_t tick;
    uv_timer_init(&fx->loop, &tick);
    for (int i = 0; i < 500 && kill(kids[0], 0) == 0; i++) {
        uv_timer_start(&tick, noop_timer, 10, 0);
        uv_run(&fx->loop, UV_RUN_ONCE);
    }
    assert_int_equal(kill(kids[0], 0), -1);
    assert_int_equal(errno, ESRCH);
    /* With the zygote, the zygote reaps it, not our loop: that it is gone does not say the pool
       saw it go (its pidfd may not even have reached the pool yet). The pool's replacement, the
       zygote's next child, does; a run started before would be given the dead sandbox. */
    pid_t killed = kids[0];
    bool replaced = zygote == 0;
    for (int i = 0; i < 500 && !replaced; i++) {
        uv_timer_start(&tick, noop_timer, 10, 0);
        uv_run(&fx->loop, UV_RUN_ONCE);
        n = children_of(zygote, kids, 8);
        for (size_t k = 0; k < n; k++)
            replaced = replaced || kids[k] != killed;
    }
    assert_true(replaced);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&fx->loop, UV_RUN_NOWAIT);
    /* The pool makes new warm sandboxes (by this run's end at the latest): the next run is warm.
     * (Before, one death turned warm start off for good.) */
    start(pool, "print(2)", T_TIMEOUT_MS, &c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    capture_free(&c);
    start(pool, "print(3)", T_TIMEOUT_MS, &c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal((char *)c.out, "3\n");
    assert_true(c.warm);
    capture_free(&c);
}

/* the first bytes of /proc/PID/NAME into buf, NUL-terminated; its length, or -1 when pid is
   gone */
static ssize_t proc_file(pid_t pid, const char *name, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (ssize_t)n;
}

/* true once pid is gone or a zombie (reaped by the zygote, or waiting for our loop's reap) */
static bool process_ended(pid_t pid)
{
    char buf[256];
    if (proc_file(pid, "stat", buf, sizeof buf) < 0) return true;
    const char *paren = strrchr(buf, ')'); /* the state follows the command's name */
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* A warm sandbox that died while idle, with the pool's loop not yet run since (the death is
   not seen until the loop's next turn: its process exit, its pidfd, its pipes), must not be
   given to a run: the run started in that turn gets a live sandbox and its own output, in both
   modes. interpreter_only: the interpreter dies while its launcher is stopped, so only init's
   report says so; else the launcher dies (init by PDEATHSIG, the interpreter with init's
   namespace). */
static void warm_death_unseen(fixture_t *fx, bool interpreter_only)
{
    exec_pool_t *pool = fx->pool;
    capture_t c = {0};
    start(pool, "print(1)", T_TIMEOUT_MS, &c, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    capture_free(&c);
    /* the warm sandbox the run's end asked for, set up (its interpreter waits for code) */
    pid_t kids[8] = {0};
    pid_t zygote = exec_pool_probe(pool)->zygote ? (live_children(kids, 8) == 1 ? kids[0] : 0) : 0;
    pid_t parent = zygote ? zygote : getpid();
    size_t n = 0;
    for (int i = 0; i < 500 && (n = children_of(parent, kids, 8)) == 0; i++)
        idle(&fx->loop, 10);
    assert_int_equal(n, 1);
    idle(&fx->loop, 300);
    pid_t launcher = kids[0], victim = launcher, init = 0;
    if (interpreter_only) {
        assert_int_equal(children_of(launcher, kids, 8), 1);
        init = kids[0];
        assert_int_equal(children_of(init, kids, 8), 1);
        victim = kids[0];
        assert_int_equal(kill(launcher, SIGSTOP), 0);
    }
    assert_int_equal(kill(victim, SIGKILL), 0);
    /* the loop does not run until the next run is started */
    pid_t last = interpreter_only ? init : launcher; /* init reports the end, then exits */
    for (int i = 0; i < 500 && !process_ended(last); i++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    assert_true(process_ended(last));
    struct timespec settle = {0, 100000000L};
    nanosleep(&settle, NULL);
    start(pool, "print(2)", T_TIMEOUT_MS, &c, NULL);
    if (interpreter_only) assert_int_equal(kill(launcher, SIGCONT), 0);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_non_null(c.out);
    assert_string_equal((char *)c.out, "2\n");
    capture_free(&c);
}

static void test_a_run_never_gets_a_warm_sandbox_that_died_unseen(void **state)
{
    warm_death_unseen(*state, false);
}

static void test_a_run_never_gets_a_warm_sandbox_whose_interpreter_died(void **state)
{
    warm_death_unseen(*state, true);
}

/* the zygote's command line holds its script, which names itself (executor/zygote.c) */
static bool is_zygote(pid_t pid)
{
    char buf[256];
    ssize_t n = proc_file(pid, "cmdline", buf, sizeof buf);
    if (n < 0) return false;
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0') buf[i] = ' ';
    return strstr(buf, "_ptc_zygote") != NULL;
}

/* the launchers of runs and warm sandboxes: the test process's children, or with the zygote
   (then our child) the zygote's */
static unsigned children(void)
{
    pid_t kids[64], sub[64];
    size_t n = children_of(getpid(), kids, 64);
    unsigned k = 0;
    for (size_t i = 0; i < n; i++)
        k += is_zygote(kids[i]) ? (unsigned)children_of(kids[i], sub, 64) : 1u;
    return k;
}

/* 2 warm sandboxes at first; 4 runs at once (two find one, two none) take it to the most, 4;
   each warm_idle_ms without a run halves it, down to 1 */
static void test_warm_sandboxes_follow_demand(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    idle(&fx->loop, 1000);
    assert_int_equal(children(), 2);
    capture_t c[4] = {{0}};
    for (int i = 0; i < 4; i++)
        start(pool, "print(1)", T_TIMEOUT_MS, &c[i], NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(c[i].status, EXEC_STATUS_OK);
        capture_free(&c[i]);
    }
    /* the launcher's are spawned at once; the zygote forks them when it reads the pool's
       requests, which the loop's end does not wait for (well within warm_idle_ms) */
    for (int i = 0; i < 200 && children() < 4; i++)
        idle(&fx->loop, 10);
    assert_int_equal(children(), 4);
    idle(&fx->loop, 5000);
    assert_int_equal(children(), 2);
    idle(&fx->loop, 4000);
    assert_int_equal(children(), 1);
}

/* The answer goes when the program has ended (docs/sandbox.md, "The answer before the
   interpreter's end"), not after the interpreter's finalization: a global whose __del__ sleeps
   3 s at the interpreter's end does not delay it. Its sandbox keeps the only slot until it is
   gone, so a run started meanwhile waits for that. */
static void test_the_answer_does_not_wait_for_finalization(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    idle(&fx->loop, 300);
    capture_t c = {0}, d = {0};
    uint64_t t0 = uv_hrtime();
    start(pool,
          "import time\n"
          "class Slow:\n"
          "    def __del__(self, sleep=time.sleep):\n"
          "        sleep(3)\n"
          "s = Slow()\n"
          "print('done')\n",
          T_TIMEOUT_MS, &c, NULL);
    while (!c.done)
        uv_run(&fx->loop, UV_RUN_ONCE);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal((char *)c.out, "done\n");
    assert_true(c.done_ns - t0 < 2500ull * 1000000u);
    assert_int_equal(exec_pool_running(pool), 1); /* still being torn down */
    start(pool, "print(2)", T_TIMEOUT_MS, &d, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_true(d.done);
    assert_string_equal((char *)d.out, "2\n");
    assert_true(d.done_ns - t0 >= 2900ull * 1000000u);
    capture_free(&c);
    capture_free(&d);
}

/* one run to its end in a warm sandbox; with the zygote on, its sandbox must come from it */
static void end_run(uv_loop_t *loop, exec_pool_t *pool, const char *code, capture_t *c)
{
    start(pool, code, T_TIMEOUT_MS, c, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_true(c->done);
    if (!c->warm) fprintf(stderr, "not warm: %s\n", c->message);
    assert_true(c->warm);
    assert_int_equal(c->zygote, exec_pool_probe(pool)->zygote);
}

/* What python3 -c shows at its end is in the answer: non-daemon threads are waited for, atexit
   handlers run (after them), the exit status is SystemExit's (mod 256); a SystemExit with a
   message, os._exit and a file left open in the output folder take the ordinary end. What the
   interpreter's finalization does to files left open is in them: a file held by __main__, by a
   module the interpreter had before the run, and what a __del__ writes into a global made after
   its object (__main__'s globals go in the order they were made; a file in a reference cycle
   loses its buffer in python3 -c too: its objects' finalizers run in no set order). A
   zygote's child ends in its own way (launch.h, LAUNCH_BOOTSTRAP_ZYGOTE_END): the same must
   hold there. */
static void check_the_end_of_the_program(uv_loop_t *loop, exec_pool_t *pool)
{
    capture_t c = {0};
    static const struct {
        const char *code, *data;
    } left_open[] = {
        {"f = open('/tmp/outputs/a.txt', 'w')\nf.write('left open')\n", "left open"},
        {"import os\nos.ptc_f = open('/tmp/outputs/c.txt', 'w')\nos.ptc_f.write('in a module')\n",
         "in a module"},
        {"class D:\n    def __del__(self):\n        log.write('from __del__')\nd = D()\n"
         "log = open('/tmp/outputs/d.txt', 'w')\n",
         "from __del__"},
    };
    for (size_t i = 0; i < sizeof left_open / sizeof left_open[0]; i++) {
        end_run(loop, pool, left_open[i].code, &c);
        assert_int_equal(c.status, EXEC_STATUS_OK);
        assert_int_equal(c.n_files, 1);
        assert_string_equal(c.data0, left_open[i].data);
        capture_free(&c);
    }
    end_run(loop, pool,
            "import atexit, sys, threading, time\n"
            "atexit.register(print, 'atexit')\n"
            "def late():\n"
            "    time.sleep(0.3)\n"
            "    print('thread')\n"
            "threading.Thread(target=late).start()\n"
            "print('main')\n"
            "sys.exit(-1)\n",
            &c);
    assert_int_equal(c.status, EXEC_STATUS_ERROR);
    assert_int_equal(c.exit_code, 255);
    assert_string_equal((char *)c.out, "main\nthread\natexit\n");
    capture_free(&c);
    end_run(loop, pool, "import sys; sys.exit('bye')", &c);
    assert_int_equal(c.exit_code, 1);
    assert_string_equal((char *)c.err, "bye\n");
    capture_free(&c);
    end_run(loop, pool, "import os; print('x', flush=True); os._exit(4)", &c);
    assert_int_equal(c.exit_code, 4);
    assert_string_equal((char *)c.out, "x\n");
    capture_free(&c);
    end_run(loop, pool, "raise KeyError('k')", &c);
    assert_int_equal(c.exit_code, 1);
    assert_non_null(strstr((char *)c.err, "KeyError: 'k'"));
    capture_free(&c);
}

static void test_the_end_of_the_program_is_as_with_python_c(void **state)
{
    fixture_t *fx = *state;
    check_the_end_of_the_program(&fx->loop, fx->pool);
}

/* the same in sandboxes forked by the zygote (where the probe turns it off: by the launcher) */
static void test_the_end_of_the_program_in_the_zygote(void **state)
{
    fixture_t *fx = *state;
    check_the_end_of_the_program(&fx->loop, fx->pool);
}

static void test_warm_and_queued_runs_cancel(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    capture_t a = {0}, b = {0}, d = {0};
    exec_run_t *run = NULL;
    start(pool, "while True: pass", T_TIMEOUT_MS, &a, &run);
    exec_run_cancel(run);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_false(a.done);
    start(pool, "import time; time.sleep(0.5); print('a')", T_TIMEOUT_MS, &a, NULL);
    b.cancel_on_progress = true;
    start(pool, "import time; time.sleep(30)", T_TIMEOUT_MS, &b, NULL);
    assert_int_equal(exec_pool_queued(pool), 1);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_true(a.done);
    assert_true(a.warm);
    assert_string_equal((char *)a.out, "a\n");
    assert_false(b.done);
    assert_true(b.progress_calls >= 1);
    /* a queued run that is not cancelled takes a warm sandbox too */
    capture_free(&a);
    start(pool, "import time; time.sleep(0.3); print('a2')", T_TIMEOUT_MS, &a, NULL);
    start(pool, "print('d')", T_TIMEOUT_MS, &d, NULL);
    assert_int_equal(exec_pool_queued(pool), 1);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_string_equal((char *)d.out, "d\n");
    assert_true(d.warm);
    capture_free(&a);
    capture_free(&b);
    capture_free(&d);
}

/* The zygote (docs/sandbox.md, "A fork server (zygote)"): with the switch on and user namespaces
   here, every one-shot run's sandbox is forked from it, and each is an exec'd one's equal: PID
   2, fds 0-3, the sandbox user, the sandbox's environment and __main__, its own random state.
   hash('x') and id(object()) are the same in every run: the documented leaks of a fork server
   (the string hash secret and the address layout are the zygote's). Where the probe turns it
   off, the runs must say so (never zygote), and the test says why it checked no more. */
static void test_the_zygote_forks_every_sandbox(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    const exec_probe_t *p = exec_pool_probe(pool);
    const char *code = "import os, sys, random, uuid\n"
                       "print(os.getpid(), os.getuid(),\n"
                       "      sorted(os.listdir('/proc/self/fd')), os.getcwd(), sys.argv,\n"
                       "      os.environ['HOME'], __name__, '_ptc_zygote' in globals(),\n"
                       "      '_ptc_boot' in globals())\n"
                       "print(random.getrandbits(64), uuid.uuid4(), os.urandom(8).hex())\n"
                       "print(hash('x'), id(object()))\n";
    char seen[3][3][128];
    for (int i = 0; i < 3; i++) {
        capture_t c = {0};
        start(pool, code, T_TIMEOUT_MS, &c, NULL);
        uv_run(&fx->loop, UV_RUN_DEFAULT);
        assert_int_equal(c.status, EXEC_STATUS_OK);
        assert_int_equal(c.zygote, p->zygote);
        char *save = NULL, *line = strtok_r((char *)c.out, "\n", &save);
        assert_non_null(line);
        /* without the zygote (the Landlock-only mode) the run is neither PID 2 nor uid 1000 */
        if (p->zygote)
            assert_string_equal(line, "2 1000 ['0', '1', '2', '3'] /tmp ['-c'] /tmp __main__ "
                                      "False False");
        for (int k = 0; k < 2; k++) {
            line = strtok_r(NULL, "\n", &save);
            assert_non_null(line);
            snprintf(seen[i][k], sizeof seen[i][k], "%s", line);
        }
        capture_free(&c);
    }
    /* random, uuid4 and urandom: never the same twice */
    assert_string_not_equal(seen[0][0], seen[1][0]);
    assert_string_not_equal(seen[1][0], seen[2][0]);
    if (p->zygote) {
        /* the known leaks, reported (docs/sandbox.md: items 1 and 3 of the threat model) */
        bool same = strcmp(seen[0][1], seen[1][1]) == 0 && strcmp(seen[1][1], seen[2][1]) == 0;
        printf("zygote: hash('x') and id(object()) %s between runs (documented leak)\n",
               same ? "equal" : "differ");
    } else {
        printf("zygote inactive here (%s): the runs were started by the launcher\n",
               p->zygote_reason);
    }
}

/* Whether the pool's sandboxes come from the zygote; if not, says why and that the test checks
   nothing (what). */
static bool zygote_active(const exec_pool_t *pool, const char *what)
{
    if (exec_pool_probe(pool)->zygote) return true;
    printf("zygote inactive here (%s): %s\n", exec_pool_probe(pool)->zygote_reason, what);
    return false;
}

/* A zygote that dies (a stray kill) takes its sandboxes with it; the next runs are started by
   the launcher as without it, and the probe says why the zygote is off. */
static void test_a_dead_zygote_leaves_the_launcher(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    if (!zygote_active(pool, "nothing to kill")) return;
    idle(&fx->loop, 500);
    pid_t kids[8];
    size_t n = children_of(getpid(), kids, 8);
    assert_int_equal(n, 1);
    assert_true(is_zygote(kids[0]));
    assert_int_equal(kill(kids[0], SIGKILL), 0);
    for (int i = 0; i < 500 && exec_pool_probe(pool)->zygote; i++)
        idle(&fx->loop, 10);
    assert_false(exec_pool_probe(pool)->zygote);
    assert_non_null(strstr(exec_pool_probe(pool)->zygote_reason, "the zygote ended"));
    for (int i = 0; i < 3; i++) {
        capture_t c = {0};
        start(pool, "print(7)", T_TIMEOUT_MS, &c, NULL);
        uv_run(&fx->loop, UV_RUN_DEFAULT);
        assert_int_equal(c.status, EXEC_STATUS_OK);
        assert_string_equal((char *)c.out, "7\n");
        assert_false(c.zygote);
        capture_free(&c);
    }
}

/* the net namespaces the process pid holds open (readlink of its fds: "net:[INODE]") */
static unsigned held_net_namespaces(pid_t pid)
{
    char path[320], link[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/%d/fd/%s", (int)pid, e->d_name);
        ssize_t k = readlink(path, link, sizeof link - 1);
        if (k <= 0) continue;
        link[k] = '\0';
        if (strncmp(link, "net:[", 5) == 0) n++;
    }
    closedir(d);
    return n;
}

/* The zygote keeps ended runs' net namespaces (each launcher hands it its own at the end) and
   closes them in batches of 32, or after a second without a request (executor/zygote.c): never more
   than 32, some after a few runs, none once idle. Without the change nothing is ever held. */
static void test_the_zygote_releases_net_namespaces_in_batches(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = fx->pool;
    if (!zygote_active(pool, "nothing to hold")) return;
    pid_t kids[8] = {0};
    assert_int_equal(children_of(getpid(), kids, 8), 1);
    pid_t zygote = kids[0];
    assert_true(is_zygote(zygote));
    unsigned most = 0, some = 0;
    for (int i = 0; i < 40; i++) {
        capture_t c = {0};
        start(pool, "print(5)", T_TIMEOUT_MS, &c, NULL);
        uv_run(&fx->loop, UV_RUN_DEFAULT);
        assert_int_equal(c.status, EXEC_STATUS_OK);
        assert_true(c.zygote);
        capture_free(&c);
        unsigned n = held_net_namespaces(zygote);
        if (n > most) most = n;
        if (i >= 3 && n > 0) some++;
    }
    assert_true(most <= 32);
    assert_true(some > 0);
    /* idle: the pool's warm sandboxes may still be asked for, each request restarting the
       zygote's second */
    unsigned n = 1;
    for (int i = 0; i < 60 && (n = held_net_namespaces(zygote)) > 0; i++)
        idle(&fx->loop, 100);
    assert_int_equal(n, 0);
}

/* src's bytes into a new file dst with mode */
static void copy_file(const char *src, const char *dst, mode_t mode)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    assert_true(in >= 0);
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    assert_true(out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        assert_int_equal(write(out, buf, (size_t)n), n);
    assert_int_equal(n, 0);
    close(in);
    assert_int_equal(fchmod(out, mode), 0);
    assert_int_equal(close(out), 0);
}

/* Where the interpreter cannot be the zygote, the probe turns it off before any run and says why
   (ptc-mcp --check's line), and the launcher starts every sandbox: here the library next to a
   copy of the launcher is the C library, which the interpreter loads but which has no
   ptc_zygote_ready, as one built for another interpreter or a broken install would lack it. */
static void test_an_unfit_interpreter_leaves_the_launcher(void **state)
{
    (void)state;
    char dir[] = "/tmp/ptc-exec-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    char launcher[128], lib[128];
    snprintf(launcher, sizeof launcher, "%s/ptc-sandbox-launch", dir);
    snprintf(lib, sizeof lib, "%s/libptc-sandbox-zygote.so", dir);
    Dl_info libc;
    assert_true(dladdr((void *)&gnu_get_libc_version, &libc) != 0 && libc.dli_fname);
    copy_file(TEST_LAUNCHER, launcher, 0755);
    copy_file(libc.dli_fname, lib, 0644);
    fixture_t *fx = fixture_open(&(pool_opts_t){.launcher = launcher, .zygote = true});
    const exec_probe_t *p = exec_pool_probe(fx->pool);
    if (p->state[EXEC_LAYER_USER_NS] == EXEC_LAYER_ACTIVE) {
        assert_false(p->zygote);
        assert_non_null(strstr(p->zygote_reason, "interpreter unfit"));
        assert_non_null(strstr(p->zygote_reason, "ptc_zygote_ready"));
    } else {
        printf("no user namespaces here (%s): the zygote is off for that\n", p->zygote_reason);
    }
    for (int i = 0; i < 2; i++) {
        capture_t c = {0};
        run1(fx, "print(7)", T_TIMEOUT_MS, &c);
        assert_int_equal(c.status, EXEC_STATUS_OK);
        assert_string_equal((char *)c.out, "7\n");
        assert_false(c.zygote);
        capture_free(&c);
    }
    fixture_close(fx);
    assert_int_equal(unlink(lib), 0);
    assert_int_equal(unlink(launcher), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* a test run on the fixture: a pool made from the base options and opts (NULL: none) */
#define POOL_TEST(f, opts)                                                                         \
    cmocka_unit_test_prestate_setup_teardown(f, pool_setup, pool_teardown, opts)

int main(void)
{
    /* as the binary does (server/main.c, executor.h): a write to a sandbox that has died fails
       with EPIPE rather than ending the process */
    signal(SIGPIPE, SIG_IGN);
    /* What the tests' pools change in the base options (the prestate of pool_setup); keep_warm
       is on in the base options. */
    pool_opts_t one_slot = {.max_concurrent = 1};
    pool_opts_t one_slot_one_queued = {.max_concurrent = 1, .max_queue = 1};
    pool_opts_t small_keep = {.stdout_keep = 1000, .stderr_keep = 10};
    pool_opts_t tenth_cpu = {.cpu_millis = 100};
    pool_opts_t fast_progress = {.progress_ms = 100};
    pool_opts_t unsandboxed = {.unsafe_no_sandbox = true};
    pool_opts_t no_user_ns = {.test_disable_layer = "user-ns"};
    pool_opts_t one_warm = {.warm_sandboxes = 1};
    pool_opts_t warm_pair = {.max_concurrent = 1, .warm_sandboxes = 2};
    pool_opts_t zygote_on = {.zygote = true};
    pool_opts_t warm_pair_fast_progress = {
        .max_concurrent = 1, .warm_sandboxes = 2, .progress_ms = 50};
    pool_opts_t warm_on_demand = {.warm_sandboxes = 4, .warm_idle_ms = 4000};
    pool_opts_t with_zygote = {.zygote = true};
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_round_trip),
        POOL_TEST(test_a_warm_sandbox_killed_while_idle_is_replaced, &one_warm),
        POOL_TEST(test_the_zygote_forks_every_sandbox, &with_zygote),
        POOL_TEST(test_a_dead_zygote_leaves_the_launcher, &with_zygote),
        POOL_TEST(test_the_zygote_releases_net_namespaces_in_batches, &with_zygote),
        POOL_TEST(test_a_run_never_gets_a_warm_sandbox_that_died_unseen, &one_warm),
        POOL_TEST(test_a_run_never_gets_a_warm_sandbox_whose_interpreter_died, &one_warm),
        cmocka_unit_test(test_an_unfit_interpreter_leaves_the_launcher),
        POOL_TEST(test_hello_world_runs_in_the_sandbox, NULL),
        POOL_TEST(test_identity_inside_is_unprivileged, NULL),
        POOL_TEST(test_exception_is_error_with_traceback, NULL),
        POOL_TEST(test_exit_code_is_reported, NULL),
        POOL_TEST(test_signal_death_is_killed_with_its_name, NULL),
        POOL_TEST(test_stdin_is_empty, NULL),
        POOL_TEST(test_unicode_and_invalid_utf8_pass_through, NULL),
        POOL_TEST(test_output_beyond_the_cap_is_counted_not_kept, &small_keep),
        POOL_TEST(test_timeout_kills_a_spinning_run, NULL),
        cmocka_unit_test(test_timeout_returns_the_files_written_before),
        POOL_TEST(test_cpu_share_is_the_cgroup_quota, &tenth_cpu),
        POOL_TEST(test_queue_time_does_not_count_against_timeout, &one_slot),
        POOL_TEST(test_twenty_concurrent_runs_all_correct, NULL),
        POOL_TEST(test_concurrent_runs_do_not_share_tmp, NULL),
        POOL_TEST(test_full_queue_is_an_error, &one_slot_one_queued),
        POOL_TEST(test_cancel_kills_a_running_run_without_callback, &one_slot),
        POOL_TEST(test_progress_reports_time_and_bytes, &fast_progress),
        POOL_TEST(test_pool_free_with_live_runs_calls_nothing, &one_slot),
        cmocka_unit_test(test_probe_finds_the_mandatory_layers),
        cmocka_unit_test(test_missing_launcher_refuses_runs),
        POOL_TEST(test_unsafe_mode_runs_without_a_sandbox, &unsandboxed),
        cmocka_unit_test(test_mounts_are_read_only_unless_rw),
        cmocka_unit_test(test_rw_mount_files_belong_to_the_folder_owner),
        cmocka_unit_test(test_only_passed_variables_reach_the_run),
        cmocka_unit_test(test_bad_options_are_rejected),
        POOL_TEST(test_pool_free_inside_on_done, &one_slot),
        POOL_TEST(test_largest_code_runs, NULL),
        cmocka_unit_test(test_cold_and_warm_starts_give_the_same_result),
        cmocka_unit_test(test_python_prefix_outside_usr_is_bound_read_only),
        POOL_TEST(test_without_user_namespace_still_confines, &no_user_ns),
        cmocka_unit_test(test_cancel_while_the_code_is_in_flight),
        POOL_TEST(test_warm_runs_share_no_state, &warm_pair),
        POOL_TEST(test_warm_run_looks_like_python_c, &warm_pair),
        POOL_TEST(test_warm_run_timeout_counts_from_the_code, &warm_pair),
        POOL_TEST(test_warm_run_cpu_limit_is_the_runs, &warm_pair),
        POOL_TEST(test_warm_run_memory_bomb_is_contained, &warm_pair),
        POOL_TEST(test_warm_and_queued_runs_cancel, &warm_pair_fast_progress),
        POOL_TEST(test_the_answer_does_not_wait_for_finalization, &warm_pair),
        POOL_TEST(test_the_end_of_the_program_is_as_with_python_c, &warm_pair),
        POOL_TEST(test_the_end_of_the_program_in_the_zygote, &zygote_on),
        POOL_TEST(test_warm_sandboxes_follow_demand, &warm_on_demand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
