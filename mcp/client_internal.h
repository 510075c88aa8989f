/* client_internal.h - what the files of the downstream client share; not part of the API. */
#ifndef PTC_MCP_CLIENT_INTERNAL_H
#define PTC_MCP_CLIENT_INTERNAL_H

#include "internal.h"

/* The tail of stderr kept for failure reasons. */
#define MCP__CLIENT_LAST_STDERR 240

/* http_client.c: the httpc client inside an mcp_http_client_t (borrowed). Its codes are
 * mcp/'s too (MCP_ETLS is PTC_HTTP_ETLS ...): they pass through untranslated. */
ptc_http_client_t *mcp__http_client_httpc(mcp_http_client_t *c);

typedef struct mcp__proc mcp__proc_t;
typedef struct mcp__http_conn mcp__http_conn_t;

/* One child process. It outlives its client when the client lets go of it (crash, stop, free):
 * then it drains and logs stderr, escalates signals if needed and frees itself. */
struct mcp__proc {
    mcp_client_t *c; /* NULL once detached */
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    char name[MCP_DOWNSTREAM_MAX_NAME + 1];
    unsigned gen; /* which spawn of the client this is */
    int pid;
    unsigned grace_ms;

    uv_signal_t chld; /* SIGCHLD: reaps pid (forked here, not by uv_spawn: see client_proc.c) */
    uv_pipe_t in, out, err;
    uv_timer_t timer; /* kill escalation, or the linger after exit */
    int open_handles;
    bool in_open, out_eof, err_eof, exited, reported, closing;
    int64_t exit_status;
    int term_signal;
    unsigned kill_stage; /* 0 none, 1 stdin closed, 2 SIGTERM sent, 3 SIGKILL sent */

    mcp_framer_t framer;
    char *errbuf;
    size_t errlen, errmax;
    bool err_cutting;
    char last_err[MCP__CLIENT_LAST_STDERR + 1];
    uint64_t err_window_ms; /* stderr rate limit: start of the current second */
    unsigned err_in_window;
    unsigned long err_suppressed;
    char readbuf[65536]; /* one read at a time: libuv reads stdout and stderr in turn */
};

/* Pages of tools/list followed before the listing is cut (a server whose cursors never end). */
#define MCP__CLIENT_MAX_LIST_PAGES 1000
/* Requests from one server waiting for the owner's answer. */
#define MCP__CLIENT_MAX_PEER_REQS 64
/* Unsent bytes queued to a server's stdin before new requests are refused. */
#define MCP__CLIENT_MAX_QUEUED_WRITE (64u << 20)
/* Rounds of InputRequiredResult one tools/call may take (the SDKs' default cap is 10). */
#define MCP__CLIENT_MAX_INPUT_ROUNDS 10
/* Garbage lines logged per spawn before the rest are only dropped. */
#define MCP__CLIENT_MAX_GARBAGE_LOGS 10

struct mcp_client_call {
    mcp_client_t *c;
    int64_t id;
    char *method;
    cJSON *params; /* owned until sent */
    unsigned timeout_ms;
    uint64_t created_ms;
    uv_timer_t *timer;
    bool linked, sent, internal, settling;
    bool hand_inputs; /* an InputRequiredResult goes to cb (mcp_client_call_tool_round) */
    /* 2026-07-28 tools/call: the params as first asked (without _meta), what the server's
     * InputRequiredResult asked answered so far and its requestState, for the next round. */
    cJSON *first_params;
    cJSON *responses;
    char *request_state;
    unsigned rounds;   /* rounds sent after the first */
    unsigned awaiting; /* input requests the owner has not answered yet */
    unsigned round;    /* serial of the current round's input requests (c->input_rounds) */
    mcp_client_call_cb cb;
    mcp_client_progress_cb progress;
    void *data;
    mcp_client_call_t *prev, *next;
};

struct mcp_client_peer_req {
    mcp_client_t *c; /* NULL once detached */
    unsigned gen;
    /* An input request of a 2026-07-28 InputRequiredResult: answered into this call's next
     * round (under key), never on the wire. NULL for a request the server sent us, and once
     * the call ended. */
    mcp_client_call_t *call;
    char *key;
    unsigned round;
    bool dispatched;
    cJSON *id; /* NULL for an input request */
    char *method;
    cJSON *params;
    bool cancelled;
    mcp_client_peer_req_t *prev, *next;
};

typedef enum mcp__client_deferred {
    MCP__DEFER_NONE = 0,
    MCP__DEFER_SPAWN,
    MCP__DEFER_STOPPED,
} mcp__client_deferred_t;

struct mcp_client {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    mcp_client_hooks_t hooks;
    mcp_client_opts_t opts;
    char *name;
    mcp_downstream_kind_t kind;
    char *command, *url, *cwd;
    bool legacy_sse;     /* "type": "sse": the old two-endpoint transport, not spoken yet */
    char **argv, **envp; /* NULL-terminated, expanded */

    mcp_client_state_t state;
    bool modern; /* this start speaks 2026-07-28 (initialize refused, server/discover answered) */
    bool listening; /* a subscriptions/listen for tool-list changes is open (stateless stdio) */
    unsigned input_rounds; /* serials of InputRequiredResult rounds */
    char *reason;
    bool ever_ready; /* this start cycle reached READY: later failures restart */
    bool stopping, free_pending, listing, relist;
    unsigned attempts, spawns, gen, depth, garbage_logged;
    bool utf8_warned;       /* ill-formed UTF-8 was logged once (it may come in every message) */
    mcp__proc_t *proc;      /* stdio: the running child */
    mcp__http_conn_t *http; /* http: the current session */
    mcp_downstream_kv_t *headers; /* http: expanded request headers */
    size_t n_headers;
    uv_timer_t *start_timer, *defer_timer, *healthy_timer;
    mcp__client_deferred_t deferred;

    int64_t next_id;
    mcp_client_call_t *calls;
    size_t n_user_calls;
    mcp_client_peer_req_t *peers;
    size_t n_peers;

    cJSON *tools;         /* the last complete listing */
    cJSON *listing_tools; /* the listing being assembled */
    char *last_cursor;
    size_t pages;
    cJSON *init_result;
    cJSON *roots;

    void (*stop_done)(mcp_client_t *c, void *data);
    void *stop_data;
};

/* client_proc.c */

/* Expands ${NAME} from env (a NULL-terminated "K=V" array). Unset names expand to "" with a
 * warning naming the server. Returns a malloc'd string or NULL (ENOMEM, or longer than
 * PTC_CAP_CLIENT_EXPANDED: *too_long set). */
char *mcp__client_expand(const char *in, char *const *env, const char *server,
                         const mcp_logger_t *lg, bool *too_long);
/* Value of NAME in env, or NULL. */
const char *mcp__client_env_get(char *const *env, const char *name);
/* Looks `command` up in the PATH of envp (when it has no '/'). Returns a malloc'd path, or
 * NULL with why[] filled. Blocking stat calls: a handful, at spawn time. */
char *mcp__client_which(const char *command, char *const *envp, char *why, size_t why_size);

/* Spawns the child; on error returns < 0 (a uv error) and frees everything (asynchronously). */
int mcp__proc_spawn(mcp_client_t *c, const char *file, char **argv, char **envp, const char *cwd,
                    unsigned gen, size_t max_message, size_t max_stderr_line, unsigned grace_ms,
                    mcp__proc_t **out);
/* Writes one message and a newline. Borrows msg. */
int mcp__proc_send(mcp__proc_t *p, const cJSON *msg);
/* Stops the child: close stdin, then SIGTERM and SIGKILL grace_ms apart unless it exits first
 * (hard: SIGKILL at once). detach: no more client callbacks, and the proc frees itself; else
 * the client still hears the exit. */
void mcp__proc_stop(mcp__proc_t *p, bool detach, bool hard);
/* Describes how the child ended ("exited with status 1; last stderr: ..."). */
void mcp__proc_describe_exit(const mcp__proc_t *p, char *buf, size_t size);

/* client_http.c: Streamable HTTP, one POST per message (no GET stream yet). */
int mcp__http_open(mcp_client_t *c, unsigned gen, mcp__http_conn_t **out);
/* POSTs one message (borrowed); answers come back through mcp__client_on_line. */
int mcp__http_send(mcp__http_conn_t *h, const cJSON *msg);
void mcp__http_set_protocol(mcp__http_conn_t *h, const char *version);
/* The call with request id `id` ended here (timeout, cancel): stop waiting for its POST. */
void mcp__http_abandon(mcp__http_conn_t *h, double id);
unsigned mcp__http_gen(const mcp__http_conn_t *h);
/* Lets go of the session: POSTs in flight are cancelled, the session is DELETEd in the
 * background, and the connection frees itself. */
void mcp__http_close(mcp__http_conn_t *h);

/* Longest failure reason kept or composed. */
#define MCP__CLIENT_REASON_MAX 1024

/* client_session.c: the lifecycle, and what the transports report to their client. */
void mcp__client_on_exit(mcp_client_t *c, mcp__proc_t *p);
void mcp__client_enter(mcp_client_t *c);
/* Returns true when the client was freed. */
bool mcp__client_leave(mcp_client_t *c);
/* A free was asked for: the caller must not go on with the client's work. */
bool mcp__client_gone(const mcp_client_t *c);
/* The HTTP server is unreachable or forgot the session: like a child's exit. */
void mcp__client_on_http_failure(mcp_client_t *c, mcp__http_conn_t *h, const char *reason);
/* The handshake and first listing are done: READY, then the waiting calls go out. */
void mcp__client_become_ready(mcp_client_t *c);
/* The current start attempt failed: kill what runs and decide between restart and failure. */
void mcp__client_start_failure(mcp_client_t *c, const char *reason);

/* Subscribes to tool-list changes on a stateless stdio server that offers them (READY). */
void mcp__client_start_listen(mcp_client_t *c);

/* client_handshake.c: initialize, or server/discover for a 2026-07-28-only server. */
/* Starts the handshake on a freshly spawned or connected server (arms the start timeout). */
void mcp__client_send_initialize(mcp_client_t *c);
/* Adds the 2026-07-28 request envelope to params' _meta (protocol version, our capabilities and
 * identity; keys already there stay). MCP_OK, MCP_ENOMEM, or MCP_EINVAL for a non-object _meta. */
int mcp__client_add_envelope(const mcp_client_t *c, cJSON *params);

/* client_calls.c: calls, and the messages the server sends. */
void mcp__client_on_line(mcp_client_t *c, const char *line, size_t len, bool too_big);
/* A POST carrying request `id` ended without its answer: fails the call if still pending. */
void mcp__client_on_http_unanswered(mcp_client_t *c, double id, int err, const char *why);
typedef enum mcp__client_which_calls {
    MCP__CALLS_SENT_USER, /* answers that will never come */
    MCP__CALLS_WAITING,   /* not sent yet */
    MCP__CALLS_ALL_USER,  /* every user call */
    MCP__CALLS_INTERNAL,  /* handshake and listing requests */
} mcp__client_which_calls_t;
/* Fails a set of calls. They are unlinked first, so callbacks that start or cancel other calls
 * cannot disturb the walk; internal calls end silently. */
void mcp__client_fail_calls(mcp_client_t *c, mcp__client_which_calls_t which, int err,
                            const char *what);
/* Sends one message to the running server and frees it (NULL: MCP_ENOMEM). */
int mcp__client_send(mcp_client_t *c, cJSON *msg);
/* Creates and links a call; sends it now when the server is ready (or it is internal). Takes
 * params. Never calls cb. */
int mcp__client_start_call(mcp_client_t *c, const char *method, cJSON *params, unsigned timeout_ms,
                           bool internal, mcp_client_progress_cb progress, mcp_client_call_cb cb,
                           void *data, int64_t id, mcp_client_call_t **out);
/* Sends the calls that waited for the server, oldest first. */
void mcp__client_flush_waiting(mcp_client_t *c);
/* Ends a call with an error (its callback runs). */
void mcp__client_fail_call(mcp_client_call_t *call, int err, const char *message);
/* Sends the next round of a tools/call whose input requests are answered: a new id, the first
 * params plus inputResponses and requestState. */
int mcp__client_next_round(mcp_client_call_t *call);

/* client_listing.c: the tools listing. */
void mcp__client_start_listing(mcp_client_t *c);
/* notifications/tools/list_changed: list again now, or after the current listing. */
void mcp__client_on_list_changed(mcp_client_t *c);

/* client_peers.c: the requests the server sends us. */
/* Answers ping and roots/list; hands sampling and elicitation to the owner. */
void mcp__client_handle_request(mcp_client_t *c, const cJSON *msg);
/* The server died or the client stops: the owner hears of every pending request. */
void mcp__client_cancel_peers(mcp_client_t *c);
/* notifications/cancelled from the server for its request rid. */
void mcp__client_on_peer_cancelled(mcp_client_t *c, const cJSON *rid);
/* A tools/call answered with an InputRequiredResult (borrowed): roots are answered here,
 * sampling and elicitation go to the owner's peer_request hook as if the server had sent
 * them; when all are answered the next round goes out. Fails the call when one cannot be. */
void mcp__client_start_inputs(mcp_client_t *c, mcp_client_call_t *call, const cJSON *result);
/* The call ended: its input requests still with the owner are withdrawn (peer_cancelled). */
void mcp__client_drop_inputs(mcp_client_t *c, mcp_client_call_t *call);

#endif
