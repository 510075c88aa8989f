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
 * failure b holds what it held before: MCP_ENOMEM, MCP_ETOOBIG when the text would pass b's
 * cap, or MCP_EINVAL for an invalid item or one nested deeper than CJSON_NESTING_LIMIT. Unlike
 * cJSON_PrintUnformatted it allocates nothing once b has room, which is what the hot path of a
 * transport needs.
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
 *  is not valid JSON or the name is not allowed; MCP_EINVAL also for a duplicate name;
 *  MCP_ETOOBIG past MCP_MAX_LIST_ENTRIES tools). Sessions that support it get
 *  notifications/tools/list_changed. */
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
 * Sends notifications/progress if the request carried _meta.progressToken. No update is lost:
 * updates closer than the rate limit (progress_min_interval_ms) are coalesced, the newest
 * (value, total and message) replacing the one waiting, which is sent when the interval passes
 * or, at the latest, just before the call's response. MCP wants the value to increase with each
 * notification: a value that does not (the same step with a new message, two updates in one
 * loop turn, NaN or infinity) is sent raised by one unit of the 15th significant digit of the
 * last value sent (5 -> 5.00000000000001), so its message still reaches the client; when the
 * last value sent was total, that is a hair above total. total < 0 (or not finite) and
 * message NULL are omitted.
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
#define MCP_MAX_LIST_ENTRIES      1000000  /* tools (or prompts, resources) one server offers */

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

#include "mcp_client.h" /* the client side, for downstream MCP servers */

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

#include "mcp_relay.h" /* the relay (a server's downstream clients, called for its own callers) */

#endif /* PTC_MCP_H */
