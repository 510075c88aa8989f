/* client_calls.c - the downstream client's calls: ids, the wait for a server that is still
 * starting, timeouts, cancellation, and matching what the server sends (answers, progress, log
 * messages) to them. The lifecycle is in client_session.c. */
#include "client_internal.h"

#include <stdlib.h>
#include <string.h>

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
    cJSON_Delete(call->first_params);
    cJSON_Delete(call->responses);
    free(call->request_state);
    free(call);
}

/* Unlinks, calls back once (unless silent), frees. */
static void settle(mcp_client_call_t *call, int err, const cJSON *result, const cJSON *error,
                   const char *message, bool silent)
{
    unlink_call(call);
    call->settling = true;
    if (call->timer != NULL) uv_timer_stop(call->timer);
    /* Input requests of this call still with the owner are withdrawn (the owner hears it). */
    if (call->awaiting > 0) mcp__client_drop_inputs(call->c, call);
    /* Over HTTP the call's POST may still be open (a timeout or cancel): end it. When the
     * answer itself settles the call, its POST is no longer listed and nothing happens. */
    if (call->sent && call->c->http != NULL) mcp__http_abandon(call->c->http, (double)call->id);
    if (!silent && call->cb != NULL) call->cb(call->data, err, result, error, message);
    free_call(call);
}

static bool call_matches(const mcp_client_call_t *call, mcp__client_which_calls_t which)
{
    switch (which) {
    case MCP__CALLS_SENT_USER:
        return !call->internal && call->sent;
    case MCP__CALLS_WAITING:
        return !call->internal && !call->sent;
    case MCP__CALLS_ALL_USER:
        return !call->internal;
    case MCP__CALLS_INTERNAL:
        return call->internal;
    }
    return false;
}

/* Fails a set of calls. They are unlinked first, so callbacks that start or cancel other calls
 * cannot disturb the walk; internal calls end silently. */
void mcp__client_fail_calls(mcp_client_t *c, mcp__client_which_calls_t which, int err,
                            const char *what)
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
        char msg[MCP__CLIENT_REASON_MAX + 256];
        snprintf(msg, sizeof msg, "%s on downstream server %s: %s", call->method, c->name, what);
        settle(call, err, NULL, NULL, msg, call->internal);
    }
}

int mcp__client_send(mcp_client_t *c, cJSON *msg)
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
    /* Over stateless HTTP a request's POST is its lifetime: abandoning it (settle) is the
     * cancellation, and there is no session a notification could be related to. */
    if (c->modern && c->http != NULL) return;
    cJSON *p = cJSON_CreateObject();
    if (p == NULL || cJSON_AddNumberToObject(p, "requestId", (double)id) == NULL ||
        (reason != NULL && cJSON_AddStringToObject(p, "reason", reason) == NULL) ||
        (c->modern && mcp__client_add_envelope(c, p) < 0)) {
        cJSON_Delete(p);
        return;
    }
    mcp__client_send(c, mcp_jsonrpc_request(NULL, "notifications/cancelled", p));
}

static int send_call(mcp_client_t *c, mcp_client_call_t *call)
{
    cJSON *params = call->params;
    if (c->modern) {
        /* Stateless: every request carries the protocol version and our capabilities. A
         * tools/call keeps what it first asked, for the rounds an InputRequiredResult may
         * start. */
        if (params == NULL && (params = cJSON_CreateObject()) == NULL) return MCP_ENOMEM;
        call->params = params;
        if (!call->internal && strcmp(call->method, "tools/call") == 0 &&
            call->first_params == NULL &&
            (call->first_params = cJSON_Duplicate(params, true)) == NULL)
            return MCP_ENOMEM;
        int rc = mcp__client_add_envelope(c, params);
        if (rc < 0) return rc;
    }
    cJSON *id = cJSON_CreateNumber((double)call->id);
    if (id == NULL) return MCP_ENOMEM;
    call->params = NULL;
    cJSON *msg = mcp_jsonrpc_request(id, call->method, params);
    cJSON_Delete(id);
    int rc = mcp__client_send(c, msg);
    if (rc == MCP_OK) call->sent = true;
    return rc;
}

static void on_call_timer(uv_timer_t *t)
{
    mcp_client_call_t *call = t->data;
    if (call == NULL) return;
    mcp_client_t *c = call->c;
    mcp__client_enter(c);
    char msg[MCP__CLIENT_REASON_MAX + 256];
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
    mcp__client_leave(c);
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
int mcp__client_start_call(mcp_client_t *c, const char *method, cJSON *params, unsigned timeout_ms,
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
void mcp__client_flush_waiting(mcp_client_t *c)
{
    while (!mcp__client_gone(c) && c->state == MCP_CLIENT_READY) {
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

void mcp__client_on_http_unanswered(mcp_client_t *c, double id, int err, const char *why)
{
    mcp_client_call_t *call = find_sent(c, id);
    if (call == NULL) return;
    char msg[MCP__CLIENT_REASON_MAX];
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
        char text[MCP__CLIENT_REASON_MAX];
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
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(result, "resultType");
    if (c->modern && !call->hand_inputs && cJSON_IsString(rt) &&
        strcmp(rt->valuestring, "input_required") == 0) {
        char text[MCP__CLIENT_REASON_MAX];
        if (call->first_params == NULL) {
            snprintf(text, sizeof text,
                     "downstream server %s asked for input (InputRequiredResult) on %s, which "
                     "ptc-mcp answers only for tools/call",
                     c->name, call->method);
            settle(call, MCP_EPROTO, NULL, NULL, text, false);
        } else if (call->rounds >= MCP__CLIENT_MAX_INPUT_ROUNDS) {
            snprintf(text, sizeof text,
                     "downstream server %s still asked for input after %u rounds of %s", c->name,
                     call->rounds, call->method);
            settle(call, MCP_EPROTO, NULL, NULL, text, false);
        } else {
            /* The call stays "sent" (in flight) while its owner answers; its timeout runs on. */
            mcp__client_start_inputs(c, call, result);
        }
        return;
    }
    settle(call, MCP_OK, result, NULL, NULL, false);
}

void mcp__client_fail_call(mcp_client_call_t *call, int err, const char *message)
{
    settle(call, err, NULL, NULL, message, false);
}

int mcp__client_next_round(mcp_client_call_t *call)
{
    mcp_client_t *c = call->c;
    cJSON *params = cJSON_Duplicate(call->first_params, true);
    if (params == NULL) return MCP_ENOMEM;
    call->id = c->next_id++; /* a retry is a new request */
    call->rounds++;
    cJSON *tok = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(params, "_meta"),
                                                  "progressToken");
    if (cJSON_IsNumber(tok)) cJSON_SetNumberValue(tok, (double)call->id);
    bool ok = true;
    if (call->responses != NULL) {
        ok = cJSON_AddItemToObject(params, "inputResponses", call->responses);
        if (ok) call->responses = NULL;
    }
    if (ok && call->request_state != NULL)
        ok = cJSON_AddStringToObject(params, "requestState", call->request_state) != NULL;
    free(call->request_state);
    call->request_state = NULL;
    if (!ok) {
        cJSON_Delete(params);
        return MCP_ENOMEM;
    }
    cJSON_Delete(call->params);
    call->params = params;
    int rc = send_call(c, call);
    if (rc == MCP_OK) arm_call_timer(call);
    return rc;
}

static void handle_notification(mcp_client_t *c, const cJSON *msg)
{
    const char *method = cJSON_GetObjectItemCaseSensitive(msg, "method")->valuestring;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    if (strcmp(method, "notifications/tools/list_changed") == 0) {
        mcp__client_on_list_changed(c);
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
        mcp__client_on_peer_cancelled(c, cJSON_GetObjectItemCaseSensitive(params, "requestId"));
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
        mcp__client_handle_request(c, msg);
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
    if (mcp__client_gone(c)) return;
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
    /* Every string that comes from here (results, listings, errors) is then valid UTF-8. */
    char *clean = NULL;
    size_t clean_len = len;
    int bad = ptc_utf8_clean(line, len, &clean, &clean_len);
    if (bad < 0) {
        garbage(c, "a message (out of memory making it valid UTF-8)", NULL, 0);
        return;
    }
    if (bad > 0 && !c->utf8_warned) {
        c->utf8_warned = true;
        mcp_log(c->lg, MCP_LOG_WARNING,
                "downstream server %s sent %d ill-formed UTF-8 sequence%s (or NUL bytes) in a "
                "message; each is replaced by U+FFFD",
                c->name, bad, bad == 1 ? "" : "s");
    }
    if (bad > 0) {
        line = clean;
        len = clean_len;
    }
    cJSON *msg = cJSON_ParseWithLength(line, len);
    if (msg == NULL) {
        garbage(c, "a line that is not JSON", line, len);
        free(clean);
        return;
    }
    mcp__client_enter(c);
    if (cJSON_IsArray(msg)) {
        const cJSON *m;
        cJSON_ArrayForEach(m, msg)
        {
            if (mcp__client_gone(c)) break;
            handle_message(c, m, line, len);
        }
    } else {
        handle_message(c, msg, line, len);
    }
    cJSON_Delete(msg);
    free(clean);
    mcp__client_leave(c);
}

static int check_callable(const mcp_client_t *c)
{
    if (mcp__client_gone(c) || c->stopping) return MCP_ESTATE;
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
    return mcp__client_start_call(c, method, params, timeout_ms, false, NULL, cb, data,
                                  c->next_id++, out);
}

/* tools/call; hand_inputs: the caller answers the server's input requests itself. */
static int call_tool(mcp_client_t *c, const char *name, const cJSON *args,
                     const cJSON *input_responses, const char *request_state, bool hand_inputs,
                     unsigned timeout_ms, mcp_client_progress_cb progress, mcp_client_call_cb cb,
                     void *data, mcp_client_call_t **out)
{
    if (out != NULL) *out = NULL;
    if (c == NULL || name == NULL || cb == NULL || (args != NULL && !cJSON_IsObject(args)) ||
        (input_responses != NULL && !cJSON_IsObject(input_responses)))
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
    if (ok && input_responses != NULL)
        ok =
            cJSON_AddItemToObject(params, "inputResponses", cJSON_Duplicate(input_responses, true));
    if (ok && request_state != NULL)
        ok = cJSON_AddStringToObject(params, "requestState", request_state) != NULL;
    if (!ok) {
        cJSON_Delete(params);
        return MCP_ENOMEM;
    }
    mcp_client_call_t *call = NULL;
    rc = mcp__client_start_call(c, "tools/call", params, timeout_ms, false, progress, cb, data, id,
                                &call);
    if (rc < 0) return rc;
    call->hand_inputs = hand_inputs; /* no answer can come before the loop runs again */
    if (out != NULL) *out = call;
    return MCP_OK;
}

int mcp_client_call_tool(mcp_client_t *c, const char *name, const cJSON *args, unsigned timeout_ms,
                         mcp_client_progress_cb progress, mcp_client_call_cb cb, void *data,
                         mcp_client_call_t **out)
{
    return call_tool(c, name, args, NULL, NULL, false, timeout_ms, progress, cb, data, out);
}

int mcp_client_call_tool_round(mcp_client_t *c, const char *name, const cJSON *args,
                               const cJSON *input_responses, const char *request_state,
                               unsigned timeout_ms, mcp_client_progress_cb progress,
                               mcp_client_call_cb cb, void *data, mcp_client_call_t **out)
{
    return call_tool(c, name, args, input_responses, request_state, true, timeout_ms, progress, cb,
                     data, out);
}

void mcp_client_call_cancel(mcp_client_call_t *call, const char *reason)
{
    if (call == NULL || call->settling) return;
    mcp_client_t *c = call->c;
    mcp__client_enter(c);
    if (call->sent) send_cancelled(c, call->id, reason != NULL ? reason : "cancelled");
    char msg[256];
    snprintf(msg, sizeof msg, "%s on downstream server %s was cancelled%s%s", call->method, c->name,
             reason != NULL ? ": " : "", reason != NULL ? reason : "");
    settle(call, MCP_ECANCELED, NULL, NULL, msg, false);
    mcp__client_leave(c);
}
