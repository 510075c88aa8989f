/* repairers.h - the two repairers: they send a repair request (repair.h) to a model, the
 * client's own through MCP sampling (repairer_sampling.c) or an OpenAI-compatible
 * chat-completions endpoint over HTTPS (repairer_http.c). They need mcp/, so they live with the
 * wiring, and fit the repair loop's "ask the model" operation. Loop-thread only. */
#ifndef PTC_SERVER_REPAIRERS_H
#define PTC_SERVER_REPAIRERS_H

#include <uv.h>

#include "mcp.h"
#include "repair.h"

typedef struct ptc_repair_ask ptc_repair_ask_t; /* one request to a repairer in flight */

/**
 * Asks the client of call for a fix through sampling/createMessage (the system prompt,
 * prompt as the user message, maxTokens, model preferences, no context), on the call's own
 * session. The client must have declared the sampling capability (MCP_ENOTSUP otherwise, and
 * cb is not called). Borrows call and prompt. *out is set on 0.
 */
int ptc_repair_ask_sampling(mcp_call_t *call, const char *prompt, ptc_repair_cb cb, void *data,
                            ptc_repair_ask_t **out);

/** The fallback repairer: an OpenAI-compatible chat-completions endpoint. */
typedef struct ptc_repairer_http ptc_repairer_http_t;

/**
 * Creates it: url is the chat-completions endpoint (".../chat/completions" is appended to a
 * URL that does not end so), model the model name, key_env the name of the environment
 * variable holding the API key (NULL: no Authorization header; named but unset: an error),
 * ca_file the --ca-file bundle (NULL: the system's). Reads the CA bundle (blocking: call at
 * start-up). Borrows loop and lg; copies the strings. On error writes what to do to msg.
 */
int ptc_repairer_http_new(uv_loop_t *loop, const char *url, const char *model, const char *key_env,
                          const char *ca_file, const mcp_logger_t *lg, ptc_repairer_http_t **out,
                          char *msg, size_t msg_size);
/** Frees it; requests in flight are cancelled (their callbacks are not called). */
void ptc_repairer_http_free(ptc_repairer_http_t *r);
/** "MODEL at URL" for messages (borrowed). */
const char *ptc_repairer_http_name(const ptc_repairer_http_t *r);

/** Sends one repair request (the system prompt and prompt, temperature 0, max_tokens).
 *  Borrows prompt. *out is set on 0; cb runs later, never before this returns. */
int ptc_repair_ask_http(ptc_repairer_http_t *r, const char *prompt, ptc_repair_cb cb, void *data,
                        ptc_repair_ask_t **out);

/** Stops a request in flight (the client gets notifications/cancelled for sampling); cb is not
 *  called. a may be NULL. */
void ptc_repair_ask_cancel(ptc_repair_ask_t *a);

#endif
