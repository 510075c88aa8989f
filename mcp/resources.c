/* resources.c - resources and resource templates: registration, resources/list (paged),
 * resources/templates/list (paged), resources/read, subscriptions and their notifications. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define READ_MSG_BYTES 512

/* Checks an RFC 6570 level-1 template: every {name} closed and non-empty, no nesting, and no
 * two variables side by side (their boundary would be ambiguous). */
static bool template_ok(const char *t)
{
    bool prev_var = false;
    for (const char *p = t; *p != '\0'; p++) {
        if (*p == '}') return false;
        if (*p != '{') {
            prev_var = false;
            continue;
        }
        if (prev_var) return false;
        const char *close = strchr(p, '}');
        if (close == NULL || close == p + 1) return false;
        for (const char *q = p + 1; q < close; q++)
            if (*q == '{') return false;
        p = close;
        prev_var = true;
    }
    return true;
}

/* Matches uri against a level-1 template without backtracking: a variable's value is the
 * shortest non-empty run of characters other than '/' that the next literal text follows (or
 * the rest of the URI for a final variable). Adds name -> value to vars (may be NULL). */
bool mcp__template_match(const char *t, const char *u, cJSON *vars)
{
    while (*t != '\0') {
        if (*t != '{') {
            if (*t != *u) return false;
            t++;
            u++;
            continue;
        }
        const char *close = strchr(t, '}');
        if (close == NULL) return false;
        const char *name = t + 1;
        size_t name_len = (size_t)(close - name);
        t = close + 1;
        size_t lit = strcspn(t, "{");
        const char *end = NULL;
        if (*u == '\0' || *u == '/') return false;
        for (const char *p = u + 1;; p++) {
            if (lit > 0 && strncmp(p, t, lit) == 0) {
                end = p;
                break;
            }
            if (*p == '\0') {
                if (lit == 0) end = p;
                break;
            }
            if (*p == '/') break;
        }
        if (end == NULL) return false;
        if (vars != NULL) {
            char key[128], *val = malloc((size_t)(end - u) + 1);
            if (val == NULL) return false;
            memcpy(val, u, (size_t)(end - u));
            val[end - u] = '\0';
            snprintf(key, sizeof key, "%.*s", (int)(name_len < 127 ? name_len : 127), name);
            bool ok = cJSON_AddStringToObject(vars, key, val) != NULL;
            free(val);
            if (!ok) return false;
        }
        u = end;
    }
    return *u == '\0';
}

static int add_entry(mcp_server_t *srv, const mcp_resource_def_t *def, bool is_template)
{
    const char *what = is_template ? "resource template" : "resource";
    if (def == NULL || def->uri == NULL || def->name == NULL || def->read == NULL) {
        mcp_log(srv->lg, MCP_LOG_ERROR, "%s: uri, name and read are required", what);
        return MCP_EINVAL;
    }
    if (def->uri[0] == '\0' || strlen(def->uri) > MCP_MAX_URI_BYTES) {
        mcp_log(srv->lg, MCP_LOG_ERROR, "%s: uri must be 1..%d bytes", what, MCP_MAX_URI_BYTES);
        return MCP_EINVAL;
    }
    if (is_template && !template_ok(def->uri)) {
        mcp_log(srv->lg, MCP_LOG_ERROR,
                "resource template %s: every {variable} must be closed, non-empty and separated "
                "from the next one by text",
                def->uri);
        return MCP_EINVAL;
    }
    mcp__table_t *t = is_template ? &srv->templates : &srv->resources;
    if (mcp__table_find(t, def->uri) != NULL) {
        mcp_log(srv->lg, MCP_LOG_ERROR, "%s %s is registered twice", what, def->uri);
        return MCP_EINVAL;
    }
    mcp__entry_t *e = mcp__entry_new(def->uri, def->name, def->title, def->description);
    if (e == NULL) return MCP_ENOMEM;
    e->read = def->read;
    e->complete = is_template ? def->complete : NULL;
    e->data = def->data;
    bool ok =
        cJSON_AddStringToObject(e->listing, is_template ? "uriTemplate" : "uri", def->uri) != NULL;
    if (ok && def->mime_type)
        ok = cJSON_AddStringToObject(e->listing, "mimeType", def->mime_type) != NULL;
    int rc = ok ? mcp__table_insert(t, e) : MCP_ENOMEM;
    if (rc < 0) {
        mcp__entry_free(e);
        return rc;
    }
    mcp__features_list_changed(srv, false);
    return MCP_OK;
}

int mcp_server_add_resource(mcp_server_t *srv, const mcp_resource_def_t *def)
{
    return add_entry(srv, def, false);
}

int mcp_server_add_resource_template(mcp_server_t *srv, const mcp_resource_def_t *def)
{
    return add_entry(srv, def, true);
}

int mcp_server_remove_resource(mcp_server_t *srv, const char *uri)
{
    if (uri == NULL) return MCP_EINVAL;
    if (mcp__table_remove(&srv->resources, uri) < 0 && mcp__table_remove(&srv->templates, uri) < 0)
        return MCP_EINVAL;
    mcp__features_list_changed(srv, false);
    return MCP_OK;
}

static int sub_index(const mcp_session_t *s, const char *uri)
{
    int i = 0;
    const cJSON *u;
    cJSON_ArrayForEach(u, s->subscriptions)
    {
        if (strcmp(u->valuestring, uri) == 0) return i;
        i++;
    }
    return -1;
}

bool mcp_session_subscribed(const mcp_session_t *s, const char *uri)
{
    return s->subscriptions != NULL && uri != NULL && sub_index(s, uri) >= 0;
}

void mcp_server_resource_updated(mcp_server_t *srv, const char *uri)
{
    for (mcp_session_t *s = srv->sessions; s != NULL; s = s->next) {
        if (s->shutting_down || !mcp_session_subscribed(s, uri)) continue;
        cJSON *p = cJSON_CreateObject();
        if (p == NULL || cJSON_AddStringToObject(p, "uri", uri) == NULL) {
            cJSON_Delete(p);
            continue;
        }
        mcp_session_notify(s, "notifications/resources/updated", p);
    }
    mcp__listen_notify(srv, MCP__CHANGED_RESOURCE, uri);
}

/* The resource or template that serves uri; vars gets a template's variables. */
static const mcp__entry_t *resolve(const mcp_server_t *srv, const char *uri, cJSON *vars)
{
    const mcp__entry_t *e = mcp__table_find(&srv->resources, uri);
    if (e != NULL) return e;
    for (size_t i = 0; i < srv->templates.n; i++) {
        if (mcp__template_match(srv->templates.v[i]->key, uri, NULL)) {
            if (vars != NULL && !mcp__template_match(srv->templates.v[i]->key, uri, vars))
                return NULL;
            return srv->templates.v[i];
        }
    }
    return NULL;
}

static const char *uri_param(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                             const cJSON *params)
{
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(params, "uri");
    if (!cJSON_IsString(u) || u->valuestring[0] == '\0') {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "%s needs params.uri (a non-empty string)", method);
        return NULL;
    }
    if (strlen(u->valuestring) > MCP_MAX_URI_BYTES) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "%s: params.uri is longer than %d bytes", method, MCP_MAX_URI_BYTES);
        return NULL;
    }
    return u->valuestring;
}

static void not_found(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *uri,
                      const char *why)
{
    cJSON *data = cJSON_CreateObject();
    if (data != NULL && cJSON_AddStringToObject(data, "uri", uri) == NULL) {
        cJSON_Delete(data);
        data = NULL;
    }
    char m[512];
    snprintf(m, sizeof m, "Resource not found: %.200s%s%.200s", uri, why ? ": " : "",
             why ? why : " (resources/list and resources/templates/list show what exists)");
    /* SEP-2164 (2026-07-28) made it Invalid Params; legacy clients keep -32002. */
    int code = mcp__session_modern(s) ? MCP_JSONRPC_INVALID_PARAMS : MCP_RESOURCE_NOT_FOUND;
    mcp__session_answer(s, b, mcp_jsonrpc_error(id, code, m, data));
}

/* Each item must be a ResourceContents: uri plus text or base64 blob. */
static int check_contents(const cJSON *contents, char *msg, size_t msg_size)
{
    if (!cJSON_IsArray(contents)) {
        snprintf(msg, msg_size, "contents is not an array");
        return MCP_EINVAL;
    }
    int i = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, contents)
    {
        /* A ResourceContents is what an embedded resource block holds: check it as one. */
        cJSON *block = mcp_resource_block("x", NULL, "x", NULL);
        cJSON *copy = cJSON_Duplicate(c, true);
        if (block == NULL || copy == NULL ||
            !cJSON_ReplaceItemInObjectCaseSensitive(block, "resource", copy)) {
            cJSON_Delete(copy);
            cJSON_Delete(block);
            snprintf(msg, msg_size, "out of memory");
            return MCP_ENOMEM;
        }
        char why[200];
        int rc = mcp_content_validate(block, why, sizeof why);
        cJSON_Delete(block);
        if (rc < 0) {
            snprintf(msg, msg_size, "contents[%d]: %s", i, why);
            return MCP_EINVAL;
        }
        i++;
    }
    return MCP_OK;
}

static void handle_read(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const cJSON *params)
{
    const char *uri = uri_param(s, b, id, "resources/read", params);
    if (uri == NULL) return;
    cJSON *vars = cJSON_CreateObject();
    if (vars == NULL) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    const mcp__entry_t *e = resolve(s->srv, uri, vars);
    if (e == NULL) {
        cJSON_Delete(vars);
        not_found(s, b, id, uri, NULL);
        return;
    }
    bool is_template = mcp__table_find(&s->srv->resources, uri) != e;
    char msg[READ_MSG_BYTES] = "";
    cJSON *contents = NULL;
    mcp_identity_t who;
    mcp__request_identity(s, &who);
    int rc = e->read(uri, is_template ? vars : NULL, &who, e->data, &contents, msg, sizeof msg);
    cJSON_Delete(vars);
    if (rc == MCP_EINVAL) {
        cJSON_Delete(contents);
        not_found(s, b, id, uri, msg[0] ? msg : NULL);
        return;
    }
    char why[256];
    if (rc == MCP_OK && check_contents(contents, why, sizeof why) < 0) {
        mcp_log(s->srv->lg, MCP_LOG_ERROR, "resources/read %s: the handler returned bad %s", uri,
                why);
        rc = MCP_EPROTO;
        snprintf(msg, sizeof msg, "the server built an invalid result (%s)", why);
    }
    if (rc < 0) {
        cJSON_Delete(contents);
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "resources/read %.200s failed: %s",
                          uri, msg[0] ? msg : mcp_strerror(rc));
        return;
    }
    cJSON *res = cJSON_CreateObject();
    if (res == NULL || !cJSON_AddItemToObject(res, "contents", contents)) {
        cJSON_Delete(contents);
        cJSON_Delete(res);
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    mcp__session_answer(s, b, mcp_jsonrpc_result(id, res));
}

static void handle_subscribe(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                             const cJSON *params, bool subscribe)
{
    const char *uri = uri_param(s, b, id, method, params);
    if (uri == NULL) return;
    int at = s->subscriptions != NULL ? sub_index(s, uri) : -1;
    if (subscribe && at < 0) {
        if (resolve(s->srv, uri, NULL) == NULL) {
            not_found(s, b, id, uri, NULL);
            return;
        }
        if (cJSON_GetArraySize(s->subscriptions) >= MCP_MAX_SUBSCRIPTIONS) {
            mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                              "resources/subscribe: this session already holds %d subscriptions "
                              "(unsubscribe from some first)",
                              MCP_MAX_SUBSCRIPTIONS);
            return;
        }
        if (s->subscriptions == NULL) s->subscriptions = cJSON_CreateArray();
        cJSON *u = cJSON_CreateString(uri);
        if (s->subscriptions == NULL || u == NULL || !cJSON_AddItemToArray(s->subscriptions, u)) {
            cJSON_Delete(u);
            mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
            return;
        }
    } else if (!subscribe && at >= 0) {
        cJSON_DeleteItemFromArray(s->subscriptions, at);
    }
    mcp__session_answer(s, b, mcp_jsonrpc_result(id, cJSON_CreateObject()));
}

static void handle_list(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                        const cJSON *params, const mcp__table_t *t, const char *field)
{
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(params, "cursor");
    if (cur != NULL && !cJSON_IsString(cur) && !cJSON_IsNull(cur)) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS, "%s: cursor must be a string",
                          method);
        return;
    }
    bool bad = false;
    cJSON *res =
        mcp__table_page(t, field, mcp__session_proto(s),
                        cJSON_IsString(cur) ? cur->valuestring : NULL, s->srv->page_size, &bad);
    if (bad) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "%s: invalid cursor (pass back a nextCursor exactly as received)",
                          method);
        return;
    }
    if (res == NULL) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    mcp__session_answer(s, b, mcp_jsonrpc_result(id, res));
}

void mcp__resources_handle(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                           const cJSON *params)
{
    if (strcmp(method, "resources/list") == 0)
        handle_list(s, b, id, method, params, &s->srv->resources, "resources");
    else if (strcmp(method, "resources/templates/list") == 0)
        handle_list(s, b, id, method, params, &s->srv->templates, "resourceTemplates");
    else if (strcmp(method, "resources/read") == 0)
        handle_read(s, b, id, params);
    else if (strcmp(method, "resources/subscribe") == 0)
        handle_subscribe(s, b, id, method, params, true);
    else if (strcmp(method, "resources/unsubscribe") == 0)
        handle_subscribe(s, b, id, method, params, false);
    else
        mcp__answer_error(s, b, id, MCP_JSONRPC_METHOD_NOT_FOUND, "Method not found: %.160s",
                          method);
}
