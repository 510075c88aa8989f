/* relay_internal.h - what relay.c (the clients, their servers' requests routed to our callers)
 * and relay_proxy.c (mcp_relay_expose: downstream tools listed as ours and proxied) share; not
 * part of the API. */
#ifndef PTC_MCP_RELAY_INTERNAL_H
#define PTC_MCP_RELAY_INTERNAL_H

#include "internal.h"

/* One downstream tool listed on our server under the name the owner gave it (exposed). */
typedef struct mcp__exposed {
    mcp_relay_t *r;
    char *id, *server, *tool;
} mcp__exposed_t;

/* Tools exposed at once: every server's listing at the clients' default cap. */
#define MCP__RELAY_MAX_EXPOSED ((size_t)MCP_DOWNSTREAM_MAX_SERVERS * MCP_CLIENT_DEFAULT_MAX_TOOLS)

typedef struct mcp__proxy mcp__proxy_t; /* one proxied call in flight (relay_proxy.c) */

struct mcp_relay_owner {
    mcp_relay_t *r;
    const mcp_client_t *client;
    const mcp_client_call_t *call; /* the downstream call it waits on */
    mcp_relay_asker_t asker;
    struct mcp_relay_owner *prev, *next;
};

struct mcp_relay {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    mcp_relay_opts_t o;
    mcp_client_hooks_t owner_hooks; /* the owner's state_changed and tools_changed */
    mcp_client_hooks_t hooks;       /* what the clients are given: relay.c's, data the relay */
    mcp_client_t **clients;
    size_t n_clients;
    mcp_server_t *srv; /* where forwarded requests go when no call owns them, and exposed tools */
    bool expose;
    mcp__exposed_t **exposed;
    size_t n_exposed, cap_exposed;
    struct mcp_relay_held *forwarded; /* requests of downstream servers waiting on our client */
    mcp_relay_owner_t *owners;        /* our calls waiting on a downstream call, newest first */
    mcp__proxy_t *parked;             /* proxied calls waiting for a client's next round */
    size_t n_parked;
};

/* relay_proxy.c */
/* Replaces the exposed tools of `server` with what the owner's tools callback lists for it
 * (nothing unless mcp_relay_expose was called). */
void mcp__relay_expose_server(mcp_relay_t *r, const char *server);
/* Drops every exposed tool's record (not the server's listing) and every parked call. */
void mcp__relay_proxy_free(mcp_relay_t *r);
/* Ends the parked calls (no round could reach them any more). */
void mcp__relay_drop_parked(mcp_relay_t *r);

#endif
