/* client_handshake.c - the handshake of the MCP client with one downstream server: initialize
 * (with our capabilities and identity) and, from a server that refuses it as a 2026-07-28-only
 * server does, server/discover, after which every request carries the stateless envelope
 * (mcp__client_add_envelope); then the first tools listing or READY. The lifecycle around it
 * (start, restart, stop) is in client_session.c. */
#include "client_internal.h"

#include <stdlib.h>
#include <string.h>

#ifndef PTC_VERSION
#define PTC_VERSION "0"
#endif

static void send_discover(mcp_client_t *c);

static void on_start_timeout(uv_timer_t *t)
{
    mcp_client_t *c = t->data;
    mcp__client_enter(c);
    char reason[256];
    snprintf(reason, sizeof reason,
             "did not finish the handshake (initialize, tools/list) within %u ms; killed it",
             c->opts.start_timeout_ms);
    mcp__client_start_failure(c, reason);
    mcp__client_leave(c);
}

/* Whether an error answer to initialize says the server speaks only the stateless revision:
 * -32022 UnsupportedProtocolVersion (what the 2.x SDKs' modern-only servers answer, naming the
 * versions they support) or -32601 (a server that does not know initialize at all). Any other
 * error is a legacy server's refusal and fails the start as before. */
static bool wants_modern(const cJSON *error)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
    if (!cJSON_IsNumber(code)) return false;
    if (code->valuedouble == MCP_JSONRPC_METHOD_NOT_FOUND) return true;
    if (code->valuedouble != MCP_ERR_UNSUPPORTED_PROTOCOL_VERSION) return false;
    const cJSON *supported = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(error, "data"), "supported");
    if (!cJSON_IsArray(supported)) return true; /* nothing named: discover will tell */
    const cJSON *v;
    cJSON_ArrayForEach(v, supported) if (cJSON_IsString(v) &&
                                         mcp_protocol_modern_supported(v->valuestring)) return true;
    return false;
}

/* The tools capability of an initialize or discover answer: list now, or go READY empty. */
static void after_handshake(mcp_client_t *c, const cJSON *caps)
{
    if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(caps, "tools"))) {
        mcp__client_start_listing(c);
        return;
    }
    cJSON_Delete(c->tools);
    c->tools = cJSON_CreateArray();
    if (c->tools == NULL) {
        mcp__client_start_failure(c, "out of memory");
        return;
    }
    if (c->hooks.tools_changed != NULL) c->hooks.tools_changed(c, c->tools, c->hooks.data);
    if (!mcp__client_gone(c)) mcp__client_become_ready(c);
}

static void on_initialized(void *data, int err, const cJSON *result, const cJSON *error,
                           const char *message)
{
    mcp_client_t *c = data;
    char reason[MCP__CLIENT_REASON_MAX];
    if (err == MCP_EREMOTE && wants_modern(error)) {
        mcp_log(c->lg, MCP_LOG_DEBUG,
                "downstream server %s refused initialize (%s); trying server/discover", c->name,
                message);
        send_discover(c);
        return;
    }
    if (err < 0) {
        snprintf(reason, sizeof reason, "initialize failed: %s", message);
        mcp__client_start_failure(c, reason);
        return;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(result, "protocolVersion");
    if (!cJSON_IsString(ver)) {
        mcp__client_start_failure(c, "the initialize answer has no protocolVersion");
        return;
    }
    if (!mcp_protocol_supported(ver->valuestring)) {
        snprintf(reason, sizeof reason,
                 "the server speaks protocol version \"%.64s\", which ptc-mcp does not",
                 ver->valuestring);
        mcp__client_start_failure(c, reason);
        return;
    }
    if (c->http != NULL) mcp__http_set_protocol(c->http, ver->valuestring);
    cJSON_Delete(c->init_result);
    c->init_result = cJSON_Duplicate(result, true);
    if (c->init_result == NULL) {
        mcp__client_start_failure(c, "out of memory");
        return;
    }
    if (mcp__client_send(c, mcp_jsonrpc_request(NULL, "notifications/initialized", NULL)) < 0) {
        mcp__client_start_failure(c, "could not write to the server's stdin");
        return;
    }
    after_handshake(c, cJSON_GetObjectItemCaseSensitive(result, "capabilities"));
}

/* What we can do for the server. A stateless server learns it from every request's _meta and
 * asks through InputRequiredResult, so there roots have no listChanged (no notification
 * carries a change; every round asks again). NULL on ENOMEM. */
static cJSON *client_capabilities(const mcp_client_t *c, bool modern)
{
    cJSON *caps = cJSON_CreateObject();
    bool ok = caps != NULL;
    if (ok && c->opts.has_roots) {
        cJSON *roots = cJSON_AddObjectToObject(caps, "roots");
        ok = roots != NULL && (modern || cJSON_AddBoolToObject(roots, "listChanged", true) != NULL);
    }
    if (ok && c->opts.can_sample) ok = cJSON_AddObjectToObject(caps, "sampling") != NULL;
    if (ok && c->opts.can_elicit) ok = cJSON_AddObjectToObject(caps, "elicitation") != NULL;
    if (!ok) {
        cJSON_Delete(caps);
        return NULL;
    }
    return caps;
}

static cJSON *client_info(void)
{
    cJSON *info = cJSON_CreateObject();
    if (info == NULL || cJSON_AddStringToObject(info, "name", "ptc-mcp") == NULL ||
        cJSON_AddStringToObject(info, "version", PTC_VERSION) == NULL) {
        cJSON_Delete(info);
        return NULL;
    }
    return info;
}

int mcp__client_add_envelope(const mcp_client_t *c, cJSON *params)
{
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    if (meta == NULL) meta = cJSON_AddObjectToObject(params, "_meta");
    if (!cJSON_IsObject(meta)) return MCP_EINVAL;
    /* Keys the caller set (a progress token) stay; ours replace nothing of theirs. */
    if (!cJSON_HasObjectItem(meta, MCP_META_PROTOCOL_VERSION) &&
        cJSON_AddStringToObject(meta, MCP_META_PROTOCOL_VERSION, MCP_PROTOCOL_MODERN) == NULL)
        return MCP_ENOMEM;
    if (!cJSON_HasObjectItem(meta, MCP_META_CLIENT_CAPABILITIES)) {
        cJSON *caps = client_capabilities(c, true);
        if (caps == NULL || !cJSON_AddItemToObject(meta, MCP_META_CLIENT_CAPABILITIES, caps)) {
            cJSON_Delete(caps);
            return MCP_ENOMEM;
        }
    }
    if (!cJSON_HasObjectItem(meta, MCP_META_CLIENT_INFO)) {
        cJSON *info = client_info();
        if (info == NULL || !cJSON_AddItemToObject(meta, MCP_META_CLIENT_INFO, info)) {
            cJSON_Delete(info);
            return MCP_ENOMEM;
        }
    }
    return MCP_OK;
}

static cJSON *initialize_params(const mcp_client_t *c)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *caps = client_capabilities(c, false);
    cJSON *info = client_info();
    bool ok = p != NULL && caps != NULL && info != NULL &&
              cJSON_AddStringToObject(p, "protocolVersion", MCP_PROTOCOL_LATEST) != NULL &&
              cJSON_AddItemToObject(p, "capabilities", caps);
    if (ok) caps = NULL;
    if (ok && (ok = cJSON_AddItemToObject(p, "clientInfo", info))) info = NULL;
    cJSON_Delete(caps);
    cJSON_Delete(info);
    if (!ok) {
        cJSON_Delete(p);
        return NULL;
    }
    return p;
}

/* The discover answer in the shape of an initialize result (protocolVersion, capabilities,
 * serverInfo, instructions), which is what mcp_client_server_init shows either way. */
static cJSON *init_like(const cJSON *result)
{
    cJSON *r = cJSON_CreateObject();
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(result, "capabilities");
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(result, "_meta"), MCP_META_SERVER_INFO);
    const cJSON *instr = cJSON_GetObjectItemCaseSensitive(result, "instructions");
    bool ok = r != NULL &&
              cJSON_AddStringToObject(r, "protocolVersion", MCP_PROTOCOL_MODERN) != NULL &&
              cJSON_AddItemToObject(r, "capabilities",
                                    cJSON_IsObject(caps) ? cJSON_Duplicate(caps, true)
                                                         : cJSON_CreateObject());
    if (ok && cJSON_IsObject(info))
        ok = cJSON_AddItemToObject(r, "serverInfo", cJSON_Duplicate(info, true));
    if (ok && cJSON_IsString(instr))
        ok = cJSON_AddStringToObject(r, "instructions", instr->valuestring) != NULL;
    if (!ok) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

static void on_discovered(void *data, int err, const cJSON *result, const cJSON *error,
                          const char *message)
{
    mcp_client_t *c = data;
    (void)error;
    char reason[MCP__CLIENT_REASON_MAX];
    if (err < 0) {
        snprintf(reason, sizeof reason, "refused initialize, and server/discover failed too: %s",
                 message);
        mcp__client_start_failure(c, reason);
        return;
    }
    const cJSON *versions = cJSON_GetObjectItemCaseSensitive(result, "supportedVersions");
    bool speaks = false;
    const cJSON *v;
    cJSON_ArrayForEach(v, versions)
    {
        if (cJSON_IsString(v) && strcmp(v->valuestring, MCP_PROTOCOL_MODERN) == 0) speaks = true;
    }
    if (!speaks) {
        char *list = versions != NULL ? cJSON_PrintUnformatted(versions) : NULL;
        snprintf(reason, sizeof reason,
                 "refused initialize, and its server/discover offers protocol versions %.200s, "
                 "none of which ptc-mcp speaks (%s, or %s through initialize)",
                 list != NULL ? list : "(none)", MCP_PROTOCOL_MODERN, MCP_PROTOCOL_LATEST);
        free(list);
        mcp__client_start_failure(c, reason);
        return;
    }
    cJSON_Delete(c->init_result);
    c->init_result = init_like(result);
    if (c->init_result == NULL) {
        mcp__client_start_failure(c, "out of memory");
        return;
    }
    mcp_log(c->lg, MCP_LOG_INFO, "downstream server %s speaks %s (stateless)", c->name,
            MCP_PROTOCOL_MODERN);
    after_handshake(c, cJSON_GetObjectItemCaseSensitive(c->init_result, "capabilities"));
}

/* Sends one request of the handshake (params taken; NULL is ENOMEM). */
static void handshake_call(mcp_client_t *c, const char *method, cJSON *params,
                           mcp_client_call_cb cb)
{
    int rc = params != NULL ? mcp__client_start_call(c, method, params, 0, true, NULL, cb, c,
                                                     c->next_id++, NULL)
                            : MCP_ENOMEM;
    if (rc < 0) {
        char reason[256];
        snprintf(reason, sizeof reason, "could not send %s: %s", method, mcp_strerror(rc));
        mcp__client_start_failure(c, reason);
    }
}

/* A server that refused initialize: server/discover, and every later request stateless. */
static void send_discover(mcp_client_t *c)
{
    c->modern = true;
    if (c->http != NULL) mcp__http_set_protocol(c->http, MCP_PROTOCOL_MODERN);
    handshake_call(c, "server/discover", cJSON_CreateObject(), on_discovered);
}

void mcp__client_send_initialize(mcp_client_t *c)
{
    c->modern = false; /* every start asks again: the server may have been upgraded */
    c->listening = false;
    if (c->opts.start_timeout_ms > 0)
        uv_timer_start(c->start_timer, on_start_timeout, c->opts.start_timeout_ms, 0);
    handshake_call(c, "initialize", initialize_params(c), on_initialized);
}
