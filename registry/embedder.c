/* embedder.c - the provider-independent embedder calls. */
#include "internal.h"

#include <stdlib.h>

int reg_embedder_embed(reg_embedder_t *e, const char *const *texts, size_t n, reg_embed_kind_t kind,
                       float *out, char *msg, size_t msg_size)
{
    if (e == NULL || e->embed == NULL || (n > 0 && (texts == NULL || out == NULL)))
        return reg__fail(msg, msg_size, REG_EINVAL, "no embedder, texts or output given");
    for (size_t i = 0; i < n; i++)
        if (texts[i] == NULL) return reg__fail(msg, msg_size, REG_EINVAL, "text #%zu is NULL", i);
    if (n == 0) return REG_OK;
    return e->embed(e, texts, n, kind, out, msg, msg_size);
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
