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
        return mcp__http_err(rc);
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

int mcp__http_err(int err)
{
    switch (err) {
    case PTC_HTTP_OK:
        return MCP_OK;
    case PTC_HTTP_ENOMEM:
        return MCP_ENOMEM;
    case PTC_HTTP_EINVAL:
        return MCP_EINVAL;
    case PTC_HTTP_ETOOBIG:
        return MCP_ETOOBIG;
    case PTC_HTTP_EIO:
        return MCP_EIO;
    case PTC_HTTP_ETIMEDOUT:
        return MCP_ETIMEDOUT;
    case PTC_HTTP_ECANCELED:
        return MCP_ECANCELED;
    case PTC_HTTP_ECLOSED:
        return MCP_ECLOSED;
    case PTC_HTTP_EPROTO:
        return MCP_EPROTO;
    case PTC_HTTP_ETLS:
        return MCP_ETLS;
    case PTC_HTTP_ERESOLVE:
        return MCP_ERESOLVE;
    case PTC_HTTP_ECONNECT:
        return MCP_ECONNECT;
    case PTC_HTTP_EREDIRECT:
        return MCP_EREDIRECT;
    case PTC_HTTP_EBUSY:
        return MCP_EBUSY;
    case PTC_HTTP_ESTATE:
        return MCP_ESTATE;
    }
    return err < 0 ? MCP_EIO : MCP_OK;
}
