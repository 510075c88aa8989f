/* server.c - the server object: settings and the tool table shared by all sessions (a
 * listing.c table, which also cuts the tools/list pages), and the cursors of every list. */
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

/* Fields newer than a client's protocol revision are dropped from what it is shown. */
static void trim_tool_listing(cJSON *l, const char *protocol)
{
    if (mcp_protocol_cmp(protocol, "2025-06-18") < 0) {
        cJSON_DeleteItemFromObjectCaseSensitive(l, "title");
        cJSON_DeleteItemFromObjectCaseSensitive(l, "outputSchema");
    }
    if (mcp_protocol_cmp(protocol, "2025-03-26") < 0)
        cJSON_DeleteItemFromObjectCaseSensitive(l, "annotations");
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
    /* Kept from before tools shared the table code: tools/list accepts exactly the cursors
     * it always did. */
    srv->tools.max_cursor = 4 * (MAX_TOOL_NAME + 16);
    srv->tools.trim = trim_tool_listing;
    if (mcp__mrtr_key_init(srv->state_key) < 0) {
        mcp_log(lg, MCP_LOG_ERROR, "could not make the requestState key (random generator)");
        mcp_server_free(srv);
        return MCP_EIO;
    }
    if (srv->name == NULL || srv->version == NULL || (opts->title && !srv->title) ||
        (opts->instructions && !srv->instructions)) {
        mcp_server_free(srv);
        return MCP_ENOMEM;
    }
    *out = srv;
    return MCP_OK;
}

void mcp_server_free(mcp_server_t *srv)
{
    if (srv == NULL) return;
    mcp__table_free(&srv->tools);
    free(srv->name);
    free(srv->title);
    free(srv->version);
    free(srv->instructions);
    mcp__features_free(srv);
    mcp__tasks_free(srv);
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
    return srv->tools.n;
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

const mcp__entry_t *mcp__server_find_tool(const mcp_server_t *srv, const char *name)
{
    return mcp__table_find(&srv->tools, name);
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
    mcp__listen_notify(srv, MCP__CHANGED_TOOLS, NULL);
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
    mcp__entry_t *t = mcp__entry_new(def->name, def->name, def->title, def->description);
    if (t == NULL) return MCP_ENOMEM;
    t->handler = def->handler;
    t->data = def->data;
    t->task_support = def->task_support;
    int rc = add_json(t->listing, "inputSchema",
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

    /* The name is known to be new, so the only failure left is ENOMEM. */
    if ((rc = mcp__table_insert(&srv->tools, t)) < 0) goto fail;
    notify_list_changed(srv);
    return MCP_OK;
fail:
    mcp__entry_free(t);
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
    /* Calls in flight keep a pointer to the tool only until they start: they copy the name. */
    int rc = mcp__table_remove(&srv->tools, name);
    if (rc < 0) return rc;
    notify_list_changed(srv);
    return MCP_OK;
}

/* --- cursors: base64url of "after:<last key>", so a page boundary survives entries being added
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

cJSON *mcp__server_list_tools(const mcp_server_t *srv, const char *protocol, const char *cursor,
                              bool *bad)
{
    return mcp__table_page(&srv->tools, "tools", protocol, cursor, srv->page_size, bad);
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
    s->serial = ++srv->sessions_made;
    s->prev = NULL;
    s->next = srv->sessions;
    if (srv->sessions) srv->sessions->prev = s;
    srv->sessions = s;
}

uint64_t mcp_session_serial(const mcp_session_t *s)
{
    return s->serial;
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
