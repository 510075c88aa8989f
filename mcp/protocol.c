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
