/* features.c - what resources, prompts and completions share: the capabilities they add to
 * the initialize result, the dispatch of their methods, list_changed notifications. */
#include "internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void mcp__answer_error(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, int code,
                       const char *fmt, ...)
{
    char m[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    mcp__session_answer(s, b, mcp_jsonrpc_error(id, code, m, NULL));
}

bool mcp__resources_active(const mcp_server_t *srv)
{
    return srv->declared_resources || srv->resources.n > 0 || srv->templates.n > 0;
}

bool mcp__prompts_active(const mcp_server_t *srv)
{
    return srv->declared_prompts || srv->prompts.n > 0;
}

static bool any_completer(const mcp__table_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i]->complete != NULL) return true;
    return false;
}

bool mcp__completions_active(const mcp_server_t *srv)
{
    return srv->declared_completions || any_completer(&srv->prompts) ||
           any_completer(&srv->templates);
}

int mcp_server_declare(mcp_server_t *srv, const char *capability)
{
    if (capability == NULL) return MCP_EINVAL;
    if (strcmp(capability, "resources") == 0)
        srv->declared_resources = true;
    else if (strcmp(capability, "prompts") == 0)
        srv->declared_prompts = true;
    else if (strcmp(capability, "completions") == 0)
        srv->declared_completions = true;
    else
        return MCP_EINVAL;
    return MCP_OK;
}

int mcp__features_capabilities(const mcp_server_t *srv, cJSON *caps)
{
    if (mcp__resources_active(srv)) {
        cJSON *r = cJSON_AddObjectToObject(caps, "resources");
        if (r == NULL || cJSON_AddTrueToObject(r, "subscribe") == NULL ||
            cJSON_AddTrueToObject(r, "listChanged") == NULL)
            return MCP_ENOMEM;
    }
    if (mcp__prompts_active(srv)) {
        cJSON *p = cJSON_AddObjectToObject(caps, "prompts");
        if (p == NULL || cJSON_AddTrueToObject(p, "listChanged") == NULL) return MCP_ENOMEM;
    }
    if (mcp__completions_active(srv) && cJSON_AddObjectToObject(caps, "completions") == NULL)
        return MCP_ENOMEM;
    return MCP_OK;
}

bool mcp__features_handle(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                          const cJSON *params)
{
    /* A method of a capability the server does not offer is answered "Method not found" by
     * the caller, as for any unknown method. */
    if (strncmp(method, "resources/", 10) == 0) {
        if (!mcp__resources_active(s->srv)) return false;
        mcp__resources_handle(s, b, id, method, params);
        return true;
    }
    if (strncmp(method, "prompts/", 8) == 0) {
        if (!mcp__prompts_active(s->srv)) return false;
        mcp__prompts_handle(s, b, id, method, params);
        return true;
    }
    if (strcmp(method, "completion/complete") == 0) {
        if (!mcp__completions_active(s->srv) && !mcp__prompts_active(s->srv) &&
            s->srv->templates.n == 0)
            return false;
        mcp__completion_handle(s, b, id, params);
        return true;
    }
    return false;
}

static void send_changed(mcp_server_t *srv, bool prompts)
{
    const char *method =
        prompts ? "notifications/prompts/list_changed" : "notifications/resources/list_changed";
    for (mcp_session_t *s = srv->sessions; s != NULL; s = s->next)
        if (s->protocol[0] != '\0' && !s->shutting_down) mcp_session_notify(s, method, NULL);
    mcp__listen_notify(srv, prompts ? MCP__CHANGED_PROMPTS : MCP__CHANGED_RESOURCES, NULL);
}

void mcp__features_list_changed(mcp_server_t *srv, bool prompts)
{
    if (srv->hold_notify) {
        if (prompts)
            srv->prompts_changed_while_held = true;
        else
            srv->resources_changed_while_held = true;
        return;
    }
    send_changed(srv, prompts);
}

void mcp__features_release(mcp_server_t *srv)
{
    if (srv->resources_changed_while_held) {
        srv->resources_changed_while_held = false;
        send_changed(srv, false);
    }
    if (srv->prompts_changed_while_held) {
        srv->prompts_changed_while_held = false;
        send_changed(srv, true);
    }
}

void mcp__features_free(mcp_server_t *srv)
{
    mcp__table_free(&srv->resources);
    mcp__table_free(&srv->templates);
    mcp__table_free(&srv->prompts);
}
