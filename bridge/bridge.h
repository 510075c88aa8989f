/*
 * bridge.h - the bridge between sandboxed Python and the host (docs/bridge.md): the protocol
 * codec, the host end of one execute_code run's bridge and the router that decides where its
 * calls go (the MCP part injected). The one public header of bridge/.
 */
#ifndef PTC_BRIDGE_H
#define PTC_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "base.h"
#include "mcp.h"
#include "registry.h"
#include "repair.h"

/* ---- the protocol ----------------------------------------------------------------------- */
/*
 * The JSON-lines protocol (proto.c) between sandboxed Python (tools/_runtime.py) and
 * the host, over the one inherited socket of a run. docs/bridge.md has the same text.
 *
 * Framing: UTF-8 JSON objects, one per line, '\n' terminated, no line longer than the host's
 * cap (PTC_BRIDGE_LINE_MAX by default). Both sides may have many requests in flight; answers
 * come back in any order and are matched by id.
 *
 * Requests (sandbox -> host):
 *   {"id": N, "method": "call",   "params": {"server": S, "tool": T, "arguments": {...}}}
 *   {"id": N, "method": "search", "params": {"query": Q, "top_k": K, "server": S,
 *                                          "category": C}}
 *   {"id": N, "method": "emit",   "params": {"record": ANY}}
 *   N is an integer in 1..2^53-1, unique among the requests in flight. S and T are the
 *   original (unsanitised) server and tool names; "arguments" is optional (default {}).
 *   K is optional (default 5, 1..PTC_BRIDGE_TOPK_MAX). A search's S and C are optional
 *   filters with search_tools' meaning (only that server's tools, only that category's);
 *   absent or null means no filter.
 *
 * Answers (host -> sandbox), exactly one per request:
 *   {"id": N, "result": R}
 *   {"id": N, "error": {"code": C, "message": M}}
 *   For "call", R is the downstream tool's MCP CallToolResult as received (content,
 *   structuredContent, isError); a tool that ran and failed is a result with isError, while
 *   "error" means the call never reached the tool (refused, timed out, malformed, budget).
 *   For "search", R is search_tools' structuredContent ({"embedder", "tools": [...]}).
 *   For "emit", R is null. C is one of the strings below; M is a sentence for the user.
 *   A request whose id cannot be read is answered with "id": null and then the host may close.
 */
#define PTC_BRIDGE_LINE_MAX  (11u << 20) /* default line cap: an emit record of 10 MiB fits */
#define PTC_BRIDGE_NAME_MAX  1024        /* server / tool name bytes (as REG_NAME_MAX) */
#define PTC_BRIDGE_QUERY_MAX 8192        /* search query bytes */
#define PTC_BRIDGE_TOPK_MAX  50          /* as search_tools' top_k */
#define PTC_BRIDGE_TOPK_DEF  5
#define PTC_BRIDGE_ID_MAX    9007199254740991LL /* 2^53 - 1: exact in a Python float and JS */

/* Error codes as they appear in "code". */
#define PTC_BRIDGE_E_INVALID "invalid_request" /* malformed line or params */
#define PTC_BRIDGE_E_TOOBIG  "too_big"         /* line or record over a cap */
#define PTC_BRIDGE_E_UNKNOWN "unknown_tool"    /* no such server/tool in the registry */
#define PTC_BRIDGE_E_DENIED  "denied"          /* --allow-tools / --deny-tools / confirmation */
#define PTC_BRIDGE_E_BUDGET  "budget"          /* call count or byte budget of the run spent */
#define PTC_BRIDGE_E_TIMEOUT "timeout"         /* per-call timeout or run deadline */
#define PTC_BRIDGE_E_UNAVAIL "unavailable"     /* downstream not connected or it failed */

/* The codes of the bridge, its protocol and its host end (base.h's error space): errno values
 * only so far (PTC_ERR_BRIDGE is kept for extras). X(NAME, VALUE, TEXT) */
#define PTC_BRIDGE_ERRORS(X)                                                                       \
    X(PTC_BRIDGE_OK, 0, "success")                                                                 \
    X(PTC_BRIDGE_ENOMEM, -ENOMEM, "out of memory")                                                 \
    /* a request line that is not valid (msg says why), a bad argument or limit */                 \
    X(PTC_BRIDGE_EINVAL, -EINVAL, "malformed bridge request or invalid argument")                  \
    /* the line or one of its fields is over a cap */                                              \
    X(PTC_BRIDGE_ETOOBIG, -E2BIG, "bridge request over a size cap")                                \
    /* the descriptor cannot be opened on the loop */                                              \
    X(PTC_BRIDGE_EIO, -EIO, "the bridge descriptor cannot be used")

enum { PTC_BRIDGE_ERRORS(PTC_ERR_ENUM) };

typedef enum ptc_bridge_method {
    PTC_BRIDGE_CALL = 1,
    PTC_BRIDGE_SEARCH = 2,
    PTC_BRIDGE_EMIT = 3,
} ptc_bridge_method_t;

/** One parsed request. Every pointer is owned by the struct; ptc_bridge_req_clear frees. */
typedef struct ptc_bridge_req {
    int64_t id;
    ptc_bridge_method_t method;
    char *server;      /* call: original server name; search: the server filter or NULL */
    char *tool;        /* call: original tool name */
    cJSON *arguments;  /* call: a JSON object ({} when absent) */
    char *query;       /* search */
    int top_k;         /* search */
    char *category;    /* search: the category filter or NULL */
    cJSON *record;     /* emit: any JSON value */
    size_t line_bytes; /* length of the line as received (for byte budgets) */
} ptc_bridge_req_t;

/** A static English description of any code (never NULL): the bridge's own, else mcp_strerror's
 *  (which names the HTTP client's and base's codes too). */
const char *ptc_bridge_strerror(int err);

/**
 * Parses one request line (len bytes, with or without its trailing '\n'; need not be NUL
 * terminated). max_line: the cap in bytes (0 means PTC_BRIDGE_LINE_MAX). Borrows line.
 * On success fills *req (the caller clears it). On failure *req is cleared, the return is
 * negative, msg (may be NULL) says what was wrong, and req->id holds the request's id when it
 * could be read (so the host can answer it) or -1 when not.
 */
int ptc_bridge_parse(const char *line, size_t len, size_t max_line, ptc_bridge_req_t *req,
                     char *msg, size_t msg_size);

/** Frees what a request owns and zeroes it (id becomes -1). NULL is allowed. */
void ptc_bridge_req_clear(ptc_bridge_req_t *req);

/**
 * Builds the answer line {"id":id,"result":result}\n (result borrowed; NULL means JSON null).
 * id < 0 writes "id": null. Returns a malloc'd NUL-terminated line the caller frees and its
 * length in *len (may be NULL), or NULL on ENOMEM.
 */
char *ptc_bridge_answer_result(int64_t id, const cJSON *result, size_t *len);

/**
 * Builds the answer line {"id":id,"error":{"code":code,"message":message}}\n. Borrows code and
 * message (any bytes; escaped by cJSON). Ownership as ptc_bridge_answer_result.
 */
char *ptc_bridge_answer_error(int64_t id, const char *code, const char *message, size_t *len);

/* ---- the host end ------------------------------------------------------------------------ */
/*
 * The host end of one run's bridge (host.c).
 *
 * Reads JSON-lines requests from sandboxed Python on the libuv loop, checks them (allow/deny
 * patterns, the tool's inputSchema, call and byte budgets, per-call timeouts, emit bounds),
 * dispatches through an ops table the wiring provides (downstream clients and the registry in
 * the binary, fakes in tests), answers every request exactly once in any order, keeps the
 * emitted records and writes one audit record per call. Never blocks, except for the audit
 * FILE* the wiring hands in (one buffered line per call).
 *
 * All functions run on the loop thread.
 */
/* Defaults for a zero field of ptc_bridge_limits_t. */
#define PTC_BRIDGE_CALLS_DEF       200u           /* tool calls per run */
#define PTC_BRIDGE_TIMEOUT_DEF     60000u         /* ms, one downstream call (--tool-timeout) */
#define PTC_BRIDGE_BYTES_IN_DEF    (64ull << 20)  /* request bytes per run (sandbox -> host) */
#define PTC_BRIDGE_BYTES_OUT_DEF   (256ull << 20) /* answer bytes per run (host -> sandbox) */
#define PTC_BRIDGE_EMIT_RECORD_DEF (1u << 20)     /* one emitted record, serialised */
#define PTC_BRIDGE_EMIT_TOTAL_DEF  (10u << 20)    /* all records of a run */
#define PTC_BRIDGE_EMIT_RECORD_MAX (10u << 20)    /* the largest the flags may ask for */
#define PTC_BRIDGE_EMIT_TOTAL_MAX  (100u << 20)
#define PTC_BRIDGE_INFLIGHT_MAX    64u  /* calls and searches waiting at once */
#define PTC_BRIDGE_WARNINGS_MAX    32u  /* warnings kept for the result; more are counted */
#define PTC_BRIDGE_PATTERNS_MAX    256u /* patterns per --allow-tools / --deny-tools list */
#define PTC_BRIDGE_RUN_ID_MAX      128u

/** Limits and settings of one run. A zero number means the default above. */
typedef struct ptc_bridge_limits {
    unsigned max_calls;       /* tool calls forwarded per run */
    unsigned tool_timeout_ms; /* one call; never past deadline_ms */
    uint64_t deadline_ms;     /* uv_now(loop) value at which the run ends; 0: none */
    uint64_t bytes_in_max;    /* request line bytes per run */
    uint64_t bytes_out_max;   /* answer line bytes per run (error answers always go out) */
    size_t line_max;          /* one request line (0: PTC_BRIDGE_LINE_MAX) */
    size_t emit_record_max;   /* <= PTC_BRIDGE_EMIT_RECORD_MAX */
    size_t emit_total_max;    /* <= PTC_BRIDGE_EMIT_TOTAL_MAX */
    const char *allow_tools;  /* comma-separated fnmatch patterns on tool ids; NULL/"": all */
    const char *deny_tools;   /* same; a match wins over allow_tools; NULL/"": none */
    bool refuse_writes;       /* --confirm-writes without a way to confirm: refuse every tool
                                 not annotated readOnlyHint: true ("denied") */
    const char *run_id;       /* for the audit records (NULL: "") */
    ptc_journal_t *journal;   /* borrowed, may be NULL: the request's replay journal. A call
                                 to a tool not annotated readOnlyHint whose result it kept
                                 (an earlier attempt) is answered from it ("replayed") without
                                 reaching the tool; successful results are kept */
    FILE *audit;              /* borrowed, one JSON line per call; NULL: mcp_log at info */
    bool confirm_writes;      /* ptc_bridge_host_open only: a call to a tool not annotated
                                 readOnlyHint: true asks routes->confirm first (--confirm-writes) */
} ptc_bridge_limits_t;

/**
 * Called once with the outcome of a call or search. err 0: result is the CallToolResult
 * (call) or search_tools' structuredContent (search), borrowed for the duration of the
 * callback. err MCP_ETIMEDOUT: timed out downstream; MCP_ECANCELED: cancelled; any other
 * negative mcp_err_t: it could not reach or finish at the tool. message (may be NULL) says why.
 */
typedef void (*ptc_bridge_done_cb)(void *done_data, int err, const cJSON *result,
                                   const char *message);

/**
 * What the host dispatches to. call and search start work and return 0 (done_cb then runs
 * exactly once, possibly before they return, unless cancelled) or a negative mcp_err_t (done_cb
 * is never called). *cancel_handle receives what cancel takes. cancel stops the work: done_cb
 * may run during cancel but never after it returns (mcp_client_call_cancel behaves so).
 */
typedef struct ptc_bridge_ops {
    /** The tool, or NULL when the registry has none with this server and name. The view must
     *  stay valid until the current host callback returns (it is used synchronously). */
    const reg_tool_t *(*find_tool)(void *ops_data, const char *server, const char *tool);
    /** args borrowed (copy it). timeout_ms > 0 is the time left for this call. */
    int (*call)(void *ops_data, const reg_tool_t *tool, const cJSON *args, unsigned timeout_ms,
                ptc_bridge_done_cb done, void *done_data, void **cancel_handle);
    /** May be NULL: searches are then answered "unavailable". server and category (NULL:
     *  no filter) restrict the results as search_tools' arguments of those names do. */
    int (*search)(void *ops_data, const char *query, int top_k, const char *server,
                  const char *category, ptc_bridge_done_cb done, void *done_data,
                  void **cancel_handle);
    void (*cancel)(void *ops_data, void *cancel_handle);
    /** Optional: each audit record (borrowed), e.g. to send it as an MCP log message. */
    void (*audit)(void *ops_data, const cJSON *record);
    /** Optional: the sandbox closed its end (EOF): every request it sent has been read, so
     *  the emitted records are complete once no calls are in flight. */
    void (*peer_closed)(void *ops_data);
} ptc_bridge_ops_t;

/** Counters of a run (for progress notifications and the result). */
typedef struct ptc_bridge_counters {
    uint64_t tool_calls; /* calls forwarded to a tool */
    uint64_t refused;    /* calls answered without reaching a tool (denied, unknown, ...) */
    uint64_t searches, emits;
    uint64_t bytes_in, bytes_out;
    uint64_t malformed; /* lines whose id could not be read */
    uint64_t timeouts;  /* calls and searches the host timed out */
    uint64_t cancelled; /* calls and searches cancelled by ptc_bridge_host_close */
    uint64_t replayed;  /* calls answered from the replay journal */
    unsigned in_flight;
} ptc_bridge_counters_t;

typedef struct ptc_bridge_host ptc_bridge_host_t;

/**
 * Starts serving the bridge on fd (a connected AF_UNIX stream socket or pipe; taken: closed
 * by ptc_bridge_host_close, or here on failure). Borrows loop, lg, ops and ops_data, which must
 * outlive the host; lim is copied (its strings too; audit stays borrowed). The process must
 * ignore SIGPIPE (the binary does). On failure returns a negative code and writes a sentence to
 * msg (may be NULL).
 */
int ptc_bridge_host_new(uv_loop_t *loop, int fd, const ptc_bridge_limits_t *lim,
                        const ptc_bridge_ops_t *ops, void *ops_data, const mcp_logger_t *lg,
                        ptc_bridge_host_t **out, char *msg, size_t msg_size);

/** The emitted records so far, in order: a cJSON array borrowed from the host (valid until
 *  close or the next emit). */
const cJSON *ptc_bridge_host_outputs(const ptc_bridge_host_t *h);
/** Hands the records over: the caller owns and frees the array; later records start a new
 *  one (the per-run byte cap still counts the taken ones). NULL on ENOMEM (the host keeps
 *  them). */
cJSON *ptc_bridge_host_take_outputs(ptc_bridge_host_t *h);
/** Warnings for the result (skipped or malformed records, ...): a borrowed array of at most
 *  PTC_BRIDGE_WARNINGS_MAX strings; later ones are only counted. */
const cJSON *ptc_bridge_host_warnings(const ptc_bridge_host_t *h);
/** Hands the warnings over (caller frees), with a last "N more warnings" entry when some
 *  were only counted. NULL on ENOMEM (the host keeps them). */
cJSON *ptc_bridge_host_take_warnings(ptc_bridge_host_t *h);
void ptc_bridge_host_counters(const ptc_bridge_host_t *h, ptc_bridge_counters_t *out);
/**
 * What a finished run (or cell) hands its result: the records into *outputs (an array, NULL on
 * ENOMEM) and the warnings into *warnings (NULL when there were none); the caller deletes
 * both. Either may be NULL: those are dropped. Returns the run's tool calls (forwarded to a tool
 * or answered from the journal).
 */
uint64_t ptc_bridge_host_harvest(ptc_bridge_host_t *h, cJSON **outputs, cJSON **warnings);
/** True once the sandbox closed its end. */
bool ptc_bridge_host_peer_closed(const ptc_bridge_host_t *h);

/**
 * Starts the next run on the same descriptor (a workspace session's next cell: its sandbox keeps
 * one bridge for its life): the counters and the per-run budgets start again, records and
 * warnings not taken are dropped, and journal (borrowed, may be NULL) becomes the replay journal.
 * Calls still in flight go on and count for the new run.
 */
void ptc_bridge_host_rearm(ptc_bridge_host_t *h, ptc_journal_t *journal);

/**
 * Ends the bridge (the run ended, was cancelled or timed out): cancels every call and search
 * in flight through ops->cancel (audited as "cancelled"), answers nothing more, closes the
 * descriptor and frees the host once libuv has closed its handles (keep running the loop).
 * out (may be NULL) receives the final counters. Records not taken are freed. NULL allowed.
 */
void ptc_bridge_host_close(ptc_bridge_host_t *h, ptc_bridge_counters_t *out);

/* ---- the router ---------------------------------------------------------------------------- */
/*
 * Where a run's calls and searches go (route.c): an implementation of ptc_bridge_ops_t over a
 * table of routes the wiring provides (the MCP part: downstream clients, the user's
 * confirmation, the registry's search). A call to a tool no connected server serves is refused
 * (MCP_ENOTSUP) saying why: the user's own helpers (routes->is_custom) run inside the sandbox,
 * a tool only described (--tools-file) has nobody to call. With confirm_writes a call to a tool
 * not annotated readOnlyHint: true first asks the user (an elicitation/create request whose
 * params ptc_bridge_confirm_params builds) and reaches the tool only on an explicit approval;
 * anything else is answered MCP_EDENIED ("denied" to the code). Loop-thread only.
 */
typedef struct ptc_bridge_router ptc_bridge_router_t;
typedef struct ptc_bridge_route_op ptc_bridge_route_op_t; /* one call or search in flight */

/** What a route op waits for now. */
typedef enum ptc_bridge_route {
    PTC_BRIDGE_ROUTE_CALL = 1, /* routes->call's answer */
    PTC_BRIDGE_ROUTE_CONFIRM,  /* the user's answer to routes->confirm */
    PTC_BRIDGE_ROUTE_SEARCH,   /* routes->search's answer */
} ptc_bridge_route_t;

/**
 * The wiring's part; data is the router's. call, confirm and search start work for op and
 * report its end exactly once through ptc_bridge_route_done (call, search) or
 * ptc_bridge_route_confirmed (confirm), never after routes->cancel returned for op.
 */
typedef struct ptc_bridge_routes {
    /** The tool, or NULL (as ptc_bridge_ops_t's find_tool). */
    const reg_tool_t *(*find_tool)(void *data, const char *server, const char *tool);
    /** True when a connected downstream server serves server. */
    bool (*served)(void *data, const char *server);
    /** Optional: true when server is the user's own helpers (--custom-tools). */
    bool (*is_custom)(void *data, const char *server);
    /** Calls tool (its original name) of server with args (borrowed) within timeout_ms: 0 with
     *  *handle set, the end not before this returns; or < 0 with a sentence in msg (the code
     *  is the answer's). */
    int (*call)(void *data, ptc_bridge_route_op_t *op, const char *server, const char *tool,
                const cJSON *args, unsigned timeout_ms, void **handle, char *msg, size_t msg_size);
    /** Required with confirm_writes: asks the user with params (taken) within timeout_ms: 0
     *  with *handle set (NULL when there is nothing to stop but the wait), the answer not
     *  before this returns; MCP_EDENIED with a sentence in msg when the user cannot be asked
     *  now (the call is refused so); another < 0 on failure. */
    int (*confirm)(void *data, ptc_bridge_route_op_t *op, const reg_tool_t *tool, cJSON *params,
                   unsigned timeout_ms, void **handle, char *msg, size_t msg_size);
    /** A search (as ptc_bridge_ops_t's): 0, the end possibly before this returns (then
     *  *handle stays NULL), or < 0 (no end comes). */
    int (*search)(void *data, ptc_bridge_route_op_t *op, const char *query, int top_k,
                  const char *server, const char *category, void **handle);
    /** Stops op's work (handle as given, may be NULL; ptc_bridge_route_kind says which work).
     *  An end reported during the cancel is dropped; none may come after it. */
    void (*cancel)(void *data, ptc_bridge_route_op_t *op, void *handle);
    /** Optional: each audit record (borrowed). */
    void (*audit)(void *data, const cJSON *record);
} ptc_bridge_routes_t;

/** The operations of a router (ops_data: the router), for ptc_bridge_host_new. */
extern const ptc_bridge_ops_t ptc_bridge_router_ops;

/** A router over routes (borrowed, with data, both outliving it). PTC_BRIDGE_EINVAL when a
 *  required route is missing, PTC_BRIDGE_ENOMEM. */
int ptc_bridge_router_new(const ptc_bridge_routes_t *routes, void *data, bool confirm_writes,
                          ptc_bridge_router_t **out);
/** NULL allowed. No op may be in flight (the host's close cancels them first). */
void ptc_bridge_router_free(ptc_bridge_router_t *r);

/**
 * Opens a run's bridge routed through routes: a socketpair whose one end a host serves with a
 * router (lim->confirm_writes; the router goes with the host) and whose other end it returns,
 * for the sandbox (>= 0, close-on-exec; the caller owns it). Borrows as ptc_bridge_host_new,
 * routes and data too. On failure a negative code (a negative errno for the socketpair) and a
 * sentence in msg.
 */
int ptc_bridge_host_open(uv_loop_t *loop, const ptc_bridge_limits_t *lim,
                         const ptc_bridge_routes_t *routes, void *data, const mcp_logger_t *lg,
                         ptc_bridge_host_t **out, char *msg, size_t msg_size);

/** What op waits for now. */
ptc_bridge_route_t ptc_bridge_route_kind(const ptc_bridge_route_op_t *op);
/** The end of routes->call or routes->search: as ptc_bridge_done_cb (result and message
 *  borrowed). Frees op. */
void ptc_bridge_route_done(ptc_bridge_route_op_t *op, int err, const cJSON *result,
                           const char *message);
/** The user's answer to routes->confirm: result is the elicitation result (borrowed); err < 0
 *  (with message) when none came. On an approval the call goes on, else it is denied. */
void ptc_bridge_route_confirmed(ptc_bridge_route_op_t *op, int err, const cJSON *result,
                                const char *message);
/** The params of the elicitation/create request asking whether code may call tool_id with args
 *  (borrowed): a message quoting them and a schema with one required boolean "approve". Caller
 *  deletes; NULL on ENOMEM. */
cJSON *ptc_bridge_confirm_params(const char *tool_id, const cJSON *args);
/** True for an elicitation result that approves: action "accept" and content.approve true. */
bool ptc_bridge_confirm_approved(const cJSON *result);

#endif
