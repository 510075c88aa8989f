/* server.c - the server object: settings and the tool table shared by all sessions, and the
 * tools/list pages cut from it. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define CURSOR_PREFIX "after:"
#define MAX_TOOL_NAME 128

void mcp_server_opts_default(mcp_server_opts_t *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->name = "ptc-mcp";
    opts->version = PTC_VERSION;
    opts->list_page_size = 50;
    opts->progress_min_interval_ms = 100;
    opts->shutdown_grace_ms = 3000;
}

int mcp_server_new(uv_loop_t *loop, const mcp_server_opts_t *opts, const mcp_logger_t *lg,
                   mcp_server_t **out)
{
    *out = NULL;
    if (loop == NULL || opts == NULL || opts->name == NULL || opts->version == NULL ||
        opts->list_page_size == 0)
        return MCP_EINVAL;
    mcp_server_t *srv = calloc(1, sizeof *srv);
    if (srv == NULL) return MCP_ENOMEM;
    srv->loop = loop;
    srv->lg = lg;
    srv->name = mcp__strdup(opts->name);
    srv->title = mcp__strdup(opts->title);
    srv->version = mcp__strdup(opts->version);
    srv->instructions = mcp__strdup(opts->instructions);
    srv->page_size = opts->list_page_size;
    srv->progress_ms = opts->progress_min_interval_ms;
    srv->grace_ms = opts->shutdown_grace_ms;
    if (srv->name == NULL || srv->version == NULL || (opts->title && !srv->title) ||
        (opts->instructions && !srv->instructions)) {
        mcp_server_free(srv);
        return MCP_ENOMEM;
    }
    *out = srv;
    return MCP_OK;
}

static void tool_free(mcp__tool_t *t)
{
    if (t == NULL) return;
    free(t->name);
    cJSON_Delete(t->listing);
    free(t);
}

void mcp_server_free(mcp_server_t *srv)
{
    if (srv == NULL) return;
    for (size_t i = 0; i < srv->n_tools; i++)
        tool_free(srv->tools[i]);
    free(srv->tools);
    free(srv->name);
    free(srv->title);
    free(srv->version);
    free(srv->instructions);
    mcp__features_free(srv);
    free(srv);
}

uv_loop_t *mcp_server_loop(const mcp_server_t *srv)
{
    return srv->loop;
}

const mcp_logger_t *mcp_server_logger(const mcp_server_t *srv)
{
    return srv->lg;
}

size_t mcp_server_tool_count(const mcp_server_t *srv)
{
    return srv->n_tools;
}

static bool name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > MAX_TOOL_NAME) return false;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

/* Index of the first tool whose name is > name (strictly after), or >= when inclusive. */
static size_t lower_bound(const mcp_server_t *srv, const char *name, bool inclusive)
{
    size_t lo = 0, hi = srv->n_tools;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(srv->tools[mid]->name, name);
        if (c < 0 || (!inclusive && c == 0))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const mcp__tool_t *mcp__server_find_tool(const mcp_server_t *srv, const char *name)
{
    size_t i = lower_bound(srv, name, true);
    if (i < srv->n_tools && strcmp(srv->tools[i]->name, name) == 0) return srv->tools[i];
    return NULL;
}

static int add_json(cJSON *obj, const char *key, const char *text, const char *tool,
                    const mcp_logger_t *lg)
{
    cJSON *v = cJSON_Parse(text);
    if (v == NULL || !cJSON_IsObject(v)) {
        mcp_log(lg, MCP_LOG_ERROR, "tool %s: %s is not a JSON object", tool, key);
        cJSON_Delete(v);
        return MCP_EINVAL;
    }
    if (!cJSON_AddItemToObject(obj, key, v)) {
        cJSON_Delete(v);
        return MCP_ENOMEM;
    }
    return MCP_OK;
}

static void notify_list_changed(mcp_server_t *srv)
{
    if (srv->hold_notify) {
        srv->changed_while_held = true;
        return;
    }
    for (mcp_session_t *s = srv->sessions; s != NULL; s = s->next)
        if (s->protocol[0] != '\0') mcp_session_notify(s, "notifications/tools/list_changed", NULL);
}

int mcp_server_add_tool(mcp_server_t *srv, const mcp_tool_def_t *def)
{
    if (def == NULL || def->name == NULL || def->handler == NULL) return MCP_EINVAL;
    if (!name_ok(def->name)) {
        mcp_log(srv->lg, MCP_LOG_ERROR, "tool name \"%s\" is not [A-Za-z0-9_.-]{1,128}", def->name);
        return MCP_EINVAL;
    }
    if (mcp__server_find_tool(srv, def->name) != NULL) {
        mcp_log(srv->lg, MCP_LOG_ERROR, "tool %s is registered twice", def->name);
        return MCP_EINVAL;
    }
    mcp__tool_t *t = calloc(1, sizeof *t);
    if (t == NULL) return MCP_ENOMEM;
    t->handler = def->handler;
    t->data = def->data;
    t->name = mcp__strdup(def->name);
    t->listing = cJSON_CreateObject();
    int rc = MCP_ENOMEM;
    if (t->name == NULL || t->listing == NULL ||
        cJSON_AddStringToObject(t->listing, "name", def->name) == NULL)
        goto fail;
    if (def->title && cJSON_AddStringToObject(t->listing, "title", def->title) == NULL) goto fail;
    if (def->description &&
        cJSON_AddStringToObject(t->listing, "description", def->description) == NULL)
        goto fail;
    rc = add_json(t->listing, "inputSchema",
                  def->input_schema ? def->input_schema : "{\"type\":\"object\"}", def->name,
                  srv->lg);
    if (rc < 0) goto fail;
    if (def->output_schema &&
        (rc = add_json(t->listing, "outputSchema", def->output_schema, def->name, srv->lg)) < 0)
        goto fail;
    if (def->annotations &&
        (rc = add_json(t->listing, "annotations", def->annotations, def->name, srv->lg)) < 0)
        goto fail;
    t->input_schema = cJSON_GetObjectItemCaseSensitive(t->listing, "inputSchema");

    rc = MCP_ENOMEM;
    if (srv->n_tools == srv->cap_tools) {
        size_t cap = srv->cap_tools ? srv->cap_tools * 2 : 16;
        mcp__tool_t **nt = realloc(srv->tools, cap * sizeof *nt);
        if (nt == NULL) goto fail;
        srv->tools = nt;
        srv->cap_tools = cap;
    }
    size_t at = lower_bound(srv, def->name, true);
    memmove(srv->tools + at + 1, srv->tools + at, (srv->n_tools - at) * sizeof *srv->tools);
    srv->tools[at] = t;
    srv->n_tools++;
    notify_list_changed(srv);
    return MCP_OK;
fail:
    tool_free(t);
    return rc;
}

void mcp_server_hold_notifications(mcp_server_t *srv, bool hold)
{
    srv->hold_notify = hold;
    if (!hold && srv->changed_while_held) {
        srv->changed_while_held = false;
        notify_list_changed(srv);
    }
    if (!hold) mcp__features_release(srv);
}

int mcp_server_remove_tool(mcp_server_t *srv, const char *name)
{
    size_t i = lower_bound(srv, name, true);
    if (i >= srv->n_tools || strcmp(srv->tools[i]->name, name) != 0) return MCP_EINVAL;
    mcp__tool_t *t = srv->tools[i];
    /* Calls in flight keep a pointer to the tool only until they start: they copy the name. */
    memmove(srv->tools + i, srv->tools + i + 1, (srv->n_tools - i - 1) * sizeof *srv->tools);
    srv->n_tools--;
    tool_free(t);
    notify_list_changed(srv);
    return MCP_OK;
}

/* --- cursors: base64url of "after:<last name>", so a page boundary survives tools being added
 * or removed between two pages, and the client cannot mistake it for anything meaningful. */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static char *b64url_encode(const char *in, size_t n)
{
    char *out = malloc(n / 3 * 4 + 5);
    if (out == NULL) return NULL;
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)in[i] << 16 |
                     (uint32_t)(unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = b64[v >> 6 & 63];
        out[o++] = b64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
        if (i + 1 < n) v |= (uint32_t)(unsigned char)in[i + 1] << 8;
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        if (i + 1 < n) out[o++] = b64[v >> 6 & 63];
    }
    out[o] = '\0';
    return out;
}

static int b64val(char c)
{
    const char *p = strchr(b64, c);
    return (c != '\0' && p != NULL) ? (int)(p - b64) : -1;
}

/* Decodes into out (size >= strlen(in)); returns the length or -1 if malformed. */
static long b64url_decode(const char *in, char *out)
{
    size_t n = strlen(in), o = 0;
    if (n % 4 == 1) return -1;
    for (size_t i = 0; i < n; i += 4) {
        int v[4] = {0, 0, 0, 0};
        size_t k = n - i < 4 ? n - i : 4;
        for (size_t j = 0; j < k; j++)
            if ((v[j] = b64val(in[i + j])) < 0) return -1;
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (char)(w >> 16);
        if (k > 2) out[o++] = (char)(w >> 8 & 0xFF);
        if (k > 3) out[o++] = (char)(w & 0xFF);
    }
    out[o] = '\0';
    return (long)o;
}

/* The listing as a client of `protocol` expects it: fields newer than its revision dropped. */
static cJSON *listing_for(const mcp__tool_t *t, const char *protocol)
{
    cJSON *l = cJSON_Duplicate(t->listing, true);
    if (l == NULL) return NULL;
    if (mcp_protocol_cmp(protocol, "2025-06-18") < 0) {
        cJSON_DeleteItemFromObjectCaseSensitive(l, "title");
        cJSON_DeleteItemFromObjectCaseSensitive(l, "outputSchema");
    }
    if (mcp_protocol_cmp(protocol, "2025-03-26") < 0)
        cJSON_DeleteItemFromObjectCaseSensitive(l, "annotations");
    return l;
}

cJSON *mcp__server_list_tools(const mcp_server_t *srv, const char *protocol, const char *cursor,
                              bool *bad)
{
    *bad = false;
    size_t start = 0;
    if (cursor != NULL) {
        size_t n = strlen(cursor);
        char *dec = malloc(n + 1);
        if (dec == NULL) return NULL;
        long len = n > 4 * (MAX_TOOL_NAME + 16) ? -1 : b64url_decode(cursor, dec);
        if (len < (long)strlen(CURSOR_PREFIX) || (size_t)len != strlen(dec) ||
            strncmp(dec, CURSOR_PREFIX, strlen(CURSOR_PREFIX)) != 0) {
            free(dec);
            *bad = true;
            return NULL;
        }
        start = lower_bound(srv, dec + strlen(CURSOR_PREFIX), false);
        free(dec);
    }
    cJSON *res = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(res, "tools");
    if (arr == NULL) goto fail;
    size_t end = start + srv->page_size < srv->n_tools ? start + srv->page_size : srv->n_tools;
    for (size_t i = start; i < end; i++) {
        cJSON *l = listing_for(srv->tools[i], protocol);
        if (l == NULL || !cJSON_AddItemToArray(arr, l)) {
            cJSON_Delete(l);
            goto fail;
        }
    }
    if (end < srv->n_tools) {
        const char *last = srv->tools[end - 1]->name;
        char plain[MAX_TOOL_NAME + sizeof CURSOR_PREFIX];
        snprintf(plain, sizeof plain, "%s%s", CURSOR_PREFIX, last);
        char *enc = b64url_encode(plain, strlen(plain));
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

char *mcp__cursor_encode(const char *key)
{
    size_t n = strlen(CURSOR_PREFIX) + strlen(key);
    char *plain = malloc(n + 1);
    if (plain == NULL) return NULL;
    snprintf(plain, n + 1, "%s%s", CURSOR_PREFIX, key);
    char *enc = b64url_encode(plain, n);
    free(plain);
    return enc;
}

char *mcp__cursor_decode(const char *cursor, bool *bad)
{
    *bad = false;
    size_t n = strlen(cursor);
    char *dec = malloc(n + 1);
    if (dec == NULL) return NULL;
    long len = b64url_decode(cursor, dec);
    size_t pre = strlen(CURSOR_PREFIX);
    if (len < (long)pre || (size_t)len != strlen(dec) || strncmp(dec, CURSOR_PREFIX, pre) != 0) {
        free(dec);
        *bad = true;
        return NULL;
    }
    memmove(dec, dec + pre, (size_t)len - pre + 1);
    return dec;
}

mcp_session_t *mcp_server_pick_session(const mcp_server_t *srv, const char *capability)
{
    mcp_session_t *only = NULL;
    for (mcp_session_t *s = srv->sessions; s != NULL; s = s->next) {
        if (s->protocol[0] == '\0' || s->shutting_down) continue;
        if (only != NULL) return NULL;
        only = s;
    }
    return only != NULL && (capability == NULL || mcp_session_client_has(only, capability)) ? only
                                                                                            : NULL;
}

void mcp__server_link_session(mcp_server_t *srv, mcp_session_t *s)
{
    s->prev = NULL;
    s->next = srv->sessions;
    if (srv->sessions) srv->sessions->prev = s;
    srv->sessions = s;
}

void mcp__server_unlink_session(mcp_server_t *srv, mcp_session_t *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else if (srv->sessions == s)
        srv->sessions = s->next;
    if (s->next) s->next->prev = s->prev;
    s->prev = s->next = NULL;
}
