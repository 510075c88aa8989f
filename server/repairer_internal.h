/* repairer_internal.h - what the two repairers share (not a public header). */
#ifndef PTC_SERVER_REPAIRER_INTERNAL_H
#define PTC_SERVER_REPAIRER_INTERNAL_H

#include "repairers.h"

typedef enum repair_kind { REPAIR_SAMPLING, REPAIR_HTTP } repair_kind_t;

struct ptc_repair_ask {
    repair_kind_t kind;
    ptc_repair_cb cb;
    void *data;
    bool cancelled; /* the callback is not called any more */
    mcp_outreq_t *outreq;
    mcp_http_req_t *http;
    ptc_repairer_http_t *owner;
    ptc_repair_ask_t *prev, *next; /* in owner's list */
};

/** Cancels an HTTP ask (repairer_http.c). */
void ptc__repair_http_cancel(ptc_repair_ask_t *a);

/** The text of a model's message content: a {"type":"text"} block, an array of blocks (their
 *  texts joined) or a string. Caller frees; NULL when there is no text or on ENOMEM. */
char *ptc__repair_content_text(const cJSON *content);

#endif
