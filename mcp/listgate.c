/* listgate.c - tools/list, and holding it back while the server's list gate is closed (a
 * one-shot client lists once right after initialize; before the tools it should see are known
 * that list would be incomplete for good). A parked request keeps what its answer needs: the
 * id, the cursor, its batch and its protocol context. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct mcp__parked_list {
    cJSON *id;
    char *cursor; /* NULL: the first page */
    mcp__batch_t *batch;
    mcp__req_t req; /* the request's context (modern ones bring their own) */
    bool has_req;
    struct mcp__parked_list *next;
} parked_list_t;

static void answer(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *cursor)
{
    bool bad = false;
    cJSON *res = mcp__server_list_tools(s->srv, mcp__session_proto(s), cursor, &bad);
    if (bad) {
        mcp__session_answer(
            s, b,
            mcp_jsonrpc_error(id, MCP_JSONRPC_INVALID_PARAMS,
                              "tools/list: invalid cursor (pass back a nextCursor exactly as "
                              "received)",
                              NULL));
        return;
    }
    if (res == NULL) {
        mcp__session_answer(
            s, b, mcp_jsonrpc_error(id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory", NULL));
        return;
    }
    mcp__session_answer(s, b, mcp_jsonrpc_result(id, res));
}

static void parked_free(parked_list_t *p)
{
    cJSON_Delete(p->id);
    free(p->cursor);
    free(p);
}

void mcp__tools_list(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *cursor)
{
    mcp_server_t *srv = s->srv;
    if (srv->list_gate == NULL || !srv->list_gate(srv->list_gate_data)) {
        answer(s, b, id, cursor);
        return;
    }
    parked_list_t *p = calloc(1, sizeof *p);
    if (p == NULL || (p->id = cJSON_Duplicate(id, true)) == NULL ||
        (cursor != NULL && (p->cursor = mcp__strdup(cursor)) == NULL)) {
        if (p != NULL) parked_free(p);
        answer(s, b, id, cursor); /* out of memory: what is known now rather than nothing */
        return;
    }
    if (s->cur != NULL) {
        p->req = *s->cur;
        p->req.method = "tools/list";
        p->req.caps = NULL; /* borrowed from the request, which is gone by then */
        p->has_req = true;
    }
    p->batch = b;
    if (b != NULL) b->pending++; /* answered on release */
    p->next = s->parked_lists;
    s->parked_lists = p;
}

void mcp__lists_release(mcp_session_t *s)
{
    /* Oldest first: they were pushed at the head. */
    parked_list_t *rev = NULL;
    while (s->parked_lists != NULL) {
        parked_list_t *p = s->parked_lists;
        s->parked_lists = p->next;
        p->next = rev;
        rev = p;
    }
    while (rev != NULL) {
        parked_list_t *p = rev;
        rev = p->next;
        mcp__req_t *outer = s->cur;
        s->cur = p->has_req ? &p->req : NULL;
        answer(s, p->batch, p->id, p->cursor);
        s->cur = outer;
        mcp__batch_done_one(s, p->batch);
        parked_free(p);
    }
}

bool mcp__lists_cancel(mcp_session_t *s, const cJSON *id)
{
    for (parked_list_t **pp = &s->parked_lists; *pp != NULL; pp = &(*pp)->next) {
        parked_list_t *p = *pp;
        if (!cJSON_Compare(p->id, id, true)) continue;
        *pp = p->next;
        /* Cancelled by the client: it waits for no answer (a batch is answered without it). */
        if (p->batch == NULL) mcp__session_end_silent(s, p->id);
        mcp__batch_t *b = p->batch;
        parked_free(p);
        mcp__batch_done_one(s, b);
        mcp__session_check_idle(s);
        return true;
    }
    return false;
}

void mcp__lists_drop(mcp_session_t *s)
{
    while (s->parked_lists != NULL) {
        parked_list_t *p = s->parked_lists;
        s->parked_lists = p->next;
        if (p->batch != NULL && --p->batch->pending == 0) {
            cJSON_Delete(p->batch->responses);
            free(p->batch);
        }
        parked_free(p);
    }
}

void mcp_server_set_list_gate(mcp_server_t *srv, mcp_list_gate_fn gate, void *data)
{
    srv->list_gate = gate;
    srv->list_gate_data = data;
}

void mcp_server_release_lists(mcp_server_t *srv)
{
    /* An answer may end a stateless session (its one request is done): keep the next one. */
    for (mcp_session_t *s = srv->sessions, *next; s != NULL; s = next) {
        next = s->next;
        mcp__lists_release(s);
    }
}
