/* route.c - the router of a run's bridge (ptc_bridge_router_*, ptc_bridge_host_open): where a
 * tool call or a search from sandboxed code goes. A call to a tool no configured server serves
 * is refused saying why (the user's own helpers run in the sandbox; a tool only described by
 * --tools-file has nobody to call); with --confirm-writes a call to a tool not annotated
 * readOnlyHint first asks the user (an elicitation the wiring sends) and goes on only on an
 * explicit approval; the others go to the wiring's call. The wiring does the MCP part through
 * ptc_bridge_routes_t; this file keeps the state of each call and every cancel path. */
#include "host_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ROUTE_MSG_MAX     600
#define ROUTE_ARGS_SHOWN  900 /* bytes of the arguments quoted in a confirmation */
#define ROUTE_CONFIRM_MAX (ROUTE_ARGS_SHOWN + 300)

struct ptc_bridge_router {
    const ptc_bridge_routes_t *routes;
    void *data;
    bool confirm_writes;
};

struct ptc_bridge_route_op {
    ptc_bridge_router_t *r;
    ptc_bridge_route_t kind;
    ptc_bridge_done_cb done;
    void *done_data;
    void *handle;    /* the wiring's work in flight (NULL: none to stop) */
    bool cancelling; /* a completion reported now is not passed on */
    char *server, *tool, *tool_id;
    cJSON *args;
    unsigned timeout_ms;
};

int ptc_bridge_router_new(const ptc_bridge_routes_t *routes, void *data, bool confirm_writes,
                          ptc_bridge_router_t **out)
{
    *out = NULL;
    if (routes == NULL || routes->find_tool == NULL || routes->served == NULL ||
        routes->call == NULL || routes->search == NULL || routes->cancel == NULL ||
        (confirm_writes && routes->confirm == NULL))
        return PTC_BRIDGE_EINVAL;
    ptc_bridge_router_t *r = calloc(1, sizeof *r);
    if (r == NULL) return PTC_BRIDGE_ENOMEM;
    r->routes = routes;
    r->data = data;
    r->confirm_writes = confirm_writes;
    *out = r;
    return 0;
}

void ptc_bridge_router_free(ptc_bridge_router_t *r)
{
    free(r);
}

ptc_bridge_route_t ptc_bridge_route_kind(const ptc_bridge_route_op_t *op)
{
    return op->kind;
}

static ptc_bridge_route_op_t *op_new(ptc_bridge_router_t *r, ptc_bridge_route_t kind,
                                     ptc_bridge_done_cb done, void *done_data)
{
    ptc_bridge_route_op_t *op = calloc(1, sizeof *op);
    if (op != NULL)
        *op = (ptc_bridge_route_op_t){.r = r, .kind = kind, .done = done, .done_data = done_data};
    return op;
}

/* NULL allowed. */
static void op_free(ptc_bridge_route_op_t *op)
{
    if (op != NULL) {
        free(op->server);
        free(op->tool);
        free(op->tool_id);
        cJSON_Delete(op->args);
    }
    free(op);
}

/* Answers the host and frees op. */
static void op_answer(ptc_bridge_route_op_t *op, int err, const cJSON *result, const char *message)
{
    op->done(op->done_data, err, result, message);
    op_free(op);
}

void ptc_bridge_route_done(ptc_bridge_route_op_t *op, int err, const cJSON *result,
                           const char *message)
{
    if (op->cancelling) return; /* the cancel frees op */
    op->handle = NULL;
    op_answer(op, err, result, message);
}

/* Hands the call to the wiring: true when it is in flight (no answer comes before the wiring's
 * call returns, ptc_bridge_routes_t); else answered and op freed. */
static bool op_send(ptc_bridge_route_op_t *op)
{
    ptc_bridge_router_t *r = op->r;
    char m[ROUTE_MSG_MAX] = "";
    op->kind = PTC_BRIDGE_ROUTE_CALL;
    int rc = r->routes->call(r->data, op, op->server, op->tool, op->args, op->timeout_ms,
                             &op->handle, m, sizeof m);
    if (rc < 0) op_answer(op, rc, NULL, m[0] != '\0' ? m : NULL);
    return rc >= 0;
}

bool ptc_bridge_confirm_approved(const cJSON *result)
{
    const cJSON *action = cJSON_GetObjectItemCaseSensitive(result, "action");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
    return cJSON_IsString(action) && strcmp(action->valuestring, "accept") == 0 &&
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(content, "approve"));
}

void ptc_bridge_route_confirmed(ptc_bridge_route_op_t *op, int err, const cJSON *result,
                                const char *message)
{
    ptc_bridge_router_t *r = op->r;
    if (op->cancelling) return; /* the cancel frees op */
    op->handle = NULL;
    /* The server may have gone while the user thought about it: then nothing is called. */
    if (err == 0 && ptc_bridge_confirm_approved(result) && r->routes->served(r->data, op->server)) {
        (void)op_send(op);
    } else {
        char m[ROUTE_MSG_MAX];
        snprintf(m, sizeof m, "%s__%s was not confirmed by the user (--confirm-writes)%s%s",
                 op->server, op->tool, err < 0 ? ": " : "", err < 0 && message ? message : "");
        op_answer(op, err < 0 ? err : MCP_EDENIED, NULL, m);
    }
}

cJSON *ptc_bridge_confirm_params(const char *tool_id, const cJSON *args)
{
    char *argtext = cJSON_PrintUnformatted(args);
    char msg[ROUTE_CONFIRM_MAX];
    snprintf(msg, sizeof msg, "Code running in execute_code wants to call %s with %.*s. Allow it?",
             tool_id, ROUTE_ARGS_SHOWN, argtext ? argtext : "{}");
    cJSON_free(argtext);
    cJSON *params = cJSON_CreateObject();
    cJSON *schema = cJSON_AddObjectToObject(params, "requestedSchema");
    cJSON *props = schema ? cJSON_AddObjectToObject(schema, "properties") : NULL;
    cJSON *approve = props ? cJSON_AddObjectToObject(props, "approve") : NULL;
    cJSON *req = schema ? cJSON_AddArrayToObject(schema, "required") : NULL;
    cJSON *name = cJSON_CreateString("approve");
    bool ok = approve != NULL && req != NULL && name != NULL &&
              cJSON_AddStringToObject(params, "message", msg) &&
              cJSON_AddStringToObject(schema, "type", "object") &&
              cJSON_AddStringToObject(approve, "type", "boolean") &&
              cJSON_AddStringToObject(approve, "title", "Allow this call") &&
              cJSON_AddItemToArray(req, name);
    if (!ok) { /* name is attached only by the last step */
        cJSON_Delete(name);
        cJSON_Delete(params);
        params = NULL;
    }
    return params;
}

/* --confirm-writes: asks the wiring to ask the user. True while op waits for the answer;
 * false when it was answered (a refusal the code reads: *rc 0) or freed unanswered (*rc < 0). */
static bool op_confirm(ptc_bridge_route_op_t *op, const reg_tool_t *tool, int *rc)
{
    ptc_bridge_router_t *r = op->r;
    char m[ROUTE_MSG_MAX] = "";
    cJSON *params = ptc_bridge_confirm_params(tool->id, op->args);
    op->kind = PTC_BRIDGE_ROUTE_CONFIRM;
    *rc = params == NULL ? PTC_BRIDGE_ENOMEM
                         : r->routes->confirm(r->data, op, tool, params, op->timeout_ms,
                                              &op->handle, m, sizeof m);
    bool waiting = *rc >= 0;
    if (*rc == MCP_EDENIED) { /* it cannot ask now: not a failure of the host */
        *rc = 0;
        op_answer(op, MCP_EDENIED, NULL, m);
    } else if (*rc < 0) {
        op_free(op);
    }
    return waiting;
}

/* A tool no configured server serves: refused, saying where it lives. */
static void refuse_unserved(const ptc_bridge_router_t *r, const reg_tool_t *tool,
                            ptc_bridge_done_cb done, void *done_data)
{
    char m[ROUTE_MSG_MAX];
    if (r->routes->is_custom != NULL && r->routes->is_custom(r->data, tool->server)) {
        const char *dot = strrchr(tool->name, '.');
        int mod_len = dot ? (int)(dot - tool->name) : (int)strlen(tool->name);
        snprintf(m, sizeof m,
                 "%s is one of your own helpers (--custom-tools): it runs inside the sandbox, not "
                 "through the bridge; call it as plain Python: import %.*s; %s(...)",
                 tool->id, mod_len, tool->name, tool->name);
    } else {
        snprintf(m, sizeof m, "%s is only described (--tools-file): no configured server serves it",
                 tool->id);
    }
    done(done_data, MCP_ENOTSUP, NULL, m);
}

static const reg_tool_t *route_find_tool(void *ops_data, const char *server, const char *tool)
{
    ptc_bridge_router_t *r = ops_data;
    return r->routes->find_tool(r->data, server, tool);
}

static int route_call(void *ops_data, const reg_tool_t *tool, const cJSON *args,
                      unsigned timeout_ms, ptc_bridge_done_cb done, void *done_data,
                      void **cancel_handle)
{
    ptc_bridge_router_t *r = ops_data;
    ptc_bridge_route_op_t *op = NULL;
    int rc = 0;
    *cancel_handle = NULL;
    if (!r->routes->served(r->data, tool->server)) {
        refuse_unserved(r, tool, done, done_data);
    } else if ((op = op_new(r, PTC_BRIDGE_ROUTE_CALL, done, done_data)) == NULL ||
               (op->server = strdup(tool->server)) == NULL ||
               (op->tool = strdup(tool->name)) == NULL ||
               (op->tool_id = strdup(tool->id)) == NULL ||
               (op->args = cJSON_Duplicate(args, true)) == NULL) {
        op_free(op);
        rc = PTC_BRIDGE_ENOMEM;
    } else {
        op->timeout_ms = timeout_ms;
        bool read_only =
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tool->annotations, "readOnlyHint"));
        /* The handle is given only while op lives: one answered at once is freed already. */
        if (r->confirm_writes && !read_only ? op_confirm(op, tool, &rc) : op_send(op))
            *cancel_handle = op;
    }
    return rc;
}

static int route_search(void *ops_data, const char *query, int top_k, const char *server,
                        const char *category, ptc_bridge_done_cb done, void *done_data,
                        void **cancel_handle)
{
    ptc_bridge_router_t *r = ops_data;
    ptc_bridge_route_op_t *op = op_new(r, PTC_BRIDGE_ROUTE_SEARCH, done, done_data);
    void *handle = NULL;
    *cancel_handle = NULL;
    int rc = op != NULL ? r->routes->search(r->data, op, query, top_k, server, category, &handle)
                        : PTC_BRIDGE_ENOMEM;
    if (rc < 0) {
        op_free(op);
    } else if (handle != NULL) { /* still running: op lives until its end or its cancel */
        op->handle = handle;
        *cancel_handle = op;
    }
    return rc;
}

static void route_cancel(void *ops_data, void *cancel_handle)
{
    ptc_bridge_router_t *r = ops_data;
    ptc_bridge_route_op_t *op = cancel_handle;
    if (op == NULL) return;
    /* The host ignores an answer during its cancel: a completion the wiring reports now is
     * dropped, and op goes here. */
    op->cancelling = true;
    r->routes->cancel(r->data, op, op->handle);
    op_free(op);
}

static void route_audit(void *ops_data, const cJSON *record)
{
    ptc_bridge_router_t *r = ops_data;
    if (r->routes->audit != NULL) r->routes->audit(r->data, record);
}

const ptc_bridge_ops_t ptc_bridge_router_ops = {
    .find_tool = route_find_tool,
    .call = route_call,
    .search = route_search,
    .cancel = route_cancel,
    .audit = route_audit,
};

int ptc_bridge_host_open(uv_loop_t *loop, const ptc_bridge_limits_t *lim,
                         const ptc_bridge_routes_t *routes, void *data, const mcp_logger_t *lg,
                         ptc_bridge_host_t **out, char *msg, size_t msg_size)
{
    *out = NULL;
    ptc_bridge_router_t *r = NULL;
    int sv[2] = {-1, -1};
    int rc = ptc_bridge_router_new(routes, data, lim != NULL && lim->confirm_writes, &r);
    if (rc < 0) {
        ptc__bh_msg(msg, msg_size, "bridge router: %s", ptc_bridge_strerror(rc));
    } else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        rc = -errno;
        ptc__bh_msg(msg, msg_size, "socketpair: %s", strerror(errno));
    } else {
        /* The host takes sv[0] (closed on failure too) and owns the router from here. */
        rc = ptc_bridge_host_new(loop, sv[0], lim, &ptc_bridge_router_ops, r, lg, out, msg,
                                 msg_size);
        if (rc == 0) {
            (*out)->router = r;
            r = NULL;
        }
    }
    if (rc < 0 && sv[1] >= 0) close(sv[1]);
    ptc_bridge_router_free(r);
    return rc < 0 ? rc : sv[1];
}
