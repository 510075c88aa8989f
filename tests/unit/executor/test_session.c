/* executor sessions, files out and output so far: real sandboxes through the launcher, as root
   and (via run_as_user.sh) as an ordinary user. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "executor.h"

#define PYTHON       "/usr/bin/python3"
#define T_TIMEOUT_MS 20000u
#define MAX_FILES    64

typedef struct {
    char *name;
    unsigned char *data;
    size_t len;
    uint64_t size;
    bool truncated, omitted;
    char reason[128];
} file_t;

typedef struct {
    bool done;
    int calls;
    exec_status_t status;
    int exit_code;
    char *out, *err;
    size_t out_len;
    bool interrupted, cancelled, session_ended;
    char message[800];
    file_t files[MAX_FILES];
    size_t n_files;
    exec_session_t *cancel_me; /* cancel this session's cell on the first progress call */
    bool count_only;           /* counted counts the files; none is kept */
    size_t counted;
} cell_t;

static void cell_free(cell_t *c)
{
    free(c->out);
    free(c->err);
    for (size_t i = 0; i < c->n_files; i++) {
        free(c->files[i].name);
        free(c->files[i].data);
    }
    memset(c, 0, sizeof *c);
}

static char *dup_bytes(const unsigned char *p, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    if (n) memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static void on_cell_done(exec_session_t *s, const exec_result_t *r, void *user)
{
    (void)s;
    cell_t *c = user;
    c->done = true;
    c->calls++;
    c->status = r->status;
    c->exit_code = r->exit_code;
    c->out = dup_bytes(r->out.data, r->out.len);
    c->out_len = r->out.len;
    c->err = dup_bytes(r->err.data, r->err.len);
    c->interrupted = r->interrupted;
    c->cancelled = r->cancelled;
    c->session_ended = r->session_ended;
    snprintf(c->message, sizeof c->message, "%s", r->message ? r->message : "");
    if (c->count_only) {
        c->counted = r->n_files;
        return;
    }
    assert_true(r->n_files <= MAX_FILES);
    for (size_t i = 0; i < r->n_files; i++) {
        const exec_file_t *f = &r->files[i];
        file_t *d = &c->files[c->n_files++];
        d->name = strdup(f->name);
        d->data = (unsigned char *)dup_bytes(f->data, f->len);
        d->len = f->len;
        d->size = f->size;
        d->truncated = f->truncated;
        d->omitted = f->omitted;
        snprintf(d->reason, sizeof d->reason, "%s", f->reason ? f->reason : "");
    }
}

static void on_cell_progress(exec_session_t *s, uint64_t elapsed, uint64_t bytes, void *user)
{
    (void)elapsed;
    (void)bytes;
    cell_t *c = user;
    if (c->cancel_me == s) {
        c->cancel_me = NULL;
        assert_int_equal(exec_session_cancel(s), 0);
    }
}

static void base_opts(exec_options_t *o, const char *python)
{
    exec_options_init(o);
    o->python = python;
    o->launcher = TEST_LAUNCHER;
    o->max_concurrent = 4;
    o->keep_warm = false;
    o->progress_ms = 100;
}

static exec_pool_t *new_pool(uv_loop_t *loop, const char *python)
{
    exec_options_t o;
    base_opts(&o, python);
    exec_pool_t *pool = NULL;
    assert_int_equal(exec_pool_new(loop, &o, &pool), 0);
    assert_false(exec_pool_refusing(pool));
    return pool;
}

static void pool_end(uv_loop_t *loop, exec_pool_t *pool)
{
    exec_pool_free(pool);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(loop), 0);
}

/* a loop and a default pool per test; the teardown frees the pool with what is left in it */
typedef struct {
    uv_loop_t loop;
    exec_pool_t *pool;
} fixture_t;

static int fx_setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof *fx);
    if (!fx || uv_loop_init(&fx->loop) != 0) return -1;
    fx->pool = new_pool(&fx->loop, PYTHON);
    *state = fx;
    return 0;
}

static int fx_teardown(void **state)
{
    fixture_t *fx = *state;
    pool_end(&fx->loop, fx->pool);
    free(fx);
    return 0;
}

static exec_session_t *new_session(exec_pool_t *pool, int bridge_fd)
{
    exec_session_opts_t so;
    exec_session_opts_init(&so);
    so.bridge_fd = bridge_fd;
    exec_session_t *s = NULL;
    assert_int_equal(exec_session_new(pool, &so, &s), 0);
    assert_non_null(s);
    return s;
}

/* runs one cell and turns the loop until it ended */
static void cell(uv_loop_t *loop, exec_session_t *s, const char *code, uint64_t timeout, cell_t *c)
{
    exec_session_callbacks_t cb = {
        .on_done = on_cell_done, .on_progress = on_cell_progress, .user = c};
    assert_int_equal(exec_session_run(s, code, timeout, &cb), 0);
    assert_true(exec_session_busy(s));
    assert_int_equal(exec_session_run(s, "pass", timeout, &cb), EXEC_EBUSY);
    while (!c->done)
        uv_run(loop, UV_RUN_ONCE);
    assert_int_equal(c->calls, 1);
    assert_false(exec_session_busy(s));
}

/* a cell that must succeed, its stdout compared */
static void cell_ok(uv_loop_t *loop, exec_session_t *s, const char *code, const char *want_out)
{
    cell_t c = {0};
    cell(loop, s, code, T_TIMEOUT_MS, &c);
    if (c.status != EXEC_STATUS_OK) fprintf(stderr, "cell failed: %s\n%s\n", c.err, c.message);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_false(c.session_ended);
    if (want_out) assert_string_equal(c.out, want_out);
    cell_free(&c);
}

static const file_t *find_file(const cell_t *c, const char *name)
{
    for (size_t i = 0; i < c->n_files; i++)
        if (strcmp(c->files[i].name, name) == 0) return &c->files[i];
    return NULL;
}

typedef struct {
    bool done;
    char out[256];
    exec_status_t status;
    exec_run_t *run;
    char seen[64];
    size_t n_files;
    char names[8][64];
    size_t lens[8];
    bool omitted[8];
    unsigned char head[8][8]; /* first bytes of each file */
} oneshot_t;

static void on_run_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    (void)run;
    oneshot_t *o = user;
    o->done = true;
    o->status = r->status;
    snprintf(o->out, sizeof o->out, "%.*s", (int)r->out.len, (const char *)r->out.data);
    o->n_files = r->n_files;
    for (size_t i = 0; i < r->n_files && i < 8; i++) {
        snprintf(o->names[i], sizeof o->names[i], "%s", r->files[i].name);
        o->lens[i] = r->files[i].len;
        o->omitted[i] = r->files[i].omitted;
        memcpy(o->head[i], r->files[i].data, r->files[i].len < 8 ? r->files[i].len : 8);
    }
}

static void run_peek(uv_timer_t *t)
{
    oneshot_t *o = t->data;
    exec_output_t out, err;
    assert_int_equal(exec_run_output(o->run, &out, &err), 0);
    snprintf(o->seen, sizeof o->seen, "%.*s", (int)out.len, (const char *)out.data);
}

/* a one-shot run on pool, with a look at its output after peek_ms (0: none) */
static void oneshot(uv_loop_t *loop, exec_pool_t *pool, const char *code, uint64_t peek_ms,
                    oneshot_t *o)
{
    exec_callbacks_t cb = {.on_done = on_run_done, .user = o};
    assert_int_equal(exec_run_start(pool, code, T_TIMEOUT_MS, &cb, &o->run), 0);
    uv_timer_t t;
    uv_timer_init(loop, &t);
    t.data = o;
    if (peek_ms) uv_timer_start(&t, run_peek, peek_ms, 0);
    while (!o->done)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

static void test_state_persists_across_cells(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    exec_session_t *s = new_session(pool, -1);
    uint64_t t0 = exec_session_last_used(s);
    cell_ok(loop, s,
            "import json, os, tempfile\n"
            "x = 41\n"
            "f = open(os.path.join(tempfile.gettempdir(), 'kept.txt'), 'w')\n"
            "f.write('in tmp'); f.flush()\n"
            "os.mkdir(os.path.join(tempfile.gettempdir(), 'wd'))\n"
            "os.chdir(os.path.join(tempfile.gettempdir(), 'wd'))\n"
            "def g(): return x + 1\n",
            "");
    cell_ok(loop, s,
            "print(g(), json.dumps([1]), open('../kept.txt').read(), os.path.basename(os.getcwd()),"
            " f.closed, __name__)",
            "42 [1] in tmp wd False __main__\n");
    /* an exception ends the cell, not the session; its traceback names the cell's line */
    cell_t c = {0};
    cell(loop, s, "y = 1\n1/0\n", T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_ERROR);
    assert_int_equal(c.exit_code, 1);
    assert_false(c.session_ended);
    assert_non_null(strstr(c.err, "ZeroDivisionError"));
    assert_non_null(strstr(c.err, "File \"<string>\", line 2"));
    assert_null(strstr(c.err, "_ptc_session"));
    cell_free(&c);
    /* SystemExit too: its code is the cell's exit code */
    cell(loop, s, "import sys\nsys.exit(5)", T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_ERROR);
    assert_int_equal(c.exit_code, 5);
    assert_false(c.session_ended);
    cell_free(&c);
    cell_ok(loop, s, "print(y, x)", "1 41\n");
    assert_true(exec_session_last_used(s) >= t0);
    assert_null(exec_session_end_reason(s));
    exec_session_close(s);
}

static void test_output_is_exactly_the_cells(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    exec_session_t *s = new_session(pool, -1);
    for (int i = 0; i < 5; i++) {
        char code[128], want[64];
        snprintf(code, sizeof code,
                 "import sys\nsys.stdout.write('cell %d'); sys.stderr.write('e%d')", i, i);
        snprintf(want, sizeof want, "cell %d", i);
        cell_t c = {0};
        cell(loop, s, code, T_TIMEOUT_MS, &c);
        assert_int_equal(c.status, EXEC_STATUS_OK);
        assert_string_equal(c.out, want);
        snprintf(want, sizeof want, "e%d", i);
        assert_string_equal(c.err, want);
        cell_free(&c);
    }
    /* a megabyte, every byte of it, and nothing of it in the next cell */
    cell_t c = {0};
    cell(loop, s, "import sys\nsys.stdout.write('x' * (1 << 20))", T_TIMEOUT_MS, &c);
    assert_int_equal(c.out_len, 1u << 20);
    cell_free(&c);
    cell_ok(loop, s, "print('next')", "next\n");
    exec_session_close(s);
}

static void test_sessions_and_runs_do_not_see_each_other(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    exec_session_t *a = new_session(pool, -1);
    exec_session_t *b = new_session(pool, -1);
    static const char probe[] = "import os, tempfile\n"
                                "print('secret' in globals(), os.path.exists(os.path.join("
                                "tempfile.gettempdir(), 'secret.txt')), os.listdir(os.environ["
                                "'PTC_OUTPUT_DIR']))";
    cell_ok(loop, a,
            "import os, tempfile\nsecret = 1\n"
            "open(os.path.join(tempfile.gettempdir(), 'secret.txt'), 'w').write('s')\n"
            "open(os.path.join(os.environ['PTC_OUTPUT_DIR'], 'a.txt'), 'w').write('a')\n",
            "");
    cell_ok(loop, b, probe, "False False []\n");
    /* a one-shot run beside them */
    oneshot_t o = {0};
    oneshot(loop, pool, probe, 0, &o);
    assert_int_equal(o.status, EXEC_STATUS_OK);
    assert_string_equal(o.out, "False False []\n");
    /* and a session closed leaves nothing for the next one */
    exec_session_close(a);
    exec_session_t *a2 = new_session(pool, -1);
    cell_ok(loop, a2, probe, "False False []\n");
    exec_session_close(a2);
    exec_session_close(b);
}

static void test_timeout_interrupts_and_the_session_survives(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    exec_session_t *s = new_session(pool, -1);
    cell_ok(loop, s, "kept = 'yes'", "");
    cell_t c = {0};
    cell(loop, s, "import time\nprint('started', flush=True)\nwhile True: time.sleep(0.05)", 700,
         &c);
    assert_int_equal(c.status, EXEC_STATUS_TIMEOUT);
    assert_true(c.interrupted);
    assert_false(c.session_ended);
    assert_false(c.cancelled);
    assert_string_equal(c.out, "started\n");
    assert_non_null(strstr(c.err, "KeyboardInterrupt"));
    cell_free(&c);
    cell_ok(loop, s, "print(kept)", "yes\n");
    /* a cancel is the same interrupt */
    c.cancel_me = s;
    cell(loop, s, "import time\nwhile True: time.sleep(0.05)", T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_TIMEOUT);
    assert_true(c.interrupted);
    assert_true(c.cancelled);
    assert_false(c.session_ended);
    cell_free(&c);
    cell_ok(loop, s, "print(kept)", "yes\n");
    exec_session_close(s);
}

static void test_a_cell_ignoring_the_interrupt_is_killed(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    exec_session_t *s = new_session(pool, -1);
    cell_t c = {0};
    uint64_t t0 = uv_hrtime();
    cell(loop, s,
         "import time\nwhile True:\n    try:\n        time.sleep(5)\n"
         "    except KeyboardInterrupt:\n        print('ignored', flush=True)\n",
         500, &c);
    uint64_t took = (uv_hrtime() - t0) / 1000000u;
    assert_int_equal(c.status, EXEC_STATUS_TIMEOUT);
    assert_false(c.interrupted);
    assert_true(c.session_ended);
    assert_string_equal(c.out, "ignored\n");
    assert_non_null(strstr(c.message, "KeyboardInterrupt"));
    assert_true(took >= 500 + EXEC_SESSION_INTERRUPT_GRACE_MS);
    assert_true(took < 500 + EXEC_SESSION_INTERRUPT_GRACE_MS + 5000);
    cell_free(&c);
    assert_non_null(exec_session_end_reason(s));
    exec_session_callbacks_t cb = {.on_done = on_cell_done, .user = &c};
    assert_int_equal(exec_session_run(s, "print(1)", T_TIMEOUT_MS, &cb), EXEC_ESESSIONENDED);
    exec_session_close(s);
}

static void test_crash_and_oom_end_the_session(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    exec_session_t *s = new_session(pool, -1);
    cell_t c = {0};
    cell(loop, s, "import os\nprint('bye', flush=True)\nos._exit(3)", T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_ERROR);
    assert_int_equal(c.exit_code, 3);
    assert_true(c.session_ended);
    assert_string_equal(c.out, "bye\n");
    cell_free(&c);
    assert_non_null(strstr(exec_session_end_reason(s), "exited with status 3"));
    exec_session_callbacks_t cb = {.on_done = on_cell_done, .user = &c};
    assert_int_equal(exec_session_run(s, "print(1)", T_TIMEOUT_MS, &cb), EXEC_ESESSIONENDED);
    exec_session_close(s);

    bool memcg = exec_pool_probe(pool)->state[EXEC_LAYER_CGROUP_MEMORY] == EXEC_LAYER_ACTIVE;
    s = new_session(pool, -1);
    cell_ok(loop, s, "a = 1", "");
    cell(loop, s, "x = []\nwhile True: x.append(bytearray(16 << 20))", T_TIMEOUT_MS, &c);
    if (memcg) {
        /* the memory cgroup holds for the whole session: the OOM kill ends it */
        assert_int_equal(c.status, EXEC_STATUS_OOM);
        assert_true(c.session_ended);
        assert_non_null(strstr(exec_session_end_reason(s), "memory"));
        assert_int_equal(exec_session_run(s, "print(1)", T_TIMEOUT_MS, &cb), EXEC_ESESSIONENDED);
    } else {
        /* without one RLIMIT_AS makes it a MemoryError, and the session lives on */
        fprintf(stderr, "note: no memory cgroup here; the OOM half checks the MemoryError\n");
        assert_int_equal(c.status, EXEC_STATUS_ERROR);
        assert_non_null(strstr(c.err, "MemoryError"));
        cell_free(&c);
        cell_ok(loop, s, "del x\nprint(a)", "1\n");
    }
    cell_free(&c);
    exec_session_close(s);
}

static void test_files_come_back_when_new_or_changed(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    exec_session_t *s = new_session(pool, -1);
    cell_t c = {0};
    cell(loop, s,
         "import os\nd = os.environ['PTC_OUTPUT_DIR']\n"
         "print(os.environ['MPLBACKEND'], d == os.path.join(os.environ['TMPDIR'], 'outputs'))\n"
         "open(os.path.join(d, 'a.txt'), 'w').write('hello')\n"
         "open(os.path.join(d, 'b.bin'), 'wb').write(bytes(range(256)))\n"
         "open(os.path.join(d, 'empty'), 'w').close()\n",
         T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal(c.out, "Agg True\n");
    assert_int_equal(c.n_files, 3);
    assert_string_equal(c.files[0].name, "a.txt"); /* name order */
    assert_int_equal(c.files[0].len, 5);
    assert_memory_equal(c.files[0].data, "hello", 5);
    assert_false(c.files[0].truncated);
    assert_false(c.files[0].omitted);
    const file_t *b = find_file(&c, "b.bin");
    assert_non_null(b);
    assert_int_equal(b->len, 256);
    for (int i = 0; i < 256; i++)
        assert_int_equal(b->data[i], i);
    const file_t *e = find_file(&c, "empty");
    assert_non_null(e);
    assert_int_equal(e->len, 0);
    assert_false(e->omitted);
    cell_free(&c);
    /* nothing changed: nothing comes back */
    cell(loop, s, "print(sorted(os.listdir(d)))", T_TIMEOUT_MS, &c);
    assert_string_equal(c.out, "['a.txt', 'b.bin', 'empty']\n");
    assert_int_equal(c.n_files, 0);
    cell_free(&c);
    /* only the one rewritten */
    cell(loop, s, "open(os.path.join(d, 'a.txt'), 'a').write(' again')", T_TIMEOUT_MS, &c);
    assert_int_equal(c.n_files, 1);
    assert_string_equal(c.files[0].name, "a.txt");
    assert_string_equal((char *)c.files[0].data, "hello again");
    cell_free(&c);
    exec_session_close(s);
}

static void test_files_past_a_bound_are_listed_not_dropped(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    exec_files_limits_t lim = {.file_bytes = 1000, .call_bytes = 1500, .count = 4};
    assert_int_equal(exec_pool_set_files_limits(pool, &lim), 0);
    exec_files_limits_t too_big = {.file_bytes = EXEC_FILES_LIMIT_BYTES + 1};
    assert_int_equal(exec_pool_set_files_limits(pool, &too_big), EXEC_EINVAL);
    exec_session_t *s = new_session(pool, -1);
    cell_t c = {0};
    cell(loop, s,
         "import os\nd = os.environ['PTC_OUTPUT_DIR']\n"
         "for n, size in (('1big', 5000), ('2mid', 800), ('3late', 10), ('4small', 0),"
         " ('5many', 1), ('6many', 1)):\n"
         "    open(os.path.join(d, n), 'wb').write(b'z' * size)\n",
         T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_int_equal(c.n_files, 6);
    const file_t *f = find_file(&c, "1big");
    assert_true(f->truncated);
    assert_int_equal(f->len, 1000);
    assert_int_equal(f->size, 5000);
    assert_non_null(strstr(f->reason, "per-file"));
    f = find_file(&c, "2mid"); /* 500 left in the call */
    assert_true(f->truncated);
    assert_int_equal(f->len, 500);
    assert_int_equal(f->size, 800);
    assert_non_null(strstr(f->reason, "call"));
    f = find_file(&c, "3late");
    assert_true(f->omitted);
    assert_int_equal(f->len, 0);
    assert_int_equal(f->size, 10);
    assert_non_null(strstr(f->reason, "call"));
    f = find_file(&c, "4small"); /* empty: it costs nothing */
    assert_false(f->omitted);
    assert_false(f->truncated);
    f = find_file(&c, "5many");
    assert_true(f->omitted);
    assert_non_null(strstr(f->reason, "per-call bound"));
    assert_true(find_file(&c, "6many")->omitted);
    cell_free(&c);
    exec_session_close(s);
}

/* A folder of more entries than the launcher looks at (PTC_CAP_SESSION_SNAPSHOT): both scans of
   a cell see the same first names, so a removal never makes an untouched file come back as new,
   and what changes among the first names still comes back. */
static void test_a_crowded_output_folder_reports_only_what_changed(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_session_t *s = new_session(fx->pool, -1);
    cell_t c = {.count_only = true};
    cell(loop, s,
         "import os\nd = os.environ['PTC_OUTPUT_DIR']\n"
         "for i in range(1100):\n" /* past the cap of 1024: f0000 to f1099 */
         "    open(os.path.join(d, 'f%04d' % i), 'w').close()\n",
         T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_true(c.counted > 0);
    /* the first name and the last: whatever order the folder lists its entries in, one of the
       two removals moved an entry the cell's first scan did not see into the second's */
    static const char *const removals[] = {"os.remove(os.path.join(d, 'f0000'))",
                                           "os.remove(os.path.join(d, 'f1099'))"};
    for (size_t i = 0; i < 2; i++) {
        cell_free(&c);
        c.count_only = true;
        cell(loop, s, removals[i], T_TIMEOUT_MS, &c);
        assert_int_equal(c.status, EXEC_STATUS_OK);
        assert_int_equal(c.counted, 0);
    }
    cell_free(&c);
    cell(loop, s,
         "open(os.path.join(d, 'a-new'), 'w').write('x')\n"
         "open(os.path.join(d, 'f0005'), 'w').write('y')\n",
         T_TIMEOUT_MS, &c);
    assert_int_equal(c.n_files, 2);
    assert_string_equal(c.files[0].name, "a-new");
    assert_string_equal(c.files[1].name, "f0005");
    cell_free(&c);
    exec_session_close(s);
}

static void test_links_fifos_and_folders_are_not_followed(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    /* a host file the sandbox must not hand back through a link */
    char host[] = "/tmp/ptc-session-host-XXXXXX";
    int fd = mkstemp(host);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "HOST SECRET", 11), 11);
    close(fd);
    exec_session_t *s = new_session(pool, -1);
    char code[512];
    snprintf(code, sizeof code,
             "import os\nd = os.environ['PTC_OUTPUT_DIR']\n"
             "os.symlink('%s', os.path.join(d, 'link'))\n"
             "os.symlink('/etc/hostname', os.path.join(d, 'link2'))\n"
             "os.mkfifo(os.path.join(d, 'fifo'))\n"
             "os.mkdir(os.path.join(d, 'sub'))\n"
             "open(os.path.join(d, 'real.txt'), 'w').write('real')\n",
             host);
    cell_t c = {0};
    cell(loop, s, code, 10000, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_int_equal(c.n_files, 5);
    static const char *const odd[] = {"link", "link2", "fifo", "sub"};
    for (size_t i = 0; i < 4; i++) {
        const file_t *f = find_file(&c, odd[i]);
        assert_non_null(f);
        assert_true(f->omitted);
        assert_int_equal(f->len, 0);
        assert_non_null(strstr(f->reason, "not a regular file"));
    }
    assert_string_equal((char *)find_file(&c, "real.txt")->data, "real");
    for (size_t i = 0; i < c.n_files; i++)
        assert_null(memmem(c.files[i].data, c.files[i].len, "HOST SECRET", 11));
    cell_free(&c);
    exec_session_close(s);
    unlink(host);
}

static void test_the_bridge_lasts_the_session(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    exec_session_t *s = new_session(pool, sv[1]);
    cell_ok(loop, s, "import os\nos.write(int(os.environ['PTC_BRIDGE_FD']), b'one\\n')", "");
    cell_ok(loop, s, "os.write(3, b'two\\n')", "");
    char buf[16] = {0};
    size_t got = 0;
    while (got < 8) {
        ssize_t n = read(sv[0], buf + got, 8 - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    assert_string_equal(buf, "one\ntwo\n");
    exec_session_close(s);
    /* the session's end closed the sandbox's copies */
    assert_int_equal(read(sv[0], buf, sizeof buf), 0);
    close(sv[0]);
}

static void test_a_session_imports_from_its_folders(void **state)
{
    fixture_t *fx = *state;
    char dir[] = "/tmp/ptc-session-lib-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/sesmod.py", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("X = 'from the folder'\n", f);
    fclose(f);
    chmod(path, 0644);
    exec_session_opts_t so;
    exec_session_opts_init(&so);
    so.ro_dir = dir;
    exec_session_t *s = NULL;
    assert_int_equal(exec_session_new(fx->pool, &so, &s), 0);
    cell_ok(&fx->loop, s, "import sesmod", "");
    cell_ok(&fx->loop, s, "print(sesmod.X)", "from the folder\n");
    exec_session_close(s);
    so.ro_dir = "/nonexistent-ptc-dir";
    assert_int_equal(exec_session_new(fx->pool, &so, &s), EXEC_EINVAL);
    unlink(path);
    rmdir(dir);
}

typedef struct {
    exec_session_t *s;
    char seen[64];
} peek_t;

static void peek(uv_timer_t *t)
{
    peek_t *p = t->data;
    exec_output_t out, err;
    assert_int_equal(exec_session_output(p->s, &out, &err), 0);
    snprintf(p->seen, sizeof p->seen, "%.*s", (int)out.len, (const char *)out.data);
}

static void test_output_so_far_of_a_running_cell(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    exec_session_t *s = new_session(pool, -1);
    exec_output_t out, err;
    assert_int_equal(exec_session_output(s, &out, &err), EXEC_EINVAL); /* no cell */
    peek_t p = {.s = s};
    uv_timer_t t;
    uv_timer_init(loop, &t);
    t.data = &p;
    uv_timer_start(&t, peek, 1500, 0);
    cell_t c = {0};
    cell(loop, s, "import time\nprint('early', flush=True)\ntime.sleep(3)\nprint('late')",
         T_TIMEOUT_MS, &c);
    assert_string_equal(p.seen, "early\n");
    assert_string_equal(c.out, "early\nlate\n");
    cell_free(&c);
    uv_close((uv_handle_t *)&t, NULL);
    exec_session_close(s);
}

static void test_a_one_shot_run_hands_files_back(void **state)
{
    fixture_t *fx = *state;
    oneshot_t o = {0};
    oneshot(&fx->loop, fx->pool,
            "import os\nd = os.environ['PTC_OUTPUT_DIR']\n"
            "open(os.path.join(d, 'data.csv'), 'w').write('a,b\\n1,2\\n')\n"
            "os.symlink('/etc/hostname', os.path.join(d, 'link'))\n"
            "print('wrote')",
            0, &o);
    assert_int_equal(o.status, EXEC_STATUS_OK);
    assert_string_equal(o.out, "wrote\n");
    assert_int_equal(o.n_files, 2);
    assert_string_equal(o.names[0], "data.csv");
    assert_int_equal(o.lens[0], 8);
    assert_memory_equal(o.head[0], "a,b\n1,2\n", 8);
    assert_string_equal(o.names[1], "link");
    assert_true(o.omitted[1]);
    /* the next run starts with an empty folder and hands back nothing */
    oneshot_t o2 = {0};
    oneshot(&fx->loop, fx->pool, "import os\nprint(os.listdir(os.environ['PTC_OUTPUT_DIR']))", 0,
            &o2);
    assert_string_equal(o2.out, "[]\n");
    assert_int_equal(o2.n_files, 0);
}

/* the matplotlib test's interpreter: a venv of its own, made once per build tree */
static bool mpl_python(char *path, size_t len)
{
    snprintf(path, len, "%s/bin/python3", TEST_MPL_VENV);
    static const char check[] = TEST_MPL_VENV "/bin/python3 -c 'import matplotlib' 2>/dev/null";
    if (access(path, X_OK) == 0 && system(check) == 0) return true;
    static const char make[] = PYTHON " -m venv " TEST_MPL_VENV " >/dev/null 2>&1 && " TEST_MPL_VENV
                                      "/bin/pip install -q matplotlib >/dev/null 2>&1";
    if (system(make) != 0 || system(check) != 0) return false;
    return true;
}

static void test_a_plot_comes_back_as_png(void **state)
{
    (void)state;
    char py[1024];
    if (!mpl_python(py, sizeof py)) {
        fprintf(stderr,
                "SKIP test_a_plot_comes_back_as_png: cannot install matplotlib into %s "
                "(no package index reachable, or the folder is not writable)\n",
                TEST_MPL_VENV);
        skip();
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_pool_t *pool = new_pool(&loop, py);
    exec_session_t *s = new_session(pool, -1);
    /* never imported behind the code's back */
    cell_ok(&loop, s, "import sys\nprint('matplotlib' in sys.modules)", "False\n");
    cell_t c = {0};
    cell(&loop, s, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\nprint('ok')",
         T_TIMEOUT_MS, &c);
    if (c.status != EXEC_STATUS_OK) fprintf(stderr, "%s\n", c.err);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_string_equal(c.out, "ok\n");
    assert_int_equal(c.n_files, 1);
    assert_string_equal(c.files[0].name, "figure-1.png");
    assert_true(c.files[0].len > 1000);
    assert_memory_equal(c.files[0].data, "\x89PNG\r\n\x1a\n", 8);
    cell_free(&c);
    /* a figure left open at the end of a cell comes back too, under a new name */
    cell(&loop, s, "fig = plt.figure()\nplt.bar([1, 2], [3, 4])", T_TIMEOUT_MS, &c);
    assert_int_equal(c.status, EXEC_STATUS_OK);
    assert_int_equal(c.n_files, 1);
    assert_string_equal(c.files[0].name, "figure-2.png");
    assert_memory_equal(c.files[0].data, "\x89PNG", 4);
    cell_free(&c);
    cell(&loop, s, "print(plt.get_fignums())", T_TIMEOUT_MS, &c);
    assert_string_equal(c.out, "[]\n");
    assert_int_equal(c.n_files, 0);
    cell_free(&c);
    /* a one-shot run's plot comes back too */
    oneshot_t o = {0};
    oneshot(&loop, pool, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()", 0, &o);
    assert_int_equal(o.status, EXEC_STATUS_OK);
    assert_int_equal(o.n_files, 1);
    assert_string_equal(o.names[0], "figure-1.png");
    assert_memory_equal(o.head[0], "\x89PNG\r\n\x1a\n", 8);
    cell(&loop, s, "print(plt.get_fignums())", T_TIMEOUT_MS, &c);
    assert_string_equal(c.out, "[]\n");
    assert_int_equal(c.n_files, 0);
    cell_free(&c);
    exec_session_close(s);
    pool_end(&loop, pool);
}

static void test_pool_free_ends_live_sessions(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_pool_t *pool = new_pool(&loop, PYTHON);
    exec_session_t *idle = new_session(pool, -1);
    exec_session_t *busy = new_session(pool, -1);
    (void)idle;
    cell_ok(&loop, idle, "x = 1", "");
    cell_t c = {0};
    exec_session_callbacks_t cb = {.on_done = on_cell_done, .user = &c};
    assert_int_equal(exec_session_run(busy, "import time\ntime.sleep(30)", T_TIMEOUT_MS, &cb), 0);
    uint64_t t0 = uv_hrtime();
    pool_end(&loop, pool); /* no callback for the running cell; no leak (ASan) */
    assert_false(c.done);
    assert_true((uv_hrtime() - t0) / 1000000u < 5000);
}

static void test_run_output_so_far(void **state)
{
    fixture_t *fx = *state;
    uv_loop_t *loop = &fx->loop;
    exec_pool_t *pool = fx->pool;
    exec_output_t out, err;
    assert_int_equal(exec_run_output(NULL, &out, &err), EXEC_EINVAL);
    oneshot_t o = {0};
    oneshot(loop, pool, "import time\nprint('early', flush=True)\ntime.sleep(3)\nprint('late')",
            1500, &o);
    assert_int_equal(o.status, EXEC_STATUS_OK);
    assert_string_equal(o.seen, "early\n");
    assert_string_equal(o.out, "early\nlate\n");
}

/* Reads the output so far of the cell running in a workspace session, then cancels it. */
typedef struct {
    exec_ws_session_t *s;
    char seen[64];
    int cancel_rc;
} ws_peek_t;

static void ws_peek_and_cancel(uv_timer_t *t)
{
    ws_peek_t *p = t->data;
    exec_output_t out, err;
    assert_int_equal(exec_ws_session_output(p->s, &out, &err), 0);
    snprintf(p->seen, sizeof p->seen, "%.*s", (int)out.len, (const char *)out.data);
    p->cancel_rc = exec_ws_session_cancel(p->s);
}

/* A workspace session (exec_ws_session_*) runs its cells in one interpreter, shows a running
   cell's output so far and cancels it; once that interpreter has ended, releasing the session
   closes it and a later find says why. */
static void test_a_workspace_session_keeps_state_and_says_why_it_ended(void **state)
{
    fixture_t *fx = *state;
    static const unsigned char owner[EXEC_OWNER_BYTES] = {7};
    const exec_ws_options_t o = {.pool = fx->pool,
                                 .max_sessions = 2,
                                 .session_idle_ms = 60000,
                                 .max_runs = 1,
                                 .run_keep_ms = 60000};
    const exec_ws_callbacks_t wcb = {0};
    exec_workspace_t *ws = NULL;
    assert_int_equal(exec_workspace_new(&fx->loop, &o, &wcb, &ws), 0);
    char msg[700] = "";
    exec_ws_session_t *s = exec_ws_session_create(ws, owner, NULL, msg, sizeof msg);
    assert_non_null(s);
    char handle[EXEC_WS_HANDLE_MAX];
    snprintf(handle, sizeof handle, "%s", exec_ws_session_handle(s));
    exec_session_opts_t so;
    exec_session_opts_init(&so);
    assert_int_equal(exec_ws_session_start(s, &so), 0);
    assert_int_equal(exec_ws_session_start(s, &so), EXEC_EINVAL); /* once */
    cell_ok(&fx->loop, exec_ws_session_sandbox(s), "a = 41", "");
    cell_t c = {0};
    exec_session_callbacks_t cb = {.on_done = on_cell_done, .user = &c};
    assert_int_equal(exec_ws_session_run(s, "print(a + 1)", T_TIMEOUT_MS, &cb), 0);
    assert_true(exec_ws_session_busy(s));
    while (!c.done)
        uv_run(&fx->loop, UV_RUN_ONCE);
    assert_string_equal(c.out, "42\n");
    cell_free(&c);
    assert_int_equal(exec_ws_session_cells(s), 1); /* cell_ok ran the sandbox directly */
    assert_null(exec_ws_session_end_reason(s));

    /* No cell runs: no output so far, nothing to cancel. */
    exec_output_t out, err;
    assert_int_equal(exec_ws_session_output(s, &out, &err), EXEC_EINVAL);
    assert_int_equal(exec_ws_session_cancel(s), EXEC_EINVAL);
    ws_peek_t p = {.s = s, .cancel_rc = 1};
    uv_timer_t t;
    assert_int_equal(uv_timer_init(&fx->loop, &t), 0);
    t.data = &p;
    assert_int_equal(uv_timer_start(&t, ws_peek_and_cancel, 1500, 0), 0);
    assert_int_equal(exec_ws_session_run(s,
                                         "import time\nprint('so far', flush=True)\n"
                                         "time.sleep(60)",
                                         T_TIMEOUT_MS, &cb),
                     0);
    while (!c.done)
        uv_run(&fx->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    assert_string_equal(p.seen, "so far\n");
    assert_int_equal(p.cancel_rc, 0);
    assert_true(c.cancelled);
    assert_true(c.interrupted); /* KeyboardInterrupt: the session lives on */
    assert_false(c.session_ended);
    cell_free(&c);
    assert_int_equal(exec_ws_session_cells(s), 2);

    exec_ws_session_claim(s, &c);
    cb.user = &c;
    assert_int_equal(exec_ws_session_run(s, "import os\nos._exit(3)", T_TIMEOUT_MS, &cb), 0);
    while (!c.done)
        uv_run(&fx->loop, UV_RUN_ONCE);
    assert_true(c.session_ended);
    cell_free(&c);
    /* Claimed, the ended session is still found (its request holds it) ... */
    assert_ptr_equal(exec_ws_session_find(ws, handle, owner, msg, sizeof msg), s);
    assert_non_null(strstr(exec_ws_session_end_reason(s), "exited with status 3"));
    /* ... and released, it goes, saying why. */
    exec_ws_session_release(s, &c, false);
    assert_null(exec_ws_session_find(ws, handle, owner, msg, sizeof msg));
    assert_non_null(strstr(msg, "has ended ("));
    assert_non_null(strstr(msg, "exited with status 3"));
    exec_workspace_free(ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_state_persists_across_cells, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_output_is_exactly_the_cells, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_sessions_and_runs_do_not_see_each_other, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_timeout_interrupts_and_the_session_survives, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_a_cell_ignoring_the_interrupt_is_killed, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_crash_and_oom_end_the_session, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_files_come_back_when_new_or_changed, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_files_past_a_bound_are_listed_not_dropped, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_a_crowded_output_folder_reports_only_what_changed,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_links_fifos_and_folders_are_not_followed, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_the_bridge_lasts_the_session, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_output_so_far_of_a_running_cell, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_a_one_shot_run_hands_files_back, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_a_session_imports_from_its_folders, fx_setup,
                                        fx_teardown),
        cmocka_unit_test(test_a_plot_comes_back_as_png),
        cmocka_unit_test(test_pool_free_ends_live_sessions),
        cmocka_unit_test_setup_teardown(test_run_output_so_far, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_a_workspace_session_keeps_state_and_says_why_it_ended,
                                        fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
