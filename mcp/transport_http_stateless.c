/* transport_http_stateless.c - Streamable HTTP, 2026-07-28: stateless requests. A POST that names
 * no session and speaks 2026-07-28 gets a session of its own that ends with its answer; its
 * standard headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name) and SEP-2243 custom headers
 * (Mcp-Param-*) must agree with its body. */
#include "header_value.h"
#include "transport_http_internal.h"

#include <stdlib.h>
#include <string.h>

/* Header `name` without the optional white space around it (RFC 9110 5.5), copied into buf;
 * NULL when absent. A value longer than buf is cut, which no valid value is. */
static const char *header_trimmed(const mcp__hconn_t *c, const char *name, char *buf, size_t size)
{
    const char *v = mcp__hconn_header(c, name);
    if (v == NULL) return NULL;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n >= size) n = size - 1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    return buf;
}

/* A POST is a stateless request when it names no session and either its
 * MCP-Protocol-Version is none of the legacy revisions or its body carries the 2026 _meta. */
bool mcp__http_is_stateless_post(const mcp__hconn_t *c, const mcp__hbody_t *bi)
{
    if (mcp__hconn_header(c, "Mcp-Session-Id") != NULL) return false;
    char pv[64];
    if (header_trimmed(c, "MCP-Protocol-Version", pv, sizeof pv) != NULL)
        return !mcp_protocol_supported(pv);
    return !bi->is_batch &&
           mcp_params_are_modern(cJSON_GetObjectItemCaseSensitive(bi->msg, "params"));
}

static void reject(mcp__hconn_t *c, int status, const cJSON *id, int code, const char *msg)
{
    mcp__hconn_error_id(c, status, id, code, msg, NULL);
}

/* SEP-2243 custom headers: a tool's argument whose schema names "x-mcp-header": NAME travels
 * in the header Mcp-Param-NAME too, literally or as =?base64?...?= (strict base64). True when
 * every such argument the body has is in its header with the same value; why says otherwise. */
static bool custom_headers_match(const mcp__hconn_t *c, const mcp_server_t *srv,
                                 const cJSON *params, char *why, size_t why_size)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
    const mcp__entry_t *tool =
        cJSON_IsString(name) ? mcp__server_find_tool(srv, name->valuestring) : NULL;
    const cJSON *props =
        tool != NULL ? cJSON_GetObjectItemCaseSensitive(tool->input_schema, "properties") : NULL;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
    const cJSON *p;
    cJSON_ArrayForEach(p, props)
    {
        const cJSON *hname = cJSON_GetObjectItemCaseSensitive(p, "x-mcp-header");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, p->string);
        if (!cJSON_IsString(hname) || v == NULL || cJSON_IsNull(v)) continue;
        char header[160], raw[1024], decoded[1024];
        snprintf(header, sizeof header, "Mcp-Param-%.100s", hname->valuestring);
        char *body = cJSON_IsString(v) ? NULL : cJSON_PrintUnformatted(v);
        const char *want = cJSON_IsString(v) ? v->valuestring : body;
        const char *got = header_trimmed(c, header, raw, sizeof raw);
        if (got != NULL && (got = mcp__header_value_decode(got, decoded, sizeof decoded)) == NULL) {
            snprintf(why, why_size, "Header mismatch: %s is not valid base64", header);
            cJSON_free(body);
            return false;
        }
        bool same = got != NULL && want != NULL && strcmp(got, want) == 0;
        cJSON_free(body);
        if (!same) {
            snprintf(why, why_size, "Header mismatch: %s must carry argument %.80s's value", header,
                     p->string);
            return false;
        }
    }
    return true;
}

/* The standard headers must agree with the body (-32020 HeaderMismatch, 400 otherwise). */
static bool check_modern_headers(mcp__hconn_t *c, const mcp_server_t *srv, const cJSON *msg)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    const char *method = cJSON_GetObjectItemCaseSensitive(msg, "method")->valuestring;
    char pv[64], hm[256], hn[MCP_MAX_URI_BYTES + 1], m[512];
    char raw[(MCP_MAX_URI_BYTES + 2) / 3 * 4 + 16]; /* the header, base64 grows it by a third */
    if (header_trimmed(c, "MCP-Protocol-Version", pv, sizeof pv) == NULL) {
        reject(c, 400, id, MCP_ERR_HEADER_MISMATCH,
               "Header mismatch: a 2026-07-28 request needs the MCP-Protocol-Version header");
        return false;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(params, "_meta"), MCP_META_PROTOCOL_VERSION);
    if (cJSON_IsString(ver) && strcmp(ver->valuestring, pv) != 0) {
        snprintf(m, sizeof m,
                 "Header mismatch: MCP-Protocol-Version \"%.40s\" differs from _meta's \"%.40s\"",
                 pv, ver->valuestring);
        reject(c, 400, id, MCP_ERR_HEADER_MISMATCH, m);
        return false;
    }
    if (header_trimmed(c, "Mcp-Method", hm, sizeof hm) == NULL || strcmp(hm, method) != 0) {
        snprintf(m, sizeof m, "Header mismatch: Mcp-Method must be the body's method \"%.160s\"",
                 method);
        reject(c, 400, id, MCP_ERR_HEADER_MISMATCH, m);
        return false;
    }
    /* A name that is not printable ASCII comes base64-encoded, as our own client sends it. */
    const char *name = mcp__modern_name_of(method, params);
    const char *got = name != NULL ? header_trimmed(c, "Mcp-Name", raw, sizeof raw) : NULL;
    if (got != NULL) got = mcp__header_value_decode(got, hn, sizeof hn);
    if (name != NULL && (got == NULL || strcmp(got, name) != 0)) {
        snprintf(m, sizeof m, "Header mismatch: Mcp-Name must be the body's \"%.160s\"", name);
        reject(c, 400, id, MCP_ERR_HEADER_MISMATCH, m);
        return false;
    }
    if (strcmp(method, "tools/call") == 0 && !custom_headers_match(c, srv, params, m, sizeof m)) {
        reject(c, 400, id, MCP_ERR_HEADER_MISMATCH, m);
        return false;
    }
    return true;
}

/* Serves one stateless POST: a session of its own that ends with the answer. */
void mcp__http_post_stateless(mcp_http_server_t *hs, mcp__hconn_t *c, const mcp__hreq_t *req,
                              const mcp__hbody_t *bi)
{
    if (bi->is_batch) {
        reject(c, 400, NULL, MCP_JSONRPC_INVALID_REQUEST,
               "Invalid Request: protocol 2026-07-28 has no JSON-RPC batches");
        return;
    }
    bool request = bi->n_requests > 0;
    if (request && !check_modern_headers(c, hs->srv, bi->msg)) return;
    /* A stateless request is bounded by its connection (max_connections), not by the session
     * limit: it must never make a legacy session give way. */
    if (hs->stopping) {
        mcp__hconn_error(c, 503, -32000, "Service Unavailable: the server is stopping", NULL);
        return;
    }
    mcp__hsess_t *se = mcp__http_sess_new(hs, false);
    if (se != NULL) {
        se->stateless = true;
        hs->n_sessions--; /* counted by mcp__http_sess_new; not a session of the limit */
        mcp_session_set_stateless(se->s);
    }
    if (se != NULL && !request) {
        /* A notification: nothing answers it. */
        mcp_session_receive(se->s, req->body, req->body_len);
        mcp__hconn_respond(c, 202, NULL, NULL, "", 0);
        mcp__http_stateless_done(se);
        return;
    }
    cJSON *ids = cJSON_CreateArray();
    cJSON *id = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(bi->msg, "id"), true);
    mcp__hstream_t *st = NULL;
    if (se != NULL && ids != NULL && id != NULL && cJSON_AddItemToArray(ids, id)) {
        id = NULL;
        st = mcp__http_stream_new(se, false, false);
    }
    cJSON_Delete(id);
    if (se == NULL || st == NULL) {
        cJSON_Delete(ids);
        mcp__hconn_error(c, 500, MCP_JSONRPC_INTERNAL_ERROR, "out of memory", NULL);
        if (se != NULL) mcp__http_end_session(se, true, false);
        return;
    }
    st->ids = ids;
    se->n_open++;
    st->conn = c;
    mcp__hconn_wait(c, st);
    se->dispatching = st;
    mcp_session_receive(se->s, req->body, req->body_len);
    if (se->dispatching == st) se->dispatching = NULL;
}
