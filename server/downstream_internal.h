/* downstream_internal.h - what downstream.c (the servers, their requests to us) and
 * downstream_proxy.c (--expose-tools: our tools proxied to theirs) share. Not a public header. */
#ifndef PTC_DOWNSTREAM_INTERNAL_H
#define PTC_DOWNSTREAM_INTERNAL_H

#include "executor.h"
#include "tools.h"
/* One tool listed under its registry id and proxied to its server (--expose-tools). */
typedef struct exposed {
    struct ptc_downstream *d;
    char *id, *server, *tool;
} exposed_t;

#define PROXY_HANDLE_MAX 40 /* "proxy-", 32 hex digits (128 random bits), NUL */

/* One --expose-tools call in flight. A stateless client's call to a legacy server that asks
 * for sampling or elicitation is parked: its call is answered with an InputRequiredResult that
 * names the handle, and the downstream call (and the server's request) wait for the round that
 * brings the answer. */
typedef struct proxy_call {
    struct ptc_downstream *d;
    mcp_call_t *call; /* NULL while parked */
    mcp_client_call_t *downstream;
    ptc_downstream_owner_t *owner;
    bool rounds; /* a stateless client's call: the downstream's input requests go to it */
    /* Parked (a stateless client's round pending): */
    cJSON *args;        /* the call's, which its next round repeats */
    mcp_identity_t who; /* only its client may continue it */
    char handle[PROXY_HANDLE_MAX];
    ptc_downstream_held_t *held; /* the server's request the round answers, or NULL */
    uv_timer_t *timer;           /* drops it when no round comes in time */
    bool linked, dropping;
    /* The downstream call ended while parked: what the round is answered with. */
    bool ended;
    int err;
    cJSON *result;
    char *message;
    struct proxy_call *prev, *next;
} proxy_call_t;

struct ptc_downstream_owner {
    struct ptc_downstream *d;
    const mcp_client_t *client;
    const mcp_client_call_t *call; /* the downstream call it waits on */
    ptc_downstream_asker_t asker;
    struct ptc_downstream_owner *prev, *next;
};

struct ptc_downstream {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    ptc_search_t *search;
    mcp_server_t *srv;      /* for forwarded requests and --expose-tools */
    ptc_startup_t *startup; /* told when a server is ready or failed */
    mcp_downstream_config_t cfg;
    mcp_http_client_t *http;
    mcp_client_t **clients;
    size_t n_clients;
    mcp_client_hooks_t hooks;
    unsigned tool_timeout_ms;
    bool expose;
    exposed_t **exposed;
    size_t n_exposed, cap_exposed;
    struct ptc_downstream_held
        *forwarded;                 /* requests of downstream servers waiting on our client */
    ptc_downstream_owner_t *owners; /* our calls waiting on a downstream call, newest first */
    proxy_call_t *parked;           /* proxied calls waiting for a client's next round */
    size_t n_parked;
};

/* downstream.c */
mcp_client_t *ptc__downstream_find_client(const ptc_downstream_t *d, const char *server);

/* downstream_proxy.c */
void ptc__downstream_expose_server(ptc_downstream_t *d, const char *server);
void ptc__downstream_exposed_free(exposed_t *e);
void ptc__downstream_drop_parked(ptc_downstream_t *d);

#endif
