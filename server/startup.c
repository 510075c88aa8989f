/* startup.c - ready at first contact (--startup-wait): one-shot clients list tools, search or
 * run code right after initialize, before the downstream servers have answered. Those first
 * calls are parked here, never blocking the loop, and released once every configured server
 * has given its first listing (or failed) and what is known is indexed (and, for a run that
 * uses the tools package, packaged), or when the wait is over. The gate opens once for good: a
 * server that restarts later makes no call wait again. */
#include "tools.h"

#include <stdlib.h>
#include <string.h>

/* How often parked calls look at the servers and the index: while anything is parked only,
 * and at most --startup-wait long (the servers' and the index's events come from several
 * modules; a short look is simpler than a callback from each, and costs nothing after). */
#define STARTUP_POLL_MS 25

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
    bool timer_on;
    uv_timer_t *timer; /* freed by its close callback */
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
    if (st->open && !st->open_package &&
        (over || st->bundle == NULL ||
         ptc_downstream_packaged(st->downstream, ptc_pybundle_cache_modules(st->bundle))))
        st->open_package = true;
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

static void on_poll(uv_timer_t *t)
{
    release_ready(t->data);
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
    if (st->parked == NULL && st->timer_on) {
        uv_timer_stop(st->timer);
        st->timer_on = false;
    }
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
    if (!st->timer_on) {
        uv_timer_start(st->timer, on_poll, STARTUP_POLL_MS, STARTUP_POLL_MS);
        st->timer_on = true;
    }
    return true;
}

size_t ptc_startup_still_starting(const ptc_startup_t *st, char *buf, size_t size)
{
    if (size > 0) buf[0] = '\0';
    if (st == NULL) return 0;
    char names[600];
    size_t n = ptc_downstream_starting(st->downstream, names, sizeof names);
    if (n == 0) return 0;
    int k = snprintf(buf, size,
                     "Still starting after --startup-wait (%.0f s): %s. %s tools are not known "
                     "yet; they come with notifications/tools/list_changed once listed.",
                     (double)st->wait_ms / 1000.0, names, n == 1 ? "Its" : "Their");
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
