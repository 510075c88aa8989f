/* response.c - the outbound HTTP client's response parser: http-parser callbacks,
 * the headers we keep (Content-Type, Location, Mcp-Session-Id), the body cap, and the end of
 * the response (complete, or cut by the server closing). */
#include "internal.h"

#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------------------------------- */
/* Response parsing (http-parser callbacks)                                                  */

static ptc_http_req_t *req_of(http_parser *p)
{
    return p->data;
}

static int on_message_begin(http_parser *p)
{
    ptc_http_req_t *r = req_of(p);
    r->started = true;
    r->status = 0;
    r->body.len = 0;
    ptc_buf_free(&r->content_type);
    ptc_buf_free(&r->location);
    ptc_buf_free(&r->session_id);
    r->field_len = 0;
    r->field_long = false;
    r->in_value = false;
    r->cur_hdr = PTC__HDR_OTHER;
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    ptc_http_req_t *r = req_of(p);
    if (r->in_value) { /* a new header begins */
        r->in_value = false;
        r->field_len = 0;
        r->field_long = false;
    }
    if (n >= sizeof r->field - r->field_len) {
        r->field_long = true;
        return 0;
    }
    memcpy(r->field + r->field_len, at, n);
    r->field_len += n;
    return 0;
}

/* The buffer keeping the current header's value, or NULL for headers we skip. */
static ptc_buf_t *kept_value(ptc_http_req_t *r)
{
    switch (r->cur_hdr) {
    case PTC__HDR_CONTENT_TYPE:
        return &r->content_type;
    case PTC__HDR_LOCATION:
        return &r->location;
    case PTC__HDR_SESSION:
        return &r->session_id;
    case PTC__HDR_OTHER:
        break;
    }
    return NULL;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    ptc_http_req_t *r = req_of(p);
    if (!r->in_value) {
        r->in_value = true;
        r->field[r->field_len] = '\0';
        r->cur_hdr = PTC__HDR_OTHER;
        if (!r->field_long && strcasecmp(r->field, "content-type") == 0)
            r->cur_hdr = PTC__HDR_CONTENT_TYPE;
        else if (!r->field_long && strcasecmp(r->field, "location") == 0)
            r->cur_hdr = PTC__HDR_LOCATION;
        else if (!r->field_long && strcasecmp(r->field, "mcp-session-id") == 0)
            r->cur_hdr = PTC__HDR_SESSION;
        ptc_buf_t *b = kept_value(r);
        if (b != NULL) ptc_buf_free(b); /* a repeated header: the last one wins */
    }
    ptc_buf_t *b = kept_value(r);
    if (b == NULL) return 0;
    int rc = ptc_buf_append(b, at, n);
    if (rc < 0) {
        r->perr = rc == PTC_HTTP_ETOOBIG ? PTC_HTTP_EPROTO : rc;
        snprintf(r->msg, sizeof r->msg, "%s sent a %s header longer than %d bytes", r->where,
                 r->cur_hdr == PTC__HDR_LOCATION  ? "Location"
                 : r->cur_hdr == PTC__HDR_SESSION ? "Mcp-Session-Id"
                                                  : "Content-Type",
                 PTC_HTTP_MAX_KEPT_VALUE);
        return -1;
    }
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    ptc_http_req_t *r = req_of(p);
    r->status = (int)p->status_code;
    if (r->status >= 300 && r->status < 400 && r->location.p != NULL) {
        r->perr = PTC_HTTP_EREDIRECT;
        snprintf(r->msg, sizeof r->msg,
                 "%s answered %d, a redirect to '%.300s'; redirects are refused: use the final "
                 "URL instead",
                 r->where, r->status, r->location.p);
        return -1;
    }
    size_t cap = r->body.max;
    /* content_length is ULLONG_MAX when the header is absent. */
    if (r->on_chunk == NULL && p->content_length != ULLONG_MAX &&
        p->content_length > (unsigned long long)cap) {
        r->perr = PTC_HTTP_ETOOBIG;
        snprintf(r->msg, sizeof r->msg,
                 "%s announced a %llu-byte response body, over the cap of %zu bytes", r->where,
                 (unsigned long long)p->content_length, cap);
        return -1;
    }
    return r->head ? 1 : 0; /* 1: no body follows */
}

int ptc__http_req_buffer_body(ptc_http_req_t *r, const char *at, size_t n)
{
    int rc = ptc_buf_append(&r->body, at, n);
    if (rc == PTC_HTTP_ETOOBIG) {
        r->perr = rc;
        snprintf(r->msg, sizeof r->msg, "the response body from %s is over the cap of %zu bytes",
                 r->where, r->body.max);
    } else if (rc < 0) {
        r->perr = rc;
        snprintf(r->msg, sizeof r->msg, "out of memory buffering the response from %s", r->where);
    }
    return rc;
}

int ptc__http_req_stream_body(ptc_http_req_t *r, const char *at, size_t n)
{
    if (r->on_chunk(r->data, r->status, r->content_type.p, at, n) == 0) return 0;
    if (r->done) return -1; /* the reader cancelled the request itself */
    r->perr = PTC_HTTP_ECANCELED;
    snprintf(r->msg, sizeof r->msg, "the stream from %s was ended by its reader", r->where);
    return -1;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    ptc_http_req_t *r = req_of(p);
    return r->body_sink(r, at, n) < 0 ? -1 : 0;
}

static int on_message_complete(http_parser *p)
{
    ptc_http_req_t *r = req_of(p);
    /* An interim 1xx answer (100 Continue) is followed by the real one. */
    if (r->status >= 100 && r->status < 200 && r->status != 101) return 0;
    r->complete = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* After the parser ran: finishes a request whose response is complete or was refused by a
 * callback. True when the request is over (the caller must not finish it again). */
static bool ended(ptc_http_req_t *r)
{
    if (r->done) return true;
    if (r->complete) {
        ptc__http_req_succeed(r);
        return true;
    }
    if (r->perr < 0) {
        ptc__http_req_finish(r, r->perr, NULL, r->msg);
        return true;
    }
    return false;
}

/* Feeds response bytes (plaintext); n == 0 reports the end of the stream. */
void ptc__http_req_feed(ptc_http_req_t *r, const char *data, size_t n)
{
    size_t used = http_parser_execute(&r->parser, &parser_settings, data, n);
    if (ended(r)) return;
    enum http_errno e = HTTP_PARSER_ERRNO(&r->parser);
    if (e != HPE_OK || used != n) {
        ptc__http_req_fail(r, PTC_HTTP_EPROTO, "malformed HTTP response from %s: %s (%s)", r->where,
                           http_errno_description(e), http_errno_name(e));
    }
}

void ptc__http_req_on_eof(ptc_http_req_t *r)
{
    if (!r->started) {
        ptc__http_req_fail(r, PTC_HTTP_ECLOSED, "%s closed the connection without answering",
                           r->where);
        return;
    }
    /* An empty read tells http-parser the stream ended: that completes a body that runs until
     * the close, and is an error for any other unfinished message. */
    http_parser_execute(&r->parser, &parser_settings, NULL, 0);
    if (ended(r)) return;
    ptc__http_req_fail(r, PTC_HTTP_EPROTO,
                       "%s closed the connection before the response was complete", r->where);
}
