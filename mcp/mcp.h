/*
 * mcp.h - the ptc-mcp protocol library: JSON-RPC 2.0, MCP sessions, transports, tool table,
 * server-to-client requests and an outbound HTTP(S) client, all on one libuv loop.
 *
 * The library knows JSON-RPC and MCP only: it never runs Python or computes embeddings. The
 * binary (server/) registers tools whose handlers call the executor and registry libraries.
 *
 * Conventions
 * - Functions return 0 (MCP_OK) or a negative mcp_err_t; mcp_strerror() names it.
 * - Every object has an *_init / *_close (or *_new / *_free) pair; nothing is global.
 * - "takes" means the callee owns the memory afterwards (even on error); "borrows" means it
 *   does not; returned pointers say who frees them.
 * - All functions are called on the loop thread unless they say otherwise.
 */
#ifndef PTC_MCP_H
#define PTC_MCP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "base.h"
#include "httpc.h"

/* ---------------------------------------------------------------------------------------- */
/* Errors                                                                                   */

/* The codes of mcp/ (base.h's error space): errno values, and extras from PTC_ERR_MCP down.
 * X(NAME, VALUE, TEXT) */
#define MCP_ERRORS(X)                                                                              \
    X(MCP_OK, 0, "success")                                                                        \
    X(MCP_ENOMEM, -ENOMEM, "out of memory")                                                        \
    X(MCP_EINVAL, -EINVAL, "invalid argument or malformed input")                                  \
    X(MCP_ETOOBIG, -E2BIG, "size limit exceeded") /* a size cap was reached */                     \
    X(MCP_EIO, -EIO, "input/output error")                                                         \
    X(MCP_ETIMEDOUT, -ETIMEDOUT, "timed out")             /* a deadline passed */                  \
    X(MCP_ECANCELED, -ECANCELED, "cancelled")             /* by a peer or by shutdown */           \
    X(MCP_ECLOSED, -EPIPE, "connection or object closed") /* EPIPE: the other end is gone */       \
    X(MCP_ENOTSUP, -ENOTSUP, "not supported by the peer or not built in")                          \
    X(MCP_EPROTO, -EPROTO, "protocol error from the peer")     /* bad HTTP, bad JSON-RPC answer */ \
    X(MCP_ECONNECT, -ECONNREFUSED, "connection failed")        /* TCP connect failed */            \
    X(MCP_EBUSY, -EBUSY, "too much work in flight")            /* a limit on concurrent work */    \
    X(MCP_EDENIED, -EACCES, "refused by the user or a policy") /* a declined confirmation */       \
    X(MCP_EREMOTE, PTC_ERR_MCP, "the peer answered with an error") /* a JSON-RPC error */          \
    X(MCP_ESTATE, PTC_ERR_MCP - 1, "not valid in the current state")

typedef enum mcp_err { MCP_ERRORS(PTC_ERR_ENUM) } mcp_err_t;

/* Codes mcp/ shares with the HTTP client it is built on: the same values, named by
 * ptc_http_strerror, so that an HTTP failure passes through untranslated. */
#define MCP_ETLS      PTC_HTTP_ETLS      /* TLS handshake or certificate verification failed */
#define MCP_ERESOLVE  PTC_HTTP_ERESOLVE  /* host name lookup failed */
#define MCP_EREDIRECT PTC_HTTP_EREDIRECT /* the server answered with a redirect, refused */

/** A static English description of any code (never NULL): mcp/'s own, else the HTTP
 *  client's, else ptc_strerror's. */
const char *mcp_strerror(int err);

/* JSON-RPC 2.0 error codes. */
#define MCP_JSONRPC_PARSE_ERROR      (-32700)
#define MCP_JSONRPC_INVALID_REQUEST  (-32600)
#define MCP_JSONRPC_METHOD_NOT_FOUND (-32601)
#define MCP_JSONRPC_INVALID_PARAMS   (-32602)
#define MCP_JSONRPC_INTERNAL_ERROR   (-32603)

/* ---------------------------------------------------------------------------------------- */
/* Logging to stderr (the server's own log; MCP's notifications/message is separate)        */

/* syslog severities, as MCP's logging levels use them. */
typedef enum mcp_level {
    MCP_LOG_EMERGENCY = 0,
    MCP_LOG_ALERT,
    MCP_LOG_CRITICAL,
    MCP_LOG_ERROR,
    MCP_LOG_WARNING,
    MCP_LOG_NOTICE,
    MCP_LOG_INFO,
    MCP_LOG_DEBUG,
} mcp_level_t;

typedef struct mcp_logger {
    FILE *out;         /* borrowed; stderr in the binary */
    mcp_level_t level; /* messages less severe than this are dropped */
} mcp_logger_t;

/** Parses a syslog level name ("debug" .. "emergency"); returns MCP_EINVAL if unknown. */
int mcp_level_parse(const char *name, mcp_level_t *out);
/** Returns the syslog name of a level ("info"). */
const char *mcp_level_name(mcp_level_t level);
/** Writes one line "ptc-mcp LEVEL: message" to lg->out if level passes; lg may be NULL. */
void mcp_log(const mcp_logger_t *lg, mcp_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mcp_vlog(const mcp_logger_t *lg, mcp_level_t level, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* ---------------------------------------------------------------------------------------- */
/* JSON-RPC helpers (pure functions; used by the session and the client side)               */

typedef enum mcp_msg_kind {
    MCP_MSG_INVALID = 0,
    MCP_MSG_REQUEST,      /* method + id */
    MCP_MSG_NOTIFICATION, /* method, no id */
    MCP_MSG_RESPONSE,     /* result + id */
    MCP_MSG_ERROR,        /* error + id (id may be null) */
} mcp_msg_kind_t;

/**
 * Classifies one parsed JSON-RPC message (not a batch). On MCP_MSG_INVALID, *why (if not NULL)
 * points at a static explanation. Borrows msg.
 */
mcp_msg_kind_t mcp_jsonrpc_classify(const cJSON *msg, const char **why);

/** Builds {"jsonrpc":"2.0","id":id,"result":result}. Takes result; borrows id (copied; NULL
 *  means null). Returns NULL on allocation failure. */
cJSON *mcp_jsonrpc_result(const cJSON *id, cJSON *result);
/** Builds a JSON-RPC error response; data is taken (may be NULL); id borrowed (NULL -> null). */
cJSON *mcp_jsonrpc_error(const cJSON *id, int code, const char *message, cJSON *data);
/** Builds a request (id != NULL) or notification (id == NULL); takes params (may be NULL). */
cJSON *mcp_jsonrpc_request(const cJSON *id, const char *method, cJSON *params);
/**
 * Appends the compact JSON text of item (what cJSON_PrintUnformatted gives; integral numbers
 * as integers, without exponent) to b, with no NUL or newline counted. Borrows item. On
 * failure b holds what it held before: MCP_ENOMEM, or MCP_EINVAL for an invalid item or one
 * nested deeper than CJSON_NESTING_LIMIT. Unlike cJSON_PrintUnformatted it allocates nothing
 * once b has room, which is what the hot path of a transport needs.
 */
struct ptc_buf; /* base.h */
int mcp_jsonrpc_print(const cJSON *item, struct ptc_buf *b);

/* ---------------------------------------------------------------------------------------- */
/* Line framing (newline-delimited JSON, as stdio and the bridge use it)                     */

/** Called once per complete line (without the newline and a trailing CR). The buffer is only
 *  valid during the call. too_big is true when the line exceeded the cap: then line/len hold
 *  nothing useful and len is the number of bytes discarded so far (at least max + 1). */
typedef void (*mcp_line_cb)(void *data, const char *line, size_t len, bool too_big);

typedef struct mcp_framer {
    ptc_buf_t line; /* the partial line, capped at max */
    size_t max;
    size_t discarding; /* > 0 while skipping the rest of an oversized line */
    mcp_line_cb cb;
    void *data;
} mcp_framer_t;

/** max is the largest line accepted, in bytes. */
int mcp_framer_init(mcp_framer_t *f, size_t max, mcp_line_cb cb, void *data);
/** Feeds bytes; calls cb for each complete line. Returns MCP_ENOMEM if buffering failed (the
 *  partial line is dropped and framing continues at the next newline). */
int mcp_framer_feed(mcp_framer_t *f, const char *bytes, size_t n);
/** Bytes of an unterminated last line, delivered at end of input (EOF without a newline). */
void mcp_framer_finish(mcp_framer_t *f);
void mcp_framer_close(mcp_framer_t *f);

/* ---------------------------------------------------------------------------------------- */
/* Protocol versions                                                                         */

#define MCP_PROTOCOL_LATEST "2025-11-25"

/** Returns the version the server answers to a client that asked for `requested`: the same
 *  string when supported, otherwise the newest (static storage). */
const char *mcp_protocol_negotiate(const char *requested);
/** True if `version` is one this library speaks. */
bool mcp_protocol_supported(const char *version);
/** Compares two protocol version strings (dates): <0, 0, >0. */
int mcp_protocol_cmp(const char *a, const char *b);

/* ---------------------------------------------------------------------------------------- */
/* Server, tools, sessions                                                                   */

typedef struct mcp_server mcp_server_t;   /* tools and settings shared by every session */
typedef struct mcp_session mcp_session_t; /* one client connection's MCP state */
typedef struct mcp_call mcp_call_t;       /* one in-flight tools/call */

/**
 * A tool handler. Borrows call and args (args stay valid until the call finishes). It must
 * eventually finish the call exactly once with mcp_call_finish*(), now or later on the loop
 * thread, unless the call is cancelled (then finishing is still allowed and sends nothing).
 */
typedef void (*mcp_tool_fn)(mcp_call_t *call, const cJSON *args, void *tool_data);

typedef struct mcp_tool_def {
    const char *name;          /* [A-Za-z0-9_.-]{1,128} */
    const char *title;         /* may be NULL */
    const char *description;   /* may be NULL */
    const char *input_schema;  /* JSON text of an object schema; NULL means {"type":"object"} */
    const char *output_schema; /* JSON text or NULL */
    const char *annotations;   /* JSON text or NULL */
    mcp_tool_fn handler;
    void *data; /* borrowed; passed to handler */
    /* Whether a call may become a task (io.modelcontextprotocol/tasks, mcp/tasks.c): the
     * zero value MCP_TASK_FORBIDDEN keeps every call synchronous. */
    enum mcp_task_support {
        MCP_TASK_FORBIDDEN = 0,
        MCP_TASK_OPTIONAL, /* the handler may call mcp_call_become_task */
        MCP_TASK_REQUIRED, /* a client without the extension gets -32021 before the handler */
    } task_support;
} mcp_tool_def_t;

typedef struct mcp_server_opts {
    const char *name;                  /* serverInfo.name */
    const char *title;                 /* serverInfo.title, may be NULL */
    const char *version;               /* serverInfo.version */
    const char *instructions;          /* initialize result's instructions, may be NULL */
    size_t list_page_size;             /* tools/list page size (>= 1) */
    unsigned progress_min_interval_ms; /* rate limit for notifications/progress */
    unsigned shutdown_grace_ms;        /* how long in-flight calls may finish at shutdown */
} mcp_server_opts_t;

/** Fills opts with the defaults (page 50, progress 100 ms, grace 3000 ms). */
void mcp_server_opts_default(mcp_server_opts_t *opts);

/** Creates a server on loop. Borrows opts' strings (copied), loop and lg. *out is set on 0. */
int mcp_server_new(uv_loop_t *loop, const mcp_server_opts_t *opts, const mcp_logger_t *lg,
                   mcp_server_t **out);
/** Frees the server. Every session must be closed first. */
void mcp_server_free(mcp_server_t *srv);
/** Adds a tool (strings are copied; schemas are parsed: MCP_EINVAL with a log line if a schema
 *  is not valid JSON or the name is not allowed; MCP_EINVAL also for a duplicate name). Sessions
 *  that support it get notifications/tools/list_changed. */
int mcp_server_add_tool(mcp_server_t *srv, const mcp_tool_def_t *def);
/** While held, tool changes send no notifications/tools/list_changed; releasing sends one if
 *  anything changed meanwhile (so replacing a server's hundred tools is one notification). */
void mcp_server_hold_notifications(mcp_server_t *srv, bool hold);
/** Holds tools/list back while gate(data) says true (until the tools a client should see are
 *  known, e.g. the downstream servers' first listing): such a request is parked, never
 *  blocking the loop, and answered by mcp_server_release_lists (or when its session shuts
 *  down). NULL: no gate. */
typedef bool (*mcp_list_gate_fn)(void *data);
void mcp_server_set_list_gate(mcp_server_t *srv, mcp_list_gate_fn gate, void *data);
/** Answers every parked tools/list now with the tools as they are. */
void mcp_server_release_lists(mcp_server_t *srv);

/*
 * The call gate (callgate.c): tool calls parked at first contact, never blocking the loop, until
 * what they need is there (e.g. the downstream servers' first listing, their tools indexed), or
 * until a wait is over. It has opts.levels levels that open in order and stay open for good: the
 * gate asks is_open(data, level) for the lowest closed one, and a call that needs level L goes
 * once L is open. The host pokes the gate when something it waits for changed; one timer fires
 * when the wait ends, and then every level opens. All on the loop's thread.
 */
typedef struct mcp_call_gate mcp_call_gate_t;

typedef struct mcp_call_gate_opts {
    uint64_t wait_ms; /* from mcp_call_gate_new; 0: every level open at once */
    unsigned levels;  /* at least 1 */
    /** Whether level (every lower one being open) may open now. */
    bool (*is_open)(void *data, unsigned level);
    void *data;                 /* borrowed: it must outlive the gate */
    const char *cancelled_text; /* the answer (isError) of a parked call its client cancelled */
    const char *closed_text;    /* the answer (isError) of a call parked at mcp_call_gate_free */
} mcp_call_gate_opts_t;

/** A gate on loop with opts (copied, texts too). MCP_EINVAL for a NULL is_open, no level or a
 *  NULL text, MCP_ENOMEM; *out is NULL then. Free with mcp_call_gate_free. */
int mcp_call_gate_new(uv_loop_t *loop, const mcp_call_gate_opts_t *opts, mcp_call_gate_t **out);
/**
 * At the start of a tool handler: true when the call is parked (args copied) until level is open,
 * then fn(call, args, data) runs from the loop as if the call had just come. false: go on now
 * (the level is open, the wait is over, level >= opts.levels, g is NULL, or out of memory). A
 * parked call its client cancels is answered with cancelled_text.
 */
bool mcp_call_gate_hold(mcp_call_gate_t *g, mcp_call_t *call, const cJSON *args, unsigned level,
                        mcp_tool_fn fn, void *data);
/** Something the gate waits for may have changed: parked calls look again from the next loop
 *  turn (never from inside the poker). g may be NULL. */
void mcp_call_gate_poke(mcp_call_gate_t *g);
/** srv's tools/list waits (mcp_server_set_list_gate) until level is open. */
void mcp_call_gate_lists(mcp_call_gate_t *g, mcp_server_t *srv, unsigned level);
/** True once the wait is over (or for g NULL). */
bool mcp_call_gate_over(const mcp_call_gate_t *g);
/** Answers calls still parked with closed_text, lets srv's lists go and ungates them, frees (the
 *  timer on the loop's next turn: run the loop). g may be NULL. */
void mcp_call_gate_free(mcp_call_gate_t *g);
/** Removes a tool by name; MCP_EINVAL if absent. Calls in flight keep running. */
int mcp_server_remove_tool(mcp_server_t *srv, const char *name);
/** The only initialized session, if its client declared `capability` (NULL: any); NULL when
 *  there is none or several (which one a request that no session asked for, such as a
 *  downstream server's sampling outside any call, belongs to cannot be told then). */
mcp_session_t *mcp_server_pick_session(const mcp_server_t *srv, const char *capability);
/** Number of registered tools. */
size_t mcp_server_tool_count(const mcp_server_t *srv);
uv_loop_t *mcp_server_loop(const mcp_server_t *srv);
const mcp_logger_t *mcp_server_logger(const mcp_server_t *srv);

/**
 * The transport side of a session. send is given one complete JSON-RPC message (no newline);
 * it must copy or consume the bytes before returning. close is called once when the session is
 * done with the transport (after the last send). Both may be NULL for a test sink.
 */
typedef struct mcp_transport_ops {
    int (*send)(void *tdata, const char *json, size_t len);
    void (*closed)(void *tdata);
    /* Optional, used instead of send when set (and no router is): the message as a tree
     * (borrowed during the call), which the transport prints straight into its own output
     * buffer (mcp_jsonrpc_print), sparing a print into a fresh string and its copy. */
    int (*send_json)(void *tdata, const cJSON *msg);
} mcp_transport_ops_t;

/**
 * A send that also says where the message belongs (see mcp_session_set_router). related is the
 * id of the client request the message belongs to (borrowed, valid during the call; NULL when
 * it belongs to none, such as list_changed): the response to it, or progress, log messages and
 * server-to-client requests made on its behalf. answer is true when the message is the response
 * (or the JSON-RPC batch of responses) that completes that request. json NULL (len 0) with
 * answer true says the request ended with no answer at all (the client cancelled it); with
 * answer false it asks the transport to close the stream carrying that request now
 * (mcp_call_close_stream; MCP_ENOTSUP if it cannot). Same rules as ops->send.
 */
typedef int (*mcp_send_related_fn)(void *tdata, const char *json, size_t len, const cJSON *related,
                                   bool answer);

/** Called when a session has no more work after mcp_session_shutdown (all calls finished or
 *  cancelled and every server-to-client request answered or failed). It may run inside
 *  mcp_session_shutdown or a call's finish: free the session later (a loop turn), not in it. */
typedef void (*mcp_session_idle_cb)(mcp_session_t *s, void *data);

/** Creates a session bound to a transport. Borrows srv and ops (must outlive the session). */
int mcp_session_new(mcp_server_t *srv, const mcp_transport_ops_t *ops, void *tdata,
                    mcp_session_t **out);
/**
 * Handles one received message (the bytes of a JSON value: object or batch array). Always
 * answers what needs an answer (parse errors get -32700 with id null); never fails the session.
 */
void mcp_session_receive(mcp_session_t *s, const char *json, size_t len);
/** Makes the session send through fn (with tdata) instead of ops->send, so that a transport
 *  with several streams (Streamable HTTP) can put each message on the right one. */
void mcp_session_set_router(mcp_session_t *s, mcp_send_related_fn fn);
/** Reports a message that was dropped by the transport because it exceeded max_bytes. */
void mcp_session_reject_oversized(mcp_session_t *s, size_t bytes, size_t max_bytes);
/**
 * Stops taking new requests, cancels calls still running after the grace period and fails
 * pending server-to-client requests; calls idle_cb (once) when nothing is left in flight.
 * Called again while shutting down, it cancels the remaining calls at once.
 */
void mcp_session_shutdown(mcp_session_t *s, mcp_session_idle_cb idle_cb, void *data);
/** Frees the session at once: in-flight calls are cancelled and their late results dropped. */
void mcp_session_free(mcp_session_t *s);

/** Negotiated protocol version, or NULL before initialize. */
const char *mcp_session_protocol(const mcp_session_t *s);
/** The client's capabilities object from initialize (borrowed), or NULL. */
const cJSON *mcp_session_client_capabilities(const mcp_session_t *s);
/** A number no other session of this server had or will have (1, 2, ...): what ties state made
 *  for a client (a workspace session) to it, where the pointer could be reused after a free. */
uint64_t mcp_session_serial(const mcp_session_t *s);
/** True if the client declared capability `name` ("sampling", "elicitation", "roots"). */
bool mcp_session_client_has(const mcp_session_t *s, const char *name);

/*
 * Who a client is, for binding what a server makes for it (cursors, file URIs, handles): a
 * digest of its MCP session (its serial; none for a stateless 2026-07-28 request, which has no
 * session) and of the credential it authenticated with (the bearer token's SHA-256; none
 * where the transport has none, as stdio). Two requests have the same identity exactly when
 * both parts agree, so state bound to one is invisible to another session and to another
 * token. It is never shown to clients: compare it, never print it.
 */
#define MCP_IDENTITY_BYTES 32
typedef struct mcp_identity {
    unsigned char b[MCP_IDENTITY_BYTES];
} mcp_identity_t;

/** True if a and b are the same identity. */
bool mcp_identity_equal(const mcp_identity_t *a, const mcp_identity_t *b);
/** The identity of the legacy (stateful) requests of session s. */
void mcp_session_identity(const mcp_session_t *s, mcp_identity_t *out);
/** Called once when a stateful session has ended (after mcp_session_shutdown once nothing is
 *  in flight, or at mcp_session_free), with the identity its requests had: the state bound to
 *  it can go now, nobody can present it again. Not called for stateless sessions (their
 *  requests' state belongs to the token, which outlives them). */
typedef void (*mcp_session_end_fn)(const mcp_identity_t *who, void *data);
/** Registers the one session-end hook of srv (replaces any earlier; fn NULL: none). */
void mcp_server_on_session_end(mcp_server_t *srv, mcp_session_end_fn fn, void *data);

/**
 * Sends a notifications/message to the client if `level` passes the level the client set with
 * logging/setLevel (default: info). Takes data (any JSON; NULL means null). logger may be NULL.
 */
void mcp_session_log(mcp_session_t *s, mcp_level_t level, const char *logger, cJSON *data);
/** Sends any notification; takes params (may be NULL). */
int mcp_session_notify(mcp_session_t *s, const char *method, cJSON *params);

/* Server-to-client requests (sampling, elicitation, roots). */
typedef struct mcp_outreq mcp_outreq_t;
/**
 * Called once with the client's result (borrowed; NULL on failure) or err < 0. For
 * MCP_EREMOTE, error is the JSON-RPC error object (borrowed); message is always set.
 */
typedef void (*mcp_outreq_cb)(void *data, int err, const cJSON *result, const cJSON *error,
                              const char *message);
/**
 * Sends request `method` to the client with its own id ("ptc-N"). Takes params. If
 * need_capability is not NULL and the client did not declare it, fails at once with
 * MCP_ENOTSUP and calls nothing. timeout_ms 0 means no timeout (a timeout sends
 * notifications/cancelled and calls cb with MCP_ETIMEDOUT). *out may be NULL.
 */
int mcp_session_request(mcp_session_t *s, const char *method, cJSON *params,
                        const char *need_capability, unsigned timeout_ms, mcp_outreq_cb cb,
                        void *data, mcp_outreq_t **out);
/** Cancels a pending request: notifies the client, calls cb with MCP_ECANCELED. */
void mcp_outreq_cancel(mcp_outreq_t *r, const char *reason);

/**
 * mcp_session_request made on behalf of a tools/call: the request (and its cancellation) goes
 * out with the call, so that Streamable HTTP sends it on the call's own POST stream. The
 * capability is the one the method needs ("sampling" for sampling/createMessage,
 * "elicitation" for elicitation/create, "roots" for roots/list, none for others: MCP_ENOTSUP
 * at once when the client lacks it); no timeout (cancel it with mcp_outreq_cancel when the
 * call is cancelled). Takes params. *out may be NULL. MCP_ESTATE once the call's session is
 * gone.
 */
int mcp_call_request(mcp_call_t *call, const char *method, cJSON *params, mcp_outreq_cb cb,
                     void *data, mcp_outreq_t **out);
/** mcp_call_request with an explicit capability (NULL: none) and timeout (0: none). */
int mcp_call_request_ex(mcp_call_t *call, const char *method, cJSON *params,
                        const char *need_capability, unsigned timeout_ms, mcp_outreq_cb cb,
                        void *data, mcp_outreq_t **out);

/* Calls (in-flight tools/call requests) */

/** The session the call belongs to. */
mcp_session_t *mcp_call_session(const mcp_call_t *call);
/** The identity of the call's client (see mcp_identity_t), fixed when the request came: valid
 *  even after its session is gone. */
void mcp_call_identity(const mcp_call_t *call, mcp_identity_t *out);
/** Name of the tool being called. */
const char *mcp_call_tool(const mcp_call_t *call);
/** True once the client cancelled the call (or the session shut down). */
bool mcp_call_cancelled(const mcp_call_t *call);
/** Registers the function run (once) when the call is cancelled; replaces any earlier one. */
void mcp_call_on_cancel(mcp_call_t *call, void (*cb)(mcp_call_t *call, void *data), void *data);
/**
 * Sends notifications/progress if the request carried _meta.progressToken. Progress values
 * that do not increase are dropped; updates closer than the rate limit are coalesced (the
 * newest is sent when the interval passes). total < 0 and message NULL are omitted.
 */
void mcp_call_progress(mcp_call_t *call, double progress, double total, const char *message);
/** True if the client asked for progress on this call. */
bool mcp_call_wants_progress(const mcp_call_t *call);
/**
 * Streamable HTTP: closes the event stream carrying the call's answer now, before the answer
 * (SEP-1699 polling): the client reconnects with Last-Event-ID and gets the events it missed,
 * then the answer. The call goes on. MCP_ENOTSUP on other transports or when the answer is not
 * on an open event stream.
 */
int mcp_call_close_stream(mcp_call_t *call);
/** mcp_session_log sent with the call (on its POST stream over Streamable HTTP). Takes data. */
void mcp_call_log(mcp_call_t *call, mcp_level_t level, const char *logger, cJSON *data);

/**
 * Finishes the call with a CallToolResult. Takes content (a JSON array, must not be NULL) and
 * structured (may be NULL; dropped for protocol versions before 2025-06-18). Frees the call.
 */
void mcp_call_finish(mcp_call_t *call, cJSON *content, cJSON *structured, bool is_error);
/** Finishes with a single text content block (printf-style). Frees the call. */
void mcp_call_finish_text(mcp_call_t *call, bool is_error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** Finishes with a JSON-RPC error instead of a result. Frees the call. */
void mcp_call_finish_rpc_error(mcp_call_t *call, int code, const char *message);

/** Convenience: a content array holding one {"type":"text","text":text}; NULL on ENOMEM. */
cJSON *mcp_text_content(const char *text);

/* ---------------------------------------------------------------------------------------- */
/* Content blocks (tool results, prompt messages, sampling) and their validation             */

/** Builds one {"type":"text","text":text} block; NULL on ENOMEM. Strings are copied. */
cJSON *mcp_text_block(const char *text);
/** Builds an image or audio block: type "image" or "audio", data base64 (not checked here),
 *  mime_type such as "image/png". NULL on ENOMEM or a NULL argument. */
cJSON *mcp_media_block(const char *type, const char *base64, const char *mime_type);
/** Builds an embedded resource block {"type":"resource","resource":{uri, mimeType, text|blob}}:
 *  exactly one of text and blob (base64) must be non-NULL; mime_type may be NULL. */
cJSON *mcp_resource_block(const char *uri, const char *mime_type, const char *text,
                          const char *blob);
/**
 * Checks one content block as the 2025-11-25 schema describes it: text (text), image and
 * audio (base64 data, mimeType), resource (resource.uri plus text or base64 blob),
 * resource_link (uri, name). Returns MCP_EINVAL with a message naming the field, else MCP_OK.
 * Borrows block.
 */
int mcp_content_validate(const cJSON *block, char *msg, size_t msg_size);

/* ---------------------------------------------------------------------------------------- */
/* Resources, prompts and completions (files mcp/resources.c, prompts.c, completion.c)      */
/*                                                                                          */
/* Registered on the server like tools and shared by every session. The initialize result  */
/* advertises "resources" (subscribe, listChanged), "prompts" (listChanged) and            */
/* "completions" only when something of that kind was registered before the client        */
/* initialized, or declared with mcp_server_declare. Handlers run on the loop thread and   */
/* answer at once; they must not block.                                                     */

#define MCP_RESOURCE_NOT_FOUND    (-32002) /* JSON-RPC error code of resources/read */
#define MCP_MAX_SUBSCRIPTIONS     1024     /* resources/subscribe URIs kept per session */
#define MCP_MAX_PROMPT_ARGS       64       /* arguments of one prompt */
#define MCP_MAX_COMPLETION_VALUES 100      /* values in one completion/complete answer */
#define MCP_MAX_URI_BYTES         4096     /* longest URI or template accepted */

/**
 * Reads a resource. uri is what the client asked for (borrowed); vars (borrowed) is NULL for a
 * plain resource and, for a template, an object mapping each {variable} to its string value;
 * who is the identity of the requesting client (for a resource that only its maker may read).
 * On success returns MCP_OK and sets *contents to a JSON array of ResourceContents objects
 * ({uri, mimeType, text | blob}) that the library takes. MCP_EINVAL means "no such resource"
 * (the client gets -32002); other errors become an internal error. msg (msg_size bytes) may
 * hold a reason for the client.
 */
typedef int (*mcp_resource_read_fn)(const char *uri, const cJSON *vars, const mcp_identity_t *who,
                                    void *data, cJSON **contents, char *msg, size_t msg_size);

/**
 * Completes argument `arg` (a prompt argument or template variable) whose partial text is
 * `value`; context (borrowed, may be NULL) holds the arguments already chosen. Sets *values
 * to a JSON array of strings (taken; the library keeps the first MCP_MAX_COMPLETION_VALUES and
 * says hasMore). Returns MCP_OK, or < 0 for an internal error.
 */
typedef int (*mcp_complete_fn)(const char *arg, const char *value, const cJSON *context, void *data,
                               cJSON **values);

typedef struct mcp_resource_def {
    const char *uri;         /* a URI, or for a template an RFC 6570 level-1 template such as
                                "test://item/{id}/data" ({name} matches one or more characters
                                other than '/') */
    const char *name;        /* required */
    const char *title;       /* may be NULL */
    const char *description; /* may be NULL */
    const char *mime_type;   /* may be NULL */
    mcp_resource_read_fn read;
    mcp_complete_fn complete; /* templates only: completes a variable; may be NULL */
    void *data;               /* borrowed; passed to read and complete */
} mcp_resource_def_t;

/** Adds a resource (strings copied). MCP_EINVAL (logged) for a missing name, uri or read
 *  function, a URI longer than MCP_MAX_URI_BYTES, or a duplicate. Initialized sessions get
 *  notifications/resources/list_changed (held like tools by mcp_server_hold_notifications). */
int mcp_server_add_resource(mcp_server_t *srv, const mcp_resource_def_t *def);
/** Adds a resource template; as mcp_server_add_resource, and MCP_EINVAL for a template with an
 *  empty or unclosed {variable} or two variables side by side. */
int mcp_server_add_resource_template(mcp_server_t *srv, const mcp_resource_def_t *def);
/** Removes a resource or template by its uri string; MCP_EINVAL if absent. Subscriptions to it
 *  are kept (a client may subscribe before a resource exists again). */
int mcp_server_remove_resource(mcp_server_t *srv, const char *uri);
/** Sends notifications/resources/updated {uri} to every session subscribed to uri. */
void mcp_server_resource_updated(mcp_server_t *srv, const char *uri);
/** True if session s is subscribed to uri. */
bool mcp_session_subscribed(const mcp_session_t *s, const char *uri);

typedef struct mcp_prompt_arg {
    const char *name;        /* required */
    const char *description; /* may be NULL */
    bool required;
} mcp_prompt_arg_t;

/**
 * Renders a prompt. args (borrowed) is an object of string values, already checked: every
 * required argument is present, no argument is unknown. On MCP_OK sets *messages to a JSON
 * array of PromptMessage objects ({role: "user"|"assistant", content: block}), taken and then
 * validated by the library (a bad message becomes an internal error naming it). MCP_EINVAL
 * answers -32602 with msg (an argument value the prompt cannot use).
 */
typedef int (*mcp_prompt_get_fn)(const char *name, const cJSON *args, void *data, cJSON **messages,
                                 char *msg, size_t msg_size);

typedef struct mcp_prompt_round mcp_prompt_round_t; /* MRTR section below */
typedef int (*mcp_prompt_get_round_fn)(const char *name, const cJSON *args,
                                       mcp_prompt_round_t *round, void *data, cJSON **messages,
                                       char *msg, size_t msg_size);

typedef struct mcp_prompt_def {
    const char *name;             /* required; [A-Za-z0-9_.-]{1,128} */
    const char *title;            /* may be NULL */
    const char *description;      /* may be NULL */
    const mcp_prompt_arg_t *args; /* n_args entries (copied), at most MCP_MAX_PROMPT_ARGS */
    size_t n_args;
    mcp_prompt_get_fn get;
    mcp_complete_fn complete; /* completes an argument; may be NULL */
    void *data;               /* borrowed */
    /* Instead of get: a prompt that may ask the client first (2026-07-28 MRTR, see
     * mcp_prompt_round_t). */
    mcp_prompt_get_round_fn get_round;
} mcp_prompt_def_t;

/** Adds a prompt (everything copied). MCP_EINVAL (logged) for a bad name, a duplicate, a
 *  missing get function, too many or duplicate arguments. Sends
 *  notifications/prompts/list_changed as resources do. */
int mcp_server_add_prompt(mcp_server_t *srv, const mcp_prompt_def_t *def);
/** Removes a prompt by name; MCP_EINVAL if absent. */
int mcp_server_remove_prompt(mcp_server_t *srv, const char *name);

/** Advertises a capability in later initialize results even while nothing of its kind is
 *  registered yet: "resources", "prompts" or "completions" (else MCP_EINVAL). */
int mcp_server_declare(mcp_server_t *srv, const char *capability);

/* ---------------------------------------------------------------------------------------- */
/* Argument validation (a JSON Schema subset: type, properties, required, enum, items,     */
/* minimum/maximum, minLength/maxLength, minItems/maxItems, additionalProperties: false)    */

/**
 * Validates value against schema. On failure returns MCP_EINVAL and writes a message naming
 * the field and the reason ("top_k: expected integer, got string") into msg.
 */
int mcp_schema_validate(const cJSON *schema, const cJSON *value, char *msg, size_t msg_size);

/* ---------------------------------------------------------------------------------------- */
/* stdio transport                                                                           */

typedef struct mcp_stdio mcp_stdio_t;

/** Called once when the transport has stopped (stdin EOF, a signal, or a fatal write error)
 *  and the session went idle; the owner then frees everything and lets the loop end. */
typedef void (*mcp_stdio_done_cb)(mcp_stdio_t *io, void *data);

/**
 * Serves one session on fds in_fd/out_fd (0 and 1 in the binary): pipe, file or TTY. Lines
 * longer than max_message_bytes are discarded with a JSON-RPC error. Handles SIGINT/SIGTERM
 * (stop, finish or cancel in-flight calls within the grace period, then done_cb).
 */
int mcp_stdio_start(mcp_server_t *srv, int in_fd, int out_fd, size_t max_message_bytes,
                    mcp_stdio_done_cb done_cb, void *data, mcp_stdio_t **out);
/** Starts the orderly stop (as on EOF). */
void mcp_stdio_stop(mcp_stdio_t *io);
/** Frees the transport after done_cb; its libuv handles close asynchronously, so run the loop
 *  once more (uv_run) before closing it. */
void mcp_stdio_free(mcp_stdio_t *io);

/* ---------------------------------------------------------------------------------------- */
/* HTTP server: Streamable HTTP at /mcp (POST, GET, DELETE), the legacy HTTP+SSE transport   */
/* (GET /sse, POST /messages?sessionId=ID) and /healthz, over HTTP/1.1 or HTTPS (mbedTLS).   */
/* Every HTTP session is a full mcp_session_t of srv.                                       */

typedef struct mcp_http_server mcp_http_server_t;

#define MCP_HTTP_DEFAULT_MAX_CONNECTIONS  1024
#define MCP_HTTP_DEFAULT_MAX_SESSIONS     1000
#define MCP_HTTP_DEFAULT_MAX_STREAMS      64 /* open POST streams of one session */
#define MCP_HTTP_DEFAULT_MAX_HEADER_BYTES 16384
#define MCP_HTTP_DEFAULT_MAX_HEADERS      64
/* request line + headers (and TLS handshake), from the connection's accept: 30 s, not less, because
   a client process that is short of CPU (100 sessions of one Node client on a loaded machine,
   measured) can take over 10 s between its connect and its first write */
#define MCP_HTTP_DEFAULT_HEADER_TIMEOUT_MS 30000
#define MCP_HTTP_DEFAULT_BODY_TIMEOUT_MS   30000  /* the whole body, once headers are in */
#define MCP_HTTP_DEFAULT_IDLE_TIMEOUT_MS   60000  /* a keep-alive connection between requests */
#define MCP_HTTP_DEFAULT_SESSION_IDLE_MS   600000 /* a session with no request and no stream */
#define MCP_HTTP_DEFAULT_KEEPALIVE_MS      15000  /* SSE comment on quiet streams */
#define MCP_HTTP_DEFAULT_REPLAY_EVENTS     256    /* kept per stream for Last-Event-ID */
#define MCP_HTTP_DEFAULT_REPLAY_BYTES      (1u << 20)
#define MCP_HTTP_DEFAULT_MAX_OUTPUT_BYTES  (32u << 20) /* queued for one slow connection */

typedef struct mcp_http_server_opts {
    const char *host;          /* IP literal or "localhost" (default "127.0.0.1"); copied */
    unsigned port;             /* 0: an ephemeral port (see mcp_http_server_port) */
    const char *auth_token;    /* bearer token clients must send (copied); NULL: none, which is
                                  refused for a non-loopback host */
    const char *tls_cert_file; /* PEM certificate chain; with tls_key_file: HTTPS */
    const char *tls_key_file;  /* PEM private key */
    size_t max_message_bytes;  /* largest request body (413 past it); default 16 MiB */
    size_t max_connections, max_sessions, max_streams_per_session;
    size_t max_header_bytes, max_headers;
    unsigned header_timeout_ms, body_timeout_ms, idle_timeout_ms;
    unsigned session_idle_ms, keepalive_ms;
    size_t replay_events, replay_bytes, max_output_bytes;
} mcp_http_server_opts_t;

/** Fills opts with the MCP_HTTP_DEFAULT_* values, host 127.0.0.1, port 8765, no token/TLS. */
void mcp_http_server_opts_default(mcp_http_server_opts_t *opts);

/**
 * Binds and starts serving srv on its loop. Borrows srv (must outlive the server) and opts
 * (strings copied; certificate files are read now, a blocking read at start-up). Fails with
 * MCP_EINVAL (logged with what to do) for a non-loopback host without auth_token, a bad host,
 * or unreadable TLS files; MCP_EIO when the address cannot be bound. On loopback without a
 * token it logs a warning. *out is set on MCP_OK.
 */
int mcp_http_server_start(mcp_server_t *srv, const mcp_http_server_opts_t *opts,
                          mcp_http_server_t **out);
/** The bound port (the real one when opts.port was 0). */
unsigned mcp_http_server_port(const mcp_http_server_t *h);
/** "http://HOST:PORT/mcp" (https with TLS); borrowed, valid until free. */
const char *mcp_http_server_url(const mcp_http_server_t *h);
/** Live sessions (Streamable HTTP and legacy SSE). */
size_t mcp_http_server_session_count(const mcp_http_server_t *h);
/**
 * Stops: closes the listener, ends every session (calls get the server's grace period, then
 * are cancelled), ends open streams and closes every connection; done (may be NULL) runs once
 * all of that is finished, from a fresh loop turn. A second call cancels calls at once.
 */
void mcp_http_server_stop(mcp_http_server_t *h, void (*done)(mcp_http_server_t *h, void *data),
                          void *data);
/** Frees the server (stopping it abruptly if needed: calls cancelled, connections dropped).
 *  Handles close asynchronously: run the loop once more before uv_loop_close. */
void mcp_http_server_free(mcp_http_server_t *h);

/** Splits "HOST:PORT" ("[::1]:8765" for IPv6) into host (brackets removed) and port (0..65535).
 *  MCP_EINVAL when malformed or when host does not fit host_size. */
int mcp_http_parse_listen(const char *listen, char *host, size_t host_size, unsigned *port);

/* ---------------------------------------------------------------------------------------- */
/* Outbound HTTP(S) client for HTTP downstream servers: the client of httpc/ (httpc.h), its  */
/* lines written to an mcp_logger_t and its errors given as mcp_err_t.                      */

typedef struct mcp_http_client mcp_http_client_t;
typedef ptc_http_client_opts_t mcp_http_client_opts_t;

void mcp_http_client_opts_default(mcp_http_client_opts_t *opts);
/**
 * Creates a client (ptc_http_client_new): loads the CA bundle once (blocking: call it at
 * start-up). Borrows loop and lg; opts may be NULL (defaults). An unreadable opts->ca_file
 * fails with MCP_EINVAL (logged). *out is set on MCP_OK.
 */
int mcp_http_client_new(uv_loop_t *loop, const mcp_http_client_opts_t *opts, const mcp_logger_t *lg,
                        mcp_http_client_t **out);
/** Frees the client; requests in flight are cancelled (see ptc_http_client_free). */
void mcp_http_client_free(mcp_http_client_t *c);
/** A log hook of the libraries' shape (syslog severity, one line) that writes to the
 *  mcp_logger_t in data (may be NULL: nothing is written). */
void mcp_log_hook(void *data, int level, const char *line);

/* ======================================================================================== */
/* Downstream MCP servers: the CLIENT side (files mcp/client_*.c)                           */
/*                                                                                          */
/* ptc-mcp is an MCP client to each server of the user's config. A client spawns its server */
/* (stdio), runs the handshake, lists every tools/list page, follows list_changed, forwards */
/* calls with cancellation and timeouts, answers the server's requests, and restarts a      */
/* server that died. Nothing here blocks the loop; callbacks run on the loop thread and     */
/* never from inside the function that caused them unless the comment says so. The process  */
/* must ignore SIGPIPE (the binary does): a server may exit while we write to it.           */
/* ======================================================================================== */

/* Config: Claude Desktop's format {"mcpServers": {"NAME": {...}}}. */

#define MCP_DOWNSTREAM_MAX_SERVERS 256 /* entries in one config */
#define MCP_DOWNSTREAM_MAX_ARGS    1024
#define MCP_DOWNSTREAM_MAX_ENV     1024
#define MCP_DOWNSTREAM_MAX_NAME    128 /* bytes of a server name */

typedef enum mcp_downstream_kind {
    MCP_DOWNSTREAM_STDIO = 0, /* "command" (+ "args", "env", "cwd"); "type" absent or "stdio" */
    MCP_DOWNSTREAM_HTTP,      /* "type": "http" / "streamable-http" / "sse", or only "url"; the
                                 legacy "sse" transport is parsed but fails at start */
} mcp_downstream_kind_t;

typedef struct mcp_downstream_kv {
    char *name, *value;
} mcp_downstream_kv_t;

/** One config entry, as written (no ${VAR} expansion yet: clients expand when created). */
typedef struct mcp_downstream_server {
    char *name;
    mcp_downstream_kind_t kind;
    char *type;    /* the "type" string as written, or NULL */
    char *command; /* stdio: required */
    char **args;   /* n_args strings */
    size_t n_args;
    mcp_downstream_kv_t *env; /* additions to the server's environment */
    size_t n_env;
    char *cwd;                    /* NULL: ptc-mcp's working directory */
    char *url;                    /* http: required */
    mcp_downstream_kv_t *headers; /* http: "headers" object */
    size_t n_headers;
    char *category; /* "category": for search_tools' filter, or NULL */
} mcp_downstream_server_t;

/** Something wrong with one entry (or the file), kept so that the log and --check can show it. */
typedef struct mcp_downstream_problem {
    char *server;  /* the entry's name; NULL for the file as a whole */
    char *message; /* names the entry and field: "mcpServers.github.args[2]: expected a string" */
    bool dropped;  /* the entry was left out; false: a warning, the entry starts */
} mcp_downstream_problem_t;

typedef struct mcp_downstream_config {
    mcp_downstream_server_t *servers; /* in the order of the file; valid entries only */
    size_t n_servers;
    mcp_downstream_problem_t *problems; /* in the order of the file */
    size_t n_problems;
    size_t cap_problems; /* entries allocated at problems (the parser's bookkeeping) */
} mcp_downstream_config_t;

/** The environment variable given to every downstream process (ptc-mcp's pid): a ptc-mcp that
 * finds it was started by a ptc-mcp and starts no processes of its own (a config that lists
 * ptc-mcp itself would otherwise start an endless chain of them). */
#define MCP_DOWNSTREAM_PARENT_ENV "PTC_MCP_PARENT_PID"

/**
 * Parses a config from JSON text. A missing "mcpServers" gives zero servers. A malformed file
 * (not JSON: the message has its line and column; not an object; "mcpServers" not an object;
 * too many servers) fails with MCP_EINVAL and the message in msg. A malformed entry (no
 * "command", a value of the wrong type, a duplicate name) drops only that entry: MCP_OK and a
 * dropped problem naming the entry and field ("mcpServers.github.args[2]: expected a
 * string"). An entry with "disabled": true is left out too. Unknown keys in an entry (and
 * VS Code's "envFile", which is not read) are warnings naming them. Entries that would start
 * ptc-mcp itself are dropped: a command that resolves to this process's own binary
 * (/proc/self/exe), and every stdio entry when this process was started by a ptc-mcp
 * (MCP_DOWNSTREAM_PARENT_ENV in its environment). Other top-level keys (such as "ptc") are
 * ignored. On MCP_OK, *out owns its strings: release with mcp_downstream_config_close. On
 * error *out is empty.
 */
int mcp_downstream_config_parse(const char *json, size_t len, mcp_downstream_config_t *out,
                                char *msg, size_t msg_size);
/** As mcp_downstream_config_parse, from a parsed document (borrowed). */
int mcp_downstream_config_from_json(const cJSON *root, mcp_downstream_config_t *out, char *msg,
                                    size_t msg_size);
/** Logs every problem of cfg (dropped entries as errors, the rest as warnings), each line
 * starting with source (e.g. "--config FILE"). */
void mcp_downstream_config_log(const mcp_downstream_config_t *cfg, const mcp_logger_t *lg,
                               const char *source);
/** --check's view of a config (root borrowed; source names it, e.g. "--config FILE"): prints
 *  every problem of every entry to out ("NAME: left out: MESSAGE" for a dropped entry, "NAME:
 *  warning: MESSAGE" otherwise, "(file)" for the file) under "config problems (SOURCE):", and
 *  returns how many entries were left out; MCP_EINVAL, with "downstream servers: SOURCE: why"
 *  printed, when the config cannot be used at all. */
int mcp_downstream_config_check(const cJSON *root, const char *source, FILE *out);
/** Parses JSON text; on a syntax error returns NULL with "line L, column C: ..." in msg
 * (columns count characters from 1), for files users edit by hand. */
cJSON *mcp_json_parse_located(const char *json, size_t len, char *msg, size_t msg_size);
/** Frees what a successful parse allocated and empties cfg (safe on an empty cfg). */
void mcp_downstream_config_close(mcp_downstream_config_t *cfg);

/* Clients */

typedef enum mcp_client_state {
    MCP_CLIENT_STARTING = 0, /* spawning, handshaking, or waiting to restart after a crash */
    MCP_CLIENT_READY,        /* tools listed; calls go out at once */
    MCP_CLIENT_FAILED,       /* gave up: the reason says why; mcp_client_start tries again */
    MCP_CLIENT_STOPPED,      /* mcp_client_stop finished (or never started) */
} mcp_client_state_t;

/** "starting", "ready", "failed", "stopped". */
const char *mcp_client_state_name(mcp_client_state_t state);

typedef struct mcp_client mcp_client_t;
typedef struct mcp_client_call mcp_client_call_t;         /* one request we sent */
typedef struct mcp_client_peer_req mcp_client_peer_req_t; /* one request the server sent us */

/** What the owner learns. Every member may be NULL. */
typedef struct mcp_client_hooks {
    /** State changed; reason (borrowed) is set for FAILED and for a STARTING that follows a
     *  crash, else NULL. */
    void (*state_changed)(mcp_client_t *c, mcp_client_state_t state, const char *reason,
                          void *data);
    /** The tool set changed: the first listing after mcp_client_start, or a listing that
     *  differs from the last one (after a restart or list_changed). tools is the client's
     *  array of Tool objects (borrowed; see mcp_client_tools). Runs before the state_changed
     *  that reports READY. */
    void (*tools_changed)(mcp_client_t *c, const cJSON *tools, void *data);
    /** The server sent sampling/createMessage or elicitation/create (only methods whose
     *  capability the opts declare). The owner must answer req exactly once with
     *  mcp_client_peer_reply / mcp_client_peer_fail, now or later. When NULL such requests
     *  are refused with a JSON-RPC error. */
    void (*peer_request)(mcp_client_t *c, mcp_client_peer_req_t *req, void *data);
    /** The server cancelled req (or died): the owner should stop its work and still answer
     *  req (the answer is then dropped), which frees it. */
    void (*peer_cancelled)(mcp_client_t *c, mcp_client_peer_req_t *req, void *data);
    void *data;
} mcp_client_hooks_t;

/* Defaults of mcp_client_opts_t. The start timeout leaves room for npx/uvx fetching a package
 * on first use. */
/** What a stdio child inherits from the base environment besides the locale: the list of the
 * MCP SDKs' stdio clients (after sudo's default), space-separated. */
#define MCP_CLIENT_INHERITED_ENV             "HOME LOGNAME PATH SHELL TERM USER"
#define MCP_CLIENT_DEFAULT_START_TIMEOUT_MS  60000
#define MCP_CLIENT_DEFAULT_CALL_WAIT_MS      60000
#define MCP_CLIENT_DEFAULT_STOP_GRACE_MS     2000
#define MCP_CLIENT_DEFAULT_RESTART_MAX       5
#define MCP_CLIENT_DEFAULT_RESTART_BASE_MS   500
#define MCP_CLIENT_DEFAULT_RESTART_CAP_MS    30000
#define MCP_CLIENT_DEFAULT_HEALTHY_MS        60000
#define MCP_CLIENT_DEFAULT_MAX_MESSAGE_BYTES (16u << 20)
#define MCP_CLIENT_DEFAULT_MAX_STDERR_LINE   2048
#define MCP_CLIENT_DEFAULT_MAX_CALLS         1024
#define MCP_CLIENT_DEFAULT_MAX_TOOLS         10000

typedef struct mcp_client_opts {
    unsigned start_timeout_ms;       /* spawn to tools listed; 0: none */
    unsigned call_wait_ms;           /* how long a call waits for a starting server */
    unsigned stop_grace_ms;          /* stdin closed -> SIGTERM -> SIGKILL steps */
    unsigned restart_max;            /* restarts after crashes before FAILED */
    unsigned restart_base_ms;        /* first backoff, doubled per attempt */
    unsigned restart_cap_ms;         /* largest backoff */
    unsigned healthy_ms;             /* ready this long resets the attempt count */
    size_t max_message_bytes;        /* largest message read from the server */
    size_t max_stderr_line;          /* longer stderr lines are cut in the log */
    size_t max_calls;                /* requests in flight or waiting */
    size_t max_tools;                /* tools kept from one listing */
    bool can_sample;                 /* declare "sampling" (the owner forwards it) */
    bool can_elicit;                 /* declare "elicitation" */
    bool has_roots;                  /* declare "roots" with listChanged */
    char *const *environ;            /* base environment (NULL-terminated "K=V"); NULL: ours.
                                        Borrowed during mcp_client_new only. */
    const char *const *withheld_env; /* names (NULL-terminated) a child never inherits from
                                        the base, even from the default set; NULL: none.
                                        Borrowed during mcp_client_new only. */
    mcp_http_client_t *http;         /* for "http" entries (borrowed; must outlive the client);
                                        NULL: such entries fail */
} mcp_client_opts_t;

/** Fills opts with the MCP_CLIENT_DEFAULT_* values (capabilities off, environ and http NULL). */
void mcp_client_opts_default(mcp_client_opts_t *opts);

/**
 * Creates a client for one config entry (borrowed; copied). ${VAR} in args and env values is
 * expanded from opts->environ (unset -> empty, with a warning naming the server). The child's
 * environment is not the whole base (which may hold the server's secrets) but, like the MCP
 * SDKs' stdio clients, only its MCP_CLIENT_INHERITED_ENV variables and the locale (LANG,
 * LANGUAGE, LC_*), minus opts->withheld_env and values that are exported shell functions,
 * plus the entry's env (which wins, withheld names included: the entry says so explicitly)
 * and MCP_DOWNSTREAM_PARENT_ENV. Its PATH is the entry's PATH (if given)
 * followed by the base PATH, and the command is looked up there. Borrows loop, hooks and lg
 * (they must outlive the client). Starts nothing: call mcp_client_start. *out set on MCP_OK.
 */
int mcp_client_new(uv_loop_t *loop, const mcp_downstream_server_t *entry,
                   const mcp_client_opts_t *opts, const mcp_client_hooks_t *hooks,
                   const mcp_logger_t *lg, mcp_client_t **out);
/**
 * Starts (or, from FAILED/STOPPED, restarts with a fresh attempt count) the server on the next
 * loop turn; state becomes STARTING at once (no state_changed for that). MCP_ESTATE while
 * STARTING/READY or stopping. An http entry speaks Streamable HTTP through opts->http: one
 * POST per message, JSON or SSE answers, the Mcp-Session-Id kept and DELETEd at stop; there
 * is no GET stream yet, so the server's own notifications (list_changed) arrive only inside
 * POST answers, and a server request inside a still-open POST stream is seen only when it
 * ends. Without opts->http an http entry goes to FAILED.
 */
int mcp_client_start(mcp_client_t *c);
/**
 * Graceful stop: pending calls fail with MCP_ECANCELED (their callbacks run before this
 * returns), peer requests are cancelled, an http session is DELETEd; a child's stdin is closed,
 * then SIGTERM and SIGKILL follow stop_grace_ms apart. done (may be NULL) runs once the child
 * has exited, after the state_changed to STOPPED. Never blocks.
 */
void mcp_client_stop(mcp_client_t *c, void (*done)(mcp_client_t *c, void *data), void *data);
/**
 * Frees the client now: calls fail with MCP_ECANCELED (callbacks run before this returns; no
 * hooks run), peer requests are detached (answering them still frees them). A live child is
 * stopped in the background; run the loop until it has no handles before uv_loop_close.
 */
void mcp_client_free(mcp_client_t *c);

/** The config entry's name (borrowed). */
const char *mcp_client_name(const mcp_client_t *c);
/** Current state; *reason (if reason != NULL) gets the failure or restart reason or NULL
 *  (borrowed, valid until the next state change). */
mcp_client_state_t mcp_client_state(const mcp_client_t *c, const char **reason);
/** The tools of the last complete listing: a JSON array of Tool objects (borrowed, never
 *  NULL; empty before the first listing), valid until the next tools_changed or free. */
const cJSON *mcp_client_tools(const mcp_client_t *c);
/** The initialize result of the running server (borrowed) or NULL before READY. */
const cJSON *mcp_client_server_init(const mcp_client_t *c);
/** Process id of the running child, or 0 (always 0 for http). */
int mcp_client_pid(const mcp_client_t *c);
/** Number of times the child was spawned (http: a session was begun) since mcp_client_new. */
unsigned mcp_client_spawn_count(const mcp_client_t *c);

/* A set of clients (one per --config server), held in the caller's array of n. */
/** The client of that name in the set, or NULL. */
mcp_client_t *mcp_clients_find(mcp_client_t *const *clients, size_t n, const char *name);
/** One line per client, "name: state, N tools[; reason]\n", into buf (truncated to size, always
 *  terminated when size > 0); returns the length the whole text needs. */
size_t mcp_clients_status(mcp_client_t *const *clients, size_t n, char *buf, size_t size);
/** The same as a JSON array of {name, state, tools, reason?} (caller frees), NULL on ENOMEM. */
cJSON *mcp_clients_status_json(mcp_client_t *const *clients, size_t n);
/** How many clients of the set are in state. */
size_t mcp_clients_count_in(mcp_client_t *const *clients, size_t n, mcp_client_state_t state);
/** True when every client is READY or FAILED (none still starting or stopped). */
bool mcp_clients_settled(mcp_client_t *const *clients, size_t n);
/** How many are STARTING; their names, ", "-separated, into buf (truncated to size). */
size_t mcp_clients_starting(mcp_client_t *const *clients, size_t n, char *buf, size_t size);
/** Creates a client for every entry of cfg and starts it (borrows loop, opts, hooks and lg as
 *  mcp_client_new does); an entry that cannot be created or started is logged and the others
 *  go on. *out (free with mcp_clients_free) gets the *n_out created; MCP_ENOMEM otherwise. */
int mcp_clients_start_all(uv_loop_t *loop, const mcp_downstream_config_t *cfg,
                          const mcp_client_opts_t *opts, const mcp_client_hooks_t *hooks,
                          const mcp_logger_t *lg, mcp_client_t ***out, size_t *n_out);
/** Frees every client of the set (as mcp_client_free) and the array. */
void mcp_clients_free(mcp_client_t **clients, size_t n);
/** "server NAME cannot take the call (STATE[: reason]): ERROR" for a call c refused with rc. */
void mcp_client_refusal(const mcp_client_t *c, int rc, char *buf, size_t size);

/**
 * Sets the roots answered to roots/list (a JSON array of Root objects; borrowed, copied; NULL
 * means none) and sends notifications/roots/list_changed when opts declared roots.
 */
int mcp_client_set_roots(mcp_client_t *c, const cJSON *roots);

/**
 * Called once per call. On success err is 0 and result is the server's result object
 * (borrowed, valid during the call: for tools/call a CallToolResult, which may itself say
 * isError). On failure result is NULL and message (borrowed) says what happened and names the
 * server: MCP_EREMOTE (the server answered a JSON-RPC error: error is that object), MCP_ETIMEDOUT,
 * MCP_ECANCELED, MCP_ECLOSED (the server exited), MCP_EPROTO (not an object), MCP_ESTATE (the
 * server failed or stopped while the call waited).
 */
typedef void (*mcp_client_call_cb)(void *data, int err, const cJSON *result, const cJSON *error,
                                   const char *message);
/** notifications/progress for a call (message may be NULL, total < 0 when absent). */
typedef void (*mcp_client_progress_cb)(void *data, double progress, double total,
                                       const char *message);

/**
 * Calls tool `name` with args (borrowed, copied; NULL means {}). timeout_ms 0 means no
 * timeout (it counts from this call, waiting included; at expiry the server gets
 * notifications/cancelled). progress may be NULL (then no progressToken is sent). While the
 * server is STARTING the call waits up to call_wait_ms. Returns < 0 without calling cb when the
 * call cannot be made: MCP_ESTATE when the server FAILED or STOPPED (mcp_client_state gives
 * the reason), MCP_EBUSY at max_calls, MCP_EINVAL, MCP_ENOMEM. *out (may be NULL) is valid
 * until cb has run.
 */
int mcp_client_call_tool(mcp_client_t *c, const char *name, const cJSON *args, unsigned timeout_ms,
                         mcp_client_progress_cb progress, mcp_client_call_cb cb, void *data,
                         mcp_client_call_t **out);
/**
 * As mcp_client_call_tool, for a caller that has a stateless (2026-07-28) client of its own to
 * ask: an InputRequiredResult of the server comes back to cb as the result (resultType
 * "input_required", its inputRequests and requestState) instead of being answered through the
 * peer_request hook, and input_responses (borrowed, copied; may be NULL) and request_state
 * (borrowed; may be NULL) go out as the round's inputResponses and requestState. With a legacy
 * server both are NULL in practice, and the call is an ordinary one.
 */
int mcp_client_call_tool_round(mcp_client_t *c, const char *name, const cJSON *args,
                               const cJSON *input_responses, const char *request_state,
                               unsigned timeout_ms, mcp_client_progress_cb progress,
                               mcp_client_call_cb cb, void *data, mcp_client_call_t **out);
/** Any other request (resources/read, ping, ...), with the same rules. Takes params. */
int mcp_client_request(mcp_client_t *c, const char *method, cJSON *params, unsigned timeout_ms,
                       mcp_client_call_cb cb, void *data, mcp_client_call_t **out);
/** Cancels a call: the server gets notifications/cancelled (if it was sent), cb runs with
 *  MCP_ECANCELED before this returns, a late answer is dropped. reason may be NULL. */
void mcp_client_call_cancel(mcp_client_call_t *call, const char *reason);

/** The method of a request from the server ("sampling/createMessage"); borrowed. */
const char *mcp_client_peer_method(const mcp_client_peer_req_t *req);
/** Its params (borrowed; may be NULL); valid until answered. */
const cJSON *mcp_client_peer_params(const mcp_client_peer_req_t *req);
/** True once the server cancelled it, died, or the client was freed. */
bool mcp_client_peer_cancelled(const mcp_client_peer_req_t *req);
/** The call whose InputRequiredResult asked it (a 2026-07-28 server's input request), or NULL
 *  (a request the server sent on its own, or the call ended): who it belongs to, exactly. */
const mcp_client_call_t *mcp_client_peer_call(const mcp_client_peer_req_t *req);
/** Answers with a result (taken; NULL sends an internal error) and frees req. */
void mcp_client_peer_reply(mcp_client_peer_req_t *req, cJSON *result);
/** Answers with a JSON-RPC error and frees req. */
void mcp_client_peer_fail(mcp_client_peer_req_t *req, int code, const char *message);

/* ---------------------------------------------------------------------------------------- */
/* MCP 2026-07-28: stateless requests beside the legacy sessions (files mcp/session.c,      */
/* mcp/modern.c, mcp/transport_http.c)                                                      */
/*                                                                                          */
/* An `initialize` selects the legacy protocol for the session, exactly as before. A       */
/* request whose params._meta carries MCP_META_PROTOCOL_VERSION is served on its own: its   */
/* protocol version and client capabilities come from that _meta, nothing is remembered    */
/* between requests, and server-to-client requests are refused (MCP_ENOTSUP). Its results  */
/* carry "resultType"; list results and resources/read carry the cache hints "ttlMs" and   */
/* "cacheScope". Over Streamable HTTP such a request needs no Mcp-Session-Id: each POST is  */
/* a session of its own that ends with its answer.                                          */

#define MCP_PROTOCOL_MODERN "2026-07-28" /* the newest stateless revision */

#define MCP_META_PROTOCOL_VERSION    "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CLIENT_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define MCP_META_CLIENT_INFO         "io.modelcontextprotocol/clientInfo"
#define MCP_META_SERVER_INFO         "io.modelcontextprotocol/serverInfo"
#define MCP_META_LOG_LEVEL           "io.modelcontextprotocol/logLevel"

/* JSON-RPC error codes of 2026-07-28. */
#define MCP_ERR_HEADER_MISMATCH              (-32020) /* HTTP headers disagree with the body */
#define MCP_ERR_MISSING_CLIENT_CAPABILITY    (-32021) /* data.requiredCapabilities */
#define MCP_ERR_UNSUPPORTED_PROTOCOL_VERSION (-32022) /* data.supported, data.requested */

/** True if `version` is a stateless revision this library speaks. */
bool mcp_protocol_modern_supported(const char *version);
/** The stateless revisions this library speaks, as a new JSON array of strings (NULL on
 *  ENOMEM). */
cJSON *mcp_protocol_modern_list(void);
/** True if a request's params (borrowed, may be NULL) carry the 2026 _meta protocol version
 *  key, which makes it a stateless request whatever else it holds. */
bool mcp_params_are_modern(const cJSON *params);
/** The HTTP status a stateless request's JSON-RPC error is answered with over HTTP (400 for
 *  the client's mistakes, 404 for an unknown method, 500 for internal errors). */
int mcp_modern_http_status(int code);

/** Makes every request of session s a stateless one (a transport whose sessions last one
 *  request, as Streamable HTTP without Mcp-Session-Id). Requests without the 2026 _meta then
 *  get -32602. */
void mcp_session_set_stateless(mcp_session_t *s);

/** True if the call came as a stateless (2026-07-28) request. */
bool mcp_call_is_modern(const mcp_call_t *call);
/** The protocol revision the call's client speaks ("2026-07-28", or the session's). */
const char *mcp_call_protocol(const mcp_call_t *call);
/** True if the call's client declared capability `name` (the request's own _meta
 *  capabilities for a stateless call, else the session's). */
bool mcp_call_client_has(const mcp_call_t *call, const char *name);
/** Finishes the call with MissingRequiredClientCapabilityError (-32021) naming `capability`
 *  in data.requiredCapabilities ({capability: {}}). Frees the call. */
void mcp_call_finish_missing_capability(mcp_call_t *call, const char *capability);

/* ---------------------------------------------------------------------------------------- */
/* MRTR: multi-round-trip requests of 2026-07-28 (file mcp/mrtr.c)                           */
/*                                                                                          */
/* A stateless client cannot be sent sampling, elicitation or roots requests. A tool that   */
/* needs them finishes its call with an InputRequiredResult naming what it needs; the client */
/* calls again with the answers (inputResponses) and the opaque requestState of the result. */
/* The library protects that state (HMAC-SHA256 with a key made per process from mbedTLS's  */
/* random generator, or the one mcp_server_set_state_key shares between instances, bound to */
/* the tool's name, valid MCP_MRTR_STATE_TTL_MS by the wall clock): a state that was        */
/* changed, belongs to another tool, comes from a process with another key or expired is    */
/* refused with -32602 before the handler runs, so a handler only ever sees state that it   */
/* (or an instance sharing the key) wrote.                                                  */

#define MCP_MRTR_STATE_TTL_MS ((uint64_t)10 * 60 * 1000) /* how long a requestState is honoured */
#define MCP_MRTR_MAX_STATE    ((size_t)64 * 1024)        /* bytes of state one round may carry */

/** The smallest key mcp_server_set_state_key takes (256 bits). */
#define MCP_STATE_KEY_MIN_BYTES 32
/** Signs MRTR requestStates under `key` (len >= MCP_STATE_KEY_MIN_BYTES bytes, copied; a
 *  short one is MCP_EINVAL) instead of the random per-process key: servers given the same key
 *  honour each other's states, so a client's next round may land on any instance behind a load
 *  balancer. States written before the call no longer verify. What a state names beyond its own
 *  bytes (a job parked in one process) is the tool's to find, or to refuse. */
int mcp_server_set_state_key(mcp_server_t *srv, const unsigned char *key, size_t len);

/** The client's answers to the previous round's inputRequests: an object mapping each key to
 *  the client's result (borrowed; every value already checked to be an object), or NULL on a
 *  first round (and always for legacy calls). */
const cJSON *mcp_call_input_responses(const mcp_call_t *call);
/** The state the previous round's InputRequiredResult carried, verified (borrowed), or NULL
 *  when the call carried none. */
const char *mcp_call_request_state(const mcp_call_t *call);
/**
 * Finishes a stateless call with an InputRequiredResult. input_requests (taken) is an object
 * mapping keys the tool chooses to {method, params} with method sampling/createMessage,
 * elicitation/create or roots/list; state (borrowed, may be NULL, at most
 * MCP_MRTR_MAX_STATE bytes) comes back through mcp_call_request_state on the next round. A
 * request the client's capabilities do not allow finishes the call with -32021 instead (ask
 * mcp_call_client_has first); a legacy call or malformed input_requests with an internal
 * error. Frees the call.
 */
void mcp_call_finish_input_required(mcp_call_t *call, cJSON *input_requests, const char *state);

/**
 * What a prompts/get round of a prompt registered with get_round sees and may ask. The
 * function answers with *messages as get does, or, for a stateless request only, sets
 * input_requests (as mcp_call_finish_input_required takes them; the library takes it) and
 * optionally next_state (malloc'd; the library takes it) and returns MCP_OK: the client then
 * gets an InputRequiredResult and comes back with the answers.
 */
struct mcp_prompt_round {
    bool modern;                  /* a stateless request: only it can be asked */
    const cJSON *input_responses; /* the answers to the previous round, or NULL */
    const char *state;            /* the previous round's state, verified, or NULL */
    const cJSON *client_caps;     /* the request's (or session's) client capabilities */
    cJSON *input_requests;        /* out: what to ask */
    char *next_state;             /* out: state for the next round */
};

/* ---------------------------------------------------------------------------------------- */
/* Tasks: the extension io.modelcontextprotocol/tasks of 2026-07-28 (SEP-2663, mcp/tasks.c)  */
/*                                                                                          */
/* A stateless client that lists the extension in its request's clientCapabilities.extensions */
/* may be answered a CreateTaskResult instead of the tool's result: the handler decides     */
/* (mcp_call_become_task), the call goes on without a request, and what it finishes with   */
/* (result, tool error, protocol error, or an InputRequiredResult that parks the task in    */
/* input_required until tasks/update brings every answer and the handler runs again as the */
/* next MRTR round) is kept in the server's task table. The client polls tasks/get, answers */
/* with tasks/update and stops it with tasks/cancel (the handler's cancel callback runs). A */
/* task id is 128 bits from a keyed hash (unguessable) and only the identity that made the  */
/* task (mcp_call_identity) can see it; others get -32602 as for an unknown id. A task that */
/* ended is kept MCP_TASK_TTL_MS after its last change, then forgotten.                     */

#define MCP_EXT_TASKS      "io.modelcontextprotocol/tasks"
#define MCP_TASK_TTL_MS    ((uint64_t)30 * 60 * 1000) /* kept after its last change (ttlMs) */
#define MCP_TASK_POLL_MS   1000u                      /* pollIntervalMs suggested to the client */
#define MCP_TASK_MAX_TASKS 1024u                      /* tasks kept at once by one server */

/** True if the call's client declared client extension `id` (the request's own
 *  clientCapabilities.extensions for a stateless call; false for a legacy one). */
bool mcp_call_client_has_extension(const mcp_call_t *call, const char *id);
/** True if the call may become a task now: a stateless call of a tool registered with task
 *  support, whose client declared MCP_EXT_TASKS, still answering its request. */
bool mcp_call_can_become_task(const mcp_call_t *call);
/**
 * Answers the call's request with a CreateTaskResult and lets the call go on as a task: its
 * handler finishes it as usual (mcp_call_finish*, mcp_call_finish_input_required) and the
 * outcome goes to the task. The call no longer has a session (mcp_call_session is NULL, so
 * no progress, logging or server-to-client requests), its identity stays. MCP_OK also for a
 * call that is a task already (a resumed round). MCP_ENOTSUP when mcp_call_can_become_task
 * says no, MCP_EBUSY when MCP_TASK_MAX_TASKS unfinished tasks exist, MCP_ENOMEM: then
 * nothing changed and the call goes on as a plain call.
 */
int mcp_call_become_task(mcp_call_t *call);
/** True if the call runs as a task (after mcp_call_become_task, or a resumed round). */
bool mcp_call_is_task(const mcp_call_t *call);
/** Cancels every task still working or waiting for input (their handlers' cancel callbacks
 *  run): for a server that stops. The tasks' records stay until mcp_server_free. */
void mcp_server_cancel_tasks(mcp_server_t *srv);
/** The id of the task the call runs as (borrowed, valid while the call lives), or NULL. */
const char *mcp_call_task_id(const mcp_call_t *call);
/** Told when a task is cancelled while no round of it runs (it waited for input): there is no
 *  call to cancel, so what the tool keeps for the task's next round (under mcp_call_task_id of
 *  the round that asked) can go now. who is the task's identity. */
typedef void (*mcp_task_cancel_fn)(const char *task_id, const mcp_identity_t *who, void *data);
void mcp_server_on_task_cancel(mcp_server_t *srv, mcp_task_cancel_fn fn, void *data);

/* ======================================================================================== */
/* The relay: the downstream clients of a server that calls them for its own callers        */
/* (files mcp/relay.c, mcp/relay_proxy.c)                                                   */
/*                                                                                          */
/* A relay starts one client per config entry and answers their servers' sampling and     */
/* elicitation requests by passing each to the caller whose call is waiting on that server  */
/* (mcp_relay_own): on that call's own stream, or, for a stateless 2026-07-28 caller, as an */
/* input request of its own (mcp_relay_asker_t.hold); never to another client. With         */
/* mcp_relay_expose it also lists the downstream tools on our server, under names its owner */
/* gives (mcp_relay_tools_fn: mcp/ does not name tools itself), and proxies every call; a   */
/* stateless caller's call whose legacy server asks for input parks under an unguessable    */
/* handle bound to the caller's identity until the caller's next round brings the answer.  */
/* Everything runs on the loop thread.                                                      */
/* ======================================================================================== */

typedef struct mcp_relay mcp_relay_t;

/* The default of mcp_relay_opts_t.max_parked. */
#define MCP_RELAY_MAX_PARKED 64u
/* How long a request forwarded to our client may wait for its answer: a person may be
 * answering it. */
#define MCP_RELAY_FORWARD_TIMEOUT_MS (10u * 60 * 1000)
/* A parked call's handle: the prefix and 32 hex digits (128 random bits), with its NUL. */
#define MCP_RELAY_HANDLE_PREFIX "proxy-"
#define MCP_RELAY_HANDLE_MAX    40
/* The key of a held request in a parked call's inputRequests and its round's inputResponses. */
#define MCP_RELAY_INPUT_KEY "downstream"

/** One downstream tool as the relay lists it on our server (all borrowed). */
typedef struct mcp_relay_tool {
    const char *id;            /* the name it is listed under (unique on our server) */
    const char *name;          /* its name on the downstream server */
    const char *title;         /* may be NULL or "" */
    const char *description;   /* may be NULL */
    const cJSON *input_schema; /* NULL: {"type":"object"} */
    const cJSON *annotations;  /* may be NULL */
} mcp_relay_tool_t;

/** The owner's list of the tools to expose for `server`: fills *out (valid until the next
 *  call) with the first one at or after position *pos of the owner's own list and moves *pos
 *  past it; false when none is left. Called from mcp_relay_expose and mcp_relay_relist. */
typedef bool (*mcp_relay_tools_fn)(void *data, const char *server, size_t *pos,
                                   mcp_relay_tool_t *out);

typedef struct mcp_relay_opts {
    unsigned tool_timeout_ms; /* a proxied call's timeout, and how long a parked one waits for
                                 its round (0: the call has none, a parked one goes at once) */
    size_t max_parked;        /* proxied calls parked at once; 0: MCP_RELAY_MAX_PARKED */
    mcp_relay_tools_fn tools; /* what mcp_relay_expose lists; NULL: nothing */
    void *tools_data;         /* borrowed; passed to tools */
} mcp_relay_opts_t;

/**
 * Creates an empty relay. hooks (borrowed, may be NULL; must outlive the relay) are the owner's:
 * its state_changed and tools_changed run for every client of the relay; its peer_* members are
 * not used (the relay answers those).
 * Borrows loop and lg. *out is set on MCP_OK; MCP_ENOMEM otherwise.
 */
int mcp_relay_new(uv_loop_t *loop, const mcp_relay_opts_t *opts, const mcp_client_hooks_t *hooks,
                  const mcp_logger_t *lg, mcp_relay_t **out);
/** Creates and starts a client for every entry of cfg (as mcp_clients_start_all; opts
 *  borrowed during the call, opts->http must outlive the relay). MCP_ENOMEM; MCP_ESTATE when
 *  the relay has clients already. */
int mcp_relay_start(mcp_relay_t *r, const mcp_downstream_config_t *cfg,
                    const mcp_client_opts_t *opts);
/** The relay's clients (borrowed: the set the mcp_clients_* questions take); *n their count. */
mcp_client_t *const *mcp_relay_clients(const mcp_relay_t *r, size_t *n);
/** The client of server `name`, or NULL (borrowed). r may be NULL. */
mcp_client_t *mcp_relay_client(const mcp_relay_t *r, const char *name);
/** The server whose only capable session gets a request no call of ours owns (borrowed). */
void mcp_relay_set_server(mcp_relay_t *r, mcp_server_t *srv);
/** Lists every downstream tool on srv (borrowed, as mcp_relay_set_server) under the name
 *  opts.tools gives it, now and at every mcp_relay_relist, and proxies their calls. */
void mcp_relay_expose(mcp_relay_t *r, mcp_server_t *srv);
/** The owner's list of server's tools changed (after its tools_changed hook, say): the exposed
 *  tools of that server are listed again (one list_changed). Nothing before mcp_relay_expose. */
void mcp_relay_relist(mcp_relay_t *r, const char *server);
/** How many proxied calls are parked for their caller's next round. */
size_t mcp_relay_parked(const mcp_relay_t *r);
/** Ends the parked calls and stops every server (asynchronously: run the loop). */
void mcp_relay_stop(mcp_relay_t *r);
/** Frees: requests still forwarded are withdrawn, parked calls dropped, the clients freed
 *  (their children stop in the background: run the loop afterwards). NULL allowed. */
void mcp_relay_free(mcp_relay_t *r);

/** A note that a call of ours has a call in flight to a downstream server. */
typedef struct mcp_relay_owner mcp_relay_owner_t;
/** A sampling or elicitation request of a downstream server held unanswered (a legacy server's
 *  JSON-RPC request, or a stateless server's input request) while a 2026-07-28 caller, asked
 *  for it in an InputRequiredResult, comes back with the answer in its next round. */
typedef struct mcp_relay_held mcp_relay_held_t;
/** The server withdrew a held request (it cancelled it, died or stops): the request is freed,
 *  its holder must forget it. */
typedef void (*mcp_relay_withdrawn_cb)(void *data);
/** Whom a downstream call is made for, asked when the server sends a request meanwhile. */
typedef struct mcp_relay_asker {
    /** The call the request belongs to now (borrowed), or NULL: then *busy is a sentence when
     *  that call cannot be asked now (one input at a time), else NULL (no request waits). */
    mcp_call_t *(*call)(void *data, const char **busy);
    /** Only for a stateless call that declared the request's capability: the call takes h as
     *  an input request of its own (answering itself with an InputRequiredResult) and answers
     *  h later (mcp_relay_held_answer). 0 when taken; < 0 when not, with a sentence in msg
     *  (h is then failed with it). NULL: such calls are refused. */
    int (*hold)(void *data, mcp_relay_held_t *h, char *msg, size_t n);
    void *data;
} mcp_relay_asker_t;
/**
 * Notes that a call of ours (asker, copied; its data must outlive the note) is waiting on
 * downstream call dc to server c, so that a sampling or elicitation request c sends meanwhile
 * goes to that call's client, on its stream (or into its InputRequiredResult), and never to
 * another client's session. NULL when r, c or asker is NULL or memory ran out (then c's
 * requests reach a client only when one session is connected).
 */
mcp_relay_owner_t *mcp_relay_own(mcp_relay_t *r, const mcp_client_t *c, const mcp_client_call_t *dc,
                                 const mcp_relay_asker_t *asker);
/** Ends the note (NULL: nothing). */
void mcp_relay_disown(mcp_relay_owner_t *o);
/** The held request's method ("sampling/createMessage" or "elicitation/create") and params
 *  (borrowed; may be NULL), valid until it is answered or withdrawn. */
const char *mcp_relay_held_method(const mcp_relay_held_t *h);
const cJSON *mcp_relay_held_params(const mcp_relay_held_t *h);
/** cb(data) is told if the server withdraws h (see mcp_relay_withdrawn_cb). */
void mcp_relay_held_watch(mcp_relay_held_t *h, mcp_relay_withdrawn_cb cb, void *data);
/** Answers h with the client's result (borrowed, copied) or, when result is NULL, fails it
 *  with why; frees h. */
void mcp_relay_held_answer(mcp_relay_held_t *h, const cJSON *result, const char *why);

#endif /* PTC_MCP_H */
