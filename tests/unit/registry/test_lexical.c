/* The lexical embedder: unit norm, determinism, similarity order, IDF, options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "registry.h"

static const char *const corpus[] = {
    "list issues. List the issues of a repository. repo. Owner and repository name.",
    "create issue. Create a new issue in a repository. title. Issue title.",
    "send message. Send a chat message to a channel. channel id. Channel to post in.",
    "get weather forecast. Daily weather forecast for a location. latitude. longitude.",
    "search files. Find files whose names match a pattern. pattern. Glob pattern.",
};
#define NDOCS (sizeof corpus / sizeof corpus[0])

static double dotp(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * (double)b[i];
    return s;
}

static reg_embedder_t *fitted(void)
{
    reg_embedder_t *e;
    assert_int_equal(reg_lexical_new(NULL, &e), REG_OK);
    assert_int_equal(reg_embedder_fit(e, corpus, NDOCS), REG_OK);
    return e;
}

static float *embed(reg_embedder_t *e, const char *text)
{
    size_t dim = reg_embedder_dim(e);
    float *v = malloc(dim * sizeof *v);
    assert_non_null(v);
    char msg[256];
    const char *t[1] = {text};
    assert_int_equal(reg_embedder_embed(e, t, 1, REG_EMBED_QUERY, v, msg, sizeof msg), REG_OK);
    return v;
}

static void test_vectors_are_unit_length(void **state)
{
    (void)state;
    reg_embedder_t *e = fitted();
    size_t dim = reg_embedder_dim(e);
    assert_string_equal(reg_embedder_name(e), "lexical");
    float *m = malloc(NDOCS * dim * sizeof *m);
    assert_non_null(m);
    assert_int_equal(reg_embedder_embed(e, corpus, NDOCS, REG_EMBED_DOCUMENT, m, NULL, 0), REG_OK);
    for (size_t i = 0; i < NDOCS; i++)
        assert_true(fabs(dotp(m + i * dim, m + i * dim, dim) - 1.0) < 1e-5);
    free(m);
    /* Text without features gives the zero vector, not NaN. */
    float *z = embed(e, " ,;. ");
    assert_true(dotp(z, z, dim) == 0.0);
    free(z);
    reg_embedder_free(e);
}

static void test_deterministic_across_instances(void **state)
{
    (void)state;
    reg_embedder_t *a = fitted(), *b = fitted();
    float *x = embed(a, "find the open issues in my repo");
    float *y = embed(b, "find the open issues in my repo");
    assert_memory_equal(x, y, reg_embedder_dim(a) * sizeof *x);
    free(x);
    free(y);
    reg_embedder_free(a);
    reg_embedder_free(b);
}

static void test_similar_texts_are_closer(void **state)
{
    (void)state;
    reg_embedder_t *e = fitted();
    size_t dim = reg_embedder_dim(e);
    float *q = embed(e, "listing repository issues");
    float *near = embed(e, corpus[0]);
    float *far = embed(e, corpus[3]);
    assert_true(dotp(q, near, dim) > dotp(q, far, dim) + 0.1);
    /* Identifier styles and inflections meet: camelCase name vs prose. */
    float *ident = embed(e, "sendChatMessage");
    float *prose = embed(e, "send chat messages");
    float *other = embed(e, "weather forecast");
    assert_true(dotp(ident, prose, dim) > 0.5);
    assert_true(dotp(ident, prose, dim) > dotp(ident, other, dim) + 0.3);
    free(q);
    free(near);
    free(far);
    free(ident);
    free(prose);
    free(other);
    reg_embedder_free(e);
}

static void test_idf_discounts_common_words(void **state)
{
    (void)state;
    /* "repository" is in two documents, "weather" in one: after fitting, a query of both
     * words leans towards the weather document. */
    reg_embedder_t *e = fitted();
    size_t dim = reg_embedder_dim(e);
    float *q = embed(e, "repository weather");
    float *repo = embed(e, "repository");
    float *weather = embed(e, "weather");
    assert_true(dotp(q, weather, dim) > dotp(q, repo, dim));
    free(q);
    free(repo);
    free(weather);
    reg_embedder_free(e);
}

static void test_bad_options_are_refused(void **state)
{
    (void)state;
    reg_lexical_opts_t o;
    reg_embedder_t *e = NULL;
    reg_lexical_opts_default(&o);
    o.dim = 0;
    assert_int_equal(reg_lexical_new(&o, &e), REG_EINVAL);
    reg_lexical_opts_default(&o);
    o.dim = REG_DIM_MAX + 1;
    assert_int_equal(reg_lexical_new(&o, &e), REG_EINVAL);
    reg_lexical_opts_default(&o);
    o.ngram_min = 5;
    o.ngram_max = 3;
    assert_int_equal(reg_lexical_new(&o, &e), REG_EINVAL);
    reg_lexical_opts_default(&o);
    o.word_weight = o.ngram_weight = o.bigram_weight = 0;
    assert_int_equal(reg_lexical_new(&o, &e), REG_EINVAL);
    assert_null(e);
    /* A small custom dimension works. */
    reg_lexical_opts_default(&o);
    o.dim = 64;
    assert_int_equal(reg_lexical_new(&o, &e), REG_OK);
    assert_int_equal(reg_embedder_dim(e), 64);
    reg_embedder_free(e);
}

/* Stands in for the wiring's HTTP-backed provider: a lexical embedder under another name. */
static int fake_remote(const reg_embedder_spec_t *spec, void *data, reg_embedder_t **out, char *msg,
                       size_t msg_size)
{
    (void)msg;
    (void)msg_size;
    ++*(int *)data;
    int rc = reg_lexical_new(NULL, out);
    if (rc == REG_OK) (*out)->name = spec->remote_model ? "remote:nomic-embed-text" : "remote:?";
    return rc;
}

static void test_open_by_spec_never_falls_back_silently(void **state)
{
    (void)state;
    reg_embedder_t *e = NULL;
    char note[512], msg[512];
    reg_embedder_spec_t spec = {.kind = "lexical"};
    assert_int_equal(reg_embedder_open(&spec, &e, note, sizeof note, msg, sizeof msg), REG_OK);
    assert_string_equal(reg_embedder_name(e), "lexical");
    assert_string_equal(note, "");
    reg_embedder_free(e);

    spec.kind = "auto";
    assert_int_equal(reg_embedder_open(&spec, &e, note, sizeof note, msg, sizeof msg), REG_OK);
    if (strcmp(reg_embedder_name(e), "lexical") == 0)
        assert_non_null(strstr(note, "lexical"));
    else
        assert_true(strncmp(reg_embedder_name(e), "model:", 6) == 0 && note[0] == 0);
    reg_embedder_free(e);

    spec.kind = "word2vec";
    e = NULL;
    assert_int_equal(reg_embedder_open(&spec, &e, note, sizeof note, msg, sizeof msg), REG_EINVAL);
    assert_null(e);
    assert_non_null(strstr(msg, "word2vec"));

    /* "remote" uses the constructor the wiring supplies, and only that. */
    spec.kind = "remote";
    assert_int_equal(reg_embedder_open(&spec, &e, note, sizeof note, msg, sizeof msg), REG_ENOTSUP);
    assert_null(e);
    int called = 0;
    spec.open_remote = fake_remote;
    spec.open_remote_data = &called;
    spec.remote_model = "nomic-embed-text";
    assert_int_equal(reg_embedder_open(&spec, &e, note, sizeof note, msg, sizeof msg), REG_OK);
    assert_int_equal(called, 1);
    assert_string_equal(reg_embedder_name(e), "remote:nomic-embed-text");
    reg_embedder_free(e);
    spec.open_remote = NULL;

    /* Asking for the model by name either gives the model or fails: never lexical. */
    spec.kind = "model";
    spec.model_dir = "/nonexistent/model/dir";
    int rc = reg_embedder_open(&spec, &e, note, sizeof note, msg, sizeof msg);
    assert_true(rc < 0);
    assert_null(e);
    assert_true(msg[0] != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors_are_unit_length),
        cmocka_unit_test(test_deterministic_across_instances),
        cmocka_unit_test(test_similar_texts_are_closer),
        cmocka_unit_test(test_idf_discounts_common_words),
        cmocka_unit_test(test_bad_options_are_refused),
        cmocka_unit_test(test_open_by_spec_never_falls_back_silently),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
