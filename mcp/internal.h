/* internal.h - structures shared by the files of the mcp/ module; not part of the API. */
#ifndef PTC_MCP_INTERNAL_H
#define PTC_MCP_INTERNAL_H

#include "mcp.h"

typedef struct mcp__tool {
    char *name;
    cJSON *listing;            /* the Tool object as tools/list shows it (newest revision) */
    const cJSON *input_schema; /* borrowed from listing */
    mcp_tool_fn handler;
    void *data;
} mcp__tool_t;

struct mcp_server {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    char *name, *title, *version, *instructions;
    size_t page_size;
    unsigned progress_ms, grace_ms;
    mcp__tool_t **tools; /* sorted by name: the stable order of tools/list */
    size_t n_tools, cap_tools;
    mcp_session_t *sessions; /* every live session, for list_changed */
    bool hold_notify, changed_while_held;
};

/* A JSON-RPC batch whose answers are collected until its last request is done. */
typedef struct mcp__batch {
    cJSON *responses; /* array */
    size_t pending;   /* requests not answered yet */
} mcp__batch_t;

struct mcp_call {
    mcp_session_t *s; /* NULL once the session is gone: finishing then only frees */
    cJSON *id;
    cJSON *params; /* owned copy of the request's params; handler args point into it */
    const mcp__tool_t *tool_ref;
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
};

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

/* server.c */
const mcp__tool_t *mcp__server_find_tool(const mcp_server_t *srv, const char *name);
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

/* util.c */
uint64_t mcp__now_ms(void);
void mcp__close_free(uv_handle_t *h); /* uv_close that frees the handle's memory */
char *mcp__strdup(const char *s);     /* NULL in, NULL out */

#endif
