/* test_flags.c - the flag table: each kind from the command line and from a config object,
 * the values each kind refuses and the words it refuses them with, the command line winning
 * over the object, and the --help lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base.h"
#include "base_test.h" /* the allocation wrappers; nothing here fails one */

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_MAX 3

typedef struct opts {
    bool verbose, help;
    const char *name;
    size_t bytes;
    double rate, wait;
    long tries;
    const char *items[LIST_MAX];
    size_t n_items;
    unsigned char given[16];
} opts_t;

#define OFF(f) offsetof(opts_t, f)

static const ptc_flag_t table[] = {
    {"verbose", PTC_FLAG_BOOL, OFF(verbose), 0, NULL, "say more", "off"},
    {"name", PTC_FLAG_STR, OFF(name), 0, "TEXT", "a name", NULL},
    {"bytes", PTC_FLAG_SIZE, OFF(bytes), 0, "SIZE", "a size", "1 MiB"},
    {"rate", PTC_FLAG_NUM, OFF(rate), 0, "X", "a positive number", "1"},
    {"wait", PTC_FLAG_NUM0, OFF(wait), 0, "S", "a wait (0: none)", "10"},
    {"tries", PTC_FLAG_LONG, OFF(tries), 0, "N", "a count", "2"},
    {"item", PTC_FLAG_LIST, OFF(items), OFF(n_items), "ITEM", "repeatable", "none"},
    {"help", PTC_FLAG_BOOL, OFF(help), 0, NULL, "print this help and exit", NULL},
};
#define N_TABLE (sizeof table / sizeof table[0])

static const char *const cli_only[] = {"help", NULL};

/* What a parse wrote on its error stream. */
typedef struct capture {
    char *text;
    size_t len;
    FILE *f;
} capture_t;

static void capture_open(capture_t *c)
{
    c->text = NULL;
    c->len = 0;
    c->f = open_memstream(&c->text, &c->len);
    assert_non_null(c->f);
}

static const char *capture_text(capture_t *c)
{
    fflush(c->f);
    return c->text != NULL ? c->text : "";
}

static void capture_close(capture_t *c)
{
    fclose(c->f);
    free(c->text);
}

static ptc_flags_t flags_of(opts_t *o)
{
    memset(o, 0, sizeof *o);
    return (ptc_flags_t){.prog = "prog",
                         .table = table,
                         .n = N_TABLE,
                         .opts = o,
                         .given = o->given,
                         .list_max = LIST_MAX,
                         .cli_only = cli_only};
}

/* A writable argv, as main gets it (argv[0] the program), copied from literals; the values the
 * flags borrow live in store as long as the args_t. */
typedef struct args {
    char *argv[16];
    char store[1024];
    int argc;
} args_t;

static void args_make(args_t *a, const char *const *list, int n)
{
    size_t used = 0;
    assert_true(n <= 16);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(list[i]) + 1;
        assert_true(used + len <= sizeof a->store);
        memcpy(a->store + used, list[i], len);
        a->argv[i] = a->store + used;
        used += len;
    }
    a->argc = n;
}

static int parse(opts_t *o, capture_t *c, args_t *a)
{
    ptc_flags_t fl = flags_of(o);
    return ptc_flags_parse_argv(&fl, a->argc, a->argv, c->f);
}

static void test_argv_sets_every_kind_in_both_spellings(void **state)
{
    (void)state;
    opts_t o;
    capture_t c;
    capture_open(&c);
    args_t a;
    args_make(&a,
              (const char *[]){"prog", "--verbose", "--name", "x y", "--bytes=64KiB", "--rate",
                               "0.5", "--wait=0", "--tries", "0", "--item", "a", "--item=b=c"},
              13);
    assert_int_equal(parse(&o, &c, &a), 0);
    assert_true(o.verbose);
    assert_false(o.help);
    assert_string_equal(o.name, "x y");
    assert_true(o.bytes == 64u << 10);
    assert_true(o.rate == 0.5);
    assert_true(o.wait == 0);
    assert_int_equal(o.tries, 0);
    assert_int_equal(o.n_items, 2);
    assert_string_equal(o.items[0], "a");
    assert_string_equal(o.items[1], "b=c"); /* only the first '=' ends the name */
    ptc_flags_t fl = flags_of(&(opts_t){0});
    fl.given = o.given;
    assert_true(ptc_flags_given(&fl, &table[0]));
    assert_false(ptc_flags_given(&fl, &table[7]));
    assert_string_equal(capture_text(&c), "");
    capture_close(&c);
}

static void test_sizes_take_suffixes_and_refuse_zero_signs_and_overflow(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t want; /* 0: refused */
    } cases[] = {
        {"123", 123},
        {"2k", 2048},
        {"2K", 2048},
        {"3MB", 3u << 20},
        {"1GiB", 1u << 30},
        {"1g", 1u << 30},
        {"0", 0},
        {"-1", 0},
        {"", 0},
        {"12x", 0},
        {"1KiBs", 0},
        {"99999999999999999999", 0},
        {"17179869184G", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        opts_t o;
        capture_t c;
        capture_open(&c);
        args_t a;
        args_make(&a, (const char *[]){"prog", "--bytes", cases[i].text}, 3);
        int rc = parse(&o, &c, &a);
        if (cases[i].want) {
            assert_int_equal(rc, 0);
            assert_true(o.bytes == cases[i].want);
        } else {
            assert_int_equal(rc, PTC_EINVAL);
            char want[128];
            snprintf(want, sizeof want, "prog: --bytes: invalid value \"%s\" (expected SIZE)\n",
                     cases[i].text);
            assert_string_equal(capture_text(&c), want);
        }
        capture_close(&c);
    }
}

static void test_numbers_refuse_what_their_kind_excludes(void **state)
{
    (void)state;
    static const struct {
        const char *flag, *value;
        bool ok;
    } cases[] = {
        {"--rate", "2.5", true},
        {"--rate", "1e3", true},
        {"--rate", "0", false},
        {"--rate", "-1", false},
        {"--rate", "inf", false},
        {"--rate", "nan", false},
        {"--rate", "1s", false},
        {"--wait", "0", true},
        {"--wait", "-0.1", false},
        {"--tries", "10", true},
        {"--tries", "0", true},
        {"--tries", "-1", false},
        {"--tries", "1.5", false},
        {"--tries", "", false},
        {"--tries", "99999999999999999999999", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        opts_t o;
        capture_t c;
        capture_open(&c);
        args_t a;
        args_make(&a, (const char *[]){"prog", cases[i].flag, cases[i].value}, 3);
        int rc = parse(&o, &c, &a);
        assert_int_equal(rc, cases[i].ok ? 0 : PTC_EINVAL);
        assert_int_equal(capture_text(&c)[0] == '\0', cases[i].ok);
        capture_close(&c);
    }
}

static void test_argv_refusals_name_the_fault(void **state)
{
    (void)state;
    static const struct {
        const char *args[3];
        int argc;
        const char *said;
    } cases[] = {
        {{"plain"}, 1, "prog: unexpected argument \"plain\" (see --help)\n"},
        {{"--"}, 1, "prog: unexpected argument \"--\" (see --help)\n"},
        {{"-v"}, 1, "prog: unexpected argument \"-v\" (see --help)\n"},
        {{"--nope=1"}, 1, "prog: unknown flag \"--nope=1\" (see --help)\n"},
        {{"--verb"}, 1, "prog: unknown flag \"--verb\" (see --help)\n"},
        {{"--verbose=yes"}, 1, "prog: --verbose takes no value\n"},
        {{"--name"}, 1, "prog: --name needs a value (TEXT)\n"},
        {{"--item", "a", "--item"}, 3, "prog: --item needs a value (ITEM)\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        opts_t o;
        capture_t c;
        capture_open(&c);
        const char *list[4] = {"prog"};
        for (int k = 0; k < cases[i].argc; k++)
            list[k + 1] = cases[i].args[k];
        args_t a;
        args_make(&a, list, cases[i].argc + 1);
        assert_int_equal(parse(&o, &c, &a), PTC_EINVAL);
        assert_string_equal(capture_text(&c), cases[i].said);
        capture_close(&c);
    }
}

static void test_a_list_past_its_maximum_is_refused(void **state)
{
    (void)state;
    opts_t o;
    capture_t c;
    capture_open(&c);
    args_t a;
    args_make(&a, (const char *[]){"prog", "--item=1", "--item=2", "--item=3", "--item=4"}, 5);
    assert_int_equal(parse(&o, &c, &a), PTC_ETOOBIG);
    assert_string_equal(capture_text(&c), "prog: --item given more than 3 times\n");
    assert_int_equal(o.n_items, LIST_MAX);
    capture_close(&c);
}

/* Parses argv, then the object text, as a program reads its command line and then its config. */
static int parse_both(opts_t *o, capture_t *c, args_t *a, const char *json, cJSON **root)
{
    ptc_flags_t fl = flags_of(o);
    assert_int_equal(ptc_flags_parse_argv(&fl, a->argc, a->argv, c->f), 0);
    *root = cJSON_Parse(json);
    assert_non_null(*root);
    return ptc_flags_parse_object(&fl, *root, "cfg \"x\"", c->f);
}

static void test_object_sets_every_kind_and_the_command_line_wins(void **state)
{
    (void)state;
    opts_t o;
    capture_t c;
    capture_open(&c);
    cJSON *root = NULL;
    args_t a;
    args_make(&a, (const char *[]){"prog", "--rate", "3"}, 3);
    int rc = parse_both(&o, &c, &a,
                        "{\"verbose\": true, \"name\": \"n\", \"bytes\": \"2M\", \"rate\": 9,"
                        " \"wait\": 0, \"tries\": 4, \"item\": [\"a\", \"b\"]}",
                        &root);
    assert_int_equal(rc, 0);
    assert_string_equal(capture_text(&c), "");
    assert_true(o.verbose);
    assert_string_equal(o.name, "n");
    assert_true(o.bytes == 2u << 20);
    assert_true(o.rate == 3); /* the command line's */
    assert_true(o.wait == 0);
    assert_int_equal(o.tries, 4);
    assert_int_equal(o.n_items, 2);
    assert_string_equal(o.items[1], "b");
    cJSON_Delete(root);

    /* false leaves a switch off; one string is one list entry */
    a.argc = 1;
    rc = parse_both(&o, &c, &a, "{\"verbose\": false, \"item\": \"one\", \"bytes\": 4096}", &root);
    assert_int_equal(rc, 0);
    assert_false(o.verbose);
    assert_int_equal(o.n_items, 1);
    assert_string_equal(o.items[0], "one");
    assert_true(o.bytes == 4096);
    cJSON_Delete(root);
    capture_close(&c);
}

static void test_object_refusals_name_the_member(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        const char *said;
    } cases[] = {
        {"{\"nope\": 1}", "prog: cfg \"x\".nope is not a flag (see --help)\n"},
        {"{\"help\": true}", "prog: cfg \"x\".help is only a command-line flag\n"},
        {"{\"help\": 1}", "prog: cfg \"x\".help has the wrong type\n"},
        {"{\"verbose\": \"yes\"}", "prog: cfg \"x\".verbose has the wrong type\n"},
        {"{\"name\": 5}", "prog: cfg \"x\".name has the wrong type\n"},
        {"{\"name\": [\"a\"]}", "prog: cfg \"x\".name has the wrong type\n"},
        {"{\"item\": [\"a\", 2]}", "prog: cfg \"x\".item has the wrong type\n"},
        {"{\"tries\": null}", "prog: cfg \"x\".tries has the wrong type\n"},
        {"{\"rate\": 0}", "prog: --rate (in the config file): invalid value \"0\" (expected X)\n"},
        {"{\"tries\": 1.5}",
         "prog: --tries (in the config file): invalid value \"1.5\" (expected N)\n"},
        {"{\"item\": [\"1\", \"2\", \"3\", \"4\"]}", "prog: --item given more than 3 times\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        opts_t o;
        capture_t c;
        capture_open(&c);
        cJSON *root = NULL;
        args_t a;
        args_make(&a, (const char *[]){"prog"}, 1);
        assert_true(parse_both(&o, &c, &a, cases[i].json, &root) < 0);
        assert_string_equal(capture_text(&c), cases[i].said);
        cJSON_Delete(root);
        capture_close(&c);
    }
    /* a flag the command line gave is skipped whatever the object holds for it, but a switch
     * given a non-boolean is still refused */
    opts_t o;
    capture_t c;
    capture_open(&c);
    cJSON *root = NULL;
    args_t a;
    args_make(&a, (const char *[]){"prog", "--name", "cli", "--verbose"}, 4);
    assert_int_equal(parse_both(&o, &c, &a, "{\"name\": 5}", &root), 0);
    assert_string_equal(o.name, "cli");
    cJSON_Delete(root);
    assert_int_equal(parse_both(&o, &c, &a, "{\"verbose\": 1}", &root), PTC_EINVAL);
    cJSON_Delete(root);
    ptc_flags_t fl = flags_of(&o);
    assert_int_equal(ptc_flags_parse_object(&fl, NULL, "x", c.f), PTC_EINVAL);
    capture_close(&c);
}

static void test_usage_prints_one_aligned_line_per_flag(void **state)
{
    (void)state;
    capture_t c;
    capture_open(&c);
    ptc_flags_usage(table, 3, c.f);
    assert_string_equal(capture_text(&c),
                        "  --verbose                        say more [default: off]\n"
                        "  --name TEXT                      a name\n"
                        "  --bytes SIZE                     a size [default: 1 MiB]\n");
    capture_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argv_sets_every_kind_in_both_spellings),
        cmocka_unit_test(test_sizes_take_suffixes_and_refuse_zero_signs_and_overflow),
        cmocka_unit_test(test_numbers_refuse_what_their_kind_excludes),
        cmocka_unit_test(test_argv_refusals_name_the_fault),
        cmocka_unit_test(test_a_list_past_its_maximum_is_refused),
        cmocka_unit_test(test_object_sets_every_kind_and_the_command_line_wins),
        cmocka_unit_test(test_object_refusals_name_the_member),
        cmocka_unit_test(test_usage_prints_one_aligned_line_per_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
