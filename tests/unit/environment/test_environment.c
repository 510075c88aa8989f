/* environment: the key, builds through the interpreter's own pip (offline from a wheelhouse the
 * test makes, and once from the default index), reuse without pip, failures as states, the
 * install timeout, concurrent builders, the helpers' cache and the scanner, and one sandboxed
 * run importing from the folder mounted read-only. */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "environment.h"
#include "executor.h"
#include "../test_util.h"
#include "env_test.h"

#define PKG_NAME   "ptc-envtest-pkg"
#define PKG_MODULE "ptc_envtest_pkg"

/* ---- helpers ------------------------------------------------------------------------------ */
/* Runs a shell command, its output (at most len-1 bytes) into out (may be NULL). Exit code. */
static int run_capture(char *out, size_t len, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = 0;
    char buf[4096];
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, p)) > 0) {
        if (out && got + 1 < len) {
            size_t take = r < len - 1 - got ? r : len - 1 - got;
            memcpy(out + got, buf, take);
            got += take;
        }
    }
    if (out) out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool python_has_pip(void)
{
    return run_capture(NULL, 0, "%s -m pip --version >/dev/null 2>&1", TEST_PYTHON) == 0;
}

/* A wheelhouse with one tiny pure-Python package, made by `pip wheel` of sources written here
   (no network: the interpreter's own setuptools builds it). value goes into the module. */
static char *make_wheelhouse(const char *base, int value)
{
    char *src = path_join(base, "src");
    char *pkg = path_join(src, PKG_MODULE);
    char *wh = path_join(base, "wheelhouse");
    assert_int_equal(mkdir(src, 0755), 0);
    assert_int_equal(mkdir(pkg, 0755), 0);
    char *f = path_join(src, "pyproject.toml");
    write_text(f, "[build-system]\nrequires = [\"setuptools\"]\n"
                  "build-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"" PKG_NAME
                  "\"\nversion = \"1.0\"\n\n[tool.setuptools]\npackages = [\"" PKG_MODULE "\"]\n");
    free(f);
    f = path_join(pkg, "__init__.py");
    char text[128];
    snprintf(text, sizeof text, "VALUE = %d\n", value);
    write_text(f, text);
    free(f);
    char out[8192];
    int rc = run_capture(out, sizeof out,
                         "cd %s && PIP_CONFIG_FILE=/dev/null %s -m pip wheel -q --no-deps "
                         "--no-build-isolation --no-index -w %s %s 2>&1",
                         base, TEST_PYTHON, wh, src);
    if (rc != 0) fail_msg("pip wheel failed: %s", out);
    free(src);
    free(pkg);
    return wh;
}

typedef struct logbuf {
    int lines;
    int pip_lines;
} logbuf_t;

static void on_log(env_log_level_t level, const char *line, void *user)
{
    logbuf_t *lb = user;
    lb->lines++;
    if (level == ENV_LOG_PROGRESS) lb->pip_lines++;
    (void)line;
}

/* Starts a build and runs the loop until it is READY or FAILED; *out owns the env. */
static env_state_t build(uv_loop_t *loop, env_options_t *o, env_t **out)
{
    char msg[ENV_MESSAGE_MAX];
    assert_int_equal(env_start(loop, o, out, msg, sizeof msg), 0);
    env_status_t st;
    env_status(*out, &st);
    assert_int_equal(st.state, ENV_STATE_BUILDING);
    uv_run(loop, UV_RUN_DEFAULT);
    env_status(*out, &st);
    return st.state;
}

static void free_env(uv_loop_t *loop, env_t *env)
{
    env_free(env);
    uv_run(loop, UV_RUN_DEFAULT);
}

/* Entries of dir whose name starts with prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

/* Imports the package with the interpreter and site on sys.path; its printed VALUE. */
static int import_value(const char *site)
{
    char out[4096];
    int rc = run_capture(out, sizeof out,
                         "%s -I -c 'import sys; sys.path.insert(0, \"%s\"); import " PKG_MODULE
                         " as m; print(m.VALUE)' 2>&1",
                         TEST_PYTHON, site);
    if (rc != 0) fail_msg("import failed: %s", out);
    return (int)strtol(out, NULL, 10);
}

typedef struct fixture {
    char *base;
    char *cache;
    char *wheelhouse;
    uv_loop_t loop;
} fixture_t;

static int setup(void **state)
{
    if (!python_has_pip()) {
        fprintf(stderr, "SKIP: %s has no pip\n", TEST_PYTHON);
        exit(77);
    }
    fixture_t *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    env_fixture_open("ptc-env-test", &fx->base, &fx->cache, &fx->loop);
    fx->wheelhouse = make_wheelhouse(fx->base, 42);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    env_fixture_close(fx->base, fx->cache, &fx->loop);
    free(fx->wheelhouse);
    free(fx);
    return 0;
}

static void offline_options(fixture_t *fx, env_options_t *o, const char *const *specs, size_t n)
{
    env_options_init(o);
    o->python = TEST_PYTHON;
    o->cache_dir = fx->cache;
    o->specs = specs;
    o->n_specs = n;
    o->pip_find_links = fx->wheelhouse;
    o->pip_no_index = true;
    o->install_timeout_s = 120;
}

/* ---- the key ------------------------------------------------------------------------------ */
static void spec_normalise_follows_pep503(void **state)
{
    (void)state;
    char out[128];
    assert_int_equal(env_spec_normalise("  Foo__Bar.baz >= 1.0 , <2 ", out, sizeof out), 0);
    assert_string_equal(out, "foo-bar-baz>=1.0,<2");
    assert_int_equal(env_spec_normalise("NumPy[Extra] ; python_version < '3.12'", out, sizeof out),
                     0);
    assert_string_equal(out, "numpy[Extra]; python_version < '3.12'");
    assert_int_equal(env_spec_normalise("   ", out, sizeof out), ENV_EINVAL);
    assert_int_equal(env_spec_normalise("-e .", out, sizeof out), ENV_EINVAL);
    assert_int_equal(env_spec_normalise("averyveryverylongname", out, 8), ENV_ETOOBIG);
}

static void key_is_stable_and_changes_with_set_and_interpreter(void **state)
{
    (void)state;
    const char *a[] = {"pandas", "NumPy", "numpy ", "matplotlib"};
    const char *b[] = {"matplotlib", "numpy", "pandas"};
    const char *c[] = {"matplotlib", "numpy", "pandas", "scipy"};
    env_key_t ka, kb, kc, kv, kr, kr2;
    assert_int_equal(env_key_from_parts("3.11.2 (main)", a, 4, NULL, &ka, NULL, 0), 0);
    assert_int_equal(env_key_from_parts("3.11.2 (main)", b, 3, NULL, &kb, NULL, 0), 0);
    assert_string_equal(ka.hex, kb.hex); /* order, case and duplicates do not matter */
    assert_int_equal(ka.n_specs, 3);
    assert_string_equal(ka.specs[0], "matplotlib");
    assert_int_equal(strlen(ka.hex), ENV_KEY_HEX_LEN);
    assert_int_equal(env_key_from_parts("3.11.2 (main)", c, 4, NULL, &kc, NULL, 0), 0);
    assert_string_not_equal(ka.hex, kc.hex);
    assert_int_equal(env_key_from_parts("3.12.0 (main)", b, 3, NULL, &kv, NULL, 0), 0);
    assert_string_not_equal(ka.hex, kv.hex);
    env_key_free(&kv);
    assert_int_equal(env_key_from_parts("3.11.2 (main)", b, 3, "requests\n", &kr, NULL, 0), 0);
    assert_int_equal(env_key_from_parts("3.11.2 (main)", b, 3, "requests>=2\n", &kr2, NULL, 0), 0);
    assert_string_not_equal(ka.hex, kr.hex);
    assert_string_not_equal(kr.hex, kr2.hex);
    char msg[256];
    const char *bad[] = {"--index-url=x"};
    assert_int_equal(env_key_from_parts("3", bad, 1, NULL, &kv, msg, sizeof msg), ENV_EINVAL);
    assert_non_null(strstr(msg, "--index-url=x"));
    assert_int_equal(env_key_from_parts("3", NULL, 0, NULL, &kv, msg, sizeof msg), ENV_EINVAL);
    env_key_free(&ka);
    env_key_free(&kb);
    env_key_free(&kc);
    env_key_free(&kr);
    env_key_free(&kr2);
}

static void key_asks_the_interpreter(void **state)
{
    (void)state;
    const char *s[] = {"six"};
    env_key_t k1, k2;
    char msg[256];
    assert_int_equal(env_key_compute(TEST_PYTHON, s, 1, NULL, &k1, msg, sizeof msg), 0);
    assert_int_equal(env_key_compute(TEST_PYTHON, s, 1, NULL, &k2, msg, sizeof msg), 0);
    assert_string_equal(k1.hex, k2.hex);
    assert_non_null(strstr(k1.python_version, "cpython-")); /* the cache tag line */
    env_key_free(&k2);
    assert_int_equal(env_key_compute("/nonexistent/python3", s, 1, NULL, &k2, msg, sizeof msg),
                     ENV_EPYTHON);
    assert_non_null(strstr(msg, "/nonexistent/python3"));
    env_key_free(&k1);
}

/* ---- builds ------------------------------------------------------------------------------- */
static void offline_build_installs_and_second_start_reuses_it(void **state)
{
    fixture_t *fx = *state;
    const char *specs[] = {PKG_NAME};
    env_options_t o;
    offline_options(fx, &o, specs, 1);
    logbuf_t lb = {0};
    o.log = on_log;
    o.log_user = &lb;
    env_t *env;
    assert_int_equal(build(&fx->loop, &o, &env), ENV_STATE_READY);
    env_status_t st;
    env_status(env, &st);
    assert_true(st.pip_ran);
    assert_false(st.reused);
    assert_non_null(st.site_dir);
    assert_non_null(strstr(st.installed, PKG_NAME " 1.0"));
    assert_true(lb.pip_lines > 0);
    assert_int_equal(import_value(st.site_dir), 42);
    char *site = strdup(st.site_dir);
    char key[ENV_KEY_HEX_LEN + 1];
    snprintf(key, sizeof key, "%s", st.key_hex);
    assert_int_equal(count_prefixed(fx->cache, "env-"), 1);
    assert_int_equal(count_prefixed(fx->cache, ".env-"), 0);
    char *marker = path_join(site, "../" ENV_MARKER_FILE);
    struct stat m1;
    assert_int_equal(stat(marker, &m1), 0);
    free_env(&fx->loop, env);

    /* the same set again: no pip (the flag, no pip output, the marker untouched) */
    logbuf_t lb2 = {0};
    o.log_user = &lb2;
    assert_int_equal(build(&fx->loop, &o, &env), ENV_STATE_READY);
    env_status(env, &st);
    assert_false(st.pip_ran);
    assert_true(st.reused);
    assert_int_equal(lb2.pip_lines, 0);
    assert_string_equal(st.key_hex, key);
    assert_string_equal(st.site_dir, site);
    assert_non_null(strstr(st.installed, PKG_NAME " 1.0"));
    /* what --check sees, without building */
    env_key_t k;
    char msg[256], found[TU_PATH_MAX];
    assert_int_equal(env_key_compute(TEST_PYTHON, specs, 1, NULL, &k, msg, sizeof msg), 0);
    assert_string_equal(k.hex, key);
    char *installed = NULL;
    assert_int_equal(env_lookup(fx->cache, &k, found, sizeof found, &installed), 1);
    assert_string_equal(found, site);
    assert_non_null(strstr(installed, PKG_NAME " 1.0"));
    free(installed);
    char *empty = path_join(fx->base, "cache-empty");
    assert_int_equal(env_lookup(empty, &k, found, sizeof found, NULL), 0);
    free(empty);
    env_key_free(&k);
    struct stat m2;
    assert_int_equal(stat(marker, &m2), 0);
    assert_int_equal(m1.st_ino, m2.st_ino);
    assert_int_equal(m1.st_mtim.tv_nsec, m2.st_mtim.tv_nsec);
    free_env(&fx->loop, env);
    free(marker);
    free(site);
}

static void unknown_package_fails_with_pips_lines_and_publishes_nothing(void **state)
{
    fixture_t *fx = *state;
    const char *specs[] = {PKG_NAME, "ptc-no-such-package-here"};
    env_options_t o;
    offline_options(fx, &o, specs, 2);
    env_t *env;
    assert_int_equal(build(&fx->loop, &o, &env), ENV_STATE_FAILED);
    env_status_t st;
    env_status(env, &st);
    assert_non_null(st.failed_package);
    assert_string_equal(st.failed_package, "ptc-no-such-package-here");
    assert_non_null(strstr(st.tail, "No matching distribution"));
    assert_non_null(strstr(st.message, "ptc-no-such-package-here"));
    assert_null(st.site_dir);
    char path[TU_PATH_MAX];
    snprintf(path, sizeof path, "%s/env-%s", fx->cache, st.key_hex);
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);
    assert_int_equal(count_prefixed(fx->cache, ".env-"), 0);
    free_env(&fx->loop, env);
}

/* Processes whose command line mentions s (pip's --target holds the cache path). */
static int processes_mentioning(const char *s)
{
    DIR *d = opendir("/proc");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char p[300], buf[8192];
        snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(p, "r");
        if (f == NULL) continue;
        size_t r = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < r; i++)
            if (buf[i] == '\0') buf[i] = ' ';
        buf[r] = '\0';
        if (strstr(buf, s)) n++;
    }
    closedir(d);
    return n;
}

static void install_timeout_kills_pip(void **state)
{
    fixture_t *fx = *state;
    /* an index that accepts connections and never answers: pip waits on it */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(s, 16), 0);
    socklen_t sl = sizeof sa;
    assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/simple/", ntohs(sa.sin_port));
    const char *specs[] = {"ptc-slow-package"};
    env_options_t o;
    offline_options(fx, &o, specs, 1);
    o.pip_find_links = NULL;
    o.pip_no_index = false;
    o.pip_index_url = url;
    o.install_timeout_s = 2;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    env_t *env;
    assert_int_equal(build(&fx->loop, &o, &env), ENV_STATE_FAILED);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    env_status_t st;
    env_status(env, &st);
    assert_non_null(strstr(st.message, "longer than 2 s"));
    assert_true(secs < 10.0);
    assert_int_equal(processes_mentioning(fx->cache), 0);
    assert_int_equal(count_prefixed(fx->cache, ".env-"), 0);
    free_env(&fx->loop, env);
    close(s);
}

static void concurrent_builders_of_one_key_end_with_one_folder(void **state)
{
    fixture_t *fx = *state;
    const char *specs[] = {PKG_NAME, "ptc_envtest.pkg"}; /* one name, two spellings */
    env_options_t o;
    offline_options(fx, &o, specs, 2);
    char *cache = path_join(fx->base, "cache-concurrent");
    o.cache_dir = cache;
    env_t *a, *b;
    char msg[ENV_MESSAGE_MAX];
    assert_int_equal(env_start(&fx->loop, &o, &a, msg, sizeof msg), 0);
    assert_int_equal(env_start(&fx->loop, &o, &b, msg, sizeof msg), 0);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    env_status_t sa, sb;
    env_status(a, &sa);
    env_status(b, &sb);
    assert_int_equal(sa.state, ENV_STATE_READY);
    assert_int_equal(sb.state, ENV_STATE_READY);
    assert_true(sa.pip_ran && sb.pip_ran); /* both raced; one rename won */
    assert_true(sa.reused != sb.reused);
    assert_string_equal(sa.site_dir, sb.site_dir);
    assert_int_equal(count_prefixed(cache, "env-"), 1);
    assert_int_equal(count_prefixed(cache, ".env-"), 0);
    assert_int_equal(import_value(sa.site_dir), 42);
    free_env(&fx->loop, a);
    free_env(&fx->loop, b);
    free(cache);
}

static void free_during_pip_removes_its_folder(void **state)
{
    fixture_t *fx = *state;
    const char *specs[] = {PKG_NAME};
    env_options_t o;
    offline_options(fx, &o, specs, 1);
    char *cache = path_join(fx->base, "cache-free");
    o.cache_dir = cache;
    env_t *env;
    char msg[ENV_MESSAGE_MAX];
    assert_int_equal(env_start(&fx->loop, &o, &env, msg, sizeof msg), 0);
    /* until pip has started (the interpreter answered and the folder is made) */
    for (int i = 0; i < 200 && count_prefixed(cache, ".env-") == 0; i++)
        uv_run(&fx->loop, UV_RUN_ONCE);
    free_env(&fx->loop, env);
    assert_int_equal(count_prefixed(cache, ".env-"), 0);
    assert_int_equal(count_prefixed(cache, "env-"), 0);
    assert_int_equal(processes_mentioning(cache), 0);
    free(cache);
}

static void bad_options_are_refused_at_start(void **state)
{
    fixture_t *fx = *state;
    env_options_t o;
    const char *bad[] = {"ok", "-r other.txt"};
    offline_options(fx, &o, bad, 2);
    env_t *env = NULL;
    char msg[ENV_MESSAGE_MAX];
    assert_int_equal(env_start(&fx->loop, &o, &env, msg, sizeof msg), ENV_EINVAL);
    assert_non_null(strstr(msg, "-r other.txt"));
    offline_options(fx, &o, NULL, 0);
    o.requirements_file = "/nonexistent/requirements.txt";
    assert_int_equal(env_start(&fx->loop, &o, &env, msg, sizeof msg), ENV_EIO);
    assert_non_null(strstr(msg, "/nonexistent/requirements.txt"));
    /* an interpreter that does not run is a failed state, not an error */
    const char *specs[] = {PKG_NAME};
    offline_options(fx, &o, specs, 1);
    o.python = "/nonexistent/python3";
    assert_int_equal(build(&fx->loop, &o, &env), ENV_STATE_FAILED);
    env_status_t st;
    env_status(env, &st);
    assert_non_null(strstr(st.message, "/nonexistent/python3"));
    free_env(&fx->loop, env);
}

/* an interpreter without pip (a venv made --without-pip): a failure that says what to do */
static void interpreter_without_pip_is_a_clear_failure(void **state)
{
    fixture_t *fx = *state;
    char *venv = path_join(fx->base, "venv-without-pip");
    if (run_capture(NULL, 0, "%s -m venv --without-pip %s 2>/dev/null", TEST_PYTHON, venv) != 0) {
        fprintf(stderr, "SKIP: %s cannot make a venv\n", TEST_PYTHON);
        free(venv);
        skip();
        return; /* skip() jumps out; the return tells static analysis so */
    }
    char *python = path_join(venv, "bin/python3");
    const char *specs[] = {PKG_NAME};
    env_options_t o;
    offline_options(fx, &o, specs, 1);
    o.python = python;
    /* a cache of its own: the venv reports its base's version, so it shares the base's key
       and would reuse the folder the other tests published (right: the same ABI) */
    char *cache = path_join(fx->base, "cache-no-pip");
    o.cache_dir = cache;
    env_t *env;
    assert_int_equal(build(&fx->loop, &o, &env), ENV_STATE_FAILED);
    env_status_t st;
    env_status(env, &st);
    assert_non_null(strstr(st.message, "has no pip"));
    assert_non_null(strstr(st.tail, "No module named pip"));
    assert_int_equal(count_prefixed(cache, ".env-"), 0);
    assert_int_equal(count_prefixed(cache, "env-"), 0);
    free(cache);
    free_env(&fx->loop, env);
    free(python);
    free(venv);
}

static void requirements_file_is_installed(void **state)
{
    fixture_t *fx = *state;
    char *req = path_join(fx->base, "requirements.txt");
    write_text(req, "# the test package\n" PKG_NAME "==1.0\n");
    env_options_t o;
    offline_options(fx, &o, NULL, 0);
    o.requirements_file = req;
    env_t *env;
    assert_int_equal(build(&fx->loop, &o, &env), ENV_STATE_READY);
    env_status_t st;
    env_status(env, &st);
    assert_int_equal(import_value(st.site_dir), 42);
    free_env(&fx->loop, env);
    free(req);
}

typedef struct run_result {
    int done;
    exec_status_t status;
    char out[4096];
} run_result_t;

static void on_run_done(exec_run_t *run, const exec_result_t *res, void *user)
{
    (void)run;
    run_result_t *r = user;
    r->done++;
    r->status = res->status;
    size_t n = res->out.len < sizeof r->out - 1 ? res->out.len : sizeof r->out - 1;
    memcpy(r->out, res->out.data, n);
    r->out[n] = '\0';
    if (res->status != EXEC_STATUS_OK)
        fprintf(stderr, "run: %s: %.*s\n", exec_status_name(res->status), (int)res->err.len,
                (const char *)res->err.data);
}

/* The folder as a run sees it: bound read-only, importable by the sandbox's interpreter. */
static void package_imports_in_a_sandboxed_run_and_is_read_only(void **state)
{
    fixture_t *fx = *state;
    const char *specs[] = {PKG_NAME};
    env_options_t o;
    offline_options(fx, &o, specs, 1);
    env_t *env;
    assert_int_equal(build(&fx->loop, &o, &env), ENV_STATE_READY);
    env_status_t st;
    env_status(env, &st);
    exec_pool_t *pool = env_test_pool(&fx->loop, "the sandboxed import");
    if (pool == NULL) {
        free_env(&fx->loop, env);
        return;
    }
    /* a helper beside the packages, as the wiring mounts them: packages, then helpers */
    char *hdir = path_join(fx->base, "sandbox-helpers");
    assert_int_equal(mkdir(hdir, 0755), 0);
    char *hfile = path_join(hdir, "sbxhelper.py");
    write_text(hfile, "def twice(n: int) -> int:\n    \"\"\"Two times n.\"\"\"\n    return 2 * n\n"
                      "def broken(:\n");
    const char *hpaths[] = {hfile};
    env_custom_t custom;
    char msg[512];
    assert_int_equal(env_custom_publish(hdir, hpaths, 1, &custom, msg, sizeof msg), 0);
    write_text(hfile,
               "def twice(n: int) -> int:\n    \"\"\"Two times n.\"\"\"\n    return 2 * n\n");
    env_custom_t good;
    assert_int_equal(env_custom_publish(hdir, hpaths, 1, &good, msg, sizeof msg), 0);

    exec_run_opts_t ro;
    exec_run_opts_init(&ro);
    const char *dirs[] = {st.site_dir, good.dir};
    ro.path_dirs = dirs;
    ro.n_path_dirs = 2;
    run_result_t r = {0};
    exec_callbacks_t cb = {.on_done = on_run_done, .user = &r};
    const char *code = "import os, sbxhelper, " PKG_MODULE " as m\n"
                       "print(m.VALUE, sbxhelper.twice(21))\n"
                       "for p in (m.__file__, sbxhelper.__file__):\n"
                       "    try:\n"
                       "        open(os.path.join(os.path.dirname(p), 'x'), 'w')\n"
                       "        print('writable')\n"
                       "    except OSError:\n"
                       "        print('read-only')\n";
    assert_int_equal(exec_run_start_ex(pool, code, 30000, &ro, &cb, NULL), 0);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(r.done, 1);
    assert_string_equal(r.out, "42 42\nread-only\nread-only\n");

    /* the scanner as the wiring runs it: the code of a run whose read-only folder holds the
       helpers (here the version with a file that does not parse) */
    exec_run_opts_init(&ro);
    ro.ro_dir = custom.dir;
    run_result_t r2 = {0};
    cb.user = &r2;
    assert_int_equal(exec_run_start_ex(pool, env_custom_scan_script(NULL), 30000, &ro, &cb, NULL),
                     0);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(r2.status, EXEC_STATUS_OK);
    cJSON *j = cJSON_Parse(r2.out);
    assert_non_null(j);
    const cJSON *errors = cJSON_GetObjectItemCaseSensitive(j, "errors");
    assert_int_equal(cJSON_GetArraySize(errors), 1);
    const cJSON *e0 = cJSON_GetArrayItem(errors, 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(e0, "module")->valuestring, "sbxhelper");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(e0, "line")->valueint, 4);
    cJSON_Delete(j);
    /* and the good version lists its function */
    ro.ro_dir = good.dir;
    run_result_t r3 = {0};
    cb.user = &r3;
    assert_int_equal(exec_run_start_ex(pool, env_custom_scan_script(NULL), 30000, &ro, &cb, NULL),
                     0);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_non_null(strstr(r3.out, "\"signature\": \"twice(n: int) -> int\""));

    env_custom_free(&custom);
    env_custom_free(&good);
    free(hfile);
    free(hdir);
    exec_pool_free(pool);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    free_env(&fx->loop, env);
}

/* One small pure-Python package from pip's default index; skipped when it cannot be reached. */
static void installs_from_the_default_index(void **state)
{
    fixture_t *fx = *state;
    const char *specs[] = {"six==1.16.0"};
    env_options_t o;
    env_options_init(&o);
    o.python = TEST_PYTHON;
    char *cache = path_join(fx->base, "cache-online");
    o.cache_dir = cache;
    o.specs = specs;
    o.n_specs = 1;
    o.install_timeout_s = 180;
    env_t *env;
    env_state_t s = build(&fx->loop, &o, &env);
    env_status_t st;
    env_status(env, &st);
    if (s != ENV_STATE_READY) {
        bool offline = strstr(st.tail, "NewConnectionError") || strstr(st.tail, "resolution") ||
                       strstr(st.tail, "Network is unreachable") || strstr(st.tail, "ProxyError") ||
                       strstr(st.tail, "timed out");
        if (offline) {
            fprintf(stderr, "SKIP installs_from_the_default_index: index unreachable: %s\n",
                    st.message);
            free_env(&fx->loop, env);
            free(cache);
            skip();
            return; /* skip() jumps out; the return tells static analysis so */
        }
        fail_msg("online install failed: %s\n%s", st.message, st.tail);
    }
    char out[256];
    assert_int_equal(run_capture(out, sizeof out,
                                 "%s -I -c 'import sys; sys.path.insert(0, \"%s\"); import six; "
                                 "print(six.__version__)'",
                                 TEST_PYTHON, st.site_dir),
                     0);
    assert_string_equal(out, "1.16.0\n");
    free_env(&fx->loop, env);
    free(cache);
}

/* ---- the user's helpers ------------------------------------------------------------------- */
static void helpers_are_cached_by_content(void **state)
{
    fixture_t *fx = *state;
    char *h = path_join(fx->base, "helpers");
    assert_int_equal(mkdir(h, 0755), 0);
    char *f = path_join(h, "textutils.py");
    write_text(f,
               "def shout(s: str) -> str:\n    \"\"\"Upper-case s.\"\"\"\n    return s.upper()\n");
    char *pkg = path_join(h, "mathkit");
    assert_int_equal(mkdir(pkg, 0755), 0);
    char *init = path_join(pkg, "__init__.py");
    write_text(init, "def double(x: int = 2) -> int:\n    \"\"\"Twice x.\"\"\"\n    return 2 * x\n"
                     "def _private(): \n    \"\"\"hidden\"\"\"\n");
    char *cache_dir = path_join(pkg, "__pycache__");
    assert_int_equal(mkdir(cache_dir, 0755), 0);
    char *pyc = path_join(cache_dir, "junk.pyc");
    write_text(pyc, "junk");

    const char *paths[] = {f, pkg};
    env_custom_t c1, c2;
    char msg[512];
    assert_int_equal(env_custom_publish(fx->cache, paths, 2, &c1, msg, sizeof msg), 0);
    assert_int_equal(c1.n_modules, 2);
    assert_string_equal(c1.modules[0], "textutils");
    assert_string_equal(c1.modules[1], "mathkit");
    char *copied = path_join(c1.dir, "mathkit/__init__.py");
    struct stat sb;
    assert_int_equal(stat(copied, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0644);
    free(copied);
    copied = path_join(c1.dir, "mathkit/__pycache__");
    assert_int_not_equal(stat(copied, &sb), 0);
    free(copied);
    /* again: the same folder; a cache file changing does not matter, a source file does */
    write_text(pyc, "other junk");
    assert_int_equal(env_custom_publish(fx->cache, paths, 2, &c2, msg, sizeof msg), 0);
    assert_string_equal(c1.dir, c2.dir);
    env_custom_free(&c2);
    write_text(f,
               "def shout(s: str) -> str:\n    \"\"\"Upper-case s!\"\"\"\n    return s.upper()\n");
    assert_int_equal(env_custom_publish(fx->cache, paths, 2, &c2, msg, sizeof msg), 0);
    assert_string_not_equal(c1.hex, c2.hex);
    assert_int_equal(count_prefixed(fx->cache, "custom-"), 2);
    assert_int_equal(count_prefixed(fx->cache, ".custom-"), 0);

    /* the scanner, with the host interpreter, over the published folder */
    size_t len;
    const char *script = env_custom_scan_script(&len);
    assert_true(len > 100 && strlen(script) == len);
    char *sp = path_join(fx->base, "scan.py");
    write_text(sp, script);
    char out[16384];
    assert_int_equal(run_capture(out, sizeof out, "%s -I %s %s", TEST_PYTHON, sp, c2.dir), 0);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(j, "tools");
    assert_int_equal(cJSON_GetArraySize(tools), 2);
    const cJSON *t0 = cJSON_GetArrayItem(tools, 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(t0, "module")->valuestring, "mathkit");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(t0, "signature")->valuestring,
                        "double(x: int=2) -> int");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "errors")), 0);
    cJSON_Delete(j);
    env_custom_free(&c2);

    /* names: not an identifier, the sandbox's own "tools", the same module twice */
    char *badname = path_join(h, "my-tools.py");
    write_text(badname, "x = 1\n");
    const char *p_bad[] = {badname};
    env_custom_t c3;
    assert_int_equal(env_custom_publish(fx->cache, p_bad, 1, &c3, msg, sizeof msg), ENV_EINVAL);
    assert_non_null(strstr(msg, "my-tools"));
    char *toolsf = path_join(h, "tools.py");
    write_text(toolsf, "x = 1\n");
    const char *p_tools[] = {toolsf};
    assert_int_equal(env_custom_publish(fx->cache, p_tools, 1, &c3, msg, sizeof msg), ENV_EINVAL);
    assert_non_null(strstr(msg, "\"tools\""));
    const char *p_twice[] = {f, f};
    assert_int_equal(env_custom_publish(fx->cache, p_twice, 2, &c3, msg, sizeof msg), ENV_EINVAL);
    assert_non_null(strstr(msg, "textutils"));

    env_custom_free(&c1);
    free(sp);
    free(badname);
    free(toolsf);
    free(pyc);
    free(cache_dir);
    free(init);
    free(pkg);
    free(f);
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(spec_normalise_follows_pep503),
        cmocka_unit_test(key_is_stable_and_changes_with_set_and_interpreter),
        cmocka_unit_test(key_asks_the_interpreter),
        cmocka_unit_test(offline_build_installs_and_second_start_reuses_it),
        cmocka_unit_test(unknown_package_fails_with_pips_lines_and_publishes_nothing),
        cmocka_unit_test(install_timeout_kills_pip),
        cmocka_unit_test(concurrent_builders_of_one_key_end_with_one_folder),
        cmocka_unit_test(free_during_pip_removes_its_folder),
        cmocka_unit_test(bad_options_are_refused_at_start),
        cmocka_unit_test(interpreter_without_pip_is_a_clear_failure),
        cmocka_unit_test(requirements_file_is_installed),
        cmocka_unit_test(package_imports_in_a_sandboxed_run_and_is_read_only),
        cmocka_unit_test(installs_from_the_default_index),
        cmocka_unit_test(helpers_are_cached_by_content),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
