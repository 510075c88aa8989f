/* environment: what goes on around a build, through the public header only: runs waiting for
 * it (released at their deadline or when it ends, cancelled, let go by env_free), the record of
 * a failure and its removal once a start succeeds, the text for tool descriptions and results,
 * `--check`'s report, the helpers' scan output turned into tool entries, and the pruning of old
 * cache folders. The builds use stand-in interpreters (shell scripts) that answer the version
 * question and fail or stall as pip, so no pip and no network are needed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "environment.h"
#include "../test_util.h"
#include "env_test.h"

typedef struct fixture {
    char *base, *cache;
    uv_loop_t loop;
} fixture_t;

/* A stand-in interpreter named name in the fixture's folder (caller frees the path). */
static char *fake_python(fixture_t *fx, const char *name, const char *script)
{
    return fake_python_in(fx->base, name, script);
}

static int setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    env_fixture_open("ptc-env-upkeep", &fx->base, &fx->cache, &fx->loop);
    assert_int_equal(mkdir(fx->cache, 0755), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    env_fixture_close(fx->base, fx->cache, &fx->loop);
    free(fx);
    return 0;
}

typedef struct seen {
    env_t *env;
    int done;            /* on_done calls */
    int calls;           /* waiter callbacks */
    env_state_t at_call; /* the state the last waiter saw */
    int done_at_call;    /* on_done calls before it */
    uint64_t at_ms;      /* uv_now at the last waiter call */
} seen_t;

static void on_done(env_state_t state, void *user)
{
    (void)state;
    ((seen_t *)user)->done++;
}

static void start(fixture_t *fx, const char *python, const char *const *specs, size_t n,
                  seen_t *seen, env_t **out)
{
    env_options_t o;
    env_options_init(&o);
    o.python = python;
    o.cache_dir = fx->cache;
    o.specs = specs;
    o.n_specs = n;
    o.on_done = on_done;
    o.done_user = seen;
    char msg[ENV_MESSAGE_MAX];
    assert_int_equal(env_start(&fx->loop, &o, out, msg, sizeof msg), 0);
    seen->env = *out;
}

static void stop(fixture_t *fx, env_t *env)
{
    env_free(env);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
}

/* ---- waiting for the build ------------------------------------------------------------------- */
typedef struct waiter_seen {
    seen_t *s;
    int calls;
    env_state_t state;
    int done_before;
} waiter_seen_t;

static void waited(void *data)
{
    waiter_seen_t *w = data;
    env_status_t st;
    env_status(w->s->env, &st);
    w->calls++;
    w->state = st.state;
    w->done_before = w->s->done;
}

static void waiters_go_at_their_deadline_or_when_the_build_ends(void **state)
{
    fixture_t *fx = *state;
    char *py = fake_python(fx, "slow-failure", FAKE_SLOW_FAILURE);
    const char *specs[] = {FAKE_PKG};
    seen_t s = {0};
    env_t *env;
    start(fx, py, specs, 1, &s, &env);
    waiter_seen_t soon = {.s = &s}, late = {.s = &s}, cancelled = {.s = &s};
    uint64_t t0 = uv_now(&fx->loop);
    assert_non_null(env_wait(env, 50, waited, &soon));
    assert_non_null(env_wait(env, 60000, waited, &late));
    env_waiter_t *c = env_wait(env, 60000, waited, &cancelled);
    assert_non_null(c);
    env_wait_cancel(c);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    /* the short one went at its deadline, while the build still ran */
    assert_int_equal(soon.calls, 1);
    assert_int_equal(soon.state, ENV_STATE_BUILDING);
    assert_int_equal(soon.done_before, 0);
    /* the long one went when the build failed, after on_done, long before its deadline */
    assert_int_equal(late.calls, 1);
    assert_int_equal(late.state, ENV_STATE_FAILED);
    assert_int_equal(late.done_before, 1);
    assert_true(uv_now(&fx->loop) - t0 < 30000);
    assert_int_equal(cancelled.calls, 0);
    /* a waiter added once the build is over goes at the next check */
    waiter_seen_t after = {.s = &s};
    assert_non_null(env_wait(env, 60000, waited, &after));
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(after.calls, 1);
    assert_int_equal(after.state, ENV_STATE_FAILED);
    stop(fx, env);
    free(py);
}

static void env_free_lets_waiters_go_without_calling_them(void **state)
{
    fixture_t *fx = *state;
    char *py = fake_python(fx, "stalls", FAKE_STALLS);
    const char *specs[] = {FAKE_PKG};
    seen_t s = {0};
    env_t *env;
    start(fx, py, specs, 1, &s, &env);
    waiter_seen_t w = {.s = &s};
    env_waiter_t *h = env_wait(env, 60000, waited, &w);
    assert_non_null(h);
    uv_run(&fx->loop, UV_RUN_NOWAIT);
    env_free(env);
    assert_null(env_wait(env, 10, waited, &w)); /* closing: no new waiter */
    uv_run(&fx->loop, UV_RUN_DEFAULT);          /* the stalled interpreter is killed */
    assert_int_equal(w.calls, 0);
    assert_int_equal(s.done, 0);
    env_wait_cancel(h); /* the owner still frees it (ASan checks that this is no leak) */
    free(py);
}

/* ---- the failure record ---------------------------------------------------------------------- */
/* A published folder for the fake interpreter's key of specs, as a successful pip would leave. */
static void publish(fixture_t *fx, const char *py, const char *const *specs, size_t n,
                    const char *installed, char *hex)
{
    env_key_t key;
    char msg[ENV_MESSAGE_MAX];
    assert_int_equal(env_key_compute(py, specs, n, NULL, &key, msg, sizeof msg), 0);
    char dir[TU_PATH_MAX], file[TU_PATH_MAX + 64], text[1024];
    snprintf(dir, sizeof dir, "%s/env-%s", fx->cache, key.hex);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(file, sizeof file, "%s/%s", dir, ENV_SITE_DIR);
    assert_int_equal(mkdir(file, 0755), 0);
    snprintf(file, sizeof file, "%s/%s", dir, ENV_MARKER_FILE);
    snprintf(text, sizeof text, "{\"key\": \"%s\", \"installed\": \"%s\"}", key.hex, installed);
    write_text(file, text);
    snprintf(hex, ENV_KEY_HEX_LEN + 1, "%s", key.hex);
    env_key_free(&key);
}

static char *report_of(const env_options_t *o, int *status)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    *status = env_report(f, o);
    assert_int_equal(fclose(f), 0);
    return text;
}

static void a_failure_is_recorded_for_check_and_forgotten_once_ready(void **state)
{
    fixture_t *fx = *state;
    char *py = fake_python(fx, "pip-fails", FAKE_PIP_FAILS);
    const char *specs[] = {"PTC_Fake.pkg>=1"};
    seen_t s = {0};
    env_t *env;
    start(fx, py, specs, 1, &s, &env);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    env_status_t st;
    env_status(env, &st);
    assert_int_equal(st.state, ENV_STATE_FAILED);
    assert_int_equal(strlen(st.key_hex), ENV_KEY_HEX_LEN);
    char hex[ENV_KEY_HEX_LEN + 1];
    snprintf(hex, sizeof hex, "%s", st.key_hex);
    char line[ENV_MESSAGE_MAX + 128];
    assert_int_equal(env_last_failure(fx->cache, hex, line, sizeof line), 0);
    assert_int_equal(env_record_outcome(env), 0);
    assert_int_equal(env_last_failure(fx->cache, hex, line, sizeof line), 1);
    assert_non_null(strstr(line, "installing " FAKE_PKG " failed: "));
    assert_non_null(strstr(line, "No matching distribution found for " FAKE_PKG));
    assert_null(strchr(line, '\n'));

    /* --check says the last start failed, and why */
    env_options_t o;
    env_options_init(&o);
    o.python = py;
    o.cache_dir = fx->cache;
    o.specs = specs;
    o.n_specs = 1;
    int status;
    char *r = report_of(&o, &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(r, "packages: ptc-fake-pkg>=1\n"));
    assert_non_null(strstr(r, "  interpreter: "));
    assert_non_null(strstr(r, "(3.99.0 (stand-in))\n"));
    assert_non_null(strstr(r, "state: not built yet; the last start failed installing " FAKE_PKG));
    free(r);
    stop(fx, env);

    /* once the folder is there, a start is READY and its record of the failure goes */
    char hex2[ENV_KEY_HEX_LEN + 1];
    publish(fx, py, specs, 1, "ptc-fake-pkg 2.0", hex2);
    assert_string_equal(hex, hex2);
    start(fx, py, specs, 1, &s, &env);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    env_status(env, &st);
    assert_int_equal(st.state, ENV_STATE_READY);
    assert_int_equal(env_record_outcome(env), 0);
    assert_int_equal(env_last_failure(fx->cache, hex, line, sizeof line), 0);
    r = report_of(&o, &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(r, "  state: ready ("));
    assert_non_null(strstr(r, "  installed: ptc-fake-pkg 2.0\n"));
    free(r);
    stop(fx, env);

    /* nothing declared; offline from a wheelhouse */
    o.n_specs = 0;
    r = report_of(&o, &status);
    assert_int_equal(status, 0);
    assert_string_equal(r, "packages: none declared (the standard library only)\n");
    free(r);
    const char *other[] = {"another-pkg"};
    o.specs = other;
    o.n_specs = 1;
    o.pip_find_links = fx->base;
    r = report_of(&o, &status);
    assert_non_null(strstr(r, "state: not built yet (the server installs them at start, offline "
                              "from --pip-find-links)"));
    free(r);
    free(py);
}

/* ---- the texts ------------------------------------------------------------------------------- */
static void texts_say_what_can_be_imported_in_every_state(void **state)
{
    fixture_t *fx = *state;
    char m1[] = "textutils", m2[] = "mathkit", s1[] = "/src/textutils.py", s2[] = "/src/mathkit";
    char *modules[] = {m1, m2}, *sources[] = {s1, s2};
    env_custom_t custom = {.n_modules = 2, .modules = modules, .sources = sources};
    char *t = env_describe(NULL, NULL);
    assert_string_equal(t, "the standard library is available");
    free(t);
    t = env_describe(NULL, &custom);
    assert_string_equal(t, "the standard library is available; your own helper modules are "
                           "importable too: `import textutils`, `import mathkit` (plain Python "
                           "calls, no bridge; search_tools lists their functions)");
    free(t);
    assert_null(env_result_note(NULL, false));

    /* BUILDING */
    char *stalls = fake_python(fx, "stalls", FAKE_STALLS);
    const char *specs[] = {"PTC_Fake.pkg>=1", "other"};
    seen_t s = {0};
    env_t *env;
    start(fx, stalls, specs, 2, &s, &env);
    snprintf(custom.dir, sizeof custom.dir, "/cache/custom-x");
    const char *dirs[3];
    assert_int_equal(env_path_dirs(env, &custom, dirs, 3), 1); /* not the site folder yet */
    assert_string_equal(dirs[0], "/cache/custom-x");
    assert_int_equal(env_path_dirs(NULL, NULL, dirs, 3), 0);
    t = env_describe(env, NULL);
    assert_string_equal(t, "the standard library is available, and these packages are being "
                           "installed (runs wait for them briefly): PTC_Fake.pkg>=1, other");
    free(t);
    t = env_result_note(env, false);
    assert_non_null(t);
    assert_non_null(strstr(t, "The environment is still being built ("));
    assert_non_null(strstr(t, "s so far): pip is installing PTC_Fake.pkg>=1, other. Try again"));
    free(t);
    stop(fx, env);

    /* FAILED */
    char *fails = fake_python(fx, "pip-fails", FAKE_PIP_FAILS);
    start(fx, fails, specs, 2, &s, &env);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    t = env_describe(env, &custom);
    assert_non_null(strstr(t, "standard library only (installing " FAKE_PKG " failed); your own"));
    free(t);
    t = env_result_note(env, false);
    assert_non_null(strstr(t, "The declared packages are not installed: installing " FAKE_PKG
                              " failed. pip failed installing " FAKE_PKG));
    assert_non_null(strstr(t, " Runs are refused until they are installed"));
    assert_non_null(strstr(t, "\npip's last lines:\nCollecting " FAKE_PKG "\nERROR: No matching"));
    free(t);
    t = env_result_note(env, true);
    assert_non_null(strstr(t, " This run went without them (--packages-optional)."));
    free(t);
    stop(fx, env);

    /* READY: the requested ones with the versions installed, matched as PEP 503 names */
    char hex[ENV_KEY_HEX_LEN + 1];
    publish(fx, fails, specs, 2, "other 0.1, ptc-fake-pkg 2.0, dependency 3", hex);
    start(fx, fails, specs, 2, &s, &env);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    t = env_describe(env, NULL);
    assert_string_equal(t, "the standard library and these packages are installed: "
                           "ptc-fake-pkg 2.0, other 0.1");
    free(t);
    assert_int_equal(env_path_dirs(env, &custom, dirs, 3), 2);
    assert_non_null(strstr(dirs[0], "/env-"));
    assert_string_equal(dirs[0] + strlen(dirs[0]) - strlen(ENV_SITE_DIR) - 1, "/" ENV_SITE_DIR);
    assert_string_equal(dirs[1], "/cache/custom-x");
    assert_int_equal(env_path_dirs(env, &custom, dirs, 1), 1);
    assert_null(env_result_note(env, false));
    stop(fx, env);
    free(stalls);
    free(fails);
}

/* ---- the scan's output ----------------------------------------------------------------------- */
static void scan_output_becomes_tool_entries_with_host_paths(void **state)
{
    (void)state;
    char m1[] = "textutils", m2[] = "mathkit";
    char s1[] = "/home/u/textutils.py", s2[] = "/home/u/src/mathkit";
    char *modules[] = {m1, m2}, *sources[] = {s1, s2};
    env_custom_t c = {.n_modules = 2, .modules = modules, .sources = sources};
    const char *out =
        "{\"tools\": ["
        "{\"module\": \"textutils\", \"function\": \"shout\", \"signature\": \"shout(s: str) -> "
        "str\", \"docstring\": \"Upper-cases s.\", \"inputSchema\": {\"type\": \"object\", "
        "\"properties\": {\"s\": {\"type\": \"string\"}}, \"required\": [\"s\"]}},"
        "{\"module\": \"mathkit.core\", \"function\": \"twice\", \"inputSchema\": {\"type\": "
        "\"object\"}},"
        "{\"module\": \"textutils\", \"function\": \"no_schema\"},"
        "{\"function\": \"no_module\", \"inputSchema\": {}}"
        "], \"errors\": ["
        "{\"module\": \"mathkit.broken\", \"file\": \"/opt/ptc/lib/mathkit/broken.py\", \"line\": "
        "3, \"error\": \"invalid syntax\"},"
        "{\"module\": \"textutils\", \"file\": \"/opt/ptc/lib/textutils.py\"},"
        "{\"error\": \"odd\"}]}";
    env_scan_t scan;
    assert_int_equal(env_scan_parse(&c, "/opt/ptc/lib", out, strlen(out), &scan), 0);
    assert_int_equal(scan.n_fns, 2);
    assert_string_equal(scan.fns[0].name, "textutils.shout");
    assert_string_equal(scan.fns[0].signature, "shout(s: str) -> str");
    assert_string_equal(scan.fns[0].description,
                        "shout(s: str) -> str\nUpper-cases s.\nRuns inside the sandbox: import "
                        "textutils; a plain Python call, no bridge.");
    assert_string_equal(scan.fns[0].input_schema,
                        "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\"}},"
                        "\"required\":[\"s\"]}");
    assert_string_equal(scan.fns[1].name, "mathkit.core.twice");
    assert_null(scan.fns[1].signature);
    assert_string_equal(scan.fns[1].description,
                        "twice\nRuns inside the sandbox: import mathkit.core; a plain Python "
                        "call, no bridge.");
    assert_int_equal(scan.n_errors, 3);
    assert_string_equal(scan.errors[0].file, "/home/u/src/mathkit/broken.py");
    assert_int_equal(scan.errors[0].line, 3);
    assert_string_equal(scan.errors[0].error, "invalid syntax");
    assert_string_equal(scan.errors[1].file, "/home/u/textutils.py");
    assert_int_equal(scan.errors[1].line, 0);
    assert_string_equal(scan.errors[1].error, "not readable");
    assert_string_equal(scan.errors[2].file, "?");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    env_custom_report(f, &c);
    env_scan_report(f, &scan, "custom__");
    assert_int_equal(fclose(f), 0);
    assert_non_null(strstr(text, "  import mathkit  (from /home/u/src/mathkit)\n"));
    assert_non_null(strstr(text, "  ERROR /home/u/src/mathkit/broken.py:3: invalid syntax (its "
                                 "functions are not listed)\n"));
    assert_non_null(strstr(text, "\n  custom__textutils.shout: shout(s: str) -> str\n"
                                 "  custom__mathkit.core.twice\n"));
    free(text);
    env_scan_free(&scan);
    assert_null(scan.fns);
    env_scan_free(&scan); /* twice is harmless */

    const char *bad[] = {"", "not json", "{\"tools\": []}", "{\"tools\": {}, \"errors\": []}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(env_scan_parse(&c, "/opt/ptc/lib", bad[i], strlen(bad[i]), &scan),
                         ENV_EINVAL);
    const char *empty = "{\"tools\": [], \"errors\": []}";
    assert_int_equal(env_scan_parse(&c, "/opt/ptc/lib", empty, strlen(empty), &scan), 0);
    assert_int_equal(scan.n_fns + scan.n_errors, 0);
    env_scan_free(&scan);
    assert_int_equal(env_scan_parse(&c, "/opt/ptc/lib", empty, ENV_SCAN_OUTPUT_MAX + 1u, &scan),
                     ENV_ETOOBIG);
}

/* ---- pruning --------------------------------------------------------------------------------- */
static void make_entry(const char *cache, const char *name, bool dir, time_t mtime)
{
    char *p = path_join(cache, name);
    if (dir) {
        assert_int_equal(mkdir(p, 0755), 0);
        char *inner = path_join(p, "file.txt");
        write_text(inner, "x");
        free(inner);
    } else {
        write_text(p, "x");
    }
    struct timespec ts[2] = {{.tv_sec = mtime}, {.tv_sec = mtime}};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
    free(p);
}

static bool exists(const char *cache, const char *name)
{
    char *p = path_join(cache, name);
    struct stat st;
    bool ok = lstat(p, &st) == 0;
    free(p);
    return ok;
}

static void on_pruned(long removed, void *user)
{
    *(long *)user = removed;
}

static void pruning_removes_old_folders_but_the_ones_in_use(void **state)
{
    fixture_t *fx = *state;
    time_t now = time(NULL);
    time_t old = now - ENV_PRUNE_AGE_S - 3600, fresh = now - 3600;
    time_t old_tmp = now - ENV_PRUNE_TMP_AGE_S - 3600;
    make_entry(fx->cache, "env-aaa", true, old);
    make_entry(fx->cache, "env-kept", true, old); /* in use */
    make_entry(fx->cache, "custom-bbb", true, old);
    make_entry(fx->cache, "custom-mine", true, old); /* in use */
    make_entry(fx->cache, "custom-ccc", true, fresh);
    make_entry(fx->cache, "env-ddd.failed", false, old);
    make_entry(fx->cache, ".env-eee.tmp-1", true, old_tmp);
    make_entry(fx->cache, ".custom-fff.tmp-2", true, fresh);
    make_entry(fx->cache, "pybundle-ggg", true, old); /* not this module's */
    make_entry(fx->cache, "env-file", false, old);    /* a stray file: not a folder or record */
    /* a symbolic link inside an old folder is removed, never followed */
    char *outside = path_join(fx->base, "outside");
    assert_int_equal(mkdir(outside, 0755), 0);
    char *keep_me = path_join(outside, "keep-me");
    write_text(keep_me, "x");
    char *link = path_join(fx->cache, "env-aaa/link");
    assert_int_equal(symlink(outside, link), 0);
    struct timespec ts[2] = {{.tv_sec = old}, {.tv_sec = old}}; /* the link made it new again */
    char *aaa = path_join(fx->cache, "env-aaa");
    assert_int_equal(utimensat(AT_FDCWD, aaa, ts, 0), 0);
    free(aaa);

    assert_int_equal(env_prune_dir(fx->cache, "kept", "mine", now), 4);
    assert_false(exists(fx->cache, "env-aaa"));
    assert_false(exists(fx->cache, "custom-bbb"));
    assert_false(exists(fx->cache, "env-ddd.failed"));
    assert_false(exists(fx->cache, ".env-eee.tmp-1"));
    assert_true(exists(fx->cache, "env-kept"));
    assert_true(exists(fx->cache, "custom-mine"));
    assert_true(exists(fx->cache, "custom-ccc"));
    assert_true(exists(fx->cache, ".custom-fff.tmp-2"));
    assert_true(exists(fx->cache, "pybundle-ggg"));
    assert_true(exists(fx->cache, "env-file"));
    struct stat st;
    assert_int_equal(stat(keep_me, &st), 0);

    /* on the thread pool: nothing kept this time, and the result comes back on the loop */
    long removed = -1;
    env_prune_t *p;
    assert_int_equal(env_prune_start(&fx->loop, fx->cache, NULL, NULL, on_pruned, &removed, &p), 0);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(removed, 2);
    assert_false(exists(fx->cache, "env-kept"));
    assert_false(exists(fx->cache, "custom-mine"));

    /* cancelled: the removal happens, the callback does not */
    make_entry(fx->cache, "env-hhh", true, old);
    removed = -1;
    assert_int_equal(env_prune_start(&fx->loop, fx->cache, NULL, NULL, on_pruned, &removed, &p), 0);
    env_prune_cancel(p);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(removed, -1);
    assert_false(exists(fx->cache, "env-hhh"));
    assert_int_equal(env_prune_start(&fx->loop, NULL, NULL, NULL, on_pruned, &removed, &p),
                     ENV_EINVAL);
    assert_int_equal(env_prune_dir("/nonexistent-ptc-cache", NULL, NULL, now), 0);
    free(link);
    free(keep_me);
    free(outside);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(waiters_go_at_their_deadline_or_when_the_build_ends, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(env_free_lets_waiters_go_without_calling_them, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_failure_is_recorded_for_check_and_forgotten_once_ready,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(texts_say_what_can_be_imported_in_every_state, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(scan_output_becomes_tool_entries_with_host_paths, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(pruning_removes_old_folders_but_the_ones_in_use, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
