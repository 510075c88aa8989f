/* mcp_client.h - part of mcp.h, the library's one public header: the client side, for downstream
 * MCP servers. Include mcp.h, never this file: it is read at its place inside mcp.h (the
 * declarations above it there are in scope), and it is a file of its own only to keep each file
 * short. */
#ifndef PTC_MCP_CLIENT_H
#define PTC_MCP_CLIENT_H
#ifndef PTC_MCP_H
#error "include mcp.h, not mcp_client.h"
#endif

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
/* "headers" of an http entry: the HTTP client sends at most 64 (PTC_HTTP_MAX_USER_HEADERS), and
 * the rest is for the 6 a request adds itself and a tool call's Mcp-Param-* headers. */
#define MCP_DOWNSTREAM_MAX_HEADERS 32
#define MCP_DOWNSTREAM_MAX_NAME    128 /* bytes of a server name */
/* Problems one config may have: an entry left out is one (MAX_SERVERS at most), an unknown key
 * of an entry one more; a config past it is refused (MCP_ETOOBIG) rather than half reported. */
#define MCP_DOWNSTREAM_MAX_PROBLEMS 4096

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
 * error (MCP_EINVAL, MCP_ENOMEM, MCP_ETOOBIG past MCP_DOWNSTREAM_MAX_PROBLEMS; msg says which)
 * *out is empty.
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
 * MCP_EINVAL for an entry the config parser would refuse (no command, no url, more than
 * MCP_DOWNSTREAM_MAX_HEADERS headers).
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

#endif /* PTC_MCP_CLIENT_H */
