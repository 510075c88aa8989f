/* embedder.c - the provider-independent embedder calls. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int reg_embedder_embed(reg_embedder_t *e, const char *const *texts, size_t n, reg_embed_kind_t kind,
                       float *out, char *msg, size_t msg_size)
{
    return reg_embedder_embed_stop(e, texts, n, kind, NULL, out, msg, msg_size);
}

static bool stop_set(const atomic_bool *stop)
{
    return stop != NULL && atomic_load_explicit(stop, memory_order_relaxed);
}

int reg_embedder_embed_stop(reg_embedder_t *e, const char *const *texts, size_t n,
                            reg_embed_kind_t kind, const atomic_bool *stop, float *out, char *msg,
                            size_t msg_size)
{
    if (e == NULL || e->embed == NULL || (n > 0 && (texts == NULL || out == NULL)))
        return reg__fail(msg, msg_size, REG_EINVAL, "no embedder, texts or output given");
    for (size_t i = 0; i < n; i++)
        if (texts[i] == NULL) return reg__fail(msg, msg_size, REG_EINVAL, "text #%zu is NULL", i);
    if (n == 0) return REG_OK;
    if (stop == NULL) return e->embed(e, texts, n, kind, out, msg, msg_size);
    if (e->embed_stop != NULL) return e->embed_stop(e, texts, n, kind, stop, out, msg, msg_size);
    /* A provider that cannot watch the flag itself is stopped between slices. */
    for (size_t i = 0; i < n; i += REG_STOP_SLICE) {
        if (stop_set(stop)) return reg__fail(msg, msg_size, REG_ECANCELED, "stopped on request");
        size_t m = n - i < REG_STOP_SLICE ? n - i : REG_STOP_SLICE;
        int rc = e->embed(e, texts + i, m, kind, out + i * e->dim, msg, msg_size);
        if (rc < 0) return rc;
    }
    return REG_OK;
}

int reg_embedder_fit(reg_embedder_t *e, const char *const *docs, size_t n)
{
    if (e == NULL || (n > 0 && docs == NULL)) return REG_EINVAL;
    if (e->fit == NULL) return REG_OK;
    return e->fit(e, docs, n);
}

const char *reg_embedder_name(const reg_embedder_t *e)
{
    return e && e->name ? e->name : "none";
}

size_t reg_embedder_dim(const reg_embedder_t *e)
{
    return e ? e->dim : 0;
}

void reg_embedder_free(reg_embedder_t *e)
{
    if (e == NULL) return;
    if (e->destroy != NULL) e->destroy(e);
    free(e);
}

/* Providers other than the lexical one plug in here: each case constructs its embedder from
 * the spec. A provider that cannot be opened fails with a message saying what to install;
 * "auto" then falls back to the lexical embedder with a note for the log. */
static int open_model(const reg_embedder_spec_t *spec, reg_embedder_t **out, char *msg,
                      size_t msg_size)
{
    return reg__model_embedder_open(spec ? spec->model_dir : NULL, out, msg, msg_size);
}

static int open_remote(const reg_embedder_spec_t *spec, reg_embedder_t **out, char *msg,
                       size_t msg_size)
{
    *out = NULL;
    if (spec == NULL || spec->open_remote == NULL)
        return reg__fail(msg, msg_size, REG_ENOTSUP,
                         "the remote embedding provider is not built into this binary; "
                         "use --embedder lexical");
    int rc = spec->open_remote(spec, spec->open_remote_data, out, msg, msg_size);
    if (rc == REG_OK &&
        (*out == NULL || (*out)->embed == NULL || (*out)->dim == 0 || (*out)->dim > REG_DIM_MAX)) {
        reg_embedder_free(*out);
        *out = NULL;
        return reg__fail(msg, msg_size, REG_EINVAL,
                         "the remote provider returned no usable embedder");
    }
    return rc;
}

int reg_embedder_open(const reg_embedder_spec_t *spec, reg_embedder_t **out, char *note,
                      size_t note_size, char *msg, size_t msg_size)
{
    if (note != NULL && note_size > 0) note[0] = 0;
    if (out == NULL) return reg__fail(msg, msg_size, REG_EINVAL, "no output pointer given");
    *out = NULL;
    const char *kind = spec && spec->kind ? spec->kind : "auto";
    if (strcmp(kind, "lexical") == 0) {
        int rc = reg_lexical_new(NULL, out);
        return rc < 0 ? reg__fail(msg, msg_size, rc, "lexical embedder: %s", reg_strerror(rc))
                      : REG_OK;
    }
    if (strcmp(kind, "model") == 0) return open_model(spec, out, msg, msg_size);
    if (strcmp(kind, "remote") == 0) return open_remote(spec, out, msg, msg_size);
    if (strcmp(kind, "auto") != 0)
        return reg__fail(msg, msg_size, REG_EINVAL,
                         "unknown embedder \"%s\": use auto, model, lexical or remote", kind);
    char why[512];
    int rc = open_model(spec, out, why, sizeof why);
    if (rc == REG_OK) return REG_OK;
    rc = reg_lexical_new(NULL, out);
    if (rc < 0) return reg__fail(msg, msg_size, rc, "lexical embedder: %s", reg_strerror(rc));
    reg__fail(note, note_size, REG_OK, "embedder: using lexical (no model: %s)", why);
    return REG_OK;
}
