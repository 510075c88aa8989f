/* protocol.c - the MCP protocol revisions this library speaks. */
#include "mcp.h"

#include <string.h>

/* Oldest first; the last entry is the newest and the answer to unknown versions. */
static const char *const supported[] = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"};
#define N_SUPPORTED (sizeof supported / sizeof supported[0])

bool mcp_protocol_supported(const char *version)
{
    if (version == NULL) return false;
    for (size_t i = 0; i < N_SUPPORTED; i++)
        if (strcmp(version, supported[i]) == 0) return true;
    return false;
}

const char *mcp_protocol_negotiate(const char *requested)
{
    for (size_t i = 0; requested != NULL && i < N_SUPPORTED; i++)
        if (strcmp(requested, supported[i]) == 0) return supported[i];
    return supported[N_SUPPORTED - 1];
}

int mcp_protocol_cmp(const char *a, const char *b)
{
    /* Revisions are ISO dates, so byte order is time order. */
    return strcmp(a != NULL ? a : "", b != NULL ? b : "");
}

/* --- 2026-07-28: the stateless revisions ------------------------------------------------ */

static const char *const modern[] = {MCP_PROTOCOL_MODERN};
#define N_MODERN (sizeof modern / sizeof modern[0])

bool mcp_protocol_modern_supported(const char *version)
{
    for (size_t i = 0; version != NULL && i < N_MODERN; i++)
        if (strcmp(version, modern[i]) == 0) return true;
    return false;
}

cJSON *mcp_protocol_modern_list(void)
{
    return cJSON_CreateStringArray(modern, (int)N_MODERN);
}

bool mcp_params_are_modern(const cJSON *params)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    return cJSON_IsObject(meta) && cJSON_HasObjectItem(meta, MCP_META_PROTOCOL_VERSION);
}

int mcp_modern_http_status(int code)
{
    if (code == MCP_JSONRPC_METHOD_NOT_FOUND) return 404;
    if (code == MCP_JSONRPC_INTERNAL_ERROR) return 500;
    /* The client's mistakes: malformed JSON-RPC, bad params, headers, capabilities, version. */
    if ((code >= MCP_JSONRPC_PARSE_ERROR && code <= MCP_JSONRPC_INVALID_REQUEST) ||
        code == MCP_JSONRPC_INVALID_PARAMS ||
        (code >= MCP_ERR_UNSUPPORTED_PROTOCOL_VERSION && code <= MCP_ERR_HEADER_MISMATCH))
        return 400;
    return 200;
}
