/* outreq.c - requests the server sends to the client (sampling, elicitation, roots): their own
 * id space, routing of the answers, timeouts and cancellation. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static void unlink_req(mcp_outreq_t *r)
{
    mcp_session_t *s = r->s;
    if (r->prev)
        r->prev->next = r->next;
    else if (s->outreqs == r)
        s->outreqs = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

/* Unlinks, calls back once, frees. The session may go idle afterwards. */
static void settle(mcp_outreq_t *r, int err, const cJSON *result, const cJSON *error,
                   const char *message)
{
    mcp_session_t *s = r->s;
    unlink_req(r);
    if (r->timer != NULL) {
        r->timer->data = NULL;
        mcp__close_free((uv_handle_t *)r->timer);
    }
    mcp_outreq_cb cb = r->cb;
    void *data = r->data;
    cJSON_Delete(r->related);
    free(r->method);
    free(r);
    if (cb != NULL) cb(data, err, result, error, message);
    mcp__session_check_idle(s);
}

static void notify_cancel(mcp_outreq_t *r, const char *reason)
{
    cJSON *p = cJSON_CreateObject();
    if (p == NULL || cJSON_AddStringToObject(p, "requestId", r->id) == NULL ||
        cJSON_AddStringToObject(p, "reason", reason) == NULL) {
        cJSON_Delete(p);
        return;
    }
    mcp__session_send_related(r->s, mcp_jsonrpc_request(NULL, "notifications/cancelled", p),
                              r->related);
}

static void on_timeout(uv_timer_t *t)
{
    mcp_outreq_t *r = t->data;
    if (r == NULL) return;
    char m[200];
    snprintf(m, sizeof m, "the client did not answer %s in time", r->method);
    unlink_req(r); /* so a shutdown during the notification cannot settle it first */
    notify_cancel(r, "timed out");
    settle(r, MCP_ETIMEDOUT, NULL, NULL, m);
}

int mcp_session_request(mcp_session_t *s, const char *method, cJSON *params,
                        const char *need_capability, unsigned timeout_ms, mcp_outreq_cb cb,
                        void *data, mcp_outreq_t **out)
{
    return mcp__session_request(s, NULL, method, params, need_capability, timeout_ms, cb, data,
                                out);
}

int mcp__session_request(mcp_session_t *s, const cJSON *related, const char *method, cJSON *params,
                         const char *need_capability, unsigned timeout_ms, mcp_outreq_cb cb,
                         void *data, mcp_outreq_t **out)
{
    if (out != NULL) *out = NULL;
    if (s->protocol[0] == '\0' || s->shutting_down) {
        cJSON_Delete(params);
        return MCP_ESTATE;
    }
    if (need_capability != NULL && !mcp_session_client_has(s, need_capability)) {
        cJSON_Delete(params);
        return MCP_ENOTSUP;
    }
    mcp_outreq_t *r = calloc(1, sizeof *r);
    if (r == NULL || (r->method = mcp__strdup(method)) == NULL ||
        (related != NULL && (r->related = cJSON_Duplicate(related, true)) == NULL)) {
        if (r != NULL) free(r->method);
        free(r);
        cJSON_Delete(params);
        return MCP_ENOMEM;
    }
    r->s = s;
    r->cb = cb;
    r->data = data;
    /* A prefix no client uses keeps our ids apart from the client's own request ids. */
    snprintf(r->id, sizeof r->id, "ptc-%llu", (unsigned long long)++s->next_outreq);
    if (timeout_ms > 0) {
        r->timer = malloc(sizeof *r->timer);
        if (r->timer == NULL || uv_timer_init(s->srv->loop, r->timer) < 0) {
            free(r->timer);
            cJSON_Delete(r->related);
            free(r->method);
            free(r);
            cJSON_Delete(params);
            return MCP_ENOMEM;
        }
        r->timer->data = r;
        uv_timer_start(r->timer, on_timeout, timeout_ms, 0);
    }
    cJSON *id = cJSON_CreateString(r->id);
    cJSON *msg = id != NULL ? mcp_jsonrpc_request(id, method, params) : NULL;
    if (id == NULL) cJSON_Delete(params);
    cJSON_Delete(id);
    /* Sent before it is linked: a transport whose send fails may shut the session down from
     * inside the send, and the shutdown must not settle (and free) a request still being made.
     * The client cannot answer before the send returns, since answers arrive on the loop. */
    int rc = msg != NULL ? mcp__session_send_related(s, msg, r->related) : MCP_ENOMEM;
    if (rc == 0 && s->shutting_down) rc = MCP_ECLOSED;
    if (rc < 0) {
        r->cb = NULL; /* the caller learns of the failure from the return value */
        settle(r, rc, NULL, NULL, NULL);
        return rc;
    }
    r->next = s->outreqs;
    if (s->outreqs) s->outreqs->prev = r;
    s->outreqs = r;
    if (out != NULL) *out = r;
    return MCP_OK;
}

bool mcp__outreq_route(mcp_session_t *s, const cJSON *msg, mcp_msg_kind_t kind)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    if (!cJSON_IsString(id)) return false;
    mcp_outreq_t *r = s->outreqs;
    while (r != NULL && strcmp(r->id, id->valuestring) != 0)
        r = r->next;
    if (r == NULL) return false;
    if (kind == MCP_MSG_RESPONSE) {
        settle(r, MCP_OK, cJSON_GetObjectItemCaseSensitive(msg, "result"), NULL, "ok");
    } else {
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(msg, "error");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(err, "message");
        settle(r, MCP_EREMOTE, NULL, err,
               cJSON_IsString(m) ? m->valuestring : "the client answered with an error");
    }
    return true;
}

void mcp_outreq_cancel(mcp_outreq_t *r, const char *reason)
{
    if (r == NULL) return;
    unlink_req(r); /* so a shutdown during the notification cannot settle it first */
    notify_cancel(r, reason != NULL ? reason : "cancelled");
    settle(r, MCP_ECANCELED, NULL, NULL, "cancelled");
}

void mcp__outreq_fail_all(mcp_session_t *s, int err, const char *message)
{
    while (s->outreqs != NULL)
        /* settle unlinks the head (r->s is s, which clang-tidy's analyzer does not see), so no
         * freed request stays the head: a false positive */
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
        settle(s->outreqs, err, NULL, NULL, message);
}
