/* executor: the bridge descriptor and the read-only package folder of a run (exec_run_start_ex),
   through the real launcher, as root and (via run_as_user.sh) as an ordinary user. The host side
   of the bridge is played by a thread over a socketpair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "executor.h"

#define PYTHON        "/usr/bin/python3"
#define T_TIMEOUT_MS  20000u
#define HOST_MAX      4096
#define HOST_GUARD_MS 30000 /* a hang guard for the host thread, not a timed assertion */

typedef struct {
    bool done;
    int calls;
    exec_status_t status;
    char out[HOST_MAX];
    char err[HOST_MAX];
    char message[800];
    bool warm;
} capture_t;

static void on_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    (void)run;
    capture_t *c = user;
    c->done = true;
    c->calls++;
    c->status = r->status;
    snprintf(c->out, sizeof c->out, "%.*s", (int)r->out.len, (const char *)r->out.data);
    snprintf(c->err, sizeof c->err, "%.*s", (int)r->err.len, (const char *)r->err.data);
    snprintf(c->message, sizeof c->message, "%s", r->message ? r->message : "");
    c->warm = r->warm_start;
}

/* The host end: reads what the run sends; after the first full line writes `answer` once; ends
   at EOF (every copy of the run's end is closed) or at the hang guard. */
typedef struct {
    int fd;
    const char *answer;
    char got[HOST_MAX];
    size_t got_len;
    bool answered;
    bool eof;
    pthread_t thread;
} host_t;

static void *host_main(void *arg)
{
    host_t *h = arg;
    for (;;) {
        struct pollfd pf = {.fd = h->fd, .events = POLLIN};
        /* the loop's SIGCHLD (a sandbox ending) may land on this thread: not the end */
        int pr = poll(&pf, 1, HOST_GUARD_MS);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) return NULL;
        char buf[512];
        ssize_t n = read(h->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) {
            h->eof = true;
            return NULL;
        }
        if (n < 0) return NULL;
        size_t take = (size_t)n;
        if (take > sizeof h->got - 1 - h->got_len) take = sizeof h->got - 1 - h->got_len;
        memcpy(h->got + h->got_len, buf, take);
        h->got_len += take;
        h->got[h->got_len] = '\0';
        if (h->answer && !h->answered && memchr(h->got, '\n', h->got_len)) {
            size_t len = strlen(h->answer), off = 0;
            while (off < len) {
                ssize_t w = write(h->fd, h->answer + off, len - off);
                if (w <= 0) return NULL;
                off += (size_t)w;
            }
            h->answered = true;
        }
    }
}

/* makes the pair; returns the run's end, the thread plays the host on the other */
static int host_start(host_t *h, const char *answer)
{
    memset(h, 0, sizeof *h);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    h->fd = sv[0];
    h->answer = answer;
    assert_int_equal(pthread_create(&h->thread, NULL, host_main, h), 0);
    return sv[1];
}

static void host_join(host_t *h)
{
    assert_int_equal(pthread_join(h->thread, NULL), 0);
    close(h->fd);
}

static bool fd_closed(int fd)
{
    return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

/* every test runs twice: new sandboxes per run, then warm ones (the bridge comes with the code
   either way); set by the group set-up, read by new_pool only */
static bool warm_mode;

static int cold_group(void **state)
{
    (void)state;
    warm_mode = false;
    return 0;
}

static int warm_group(void **state)
{
    (void)state;
    warm_mode = true;
    return 0;
}

static exec_pool_t *new_pool(uv_loop_t *loop, const char *disable)
{
    exec_options_t o;
    exec_options_init(&o);
    o.python = PYTHON;
    o.launcher = TEST_LAUNCHER;
    o.max_concurrent = 1;
    o.max_queue = 4;
    o.keep_warm = warm_mode;
    o.test_disable_layer = disable;
    exec_pool_t *pool = NULL;
    assert_int_equal(exec_pool_new(loop, &o, &pool), 0);
    if (!disable) assert_false(exec_pool_refusing(pool));
    return pool;
}

static void start_ex(exec_pool_t *pool, const char *code, uint64_t timeout, int bridge,
                     const char *dir, capture_t *c, exec_run_t **run)
{
    exec_run_opts_t ro;
    exec_run_opts_init(&ro);
    ro.bridge_fd = bridge;
    ro.ro_dir = dir;
    exec_callbacks_t cb = {.on_done = on_done, .user = c};
    assert_int_equal(exec_run_start_ex(pool, code, timeout, &ro, &cb, run), 0);
}

static void pool_done(uv_loop_t *loop, exec_pool_t *pool)
{
    exec_pool_free(pool);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(loop), 0);
}

#define REQUEST_BODY                                                                               \
    "{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"m\":\"h\\u00e9\"}}"
#define REQUEST REQUEST_BODY "\n"
#define ANSWER  "{\"id\":1,\"result\":{\"structuredContent\":{\"echo\":\"h\\u00e9 \\u2713\"}}}\n"

static const char bridge_code[] =
    "import errno, json, os, socket, sys\n"
    "fd = int(os.environ['PTC_BRIDGE_FD'])\n"
    "print(fd)\n"
    "print(sorted(os.listdir('/proc/self/fd'), key=int))\n"
    "def is_open(n):\n"
    "    try:\n"
    "        os.fstat(n); return True\n"
    "    except OSError:\n"
    "        return False\n"
    "print([n for n in range(1024) if is_open(n)])\n"
    "try:\n"
    "    socket.socket(socket.AF_INET, socket.SOCK_STREAM); print('inet opened')\n"
    "except OSError as e:\n"
    "    print('inet', e.errno == errno.EPERM)\n"
    "s = socket.socket(fileno=fd)\n"
    "s.sendall(b'" REQUEST_BODY "' + b'\\n')\n"
    "buf = b''\n"
    "while not buf.endswith(b'\\n'):\n"
    "    chunk = s.recv(65536)\n"
    "    if not chunk: break\n"
    "    buf += chunk\n"
    "sys.stdout.buffer.write(buf)\n"
    "print(json.loads(buf)['result']['structuredContent']['echo'])\n";

/* JSON line out, answer in, exact bytes both ways; fds 0-3 only; AF_INET still refused */
static void test_bridge_round_trip_has_exact_bytes_and_only_fd_3(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_pool_t *pool = new_pool(&loop, NULL);
    host_t h;
    int run_end = host_start(&h, ANSWER);
    capture_t c = {0};
    start_ex(pool, bridge_code, T_TIMEOUT_MS, run_end, NULL, &c, NULL);
    /* the launcher has its copy; ours is gone before the run even ends */
    assert_true(fd_closed(run_end));
    uv_run(&loop, UV_RUN_DEFAULT);
    host_join(&h);
    if (c.status != EXEC_STATUS_OK) fprintf(stderr, "%s\n%s\n", c.err, c.message);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    /* the request as Python wrote it, byte for byte (the \u escape stays an escape) */
    assert_string_equal(h.got, REQUEST);
    assert_true(h.eof); /* every copy of the run's end closed once the run was over */
    assert_string_equal(c.out, "3\n"
                               "['0', '1', '2', '3', '4']\n" /* 4: the listing's own */
                               "[0, 1, 2, 3]\n"
                               "inet True\n" ANSWER "h\xc3\xa9 \xe2\x9c\x93\n");
    pool_done(&loop, pool);
}

/* a tiny package in a fresh host folder; returns its path in dir */
static void write_package(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/ptc-bridge-lib-XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/tools", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/tools/__init__.py", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("def hello():\n    return 'hello from tools'\n", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, 0644), 0);
}

static void remove_package(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/tools/__init__.py", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/tools/x", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/tools", dir);
    rmdir(path);
    rmdir(dir);
}

/* line 1 is the __future__ import and line 11 raises: the module path costs no lines */
static const char import_code[] =
    "from __future__ import annotations\n"
    "import errno, os, sys\n"
    "import tools\n"
    "print(tools.hello())\n"
    "pkg = os.path.dirname(tools.__file__)\n"
    "print(os.path.dirname(pkg))\n"
    "try:\n"
    "    open(os.path.join(pkg, 'x'), 'w'); print('wrote')\n"
    "except OSError as e:\n"
    "    print('write refused', e.errno in (errno.EROFS, errno.EACCES))\n"
    "raise ValueError('the end')\n";

static void import_run(const char *disable, bool landlock_only)
{
    char dir[64];
    write_package(dir, sizeof dir);
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_pool_t *pool = new_pool(&loop, disable);
    capture_t c = {0};
    start_ex(pool, import_code, T_TIMEOUT_MS, -1, dir, &c, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_ERROR);
    char want_ns[256], want_host[256];
    snprintf(want_ns, sizeof want_ns, "hello from tools\n%s\nwrite refused True\n",
             EXEC_RO_LIB_PATH);
    snprintf(want_host, sizeof want_host, "hello from tools\n%s\nwrite refused True\n", dir);
    /* the Landlock-only mode (an ordinary user without user namespaces) reads the host path */
    assert_string_equal(c.out, landlock_only ? want_host : want_ns);
    assert_non_null(strstr(c.err, "line 11, in <module>"));
    assert_non_null(strstr(c.err, "ValueError: the end"));
    char x[256];
    snprintf(x, sizeof x, "%s/tools/x", dir);
    assert_int_equal(access(x, F_OK), -1);
    pool_done(&loop, pool);
    remove_package(dir);
}

static void test_ro_dir_is_importable_read_only_and_keeps_line_numbers(void **state)
{
    (void)state;
    import_run(NULL, false);
}

/* root: namespaces without a user namespace; an ordinary user: Landlock rights on the folder */
static void test_ro_dir_without_user_namespace(void **state)
{
    (void)state;
    import_run("user-ns", geteuid() != 0);
}

/* both at once, and the folder does not disturb the bridge variable */
static void test_bridge_and_ro_dir_together(void **state)
{
    (void)state;
    char dir[64];
    write_package(dir, sizeof dir);
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_pool_t *pool = new_pool(&loop, NULL);
    host_t h;
    int run_end = host_start(&h, "pong\n");
    capture_t c = {0};
    start_ex(pool,
             "import os, tools\n"
             "fd = int(os.environ['PTC_BRIDGE_FD'])\n"
             "os.write(fd, tools.hello().encode() + b'\\n')\n"
             "print(os.read(fd, 100))\n",
             T_TIMEOUT_MS, run_end, dir, &c, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    host_join(&h);
    if (c.status != EXEC_STATUS_OK)
        fprintf(stderr, "status %d\nout %s\nerr %s\nmessage %s\nhost got %s\n", c.status, c.out,
                c.err, c.message, h.got);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal(h.got, "hello from tools\n");
    assert_string_equal(c.out, "b'pong\\n'\n");
    assert_true(h.eof);
    pool_done(&loop, pool);
    remove_package(dir);
}

/* with a package folder the interpreter reads PYTHON* variables, so none of the server's may
   arrive, even when passed on purpose */
static void test_ro_dir_run_drops_passed_python_variables(void **state)
{
    (void)state;
    char dir[64];
    write_package(dir, sizeof dir);
    assert_int_equal(setenv("PYTHONPATH", "/nonexistent/evil", 1), 0);
    assert_int_equal(setenv("PYTHONPTCTEST", "x", 1), 0);
    assert_int_equal(setenv("PTC_TEST_KEEP", "kept", 1), 0);
    const char *pass[] = {"PYTHONPATH", "PYTHONPTCTEST", "PTC_TEST_KEEP"};
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_options_t o;
    exec_options_init(&o);
    o.python = PYTHON;
    o.launcher = TEST_LAUNCHER;
    o.keep_warm = false;
    o.pass_env = pass;
    o.n_pass_env = 3;
    exec_pool_t *pool = NULL;
    assert_int_equal(exec_pool_new(&loop, &o, &pool), 0);
    assert_false(exec_pool_refusing(pool));
    capture_t c = {0};
    start_ex(pool,
             "import os, sys, tools\n"
             "print(os.environ['PYTHONPATH'], os.environ.get('PYTHONPTCTEST'))\n"
             "print(os.environ['PTC_TEST_KEEP'], 'PTC_BRIDGE_FD' in os.environ)\n"
             "print(sys.flags.no_user_site, sys.flags.dont_write_bytecode, sys.path[0] != '')\n",
             T_TIMEOUT_MS, -1, dir, &c, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    char want[256];
    snprintf(want, sizeof want, "%s None\nkept False\n1 1 True\n", EXEC_RO_LIB_PATH);
    assert_string_equal(c.out, want);
    pool_done(&loop, pool);
    unsetenv("PYTHONPATH");
    unsetenv("PYTHONPTCTEST");
    unsetenv("PTC_TEST_KEEP");
    remove_package(dir);
}

typedef struct {
    uv_timer_t timer;
    exec_run_t *run;
} cancel_ctx_t;

static void cancel_cb(uv_timer_t *t)
{
    cancel_ctx_t *x = t->data;
    exec_run_cancel(x->run);
    uv_close((uv_handle_t *)t, NULL);
}

/* cancel (running and queued), timeout and a refused start: each closes every copy */
static void test_cancel_and_timeout_with_a_bridge_leak_nothing(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_pool_t *pool = new_pool(&loop, NULL);

    /* running, then cancelled: no callback, and the host sees EOF */
    host_t h1, h2;
    int e1 = host_start(&h1, NULL);
    capture_t c1 = {0}, c2 = {0}, c3 = {0};
    cancel_ctx_t x;
    start_ex(pool, "import os, time\nos.write(3, b'up\\n')\ntime.sleep(60)\n", T_TIMEOUT_MS, e1,
             NULL, &c1, &x.run);
    /* queued behind it (max_concurrent 1), then dropped: its end is closed at once */
    int e2 = host_start(&h2, NULL);
    exec_run_t *queued = NULL;
    start_ex(pool, "print('never')", T_TIMEOUT_MS, e2, NULL, &c2, &queued);
    assert_int_equal(exec_pool_queued(pool), 1);
    assert_false(fd_closed(e2)); /* still owned by the queued run */
    exec_run_cancel(queued);
    assert_true(fd_closed(e2));
    host_join(&h2);
    assert_true(h2.eof);
    uv_timer_init(&loop, &x.timer);
    x.timer.data = &x;
    uv_timer_start(&x.timer, cancel_cb, 500, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    host_join(&h1);
    assert_false(c1.done);
    assert_false(c2.done);
    assert_true(h1.eof);

    /* timed out */
    host_t h3;
    int e3 = host_start(&h3, NULL);
    start_ex(pool, "import time\ntime.sleep(60)\n", 1000, e3, NULL, &c3, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    host_join(&h3);
    assert_int_equal(c3.status, EXEC_STATUS_TIMEOUT);
    assert_true(h3.eof);

    /* refused before it starts (a folder that does not exist): the descriptor is still ours to
       have closed */
    host_t h4;
    int e4 = host_start(&h4, NULL);
    exec_run_opts_t ro;
    exec_run_opts_init(&ro);
    ro.bridge_fd = e4;
    ro.ro_dir = "/nonexistent/ptc-lib";
    exec_callbacks_t cb = {.on_done = on_done, .user = &c3};
    assert_int_equal(exec_run_start_ex(pool, "pass", T_TIMEOUT_MS, &ro, &cb, NULL), EXEC_EINVAL);
    assert_true(fd_closed(e4));
    host_join(&h4);
    assert_true(h4.eof);
    pool_done(&loop, pool);
}

/* without a sandbox the same descriptor layout and variables apply */
static void test_unsafe_mode_passes_the_bridge_too(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_options_t o;
    exec_options_init(&o);
    o.python = PYTHON;
    o.launcher = TEST_LAUNCHER;
    o.unsafe_no_sandbox = true;
    o.keep_warm = false;
    exec_pool_t *pool = NULL;
    assert_int_equal(exec_pool_new(&loop, &o, &pool), 0);
    char dir[64];
    write_package(dir, sizeof dir);
    host_t h;
    int run_end = host_start(&h, "ok\n");
    capture_t c = {0};
    start_ex(pool,
             "import os, tools\n"
             "fd = int(os.environ['PTC_BRIDGE_FD'])\n"
             "os.write(fd, b'ping\\n')\n"
             "print(fd, os.read(fd, 10), tools.hello())\n",
             T_TIMEOUT_MS, run_end, dir, &c, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    host_join(&h);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal(h.got, "ping\n");
    assert_string_equal(c.out, "3 b'ok\\n' hello from tools\n");
    assert_true(h.eof);
    pool_done(&loop, pool);
    remove_package(dir);
}

/* warm sandboxes are made for the folder of the last run that found none; the bridge comes
   with the code, so bridge runs are warm too; a run without the folder never sees it */
static void test_warm_sandboxes_follow_the_folder_and_take_the_bridge(void **state)
{
    (void)state;
    if (!warm_mode) skip();
    char dir[64];
    write_package(dir, sizeof dir);
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_pool_t *pool = new_pool(&loop, NULL);
    for (int i = 0; i < 3; i++) {
        host_t h;
        int run_end = host_start(&h, "pong\n");
        capture_t c = {0};
        start_ex(pool,
                 "import os, tools\n"
                 "os.write(3, tools.hello().encode() + b'\\n')\n"
                 "print(os.read(3, 100), os.environ['PTC_BRIDGE_FD'],\n"
                 "      sorted(int(n) for n in os.listdir('/proc/self/fd'))[:4])\n",
                 T_TIMEOUT_MS, run_end, dir, &c, NULL);
        assert_true(fd_closed(run_end));
        uv_run(&loop, UV_RUN_DEFAULT);
        host_join(&h);
        if (c.status != EXEC_STATUS_OK) fprintf(stderr, "%s\n%s\n", c.err, c.message);
        assert_int_equal(c.status, EXEC_STATUS_OK);
        assert_string_equal(h.got, "hello from tools\n");
        assert_string_equal(c.out, "b'pong\\n' 3 [0, 1, 2, 3]\n");
        assert_true(h.eof);
        assert_int_equal(c.warm, i > 0); /* the first made them for its folder */
    }
    for (int i = 0; i < 2; i++) {
        capture_t c = {0};
        start_ex(pool,
                 "import os, sys\n"
                 "print(os.path.exists('" EXEC_RO_LIB_PATH "'), 'PTC_BRIDGE_FD' in os.environ,\n"
                 "      any('ptc' in p for p in sys.path), sorted(os.listdir('/proc/self/fd')))\n",
                 T_TIMEOUT_MS, -1, NULL, &c, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(c.status, EXEC_STATUS_OK);
        assert_string_equal(c.out, "False False False ['0', '1', '2', '3']\n");
        assert_int_equal(c.warm, i > 0);
    }
    pool_done(&loop, pool);
    remove_package(dir);
}

/* told the folder ahead (the server does when the tools package is built), the pool makes the
   warm sandboxes with it, so even the first run with that folder is warm */
static void test_warm_for_makes_the_first_run_with_the_folder_warm(void **state)
{
    (void)state;
    if (!warm_mode) skip();
    char dir[64];
    write_package(dir, sizeof dir);
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_pool_t *pool = new_pool(&loop, NULL);
    assert_int_equal(exec_pool_warm_for(pool, "/nonexistent/ptc-lib"), EXEC_EINVAL);
    assert_int_equal(exec_pool_warm_for(pool, dir), 0);
    assert_int_equal(exec_pool_warm_for(pool, dir), 0); /* the same: nothing changes */
    capture_t c = {0};
    start_ex(pool, "import tools; print(tools.hello())", T_TIMEOUT_MS, -1, dir, &c, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal(c.out, "hello from tools\n");
    assert_true(c.warm);
    pool_done(&loop, pool);
    remove_package(dir);
}

/* A folder with one module NAME.py (VALUE = NAME), for the extra module-path folders. */
static void write_module_dir(char *dir, size_t len, const char *name)
{
    snprintf(dir, len, "/tmp/ptc-bridge-path-XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/%s.py", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "VALUE = '%s'\n", name);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, 0644), 0);
}

/* ro_dir, then path_dirs, in that order on the module path, each read-only; warm sandboxes
   follow the whole list; more than EXEC_MAX_PATH_DIRS or a missing one is refused */
static void path_dirs_run(const char *disable, bool landlock_only)
{
    char dir[64], a[64], b[64];
    write_package(dir, sizeof dir);
    write_module_dir(a, sizeof a, "pathmod_a");
    write_module_dir(b, sizeof b, "pathmod_b");
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_pool_t *pool = new_pool(&loop, disable);
    const char *dirs[] = {a, b};
    exec_run_opts_t ro;
    exec_run_opts_init(&ro);
    ro.ro_dir = dir;
    ro.path_dirs = dirs;
    ro.n_path_dirs = 2;
    if (warm_mode) assert_int_equal(exec_pool_warm_for_ex(pool, &ro), 0);
    const char *code = "import errno, os, sys, tools, pathmod_a, pathmod_b\n"
                       "print(tools.hello(), pathmod_a.VALUE, pathmod_b.VALUE)\n"
                       "print(os.environ['PYTHONPATH'])\n"
                       "for m in (pathmod_a, pathmod_b):\n"
                       "    try:\n"
                       "        open(os.path.join(os.path.dirname(m.__file__), 'x'), 'w')\n"
                       "        print('wrote')\n"
                       "    except OSError as e:\n"
                       "        print('refused', e.errno in (errno.EROFS, errno.EACCES))\n";
    for (int i = 0; i < 2; i++) {
        capture_t c = {0};
        exec_callbacks_t cb = {.on_done = on_done, .user = &c};
        assert_int_equal(exec_run_start_ex(pool, code, T_TIMEOUT_MS, &ro, &cb, NULL), 0);
        uv_run(&loop, UV_RUN_DEFAULT);
        if (c.status != EXEC_STATUS_OK) fprintf(stderr, "%s\n%s\n", c.err, c.message);
        assert_int_equal(c.status, EXEC_STATUS_OK);
        char want[1024];
        if (landlock_only)
            snprintf(want, sizeof want, "hello from tools pathmod_a pathmod_b\n%s:%s:%s\n", dir, a,
                     b);
        else
            snprintf(want, sizeof want, "hello from tools pathmod_a pathmod_b\n%s:%s1:%s2\n",
                     EXEC_RO_LIB_PATH, EXEC_RO_LIB_PATH, EXEC_RO_LIB_PATH);
        size_t at = strlen(want);
        snprintf(want + at, sizeof want - at, "refused True\nrefused True\n");
        assert_string_equal(c.out, want);
        if (warm_mode && !landlock_only) assert_true(c.warm);
    }
    const char *missing[] = {a, "/nonexistent/ptc-path"};
    ro.path_dirs = missing;
    capture_t c = {0};
    exec_callbacks_t cb = {.on_done = on_done, .user = &c};
    assert_int_equal(exec_run_start_ex(pool, code, T_TIMEOUT_MS, &ro, &cb, NULL), EXEC_EINVAL);
    ro.path_dirs = dirs;
    ro.n_path_dirs = EXEC_MAX_PATH_DIRS + 1;
    assert_int_equal(exec_run_start_ex(pool, code, T_TIMEOUT_MS, &ro, &cb, NULL), EXEC_EINVAL);
    pool_done(&loop, pool);
    remove_package(dir);
    char path[256];
    snprintf(path, sizeof path, "%s/pathmod_a.py", a);
    unlink(path);
    snprintf(path, sizeof path, "%s/pathmod_b.py", b);
    unlink(path);
    rmdir(a);
    rmdir(b);
}

static void test_path_dirs_follow_ro_dir_on_the_module_path_read_only(void **state)
{
    (void)state;
    path_dirs_run(NULL, false);
}

static void test_path_dirs_without_user_namespace(void **state)
{
    (void)state;
    path_dirs_run("user-ns", geteuid() != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bridge_round_trip_has_exact_bytes_and_only_fd_3),
        cmocka_unit_test(test_ro_dir_is_importable_read_only_and_keeps_line_numbers),
        cmocka_unit_test(test_ro_dir_without_user_namespace),
        cmocka_unit_test(test_bridge_and_ro_dir_together),
        cmocka_unit_test(test_ro_dir_run_drops_passed_python_variables),
        cmocka_unit_test(test_cancel_and_timeout_with_a_bridge_leak_nothing),
        cmocka_unit_test(test_unsafe_mode_passes_the_bridge_too),
        cmocka_unit_test(test_warm_sandboxes_follow_the_folder_and_take_the_bridge),
        cmocka_unit_test(test_warm_for_makes_the_first_run_with_the_folder_warm),
        cmocka_unit_test(test_path_dirs_follow_ro_dir_on_the_module_path_read_only),
        cmocka_unit_test(test_path_dirs_without_user_namespace),
    };
    int failed = cmocka_run_group_tests_name("cold sandboxes", tests, cold_group, NULL);
    return failed + cmocka_run_group_tests_name("warm sandboxes", tests, warm_group, NULL);
}
