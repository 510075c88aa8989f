/* environment: the environment of one server process (env_host_t), through the public header:
 * options it refuses and the line saying why, a failed build's lines and what runs and results
 * then see (optional or not), a build still running, the helpers' scan as a sandboxed run whose
 * functions reach the host's catalog callback, and `--check`'s report. Builds use stand-in
 * interpreters (env_test.h); the scan uses the real launcher and interpreter (label "sandbox"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "environment.h"
#include "executor.h"
#include "../test_util.h"
#include "env_test.h"

typedef struct fixture {
    char *base, *cache;
    uv_loop_t loop;
    char log[16384]; /* every line the host logged, each ending in "\n" */
    int errors;      /* of them at ENV_LOG_ERROR */
    int changes;     /* env_host_on_change calls */
} fixture_t;

static int setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    env_fixture_open("ptc-env-host", &fx->base, &fx->cache, &fx->loop);
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

static void on_log(env_log_level_t level, const char *line, void *user)
{
    fixture_t *fx = user;
    size_t used = strlen(fx->log);
    snprintf(fx->log + used, sizeof fx->log - used, "%s\n", line);
    if (level == ENV_LOG_ERROR) fx->errors++;
}

static void on_change(void *data)
{
    ((fixture_t *)data)->changes++;
}

/* Options with the fixture's log and cache, python (may be NULL) and specs. */
static void options(fixture_t *fx, const char *python, const char *const *specs, size_t n,
                    env_host_options_t *o)
{
    memset(o, 0, sizeof *o);
    env_options_init(&o->build);
    if (python != NULL) o->build.python = python;
    o->build.cache_dir = fx->cache;
    o->build.specs = specs;
    o->build.n_specs = n;
    o->log = on_log;
    o->log_user = fx;
}

/* Helpers: textutils.py with one public function; paths[0] gets its path (caller frees). */
static void write_helper(fixture_t *fx, char **path)
{
    char *dir = path_join(fx->base, "helpers");
    assert_int_equal(mkdir(dir, 0755), 0);
    *path = path_join(dir, "textutils.py");
    write_text(*path,
               "def shout(s: str) -> str:\n    \"\"\"Upper-case s.\"\"\"\n    return s.upper()\n");
    free(dir);
}

static void nothing_declared_lets_runs_go_and_adds_nothing(void **state)
{
    fixture_t *fx = *state;
    env_host_options_t o;
    options(fx, NULL, NULL, 0, &o);
    o.build.cache_dir = NULL; /* nothing declared: no cache folder needed */
    env_host_t *h;
    assert_int_equal(env_host_new(&fx->loop, &o, &h), 0);
    uint64_t building = 7;
    assert_int_equal(env_host_for_run(h, &building), ENV_RUN_NOW);
    assert_int_equal(building, 0);
    assert_null(env_host_result_json(h));
    assert_null(env_host_result_note(h));
    const char *dirs[4];
    assert_int_equal(env_host_path_dirs(h, dirs, 4), 0);
    assert_null(env_host_wait(h, 100, on_change, fx));
    char *d = env_host_describe(h);
    assert_non_null(d);
    assert_non_null(strstr(d, "standard library"));
    free(d);
    /* no helpers: no scan, and nothing to refuse */
    assert_int_equal(env_host_scan_start(h, NULL, NULL, NULL), ENV_EINVAL);
    /* a NULL host is "nothing declared" too */
    assert_int_equal(env_host_for_run(NULL, NULL), ENV_RUN_NOW);
    assert_null(env_host_result_json(NULL));
    assert_true(env_is_custom_server(ENV_CUSTOM_SERVER));
    assert_false(env_is_custom_server("customs"));
    assert_false(env_is_custom_server(NULL));
    env_host_free(h);
    env_host_free(NULL);
    assert_int_equal(fx->errors, 0);
}

static void options_it_cannot_use_are_refused_with_a_line_saying_which(void **state)
{
    fixture_t *fx = *state;
    const char *specs[] = {FAKE_PKG};
    env_host_options_t o;
    env_host_t *h = (env_host_t *)&h;

    options(fx, NULL, specs, 1, &o);
    o.build.install_timeout_s = ENV_MAX_INSTALL_TIMEOUT_S + 1;
    assert_int_equal(env_host_new(&fx->loop, &o, &h), ENV_EINVAL);
    assert_null(h);
    assert_non_null(strstr(fx->log, "--package-install-timeout: at most 86400 seconds"));

    options(fx, NULL, specs, 1, &o);
    o.build.cache_dir = NULL;
    assert_int_equal(env_host_new(&fx->loop, &o, &h), ENV_EINVAL);
    assert_non_null(strstr(fx->log, "no cache folder"));

    options(fx, NULL, NULL, 0, &o);
    const char *paths[] = {"/nonexistent-ptc-helper.py"};
    o.custom_paths = paths;
    o.n_custom = 1;
    assert_int_equal(env_host_new(&fx->loop, &o, &h), ENV_EINVAL);
    assert_null(h);
    assert_non_null(strstr(fx->log, "--custom-tools: "));
    assert_non_null(strstr(fx->log, "/nonexistent-ptc-helper.py"));

    options(fx, NULL, (const char *const[]){"-e ."}, 1, &o);
    assert_int_equal(env_host_new(&fx->loop, &o, &h), ENV_EINVAL);
    assert_non_null(strstr(fx->log, "--packages/--requirements: "));
    assert_int_equal(fx->errors, 4);
}

/* A failed build: its lines, then what runs and results see, with and without optional. */
static void a_failed_build_is_logged_and_refuses_runs_unless_optional(void **state)
{
    fixture_t *fx = *state;
    char *py = fake_python_in(fx->base, "pip-fails", FAKE_PIP_FAILS);
    const char *specs[] = {FAKE_PKG};
    env_host_options_t o;
    options(fx, py, specs, 1, &o);
    env_host_t *h;
    assert_int_equal(env_host_new(&fx->loop, &o, &h), 0);
    env_host_on_change(h, on_change, fx);
    assert_int_equal(env_host_for_run(h, NULL), ENV_RUN_WAIT);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(fx->changes, 1);
    assert_non_null(strstr(fx->log, "packages: installing " FAKE_PKG " failed: "));
    assert_non_null(strstr(fx->log, "; pip's last lines:\n"));
    assert_non_null(strstr(fx->log, "execute_code refuses runs until a restart installs them"));
    /* pip's own lines came through, marked as the packages' */
    assert_non_null(strstr(fx->log, "packages: "));
    assert_int_equal(env_host_for_run(h, NULL), ENV_RUN_REFUSE);
    cJSON *j = env_host_result_json(h);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "state")->valuestring, "failed");
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "packages"), 0)->valuestring,
                        FAKE_PKG);
    assert_string_equal(cJSON_GetObjectItem(j, "failed_package")->valuestring, FAKE_PKG);
    assert_non_null(strstr(cJSON_GetObjectItem(j, "pip_tail")->valuestring, "No matching"));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "optional")));
    cJSON_Delete(j);
    char *note = env_host_result_note(h);
    assert_non_null(note);
    assert_non_null(strstr(note, FAKE_PKG));
    free(note);
    env_host_free(h);
    uv_run(&fx->loop, UV_RUN_DEFAULT);

    /* optional: the same failure lets runs go on, and says so */
    fx->log[0] = '\0';
    o.optional = true;
    assert_int_equal(env_host_new(&fx->loop, &o, &h), 0);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_non_null(strstr(fx->log, "runs go on without the packages (--packages-optional)"));
    assert_int_equal(env_host_for_run(h, NULL), ENV_RUN_NOW);
    j = env_host_result_json(h);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "optional")));
    cJSON_Delete(j);
    env_host_free(h);
    free(py);
}

static void waited(void *data)
{
    (*(int *)data)++;
}

/* While the build runs: runs wait, results say "building", a waiter is let go by the free. */
static void a_running_build_makes_runs_wait(void **state)
{
    fixture_t *fx = *state;
    char *py = fake_python_in(fx->base, "stalls", FAKE_STALLS);
    const char *specs[] = {FAKE_PKG};
    env_host_options_t o;
    options(fx, py, specs, 1, &o);
    env_host_t *h;
    assert_int_equal(env_host_new(&fx->loop, &o, &h), 0);
    uint64_t building = 1;
    assert_int_equal(env_host_for_run(h, &building), ENV_RUN_WAIT);
    cJSON *j = env_host_result_json(h);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "state")->valuestring, "building");
    assert_null(cJSON_GetObjectItem(j, "failed_package"));
    cJSON_Delete(j);
    int calls = 0;
    env_waiter_t *w = env_host_wait(h, 60000, waited, &calls);
    assert_non_null(w);
    env_host_free(h);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(calls, 0);
    env_wait_cancel(w); /* the owner's cancel stays safe after the free */
    assert_int_equal(fx->changes, 0);
    free(py);
}

typedef struct published {
    int calls;
    char names[512];
    int refuse; /* answer < 0 with a sentence */
} published_t;

static int publish(const cJSON *tools, char *msg, size_t len, void *user)
{
    published_t *p = user;
    p->calls++;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *schema = cJSON_GetObjectItem(t, "inputSchema");
        assert_true(cJSON_IsObject(schema));
        assert_non_null(strstr(cJSON_GetObjectItem(t, "description")->valuestring, "Upper"));
        size_t used = strlen(p->names);
        snprintf(p->names + used, sizeof p->names - used, "%s;",
                 cJSON_GetObjectItem(t, "name")->valuestring);
    }
    if (p->refuse) snprintf(msg, len, "the catalog is full");
    return p->refuse ? -1 : 0;
}

static void the_helpers_scan_hands_their_functions_to_the_catalog(void **state)
{
    fixture_t *fx = *state;
    exec_pool_t *pool = env_test_pool(&fx->loop, "the helpers' scan");
    if (pool == NULL) return;
    char *path;
    write_helper(fx, &path);
    const char *paths[] = {path};
    env_host_options_t o;
    options(fx, NULL, NULL, 0, &o);
    o.custom_paths = paths;
    o.n_custom = 1;
    env_host_t *h;
    assert_int_equal(env_host_new(&fx->loop, &o, &h), 0);
    assert_non_null(strstr(fx->log, "custom helpers: 1 module(s) in "));
    const char *dirs[4];
    assert_int_equal(env_host_path_dirs(h, dirs, 4), 1);
    published_t p = {0};
    assert_int_equal(env_host_scan_start(h, pool, publish, &p), 0);
    assert_int_equal(env_host_scan_start(h, pool, publish, &p), ENV_EINVAL); /* one at a time */
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(p.calls, 1);
    assert_string_equal(p.names, "textutils.shout;");
    assert_non_null(strstr(fx->log, "custom helpers: 1 function(s) listed as server custom"));

    /* the catalog refusing them is logged with its sentence */
    published_t no = {.refuse = 1};
    assert_int_equal(env_host_scan_start(h, pool, publish, &no), 0);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(no.calls, 1);
    assert_non_null(strstr(fx->log, "custom helpers: not added to the registry: the catalog is "
                                    "full"));
    env_host_free(h);
    exec_pool_free(pool);
    free(path);
}

/* --check: the packages' report, then the helpers published and scanned. */
static void check_reports_the_packages_and_the_scanned_helpers(void **state)
{
    fixture_t *fx = *state;
    char *path;
    write_helper(fx, &path);
    const char *paths[] = {path};
    env_host_options_t o;
    options(fx, TEST_PYTHON, NULL, 0, &o);
    exec_options_t eo;
    exec_options_init(&eo);
    eo.python = TEST_PYTHON;
    eo.launcher = TEST_LAUNCHER;
    char *out = path_join(fx->base, "check.txt");
    FILE *f = fopen(out, "w+");
    assert_non_null(f);
    assert_int_equal(env_host_check(f, &o, &eo), 0);
    o.custom_paths = paths;
    o.n_custom = 1;
    int status = env_host_check(f, &o, &eo);
    rewind(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "custom helpers: none\n"));
    assert_non_null(strstr(text, "textutils"));
    if (strstr(text, "the scan could not start") == NULL &&
        strstr(text, "the scan did not finish: refused") == NULL) {
        assert_int_equal(status, 0);
        assert_non_null(strstr(text, "functions:\n"));
        assert_non_null(strstr(text, ENV_CUSTOM_SERVER "__textutils.shout: shout(s: str) -> str"));
    }
    /* a helper that cannot be published is an error of the report */
    const char *bad[] = {"/nonexistent-ptc-helper.py"};
    o.custom_paths = bad;
    f = fopen(out, "w+");
    assert_non_null(f);
    assert_int_equal(env_host_check(f, &o, &eo), 1);
    fclose(f);
    free(out);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(nothing_declared_lets_runs_go_and_adds_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(options_it_cannot_use_are_refused_with_a_line_saying_which,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_failed_build_is_logged_and_refuses_runs_unless_optional,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_running_build_makes_runs_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(the_helpers_scan_hands_their_functions_to_the_catalog,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(check_reports_the_packages_and_the_scanned_helpers, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
