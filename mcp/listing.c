/* listing.c - sorted tables of tools, resources, resource templates and prompts, and the pages
 * that their list methods cut from them (opaque "after:<key>" cursors, so a page boundary
 * survives entries being added or removed between two pages). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

void mcp__entry_free(mcp__entry_t *e)
{
    if (e == NULL) return;
    free(e->key);
    cJSON_Delete(e->listing);
    free(e);
}

mcp__entry_t *mcp__entry_new(const char *key, const char *name, const char *title,
                             const char *description)
{
    mcp__entry_t *e = calloc(1, sizeof *e);
    if (e == NULL) return NULL;
    e->key = mcp__strdup(key);
    e->listing = cJSON_CreateObject();
    bool ok = e->key != NULL && e->listing != NULL &&
              cJSON_AddStringToObject(e->listing, "name", name) != NULL &&
              (title == NULL || cJSON_AddStringToObject(e->listing, "title", title) != NULL) &&
              (description == NULL ||
               cJSON_AddStringToObject(e->listing, "description", description) != NULL);
    if (!ok) {
        mcp__entry_free(e);
        return NULL;
    }
    return e;
}

/* Index of the first entry whose key is >= key (inclusive) or > key. */
static size_t lower_bound(const mcp__table_t *t, const char *key, bool inclusive)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->v[mid]->key, key);
        if (c < 0 || (!inclusive && c == 0))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

mcp__entry_t *mcp__table_find(const mcp__table_t *t, const char *key)
{
    size_t i = lower_bound(t, key, true);
    return i < t->n && strcmp(t->v[i]->key, key) == 0 ? t->v[i] : NULL;
}

int mcp__table_insert(mcp__table_t *t, mcp__entry_t *e)
{
    if (mcp__table_find(t, e->key) != NULL) return MCP_EINVAL;
    /* the codes are base's (MCP_ENOMEM is PTC_ENOMEM; past the cap PTC_ETOOBIG) */
    int rc = ptc_array_reserve(&t->v, &t->cap, t->n + 1, sizeof *t->v, MCP_MAX_LIST_ENTRIES);
    if (rc < 0) return rc;
    size_t at = lower_bound(t, e->key, true);
    memmove(t->v + at + 1, t->v + at, (t->n - at) * sizeof *t->v);
    t->v[at] = e;
    t->n++;
    return MCP_OK;
}

int mcp__table_remove(mcp__table_t *t, const char *key)
{
    size_t i = lower_bound(t, key, true);
    if (i >= t->n || strcmp(t->v[i]->key, key) != 0) return MCP_EINVAL;
    mcp__entry_free(t->v[i]);
    memmove(t->v + i, t->v + i + 1, (t->n - i - 1) * sizeof *t->v);
    t->n--;
    return MCP_OK;
}

void mcp__table_free(mcp__table_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        mcp__entry_free(t->v[i]);
    free(t->v);
    memset(t, 0, sizeof *t);
}

cJSON *mcp__table_page(const mcp__table_t *t, const char *field, const char *protocol,
                       const char *cursor, size_t page_size, bool *bad)
{
    *bad = false;
    size_t start = 0;
    if (cursor != NULL) {
        /* A cursor longer than any key we could have issued is not ours. */
        size_t max = t->max_cursor ? t->max_cursor : 4 * (MCP_MAX_URI_BYTES + 16) / 3;
        if (strlen(cursor) > max) {
            *bad = true;
            return NULL;
        }
        char *key = mcp__cursor_decode(cursor, bad);
        if (key == NULL) return NULL;
        start = lower_bound(t, key, false);
        free(key);
    }
    cJSON *res = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(res, field);
    if (arr == NULL) goto fail;
    size_t end = start + page_size < t->n ? start + page_size : t->n;
    for (size_t i = start; i < end; i++) {
        cJSON *l = cJSON_Duplicate(t->v[i]->listing, true);
        if (l == NULL || !cJSON_AddItemToArray(arr, l)) {
            cJSON_Delete(l);
            goto fail;
        }
        if (t->trim != NULL) t->trim(l, protocol);
        /* Titles arrived with 2025-06-18; older clients get the listing of their revision. */
        else if (mcp_protocol_cmp(protocol, "2025-06-18") < 0)
            cJSON_DeleteItemFromObjectCaseSensitive(l, "title");
    }
    if (end < t->n) {
        char *enc = mcp__cursor_encode(t->v[end - 1]->key);
        if (enc == NULL || cJSON_AddStringToObject(res, "nextCursor", enc) == NULL) {
            free(enc);
            goto fail;
        }
        free(enc);
    }
    return res;
fail:
    cJSON_Delete(res);
    return NULL;
}
