/* Self-healing's pure parts: error fingerprints, code out of replies, diff summaries, the
 * repair request and packet, and the replay journal's canonical keys and occurrences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repair.h"
#include "repair.h"

static void fp_of(const char *status, int exit_code, const char *sig, const char *err, char *out,
                  size_t size)
{
    ptc_repair_fingerprint(status, exit_code, sig, err, out, size);
}

static void fingerprints_strip_numbers_addresses_and_line_numbers(void **state)
{
    (void)state;
    char a[PTC_REPAIR_FP_MAX], b[PTC_REPAIR_FP_MAX];
    fp_of("error", 1, NULL,
          "Traceback (most recent call last):\n"
          "  File \"<string>\", line 12, in <module>\n"
          "  File \"<string>\", line 4, in load\n"
          "ValueError: bad value 42 at 0x7f3a2c001e40\n",
          a, sizeof a);
    assert_string_equal(a, "ValueError: bad value # at 0x# @ <string>:<module> > <string>:load");
    /* Other numbers, another address, the code moved down: the same error. */
    fp_of("error", 1, NULL,
          "some output on stderr\n"
          "Traceback (most recent call last):\n"
          "  File \"<string>\", line 30, in <module>\n"
          "  File \"<string>\", line 17, in load\n"
          "ValueError: bad value 7 at 0xdeadbeef\n",
          b, sizeof b);
    assert_string_equal(a, b);
    /* Another function is another error. */
    fp_of("error", 1, NULL,
          "Traceback (most recent call last):\n"
          "  File \"<string>\", line 30, in <module>\n"
          "  File \"<string>\", line 17, in parse\n"
          "ValueError: bad value 7 at 0xdeadbeef\n",
          b, sizeof b);
    assert_string_not_equal(a, b);
}

static void fingerprints_keep_the_innermost_frames_by_file_name(void **state)
{
    (void)state;
    char fp[PTC_REPAIR_FP_MAX];
    fp_of("error", 1, NULL,
          "Traceback (most recent call last):\n"
          "  File \"<string>\", line 2, in <module>\n"
          "  File \"/opt/ptc/lib/tools/memory.py\", line 11, in add_observations\n"
          "    return _ptc_rt._invoke(\"memory\", \"add_observations\", {}, {})\n"
          "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
          "  File \"/opt/ptc/lib/tools/_runtime.py\", line 177, in _invoke\n"
          "    return _unwrap(result, server, tool)\n"
          "  File \"/opt/ptc/lib/tools/_runtime.py\", line 147, in _unwrap\n"
          "    raise ToolError(text)\n"
          "tools._runtime.ToolError: Entity with name Nobody not found\n",
          fp, sizeof fp);
    assert_string_equal(fp, "tools._runtime.ToolError: Entity with name Nobody not found @ "
                            "memory.py:add_observations > _runtime.py:_invoke > "
                            "_runtime.py:_unwrap");
    /* A chained exception: the last one counts. */
    fp_of("error", 1, NULL,
          "Traceback (most recent call last):\n"
          "  File \"<string>\", line 2, in <module>\n"
          "KeyError: 'a'\n\n"
          "During handling of the above exception, another exception occurred:\n\n"
          "Traceback (most recent call last):\n"
          "  File \"<string>\", line 4, in <module>\n"
          "RuntimeError: wrapped\n",
          fp, sizeof fp);
    assert_string_equal(fp, "RuntimeError: wrapped @ <string>:<module>");
}

static void fingerprints_of_syntax_errors_timeouts_signals_and_exits(void **state)
{
    (void)state;
    char fp[PTC_REPAIR_FP_MAX];
    fp_of("error", 1, NULL,
          "  File \"<string>\", line 3\n"
          "    print(\n"
          "         ^\n"
          "SyntaxError: '(' was never closed\n",
          fp, sizeof fp);
    assert_string_equal(fp, "SyntaxError: '(' was never closed @ <string>:");
    assert_int_equal(ptc_repair_failing_line("  File \"<string>\", line 3\n    print(\n"
                                             "SyntaxError: '(' was never closed\n"),
                     3);
    fp_of("timeout", -1, "SIGKILL", "partial output", fp, sizeof fp);
    assert_string_equal(fp, "timeout");
    fp_of("oom", -1, NULL, "", fp, sizeof fp);
    assert_string_equal(fp, "oom");
    fp_of("killed", -1, "SIGSEGV", NULL, fp, sizeof fp);
    assert_string_equal(fp, "killed SIGSEGV");
    fp_of("error", 3, NULL, "", fp, sizeof fp);
    assert_string_equal(fp, "exit 3");
    fp_of("error", 2, NULL, "   \nusage:   tool  --count 12\n\n", fp, sizeof fp);
    assert_string_equal(fp, "exit 2: usage: tool --count #");
    fp_of("error", 1, NULL, "StopIteration\n", fp, sizeof fp);
    assert_string_equal(fp, "StopIteration");
    /* A small buffer is filled, not overrun. */
    char small[12];
    fp_of("error", 1, NULL, "ValueError: a long message about 1234567\n", small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, "ValueError:", 11);
}

static void the_failing_line_is_the_innermost_frame_of_the_program(void **state)
{
    (void)state;
    const char *err = "Traceback (most recent call last):\n"
                      "  File \"<string>\", line 5, in <module>\n"
                      "  File \"<string>\", line 2, in f\n"
                      "  File \"/usr/lib/python3.11/json/__init__.py\", line 346, in loads\n"
                      "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n";
    assert_int_equal(ptc_repair_failing_line(err), 2);
    assert_int_equal(ptc_repair_failing_line("no traceback here\n"), 0);
    assert_int_equal(ptc_repair_failing_line(NULL), 0);
    char line[PTC_REPAIR_LINE_MAX];
    ptc_repair_code_line("import json\ndef f():\n    return json.loads('')\n", 3, line,
                         sizeof line);
    assert_string_equal(line, "return json.loads('')");
    ptc_repair_code_line("one\n", 9, line, sizeof line);
    assert_string_equal(line, "");
}

static void extract(const char *reply, const char *want)
{
    char *got = ptc_repair_extract_code(reply);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void code_comes_from_a_python_block_else_any_block_else_the_reply(void **state)
{
    (void)state;
    extract("Here you go:\n```python\nprint(1)\n```\nDone.", "print(1)\n");
    /* A python block wins over an earlier block of another language. */
    extract("Run:\n```sh\npip install x\n```\nthen\n```Python3\n\n\nimport x\nx.go()\n\n```\n",
            "import x\nx.go()\n");
    extract("```\nprint(2)\n```", "print(2)\n");
    extract("~~~py\nprint(3)\n~~~", "print(3)\n");
    /* A longer closing fence closes; a shorter one is content. */
    extract("````python\ns = '''\n```\n'''\nprint(s)\n`````\n", "s = '''\n```\n'''\nprint(s)\n");
    /* Unclosed: to the end. */
    extract("```python\nprint(4)\n", "print(4)\n");
    /* An inline ``` with more backticks on the line is not a fence. */
    extract("use ```x``` here\nprint(5)", "use ```x``` here\nprint(5)\n");
    extract("\n\n  print(6)  \n\n", "print(6)\n");
    extract("", "");
    extract("```python\n```", "");
    extract("  ```python\n  if True:\n      indented = 1\n  ```", "if True:\n    indented = 1\n");
}

static void same_code_ignores_trailing_space_and_blank_edges(void **state)
{
    (void)state;
    assert_true(ptc_repair_same_code("a = 1\nprint(a)\n", "\na = 1   \nprint(a)"));
    assert_false(ptc_repair_same_code("a = 1\nprint(a)\n", "a = 1\nprint(a + 1)\n"));
    assert_false(ptc_repair_same_code("a = 1\n", "a = 1\nb = 2\n"));
    assert_false(ptc_repair_same_code("if x:\n    a = 1\n", "if x:\na = 1\n")); /* indentation */
}

static void diff_summaries_count_lines_added_and_removed(void **state)
{
    (void)state;
    char s[64];
    ptc_repair_diff_summary("a\nb\nc\n", "a\nB\nc\nd\n", s, sizeof s);
    assert_string_equal(s, "+2 -1 lines");
    ptc_repair_diff_summary("a\nb\n", "b\na\n", s, sizeof s);
    assert_string_equal(s, "+0 -0 lines");
    ptc_repair_diff_summary("", "x\n", s, sizeof s);
    assert_string_equal(s, "+1 -0 lines");
}

static void the_request_carries_program_error_tail_and_signatures(void **state)
{
    (void)state;
    char *p = ptc_repair_prompt("print(x)", 2, "NameError: name 'x' is not defined\n",
                                "- tools.srv.echo(message: str)\n");
    assert_non_null(p);
    assert_non_null(strstr(p, "(attempt 2)"));
    assert_non_null(strstr(p, "```python\nprint(x)\n```"));
    assert_non_null(strstr(p, "```\nNameError: name 'x' is not defined\n```"));
    assert_non_null(strstr(p, "- tools.srv.echo(message: str)\n"));
    free(p);
    p = ptc_repair_prompt("print(x)\n", 1, "", NULL);
    assert_non_null(p);
    assert_null(strstr(p, "Tools the program uses"));
    free(p);
    cJSON *k = ptc_repair_packet("E: m", "tail\n", 3, "x = y");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(k, "line")->valueint, 3);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(k, "failing_line")->valuestring, "x = y");
    cJSON_Delete(k);
    k = ptc_repair_packet("E: m", "tail\n", 0, "");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(k, "line")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(k, "failing_line")));
    cJSON_Delete(k);
}

static void journal_keys_are_canonical_json_of_the_arguments(void **state)
{
    (void)state;
    cJSON *a = cJSON_Parse("{\"b\": 1, \"a\": {\"y\": [3, {\"q\": 1, \"p\": 2}], \"x\": \"s\"}}");
    cJSON *b = cJSON_Parse("{\"a\":{\"x\":\"s\",\"y\":[3,{\"p\":2,\"q\":1}]},\"b\":1.0}");
    cJSON *c = cJSON_Parse("{\"a\":{\"x\":\"s\",\"y\":[{\"p\":2,\"q\":1},3]},\"b\":1}");
    char *ka = ptc_journal_key("srv__t", a), *kb = ptc_journal_key("srv__t", b);
    char *kc = ptc_journal_key("srv__t", c), *ko = ptc_journal_key("srv__u", a);
    assert_string_equal(ka, "srv__t\n{\"a\":{\"x\":\"s\",\"y\":[3,{\"p\":2,\"q\":1}]},\"b\":1}");
    assert_string_equal(ka, kb);
    assert_string_not_equal(ka, kc); /* array order is meaning */
    assert_string_not_equal(ka, ko);
    char *kn = ptc_journal_key("srv__t", NULL);
    assert_string_equal(kn, "srv__t\n{}");
    /* The input is not reordered. */
    assert_string_equal(a->child->string, "b");
    free(ka);
    free(kb);
    free(kc);
    free(ko);
    free(kn);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(c);
}

static cJSON *result(const char *text, bool is_error)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(r, "content");
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "type", "text");
    cJSON_AddStringToObject(t, "text", text);
    cJSON_AddItemToArray(content, t);
    if (is_error) cJSON_AddBoolToObject(r, "isError", true);
    return r;
}

static const char *text_of(const cJSON *r)
{
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "content"), 0);
    return cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
}

static void the_journal_keeps_successes_by_occurrence_across_attempts(void **state)
{
    (void)state;
    ptc_journal_t *j = NULL;
    assert_int_equal(ptc_journal_new(&j), 0);
    /* Attempt 1: k twice (ok, ok), m once (error). */
    assert_int_equal(ptc_journal_occurrence(j, "k"), 1);
    cJSON *r1 = result("first", false), *r2 = result("second", false), *re = result("no", true);
    assert_int_equal(ptc_journal_record(j, "k", 1, r1), 0);
    assert_int_equal(ptc_journal_occurrence(j, "k"), 2);
    assert_int_equal(ptc_journal_record(j, "k", 2, r2), 0);
    assert_int_equal(ptc_journal_occurrence(j, "m"), 1);
    assert_int_equal(ptc_journal_record(j, "m", 1, re), 0);
    assert_int_equal(ptc_journal_count(j), 2);
    /* Attempt 2 counts from 1 again and finds the results in order. */
    ptc_journal_begin_attempt(j);
    unsigned occ = ptc_journal_occurrence(j, "k");
    assert_int_equal(occ, 1);
    assert_string_equal(text_of(ptc_journal_lookup(j, "k", occ)), "first");
    occ = ptc_journal_occurrence(j, "k");
    assert_string_equal(text_of(ptc_journal_lookup(j, "k", occ)), "second");
    assert_null(ptc_journal_lookup(j, "k", ptc_journal_occurrence(j, "k")));
    assert_null(ptc_journal_lookup(j, "m", ptc_journal_occurrence(j, "m")));
    /* A kept entry is not replaced by a later result for the same occurrence. */
    cJSON *r3 = result("third", false);
    assert_int_equal(ptc_journal_record(j, "k", 1, r3), 0);
    assert_string_equal(text_of(ptc_journal_lookup(j, "k", 1)), "first");
    ptc_journal_note_replay(j, "srv__k", 1);
    ptc_journal_note_used(j, "srv__k");
    ptc_journal_note_used(j, "srv__k");
    assert_int_equal(cJSON_GetArraySize(ptc_journal_used(j)), 1);
    cJSON *rp = ptc_journal_take_replayed(j);
    assert_int_equal(cJSON_GetArraySize(rp), 1);
    cJSON_Delete(rp);
    rp = ptc_journal_take_replayed(j);
    assert_int_equal(cJSON_GetArraySize(rp), 0);
    cJSON_Delete(rp);
    assert_false(ptc_journal_lost(j));
    cJSON_Delete(r1);
    cJSON_Delete(r2);
    cJSON_Delete(r3);
    cJSON_Delete(re);
    ptc_journal_free(j);
}

static void a_full_journal_is_marked_lost(void **state)
{
    (void)state;
    ptc_journal_t *j = NULL;
    assert_int_equal(ptc_journal_new(&j), 0);
    cJSON *r = result("x", false);
    char key[32];
    int rc = 0;
    for (unsigned i = 0; i <= PTC_JOURNAL_ENTRIES_MAX && rc == 0; i++) {
        snprintf(key, sizeof key, "k%u", i);
        rc = ptc_journal_record(j, key, 1, r);
    }
    assert_int_equal(rc, PTC_REPAIR_EFULL);
    assert_true(ptc_journal_lost(j));
    assert_int_equal(ptc_journal_count(j), PTC_JOURNAL_ENTRIES_MAX);
    cJSON_Delete(r);
    ptc_journal_free(j);
}

static char *content_text_of(const char *json)
{
    cJSON *c = cJSON_Parse(json);
    assert_non_null(c);
    char *t = ptc_repair_content_text(c);
    cJSON_Delete(c);
    return t;
}

static void a_message_content_gives_its_text_blocks_joined(void **state)
{
    (void)state;
    char *t = content_text_of("\"plain\"");
    assert_string_equal(t, "plain");
    free(t);
    t = content_text_of("{\"type\":\"text\",\"text\":\"one\"}");
    assert_string_equal(t, "one");
    free(t);
    /* Blocks without text are skipped; an empty text adds no separator. */
    t = content_text_of("[{\"type\":\"image\",\"data\":\"x\"},{\"type\":\"text\",\"text\":\"\"},"
                        "{\"type\":\"text\",\"text\":\"a\"},\"b\"]");
    assert_string_equal(t, "a\nb");
    free(t);
    assert_null(content_text_of("[{\"type\":\"image\",\"data\":\"x\"}]"));
    assert_null(content_text_of("{\"type\":\"image\",\"data\":\"x\"}"));
    assert_null(content_text_of("42"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fingerprints_strip_numbers_addresses_and_line_numbers),
        cmocka_unit_test(fingerprints_keep_the_innermost_frames_by_file_name),
        cmocka_unit_test(fingerprints_of_syntax_errors_timeouts_signals_and_exits),
        cmocka_unit_test(the_failing_line_is_the_innermost_frame_of_the_program),
        cmocka_unit_test(code_comes_from_a_python_block_else_any_block_else_the_reply),
        cmocka_unit_test(same_code_ignores_trailing_space_and_blank_edges),
        cmocka_unit_test(diff_summaries_count_lines_added_and_removed),
        cmocka_unit_test(the_request_carries_program_error_tail_and_signatures),
        cmocka_unit_test(journal_keys_are_canonical_json_of_the_arguments),
        cmocka_unit_test(the_journal_keeps_successes_by_occurrence_across_attempts),
        cmocka_unit_test(a_full_journal_is_marked_lost),
        cmocka_unit_test(a_message_content_gives_its_text_blocks_joined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
