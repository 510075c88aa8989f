/* repairers.h - the two repairers behind one ask handle (repairers.c): they send a repair
 * request (repair.h) to a model, the client's own through MCP sampling (here: it needs mcp/) or
 * the OpenAI-compatible chat-completions endpoint of repair/ (ptc_repair_http_*), and fit the
 * repair loop's "ask the model" operation; their codes are mcp/'s, repair/'s and the HTTP
 * client's (one error space), named by ptc_repairer_strerror. Loop-thread only. */
#ifndef PTC_SERVER_REPAIRERS_H
#define PTC_SERVER_REPAIRERS_H

#include <uv.h>

#include "mcp.h"
#include "repair.h"

typedef struct ptc_repair_ask ptc_repair_ask_t; /* one request to a repairer in flight */

/** A static sentence for a code of either repairer (the repair loop's strerror operation). */
const char *ptc_repairer_strerror(int err);

/**
 * Asks the client of call for a fix through sampling/createMessage (the system prompt,
 * prompt as the user message, maxTokens, model preferences, no context), on the call's own
 * session. The client must have declared the sampling capability (MCP_ENOTSUP otherwise, and
 * cb is not called). Borrows call and prompt. *out is set on 0.
 */
int ptc_repair_ask_sampling(mcp_call_t *call, const char *prompt, ptc_repair_cb cb, void *data,
                            ptc_repair_ask_t **out);

/** The params of the sampling/createMessage request for prompt (borrowed): the system prompt,
 *  prompt as the user message, maxTokens, model preferences, no context. NULL on ENOMEM. */
cJSON *ptc_repair_sampling_params(const char *prompt);

/**
 * A repair asked of a 2026-07-28 client (MRTR): nothing is sent here, the caller finishes the
 * call with an InputRequiredResult carrying ptc_repair_sampling_params; the client's next round
 * brings the answer to ptc_repair_ask_answer. cb runs only from there. *out set on 0 (MCP_ENOMEM
 * otherwise).
 */
int ptc_repair_ask_mrtr(ptc_repair_cb cb, void *data, ptc_repair_ask_t **out);
/** The client's answer to a ptc_repair_ask_mrtr request: its sampling result (borrowed;
 *  NULL: the round carried none). Runs cb once and frees a. */
void ptc_repair_ask_answer(ptc_repair_ask_t *a, const cJSON *result);

/** The fallback repairer (repair.h's ptc_repair_http_t) with the binary's logger. */
typedef ptc_repair_http_t ptc_repairer_http_t;

/**
 * Creates it (ptc_repair_http_new), the HTTP client's lines in lg (borrowed). On failure its
 * code (PTC_REPAIR_EINVAL, PTC_REPAIR_ENOMEM or the HTTP client's) with what to do in msg.
 */
int ptc_repairer_http_new(uv_loop_t *loop, const char *url, const char *model, const char *key_env,
                          const char *ca_file, const mcp_logger_t *lg, ptc_repairer_http_t **out,
                          char *msg, size_t msg_size);
/** Frees it; requests in flight are cancelled (their callbacks are not called). */
void ptc_repairer_http_free(ptc_repairer_http_t *r);
/** "MODEL at URL" for messages (borrowed). */
const char *ptc_repairer_http_name(const ptc_repairer_http_t *r);

/** Sends one repair request (ptc_repair_http_ask). Borrows prompt. *out is set on 0; cb runs
 *  later, never before this returns. */
int ptc_repair_ask_http(ptc_repairer_http_t *r, const char *prompt, ptc_repair_cb cb, void *data,
                        ptc_repair_ask_t **out);

/** Stops a request in flight (the client gets notifications/cancelled for sampling); cb is not
 *  called. a may be NULL. */
void ptc_repair_ask_cancel(ptc_repair_ask_t *a);

#endif
