/* client_listing.c - the downstream client's tools listing: tools/list page by page (bounded
 * pages and tools, cursors that do not end), and re-listing on notifications/tools/list_changed
 * (a legacy session's, or one on the subscriptions/listen stream of a stateless server). */
#include "client_internal.h"

#include <stdlib.h>
#include <string.h>

/* --- tools listing --------------------------------------------------------------------- */

static void request_page(mcp_client_t *c, const char *cursor);

void mcp__client_start_listing(mcp_client_t *c)
{
    c->listing = true;
    c->relist = false;
    c->pages = 0;
    free(c->last_cursor);
    c->last_cursor = NULL;
    cJSON_Delete(c->listing_tools);
    c->listing_tools = cJSON_CreateArray();
    if (c->listing_tools == NULL) {
        c->listing = false;
        if (c->state == MCP_CLIENT_STARTING)
            mcp__client_start_failure(c, "out of memory listing tools");
        return;
    }
    request_page(c, NULL);
}

static void finish_listing(mcp_client_t *c)
{
    c->listing = false;
    cJSON *fresh = c->listing_tools;
    c->listing_tools = NULL;
    if (c->state == MCP_CLIENT_STARTING) {
        /* After a crash the same tools usually come back: the owner need not re-index. */
        bool changed = !c->ever_ready || !cJSON_Compare(c->tools, fresh, true);
        cJSON_Delete(c->tools);
        c->tools = fresh;
        if (changed && c->hooks.tools_changed != NULL)
            c->hooks.tools_changed(c, c->tools, c->hooks.data);
        if (!mcp__client_gone(c)) mcp__client_become_ready(c);
        return;
    }
    if (cJSON_Compare(c->tools, fresh, true)) {
        cJSON_Delete(fresh);
    } else {
        cJSON_Delete(c->tools);
        c->tools = fresh;
        mcp_log(c->lg, MCP_LOG_INFO, "downstream server %s: tools changed (%d tools)", c->name,
                cJSON_GetArraySize(c->tools));
        if (c->hooks.tools_changed != NULL) c->hooks.tools_changed(c, c->tools, c->hooks.data);
    }
    if (!mcp__client_gone(c) && c->relist && c->state == MCP_CLIENT_READY)
        mcp__client_start_listing(c);
}

static void listing_failed(mcp_client_t *c, const char *why)
{
    c->listing = false;
    cJSON_Delete(c->listing_tools);
    c->listing_tools = NULL;
    char reason[MCP__CLIENT_REASON_MAX];
    snprintf(reason, sizeof reason, "tools/list failed: %s", why);
    if (c->state == MCP_CLIENT_STARTING) {
        mcp__client_start_failure(c, reason);
        return;
    }
    mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s: %s; keeping the %d tools listed before",
            c->name, reason, cJSON_GetArraySize(c->tools));
    if (c->relist && c->state == MCP_CLIENT_READY) mcp__client_start_listing(c);
}

static bool tool_ok(const cJSON *t)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
    return cJSON_IsObject(t) && cJSON_IsString(name) && name->valuestring[0] != '\0';
}

static void on_list_page(void *data, int err, const cJSON *result, const cJSON *error,
                         const char *message)
{
    mcp_client_t *c = data;
    (void)error;
    if (err < 0) {
        listing_failed(c, message);
        return;
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(result, "tools");
    if (!cJSON_IsArray(tools)) {
        listing_failed(c, "the answer has no \"tools\" array");
        return;
    }
    size_t skipped = 0, cut = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        if (!tool_ok(t)) {
            skipped++;
            continue;
        }
        if ((size_t)cJSON_GetArraySize(c->listing_tools) >= c->opts.max_tools) {
            cut++;
            continue;
        }
        cJSON *dup = cJSON_Duplicate(t, true);
        if (dup == NULL || !cJSON_AddItemToArray(c->listing_tools, dup)) {
            cJSON_Delete(dup);
            listing_failed(c, "out of memory");
            return;
        }
    }
    if (skipped > 0)
        mcp_log(c->lg, MCP_LOG_WARNING,
                "downstream server %s: skipped %zu tools without a string \"name\"", c->name,
                skipped);
    if (cut > 0)
        mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s: more than %zu tools; %zu dropped",
                c->name, c->opts.max_tools, cut);
    c->pages++;
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(result, "nextCursor");
    if (!cJSON_IsString(next) || next->valuestring[0] == '\0') {
        finish_listing(c);
        return;
    }
    if (c->pages >= MCP__CLIENT_MAX_LIST_PAGES ||
        (c->last_cursor != NULL && strcmp(c->last_cursor, next->valuestring) == 0)) {
        mcp_log(c->lg, MCP_LOG_WARNING,
                "downstream server %s: tools/list cursors do not end (%zu pages, cursor "
                "repeated or too many pages); using the tools listed so far",
                c->name, c->pages);
        finish_listing(c);
        return;
    }
    request_page(c, next->valuestring);
}

static void request_page(mcp_client_t *c, const char *cursor)
{
    cJSON *params = NULL;
    if (cursor != NULL) {
        char *keep = mcp__strdup(cursor);
        params = cJSON_CreateObject();
        if (keep == NULL || params == NULL ||
            cJSON_AddStringToObject(params, "cursor", cursor) == NULL) {
            free(keep);
            cJSON_Delete(params);
            listing_failed(c, "out of memory");
            return;
        }
        free(c->last_cursor);
        c->last_cursor = keep;
    }
    /* The start timeout bounds the first listing; later ones get their own. */
    unsigned timeout = c->state == MCP_CLIENT_READY ? c->opts.start_timeout_ms : 0;
    int rc = mcp__client_start_call(c, "tools/list", params, timeout, true, NULL, on_list_page, c,
                                    c->next_id++, NULL);
    if (rc < 0) listing_failed(c, mcp_strerror(rc));
}

void mcp__client_on_list_changed(mcp_client_t *c)
{
    if (c->listing || c->state != MCP_CLIENT_READY)
        c->relist = true; /* re-listed when the current listing or the handshake ends */
    else
        mcp__client_start_listing(c);
}

static void on_listen_end(void *data, int err, const cJSON *result, const cJSON *error,
                          const char *message)
{
    mcp_client_t *c = data;
    (void)result;
    (void)error;
    c->listening = false;
    /* The server ends a subscription when it shuts down (or refuses it): list changes are
     * then missed until the next start, as with a legacy server that sends none. */
    mcp_log(c->lg, err < 0 ? MCP_LOG_NOTICE : MCP_LOG_DEBUG,
            "downstream server %s: subscriptions/listen ended%s%s", c->name, err < 0 ? ": " : "",
            err < 0 ? message : "");
}

void mcp__client_start_listen(mcp_client_t *c)
{
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(c->init_result, "capabilities");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(caps, "tools");
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tools, "listChanged"))) return;
    cJSON *params = cJSON_CreateObject();
    cJSON *filter = cJSON_AddObjectToObject(params, "notifications");
    if (filter == NULL || cJSON_AddTrueToObject(filter, "toolsListChanged") == NULL) {
        cJSON_Delete(params);
        return;
    }
    /* Internal and without a timeout: it stays open for the life of the server. */
    int rc = mcp__client_start_call(c, "subscriptions/listen", params, 0, true, NULL, on_listen_end,
                                    c, c->next_id++, NULL);
    if (rc == MCP_OK)
        c->listening = true;
    else
        mcp_log(c->lg, MCP_LOG_WARNING,
                "downstream server %s: could not subscribe to tool-list changes: %s", c->name,
                mcp_strerror(rc));
}
