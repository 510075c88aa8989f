/* The file store behind ptc://files/ URIs: keys, bounds (bytes, entries, TTL), LRU order, name
 * escaping and MIME types; a run's files kept as a result lists them (exec_filestore_keep). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "executor.h"

/* Two owners (the MCP layer's client identities are opaque bytes here). */
static const unsigned char A[EXEC_OWNER_BYTES] = {1};
static const unsigned char B[EXEC_OWNER_BYTES] = {2};

static const unsigned char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

static void put_then_get_returns_the_bytes_under_a_random_key(void **state)
{
    (void)state;
    exec_filestore_t *s;
    assert_int_equal(exec_filestore_new(1 << 20, 8, 60000, &s), 0);
    char *k1, *k2;
    assert_int_equal(exec_filestore_put(s, A, "a.csv", (const unsigned char *)"x,y\n1,2\n", 8,
                                        "text/csv", 0, &k1),
                     0);
    assert_int_equal(
        exec_filestore_put(s, A, "a.csv", (const unsigned char *)"z", 1, "text/csv", 0, &k2), 0);
    /* 32 hex digits, then the name: the same name twice gets two different keys. */
    assert_int_equal(strlen(k1), 32 + 1 + 5);
    assert_string_equal(k1 + 32, "/a.csv");
    assert_string_not_equal(k1, k2);
    exec_stored_file_t f;
    assert_int_equal(exec_filestore_get(s, A, k1, 1, &f), 0);
    assert_string_equal(f.name, "a.csv");
    assert_string_equal(f.mime_type, "text/csv");
    assert_int_equal(f.len, 8);
    assert_memory_equal(f.data, "x,y\n1,2\n", 8);
    assert_int_equal(exec_filestore_entries(s), 2);
    assert_int_equal(exec_filestore_bytes(s), 9);
    free(k1);
    free(k2);
    exec_filestore_free(s);
}

static void a_guessed_or_altered_key_is_unknown(void **state)
{
    (void)state;
    exec_filestore_t *s;
    exec_filestore_new(1 << 20, 8, 60000, &s);
    char *k;
    assert_int_equal(
        exec_filestore_put(s, A, "f.txt", (const unsigned char *)"hi", 2, "text/plain", 0, &k), 0);
    exec_stored_file_t f;
    char bad[128];
    snprintf(bad, sizeof bad, "%s", k);
    bad[0] = bad[0] == '0' ? '1' : '0'; /* one hex digit off */
    assert_int_equal(exec_filestore_get(s, A, bad, 0, &f), EXEC_EEXPIRED);
    snprintf(bad, sizeof bad, "%.33sg.txt", k); /* the right id with another name */
    assert_int_equal(exec_filestore_get(s, A, bad, 0, &f), EXEC_EEXPIRED);
    assert_int_equal(exec_filestore_get(s, A, "f.txt", 0, &f), EXEC_EEXPIRED);
    assert_int_equal(exec_filestore_get(s, A, NULL, 0, &f), EXEC_EEXPIRED);
    assert_int_equal(exec_filestore_get(s, A, k, 0, &f), 0);
    free(k);
    exec_filestore_free(s);
}

static void bounds_evict_least_recently_used_first(void **state)
{
    (void)state;
    exec_filestore_t *s;
    exec_filestore_new(10, 3, 60000, &s);
    unsigned char four[4] = {1, 2, 3, 4};
    char *a, *b, *c, *big;
    assert_int_equal(exec_filestore_put(s, A, "a", four, 4, "application/octet-stream", 0, &a), 0);
    assert_int_equal(exec_filestore_put(s, A, "b", four, 4, "application/octet-stream", 1, &b), 0);
    exec_stored_file_t f;
    assert_int_equal(exec_filestore_get(s, A, a, 2, &f), 0); /* a is now the most recent */
    /* 12 bytes would pass the 10-byte budget: b, the least recently used, goes. */
    assert_int_equal(exec_filestore_put(s, A, "c", four, 4, "application/octet-stream", 3, &c), 0);
    assert_int_equal(exec_filestore_get(s, A, b, 4, &f), EXEC_EEXPIRED);
    assert_int_equal(exec_filestore_get(s, A, a, 4, &f), 0);
    assert_int_equal(exec_filestore_bytes(s), 8);
    /* Larger than the whole store: refused, nothing evicted. */
    unsigned char eleven[11] = {0};
    assert_int_equal(
        exec_filestore_put(s, A, "big", eleven, 11, "application/octet-stream", 5, &big),
        EXEC_ETOOBIG);
    assert_null(big);
    assert_int_equal(exec_filestore_entries(s), 2);
    free(a);
    free(b);
    free(c);
    exec_filestore_free(s);
}

static void entry_count_bound_holds(void **state)
{
    (void)state;
    exec_filestore_t *s;
    exec_filestore_new(1 << 20, 2, 60000, &s);
    char *k[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            exec_filestore_put(s, A, "n", (const unsigned char *)"x", 1, "text/plain", 0, &k[i]),
            0);
    exec_stored_file_t f;
    assert_int_equal(exec_filestore_entries(s), 2);
    assert_int_equal(exec_filestore_get(s, A, k[0], 0, &f), EXEC_EEXPIRED);
    assert_int_equal(exec_filestore_get(s, A, k[2], 0, &f), 0);
    for (int i = 0; i < 3; i++)
        free(k[i]);
    exec_filestore_free(s);
}

static void idle_files_expire_and_reading_refreshes(void **state)
{
    (void)state;
    exec_filestore_t *s;
    exec_filestore_new(1 << 20, 8, 1000, &s);
    char *a, *b;
    exec_filestore_put(s, A, "a", (const unsigned char *)"x", 1, "text/plain", 0, &a);
    exec_filestore_put(s, A, "b", (const unsigned char *)"y", 1, "text/plain", 0, &b);
    exec_stored_file_t f;
    assert_int_equal(exec_filestore_get(s, A, a, 900, &f), 0);
    assert_int_equal(exec_filestore_get(s, A, b, 1000, &f), EXEC_EEXPIRED);
    assert_int_equal(exec_filestore_get(s, A, a, 1800, &f), 0);
    assert_int_equal(exec_filestore_get(s, A, a, 2800, &f), EXEC_EEXPIRED);
    assert_int_equal(exec_filestore_entries(s), 0);
    free(a);
    free(b);
    exec_filestore_free(s);
}

static void bad_arguments_are_refused(void **state)
{
    (void)state;
    exec_filestore_t *s;
    assert_int_equal(exec_filestore_new(0, 8, 1000, &s), EXEC_EINVAL);
    assert_int_equal(exec_filestore_new(1, 8, 1000, &s), 0);
    char *k;
    assert_int_equal(
        exec_filestore_put(s, A, "a/b", (const unsigned char *)"x", 1, "text/plain", 0, &k),
        EXEC_EINVAL);
    assert_int_equal(
        exec_filestore_put(s, A, "", (const unsigned char *)"x", 1, "text/plain", 0, &k),
        EXEC_EINVAL);
    /* An empty file is a file. */
    assert_int_equal(exec_filestore_put(s, A, "empty", NULL, 0, "text/plain", 0, &k), 0);
    free(k);
    exec_filestore_free(s);
}

static void names_escape_to_one_uri_segment(void **state)
{
    (void)state;
    char *e = exec_filestore_escape("a b%c?#é\n.png");
    assert_string_equal(e, "a%20b%25c%3F%23%C3%A9%0A.png");
    free(e);
    e = exec_filestore_escape("plot-1_v2.~x");
    assert_string_equal(e, "plot-1_v2.~x");
    free(e);
}

static void mime_types_need_magic_and_extension_for_images(void **state)
{
    (void)state;
    size_t n = sizeof png - 1;
    assert_string_equal(exec_file_mime_type("p.png", png, n), "image/png");
    assert_string_equal(exec_file_mime_type("P.PNG", png, n), "image/png");
    /* The name says png, the bytes do not (or the other way round): not an image. */
    assert_string_equal(exec_file_mime_type("p.png", (const unsigned char *)"hello", 5),
                        "text/plain");
    assert_string_equal(exec_file_mime_type("p.bin", png, n), "application/octet-stream");
    const unsigned char jpg[] = {0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10};
    assert_string_equal(exec_file_mime_type("x.jpg", jpg, sizeof jpg), "image/jpeg");
    assert_string_equal(exec_file_mime_type("x.jpeg", jpg, sizeof jpg), "image/jpeg");
    assert_string_equal(exec_file_mime_type("g.gif", (const unsigned char *)"GIF89a..", 8),
                        "image/gif");
    assert_string_equal(
        exec_file_mime_type("w.webp", (const unsigned char *)"RIFF\0\0\0\0WEBPVP8 ", 16),
        "image/webp");
    assert_string_equal(exec_file_mime_type("d.csv", (const unsigned char *)"a,b\n", 4),
                        "text/csv");
    assert_string_equal(exec_file_mime_type("d.json", (const unsigned char *)"{}", 2),
                        "application/json");
    assert_string_equal(exec_file_mime_type("d.csv", (const unsigned char *)"a\0b", 3),
                        "application/octet-stream");
    assert_string_equal(exec_file_mime_type("noext", (const unsigned char *)"caf\xc3\xa9", 5),
                        "text/plain");
    /* A character cut at the end of the data (a file's first bytes) is still text; base's
     * rule otherwise: surrogates, overlongs and a cut character inside are binary. */
    assert_string_equal(exec_file_mime_type("noext", (const unsigned char *)"ok \xe2\x82", 5),
                        "text/plain");
    assert_string_equal(exec_file_mime_type("d.txt", (const unsigned char *)"\xed\xa0\x80", 3),
                        "application/octet-stream");
    assert_string_equal(exec_file_mime_type("d.txt", (const unsigned char *)"\xc0\xaf.", 3),
                        "application/octet-stream");
    assert_string_equal(exec_file_mime_type("d.txt", (const unsigned char *)"\xe2\x82.", 3),
                        "application/octet-stream");
    assert_string_equal(exec_file_mime_type("d.txt", (const unsigned char *)"\x82", 1),
                        "application/octet-stream");
    assert_true(exec_mime_is_image("image/webp"));
    assert_false(exec_mime_is_image("image/svg+xml"));
    assert_true(exec_mime_is_text("text/csv"));
    assert_true(exec_mime_is_text("application/json"));
    assert_false(exec_mime_is_text("image/png"));
}

static void another_owners_key_is_unknown_and_refreshes_nothing(void **state)
{
    (void)state;
    exec_filestore_t *s;
    assert_int_equal(exec_filestore_new(1 << 20, 8, 1000, &s), 0);
    char *k;
    assert_int_equal(exec_filestore_put(s, A, "secret.txt", (const unsigned char *)"s3cret", 6,
                                        "text/plain", 0, &k),
                     0);
    exec_stored_file_t f;
    /* The same answer as a key that never existed, and no bytes handed out. */
    assert_int_equal(exec_filestore_get(s, B, k, 500, &f), EXEC_EEXPIRED);
    assert_null(f.data);
    assert_null(f.name);
    assert_int_equal(exec_filestore_get(s, A, k, 600, &f), 0);
    assert_memory_equal(f.data, "s3cret", 6);
    /* B's read did not keep it alive: unread by A since 600, it expires at 1600. */
    assert_int_equal(exec_filestore_get(s, B, k, 1500, &f), EXEC_EEXPIRED);
    assert_int_equal(exec_filestore_get(s, A, k, 1600, &f), EXEC_EEXPIRED);
    free(k);
    exec_filestore_free(s);
}

static void dropping_an_owner_forgets_only_its_files(void **state)
{
    (void)state;
    exec_filestore_t *s;
    assert_int_equal(exec_filestore_new(1 << 20, 8, 60000, &s), 0);
    char *a1, *a2, *b1;
    exec_filestore_put(s, A, "a1", (const unsigned char *)"x", 1, "text/plain", 0, &a1);
    exec_filestore_put(s, B, "b1", (const unsigned char *)"yy", 2, "text/plain", 0, &b1);
    exec_filestore_put(s, A, "a2", (const unsigned char *)"z", 1, "text/plain", 0, &a2);
    assert_int_equal(exec_filestore_drop_owner(s, A), 2);
    assert_int_equal(exec_filestore_entries(s), 1);
    assert_int_equal(exec_filestore_bytes(s), 2);
    exec_stored_file_t f;
    assert_int_equal(exec_filestore_get(s, A, a1, 1, &f), EXEC_EEXPIRED);
    assert_int_equal(exec_filestore_get(s, A, a2, 1, &f), EXEC_EEXPIRED);
    assert_int_equal(exec_filestore_get(s, B, b1, 1, &f), 0);
    assert_string_equal(f.name, "b1");
    assert_int_equal(exec_filestore_drop_owner(s, A), 0);
    free(a1);
    free(a2);
    free(b1);
    exec_filestore_free(s);
}

/* A file as a run hands it back. */
static exec_file_t file_of(const char *name, const unsigned char *data, size_t len)
{
    return (exec_file_t){.name = name, .data = data, .len = len, .size = len};
}

static char *line_of(const exec_kept_file_t *k, const char *uri)
{
    ptc_buf_t b;
    ptc_buf_init(&b, 4096);
    assert_int_equal(exec_kept_file_line(&b, k, uri), 0);
    char *t = ptc_buf_take(&b, NULL);
    assert_non_null(t);
    return t;
}

static void kept_files_are_stored_and_shown_as_images_within_bounds(void **state)
{
    (void)state;
    exec_filestore_t *s;
    assert_int_equal(exec_filestore_new(64, 8, 60000, &s), 0);
    const exec_keep_bounds_t b = {.image_max = 1000, .images_max = sizeof png + 4};
    size_t shown = 0;
    exec_kept_file_t k;
    exec_file_t f = file_of("plot.png", png, sizeof png);
    assert_int_equal(exec_filestore_keep(s, A, &f, 0, &b, &shown, &k), 0);
    assert_string_equal(k.mime, "image/png");
    assert_non_null(k.key);
    assert_true(k.picture);
    assert_null(k.reason);
    assert_int_equal(shown, sizeof png);
    exec_stored_file_t got;
    assert_int_equal(exec_filestore_get(s, A, k.key, 1, &got), 0);
    char *t = line_of(&k, "ptc://files/K");
    assert_string_equal(t, "- plot.png (image/png, 17 bytes) ptc://files/K [shown as an image]\n");
    free(t);
    exec_kept_file_clear(&k);

    /* a second image passes what one result may carry: kept, not shown, with a note */
    assert_int_equal(exec_filestore_keep(s, A, &f, 0, &b, &shown, &k), 0);
    assert_false(k.picture);
    assert_true(k.noted);
    assert_non_null(strstr(k.reason, "one message may carry"));
    t = line_of(&k, NULL);
    assert_non_null(strstr(t, "; note: not shown: the result's images"));
    free(t);
    exec_kept_file_clear(&k);

    /* larger than the whole store: omitted, saying why; a bad name byte is U+FFFD */
    unsigned char big[100] = {0};
    f = file_of("big\xff.bin", big, sizeof big);
    assert_int_equal(exec_filestore_keep(s, A, &f, 0, &b, &shown, &k), 0);
    assert_true(k.omitted);
    assert_null(k.key);
    assert_string_equal(k.name, "big\xef\xbf\xbd.bin");
    t = line_of(&k, NULL);
    assert_non_null(strstr(t, "100 bytes; omitted: larger than the server's whole file store"));
    free(t);
    exec_kept_file_clear(&k);

    /* what the run cut or left out stays so */
    f = file_of("cut.png", png, 8);
    f.size = 5000;
    f.truncated = true;
    f.reason = "larger than the file bound";
    assert_int_equal(exec_filestore_keep(s, A, &f, 0, &b, &shown, &k), 0);
    assert_false(k.picture); /* a cut image would show broken */
    assert_non_null(k.key);
    t = line_of(&k, NULL);
    assert_non_null(strstr(t, "5000 bytes; truncated: larger than the file bound)"));
    free(t);
    exec_kept_file_clear(&k);
    assert_int_equal(exec_filestore_keep(NULL, A, &f, 0, &b, &shown, &k), EXEC_EINVAL);
    exec_filestore_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_then_get_returns_the_bytes_under_a_random_key),
        cmocka_unit_test(a_guessed_or_altered_key_is_unknown),
        cmocka_unit_test(another_owners_key_is_unknown_and_refreshes_nothing),
        cmocka_unit_test(dropping_an_owner_forgets_only_its_files),
        cmocka_unit_test(bounds_evict_least_recently_used_first),
        cmocka_unit_test(entry_count_bound_holds),
        cmocka_unit_test(idle_files_expire_and_reading_refreshes),
        cmocka_unit_test(bad_arguments_are_refused),
        cmocka_unit_test(names_escape_to_one_uri_segment),
        cmocka_unit_test(mime_types_need_magic_and_extension_for_images),
        cmocka_unit_test(kept_files_are_stored_and_shown_as_images_within_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
