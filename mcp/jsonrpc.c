/* jsonrpc.c - JSON-RPC 2.0 message classification and construction. */
#include "mcp.h"

#include <math.h>
#include <string.h>

/* ids are strings or integers (MCP forbids null ids on requests; JSON-RPC discourages
 * fractional numbers, MCP requires integers). */
static bool id_valid(const cJSON *id)
{
    if (cJSON_IsString(id)) return true;
    if (!cJSON_IsNumber(id)) return false;
    double v = id->valuedouble;
    return isfinite(v) && v == floor(v) && fabs(v) <= 9007199254740991.0;
}

mcp_msg_kind_t mcp_jsonrpc_classify(const cJSON *msg, const char **why)
{
    const char *dummy;
    if (why == NULL) why = &dummy;
    *why = NULL;
    if (!cJSON_IsObject(msg)) {
        *why = "a JSON-RPC message must be an object";
        return MCP_MSG_INVALID;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");
    if (!cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0) {
        *why = "\"jsonrpc\" must be \"2.0\"";
        return MCP_MSG_INVALID;
    }
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(msg, "result");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(msg, "error");
    if (method != NULL) {
        if (!cJSON_IsString(method) || method->valuestring[0] == '\0') {
            *why = "\"method\" must be a non-empty string";
            return MCP_MSG_INVALID;
        }
        if (result != NULL || error != NULL) {
            *why = "a request must not carry \"result\" or \"error\"";
            return MCP_MSG_INVALID;
        }
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
        if (params != NULL && !cJSON_IsObject(params) && !cJSON_IsArray(params)) {
            *why = "\"params\" must be an object";
            return MCP_MSG_INVALID;
        }
        if (id == NULL) return MCP_MSG_NOTIFICATION;
        if (!id_valid(id)) {
            *why = "\"id\" must be a string or an integer";
            return MCP_MSG_INVALID;
        }
        return MCP_MSG_REQUEST;
    }
    if (result != NULL && error != NULL) {
        *why = "a response must not carry both \"result\" and \"error\"";
        return MCP_MSG_INVALID;
    }
    if (result != NULL) {
        if (!id_valid(id)) {
            *why = "a response needs a string or integer \"id\"";
            return MCP_MSG_INVALID;
        }
        return MCP_MSG_RESPONSE;
    }
    if (error != NULL) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
        if (!cJSON_IsObject(error) || !cJSON_IsNumber(code)) {
            *why = "\"error\" must be an object with a numeric \"code\"";
            return MCP_MSG_INVALID;
        }
        if (id != NULL && !cJSON_IsNull(id) && !id_valid(id)) {
            *why = "\"id\" must be a string, an integer or null";
            return MCP_MSG_INVALID;
        }
        return MCP_MSG_ERROR;
    }
    *why = "a message needs \"method\" (request or notification) or \"result\"/\"error\"";
    return MCP_MSG_INVALID;
}

static cJSON *envelope(const cJSON *id)
{
    cJSON *m = cJSON_CreateObject();
    if (m == NULL) return NULL;
    cJSON *idc = id != NULL ? cJSON_Duplicate(id, true) : cJSON_CreateNull();
    if (cJSON_AddStringToObject(m, "jsonrpc", "2.0") == NULL || idc == NULL ||
        !cJSON_AddItemToObject(m, "id", idc)) {
        cJSON_Delete(idc);
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

cJSON *mcp_jsonrpc_result(const cJSON *id, cJSON *result)
{
    cJSON *m = result != NULL ? envelope(id) : NULL;
    if (m == NULL || !cJSON_AddItemToObject(m, "result", result)) {
        cJSON_Delete(m);
        cJSON_Delete(result);
        return NULL;
    }
    return m;
}

cJSON *mcp_jsonrpc_error(const cJSON *id, int code, const char *message, cJSON *data)
{
    cJSON *m = envelope(id);
    cJSON *e = cJSON_CreateObject();
    if (m == NULL || e == NULL || cJSON_AddNumberToObject(e, "code", code) == NULL ||
        cJSON_AddStringToObject(e, "message", message != NULL ? message : "error") == NULL) {
        cJSON_Delete(m);
        cJSON_Delete(e);
        cJSON_Delete(data);
        return NULL;
    }
    if (data != NULL && !cJSON_AddItemToObject(e, "data", data)) {
        cJSON_Delete(data);
        cJSON_Delete(e);
        cJSON_Delete(m);
        return NULL;
    }
    if (!cJSON_AddItemToObject(m, "error", e)) {
        cJSON_Delete(e);
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

cJSON *mcp_jsonrpc_request(const cJSON *id, const char *method, cJSON *params)
{
    cJSON *m = cJSON_CreateObject();
    if (m == NULL || cJSON_AddStringToObject(m, "jsonrpc", "2.0") == NULL) goto fail;
    if (id != NULL) {
        cJSON *idc = cJSON_Duplicate(id, true);
        if (idc == NULL || !cJSON_AddItemToObject(m, "id", idc)) {
            cJSON_Delete(idc);
            goto fail;
        }
    }
    if (cJSON_AddStringToObject(m, "method", method) == NULL) goto fail;
    if (params != NULL && !cJSON_AddItemToObject(m, "params", params)) goto fail;
    return m;
fail:
    cJSON_Delete(params);
    cJSON_Delete(m);
    return NULL;
}
