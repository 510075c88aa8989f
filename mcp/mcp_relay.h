/* mcp_relay.h - part of mcp.h, the library's one public header: the relay (a server's downstream
 * clients, called for its own callers). Include mcp.h, never this file: it is read at its place
 * inside mcp.h (the declarations above it there are in scope), and it is a file of its own only to
 * keep each file short. */
#ifndef PTC_MCP_RELAY_H
#define PTC_MCP_RELAY_H
#ifndef PTC_MCP_H
#error "include mcp.h, not mcp_relay.h"
#endif

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

#endif /* PTC_MCP_RELAY_H */
