/*
 * repair.h - self-healing of failed execute_code runs (docs/self-healing.md): what is asked of a
 * repairer and how its answer is read, and the replay journal.
 *
 * The pure part (repair.c) fingerprints a failure (exception type, the last frames, the message
 * with numbers and addresses stripped) so that a repeated error is recognised, takes code out
 * of a model's reply, summarises how much a repair changed, builds the repair request's text
 * and the repair packet. Of the repairers that send that text to a model, the fallback one (an
 * OpenAI-compatible endpoint over HTTPS, repairer_http.c) is here, and one ask handle over it
 * and the client's own model (ask.c); sending a sampling request needs MCP, so the wiring
 * injects it (ptc_repair_sampler_t). All functions run on the loop thread.
 */
#ifndef PTC_REPAIR_H
#define PTC_REPAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "base.h"
#include "httpc.h"

#define PTC_REPAIR_MAX         10   /* the largest max_repairs a caller or --max-repairs may ask */
#define PTC_REPAIR_ERROR_LINES 5    /* lines of the error sent to a repairer */
#define PTC_REPAIR_FP_MAX      512  /* bytes of a fingerprint, with its NUL */
#define PTC_REPAIR_LINE_MAX    400  /* bytes of the failing line of code shown */
#define PTC_REPAIR_FRAMES      3    /* innermost frames in a fingerprint */
#define PTC_REPAIR_MAX_TOKENS  4096 /* asked of the model */
#define PTC_REPAIR_REPLY_MAX   (256u << 10) /* a reply's text; longer replies are refused */
#define PTC_REPAIR_MIN_LEFT_MS 1000u        /* no repair is asked for with less time left */

/* The codes of the repair library, its repairers and its journal (base.h's error space): errno
 * values, and extras from PTC_ERR_REPAIR down. X(NAME, VALUE, TEXT) */
#define PTC_REPAIR_ERRORS(X)                                                                       \
    X(PTC_REPAIR_OK, 0, "success")                                                                 \
    X(PTC_REPAIR_ENOMEM, -ENOMEM, "out of memory")                                                 \
    /* max_repairs out of 0..PTC_REPAIR_MAX; a repairer's bad settings */                          \
    X(PTC_REPAIR_EINVAL, -EINVAL, "invalid argument")                                              \
    /* the repairer's answer holds no usable text */                                               \
    X(PTC_REPAIR_EPROTO, -EPROTO, "the repairer's answer holds no code")                           \
    /* the answer is longer than PTC_REPAIR_REPLY_MAX */                                           \
    X(PTC_REPAIR_ETOOBIG, -E2BIG, "the repairer's answer is too long")                             \
    /* ENOSPC: a bound of the journal was reached: the journal is now lost */                      \
    X(PTC_REPAIR_EFULL, -ENOSPC, "the journal is full")                                            \
    X(PTC_REPAIR_EREMOTE, PTC_ERR_REPAIR, "the repairer answered with an error")

enum { PTC_REPAIR_ERRORS(PTC_ERR_ENUM) };

/** A static English description of any code (never NULL): the library's own, else
 *  ptc_http_strerror's. */
const char *ptc_repair_strerror(int err);

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

/* ---- the repairer's answer ---------------------------------------------------------------- */

/**
 * Called once with the model's reply text (borrowed, valid during the call) or err < 0 and a
 * message saying why (borrowed, may be NULL). The codes are of the one error space (base.h):
 * the client's sampling gives mcp/'s (MCP_EREMOTE for a refusal or error answer, MCP_ETIMEDOUT,
 * MCP_EPROTO for an answer without text, others from the transport), the HTTP repairer
 * PTC_REPAIR_* and the HTTP client's. Never called after the
 * request was cancelled, nor during the cancel.
 */
typedef void (*ptc_repair_cb)(void *data, int err, const char *reply, const char *message);

/** The text of a model's message content: a {"type":"text"} block, an array of blocks (their
 *  texts joined by newlines) or a string. Caller frees; NULL when there is no text or on
 *  ENOMEM. */
char *ptc_repair_content_text(const cJSON *content);

/* ---- the fallback repairer ----------------------------------------------------------------- */

/** An OpenAI-compatible chat-completions endpoint (repairer_http.c). */
typedef struct ptc_repair_http ptc_repair_http_t;
typedef struct ptc_repair_http_ask ptc_repair_http_ask_t; /* one request to it in flight */

/**
 * Creates it: url is the chat-completions endpoint (".../chat/completions" is appended to a
 * URL that does not end so), model the model name, key_env the name of the environment
 * variable holding the API key (NULL: no Authorization header; named but unset: an error),
 * ca_file the --ca-file bundle (NULL: the system's). Reads the CA bundle (blocking: call at
 * start-up); the HTTP client's lines go to log (may be NULL). Borrows loop and log_data; copies
 * the strings. On error (PTC_REPAIR_EINVAL, PTC_REPAIR_ENOMEM, or the HTTP client's code when it
 * cannot be made) writes what to do to msg.
 */
int ptc_repair_http_new(uv_loop_t *loop, const char *url, const char *model, const char *key_env,
                        const char *ca_file, ptc_http_log_fn log, void *log_data,
                        ptc_repair_http_t **out, char *msg, size_t msg_size);
/** Frees it; requests in flight are cancelled (their callbacks are not called). */
void ptc_repair_http_free(ptc_repair_http_t *r);
/** "MODEL at URL" for messages (borrowed). */
const char *ptc_repair_http_name(const ptc_repair_http_t *r);
/**
 * Sends one repair request (the system prompt and prompt, temperature 0, max_tokens). Borrows
 * prompt. *out is set on 0; cb runs later, never before this returns, with the reply or
 * the HTTP client's code when the request failed, PTC_REPAIR_EREMOTE (an HTTP error status),
 * _EPROTO or _ETOOBIG, and a message.
 */
int ptc_repair_http_ask(ptc_repair_http_t *r, const char *prompt, ptc_repair_cb cb, void *data,
                        ptc_repair_http_ask_t **out);
/** Stops a request in flight; cb is not called. a may be NULL. */
void ptc_repair_http_cancel(ptc_repair_http_ask_t *a);

/* ---- asking a model: one handle over the repairers --------------------------------------- */
/*
 * What the repair loop's ask operation hands out (ask.c): a request to the fallback endpoint
 * (ptc_repair_ask_http), to the client's own model through a sampling/createMessage request
 * the host sends (ptc_repair_ask_sampling, with the host's sampler: the MCP part), or a sampling
 * request the host delivers itself and answers later (ptc_repair_ask_later, for a client asked
 * in an InputRequiredResult). Every kind ends in exactly one ptc_repair_cb, or none after
 * ptc_repair_ask_cancel. A sampling answer is a CreateMessageResult: its text (ptc_repair_
 * content_text) is the reply, PTC_REPAIR_EPROTO without text, PTC_REPAIR_ETOOBIG past
 * PTC_REPAIR_REPLY_MAX.
 */
typedef struct ptc_repair_ask ptc_repair_ask_t; /* one request to a repairer in flight */

/** How the host sends a sampling request (data is its own). */
typedef struct ptc_repair_sampler {
    /** Sends sampling/createMessage with params (taken, also on failure) for a: 0 with *sent
     *  set, and later exactly one ptc_repair_ask_sampled(a, ...), also after a cancel, never
     *  before send returns; or < 0 (a's callback never runs), e.g. a code meaning the client
     *  cannot sample. */
    int (*send)(void *data, cJSON *params, ptc_repair_ask_t *a, void **sent);
    /** Stops the request sent: its ptc_repair_ask_sampled comes (now or later) and is not
     *  passed on. */
    void (*cancel)(void *data, void *sent);
    void *data;
} ptc_repair_sampler_t;

/** The params of the sampling/createMessage request for prompt (borrowed): the system prompt,
 *  prompt as the user message, maxTokens, temperature 0, model preferences that favour
 *  intelligence, no context. Caller deletes; NULL on ENOMEM. */
cJSON *ptc_repair_sampling_params(const char *prompt);

/** Sends prompt (borrowed) to the fallback repairer r. *out set on 0; cb runs later, never
 *  before this returns. */
int ptc_repair_ask_http(ptc_repair_http_t *r, const char *prompt, ptc_repair_cb cb, void *data,
                        ptc_repair_ask_t **out);
/** Asks the client's model through s (copied; its data must outlive the request) with the
 *  params of prompt (borrowed). *out set on 0; send's code (PTC_REPAIR_ENOMEM) otherwise and cb
 *  never runs. */
int ptc_repair_ask_sampling(const ptc_repair_sampler_t *s, const char *prompt, ptc_repair_cb cb,
                            void *data, ptc_repair_ask_t **out);
/** The end of a sampler's request: err < 0 with message (borrowed, may be NULL), or the
 *  sampling result (borrowed). Runs cb (unless cancelled) and frees a. */
void ptc_repair_ask_sampled(ptc_repair_ask_t *a, int err, const cJSON *result, const char *message);
/** A request the host delivers itself: nothing is sent here; *params gets the sampling
 *  request's params (caller's) and the answer comes through ptc_repair_ask_answer. *out set on
 *  0; PTC_REPAIR_ENOMEM (both NULL) otherwise. */
int ptc_repair_ask_later(const char *prompt, ptc_repair_cb cb, void *data, cJSON **params,
                         ptc_repair_ask_t **out);
/** The answer to a ptc_repair_ask_later request: its sampling result (borrowed; NULL: none
 *  came, PTC_REPAIR_EPROTO). Runs cb once and frees a. */
void ptc_repair_ask_answer(ptc_repair_ask_t *a, const cJSON *result);
/** Stops a request in flight: cb is not called. a may be NULL. */
void ptc_repair_ask_cancel(ptc_repair_ask_t *a);

/* ---- the replay journal -------------------------------------------------------------------- */
/*
 * The replay journal of one execute_code request (docs/self-healing.md).
 *
 * Within one request, every call that sandboxed code makes to a tool not annotated
 * readOnlyHint: true is keyed by the tool id, the canonical JSON of its arguments (object keys
 * sorted, no spaces) and its occurrence number (the n-th identical call of the attempt). A
 * successful result (no transport error, no isError) is kept; in a later attempt of the same
 * request the n-th identical call gets the n-th kept result instead of running again, so a
 * repaired program never repeats a side effect that already happened. Errors and timeouts are
 * never kept: such a call runs again.
 *
 * Bounded: PTC_JOURNAL_ENTRIES_MAX keys and PTC_JOURNAL_BYTES_MAX bytes of results. A result
 * that does not fit marks the journal lost: a repair could then repeat a side effect, so the
 * repair loop must not run the code again. Loop-thread only; no I/O.
 */

#define PTC_JOURNAL_ENTRIES_MAX  1024u       /* kept results per request */
#define PTC_JOURNAL_BYTES_MAX    (16u << 20) /* their serialised size */
#define PTC_JOURNAL_KEYS_MAX     4096u       /* distinct call keys counted per attempt */
#define PTC_JOURNAL_REPLAYED_MAX 256u        /* replayed calls listed per attempt */

/* The journal's codes: PTC_REPAIR_ENOMEM, PTC_REPAIR_EFULL (a bound was reached: the journal is
 * now lost). */

typedef struct ptc_journal ptc_journal_t;

/**
 * The canonical JSON text of v: objects' members sorted by key (byte order, stable for
 * duplicate keys), printed without white space. Borrows v. Returns a string the caller frees
 * with free(), or NULL on ENOMEM (or NULL v).
 */
char *ptc_json_canonical(const cJSON *v);

/** The journal key of a call: "TOOL_ID\n" followed by the canonical arguments (NULL args are
 *  {}). Caller frees; NULL on ENOMEM. */
char *ptc_journal_key(const char *tool_id, const cJSON *args);

/** A new, empty journal whose first attempt has begun. *out set on 0. */
int ptc_journal_new(ptc_journal_t **out);
void ptc_journal_free(ptc_journal_t *j);

/** Starts the next attempt: occurrence numbers count from 1 again, the replayed list and the
 *  used tools empty. Kept results stay. */
void ptc_journal_begin_attempt(ptc_journal_t *j);

/** Counts one more call with this key in the current attempt and returns its occurrence
 *  number (1 for the first). Past PTC_JOURNAL_KEYS_MAX keys it returns 0 and marks the
 *  journal lost. Borrows key. */
unsigned ptc_journal_occurrence(ptc_journal_t *j, const char *key);

/** The kept result of occurrence occ of key (borrowed, valid until the journal is freed), or
 *  NULL when none was kept. */
const cJSON *ptc_journal_lookup(const ptc_journal_t *j, const char *key, unsigned occ);

/**
 * Keeps a copy of result for (key, occ) when the call succeeded: result is a CallToolResult
 * whose isError is not true. An error result is ignored (returns 0). An entry already kept for
 * (key, occ) stays. PTC_REPAIR_EFULL / ENOMEM mark the journal lost.
 */
int ptc_journal_record(ptc_journal_t *j, const char *key, unsigned occ, const cJSON *result);

/** Notes that the current attempt got (tool_id, occ) from the journal. */
void ptc_journal_note_replay(ptc_journal_t *j, const char *tool_id, unsigned occ);
/** The current attempt's replayed calls, [{"tool", "occurrence"}] (caller frees; NULL on
 *  ENOMEM). The list starts empty again. */
cJSON *ptc_journal_take_replayed(ptc_journal_t *j);

/** Notes a tool the code called (any outcome), for the repair request's signatures. */
void ptc_journal_note_used(ptc_journal_t *j, const char *tool_id);
/** Tool ids the current attempt called, each once, in first-call order (borrowed array of
 *  strings). */
const cJSON *ptc_journal_used(const ptc_journal_t *j);

/** True once something could not be journaled (then a rerun could repeat a side effect). */
bool ptc_journal_lost(const ptc_journal_t *j);
/** Results kept. */
size_t ptc_journal_count(const ptc_journal_t *j);

/* ---- the repair loop ------------------------------------------------------------------------ */
/*
 * One execute_code request: its runs and, with self-healing (max_repairs > 0), the repairs of
 * a failed run, under one deadline for everything. The host runs the code and asks the model
 * (ptc_repair_ops_t); the loop keeps the attempts, their history and the replay journal, and
 * stops at the first of: success; the same error again; a repair that changes
 * nothing; the budget (max_repairs); a journal that lost a result (a rerun could repeat a side
 * effect); less than PTC_REPAIR_MIN_LEFT_MS left, or the deadline passing while a repair is
 * asked for. When no repairer is there at the start (ops->repairer gives NULL), there is no
 * self-healing: one run, no attempt numbers, no stop reason, the failure with its repair packet.
 * Loop-thread only.
 */

typedef struct ptc_repair_loop ptc_repair_loop_t;

/** A finished run as the loop sees it (plain data, borrowed for the call). */
typedef struct ptc_repair_run {
    const char *status;      /* "ok", "error", "timeout", "killed", "oom" */
    int exit_code;           /* < 0: none */
    const char *signal_name; /* NULL: none */
    const char *err;         /* its stderr, valid UTF-8 without NUL (NULL: none) */
    uint64_t timeout_ms;     /* the timeout the run had */
    uint64_t duration_ms;
    uint64_t tool_calls; /* answered by a tool or from the journal */
    /* NULL, or why no rerun is possible (a clause: "the cell ended its session"): the loop
       then stops without asking for a fix that could not run */
    const char *no_rerun;
} ptc_repair_run_t;

/** Who repairs, in the words of the result (all static or outliving the loop). */
typedef struct ptc_repairer_desc {
    const char *id;     /* an attempt's "repaired_by": "sampling", "http" */
    const char *who;    /* "the WHO did not give a fix: ..." */
    const char *by;     /* "N repairs by BY" */
    const char *asking; /* progress: "asking ASKING for a fix" */
} ptc_repairer_desc_t;

/** The client's model through sampling, in the words of the result ("sampling"). */
extern const ptc_repairer_desc_t ptc_repair_sampling_desc;
/** Who repairs (the loop's repairer operation): the client's model when it can sample, else
 *  fallback (--repair-url; NULL: none), else NULL with why (a sentence) in why. */
const ptc_repairer_desc_t *ptc_repair_pick(bool can_sample, const ptc_repairer_desc_t *fallback,
                                           char *why, size_t why_size);

/** What the host does for the loop. data is the loop's data pointer. */
typedef struct ptc_repair_ops {
    /** Starts a run of code (borrowed) with timeout_ms; returns 0 and later calls
     *  ptc_repair_loop_ran or ptc_repair_loop_refused once, or < 0 with a sentence in msg. */
    int (*run)(void *data, const char *code, uint64_t timeout_ms, char *msg, size_t msg_size);
    /** The first run could not be started or run: answer "refused" with message. */
    void (*refused)(void *data, const char *message);
    /** The loop is over: answer from the last run and ptc_repair_loop_report. May free the
     *  loop. Called exactly once (or refused is), unless the loop is freed first. */
    void (*finish)(void *data);
    /** The repairer to ask now, or NULL with why (a sentence) when there is none. */
    const ptc_repairer_desc_t *(*repairer)(void *data, char *why, size_t why_size);
    /** Sends prompt (borrowed) to that repairer: 0 with *handle set, cb to run once later
     *  (never before this returns), or < 0 (cb never runs). */
    int (*ask)(void *data, const char *prompt, ptc_repair_cb cb, void *cb_data, void **handle);
    /** Stops a request in flight: its cb does not run. */
    void (*cancel)(void *data, void *handle);
    /** A sentence for an error code of ask or of its cb (static). */
    const char *(*strerror)(int err);
    /** Optional: the signatures of the tools the code uses (used: their ids) for the prompt;
     *  caller frees, NULL for none. */
    char *(*signatures)(void *data, const char *code, const cJSON *used);
    /** Optional: progress of the request (elapsed and total: its deadline, in ms). */
    void (*progress)(void *data, double elapsed_ms, double total_ms, const char *msg);
} ptc_repair_ops_t;

/**
 * A loop for code (copied) whose runs get timeout_ms each, repaired up to max_repairs times
 * (0..PTC_REPAIR_MAX; 0: no self-healing, no journal), all within deadline_ms from now (or
 * timeout_ms when longer). A repair longer than code_max bytes holds no usable code. Borrows
 * uv, ops and data. *out set on 0; PTC_REPAIR_ENOMEM or PTC_REPAIR_EINVAL otherwise.
 */
int ptc_repair_loop_new(uv_loop_t *uv, const char *code, uint64_t timeout_ms, long max_repairs,
                        uint64_t deadline_ms, size_t code_max, const ptc_repair_ops_t *ops,
                        void *data, ptc_repair_loop_t **out);
/** Asks ops->repairer whether anyone can repair, then starts the first run (ops may answer and
 *  free the loop before this returns). */
void ptc_repair_loop_start(ptc_repair_loop_t *l);
/** The current run finished (the host keeps what its answer needs first: finish may run and
 *  free the loop inside). */
void ptc_repair_loop_ran(ptc_repair_loop_t *l, const ptc_repair_run_t *run);
/** The current run could not be run (the sandbox refused): refused or finish runs inside. */
void ptc_repair_loop_refused(ptc_repair_loop_t *l, const char *message);
/** Cancels a repair request in flight (through ops->cancel) and frees. NULL allowed. */
void ptc_repair_loop_free(ptc_repair_loop_t *l);

bool ptc_repair_loop_healing(const ptc_repair_loop_t *l);
/** The current attempt (1-based) and the budget. */
unsigned ptc_repair_loop_attempt(const ptc_repair_loop_t *l);
long ptc_repair_loop_max_repairs(const ptc_repair_loop_t *l);
/** The current attempt's program (borrowed). */
const char *ptc_repair_loop_code(const ptc_repair_loop_t *l);
/** The request's replay journal for the bridge (borrowed; NULL without self-healing). */
ptc_journal_t *ptc_repair_loop_journal(const ptc_repair_loop_t *l);
/** True while a repair request is in flight. */
bool ptc_repair_loop_asking(const ptc_repair_loop_t *l);
/** Time since the request began and the whole of its deadline, in ms. Every reading is later
 * than the one before (by 1 ms when the loop's time has not moved), so that progress updates
 * made from it all increase. */
void ptc_repair_loop_clock(ptc_repair_loop_t *l, double *elapsed_ms, double *total_ms);
/** Progress of the current run (elapsed_ms of it, its output and tool calls so far) through
 *  ops->progress: "attempt N of M: running ..." against the request's deadline with
 *  self-healing, else "running ..." against the run's timeout. */
void ptc_repair_loop_run_progress(ptc_repair_loop_t *l, uint64_t elapsed_ms, uint64_t output_bytes,
                                  uint64_t tool_calls);
/** Why the repairs stopped ("" when they did not: success, or no self-healing). */
const char *ptc_repair_loop_stopped(const ptc_repair_loop_t *l);
/**
 * What the result says of self-healing, for last (the run that ends the request): *text the
 * history, the stop reason, the final code and the packet's line ("" when there is nothing to
 * say; caller frees), *packet the repair packet for a failed run with self-healing on (with
 * "stopped"; else NULL; caller deletes). Call before taking the attempts. PTC_REPAIR_ENOMEM.
 */
int ptc_repair_loop_report(const ptc_repair_loop_t *l, const ptc_repair_run_t *last, char **text,
                           cJSON **packet);
/** The attempts' history [{"attempt", "status", "exit_code", "error", "changes",
 *  "repaired_by", "duration_ms", "tool_calls", "replayed"}] (caller deletes; then NULL). */
cJSON *ptc_repair_loop_take_attempts(ptc_repair_loop_t *l);

#endif
