/*
 * bridge_proto.h - the JSON-lines protocol between sandboxed Python (tools/_runtime.py) and
 * the host, over the one inherited socket of a run. docs/bridge.md has the same text.
 *
 * Framing: UTF-8 JSON objects, one per line, '\n' terminated, no line longer than the host's
 * cap (PTC_BRIDGE_LINE_MAX by default). Both sides may have many requests in flight; answers
 * come back in any order and are matched by id.
 *
 * Requests (sandbox -> host):
 *   {"id": N, "method": "call",   "params": {"server": S, "tool": T, "arguments": {...}}}
 *   {"id": N, "method": "search", "params": {"query": Q, "top_k": K}}
 *   {"id": N, "method": "emit",   "params": {"record": ANY}}
 *   N is an integer in 1..2^53-1, unique among the requests in flight. S and T are the
 *   original (unsanitised) server and tool names; "arguments" is optional (default {}).
 *   K is optional (default 5, 1..PTC_BRIDGE_TOPK_MAX).
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
#ifndef PTC_SERVER_BRIDGE_PROTO_H
#define PTC_SERVER_BRIDGE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

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

enum {
    PTC_BRIDGE_OK = 0,
    PTC_BRIDGE_ENOMEM = -1,
    PTC_BRIDGE_EINVAL = -2,  /* the line is not a valid request (msg says why) */
    PTC_BRIDGE_ETOOBIG = -3, /* the line or one of its fields is over a cap */
};

typedef enum ptc_bridge_method {
    PTC_BRIDGE_CALL = 1,
    PTC_BRIDGE_SEARCH = 2,
    PTC_BRIDGE_EMIT = 3,
} ptc_bridge_method_t;

/** One parsed request. Every pointer is owned by the struct; ptc_bridge_req_clear frees. */
typedef struct ptc_bridge_req {
    int64_t id;
    ptc_bridge_method_t method;
    char *server;      /* call: original server name */
    char *tool;        /* call: original tool name */
    cJSON *arguments;  /* call: a JSON object ({} when absent) */
    char *query;       /* search */
    int top_k;         /* search */
    cJSON *record;     /* emit: any JSON value */
    size_t line_bytes; /* length of the line as received (for byte budgets) */
} ptc_bridge_req_t;

/** Returns a static English description of a PTC_BRIDGE_* code (never NULL). */
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

#endif
