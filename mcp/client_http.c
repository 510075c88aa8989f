/* client_http.c - the Streamable HTTP transport of a downstream client: every message is one
 * POST; the answer comes back as a JSON body or as an SSE body that is read once the server
 * ends it. The session id from the initialize answer rides on every later POST, and the
 * session is DELETEd when we let go of it.
 *
 * A stateless server's subscriptions/listen POST is read as a stream (its events dispatched as
 * they arrive, without the total timeout). Not yet: the GET stream for messages a legacy server
 * sends on its own (list_changed outside a call), and requests the server sends inside a
 * still-open call's POST stream (that body is only read when it ends). */
#include "client_internal.h"
#include "header_value.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The headers a request adds itself (Content-Type, Accept, Mcp-Session-Id,
 * MCP-Protocol-Version, Mcp-Method, Mcp-Name): with the entry's own (the config parser and
 * mcp_client_new refuse more than MCP_DOWNSTREAM_MAX_HEADERS) they fit the HTTP client's limit,
 * so none is ever cut; a tool call's Mcp-Param-* headers past it are an error (MCP_ETOOBIG). */
#define HTTP_FIXED_HEADERS 6
#define HTTP_MAX_HEADERS   PTC_HTTP_MAX_USER_HEADERS
_Static_assert(HTTP_FIXED_HEADERS + MCP_DOWNSTREAM_MAX_HEADERS <= HTTP_MAX_HEADERS,
               "a request's own headers and the entry's fit the HTTP client's limit");
/* Longest Mcp-Name value sent (a tool name or resource URI; base64 grows it by a third). */
#define HTTP_MAX_NAME_HEADER 4096
/* Longest NAME of an Mcp-Param-NAME header sent (the server's checker reads 100). */
#define HTTP_MAX_PARAM_NAME 100

typedef struct http_post http_post_t;

struct mcp__http_conn {
    mcp_client_t *c; /* NULL once closed */
    ptc_http_client_t *http;
    const mcp_logger_t *lg;
    char name[MCP_DOWNSTREAM_MAX_NAME + 1];
    char *url;
    char *session_id;
    char protocol[16];
    unsigned gen;
    unsigned refs; /* the client's, plus one per POST in flight */
    http_post_t *posts;
};

struct http_post {
    mcp__http_conn_t *h;
    ptc_http_req_t *req;
    bool has_id;
    double id;
    /* A streamed POST (subscriptions/listen): the SSE bytes after the last complete event. */
    bool streamed;
    bool in_chunk, finished; /* its events are being dispatched; its request ended meanwhile */
    ptc_buf_t pending;       /* capped at the client's max_message_bytes */
    http_post_t *prev, *next;
};

static void conn_unref(mcp__http_conn_t *h)
{
    if (--h->refs > 0) return;
    free(h->url);
    free(h->session_id);
    free(h);
}

static void unlink_post(http_post_t *p)
{
    mcp__http_conn_t *h = p->h;
    if (p->prev)
        p->prev->next = p->next;
    else if (h->posts == p)
        h->posts = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
}

/* Delivers each SSE event's data (its data: lines joined by newlines) as one message. */
static void dispatch_sse(mcp_client_t *c, const char *body, size_t len)
{
    ptc_buf_t data; /* never longer than the events it is taken from */
    ptc_buf_init(&data, len);
    const char *p = body, *end = body + len;
    while (p <= end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl != NULL ? nl : end;
        size_t ll = (size_t)(le - p);
        if (ll > 0 && p[ll - 1] == '\r') ll--;
        if (ll == 0) {
            if (ptc_buf_len(&data) > 0)
                mcp__client_on_line(c, ptc_buf_cstr(&data), ptc_buf_len(&data), false);
            ptc_buf_truncate(&data, 0);
        } else if (ll >= 5 && strncmp(p, "data:", 5) == 0) {
            const char *v = p + 5;
            size_t vl = ll - 5;
            if (vl > 0 && *v == ' ') {
                v++;
                vl--;
            }
            size_t had = ptc_buf_len(&data);
            if (had > 0) (void)ptc_buf_append(&data, "\n", 1);
            if (ptc_buf_append(&data, v, vl) < 0) { /* out of memory: what came before goes */
                ptc_buf_truncate(&data, had);
                break;
            }
        }
        if (nl == NULL) break;
        p = nl + 1;
    }
    if (ptc_buf_len(&data) > 0)
        mcp__client_on_line(c, ptc_buf_cstr(&data), ptc_buf_len(&data), false);
    ptc_buf_free(&data);
}

/* Where the last complete SSE event of buf[0..n) ends (after its blank line), or 0. */
static size_t events_end(const char *buf, size_t n)
{
    for (size_t i = n; i >= 2; i--) {
        if (buf[i - 1] != '\n') continue;
        if (buf[i - 2] == '\n') return i;
        if (i >= 3 && buf[i - 2] == '\r' && buf[i - 3] == '\n') return i;
    }
    return 0;
}

/* Frees a finished POST, unless its stream's events are being dispatched (then the reader
 * frees it once the dispatch is over). */
static void release_post(http_post_t *p)
{
    if (p->in_chunk) {
        p->finished = true;
        return;
    }
    ptc_buf_free(&p->pending);
    free(p);
}

/* A streamed POST's next bytes: every complete event goes out at once, the rest waits. A body
 * that is not an event stream (an error answer) is kept whole and read when it ends. */
static int on_stream_chunk(void *data, int status, const char *content_type, const char *at,
                           size_t n)
{
    http_post_t *p = data;
    mcp_client_t *c = p->h->c;
    if (c == NULL) return -1;
    int rc = ptc_buf_append(&p->pending, at, n);
    if (rc == PTC_ETOOBIG)
        mcp_log(c->lg, MCP_LOG_WARNING,
                "downstream server %s: an event of its stream is over %zu bytes; stream ended",
                c->name, c->opts.max_message_bytes);
    if (rc < 0) return -1;
    bool sse = status >= 200 && status < 300 && content_type != NULL &&
               strncasecmp(content_type, "text/event-stream", 17) == 0;
    size_t end = sse ? events_end(ptc_buf_cstr(&p->pending), ptc_buf_len(&p->pending)) : 0;
    if (end == 0) return 0;
    p->in_chunk = true;
    mcp__client_enter(c);
    dispatch_sse(c, ptc_buf_cstr(&p->pending), end);
    mcp__client_leave(c);
    p->in_chunk = false;
    if (p->finished) { /* closed while its events were read: the request is over */
        release_post(p);
        return -1;
    }
    ptc_buf_consume(&p->pending, end);
    return 0;
}

static void on_post_done(void *data, int err, const ptc_http_response_t *resp, const char *message)
{
    http_post_t *p = data;
    mcp__http_conn_t *h = p->h;
    unlink_post(p);
    mcp_client_t *c = h->c;
    ptc_http_response_t streamed;
    if (p->streamed && err == 0) {
        /* What was not dispatched as events: a JSON answer, or an unfinished last event. */
        streamed = *resp;
        streamed.body = ptc_buf_cstr(&p->pending);
        streamed.body_len = ptc_buf_len(&p->pending);
        resp = &streamed;
    }
    if (c == NULL) {
        release_post(p);
        conn_unref(h);
        return;
    }
    mcp__client_enter(c);
    char why[512];
    if (err < 0) {
        snprintf(why, sizeof why, "HTTP request to %.200s failed: %.250s", h->url,
                 message != NULL ? message : mcp_strerror(err));
        if (err == MCP_ETIMEDOUT && p->has_id)
            mcp__client_on_http_unanswered(c, p->id, MCP_ETIMEDOUT, why);
        else if (err != MCP_ECANCELED)
            mcp__client_on_http_failure(c, h, why);
    } else {
        if (resp->session_id != NULL && h->session_id == NULL)
            h->session_id = mcp__strdup(resp->session_id);
        if (resp->status == 404 && h->session_id != NULL) {
            mcp__client_on_http_failure(c, h, "the server no longer knows our session (HTTP 404)");
        } else {
            const char *ct = resp->content_type != NULL ? resp->content_type : "";
            if (strncasecmp(ct, "text/event-stream", 17) == 0)
                dispatch_sse(c, resp->body, resp->body_len);
            else if (resp->body_len > 0 && (strncasecmp(ct, "application/json", 16) == 0 ||
                                            resp->body[0] == '{' || resp->body[0] == '['))
                mcp__client_on_line(c, resp->body, resp->body_len, false);
            if (p->has_id && h->c == c) {
                snprintf(why, sizeof why, "the HTTP answer (status %d) held no JSON-RPC response",
                         resp->status);
                mcp__client_on_http_unanswered(c, p->id, MCP_EPROTO, why);
            }
        }
    }
    release_post(p);
    mcp__client_leave(c);
    conn_unref(h);
}

/* SEP-2243: the Mcp-Param-NAME headers of a 2026-07-28 tools/call, one for each argument
 * whose property in the tool's listed inputSchema names "x-mcp-header": NAME, carrying the
 * value (a string as it is, anything else as its JSON, as mcp/transport_http.c compares it),
 * encoded by the same rules the server checks. Servers refuse the call without them (-32020).
 * The strings go to bufs (malloc'd, *n_bufs of them; free them after the request is made) and
 * the headers after hdrs[*n], at most max in all. MCP_ETOOBIG when one does not fit. */
static int param_headers(const mcp_client_t *c, const cJSON *params, ptc_http_header_t *hdrs,
                         size_t *n, size_t max, char **bufs, size_t *n_bufs)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
    const cJSON *tool = NULL, *t;
    const cJSON *tools = cJSON_IsString(name) ? c->tools : NULL;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *tn = cJSON_GetObjectItemCaseSensitive(t, "name");
        if (cJSON_IsString(tn) && strcmp(tn->valuestring, name->valuestring) == 0) {
            tool = t;
            break;
        }
    }
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(tool, "inputSchema"), "properties");
    const cJSON *p;
    if (!cJSON_IsObject(args)) props = NULL;
    cJSON_ArrayForEach(p, props)
    {
        const cJSON *hname = cJSON_GetObjectItemCaseSensitive(p, "x-mcp-header");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, p->string);
        /* A declaration that names no valid header is the server's mistake: nothing to send. */
        if (!cJSON_IsString(hname) || !mcp__header_name_is_token(hname->valuestring) ||
            strlen(hname->valuestring) > HTTP_MAX_PARAM_NAME || v == NULL || cJSON_IsNull(v))
            continue;
        if (*n >= max) return MCP_ETOOBIG;
        char *json = cJSON_IsString(v) ? NULL : cJSON_PrintUnformatted(v);
        const char *text = cJSON_IsString(v) ? v->valuestring : json;
        if (text == NULL) return MCP_ENOMEM;
        size_t len = strlen(text), room = 16 + len + (len + 2) / 3 * 4;
        if (room > HTTP_MAX_NAME_HEADER) {
            cJSON_free(json);
            return MCP_ETOOBIG;
        }
        size_t hsize = sizeof "Mcp-Param-" + HTTP_MAX_PARAM_NAME;
        char *hdr = malloc(hsize), *val = malloc(room);
        if (hdr == NULL || val == NULL) {
            free(hdr);
            free(val);
            cJSON_free(json);
            return MCP_ENOMEM;
        }
        bufs[(*n_bufs)++] = hdr;
        bufs[(*n_bufs)++] = val;
        snprintf(hdr, hsize, "Mcp-Param-%s", hname->valuestring);
        bool ok = mcp__header_value_encode(text, val, room);
        cJSON_free(json);
        if (!ok) return MCP_ETOOBIG;
        hdrs[(*n)++] = (ptc_http_header_t){hdr, val};
    }
    return MCP_OK;
}

int mcp__http_send(mcp__http_conn_t *h, const cJSON *msg)
{
    mcp_client_t *c = h->c;
    if (c == NULL) return MCP_ECLOSED;
    ptc_http_header_t hdrs[HTTP_MAX_HEADERS];
    size_t n = 0;
    hdrs[n++] = (ptc_http_header_t){"Content-Type", "application/json"};
    hdrs[n++] = (ptc_http_header_t){"Accept", "application/json, text/event-stream"};
    if (h->session_id != NULL) hdrs[n++] = (ptc_http_header_t){"Mcp-Session-Id", h->session_id};
    if (h->protocol[0] != '\0')
        hdrs[n++] = (ptc_http_header_t){"MCP-Protocol-Version", h->protocol};
    /* Stateless requests name their method (and tool, prompt or resource) in headers too, so
     * that a gateway can route them without reading the body. */
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    char name[HTTP_MAX_NAME_HEADER];
    if (c->modern && cJSON_IsString(method)) {
        hdrs[n++] = (ptc_http_header_t){"Mcp-Method", method->valuestring};
        const char *nm = mcp__modern_name_of(method->valuestring,
                                             cJSON_GetObjectItemCaseSensitive(msg, "params"));
        if (nm != NULL) {
            if (!mcp__header_value_encode(nm, name, sizeof name)) return MCP_ETOOBIG;
            hdrs[n++] = (ptc_http_header_t){"Mcp-Name", name};
        }
    }
    for (size_t i = 0; i < c->n_headers; i++)
        hdrs[n++] = (ptc_http_header_t){c->headers[i].name, c->headers[i].value};
    char *bufs[2 * HTTP_MAX_HEADERS];
    size_t n_bufs = 0;
    int rc = MCP_OK;
    if (c->modern && cJSON_IsString(method) && strcmp(method->valuestring, "tools/call") == 0)
        rc = param_headers(c, cJSON_GetObjectItemCaseSensitive(msg, "params"), hdrs, &n,
                           HTTP_MAX_HEADERS, bufs, &n_bufs);
    http_post_t *p = rc == MCP_OK ? calloc(1, sizeof *p) : NULL;
    char *text = rc == MCP_OK ? cJSON_PrintUnformatted(msg) : NULL;
    if (p == NULL || text == NULL) {
        free(p);
        free(text);
        for (size_t i = 0; i < n_bufs; i++)
            free(bufs[i]);
        return rc < 0 ? rc : MCP_ENOMEM;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    if (cJSON_IsNumber(id) && cJSON_GetObjectItemCaseSensitive(msg, "method") != NULL) {
        p->has_id = true;
        p->id = id->valuedouble;
    }
    p->h = h;
    ptc_buf_init(&p->pending, c->opts.max_message_bytes);
    /* The listen stream stays open for the server's life: read as it comes, no total timeout. */
    p->streamed =
        cJSON_IsString(method) && strcmp(method->valuestring, "subscriptions/listen") == 0;
    rc = p->streamed ? ptc_http_request_stream(h->http, "POST", h->url, hdrs, n, text, strlen(text),
                                               on_stream_chunk, on_post_done, p, &p->req)
                     : ptc_http_request(h->http, "POST", h->url, hdrs, n, text, strlen(text),
                                        on_post_done, p, &p->req);
    free(text);
    for (size_t i = 0; i < n_bufs; i++)
        free(bufs[i]);
    if (rc < 0) {
        free(p);
        return rc;
    }
    p->next = h->posts;
    if (h->posts) h->posts->prev = p;
    h->posts = p;
    h->refs++;
    return MCP_OK;
}

int mcp__http_open(mcp_client_t *c, unsigned gen, mcp__http_conn_t **out)
{
    *out = NULL;
    if (c->opts.http == NULL) return MCP_ENOTSUP;
    mcp__http_conn_t *h = calloc(1, sizeof *h);
    if (h == NULL || (h->url = mcp__strdup(c->url)) == NULL) {
        free(h);
        return MCP_ENOMEM;
    }
    h->c = c;
    h->http = mcp__http_client_httpc(c->opts.http);
    h->lg = c->lg;
    snprintf(h->name, sizeof h->name, "%s", c->name);
    h->gen = gen;
    h->refs = 1;
    *out = h;
    return MCP_OK;
}

void mcp__http_set_protocol(mcp__http_conn_t *h, const char *version)
{
    snprintf(h->protocol, sizeof h->protocol, "%s", version);
}

void mcp__http_abandon(mcp__http_conn_t *h, double id)
{
    for (http_post_t *p = h->posts; p != NULL; p = p->next) {
        if (p->has_id && p->id == id) {
            ptc_http_cancel(p->req); /* its callback unlinks and frees it */
            return;
        }
    }
}

unsigned mcp__http_gen(const mcp__http_conn_t *h)
{
    return h->gen;
}

static void on_deleted(void *data, int err, const ptc_http_response_t *resp, const char *message)
{
    (void)data;
    (void)err;
    (void)resp;
    (void)message; /* best effort: the server expires sessions on its own too */
}

void mcp__http_close(mcp__http_conn_t *h)
{
    mcp_client_t *c = h->c;
    if (c == NULL) return;
    if (h->session_id != NULL) {
        ptc_http_header_t hdrs[HTTP_MAX_HEADERS];
        size_t n = 0;
        hdrs[n++] = (ptc_http_header_t){"Mcp-Session-Id", h->session_id};
        if (h->protocol[0] != '\0')
            hdrs[n++] = (ptc_http_header_t){"MCP-Protocol-Version", h->protocol};
        for (size_t i = 0; i < c->n_headers; i++)
            hdrs[n++] = (ptc_http_header_t){c->headers[i].name, c->headers[i].value};
        if (ptc_http_request(h->http, "DELETE", h->url, hdrs, n, NULL, 0, on_deleted, NULL, NULL) <
            0)
            mcp_log(h->lg, MCP_LOG_DEBUG, "downstream server %s: could not end the HTTP session",
                    h->name);
    }
    h->c = NULL;
    /* Each cancel runs its callback now, which unlinks the post; one that cannot be cancelled
     * (it is running its own callback) ends on its own. */
    http_post_t *p = h->posts;
    while (p != NULL) {
        http_post_t *next = p->next;
        ptc_http_cancel(p->req);
        p = next;
    }
    conn_unref(h);
}
