/* http_client.c - the outbound HTTP(S) client of HTTP downstream servers: the client of httpc/
 * with its log lines in an mcp_logger_t, and its error codes as mcp_err_t for the transport
 * (client_http.c). */
#include "client_internal.h"

#include <stdint.h>
#include <stdlib.h>

struct mcp_http_client {
    ptc_http_client_t *http;
};

void mcp_log_hook(void *data, int level, const char *line)
{
    if (level < MCP_LOG_EMERGENCY || level > MCP_LOG_DEBUG) level = MCP_LOG_ERROR;
    mcp_log(data, (mcp_level_t)level, "%s", line);
}

void mcp_http_client_opts_default(mcp_http_client_opts_t *opts)
{
    ptc_http_client_opts_default(opts);
}

int mcp_http_client_new(uv_loop_t *loop, const mcp_http_client_opts_t *opts, const mcp_logger_t *lg,
                        mcp_http_client_t **out)
{
    if (out == NULL) return MCP_EINVAL;
    *out = NULL;
    mcp_http_client_t *c = calloc(1, sizeof *c);
    if (c == NULL) return MCP_ENOMEM;
    /* The hook only reads the logger: dropping const here is what the hook's void * costs. */
    int rc = ptc_http_client_new(loop, opts, mcp_log_hook, (void *)(uintptr_t)lg, &c->http);
    if (rc < 0) {
        free(c);
        return rc;
    }
    *out = c;
    return MCP_OK;
}

void mcp_http_client_free(mcp_http_client_t *c)
{
    if (c == NULL) return;
    ptc_http_client_free(c->http);
    free(c);
}

ptc_http_client_t *mcp__http_client_httpc(mcp_http_client_t *c)
{
    return c->http;
}
