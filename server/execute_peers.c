/* execute_peers.c - what the execute_code engine (execute/) asks the rest of the binary: the
 * start-up gate (startup.c), the registry's catalog and search (tool_search.c), the downstream
 * servers' clients and relay (downstream.c), the tools package's signatures (pybundle/). */
#include "tools.h"

static bool peer_hold(void *data, mcp_call_t *call, const cJSON *args, bool needs_package,
                      mcp_tool_fn fn, void *fn_data)
{
    const ptc_execute_wiring_t *w = data;
    return ptc_startup_hold(w->startup, call, args, needs_package, fn, fn_data);
}

static size_t peer_still_starting(void *data, char *buf, size_t size)
{
    const ptc_execute_wiring_t *w = data;
    return ptc_startup_still_starting(w->startup, buf, size);
}

static const reg_catalog_t *catalog(const ptc_execute_wiring_t *w)
{
    return w->search != NULL ? reg_registry_catalog(ptc_search_registry(w->search)) : NULL;
}

static const reg_tool_t *peer_find_tool(void *data, const char *server, const char *tool)
{
    const reg_catalog_t *c = catalog(data);
    return c != NULL ? reg_catalog_find_tool(c, server, tool) : NULL;
}

static mcp_client_t *peer_client(void *data, const char *server)
{
    const ptc_execute_wiring_t *w = data;
    return ptc_downstream_client(w->downstream, server);
}

static mcp_relay_t *peer_relay(void *data)
{
    const ptc_execute_wiring_t *w = data;
    return ptc_downstream_relay(w->downstream);
}

static int peer_search(void *data, const char *query, size_t top_k, const char *server,
                       const char *category, ptc_execute_search_done_cb done, void *done_data,
                       void **handle)
{
    const ptc_execute_wiring_t *w = data;
    return ptc_search_query(w->search, query, top_k, server, category, done, done_data, handle);
}

static void peer_search_cancel(void *data, void *handle)
{
    (void)data;
    ptc_search_query_cancel(handle);
}

static char *peer_signatures(void *data, const char *code, const cJSON *used)
{
    const reg_catalog_t *c = catalog(data);
    return c != NULL ? ptc_pybundle_signatures(c, code, used) : NULL;
}

static const ptc_execute_peers_t peers = {
    .hold = peer_hold,
    .still_starting = peer_still_starting,
    .find_tool = peer_find_tool,
    .client = peer_client,
    .relay = peer_relay,
    .search = peer_search,
    .search_cancel = peer_search_cancel,
    .signatures = peer_signatures,
};

void ptc_execute_wire(ptc_execute_t *ex, ptc_execute_wiring_t *w, ptc_pybundle_cache_t *bundle)
{
    ptc_execute_peers_t p = peers;
    p.data = w;
    ptc_execute_attach(ex, &p, bundle);
}
