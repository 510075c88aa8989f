/* env_test.h - what the environment module's test programs share: writing a small file, joining
 * two paths, the fixture's folder and loop, a sandbox pool for one run, and stand-in
 * interpreters. Header-only; include it after <cmocka.h>, environment.h and ../test_util.h
 * (and executor.h for the pool). */
#ifndef PTC_ENV_TEST_H
#define PTC_ENV_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Writes text to path (created or truncated); fails the test when it cannot. */
static inline void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* "a/b" in a new buffer of TU_PATH_MAX bytes (caller frees). */
static inline char *path_join(const char *a, const char *b)
{
    char *p = malloc(TU_PATH_MAX);
    assert_non_null(p);
    int n = snprintf(p, TU_PATH_MAX, "%s/%s", a, b);
    assert_true(n > 0 && n < TU_PATH_MAX);
    return p;
}

/* A fixture's own temporary folder base (prefix names it), base/cache (not created) and a
 * fresh loop. */
static inline void env_fixture_open(const char *prefix, char **base, char **cache, uv_loop_t *loop)
{
    *base = tu_temp_dir(prefix);
    *cache = path_join(*base, "cache");
    assert_int_equal(uv_loop_init(loop), 0);
}

/* Lets the loop finish what the test left running (children stopping, handles closing), closes
 * it, and removes and frees what env_fixture_open made. */
static inline void env_fixture_close(char *base, char *cache, uv_loop_t *loop)
{
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(loop), 0);
    tu_remove_tree(base);
    free(base);
    free(cache);
}

#ifdef TEST_LAUNCHER
/* A cold pool of the real launcher for one sandboxed run, or NULL where the sandbox refuses runs
 * here (the pool is then freed and a note names what goes unchecked). Include executor.h first. */
static inline exec_pool_t *env_test_pool(uv_loop_t *loop, const char *unchecked)
{
    exec_options_t eo;
    exec_options_init(&eo);
    eo.python = TEST_PYTHON;
    eo.launcher = TEST_LAUNCHER;
    eo.keep_warm = false;
    exec_pool_t *pool;
    assert_int_equal(exec_pool_new(loop, &eo, &pool), 0);
    if (exec_pool_refusing(pool)) {
        fprintf(stderr, "note: sandbox refuses runs here; %s is not checked\n", unchecked);
        exec_pool_free(pool);
        uv_run(loop, UV_RUN_DEFAULT);
        pool = NULL;
    }
    return pool;
}
#endif

/* Stand-in interpreters (shell scripts) for builds without pip or network. */
#define FAKE_PKG "ptc-fake-pkg"

/* The version question is `python -I -S -c CODE`; pip's command starts `python -I -c`. */
#define FAKE_VERSION                                                                               \
    "#!/bin/sh\n"                                                                                  \
    "if [ \"$2\" = \"-S\" ]; then echo '3.99.0 (stand-in)'; echo 'fake-399'; echo 'linux-x';"      \
    " exit 0; fi\n"
/* pip fails naming the package, as pip does */
#define FAKE_PIP_FAILS                                                                             \
    FAKE_VERSION "echo 'Collecting " FAKE_PKG "'\n"                                                \
                 "echo 'ERROR: No matching distribution found for " FAKE_PKG "'\nexit 1\n"
/* the version question takes a second, then fails: BUILDING for that second */
#define FAKE_SLOW_FAILURE "#!/bin/sh\nsleep 1\nexit 3\n"
/* the version question never answers in time: BUILDING until env_free */
#define FAKE_STALLS "#!/bin/sh\nsleep 30\n"

/* A stand-in interpreter named name in folder base, running script (caller frees the path). */
static inline char *fake_python_in(const char *base, const char *name, const char *script)
{
    char *p = path_join(base, name);
    write_text(p, script);
    assert_int_equal(chmod(p, 0755), 0);
    return p;
}

#endif
