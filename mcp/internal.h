/* internal.h - structures shared by the files of the mcp/ module; not part of the API. */
#ifndef PTC_MCP_INTERNAL_H
#define PTC_MCP_INTERNAL_H

#include "mcp.h"

/* A tool, resource, resource template or prompt: what its list shows, sorted by key. */
typedef struct mcp__entry {
    char *key;                 /* tool name, uri, uri template or prompt name */
    cJSON *listing;            /* the object its list method shows (newest protocol revision) */
    const cJSON *input_schema; /* tools: borrowed from listing */
    mcp_tool_fn handler;       /* tools */
    mcp_resource_read_fn read;
    mcp_prompt_get_fn get;
    mcp_prompt_get_round_fn get_round;
    mcp_complete_fn complete;
    void *data;
    enum mcp_task_support task_support; /* tools */
} mcp__entry_t;

/* Drops from a copied listing the fields a client of `protocol` does not know. */
typedef void (*mcp__trim_fn)(cJSON *listing, const char *protocol);

typedef struct mcp__table {
    mcp__entry_t **v; /* sorted by key (strcmp): the stable order of the list and its cursors */
    size_t n, cap;
    /* Zero means the defaults of resources and prompts: cursors up to the length an
     * MCP_MAX_URI_BYTES key gives, and only "title" trimmed for old protocol revisions. */
    size_t max_cursor; /* a longer cursor is rejected without decoding */
    mcp__trim_fn trim;
} mcp__table_t;

struct mcp_server {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    char *name, *title, *version, *instructions;
    size_t page_size;
    unsigned progress_ms, grace_ms;
    mcp__table_t tools;      /* keyed by name: the stable order of tools/list */
    mcp_session_t *sessions; /* every live session, for list_changed */
    bool hold_notify, changed_while_held;
    mcp__table_t resources, templates, prompts;
    bool declared_resources, declared_prompts, declared_completions;
    bool resources_changed_while_held, prompts_changed_while_held;
    uint64_t sessions_made;      /* numbers the sessions (mcp_session_serial) */
    unsigned char state_key[32]; /* MRTR: signs requestState (mrtr.c) */
    uint64_t next_sub;           /* numbers the subscriptions/listen streams */
    mcp_list_gate_fn list_gate;  /* tools/list waits while it says so (listgate.c) */
    void *list_gate_data;
    mcp_session_end_fn end_fn; /* mcp_server_on_session_end (identity.c) */
    void *end_data;
    struct mcp__tasks *tasks;          /* the task table (tasks.c), NULL until the first task */
    mcp_task_cancel_fn task_cancel_fn; /* mcp_server_on_task_cancel */
    void *task_cancel_data;
};

/* The request being dispatched: set by session.c for the length of one synchronous dispatch,
 * so that the handlers answer in the request's own protocol (a stateless 2026-07-28 request
 * brings its version and capabilities in _meta; a legacy one uses the session's). */
typedef struct mcp__req {
    bool modern;
    const char *method;
    char protocol[16];
    const cJSON *caps;     /* modern: the request's clientCapabilities (borrowed) */
    bool log_on;           /* modern: _meta asked for notifications/message */
    mcp_level_t log_level; /* modern: their threshold */
} mcp__req_t;

/* A JSON-RPC batch whose answers are collected until its last request is done. */
typedef struct mcp__batch {
    cJSON *responses; /* array */
    size_t pending;   /* requests not answered yet */
} mcp__batch_t;

struct mcp_call {
    mcp_session_t *s; /* NULL once the session is gone: finishing then only frees */
    cJSON *id;
    cJSON *params; /* owned copy of the request's params; handler args point into it */
    const mcp__entry_t *tool_ref;
    char *tool;
    cJSON *progress_token; /* NULL when the client asked for no progress */
    double last_progress;
    bool sent_progress;
    uint64_t last_progress_ms;
    bool have_pending;
    double pending_progress, pending_total;
    char *pending_message;
    uv_timer_t *progress_timer;
    bool cancelled;
    bool silenced; /* the client cancelled: it expects no response */
    void (*cancel_cb)(mcp_call_t *, void *);
    void *cancel_data;
    mcp__batch_t *batch;
    mcp_call_t *prev, *next;
    /* 2026-07-28: what the stateless request brought (a legacy call uses its session's). */
    bool modern;
    char protocol[16];
    cJSON *caps; /* modern: a copy of the request's clientCapabilities */
    bool log_on;
    mcp_level_t log_level;
    const cJSON *input_responses; /* MRTR: in params, or NULL */
    char *state;                  /* MRTR: the verified requestState, or NULL */
    mcp_identity_t who;           /* mcp_call_identity, fixed when the request came */
    mcp_server_t *srv;            /* the server, also once the session is gone */
    struct mcp__task *task;       /* tasks.c: the task this call runs as, or NULL */
};

struct mcp_outreq {
    mcp_session_t *s;
    char id[32];
    char *method;
    mcp_outreq_cb cb;
    void *data;
    cJSON *related; /* id of the tools/call it was made for, or NULL */
    uv_timer_t *timer;
    mcp_outreq_t *prev, *next;
};

/* A subscriptions/listen stream (2026-07-28): the notifications it asked for go out related
 * to its request id until the client cancels it or the session ends. */
typedef struct mcp__sub {
    cJSON *id; /* the listen request's id */
    char sub_id[32];
    bool tools, prompts, resources;
    cJSON *uris; /* resourceSubscriptions, or NULL */
    /* The tasks extension's taskIds it was granted (the caller's own tasks), or NULL, and
     * the identity of the request that opened it. */
    cJSON *task_ids;
    mcp_identity_t who;
    struct mcp__sub *prev, *next;
} mcp__sub_t;

#define MCP__CRED_BYTES 32 /* SHA-256 */

struct mcp_session {
    mcp_server_t *srv;
    const mcp_transport_ops_t *ops;
    mcp_send_related_fn send_related; /* NULL: ops->send */
    void *tdata;
    char protocol[16]; /* "" before initialize */
    cJSON *client_caps;
    cJSON *client_info;
    mcp_level_t log_level;
    mcp_call_t *calls;
    mcp_outreq_t *outreqs;
    uint64_t next_outreq;
    mcp__batch_t *cur_batch; /* set while a batch is being dispatched */
    bool shutting_down;
    mcp_session_idle_cb idle_cb;
    void *idle_data;
    uv_timer_t *grace_timer;
    mcp_session_t *prev, *next;
    cJSON *subscriptions; /* array of URI strings from resources/subscribe, or NULL */
    uint64_t serial;      /* mcp_session_serial */
    bool stateless;       /* every request is a 2026-07-28 one (mcp_session_set_stateless) */
    mcp__req_t *cur;      /* the request being dispatched, or NULL */
    mcp__sub_t *subs;     /* open subscriptions/listen streams */
    /* While a message is dispatched: the NULs its tools/call arguments held (nulscan.c) and
     * the batch member being handled (0 outside a batch). */
    struct mcp__parked_list *parked_lists; /* tools/list held by the list gate */
    const struct mcp__nul_hit *rx_nul;
    size_t rx_nul_n;
    int rx_member;
    /* The credential the client authenticated with (identity.c), and whether the session's
     * end was told to the server's hook. */
    unsigned char cred[MCP__CRED_BYTES];
    bool has_cred;
    bool end_told;
};

/* identity.c */
/* The digest a credential (a bearer token's bytes) is known by: SHA-256. */
void mcp__credential_digest(const char *secret, size_t len, unsigned char out[MCP__CRED_BYTES]);
/* The client of s authenticated with the credential of digest (copied). */
void mcp__session_set_credential(mcp_session_t *s, const unsigned char digest[MCP__CRED_BYTES]);
/* The identity of the request being dispatched in s (a stateless one has no session part). */
void mcp__request_identity(const mcp_session_t *s, mcp_identity_t *out);
/* Tells the server's session-end hook, once, that s has ended (not for stateless ones). */
void mcp__session_tell_end(mcp_session_t *s);

/* listgate.c: answers tools/list now (with the request's context in s->cur), or parks it
 * while the server's list gate is closed; a parked one is answered by
 * mcp_server_release_lists, or at once when the session shuts down, and dropped when it is
 * freed. */
void mcp__tools_list(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *cursor);
void mcp__lists_release(mcp_session_t *s);
void mcp__lists_drop(mcp_session_t *s);
/* notifications/cancelled for a parked tools/list: it is dropped, never answered; false when
 * no parked list has that id. */
bool mcp__lists_cancel(mcp_session_t *s, const cJSON *id);

/* nulscan.c: the first \u0000 in a string under params.arguments.ARG of each message (each
 * batch member) of a raw JSON text. */
typedef struct mcp__nul_hit {
    int member;   /* batch member index, 0 outside a batch */
    long offset;  /* character offset of the NUL in its string */
    char arg[64]; /* the top-level argument it is in (cut to fit) */
} mcp__nul_hit_t;
size_t mcp__nul_scan(const char *json, size_t len, mcp__nul_hit_t *hits, size_t max);

/* session.c */
int mcp__session_send(mcp_session_t *s, cJSON *msg); /* takes msg */
/* Sends msg (taken) as belonging to the client request whose id is related (borrowed; NULL:
 * none). A response (or batch of responses) always belongs to its own id. */
int mcp__session_send_related(mcp_session_t *s, cJSON *msg, const cJSON *related);
/* Tells a routing transport that request id ended without an answer (the client cancelled). */
void mcp__session_end_silent(mcp_session_t *s, const cJSON *id);
void mcp__session_log(mcp_session_t *s, const cJSON *related, mcp_level_t level, const char *logger,
                      cJSON *data);
/* Sends a response, or adds it to the batch it belongs to. Takes msg. */
void mcp__session_answer(mcp_session_t *s, mcp__batch_t *batch, cJSON *msg);
void mcp__session_check_idle(mcp_session_t *s);
void mcp__batch_done_one(mcp_session_t *s, mcp__batch_t *batch);
/* The protocol revision of the request being dispatched (else the session's; "" before
 * initialize), and whether it is a stateless one. */
const char *mcp__session_proto(const mcp_session_t *s);
bool mcp__session_modern(const mcp_session_t *s);
/* Methods both eras share: tools/list, tools/call, resources, prompts, completion. */
void mcp__session_dispatch(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                           const cJSON *params);
cJSON *mcp__server_capabilities(const mcp_server_t *srv);
/* Sends a notifications/message for request `related` without the session's level check. */
void mcp__session_log_send(mcp_session_t *s, const cJSON *related, mcp_level_t level,
                           const char *logger, cJSON *data);

/* listen.c: subscriptions/listen. kind is what changed; uri the resource for
 * MCP__CHANGED_RESOURCE. */
typedef enum mcp__changed {
    MCP__CHANGED_TOOLS,
    MCP__CHANGED_PROMPTS,
    MCP__CHANGED_RESOURCES,
    MCP__CHANGED_RESOURCE,
} mcp__changed_t;
void mcp__listen_start(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const cJSON *params);
void mcp__listen_notify(mcp_server_t *srv, mcp__changed_t kind, const char *uri);
/* Whether an open subscription of owner's asked for the task task_id's changes. */
bool mcp__listen_wants_task(const mcp_server_t *srv, const char *task_id,
                            const mcp_identity_t *owner);
/* Sends notifications/tasks with the task's DetailedTask fields (borrowed) to every such
 * subscription. */
void mcp__listen_task_changed(mcp_server_t *srv, const char *task_id, const mcp_identity_t *owner,
                              const cJSON *task);
/* Ends the session's subscriptions: with their final result (a graceful end) or silently. */
void mcp__listen_end_all(mcp_session_t *s, bool answer);
/* The client cancelled request id: true if it was a subscription (now ended). */
bool mcp__listen_cancel(mcp_session_t *s, const cJSON *id);

/* mrtr.c: the requestState key, and a stateless call's inputResponses/requestState (read
 * before its handler runs; false with why set when they are malformed or the state fails
 * verification). */
int mcp__mrtr_key_init(unsigned char key[32]);
bool mcp__mrtr_read(mcp_call_t *c, char *why, size_t why_size);
/* The same for any request: params' inputResponses (borrowed into *responses) and
 * requestState (verified for `bind`, decoded into *state, malloc'd). */
bool mcp__mrtr_parse(const mcp_server_t *srv, const cJSON *params, const char *bind,
                     const cJSON **responses, char **state, char *why, size_t why_size);
/* The InputRequiredResult asking input_requests (taken) with state sealed for `bind`; NULL
 * with *missing set when caps lack a capability a request needs, or with *err set. */
cJSON *mcp__mrtr_result(const mcp_server_t *srv, const cJSON *caps, const char *bind,
                        cJSON *input_requests, const char *state, const char **err,
                        const char **missing);
/* call.c: answers the call (msg taken) and frees it. */
void mcp__call_complete(mcp_call_t *c, cJSON *msg);

/* tasks.c: the tasks extension. */
/* Answers tasks/get, tasks/update, tasks/cancel (and the removed tasks/result, tasks/list)
 * of a stateless request; false when method is not a tasks/ method. */
bool mcp__tasks_handle(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                       const cJSON *params);
/* A task call finished with msg (taken): the task keeps its outcome. */
void mcp__task_settle(mcp_call_t *c, cJSON *msg);
/* The -32021 error answering id for `what` needing client extension ext; NULL on ENOMEM. */
cJSON *mcp__missing_extension(const cJSON *id, const char *ext, const char *what);
/* True if capabilities caps (borrowed, may be NULL) list client extension ext. */
bool mcp__caps_have_extension(const cJSON *caps, const char *ext);
void mcp__tasks_free(mcp_server_t *srv);
/* True if task_id names a live task of who's (what subscriptions/listen may grant). */
bool mcp__task_owned(mcp_server_t *srv, const char *task_id, const mcp_identity_t *who);
/* call.c: a call for a further round of a task's tool, with params (taken) as its request's
 * (NULL on ENOMEM); mcp__call_round_run runs its handler, or finishes it with why it cannot. */
mcp_call_t *mcp__call_round_new(mcp_server_t *srv, const char *tool, cJSON *params,
                                const cJSON *caps, const char *protocol, const mcp_identity_t *who);
void mcp__call_round_run(mcp_call_t *c);
/* call.c: answers the call's request with msg (taken) and detaches the call from its session
 * without cancelling it (it goes on as a task). */
void mcp__call_answer_detach(mcp_call_t *c, cJSON *msg);

/* modern.c: 2026-07-28 stateless requests */
/* Validates the request's _meta and answers it (server/discover, or the shared methods). */
void mcp__modern_request(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                         const cJSON *params);
/* The -32021 MissingRequiredClientCapabilityError answering id, for `what` (a tool or prompt
 * name) needing `capability`; NULL on ENOMEM. */
cJSON *mcp__missing_capability(const cJSON *id, const char *capability, const char *what);
/* Adds resultType and, for the cacheable methods, ttlMs and cacheScope to a result message
 * (a response to `method`) that lacks them. */
void mcp__modern_decorate(cJSON *msg, const char *method);
/* The body value a 2026-07-28 request over HTTP repeats in its Mcp-Name header (SEP-2243: the
 * name of tools/call and prompts/get, the uri of resources/read), borrowed from params; NULL
 * when the method has none. */
const char *mcp__modern_name_of(const char *method, const cJSON *params);

/* server.c */
const mcp__entry_t *mcp__server_find_tool(const mcp_server_t *srv, const char *name);
/* Builds the tools/list result for a cursor; on a bad cursor returns NULL with *bad = true. */
cJSON *mcp__server_list_tools(const mcp_server_t *srv, const char *protocol, const char *cursor,
                              bool *bad);
void mcp__server_link_session(mcp_server_t *srv, mcp_session_t *s);
void mcp__server_unlink_session(mcp_server_t *srv, mcp_session_t *s);

/* call.c */
void mcp__call_start(mcp_session_t *s, mcp__batch_t *batch, const cJSON *id, const cJSON *params);
/* by_client: the client sent notifications/cancelled, so no response is sent. */
void mcp__call_cancel(mcp_call_t *call, bool by_client);
void mcp__call_detach(mcp_call_t *call);

/* outreq.c */
int mcp__session_request(mcp_session_t *s, const cJSON *related, const char *method, cJSON *params,
                         const char *need_capability, unsigned timeout_ms, mcp_outreq_cb cb,
                         void *data, mcp_outreq_t **out);
bool mcp__outreq_route(mcp_session_t *s, const cJSON *msg, mcp_msg_kind_t kind);
void mcp__outreq_fail_all(mcp_session_t *s, int err, const char *message);

/* server.c: the opaque "after:<key>" cursors of every list. encode returns a malloc'd string
 * or NULL; decode returns a malloc'd key or NULL for a malformed cursor (*bad set) or ENOMEM. */
char *mcp__cursor_encode(const char *key);
char *mcp__cursor_decode(const char *cursor, bool *bad);

/* listing.c: the tables of tools, resources, templates and prompts */
mcp__entry_t *mcp__table_find(const mcp__table_t *t, const char *key);
int mcp__table_insert(mcp__table_t *t, mcp__entry_t *e); /* takes e on MCP_OK only */
int mcp__table_remove(mcp__table_t *t, const char *key);
void mcp__table_free(mcp__table_t *t);
void mcp__entry_free(mcp__entry_t *e);
/* An entry keyed `key` whose listing holds name, and title and description when not NULL;
 * NULL on ENOMEM. */
mcp__entry_t *mcp__entry_new(const char *key, const char *name, const char *title,
                             const char *description);
/* The page after `cursor` as {<field>: [...], nextCursor?} as a client of `protocol` expects
 * it; NULL with *bad on a bad cursor. */
cJSON *mcp__table_page(const mcp__table_t *t, const char *field, const char *protocol,
                       const char *cursor, size_t page_size, bool *bad);
/* Capabilities and methods of resources/prompts/completion (features.c). */
int mcp__features_capabilities(const mcp_server_t *srv, cJSON *caps);
/* Answers method if it is a resources/, prompts/ or completion/complete method; else false. */
bool mcp__features_handle(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                          const cJSON *params);
void mcp__features_release(mcp_server_t *srv); /* notifications held back by hold */
void mcp__features_free(mcp_server_t *srv);
/* Sends a list_changed to every initialized session (or remembers it while held). */
void mcp__features_list_changed(mcp_server_t *srv, bool prompts);
/* resources.c, prompts.c, completion.c: the methods, called by mcp__features_handle once the
 * capability is known to be active; each answers through mcp__session_answer. */
bool mcp__template_match(const char *tmpl, const char *uri, cJSON *vars);
bool mcp__resources_active(const mcp_server_t *srv);
bool mcp__prompts_active(const mcp_server_t *srv);
bool mcp__completions_active(const mcp_server_t *srv);
void mcp__resources_handle(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                           const cJSON *params);
void mcp__prompts_handle(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                         const cJSON *params);
void mcp__completion_handle(mcp_session_t *s, mcp__batch_t *b, const cJSON *id,
                            const cJSON *params);
/* An error answer with a printf-style message (features.c). */
void mcp__answer_error(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, int code,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* util.c */
uint64_t mcp__now_ms(void);
/* The wall clock in ms since the epoch (0 when it cannot be read): what another process or a
 * client reads (timestamps, a requestState's expiry). */
uint64_t mcp__wall_ms(void);
void mcp__close_free(uv_handle_t *h); /* uv_close that frees the handle's memory */
char *mcp__strdup(const char *s);     /* NULL in, NULL out */

#endif
