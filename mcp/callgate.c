/* callgate.c - the call gate: tool calls (and, through the server's list gate, tools/list)
 * parked at first contact until the host says what they need is there, never blocking the loop.
 * The gate has levels that open in order and stay open; the host's is_open says whether the
 * next one may open now, and once the wait is over every level opens. Nothing polls: the host
 * pokes the gate when something it waits for changed, and one timer fires when the wait ends. */
#include "mcp.h"

#include <stdlib.h>
#include <string.h>

typedef struct parked {
    mcp_call_gate_t *g;
    mcp_call_t *call;
    cJSON *args;
    unsigned level;
    mcp_tool_fn fn;
    void *data;
    struct parked *next;
} parked_t;

struct mcp_call_gate {
    uv_loop_t *loop;
    mcp_call_gate_opts_t o;
    char *cancelled_text, *closed_text; /* copies of o's */
    uint64_t deadline;                  /* uv_now() when the wait ends */
    unsigned opened;                    /* levels below this are open for good */
    mcp_server_t *lists_srv;            /* its tools/list is gated, or NULL */
    unsigned lists_level;
    bool lists_parked; /* a tools/list waits in lists_srv */
    uv_timer_t *timer; /* the end of the wait, or a poke's next turn; freed by its close cb */
    parked_t *parked;
};

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

static void parked_free(parked_t *p)
{
    cJSON_Delete(p->args);
    free(p);
}

void mcp_call_gate_free(mcp_call_gate_t *g)
{
    if (g == NULL) return;
    while (g->parked != NULL) {
        parked_t *p = g->parked;
        g->parked = p->next;
        mcp_call_on_cancel(p->call, NULL, NULL);
        mcp_call_finish_text(p->call, true, "%s", g->closed_text);
        parked_free(p);
    }
    if (g->lists_srv != NULL) {
        /* The server outlives this: lists answer at once from now on, parked ones now. */
        mcp_server_set_list_gate(g->lists_srv, NULL, NULL);
        if (g->lists_parked) mcp_server_release_lists(g->lists_srv);
    }
    if (g->timer != NULL) {
        uv_timer_stop(g->timer);
        uv_close((uv_handle_t *)g->timer, timer_closed);
    }
    free(g->cancelled_text);
    free(g->closed_text);
    free(g);
}

int mcp_call_gate_new(uv_loop_t *loop, const mcp_call_gate_opts_t *opts, mcp_call_gate_t **out)
{
    *out = NULL;
    int rc = MCP_OK;
    mcp_call_gate_t *g = NULL;
    if (loop == NULL || opts == NULL || opts->is_open == NULL || opts->levels == 0 ||
        opts->cancelled_text == NULL || opts->closed_text == NULL)
        rc = MCP_EINVAL;
    if (rc == MCP_OK && (g = calloc(1, sizeof *g)) == NULL) rc = MCP_ENOMEM;
    if (rc == MCP_OK) {
        g->loop = loop;
        g->o = *opts;
        g->deadline = uv_now(loop) + opts->wait_ms;
        g->cancelled_text = strdup(opts->cancelled_text);
        g->closed_text = strdup(opts->closed_text);
        g->timer = calloc(1, sizeof *g->timer);
        if (g->cancelled_text == NULL || g->closed_text == NULL || g->timer == NULL) {
            rc = MCP_ENOMEM;
        } else if (uv_timer_init(loop, g->timer) < 0) {
            free(g->timer);
            g->timer = NULL;
            rc = MCP_ENOMEM;
        } else {
            g->timer->data = g;
        }
    }
    if (rc < 0) {
        mcp_call_gate_free(g);
        g = NULL;
    }
    *out = g;
    return rc;
}

bool mcp_call_gate_over(const mcp_call_gate_t *g)
{
    return g == NULL || uv_now(g->loop) >= g->deadline;
}

/* Opens the levels whose conditions hold now, in order (all of them once the wait is over). */
static void update(mcp_call_gate_t *g)
{
    bool over = mcp_call_gate_over(g);
    while (g->opened < g->o.levels && (over || g->o.is_open(g->o.data, g->opened)))
        g->opened++;
}

static void unlink_parked(mcp_call_gate_t *g, parked_t *p)
{
    for (parked_t **pp = &g->parked; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
}

static void release_ready(mcp_call_gate_t *g);

static void on_timer(uv_timer_t *t)
{
    release_ready(t->data);
}

/* While anything is parked, the timer fires when the wait is over (a poke brings it forward). */
static void arm_deadline(mcp_call_gate_t *g)
{
    if (g->parked == NULL && !g->lists_parked) {
        uv_timer_stop(g->timer);
        return;
    }
    uint64_t now = uv_now(g->loop);
    uv_timer_start(g->timer, on_timer, g->deadline > now ? g->deadline - now : 0, 0);
}

static void release_ready(mcp_call_gate_t *g)
{
    update(g);
    for (;;) {
        parked_t *p = g->parked;
        while (p != NULL && p->level >= g->opened)
            p = p->next;
        if (p == NULL) break;
        unlink_parked(g, p);
        /* The handler runs as if the call had just come (and registers its own cancel). */
        mcp_call_on_cancel(p->call, NULL, NULL);
        p->fn(p->call, p->args, p->data);
        parked_free(p);
    }
    if (g->lists_parked && g->lists_level < g->opened) {
        g->lists_parked = false;
        mcp_server_release_lists(g->lists_srv);
    }
    arm_deadline(g);
}

void mcp_call_gate_poke(mcp_call_gate_t *g)
{
    /* From a fresh loop turn: the poker (a listing being stored, a batch being applied) is
     * not reentered by the calls it releases. */
    if (g != NULL && (g->parked != NULL || g->lists_parked))
        uv_timer_start(g->timer, on_timer, 0, 0);
}

/* The server's list gate: true parks the tools/list until release_ready lets it go. */
static bool list_gate(void *data)
{
    mcp_call_gate_t *g = data;
    update(g);
    if (g->lists_level < g->opened) return false;
    g->lists_parked = true;
    arm_deadline(g);
    return true;
}

void mcp_call_gate_lists(mcp_call_gate_t *g, mcp_server_t *srv, unsigned level)
{
    if (g == NULL || srv == NULL) return;
    g->lists_srv = srv;
    g->lists_level = level;
    mcp_server_set_list_gate(srv, list_gate, g);
}

static void parked_cancelled(mcp_call_t *call, void *data)
{
    parked_t *p = data;
    unlink_parked(p->g, p);
    mcp_call_finish_text(call, true, "%s", p->g->cancelled_text);
    parked_free(p);
}

bool mcp_call_gate_hold(mcp_call_gate_t *g, mcp_call_t *call, const cJSON *args, unsigned level,
                        mcp_tool_fn fn, void *data)
{
    bool held = false;
    if (g != NULL) update(g);
    if (g != NULL && level < g->o.levels && level >= g->opened) {
        parked_t *p = calloc(1, sizeof *p);
        cJSON *copy = args ? cJSON_Duplicate(args, true) : cJSON_CreateObject();
        if (p == NULL || copy == NULL) {
            free(p);
            cJSON_Delete(copy); /* out of memory: the call goes on at once rather than fail */
        } else {
            *p = (parked_t){
                .g = g, .call = call, .args = copy, .level = level, .fn = fn, .data = data};
            p->next = g->parked;
            g->parked = p;
            mcp_call_on_cancel(call, parked_cancelled, p);
            arm_deadline(g);
            held = true;
        }
    }
    return held;
}
