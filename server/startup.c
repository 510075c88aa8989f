/* startup.c - ready at first contact (--startup-wait): one-shot clients list tools, search or
 * run code right after initialize, before the downstream servers have answered. Those first
 * calls are parked here, never blocking the loop, and released once every configured server
 * has given its first listing (or failed) and what is known is indexed (and, for a run that
 * uses the tools package, packaged), or when the wait is over. With --expose-tools a
 * tools/list waits too (mcp's list gate), for the listings only: it needs no index. The gate opens
 * once for good: a server that restarts later makes no call wait again. --startup-wait 0 opens
 * every gate at once.
 *
 * Nothing polls: the modules whose progress opens a gate say so (ptc_startup_poke: a server's
 * state or listing changed, an indexing batch ended, the package was built), and one timer
 * fires when the wait is over. */
#include "tools.h"

#include <stdlib.h>
#include <string.h>

typedef struct parked {
    ptc_startup_t *st;
    mcp_call_t *call;
    cJSON *args;
    bool needs_package;
    mcp_tool_fn fn;
    void *data;
    struct parked *next;
} parked_t;

struct ptc_startup {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    uint64_t deadline; /* uv_now() when the wait ends */
    uint64_t wait_ms;
    ptc_downstream_t *downstream;
    ptc_search_t *search;
    ptc_pybundle_cache_t *bundle;
    bool open, open_package; /* the gates, once opened, stay open */
    bool open_lists;
    mcp_server_t *lists_srv; /* its tools/list is gated (--expose-tools), or NULL */
    bool lists_parked;       /* a tools/list waits in lists_srv */
    uv_timer_t *timer;       /* the end of the wait, or a poke's next turn; freed by its close cb */
    parked_t *parked;
};

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

int ptc_startup_new(uv_loop_t *loop, double wait_s, const mcp_logger_t *lg, ptc_startup_t **out)
{
    *out = NULL;
    ptc_startup_t *st = calloc(1, sizeof *st);
    uv_timer_t *t = calloc(1, sizeof *t);
    if (st == NULL || t == NULL || uv_timer_init(loop, t) < 0) {
        free(st);
        free(t);
        return MCP_ENOMEM;
    }
    st->loop = loop;
    st->lg = lg;
    st->wait_ms = wait_s > 0 ? (uint64_t)(wait_s * 1000.0 + 0.5) : 0;
    st->deadline = uv_now(loop) + st->wait_ms;
    st->timer = t;
    t->data = st;
    *out = st;
    return MCP_OK;
}

void ptc_startup_attach(ptc_startup_t *st, ptc_downstream_t *d, ptc_search_t *search,
                        ptc_pybundle_cache_t *bundle)
{
    if (st == NULL) return;
    st->downstream = d;
    st->search = search;
    st->bundle = bundle;
}

static bool indexed(const ptc_startup_t *st)
{
    if (st->search == NULL) return true;
    reg_registry_stats_t rs;
    reg_registry_stats(ptc_search_registry(st->search), &rs);
    return rs.pending == 0;
}

/* Opens the gates whose conditions hold now (or all of them once the wait is over). */
static void update(ptc_startup_t *st)
{
    bool over = uv_now(st->loop) >= st->deadline;
    if (!st->open && (over || (ptc_downstream_settled(st->downstream) && indexed(st))))
        st->open = true;
    /* The first package must exist even with no downstream server: --tools-file's servers and
     * the package's own helpers (tools.search) are in it too. */
    if (st->open && !st->open_package &&
        (over || st->bundle == NULL ||
         (ptc_pybundle_cache_root(st->bundle) != NULL &&
          ptc_downstream_packaged(st->downstream, ptc_pybundle_cache_modules(st->bundle)))))
        st->open_package = true;
}

/* Every configured server gave its first listing or failed (or the wait is over). */
static bool update_lists(ptc_startup_t *st)
{
    if (!st->open_lists &&
        (uv_now(st->loop) >= st->deadline || ptc_downstream_settled(st->downstream)))
        st->open_lists = true;
    return st->open_lists;
}

static bool may_go(const ptc_startup_t *st, bool needs_package)
{
    return needs_package ? st->open_package : st->open;
}

static void unlink_parked(ptc_startup_t *st, parked_t *p)
{
    for (parked_t **pp = &st->parked; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

static void release_ready(ptc_startup_t *st);

static void on_timer(uv_timer_t *t)
{
    release_ready(t->data);
}

/* While anything is parked, the timer fires when the wait is over (a poke brings it forward). */
static void arm_deadline(ptc_startup_t *st)
{
    if (st->parked == NULL && !st->lists_parked) {
        uv_timer_stop(st->timer);
        return;
    }
    uint64_t now = uv_now(st->loop);
    uv_timer_start(st->timer, on_timer, st->deadline > now ? st->deadline - now : 0, 0);
}

static void release_ready(ptc_startup_t *st)
{
    update(st);
    for (;;) {
        parked_t *p = st->parked;
        while (p != NULL && !may_go(st, p->needs_package))
            p = p->next;
        if (p == NULL) break;
        unlink_parked(st, p);
        /* The handler runs as if the call had just come (and registers its own cancel). */
        mcp_call_on_cancel(p->call, NULL, NULL);
        p->fn(p->call, p->args, p->data);
        cJSON_Delete(p->args);
        free(p);
    }
    if (st->lists_parked && update_lists(st)) {
        st->lists_parked = false;
        mcp_server_release_lists(st->lists_srv);
    }
    arm_deadline(st);
}

void ptc_startup_poke(ptc_startup_t *st)
{
    /* From a fresh loop turn: the poker (a listing being stored, a batch being applied) is
     * not reentered by the calls it releases. */
    if (st != NULL && (st->parked != NULL || st->lists_parked))
        uv_timer_start(st->timer, on_timer, 0, 0);
}

/* mcp's list gate: true parks the tools/list until release_ready lets it go. */
static bool list_gate(void *data)
{
    ptc_startup_t *st = data;
    if (update_lists(st)) return false;
    st->lists_parked = true;
    arm_deadline(st);
    return true;
}

void ptc_startup_gate_lists(ptc_startup_t *st, mcp_server_t *srv)
{
    if (st == NULL) return;
    st->lists_srv = srv;
    mcp_server_set_list_gate(srv, list_gate, st);
}

static void parked_cancelled(mcp_call_t *call, void *data)
{
    parked_t *p = data;
    unlink_parked(p->st, p);
    cJSON_Delete(p->args);
    free(p);
    mcp_call_finish_text(call, true, "cancelled while waiting for the downstream servers");
}

bool ptc_startup_hold(ptc_startup_t *st, mcp_call_t *call, const cJSON *args, bool needs_package,
                      mcp_tool_fn fn, void *data)
{
    if (st == NULL) return false;
    update(st);
    if (may_go(st, needs_package)) return false;
    parked_t *p = calloc(1, sizeof *p);
    cJSON *copy = args ? cJSON_Duplicate(args, true) : cJSON_CreateObject();
    if (p == NULL || copy == NULL) {
        free(p);
        cJSON_Delete(copy);
        return false; /* out of memory: the call goes on at once rather than fail */
    }
    *p = (parked_t){.st = st,
                    .call = call,
                    .args = copy,
                    .needs_package = needs_package,
                    .fn = fn,
                    .data = data};
    p->next = st->parked;
    st->parked = p;
    mcp_call_on_cancel(call, parked_cancelled, p);
    arm_deadline(st);
    return true;
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
    while (st->parked != NULL) {
        parked_t *p = st->parked;
        st->parked = p->next;
        mcp_call_on_cancel(p->call, NULL, NULL);
        mcp_call_finish_text(p->call, true, "the server shut down before the tools were known");
        cJSON_Delete(p->args);
        free(p);
    }
    if (st->lists_srv != NULL) {
        /* The server outlives this: lists answer at once from now on, parked ones now. */
        mcp_server_set_list_gate(st->lists_srv, NULL, NULL);
        if (st->lists_parked) mcp_server_release_lists(st->lists_srv);
    }
    uv_timer_stop(st->timer);
    uv_close((uv_handle_t *)st->timer, timer_closed);
    free(st);
}

/* A word "tools" (not part of another name): an import of the package, tools.call, ... A run
 * that only mentions the word waits too, which costs at most the wait at start-up. */
bool ptc_startup_uses_tools(const char *code)
{
    static const char word[] = "tools";
    for (const char *p = strstr(code, word); p != NULL; p = strstr(p + 1, word)) {
        char before = p == code ? ' ' : p[-1], after = p[sizeof word - 1];
        bool ident_before = before == '_' || (before >= '0' && before <= '9') ||
                            (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z');
        bool ident_after = after == '_' || (after >= '0' && after <= '9') ||
                           (after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z');
        if (!ident_before && !ident_after) return true;
    }
    return false;
}
