/* startup.c - ready at first contact (--startup-wait): one-shot clients list tools, search or
 * run code right after initialize, before the downstream servers have answered. Those first
 * calls wait at mcp/'s call gate, released once every configured server has given its first
 * listing (or failed) and what is known is indexed (and, for a run that uses the tools package,
 * packaged), or when the wait is over. With --expose-tools a tools/list waits too, for the
 * listings only: it needs no index. The gate opens once for good: a server that restarts later
 * makes no call wait again. --startup-wait 0 opens every gate at once. What opens each level is
 * the wiring's; the parking, the timer and the pokes are the gate's. */
#include "tools.h"

#include <stdlib.h>
#include <string.h>

/* The gate's levels, in the order they open. */
enum { LEVEL_LISTED, LEVEL_INDEXED, LEVEL_PACKAGED, LEVELS };

struct ptc_startup {
    mcp_call_gate_t *gate;
    uint64_t wait_ms;
    ptc_downstream_t *downstream;
    ptc_search_t *search;
    ptc_pybundle_cache_t *bundle;
};

static bool indexed(const ptc_startup_t *st)
{
    if (st->search == NULL) return true;
    reg_registry_stats_t rs;
    reg_registry_stats(ptc_search_registry(st->search), &rs);
    return rs.pending == 0;
}

/* Whether level may open now (the lower ones are open). */
static bool is_open(void *data, unsigned level)
{
    const ptc_startup_t *st = data;
    bool settled = ptc_downstream_settled(st->downstream);
    /* The first package must exist even with no downstream server: --tools-file's servers and
     * the package's own helpers (tools.search) are in it too. */
    return level == LEVEL_LISTED ? settled
           : level == LEVEL_INDEXED
               ? settled && indexed(st)
               : st->bundle == NULL ||
                     (ptc_pybundle_cache_root(st->bundle) != NULL &&
                      ptc_downstream_packaged(st->downstream,
                                              ptc_pybundle_cache_modules(st->bundle)));
}

int ptc_startup_new(uv_loop_t *loop, double wait_s, ptc_startup_t **out)
{
    *out = NULL;
    ptc_startup_t *st = calloc(1, sizeof *st);
    if (st == NULL) return MCP_ENOMEM;
    st->wait_ms = wait_s > 0 ? (uint64_t)(wait_s * 1000.0 + 0.5) : 0;
    const mcp_call_gate_opts_t go = {
        .wait_ms = st->wait_ms,
        .levels = LEVELS,
        .is_open = is_open,
        .data = st,
        .cancelled_text = "cancelled while waiting for the downstream servers",
        .closed_text = "the server shut down before the tools were known",
    };
    int rc = mcp_call_gate_new(loop, &go, &st->gate);
    if (rc < 0) {
        free(st);
        st = NULL;
    }
    *out = st;
    return rc;
}

void ptc_startup_attach(ptc_startup_t *st, ptc_downstream_t *d, ptc_search_t *search,
                        ptc_pybundle_cache_t *bundle)
{
    if (st == NULL) return;
    st->downstream = d;
    st->search = search;
    st->bundle = bundle;
}

void ptc_startup_poke(ptc_startup_t *st)
{
    if (st != NULL) mcp_call_gate_poke(st->gate);
}

void ptc_startup_gate_lists(ptc_startup_t *st, mcp_server_t *srv)
{
    if (st != NULL) mcp_call_gate_lists(st->gate, srv, LEVEL_LISTED);
}

bool ptc_startup_hold(ptc_startup_t *st, mcp_call_t *call, const cJSON *args, bool needs_package,
                      mcp_tool_fn fn, void *data)
{
    return st != NULL &&
           mcp_call_gate_hold(st->gate, call, args, needs_package ? LEVEL_PACKAGED : LEVEL_INDEXED,
                              fn, data);
}

size_t ptc_startup_still_starting(const ptc_startup_t *st, char *buf, size_t size)
{
    if (size > 0) buf[0] = '\0';
    if (st == NULL) return 0;
    char names[600];
    size_t n = ptc_downstream_starting(st->downstream, names, sizeof names);
    if (n == 0) return 0;
    char waited[64];
    if (st->wait_ms == 0)
        snprintf(waited, sizeof waited, "(--startup-wait 0: no wait)");
    else
        snprintf(waited, sizeof waited, "after --startup-wait (%.0f s)",
                 (double)st->wait_ms / 1000.0);
    int k = snprintf(buf, size,
                     "Still starting %s: %s. %s tools are not known yet; they come with "
                     "notifications/tools/list_changed once listed.",
                     waited, names, n == 1 ? "Its" : "Their");
    return k > 0 ? (size_t)k : 0;
}

void ptc_startup_free(ptc_startup_t *st)
{
    if (st == NULL) return;
    mcp_call_gate_free(st->gate);
    free(st);
}
