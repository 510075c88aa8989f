/* client_session.c - the MCP client to one downstream server: lifecycle (start, handshake,
 * tools listing, restart with backoff, stop), calls with ids, timeouts and cancellation, and
 * the requests the server sends us.
 *
 * Re-entrancy: hooks and call callbacks run user code that may call back into the client,
 * free it included. Every entry point brackets its work with enter()/leave(); a free asked for
 * inside is carried out by the outermost leave(), so the client's memory stays valid while any
 * of its frames is on the stack. */
#include "client_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PTC_VERSION
#define PTC_VERSION "0"
#endif

#define REASON_MAX 1024

static void really_free(mcp_client_t *c);

static void enter(mcp_client_t *c)
{
    c->depth++;
}

/* Returns true when the client was freed: the caller must not touch it any more. */
static bool leave(mcp_client_t *c)
{
    if (--c->depth == 0 && c->free_pending) {
        really_free(c);
        return true;
    }
    return false;
}

void mcp__client_enter(mcp_client_t *c)
{
    enter(c);
}

bool mcp__client_leave(mcp_client_t *c)
{
    return leave(c);
}

static bool gone(const mcp_client_t *c)
{
    return c->free_pending;
}

const char *mcp_client_state_name(mcp_client_state_t state)
{
    switch (state) {
    case MCP_CLIENT_STARTING:
        return "starting";
    case MCP_CLIENT_READY:
        return "ready";
    case MCP_CLIENT_FAILED:
        return "failed";
    case MCP_CLIENT_STOPPED:
        return "stopped";
    }
    return "unknown";
}

void mcp_client_opts_default(mcp_client_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->start_timeout_ms = MCP_CLIENT_DEFAULT_START_TIMEOUT_MS;
    o->call_wait_ms = MCP_CLIENT_DEFAULT_CALL_WAIT_MS;
    o->stop_grace_ms = MCP_CLIENT_DEFAULT_STOP_GRACE_MS;
    o->restart_max = MCP_CLIENT_DEFAULT_RESTART_MAX;
    o->restart_base_ms = MCP_CLIENT_DEFAULT_RESTART_BASE_MS;
    o->restart_cap_ms = MCP_CLIENT_DEFAULT_RESTART_CAP_MS;
    o->healthy_ms = MCP_CLIENT_DEFAULT_HEALTHY_MS;
    o->max_message_bytes = MCP_CLIENT_DEFAULT_MAX_MESSAGE_BYTES;
    o->max_stderr_line = MCP_CLIENT_DEFAULT_MAX_STDERR_LINE;
    o->max_calls = MCP_CLIENT_DEFAULT_MAX_CALLS;
    o->max_tools = MCP_CLIENT_DEFAULT_MAX_TOOLS;
}

/* --- state ----------------------------------------------------------------------------- */

static void set_state(mcp_client_t *c, mcp_client_state_t st, const char *reason)
{
    char *r = reason != NULL ? mcp__strdup(reason) : NULL;
    free(c->reason);
    c->reason = r;
    c->state = st;
    switch (st) {
    case MCP_CLIENT_READY:
        mcp_log(c->lg, MCP_LOG_INFO, "downstream server %s is ready (%d tools)", c->name,
                cJSON_GetArraySize(c->tools));
        break;
    case MCP_CLIENT_FAILED:
        mcp_log(c->lg, MCP_LOG_ERROR, "downstream server %s failed: %s", c->name,
                reason != NULL ? reason : "unknown reason");
        break;
    case MCP_CLIENT_STARTING:
        if (reason != NULL)
            mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s: %s", c->name, reason);
        break;
    case MCP_CLIENT_STOPPED:
        mcp_log(c->lg, MCP_LOG_INFO, "downstream server %s stopped", c->name);
        break;
    }
    if (c->hooks.state_changed != NULL) c->hooks.state_changed(c, st, c->reason, c->hooks.data);
}

/* --- calls ----------------------------------------------------------------------------- */

static void unlink_call(mcp_client_call_t *call)
{
    mcp_client_t *c = call->c;
    if (!call->linked) return;
    if (call->prev)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next) call->next->prev = call->prev;
    call->prev = call->next = NULL;
    call->linked = false;
    if (!call->internal) c->n_user_calls--;
}

static void free_call(mcp_client_call_t *call)
{
    if (call->timer != NULL) {
        uv_timer_stop(call->timer);
        call->timer->data = NULL;
        mcp__close_free((uv_handle_t *)call->timer);
    }
    free(call->method);
    cJSON_Delete(call->params);
    free(call);
}

/* Unlinks, calls back once (unless silent), frees. */
static void settle(mcp_client_call_t *call, int err, const cJSON *result, const cJSON *error,
                   const char *message, bool silent)
{
    unlink_call(call);
    call->settling = true;
    if (call->timer != NULL) uv_timer_stop(call->timer);
    /* Over HTTP the call's POST may still be open (a timeout or cancel): end it. When the
     * answer itself settles the call, its POST is no longer listed and nothing happens. */
    if (call->sent && call->c->http != NULL) mcp__http_abandon(call->c->http, (double)call->id);
    if (!silent && call->cb != NULL) call->cb(call->data, err, result, error, message);
    free_call(call);
}

typedef enum which_calls {
    CALLS_SENT_USER, /* answers that will never come */
    CALLS_WAITING,   /* not sent yet */
    CALLS_ALL_USER,  /* every user call */
    CALLS_INTERNAL,  /* handshake and listing requests */
} which_calls_t;

static bool call_matches(const mcp_client_call_t *call, which_calls_t which)
{
    switch (which) {
    case CALLS_SENT_USER:
        return !call->internal && call->sent;
    case CALLS_WAITING:
        return !call->internal && !call->sent;
    case CALLS_ALL_USER:
        return !call->internal;
    case CALLS_INTERNAL:
        return call->internal;
    }
    return false;
}

/* Fails a set of calls. They are unlinked first, so callbacks that start or cancel other calls
 * cannot disturb the walk; internal calls end silently. */
static void fail_calls(mcp_client_t *c, which_calls_t which, int err, const char *what)
{
    mcp_client_call_t *batch = NULL, *tail = NULL;
    mcp_client_call_t *call = c->calls;
    while (call != NULL) {
        mcp_client_call_t *next = call->next;
        if (call_matches(call, which)) {
            unlink_call(call);
            call->settling = true;
            if (tail)
                tail->next = call;
            else
                batch = call;
            tail = call;
        }
        call = next;
    }
    while (batch != NULL) {
        call = batch;
        batch = call->next;
        call->next = NULL;
        char msg[REASON_MAX + 256];
        snprintf(msg, sizeof msg, "%s on downstream server %s: %s", call->method, c->name, what);
        settle(call, err, NULL, NULL, msg, call->internal);
    }
}

static int send_msg(mcp_client_t *c, cJSON *msg)
{
    if (msg == NULL) return MCP_ENOMEM;
    int rc = c->proc != NULL   ? mcp__proc_send(c->proc, msg)
             : c->http != NULL ? mcp__http_send(c->http, msg)
                               : MCP_ECLOSED;
    cJSON_Delete(msg);
    return rc;
}

static void send_cancelled(mcp_client_t *c, int64_t id, const char *reason)
{
    cJSON *p = cJSON_CreateObject();
    if (p == NULL || cJSON_AddNumberToObject(p, "requestId", (double)id) == NULL ||
        (reason != NULL && cJSON_AddStringToObject(p, "reason", reason) == NULL)) {
        cJSON_Delete(p);
        return;
    }
    send_msg(c, mcp_jsonrpc_request(NULL, "notifications/cancelled", p));
}

static int send_call(mcp_client_t *c, mcp_client_call_t *call)
{
    cJSON *id = cJSON_CreateNumber((double)call->id);
    if (id == NULL) return MCP_ENOMEM;
    cJSON *params = call->params;
    call->params = NULL;
    cJSON *msg = mcp_jsonrpc_request(id, call->method, params);
    cJSON_Delete(id);
    int rc = send_msg(c, msg);
    if (rc == MCP_OK) call->sent = true;
    return rc;
}

static void on_call_timer(uv_timer_t *t)
{
    mcp_client_call_t *call = t->data;
    if (call == NULL) return;
    mcp_client_t *c = call->c;
    enter(c);
    char msg[REASON_MAX + 256];
    uint64_t waited = mcp__now_ms() - call->created_ms;
    if (call->sent) {
        send_cancelled(c, call->id, "timed out");
        snprintf(msg, sizeof msg, "downstream server %s did not answer %s within %u ms", c->name,
                 call->method, call->timeout_ms);
    } else if (call->timeout_ms != 0 && waited >= call->timeout_ms) {
        snprintf(msg, sizeof msg,
                 "%s timed out after %u ms while downstream server %s was still starting%s%s",
                 call->method, call->timeout_ms, c->name, c->reason != NULL ? ": " : "",
                 c->reason != NULL ? c->reason : "");
    } else {
        snprintf(msg, sizeof msg,
                 "downstream server %s did not become ready within %u ms (state %s%s%s)", c->name,
                 c->opts.call_wait_ms, mcp_client_state_name(c->state),
                 c->reason != NULL ? ": " : "", c->reason != NULL ? c->reason : "");
    }
    settle(call, MCP_ETIMEDOUT, NULL, NULL, msg, false);
    leave(c);
}

static void arm_call_timer(mcp_client_call_t *call)
{
    uint64_t waited = mcp__now_ms() - call->created_ms;
    uint64_t due = 0;
    if (call->timeout_ms != 0) due = call->timeout_ms > waited ? call->timeout_ms - waited : 1;
    if (!call->sent && !call->internal) {
        uint64_t w = call->c->opts.call_wait_ms;
        w = w > waited ? w - waited : 1;
        if (due == 0 || w < due) due = w;
    }
    if (due == 0)
        uv_timer_stop(call->timer);
    else
        uv_timer_start(call->timer, on_call_timer, due, 0);
}

/* Creates and links a call; sends it now when the server is ready (or it is internal). Takes
 * params. Never calls cb. */
static int start_call(mcp_client_t *c, const char *method, cJSON *params, unsigned timeout_ms,
                      bool internal, mcp_client_progress_cb progress, mcp_client_call_cb cb,
                      void *data, int64_t id, mcp_client_call_t **out)
{
    mcp_client_call_t *call = calloc(1, sizeof *call);
    if (call == NULL) {
        cJSON_Delete(params);
        return MCP_ENOMEM;
    }
    call->c = c;
    call->id = id;
    call->method = mcp__strdup(method);
    call->params = params;
    call->timeout_ms = timeout_ms;
    call->created_ms = mcp__now_ms();
    call->internal = internal;
    call->progress = progress;
    call->cb = cb;
    call->data = data;
    call->timer = malloc(sizeof *call->timer);
    if (call->method == NULL || call->timer == NULL) {
        free(call->timer);
        call->timer = NULL;
        free_call(call);
        return MCP_ENOMEM;
    }
    uv_timer_init(c->loop, call->timer);
    call->timer->data = call;
    if (internal || c->state == MCP_CLIENT_READY) {
        int rc = send_call(c, call);
        if (rc < 0) {
            free_call(call);
            return rc;
        }
    }
    call->next = c->calls;
    if (c->calls) c->calls->prev = call;
    c->calls = call;
    call->linked = true;
    if (!internal) c->n_user_calls++;
    arm_call_timer(call);
    if (out != NULL) *out = call;
    return MCP_OK;
}

/* Sends the calls that waited for the server, oldest first. */
static void flush_waiting(mcp_client_t *c)
{
    while (!gone(c) && c->state == MCP_CLIENT_READY) {
        mcp_client_call_t *oldest = NULL;
        for (mcp_client_call_t *call = c->calls; call != NULL; call = call->next)
            if (!call->internal && !call->sent) oldest = call; /* the list is newest first */
        if (oldest == NULL) return;
        int rc = send_call(c, oldest);
        if (rc < 0) {
            char msg[256];
            snprintf(msg, sizeof msg, "could not send %s to downstream server %s: %s",
                     oldest->method, c->name, mcp_strerror(rc));
            settle(oldest, rc, NULL, NULL, msg, false);
        } else {
            arm_call_timer(oldest);
        }
    }
}

static mcp_client_call_t *find_sent(mcp_client_t *c, double id)
{
    for (mcp_client_call_t *call = c->calls; call != NULL; call = call->next)
        if (call->sent && (double)call->id == id) return call;
    return NULL;
}

/* Our ids are integers; some servers echo them back as strings ("7"), which we accept. */
static mcp_client_call_t *find_by_id(mcp_client_t *c, const cJSON *id)
{
    if (cJSON_IsNumber(id)) return find_sent(c, id->valuedouble);
    if (!cJSON_IsString(id) || id->valuestring[0] == '\0' || strlen(id->valuestring) > 15)
        return NULL;
    for (const char *p = id->valuestring; *p != '\0'; p++)
        if (*p < '0' || *p > '9') return NULL;
    return find_sent(c, strtod(id->valuestring, NULL));
}

/* --- peer requests --------------------------------------------------------------------- */

static void unlink_peer(mcp_client_peer_req_t *r)
{
    mcp_client_t *c = r->c;
    if (c == NULL) return;
    if (r->prev)
        r->prev->next = r->next;
    else
        c->peers = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
    c->n_peers--;
}

/* The server died or the client stops: the owner hears it, and its answer is dropped. The
 * hook may answer (and so unlink) any request, hence the fresh walk each time. */
static void cancel_peers(mcp_client_t *c)
{
    while (!gone(c)) {
        mcp_client_peer_req_t *r = c->peers;
        while (r != NULL && r->cancelled)
            r = r->next;
        if (r == NULL) return;
        r->cancelled = true;
        if (c->hooks.peer_cancelled != NULL) c->hooks.peer_cancelled(c, r, c->hooks.data);
    }
}

static void answer_peer(mcp_client_peer_req_t *r, cJSON *msg)
{
    mcp_client_t *c = r->c;
    bool same = c != NULL && ((c->proc != NULL && c->proc->gen == r->gen) ||
                              (c->http != NULL && mcp__http_gen(c->http) == r->gen));
    if (same && !r->cancelled)
        send_msg(c, msg);
    else
        cJSON_Delete(msg);
    unlink_peer(r);
    cJSON_Delete(r->id);
    cJSON_Delete(r->params);
    free(r->method);
    free(r);
}

const char *mcp_client_peer_method(const mcp_client_peer_req_t *req)
{
    return req->method;
}

const cJSON *mcp_client_peer_params(const mcp_client_peer_req_t *req)
{
    return req->params;
}

bool mcp_client_peer_cancelled(const mcp_client_peer_req_t *req)
{
    return req->cancelled;
}

void mcp_client_peer_reply(mcp_client_peer_req_t *req, cJSON *result)
{
    if (result == NULL) {
        mcp_client_peer_fail(req, MCP_JSONRPC_INTERNAL_ERROR, "ptc-mcp could not build the answer");
        return;
    }
    answer_peer(req, mcp_jsonrpc_result(req->id, result));
}

void mcp_client_peer_fail(mcp_client_peer_req_t *req, int code, const char *message)
{
    answer_peer(req, mcp_jsonrpc_error(req->id, code, message, NULL));
}

static void reply_error(mcp_client_t *c, const cJSON *id, int code, const char *message)
{
    send_msg(c, mcp_jsonrpc_error(id, code, message, NULL));
}

static void handle_request(mcp_client_t *c, const cJSON *msg)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const char *method = cJSON_GetObjectItemCaseSensitive(msg, "method")->valuestring;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    if (strcmp(method, "ping") == 0) {
        send_msg(c, mcp_jsonrpc_result(id, cJSON_CreateObject()));
        return;
    }
    if (strcmp(method, "roots/list") == 0) {
        cJSON *res = cJSON_CreateObject();
        cJSON *roots = c->roots != NULL ? cJSON_Duplicate(c->roots, true) : cJSON_CreateArray();
        if (res == NULL || roots == NULL || !cJSON_AddItemToObject(res, "roots", roots)) {
            cJSON_Delete(res);
            cJSON_Delete(roots);
            reply_error(c, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
            return;
        }
        send_msg(c, mcp_jsonrpc_result(id, res));
        return;
    }
    bool sampling = strcmp(method, "sampling/createMessage") == 0;
    bool elicit = strcmp(method, "elicitation/create") == 0;
    if (!sampling && !elicit) {
        char m[300];
        snprintf(m, sizeof m, "Method not found: %.200s", method);
        reply_error(c, id, MCP_JSONRPC_METHOD_NOT_FOUND, m);
        return;
    }
    if ((sampling && !c->opts.can_sample) || (elicit && !c->opts.can_elicit) ||
        c->hooks.peer_request == NULL) {
        char m[300];
        snprintf(m, sizeof m,
                 "ptc-mcp cannot forward %s: it did not declare the capability (no connected "
                 "client offers it)",
                 method);
        reply_error(c, id, MCP_JSONRPC_METHOD_NOT_FOUND, m);
        return;
    }
    if (c->n_peers >= MCP__CLIENT_MAX_PEER_REQS) {
        reply_error(c, id, MCP_JSONRPC_INTERNAL_ERROR,
                    "too many requests from this server are waiting for an answer");
        return;
    }
    mcp_client_peer_req_t *r = calloc(1, sizeof *r);
    if (r == NULL || (r->id = cJSON_Duplicate(id, true)) == NULL ||
        (r->method = mcp__strdup(method)) == NULL ||
        (params != NULL && (r->params = cJSON_Duplicate(params, true)) == NULL)) {
        if (r != NULL) {
            cJSON_Delete(r->id);
            free(r->method);
            free(r);
        }
        reply_error(c, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    r->c = c;
    r->gen = c->gen;
    r->next = c->peers;
    if (c->peers) c->peers->prev = r;
    c->peers = r;
    c->n_peers++;
    c->hooks.peer_request(c, r, c->hooks.data);
}

/* --- tools listing --------------------------------------------------------------------- */

static void become_ready(mcp_client_t *c);
static void start_failure(mcp_client_t *c, const char *reason);
static void request_page(mcp_client_t *c, const char *cursor);

static void start_listing(mcp_client_t *c)
{
    c->listing = true;
    c->relist = false;
    c->pages = 0;
    free(c->last_cursor);
    c->last_cursor = NULL;
    cJSON_Delete(c->listing_tools);
    c->listing_tools = cJSON_CreateArray();
    if (c->listing_tools == NULL) {
        c->listing = false;
        if (c->state == MCP_CLIENT_STARTING) start_failure(c, "out of memory listing tools");
        return;
    }
    request_page(c, NULL);
}

static void finish_listing(mcp_client_t *c)
{
    c->listing = false;
    cJSON *fresh = c->listing_tools;
    c->listing_tools = NULL;
    if (c->state == MCP_CLIENT_STARTING) {
        /* After a crash the same tools usually come back: the owner need not re-index. */
        bool changed = !c->ever_ready || !cJSON_Compare(c->tools, fresh, true);
        cJSON_Delete(c->tools);
        c->tools = fresh;
        if (changed && c->hooks.tools_changed != NULL)
            c->hooks.tools_changed(c, c->tools, c->hooks.data);
        if (!gone(c)) become_ready(c);
        return;
    }
    if (cJSON_Compare(c->tools, fresh, true)) {
        cJSON_Delete(fresh);
    } else {
        cJSON_Delete(c->tools);
        c->tools = fresh;
        mcp_log(c->lg, MCP_LOG_INFO, "downstream server %s: tools changed (%d tools)", c->name,
                cJSON_GetArraySize(c->tools));
        if (c->hooks.tools_changed != NULL) c->hooks.tools_changed(c, c->tools, c->hooks.data);
    }
    if (!gone(c) && c->relist && c->state == MCP_CLIENT_READY) start_listing(c);
}

static void listing_failed(mcp_client_t *c, const char *why)
{
    c->listing = false;
    cJSON_Delete(c->listing_tools);
    c->listing_tools = NULL;
    char reason[REASON_MAX];
    snprintf(reason, sizeof reason, "tools/list failed: %s", why);
    if (c->state == MCP_CLIENT_STARTING) {
        start_failure(c, reason);
        return;
    }
    mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s: %s; keeping the %d tools listed before",
            c->name, reason, cJSON_GetArraySize(c->tools));
    if (c->relist && c->state == MCP_CLIENT_READY) start_listing(c);
}

static bool tool_ok(const cJSON *t)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
    return cJSON_IsObject(t) && cJSON_IsString(name) && name->valuestring[0] != '\0';
}

static void on_list_page(void *data, int err, const cJSON *result, const cJSON *error,
                         const char *message)
{
    mcp_client_t *c = data;
    (void)error;
    if (err < 0) {
        listing_failed(c, message);
        return;
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(result, "tools");
    if (!cJSON_IsArray(tools)) {
        listing_failed(c, "the answer has no \"tools\" array");
        return;
    }
    size_t skipped = 0, cut = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        if (!tool_ok(t)) {
            skipped++;
            continue;
        }
        if ((size_t)cJSON_GetArraySize(c->listing_tools) >= c->opts.max_tools) {
            cut++;
            continue;
        }
        cJSON *dup = cJSON_Duplicate(t, true);
        if (dup == NULL || !cJSON_AddItemToArray(c->listing_tools, dup)) {
            cJSON_Delete(dup);
            listing_failed(c, "out of memory");
            return;
        }
    }
    if (skipped > 0)
        mcp_log(c->lg, MCP_LOG_WARNING,
                "downstream server %s: skipped %zu tools without a string \"name\"", c->name,
                skipped);
    if (cut > 0)
        mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s: more than %zu tools; %zu dropped",
                c->name, c->opts.max_tools, cut);
    c->pages++;
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(result, "nextCursor");
    if (!cJSON_IsString(next) || next->valuestring[0] == '\0') {
        finish_listing(c);
        return;
    }
    if (c->pages >= MCP__CLIENT_MAX_LIST_PAGES ||
        (c->last_cursor != NULL && strcmp(c->last_cursor, next->valuestring) == 0)) {
        mcp_log(c->lg, MCP_LOG_WARNING,
                "downstream server %s: tools/list cursors do not end (%zu pages, cursor "
                "repeated or too many pages); using the tools listed so far",
                c->name, c->pages);
        finish_listing(c);
        return;
    }
    request_page(c, next->valuestring);
}

static void request_page(mcp_client_t *c, const char *cursor)
{
    cJSON *params = NULL;
    if (cursor != NULL) {
        char *keep = mcp__strdup(cursor);
        params = cJSON_CreateObject();
        if (keep == NULL || params == NULL ||
            cJSON_AddStringToObject(params, "cursor", cursor) == NULL) {
            free(keep);
            cJSON_Delete(params);
            listing_failed(c, "out of memory");
            return;
        }
        free(c->last_cursor);
        c->last_cursor = keep;
    }
    /* The start timeout bounds the first listing; later ones get their own. */
    unsigned timeout = c->state == MCP_CLIENT_READY ? c->opts.start_timeout_ms : 0;
    int rc = start_call(c, "tools/list", params, timeout, true, NULL, on_list_page, c, c->next_id++,
                        NULL);
    if (rc < 0) listing_failed(c, mcp_strerror(rc));
}

/* --- lifecycle ------------------------------------------------------------------------- */

static void on_healthy(uv_timer_t *t)
{
    mcp_client_t *c = t->data;
    if (c->attempts > 0)
        mcp_log(c->lg, MCP_LOG_DEBUG, "downstream server %s has been healthy; restart count reset",
                c->name);
    c->attempts = 0;
}

static void become_ready(mcp_client_t *c)
{
    uv_timer_stop(c->start_timer);
    c->ever_ready = true;
    if (c->opts.healthy_ms > 0) uv_timer_start(c->healthy_timer, on_healthy, c->opts.healthy_ms, 0);
    set_state(c, MCP_CLIENT_READY, NULL);
    if (gone(c) || c->state != MCP_CLIENT_READY) return;
    flush_waiting(c);
    if (!gone(c) && c->relist && !c->listing && c->state == MCP_CLIENT_READY) start_listing(c);
}

static void on_deferred(uv_timer_t *t);

static void defer(mcp_client_t *c, mcp__client_deferred_t what, uint64_t ms)
{
    c->deferred = what;
    uv_timer_start(c->defer_timer, on_deferred, ms, 0);
}

static void set_failed(mcp_client_t *c, const char *reason)
{
    set_state(c, MCP_CLIENT_FAILED, reason);
    if (gone(c)) return;
    fail_calls(c, CALLS_WAITING, MCP_ESTATE, c->reason != NULL ? c->reason : "failed");
}

/* The running server is gone (or never came up). Decides between a restart and giving up. */
static void after_failure(mcp_client_t *c, const char *reason)
{
    uv_timer_stop(c->start_timer);
    uv_timer_stop(c->healthy_timer);
    c->listing = false;
    cJSON_Delete(c->listing_tools);
    c->listing_tools = NULL;
    cJSON_Delete(c->init_result);
    c->init_result = NULL;
    fail_calls(c, CALLS_INTERNAL, 0, "");
    char what[REASON_MAX + 64];
    snprintf(what, sizeof what, "the server %s while the call was in flight", reason);
    fail_calls(c, CALLS_SENT_USER, MCP_ECLOSED, what);
    if (!gone(c)) cancel_peers(c);
    if (gone(c)) return;
    if (!c->ever_ready) {
        set_failed(c, reason);
        return;
    }
    c->attempts++;
    char msg[REASON_MAX + 128];
    if (c->attempts > c->opts.restart_max) {
        snprintf(msg, sizeof msg, "gave up after %u restarts; last failure: %s",
                 c->opts.restart_max, reason);
        set_failed(c, msg);
        return;
    }
    uint64_t delay = c->opts.restart_base_ms;
    for (unsigned i = 1; i < c->attempts && delay < c->opts.restart_cap_ms; i++)
        delay *= 2;
    if (delay > c->opts.restart_cap_ms) delay = c->opts.restart_cap_ms;
    snprintf(msg, sizeof msg, "%s; restarting in %llu ms (attempt %u of %u)", reason,
             (unsigned long long)delay, c->attempts, c->opts.restart_max);
    defer(c, MCP__DEFER_SPAWN, delay);
    set_state(c, MCP_CLIENT_STARTING, msg);
}

/* The current start attempt failed: kill what runs and decide. */
static void start_failure(mcp_client_t *c, const char *reason)
{
    if (c->proc != NULL) {
        mcp__proc_t *p = c->proc;
        c->proc = NULL;
        mcp__proc_stop(p, true, true);
    }
    if (c->http != NULL) {
        mcp__http_conn_t *h = c->http;
        c->http = NULL;
        mcp__http_close(h);
    }
    after_failure(c, reason);
}

static void on_start_timeout(uv_timer_t *t)
{
    mcp_client_t *c = t->data;
    enter(c);
    char reason[256];
    snprintf(reason, sizeof reason,
             "did not finish the handshake (initialize, tools/list) within %u ms; killed it",
             c->opts.start_timeout_ms);
    start_failure(c, reason);
    leave(c);
}

static void on_initialized(void *data, int err, const cJSON *result, const cJSON *error,
                           const char *message)
{
    mcp_client_t *c = data;
    (void)error;
    char reason[REASON_MAX];
    if (err < 0) {
        snprintf(reason, sizeof reason, "initialize failed: %s", message);
        start_failure(c, reason);
        return;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(result, "protocolVersion");
    if (!cJSON_IsString(ver)) {
        start_failure(c, "the initialize answer has no protocolVersion");
        return;
    }
    if (!mcp_protocol_supported(ver->valuestring)) {
        snprintf(reason, sizeof reason,
                 "the server speaks protocol version \"%.64s\", which ptc-mcp does not",
                 ver->valuestring);
        start_failure(c, reason);
        return;
    }
    if (c->http != NULL) mcp__http_set_protocol(c->http, ver->valuestring);
    cJSON_Delete(c->init_result);
    c->init_result = cJSON_Duplicate(result, true);
    if (c->init_result == NULL) {
        start_failure(c, "out of memory");
        return;
    }
    if (send_msg(c, mcp_jsonrpc_request(NULL, "notifications/initialized", NULL)) < 0) {
        start_failure(c, "could not write to the server's stdin");
        return;
    }
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(result, "capabilities");
    if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(caps, "tools"))) {
        start_listing(c);
        return;
    }
    cJSON_Delete(c->tools);
    c->tools = cJSON_CreateArray();
    if (c->tools == NULL) {
        start_failure(c, "out of memory");
        return;
    }
    if (c->hooks.tools_changed != NULL) c->hooks.tools_changed(c, c->tools, c->hooks.data);
    if (!gone(c)) become_ready(c);
}

static cJSON *initialize_params(const mcp_client_t *c)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *caps = cJSON_AddObjectToObject(p, "capabilities");
    cJSON *info = cJSON_AddObjectToObject(p, "clientInfo");
    bool ok = p != NULL && caps != NULL && info != NULL &&
              cJSON_AddStringToObject(p, "protocolVersion", MCP_PROTOCOL_LATEST) != NULL &&
              cJSON_AddStringToObject(info, "name", "ptc-mcp") != NULL &&
              cJSON_AddStringToObject(info, "version", PTC_VERSION) != NULL;
    if (ok && c->opts.has_roots) {
        cJSON *roots = cJSON_AddObjectToObject(caps, "roots");
        ok = roots != NULL && cJSON_AddBoolToObject(roots, "listChanged", true) != NULL;
    }
    if (ok && c->opts.can_sample) ok = cJSON_AddObjectToObject(caps, "sampling") != NULL;
    if (ok && c->opts.can_elicit) ok = cJSON_AddObjectToObject(caps, "elicitation") != NULL;
    if (!ok) {
        cJSON_Delete(p);
        return NULL;
    }
    return p;
}

static void send_initialize(mcp_client_t *c)
{
    if (c->opts.start_timeout_ms > 0)
        uv_timer_start(c->start_timer, on_start_timeout, c->opts.start_timeout_ms, 0);
    cJSON *params = initialize_params(c);
    int rc = params != NULL ? start_call(c, "initialize", params, 0, true, NULL, on_initialized, c,
                                         c->next_id++, NULL)
                            : MCP_ENOMEM;
    if (rc < 0) {
        char reason[256];
        snprintf(reason, sizeof reason, "could not send initialize: %s", mcp_strerror(rc));
        start_failure(c, reason);
    }
}

static void connect_http(mcp_client_t *c)
{
    if (c->legacy_sse) {
        set_failed(c, "the legacy SSE transport (\"type\": \"sse\") is not supported yet; point "
                      "\"url\" at the server's Streamable HTTP endpoint with \"type\": \"http\"");
        return;
    }
    if (c->opts.http == NULL) {
        set_failed(c, "http downstream servers need ptc-mcp's HTTP client, and none was set up");
        return;
    }
    c->gen++;
    c->garbage_logged = 0;
    int rc = mcp__http_open(c, c->gen, &c->http);
    if (rc < 0) {
        after_failure(c, mcp_strerror(rc));
        return;
    }
    c->spawns++;
    mcp_log(c->lg, MCP_LOG_INFO, "downstream server %s: connecting to %s", c->name, c->url);
    send_initialize(c);
}

static void spawn_now(mcp_client_t *c)
{
    char reason[REASON_MAX];
    if (c->kind == MCP_DOWNSTREAM_HTTP) {
        connect_http(c);
        return;
    }
    char *file = mcp__client_which(c->argv[0], c->envp, reason, sizeof reason);
    if (file == NULL) {
        after_failure(c, reason);
        return;
    }
    struct stat st;
    if (c->cwd != NULL && (stat(c->cwd, &st) != 0 || !S_ISDIR(st.st_mode))) {
        snprintf(reason, sizeof reason, "its \"cwd\" %.512s is not a folder", c->cwd);
        free(file);
        after_failure(c, reason);
        return;
    }
    c->gen++;
    c->garbage_logged = 0;
    int rc = mcp__proc_spawn(c, file, c->argv, c->envp, c->cwd, c->gen, c->opts.max_message_bytes,
                             c->opts.max_stderr_line, c->opts.stop_grace_ms, &c->proc);
    if (rc < 0) {
        snprintf(reason, sizeof reason, "cannot run %.512s: %s", file, uv_strerror(rc));
        free(file);
        after_failure(c, reason);
        return;
    }
    c->spawns++;
    mcp_log(c->lg, MCP_LOG_INFO, "downstream server %s: started %s (pid %d)", c->name, file,
            c->proc->pid);
    free(file);
    send_initialize(c);
}

static void finish_stop(mcp_client_t *c)
{
    c->stopping = false;
    void (*done)(mcp_client_t *, void *) = c->stop_done;
    void *data = c->stop_data;
    c->stop_done = NULL;
    set_state(c, MCP_CLIENT_STOPPED, NULL);
    if (!gone(c) && done != NULL) done(c, data);
}

static void on_deferred(uv_timer_t *t)
{
    mcp_client_t *c = t->data;
    mcp__client_deferred_t what = c->deferred;
    c->deferred = MCP__DEFER_NONE;
    enter(c);
    if (what == MCP__DEFER_SPAWN)
        spawn_now(c);
    else if (what == MCP__DEFER_STOPPED)
        finish_stop(c);
    leave(c);
}

void mcp__client_on_exit(mcp_client_t *c, mcp__proc_t *p)
{
    if (c->proc != p) return;
    enter(c);
    c->proc = NULL;
    char how[REASON_MAX];
    mcp__proc_describe_exit(p, how, sizeof how);
    if (c->stopping) {
        finish_stop(c);
    } else if (c->state == MCP_CLIENT_READY) {
        mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s %s", c->name, how);
        after_failure(c, how);
    } else {
        char reason[REASON_MAX + 64];
        snprintf(reason, sizeof reason, "%s before the handshake finished", how);
        after_failure(c, reason);
    }
    leave(c);
}

void mcp__client_on_http_failure(mcp_client_t *c, mcp__http_conn_t *h, const char *reason)
{
    if (c->http != h) return;
    enter(c);
    c->http = NULL;
    mcp__http_close(h);
    if (c->state == MCP_CLIENT_READY)
        mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s: %s", c->name, reason);
    after_failure(c, reason);
    leave(c);
}

void mcp__client_on_http_unanswered(mcp_client_t *c, double id, int err, const char *why)
{
    mcp_client_call_t *call = find_sent(c, id);
    if (call == NULL) return;
    char msg[REASON_MAX];
    snprintf(msg, sizeof msg, "%s on downstream server %s: %s", call->method, c->name, why);
    settle(call, err, NULL, NULL, msg, false);
}

/* --- messages from the server ---------------------------------------------------------- */

static void garbage(mcp_client_t *c, const char *what, const char *line, size_t len)
{
    if (c->garbage_logged > MCP__CLIENT_MAX_GARBAGE_LOGS) return;
    if (c->garbage_logged++ == MCP__CLIENT_MAX_GARBAGE_LOGS) {
        mcp_log(c->lg, MCP_LOG_WARNING,
                "downstream server %s: more unusable output; no longer logged until it restarts",
                c->name);
        return;
    }
    char shown[121];
    size_t n = 0;
    for (size_t i = 0; line != NULL && i < len && n < sizeof shown - 1; i++) {
        unsigned char ch = (unsigned char)line[i];
        shown[n++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    shown[n] = '\0';
    mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s: dropped %s%s%s%s", c->name, what,
            line != NULL ? ": " : "", shown, len > n && line != NULL ? "..." : "");
}

static void handle_response(mcp_client_t *c, const cJSON *msg, mcp_msg_kind_t kind)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    mcp_client_call_t *call = find_by_id(c, id);
    if (call == NULL) {
        if (kind == MCP_MSG_ERROR) {
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(msg, "error"), "message");
            mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s sent an error for no request: %s",
                    c->name, cJSON_IsString(m) ? m->valuestring : "(no message)");
        } else {
            /* Late answers to cancelled or timed-out calls land here. */
            mcp_log(c->lg, MCP_LOG_DEBUG,
                    "downstream server %s: dropped an answer for no pending "
                    "request",
                    c->name);
        }
        return;
    }
    if (kind == MCP_MSG_ERROR) {
        const cJSON *error = cJSON_GetObjectItemCaseSensitive(msg, "error");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(error, "message");
        char text[REASON_MAX];
        snprintf(text, sizeof text, "downstream server %s answered %s with an error: %s", c->name,
                 call->method, cJSON_IsString(m) ? m->valuestring : "(no message)");
        settle(call, MCP_EREMOTE, NULL, error, text, false);
        return;
    }
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(msg, "result");
    if (!cJSON_IsObject(result)) {
        char text[256];
        snprintf(text, sizeof text, "downstream server %s answered %s with a non-object result",
                 c->name, call->method);
        settle(call, MCP_EPROTO, NULL, NULL, text, false);
        return;
    }
    settle(call, MCP_OK, result, NULL, NULL, false);
}

static void handle_notification(mcp_client_t *c, const cJSON *msg)
{
    const char *method = cJSON_GetObjectItemCaseSensitive(msg, "method")->valuestring;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    if (strcmp(method, "notifications/tools/list_changed") == 0) {
        if (c->listing || c->state != MCP_CLIENT_READY)
            c->relist = true; /* re-listed when the current listing or the handshake ends */
        else
            start_listing(c);
    } else if (strcmp(method, "notifications/progress") == 0) {
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(params, "progressToken");
        const cJSON *prog = cJSON_GetObjectItemCaseSensitive(params, "progress");
        const cJSON *total = cJSON_GetObjectItemCaseSensitive(params, "total");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(params, "message");
        mcp_client_call_t *call = cJSON_IsNumber(tok) ? find_sent(c, tok->valuedouble) : NULL;
        if (call != NULL && call->progress != NULL && cJSON_IsNumber(prog))
            call->progress(call->data, prog->valuedouble,
                           cJSON_IsNumber(total) ? total->valuedouble : -1.0,
                           cJSON_IsString(m) ? m->valuestring : NULL);
    } else if (strcmp(method, "notifications/message") == 0) {
        const cJSON *lv = cJSON_GetObjectItemCaseSensitive(params, "level");
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(params, "data");
        mcp_level_t level = MCP_LOG_INFO;
        if (cJSON_IsString(lv)) mcp_level_parse(lv->valuestring, &level);
        char *text = data != NULL ? cJSON_PrintUnformatted(data) : NULL;
        mcp_log(c->lg, level, "[%s] log: %.1000s", c->name, text != NULL ? text : "");
        free(text);
    } else if (strcmp(method, "notifications/cancelled") == 0) {
        const cJSON *rid = cJSON_GetObjectItemCaseSensitive(params, "requestId");
        for (mcp_client_peer_req_t *r = c->peers; r != NULL; r = r->next) {
            if (!r->cancelled && r->gen == c->gen && cJSON_Compare(r->id, rid, true)) {
                r->cancelled = true;
                if (c->hooks.peer_cancelled != NULL) c->hooks.peer_cancelled(c, r, c->hooks.data);
                break;
            }
        }
    }
}

static void handle_message(mcp_client_t *c, const cJSON *msg, const char *line, size_t len)
{
    const char *why = NULL;
    mcp_msg_kind_t kind = mcp_jsonrpc_classify(msg, &why);
    switch (kind) {
    case MCP_MSG_RESPONSE:
    case MCP_MSG_ERROR:
        handle_response(c, msg, kind);
        break;
    case MCP_MSG_REQUEST:
        handle_request(c, msg);
        break;
    case MCP_MSG_NOTIFICATION:
        handle_notification(c, msg);
        break;
    case MCP_MSG_INVALID:
        garbage(c, why, line, len);
        break;
    }
}

void mcp__client_on_line(mcp_client_t *c, const char *line, size_t len, bool too_big)
{
    if (gone(c)) return;
    if (too_big) {
        char what[128];
        snprintf(what, sizeof what, "a message of %zu bytes (the limit is %zu)", len,
                 c->opts.max_message_bytes);
        garbage(c, what, NULL, 0);
        return;
    }
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i == len) return;
    cJSON *msg = cJSON_ParseWithLength(line, len);
    if (msg == NULL) {
        garbage(c, "a line that is not JSON", line, len);
        return;
    }
    enter(c);
    if (cJSON_IsArray(msg)) {
        const cJSON *m;
        cJSON_ArrayForEach(m, msg)
        {
            if (gone(c)) break;
            handle_message(c, m, line, len);
        }
    } else {
        handle_message(c, msg, line, len);
    }
    cJSON_Delete(msg);
    leave(c);
}

/* --- public API ------------------------------------------------------------------------ */

static void free_strv(char **v)
{
    if (v == NULL) return;
    for (size_t i = 0; v[i] != NULL; i++)
        free(v[i]);
    free(v);
}

static char *kv_join(const char *name, const char *value)
{
    size_t n = strlen(name) + 1 + strlen(value) + 1;
    char *s = malloc(n);
    if (s != NULL) snprintf(s, n, "%s=%s", name, value);
    return s;
}

/* Builds argv and the environment, expanding ${VAR}. Returns MCP_OK or an error (logged). */
static int build_command(mcp_client_t *c, const mcp_downstream_server_t *e, char *const *base)
{
    bool too_long = false;
    const char *cfg_path = NULL;
    char *cfg_path_owned = NULL;
    c->argv = calloc(e->n_args + 2, sizeof *c->argv);
    if (c->argv == NULL) return MCP_ENOMEM;
    c->argv[0] = mcp__client_expand(e->command, base, c->name, c->lg, &too_long);
    for (size_t i = 0; i < e->n_args && c->argv[i] != NULL; i++)
        c->argv[i + 1] = mcp__client_expand(e->args[i], base, c->name, c->lg, &too_long);
    if (c->argv[e->n_args] == NULL) goto fail;

    size_t n_base = 0;
    while (base != NULL && base[n_base] != NULL)
        n_base++;
    c->envp = calloc(n_base + e->n_env + 2, sizeof *c->envp);
    if (c->envp == NULL) return MCP_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < n_base; i++) {
        const char *eq = strchr(base[i], '=');
        if (eq == NULL) continue;
        size_t nl = (size_t)(eq - base[i]);
        bool replaced = nl == 4 && strncmp(base[i], "PATH", 4) == 0;
        for (size_t j = 0; j < e->n_env && !replaced; j++)
            replaced = strlen(e->env[j].name) == nl && strncmp(e->env[j].name, base[i], nl) == 0;
        if (replaced) continue;
        if ((c->envp[n++] = mcp__strdup(base[i])) == NULL) goto fail;
    }
    for (size_t j = 0; j < e->n_env; j++) {
        char *v = mcp__client_expand(e->env[j].value, base, c->name, c->lg, &too_long);
        if (v == NULL) goto fail;
        if (strcmp(e->env[j].name, "PATH") == 0) {
            free(cfg_path_owned);
            cfg_path = cfg_path_owned = v;
            continue;
        }
        c->envp[n] = kv_join(e->env[j].name, v);
        free(v);
        if (c->envp[n++] == NULL) goto fail;
    }
    /* PATH: the entry's own first, then ours, then the command's folder, so that a
     * "#!/usr/bin/env node" script named by full path finds the node beside it. */
    const char *base_path = mcp__client_env_get(base, "PATH");
    const char *slash = strrchr(c->argv[0], '/');
    size_t total = 6 + (cfg_path ? strlen(cfg_path) : 0) + (base_path ? strlen(base_path) : 0) +
                   (slash ? (size_t)(slash - c->argv[0]) : 0) + 4;
    if (total > MCP__CLIENT_MAX_EXPANDED) {
        too_long = true;
        goto fail;
    }
    char *path = malloc(total);
    if (path == NULL) goto fail;
    size_t len = (size_t)snprintf(path, total, "PATH=");
    const char *parts[3] = {cfg_path, base_path, NULL};
    size_t plen[3] = {cfg_path ? strlen(cfg_path) : 0, base_path ? strlen(base_path) : 0, 0};
    if (slash != NULL && slash != c->argv[0]) {
        parts[2] = c->argv[0];
        plen[2] = (size_t)(slash - c->argv[0]);
    }
    for (size_t i = 0; i < 3; i++) {
        if (parts[i] == NULL || plen[i] == 0) continue;
        len += (size_t)snprintf(path + len, total - len, "%s%.*s", len > 5 ? ":" : "", (int)plen[i],
                                parts[i]);
    }
    c->envp[n++] = path;
    free(cfg_path_owned);
    return MCP_OK;
fail:
    free(cfg_path_owned);
    if (too_long)
        mcp_log(c->lg, MCP_LOG_ERROR,
                "downstream server %s: an argument or environment value is longer than %u bytes "
                "after ${VAR} expansion",
                c->name, MCP__CLIENT_MAX_EXPANDED);
    return too_long ? MCP_ETOOBIG : MCP_ENOMEM;
}

int mcp_client_new(uv_loop_t *loop, const mcp_downstream_server_t *entry,
                   const mcp_client_opts_t *opts, const mcp_client_hooks_t *hooks,
                   const mcp_logger_t *lg, mcp_client_t **out)
{
    *out = NULL;
    if (loop == NULL || entry == NULL || entry->name == NULL) return MCP_EINVAL;
    if (entry->kind == MCP_DOWNSTREAM_STDIO && entry->command == NULL) return MCP_EINVAL;
    if (entry->kind == MCP_DOWNSTREAM_HTTP && entry->url == NULL) return MCP_EINVAL;
    mcp_client_t *c = calloc(1, sizeof *c);
    if (c == NULL) return MCP_ENOMEM;
    c->loop = loop;
    c->lg = lg;
    if (hooks != NULL) c->hooks = *hooks;
    if (opts != NULL)
        c->opts = *opts;
    else
        mcp_client_opts_default(&c->opts);
    c->opts.environ = NULL;
    if (c->opts.max_message_bytes == 0)
        c->opts.max_message_bytes = MCP_CLIENT_DEFAULT_MAX_MESSAGE_BYTES;
    if (c->opts.max_stderr_line == 0) c->opts.max_stderr_line = MCP_CLIENT_DEFAULT_MAX_STDERR_LINE;
    if (c->opts.max_calls == 0) c->opts.max_calls = MCP_CLIENT_DEFAULT_MAX_CALLS;
    if (c->opts.max_tools == 0) c->opts.max_tools = MCP_CLIENT_DEFAULT_MAX_TOOLS;
    c->state = MCP_CLIENT_STOPPED;
    c->kind = entry->kind;
    c->next_id = 1;
    c->name = mcp__strdup(entry->name);
    c->tools = cJSON_CreateArray();
    c->start_timer = malloc(sizeof *c->start_timer);
    c->defer_timer = malloc(sizeof *c->defer_timer);
    c->healthy_timer = malloc(sizeof *c->healthy_timer);
    int rc = MCP_ENOMEM;
    if (c->name == NULL || c->tools == NULL || c->start_timer == NULL || c->defer_timer == NULL ||
        c->healthy_timer == NULL) {
        free(c->start_timer);
        free(c->defer_timer);
        free(c->healthy_timer);
        c->start_timer = c->defer_timer = c->healthy_timer = NULL;
        goto fail;
    }
    uv_timer_init(loop, c->start_timer);
    uv_timer_init(loop, c->defer_timer);
    uv_timer_init(loop, c->healthy_timer);
    c->start_timer->data = c->defer_timer->data = c->healthy_timer->data = c;
    if (entry->kind == MCP_DOWNSTREAM_HTTP) {
        char *const *base = opts != NULL && opts->environ != NULL ? opts->environ : environ;
        bool too_long = false;
        c->legacy_sse = entry->type != NULL && strcmp(entry->type, "sse") == 0;
        c->url = mcp__client_expand(entry->url, base, c->name, lg, &too_long);
        if (c->url == NULL) goto fail;
        if (entry->n_headers > 0) {
            c->headers = calloc(entry->n_headers, sizeof *c->headers);
            if (c->headers == NULL) goto fail;
        }
        for (size_t i = 0; i < entry->n_headers; i++) {
            c->headers[i].name = mcp__strdup(entry->headers[i].name);
            c->headers[i].value =
                mcp__client_expand(entry->headers[i].value, base, c->name, lg, &too_long);
            c->n_headers++;
            if (c->headers[i].name == NULL || c->headers[i].value == NULL) goto fail;
        }
    } else {
        char *const *base = opts != NULL && opts->environ != NULL ? opts->environ : environ;
        if ((rc = build_command(c, entry, base)) < 0) goto fail;
        if (entry->cwd != NULL && (c->cwd = mcp__strdup(entry->cwd)) == NULL) {
            rc = MCP_ENOMEM;
            goto fail;
        }
    }
    *out = c;
    return MCP_OK;
fail:
    really_free(c);
    return rc;
}

int mcp_client_start(mcp_client_t *c)
{
    if (gone(c) || c->stopping) return MCP_ESTATE;
    if (c->state == MCP_CLIENT_STARTING || c->state == MCP_CLIENT_READY) return MCP_ESTATE;
    c->attempts = 0;
    c->ever_ready = false;
    free(c->reason);
    c->reason = NULL;
    c->state = MCP_CLIENT_STARTING;
    defer(c, MCP__DEFER_SPAWN, 0);
    return MCP_OK;
}

void mcp_client_stop(mcp_client_t *c, void (*done)(mcp_client_t *c, void *data), void *data)
{
    if (gone(c) || c->stopping) return;
    enter(c);
    c->stopping = true;
    c->stop_done = done;
    c->stop_data = data;
    uv_timer_stop(c->start_timer);
    uv_timer_stop(c->healthy_timer);
    uv_timer_stop(c->defer_timer);
    c->deferred = MCP__DEFER_NONE;
    c->listing = false;
    fail_calls(c, CALLS_INTERNAL, 0, "");
    fail_calls(c, CALLS_ALL_USER, MCP_ECANCELED, "the server is being stopped");
    if (!gone(c)) cancel_peers(c);
    if (!gone(c)) {
        if (c->http != NULL) {
            mcp__http_conn_t *h = c->http;
            c->http = NULL;
            mcp__http_close(h);
        }
        if (c->proc != NULL)
            mcp__proc_stop(c->proc, false, false);
        else
            defer(c, MCP__DEFER_STOPPED, 0);
    }
    leave(c);
}

static void really_free(mcp_client_t *c)
{
    c->depth++; /* callbacks below must not free again */
    memset(&c->hooks, 0, sizeof c->hooks);
    fail_calls(c, CALLS_INTERNAL, 0, "");
    fail_calls(c, CALLS_ALL_USER, MCP_ECANCELED, "the client was closed");
    for (mcp_client_peer_req_t *r = c->peers; r != NULL;) {
        mcp_client_peer_req_t *next = r->next;
        r->c = NULL;
        r->cancelled = true;
        r->prev = r->next = NULL;
        r = next;
    }
    c->peers = NULL;
    if (c->proc != NULL) mcp__proc_stop(c->proc, true, false);
    c->proc = NULL;
    if (c->http != NULL) mcp__http_close(c->http);
    c->http = NULL;
    for (size_t i = 0; i < c->n_headers; i++) {
        free(c->headers[i].name);
        free(c->headers[i].value);
    }
    free(c->headers);
    mcp__close_free((uv_handle_t *)c->start_timer);
    mcp__close_free((uv_handle_t *)c->defer_timer);
    mcp__close_free((uv_handle_t *)c->healthy_timer);
    free_strv(c->argv);
    free_strv(c->envp);
    free(c->name);
    free(c->command);
    free(c->url);
    free(c->cwd);
    free(c->reason);
    free(c->last_cursor);
    cJSON_Delete(c->tools);
    cJSON_Delete(c->listing_tools);
    cJSON_Delete(c->init_result);
    cJSON_Delete(c->roots);
    free(c);
}

void mcp_client_free(mcp_client_t *c)
{
    if (c == NULL || c->free_pending) return;
    c->free_pending = true;
    memset(&c->hooks, 0, sizeof c->hooks);
    if (c->depth == 0) really_free(c);
}

const char *mcp_client_name(const mcp_client_t *c)
{
    return c->name;
}

mcp_client_state_t mcp_client_state(const mcp_client_t *c, const char **reason)
{
    if (reason != NULL) *reason = c->reason;
    return c->state;
}

const cJSON *mcp_client_tools(const mcp_client_t *c)
{
    return c->tools;
}

const cJSON *mcp_client_server_init(const mcp_client_t *c)
{
    return c->state == MCP_CLIENT_READY ? c->init_result : NULL;
}

int mcp_client_pid(const mcp_client_t *c)
{
    return c->proc != NULL ? c->proc->pid : 0;
}

unsigned mcp_client_spawn_count(const mcp_client_t *c)
{
    return c->spawns;
}

int mcp_client_set_roots(mcp_client_t *c, const cJSON *roots)
{
    if (roots != NULL && !cJSON_IsArray(roots)) return MCP_EINVAL;
    cJSON *copy = roots != NULL ? cJSON_Duplicate(roots, true) : NULL;
    if (roots != NULL && copy == NULL) return MCP_ENOMEM;
    cJSON_Delete(c->roots);
    c->roots = copy;
    if (c->opts.has_roots && c->state == MCP_CLIENT_READY)
        send_msg(c, mcp_jsonrpc_request(NULL, "notifications/roots/list_changed", NULL));
    return MCP_OK;
}

static int check_callable(const mcp_client_t *c)
{
    if (gone(c) || c->stopping) return MCP_ESTATE;
    if (c->state == MCP_CLIENT_FAILED || c->state == MCP_CLIENT_STOPPED) return MCP_ESTATE;
    if (c->n_user_calls >= c->opts.max_calls) return MCP_EBUSY;
    return MCP_OK;
}

int mcp_client_request(mcp_client_t *c, const char *method, cJSON *params, unsigned timeout_ms,
                       mcp_client_call_cb cb, void *data, mcp_client_call_t **out)
{
    if (out != NULL) *out = NULL;
    if (c == NULL || method == NULL || cb == NULL) {
        cJSON_Delete(params);
        return MCP_EINVAL;
    }
    int rc = check_callable(c);
    if (rc < 0) {
        cJSON_Delete(params);
        return rc;
    }
    return start_call(c, method, params, timeout_ms, false, NULL, cb, data, c->next_id++, out);
}

int mcp_client_call_tool(mcp_client_t *c, const char *name, const cJSON *args, unsigned timeout_ms,
                         mcp_client_progress_cb progress, mcp_client_call_cb cb, void *data,
                         mcp_client_call_t **out)
{
    if (out != NULL) *out = NULL;
    if (c == NULL || name == NULL || cb == NULL || (args != NULL && !cJSON_IsObject(args)))
        return MCP_EINVAL;
    int rc = check_callable(c);
    if (rc < 0) return rc;
    int64_t id = c->next_id++;
    cJSON *params = cJSON_CreateObject();
    cJSON *a = args != NULL ? cJSON_Duplicate(args, true) : cJSON_CreateObject();
    bool ok = params != NULL && a != NULL && cJSON_AddStringToObject(params, "name", name) &&
              cJSON_AddItemToObject(params, "arguments", a);
    if (!ok) cJSON_Delete(a);
    if (ok && progress != NULL) {
        cJSON *meta = cJSON_AddObjectToObject(params, "_meta");
        ok = meta != NULL && cJSON_AddNumberToObject(meta, "progressToken", (double)id) != NULL;
    }
    if (!ok) {
        cJSON_Delete(params);
        return MCP_ENOMEM;
    }
    return start_call(c, "tools/call", params, timeout_ms, false, progress, cb, data, id, out);
}

void mcp_client_call_cancel(mcp_client_call_t *call, const char *reason)
{
    if (call == NULL || call->settling) return;
    mcp_client_t *c = call->c;
    enter(c);
    if (call->sent) send_cancelled(c, call->id, reason != NULL ? reason : "cancelled");
    char msg[256];
    snprintf(msg, sizeof msg, "%s on downstream server %s was cancelled%s%s", call->method, c->name,
             reason != NULL ? ": " : "", reason != NULL ? reason : "");
    settle(call, MCP_ECANCELED, NULL, NULL, msg, false);
    leave(c);
}
