/* The on-disk embedding cache: round trip, corrupt files, bounds, XDG default, wrapper. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../test_util.h"

#include "registry.h"

#define DIM 16

/* Finds the one entry file under dir (dir/xx/<hex>.vec). */
static int find_entry(const char *dir, char *out, size_t out_size)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)) != NULL) {
        if (strlen(e->d_name) != 2 || e->d_name[0] == '.') continue;
        char sub[2048];
        snprintf(sub, sizeof sub, "%s/%.2s", dir, e->d_name);
        DIR *s = opendir(sub);
        struct dirent *f;
        while (s && (f = readdir(s)) != NULL) {
            if (strstr(f->d_name, ".vec") == NULL) continue;
            snprintf(out, out_size, "%.2048s/%.255s", sub, f->d_name);
            found++;
        }
        if (s) closedir(s);
    }
    if (d) closedir(d);
    return found;
}

static void fill(float *v, float base)
{
    for (int i = 0; i < DIM; i++)
        v[i] = base + (float)i;
}

static void test_round_trip_and_miss(void **state)
{
    (void)state;
    char *dir = tu_temp_dir("ptc-reg-cache");
    reg_cache_t *c;
    char msg[512];
    assert_int_equal(reg_cache_open(dir, 0, &c, msg, sizeof msg), REG_OK);
    float v[DIM], out[DIM];
    fill(v, 0.5f);
    assert_int_equal(reg_cache_get(c, "model", "m1", "hello", DIM, out), REG_ENOENT);
    assert_int_equal(reg_cache_put(c, "model", "m1", "hello", DIM, v), REG_OK);
    assert_int_equal(reg_cache_get(c, "model", "m1", "hello", DIM, out), REG_OK);
    assert_memory_equal(v, out, sizeof v);
    /* Every key part matters; the length prefix keeps ("ab","c") apart from ("a","bc"). */
    assert_int_equal(reg_cache_get(c, "model", "m2", "hello", DIM, out), REG_ENOENT);
    assert_int_equal(reg_cache_get(c, "remote", "m1", "hello", DIM, out), REG_ENOENT);
    assert_int_equal(reg_cache_get(c, "model", "m1", "hello!", DIM, out), REG_ENOENT);
    assert_int_equal(reg_cache_put(c, "ab", "c", "t", DIM, v), REG_OK);
    assert_int_equal(reg_cache_get(c, "a", "bc", "t", DIM, out), REG_ENOENT);
    assert_int_equal(reg_cache_get(c, "model", "m1", "hello", DIM - 1, out), REG_EDIM);
    assert_true(reg_cache_bytes(c) > 0);
    reg_cache_close(c);
    /* A new handle sees the entries (and counts their bytes). */
    assert_int_equal(reg_cache_open(dir, 0, &c, msg, sizeof msg), REG_OK);
    assert_true(reg_cache_bytes(c) > 0);
    assert_int_equal(reg_cache_get(c, "model", "m1", "hello", DIM, out), REG_OK);
    assert_memory_equal(v, out, sizeof v);
    reg_cache_close(c);
    tu_remove_tree(dir);
    free(dir);
}

static void corrupt_and_check(void (*damage)(const char *path))
{
    char *dir = tu_temp_dir("ptc-reg-cache");
    reg_cache_t *c;
    assert_int_equal(reg_cache_open(dir, 0, &c, NULL, 0), REG_OK);
    float v[DIM], out[DIM];
    fill(v, 1.0f);
    assert_int_equal(reg_cache_put(c, "model", "m", "text", DIM, v), REG_OK);
    char path[4096];
    assert_int_equal(find_entry(dir, path, sizeof path), 1);
    damage(path);
    assert_int_equal(reg_cache_get(c, "model", "m", "text", DIM, out), REG_ECORRUPT);
    /* The bad file is gone: the next lookup is a plain miss, and a put repairs it. */
    assert_int_equal(find_entry(dir, path, sizeof path), 0);
    assert_int_equal(reg_cache_get(c, "model", "m", "text", DIM, out), REG_ENOENT);
    assert_int_equal(reg_cache_put(c, "model", "m", "text", DIM, v), REG_OK);
    assert_int_equal(reg_cache_get(c, "model", "m", "text", DIM, out), REG_OK);
    reg_cache_close(c);
    tu_remove_tree(dir);
    free(dir);
}

static void flip_payload_byte(const char *path)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char b;
    assert_int_equal(pread(fd, &b, 1, 60), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, 60), 1);
    close(fd);
}

static void truncate_file(const char *path)
{
    assert_int_equal(truncate(path, 30), 0);
}

static void empty_file(const char *path)
{
    assert_int_equal(truncate(path, 0), 0);
}

static void garbage_file(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 200; i++)
        fputc('Z', f);
    fclose(f);
}

static void test_corrupt_files_are_detected_and_removed(void **state)
{
    (void)state;
    corrupt_and_check(flip_payload_byte);
    corrupt_and_check(truncate_file);
    corrupt_and_check(empty_file);
    corrupt_and_check(garbage_file);
}

static void test_size_is_bounded(void **state)
{
    (void)state;
    char *dir = tu_temp_dir("ptc-reg-cache");
    reg_cache_t *c;
    const size_t entry = 48 + DIM * 4 + 32, max = 10 * entry;
    assert_int_equal(reg_cache_open(dir, max, &c, NULL, 0), REG_OK);
    float v[DIM], out[DIM];
    char text[32];
    for (int i = 0; i < 40; i++) {
        fill(v, (float)i);
        snprintf(text, sizeof text, "text %d", i);
        assert_int_equal(reg_cache_put(c, "model", "m", text, DIM, v), REG_OK);
        assert_true(reg_cache_bytes(c) <= max);
    }
    /* The newest entry survived eviction. */
    assert_int_equal(reg_cache_get(c, "model", "m", "text 39", DIM, out), REG_OK);
    assert_true(out[0] == 39.0f);
    reg_cache_close(c);
    tu_remove_tree(dir);
    free(dir);
}

static void test_default_dir_follows_xdg(void **state)
{
    (void)state;
    char *dir = tu_temp_dir("ptc-reg-cache");
    const char *old = getenv("XDG_CACHE_HOME");
    char *saved = old ? strdup(old) : NULL;
    setenv("XDG_CACHE_HOME", dir, 1);
    reg_cache_t *c;
    char msg[512];
    assert_int_equal(reg_cache_open(NULL, 0, &c, msg, sizeof msg), REG_OK);
    char want[4096];
    snprintf(want, sizeof want, "%s/ptc-mcp/embeddings", dir);
    assert_string_equal(reg_cache_dir(c), want);
    struct stat st;
    assert_int_equal(stat(want, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    reg_cache_close(c);
    if (saved) {
        setenv("XDG_CACHE_HOME", saved, 1);
        free(saved);
    } else {
        unsetenv("XDG_CACHE_HOME");
    }
    tu_remove_tree(dir);
    free(dir);
}

static void set_or_unset(const char *name, char *saved)
{
    if (saved) {
        setenv(name, saved, 1);
        free(saved);
    } else {
        unsetenv(name);
    }
}

static void test_cache_base_is_xdg_then_home(void **state)
{
    (void)state;
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    char *saved_xdg = x ? strdup(x) : NULL, *saved_home = h ? strdup(h) : NULL;
    char out[4096];
    setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
    setenv("HOME", "/home/u", 1);
    assert_int_equal(reg_cache_base(out, sizeof out), REG_OK);
    assert_string_equal(out, "/xdg/cache/ptc-mcp");
    assert_int_equal(reg_cache_base(out, 8), REG_ETOOBIG);
    /* A relative XDG_CACHE_HOME is ignored, as the XDG spec says. */
    setenv("XDG_CACHE_HOME", "rel/cache", 1);
    assert_int_equal(reg_cache_base(out, sizeof out), REG_OK);
    assert_string_equal(out, "/home/u/.cache/ptc-mcp");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    assert_int_equal(reg_cache_base(out, sizeof out), REG_EINVAL);
    set_or_unset("XDG_CACHE_HOME", saved_xdg);
    set_or_unset("HOME", saved_home);
}

/* Every entry file under dir (dir/xx/<hex>.vec), up to max. */
static size_t list_entries(const char *dir, char paths[][4096], size_t max)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strlen(e->d_name) != 2 || e->d_name[0] == '.') continue;
        char sub[2048];
        snprintf(sub, sizeof sub, "%.1000s/%.2s", dir, e->d_name);
        DIR *s = opendir(sub);
        struct dirent *f;
        while (s && (f = readdir(s)) != NULL)
            if (strstr(f->d_name, ".vec") != NULL && n < max)
                snprintf(paths[n++], 4096, "%.2048s/%.255s", sub, f->d_name);
        if (s) closedir(s);
    }
    if (d) closedir(d);
    return n;
}

/* The path of the one entry in now[] that is not in before[]. */
static void new_entry(const char *dir, char before[][4096], size_t n_before, char *out)
{
    char now[8][4096];
    size_t n = list_entries(dir, now, 8);
    assert_int_equal(n, n_before + 1);
    for (size_t i = 0; i < n; i++) {
        bool old = false;
        for (size_t j = 0; j < n_before; j++)
            old = old || strcmp(now[i], before[j]) == 0;
        if (!old) {
            snprintf(out, 4096, "%s", now[i]);
            return;
        }
    }
    fail_msg("no new entry in %s", dir);
}

static void set_mtime(const char *path, time_t t)
{
    struct timespec ts[2] = {{t, 0}, {t, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static void test_prune_removes_entries_unused_past_the_age(void **state)
{
    (void)state;
    char *dir = tu_temp_dir("ptc-reg-cache");
    reg_cache_t *c;
    char msg[512];
    assert_int_equal(reg_cache_open(dir, 0, &c, msg, sizeof msg), REG_OK);
    float v[DIM], out[DIM];
    fill(v, 1.0f);
    static char paths[3][4096];
    const char *texts[3] = {"old", "recent", "fresh"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(reg_cache_put(c, "model", "m", texts[i], DIM, v), REG_OK);
        new_entry(dir, paths, i, paths[i]);
    }
    const time_t now = time(NULL);
    const long day = 24 * 60 * 60;
    set_mtime(paths[0], now - 31 * day);
    set_mtime(paths[1], now - 29 * day);
    size_t bytes = reg_cache_bytes(c);

    assert_int_equal(reg_cache_prune(c, now, REG_CACHE_PRUNE_AGE_S), 1);
    assert_true(reg_cache_bytes(c) < bytes);
    assert_int_equal(reg_cache_get(c, "model", "m", "old", DIM, out), REG_ENOENT);
    assert_int_equal(reg_cache_get(c, "model", "m", "fresh", DIM, out), REG_OK);
    /* Two days on, "recent" is past the age too; "fresh" was just used and stays. */
    assert_int_equal(reg_cache_prune(c, now + 2 * day, REG_CACHE_PRUNE_AGE_S), 1);
    assert_int_equal(reg_cache_get(c, "model", "m", "recent", DIM, out), REG_ENOENT);
    assert_int_equal(reg_cache_get(c, "model", "m", "fresh", DIM, out), REG_OK);
    assert_memory_equal(v, out, sizeof v);
    /* A hit touches its entry: used entries are never "unused". */
    set_mtime(paths[2], now - 40 * day);
    assert_int_equal(reg_cache_get(c, "model", "m", "fresh", DIM, out), REG_OK);
    assert_int_equal(reg_cache_prune(c, now, REG_CACHE_PRUNE_AGE_S), 0);
    assert_int_equal(reg_cache_prune(NULL, now, REG_CACHE_PRUNE_AGE_S), REG_EINVAL);
    reg_cache_close(c);
    tu_remove_tree(dir);
    free(dir);
}

/* A provider that counts the texts it was asked to embed: the wrapper must only pass misses. */
typedef struct counting {
    size_t texts;
} counting_t;

static int count_embed(reg_embedder_t *self, const char *const *texts, size_t n,
                       reg_embed_kind_t kind, float *out, char *msg, size_t msg_size)
{
    (void)msg;
    (void)msg_size;
    counting_t *c = self->impl;
    for (size_t i = 0; i < n; i++) {
        for (int d = 0; d < DIM; d++)
            out[i * DIM + d] = (float)(strlen(texts[i]) + (size_t)d + kind);
        c->texts++;
    }
    return REG_OK;
}

static void count_destroy(reg_embedder_t *self)
{
    free(self->impl);
}

static reg_embedder_t *counting_new(void)
{
    reg_embedder_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    e->name = "model:counting";
    e->cache_provider = "model";
    e->cache_model = "counting-v1";
    e->dim = DIM;
    e->embed = count_embed;
    e->destroy = count_destroy;
    e->impl = calloc(1, sizeof(counting_t));
    assert_non_null(e->impl);
    return e;
}

static void test_cached_embedder_embeds_only_misses(void **state)
{
    (void)state;
    char *dir = tu_temp_dir("ptc-reg-cache");
    reg_cache_t *c;
    assert_int_equal(reg_cache_open(dir, 0, &c, NULL, 0), REG_OK);
    reg_embedder_t *inner = counting_new();
    counting_t *cnt = inner->impl;
    reg_embedder_t *e;
    assert_int_equal(reg_cached_embedder_new(inner, c, &e), REG_OK);
    assert_string_equal(reg_embedder_name(e), "model:counting");
    const char *texts[] = {"alpha", "beta", "gamma"};
    float a[3 * DIM], b[3 * DIM];
    assert_int_equal(reg_embedder_embed(e, texts, 3, REG_EMBED_DOCUMENT, a, NULL, 0), REG_OK);
    assert_int_equal(cnt->texts, 3);
    const char *more[] = {"beta", "delta", "alpha"};
    assert_int_equal(reg_embedder_embed(e, more, 3, REG_EMBED_DOCUMENT, b, NULL, 0), REG_OK);
    assert_int_equal(cnt->texts, 4); /* only "delta" was new */
    assert_memory_equal(b, a + DIM, DIM * sizeof(float));
    assert_memory_equal(b + 2 * DIM, a, DIM * sizeof(float));
    /* Queries are cached apart from documents (a model may embed them differently). */
    assert_int_equal(reg_embedder_embed(e, texts, 1, REG_EMBED_QUERY, b, NULL, 0), REG_OK);
    assert_int_equal(cnt->texts, 5);
    reg_embedder_free(e);

    /* The lexical embedder says its vectors must not be cached: returned unwrapped. */
    reg_embedder_t *lex, *w;
    assert_int_equal(reg_lexical_new(NULL, &lex), REG_OK);
    assert_int_equal(reg_cached_embedder_new(lex, c, &w), REG_OK);
    assert_ptr_equal(w, lex);
    reg_embedder_free(w);
    reg_cache_close(c);
    tu_remove_tree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_and_miss),
        cmocka_unit_test(test_corrupt_files_are_detected_and_removed),
        cmocka_unit_test(test_size_is_bounded),
        cmocka_unit_test(test_default_dir_follows_xdg),
        cmocka_unit_test(test_cache_base_is_xdg_then_home),
        cmocka_unit_test(test_prune_removes_entries_unused_past_the_age),
        cmocka_unit_test(test_cached_embedder_embeds_only_misses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
