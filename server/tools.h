/* tools.h - the tools the binary registers on the MCP server, wired onto the libraries. */
#ifndef PTC_SERVER_TOOLS_H
#define PTC_SERVER_TOOLS_H

#include "mcp.h"
#include "options.h"

/* execute_code: Python runs in the executor's sandbox, output in pages (tool_execute.c). */
typedef struct ptc_execute ptc_execute_t;

/**
 * Creates the executor pool from the flags (probing the sandbox: blocks for one interpreter
 * start) and the output page store. Borrows loop, o and lg. MCP_EINVAL when the executor
 * cannot be set up at all (a bad flag, no launcher); a host that lacks a mandatory layer still
 * succeeds, and execute_code then answers every run with status "refused" and how to fix it.
 */
int ptc_execute_new(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg,
                    ptc_execute_t **out);
/** Adds execute_code to srv. ex must outlive srv's sessions. */
int ptc_execute_register(ptc_execute_t *ex, mcp_server_t *srv);
/** Kills runs in flight and frees; keep running the loop until it ends afterwards. */
void ptc_execute_free(ptc_execute_t *ex);

#endif
