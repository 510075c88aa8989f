/* test_errors.c - the one error space (base.h): every library's table walked at once. A value
 * means one thing in the whole program: an errno-valued code is the negative errno its name
 * says, a library's own extras lie in its block alone, and every strerror names every code of
 * its table with the table's text and the codes of the libraries below it with theirs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "bridge.h"
#include "environment.h"
#include "executor.h"
#include "httpc.h"
#include "mcp.h"
#include "pybundle.h"
#include "registry.h"
#include "repair.h"

typedef struct row {
    const char *name;
    int value;
    const char *text;
} row_t;

#define ROW(name, value, text) {#name, (value), (text)},

static const row_t base_rows[] = {PTC_ERRORS(ROW)};
static const row_t http_rows[] = {PTC_HTTP_ERRORS(ROW)};
static const row_t mcp_rows[] = {MCP_ERRORS(ROW)};
static const row_t exec_rows[] = {EXEC_ERRORS(ROW)};
static const row_t reg_rows[] = {REG_ERRORS(ROW)};
static const row_t bridge_rows[] = {PTC_BRIDGE_ERRORS(ROW)};
static const row_t env_rows[] = {ENV_ERRORS(ROW)};
static const row_t pybundle_rows[] = {PTC_PYBUNDLE_ERRORS(ROW)};
static const row_t repair_rows[] = {PTC_REPAIR_ERRORS(ROW)};

typedef struct lib {
    const char *name;
    int block; /* the base of its extras (0 for base/, which has none) */
    const row_t *rows;
    size_t n;
    const char *(*strerror)(int err);
    const char *(*below)(int err); /* the strerror it falls back to (NULL for base/) */
} lib_t;

#define LIB(name, block, rows, fn, below)                                                          \
    {                                                                                              \
        (name), (block), (rows), sizeof(rows) / sizeof((rows)[0]), (fn), (below)                   \
    }

static const lib_t libs[] = {
    LIB("base", 0, base_rows, ptc_strerror, NULL),
    LIB("httpc", PTC_ERR_HTTP, http_rows, ptc_http_strerror, ptc_strerror),
    LIB("mcp", PTC_ERR_MCP, mcp_rows, mcp_strerror, ptc_http_strerror),
    LIB("executor", PTC_ERR_EXEC, exec_rows, exec_strerror, ptc_strerror),
    LIB("registry", PTC_ERR_REG, reg_rows, reg_strerror, ptc_http_strerror),
    LIB("bridge", PTC_ERR_BRIDGE, bridge_rows, ptc_bridge_strerror, mcp_strerror),
    LIB("environment", PTC_ERR_ENV, env_rows, env_strerror, ptc_strerror),
    LIB("pybundle", PTC_ERR_PYBUNDLE, pybundle_rows, ptc_pybundle_strerror, reg_strerror),
    LIB("repair", PTC_ERR_REPAIR, repair_rows, ptc_repair_strerror, ptc_http_strerror),
};
#define N_LIBS (sizeof libs / sizeof libs[0])

static bool is_errno_valued(int v)
{
    return v <= 0 && v >= PTC_ERR_ERRNO_MIN;
}

/* The row of base/'s table with this suffix ("ENOMEM" of MCP_ENOMEM), or NULL. */
static const row_t *base_row_named(const char *suffix)
{
    for (size_t i = 0; i < sizeof base_rows / sizeof base_rows[0]; i++)
        if (strcmp(base_rows[i].name + strlen("PTC_"), suffix) == 0) return &base_rows[i];
    return NULL;
}

static const char *suffix_of(const char *name)
{
    const char *s = strrchr(name, '_');
    return s ? s + 1 : name;
}

static void test_blocks_lie_below_errno_and_apart(void **state)
{
    (void)state;
    assert_true(-PTC_ERR_ERRNO_MIN >= 4095); /* Linux's errno values stay under 4096 */
    for (size_t i = 1; i < N_LIBS; i++) {
        assert_true(libs[i].block < PTC_ERR_ERRNO_MIN);
        for (size_t k = 1; k < i; k++) {
            int d = libs[i].block - libs[k].block;
            if (d < 0) d = -d;
            if (d < PTC_ERR_BLOCK) fail_msg("%s and %s share a block", libs[i].name, libs[k].name);
        }
    }
}

static void test_values_are_unique_and_in_their_library_block(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_LIBS; i++) {
        const lib_t *l = &libs[i];
        for (size_t r = 0; r < l->n; r++) {
            int v = l->rows[r].value;
            bool own = l->block != 0 && v <= l->block && v > l->block - PTC_ERR_BLOCK;
            if (!is_errno_valued(v) && !own)
                fail_msg("%s: %s = %d is neither an errno value nor in its block %d", l->name,
                         l->rows[r].name, v, l->block);
            for (size_t s = 0; s < r; s++)
                if (l->rows[s].value == v)
                    fail_msg("%s: %s and %s are both %d", l->name, l->rows[s].name, l->rows[r].name,
                             v);
        }
    }
    /* an extra of one library is no code of another */
    for (size_t i = 0; i < N_LIBS; i++)
        for (size_t r = 0; r < libs[i].n; r++) {
            if (is_errno_valued(libs[i].rows[r].value)) continue;
            for (size_t k = 0; k < N_LIBS; k++)
                for (size_t s = 0; k != i && s < libs[k].n; s++)
                    if (libs[k].rows[s].value == libs[i].rows[r].value)
                        fail_msg("%s of %s and %s of %s are both %d", libs[i].rows[r].name,
                                 libs[i].name, libs[k].rows[s].name, libs[k].name,
                                 libs[k].rows[s].value);
        }
}

static void test_errno_valued_codes_are_the_negative_errno(void **state)
{
    (void)state;
    /* base/'s own names are literal -errno values */
    assert_int_equal(PTC_ENOMEM, -ENOMEM);
    assert_int_equal(PTC_EINVAL, -EINVAL);
    assert_int_equal(PTC_ETOOBIG, -E2BIG);
    assert_int_equal(PTC_ETIMEDOUT, -ETIMEDOUT);
    assert_int_equal(PTC_ECANCELED, -ECANCELED);
    size_t checked = 0;
    for (size_t i = 0; i < N_LIBS; i++)
        for (size_t r = 0; r < libs[i].n; r++) {
            const row_t *row = &libs[i].rows[r];
            if (!is_errno_valued(row->value)) continue;
            /* every errno value of a library is one base/ names */
            bool named = false;
            for (size_t b = 0; b < sizeof base_rows / sizeof base_rows[0]; b++)
                named = named || base_rows[b].value == row->value;
            if (!named)
                fail_msg("%s: %s = %d is no errno of base.h", libs[i].name, row->name, row->value);
            /* and a name that is an errno's (MCP_ENOMEM, REG_ENOENT) has that errno's value */
            const row_t *same = base_row_named(suffix_of(row->name));
            if (same != NULL && strcmp(suffix_of(row->name), "OK") != 0) {
                if (same->value != row->value)
                    fail_msg("%s = %d but %s = %d", row->name, row->value, same->name, same->value);
                checked++;
            }
        }
    assert_true(checked > 30); /* ENOMEM, EINVAL, ETOOBIG ... of every library */
}

static void test_every_code_is_named_by_its_library_strerror(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_LIBS; i++)
        for (size_t r = 0; r < libs[i].n; r++) {
            const row_t *row = &libs[i].rows[r];
            const char *got = libs[i].strerror(row->value);
            if (strcmp(got, row->text) != 0)
                fail_msg("%s: %s named \"%s\", its table says \"%s\"", libs[i].name, row->name, got,
                         row->text);
        }
}

/* Any library names a code of the libraries it is built on, down to base/'s errno values,
 * and nothing it does not know is unnamed. */
static void test_a_strerror_falls_back_to_the_libraries_below(void **state)
{
    (void)state;
    for (size_t i = 1; i < N_LIBS; i++) {
        const lib_t *l = &libs[i];
        for (size_t b = 0; b < sizeof base_rows / sizeof base_rows[0]; b++) {
            int v = base_rows[b].value;
            bool own = false;
            for (size_t r = 0; r < l->n; r++)
                own = own || l->rows[r].value == v;
            if (!own) assert_string_equal(l->strerror(v), l->below(v));
            assert_string_not_equal(l->strerror(v), "unknown error");
        }
        assert_string_equal(l->strerror(-EXDEV), "system error");
    }
    /* mcp/ shares the HTTP client's codes and names them through it */
    assert_int_equal(MCP_ETLS, PTC_HTTP_ETLS);
    assert_int_equal(MCP_ECONNECT, PTC_HTTP_ECONNECT);
    assert_int_equal(MCP_ECLOSED, PTC_HTTP_ECLOSED);
    assert_string_equal(mcp_strerror(MCP_ETLS), ptc_http_strerror(PTC_HTTP_ETLS));
    assert_string_equal(mcp_strerror(MCP_ERESOLVE), "host name lookup failed");
    assert_string_equal(ptc_bridge_strerror(MCP_EREMOTE), mcp_strerror(MCP_EREMOTE));
    assert_string_equal(ptc_pybundle_strerror(REG_EDIM), reg_strerror(REG_EDIM));
    assert_string_equal(ptc_repair_strerror(PTC_HTTP_EREDIRECT), "redirect refused");
    /* the model's names are the registry's codes */
    assert_int_equal(REG_MODEL_ENOENT, REG_ENOENT);
    assert_int_equal(REG_MODEL_EFORMAT, REG_EFORMAT);
    /* a wiring that knows two libraries tells their extras apart by block */
    assert_true(PTC_ERR_IN_BLOCK(PTC_REPAIR_EREMOTE, PTC_ERR_REPAIR));
    assert_false(PTC_ERR_IN_BLOCK(MCP_EREMOTE, PTC_ERR_REPAIR));
    assert_false(PTC_ERR_IN_BLOCK(PTC_REPAIR_ENOMEM, PTC_ERR_REPAIR));
    /* a code of a library not below is unknown, not misnamed */
    assert_string_equal(exec_strerror(REG_EDIM), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_lie_below_errno_and_apart),
        cmocka_unit_test(test_values_are_unique_and_in_their_library_block),
        cmocka_unit_test(test_errno_valued_codes_are_the_negative_errno),
        cmocka_unit_test(test_every_code_is_named_by_its_library_strerror),
        cmocka_unit_test(test_a_strerror_falls_back_to_the_libraries_below),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
