/*
 * repair.h - self-healing of failed execute_code runs (docs/self-healing.md): what is asked of a
 * repairer and how its answer is read, and the repairers themselves.
 *
 * The pure part (repair.c) fingerprints a failure (exception type, the last frames, the message
 * with numbers and addresses stripped) so that a repeated error is recognised, takes code out
 * of a model's reply, summarises how much a repair changed, builds the repair request's text
 * and the repair packet. The repairers (repairer_sampling.c, repairer_http.c) send that text
 * to a model: the client's own through MCP sampling, or an OpenAI-compatible chat-completions
 * endpoint over HTTPS. All functions run on the loop thread.
 */
#ifndef PTC_SERVER_REPAIR_H
#define PTC_SERVER_REPAIR_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "mcp.h"

#define PTC_REPAIR_MAX         10   /* the largest max_repairs a caller or --max-repairs may ask */
#define PTC_REPAIR_ERROR_LINES 5    /* lines of the error sent to a repairer */
#define PTC_REPAIR_FP_MAX      512  /* bytes of a fingerprint, with its NUL */
#define PTC_REPAIR_LINE_MAX    400  /* bytes of the failing line of code shown */
#define PTC_REPAIR_FRAMES      3    /* innermost frames in a fingerprint */
#define PTC_REPAIR_MAX_TOKENS  4096 /* asked of the model */
#define PTC_REPAIR_REPLY_MAX   (256u << 10) /* a reply's text; longer replies are refused */
#define PTC_REPAIR_SIGS_MAX    20           /* tool signatures in one request */

/** The system prompt of every repair request (static). */
extern const char ptc_repair_system_prompt[];

/**
 * Writes the fingerprint of a failed run into out (size >= 1): for status "error" the last
 * exception line of err_text ("Type: message") with hex addresses and digit runs replaced by
 * '#', and the file:function of the innermost PTC_REPAIR_FRAMES frames (line numbers are left
 * out, so code that moved fails the same way); without a traceback, the exit code and the last
 * stderr line, normalised the same way. "timeout", "oom" and "killed SIGNAL" for the others.
 * Borrows everything; err_text may be NULL.
 */
void ptc_repair_fingerprint(const char *status, int exit_code, const char *signal_name,
                            const char *err_text, char *out, size_t size);

/** The 1-based line of the program ("<string>", as `python -c` names it) in the innermost
 *  frame of err_text's last traceback, or 0 when there is none. */
unsigned ptc_repair_failing_line(const char *err_text);

/** Copies line n (1-based) of code into out without its indentation, cut to the buffer; ""
 *  when code has no such line. */
void ptc_repair_code_line(const char *code, unsigned n, char *out, size_t size);

/** The start of the last n lines of s (inside s; trailing newlines ignored). */
const char *ptc_repair_last_lines(const char *s, int n);

/**
 * The program in a model's reply: the first fenced block whose info string is python, py or
 * python3; else the first fenced block of any kind (``` or ~~~, an unclosed one runs to the
 * end); else the whole reply. Surrounding blank lines are dropped and the result ends with one
 * newline ("" when nothing is left). Caller frees; NULL on ENOMEM.
 */
char *ptc_repair_extract_code(const char *reply);

/** True when a and b are the same program apart from trailing white space on lines and blank
 *  lines at the ends (so a repair that changes nothing is recognised). */
bool ptc_repair_same_code(const char *a, const char *b);

/** "+A -B lines" for the lines of after not in before and of before not in after (as
 *  multisets: moved lines count as unchanged). */
void ptc_repair_diff_summary(const char *before, const char *after, char *out, size_t size);

/**
 * The user message of a repair request: the program, the error's last lines (error_tail),
 * the signatures of the tools it called (signatures, may be NULL or "") and how to answer.
 * attempt is the 1-based number of the failed run. Caller frees; NULL on ENOMEM.
 */
char *ptc_repair_prompt(const char *code, unsigned attempt, const char *error_tail,
                        const char *signatures);

/**
 * The repair packet for an agent that must fix the code itself: {"fingerprint", "last_lines",
 * "line" (number or null), "failing_line" (text or null)}. Caller deletes; NULL on ENOMEM.
 */
cJSON *ptc_repair_packet(const char *fingerprint, const char *error_tail, unsigned line,
                         const char *line_text);

/* ---------------------------------------------------------------------------------------- */
/* Repairers                                                                                 */

/**
 * Called once with the model's reply text (borrowed, valid during the call) or err < 0 and a
 * message saying why (borrowed): MCP_EREMOTE for a refusal or error answer (the user declined,
 * the endpoint said no), MCP_ETIMEDOUT, MCP_EPROTO for an answer without text, others from
 * the transport. Never called after ptc_repair_ask_cancel returns, nor during it.
 */
typedef void (*ptc_repair_cb)(void *data, int err, const char *reply, const char *message);

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
