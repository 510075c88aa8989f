/* host.c - the host end of one run's bridge: checks, dispatch, answers, emit (the tool
 * patterns and the audit record are in host_policy.c). */
#include "host_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------- */
/* Small helpers                                                                             */

static char *dup_str(const char *s)
{
    if (s == NULL) s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL) memcpy(d, s, n);
    return d;
}

static void warn(ptc_bridge_host_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(ptc_bridge_host_t *h, const char *fmt, ...)
{
    char buf[MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    mcp_log(h->lg, MCP_LOG_DEBUG, "bridge: %s", buf);
    if ((size_t)cJSON_GetArraySize(h->warnings) >= PTC_BRIDGE_WARNINGS_MAX) {
        h->warnings_dropped++;
        return;
    }
    cJSON *s = cJSON_CreateString(buf);
    if (s == NULL || !cJSON_AddItemToArray(h->warnings, s)) {
        cJSON_Delete(s);
        h->warnings_dropped++;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Writing answers                                                                           */

static void on_written(uv_write_t *req, int status)
{
    (void)status; /* a peer gone early is fine: nothing waits for these answers any more */
    bh_write_t *w = (bh_write_t *)req;
    free(w->line);
    free(w);
}

/* Takes line. */
static void send_line(ptc_bridge_host_t *h, char *line, size_t len)
{
    if (line == NULL) {
        mcp_log(h->lg, MCP_LOG_ERROR, "bridge: out of memory building an answer");
        return;
    }
    /* After the peer's EOF the socket may still be writable (a half close): keep answering;
     * a peer that is gone makes the write fail with EPIPE, which on_written ignores. */
    if (h->closing) {
        free(line);
        return;
    }
    bh_write_t *w = malloc(sizeof *w);
    if (w == NULL) {
        free(line);
        mcp_log(h->lg, MCP_LOG_ERROR, "bridge: out of memory sending an answer");
        return;
    }
    w->line = line;
    uv_buf_t b = uv_buf_init(line, (unsigned)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&h->pipe, &b, 1, on_written);
    if (rc < 0) {
        mcp_log(h->lg, MCP_LOG_DEBUG, "bridge: write failed: %s", uv_strerror(rc));
        free(line);
        free(w);
        return;
    }
    h->n.bytes_out += len;
}

static void answer_error(ptc_bridge_host_t *h, int64_t id, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void answer_error(ptc_bridge_host_t *h, int64_t id, const char *code, const char *fmt, ...)
{
    char buf[MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t len = 0;
    char *line = ptc_bridge_answer_error(id, code, buf, &len);
    send_line(h, line, len);
}

/* Error answers always go out (they are small); results only within the bytes-out budget. */
static void answer_result(ptc_bridge_host_t *h, int64_t id, const cJSON *result)
{
    size_t len = 0;
    char *line = ptc_bridge_answer_result(id, result, &len);
    if (line == NULL) {
        answer_error(h, id, PTC_BRIDGE_E_UNAVAIL,
                     "the host ran out of memory building the answer; try a smaller result");
        return;
    }
    if (h->n.bytes_out + len > h->lim.bytes_out_max) {
        free(line);
        answer_error(h, id, PTC_BRIDGE_E_BUDGET,
                     "the answer (%zu bytes) would pass this run's budget of %" PRIu64
                     " answer bytes; ask tools for less data (filters, limits, pages)",
                     len, h->lim.bytes_out_max);
        return;
    }
    send_line(h, line, len);
}

/* ---------------------------------------------------------------------------------------- */
/* Calls in flight                                                                           */

static void call_unlink(bh_call_t *c)
{
    ptc_bridge_host_t *h = c->h;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else if (h->calls == c)
        h->calls = c->next;
    if (c->next != NULL) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    if (h->n.in_flight > 0) h->n.in_flight--;
}

static void call_free(bh_call_t *c)
{
    free(c->tool_id);
    free(c->server);
    free(c->name);
    free(c->jkey);
    free(c);
}

static void on_timer(uv_timer_t *t);

static void arm_timer(ptc_bridge_host_t *h)
{
    if (h->closing) return;
    uint64_t first = UINT64_MAX;
    for (bh_call_t *c = h->calls; c != NULL; c = c->next)
        if (c->deadline_ms < first) first = c->deadline_ms;
    if (first == UINT64_MAX) {
        uv_timer_stop(&h->timer);
        return;
    }
    uint64_t now = uv_now(h->loop);
    uv_timer_start(&h->timer, on_timer, first > now ? first - now : 0, 0);
}

static const char *outcome_of(int err)
{
    if (err == 0) return "ok";
    if (err == MCP_ETIMEDOUT) return "timeout";
    if (err == MCP_ECANCELED) return "cancelled";
    if (err == MCP_EDENIED) return "denied";
    return "error";
}

/* Answers and audits a finished call or search; the caller unlinks and frees. */
static void call_answer(bh_call_t *c, int err, const cJSON *result, const char *message)
{
    ptc_bridge_host_t *h = c->h;
    bool is_error = false;
    if (err == 0) {
        const cJSON *ie = cJSON_GetObjectItemCaseSensitive(result, "isError");
        is_error = cJSON_IsTrue(ie);
        answer_result(h, c->id, result);
        if (c->jkey != NULL && h->lim.journal != NULL &&
            ptc_journal_record(h->lim.journal, c->jkey, c->occ, result) < 0)
            warn(h,
                 "the result of %s could not be kept in the replay journal; a repair will not "
                 "rerun this code",
                 c->tool_id);
    } else if (err == MCP_ETIMEDOUT) {
        answer_error(h, c->id, PTC_BRIDGE_E_TIMEOUT, "%s%s%s timed out%s%s",
                     c->server ? c->server : "search", c->name ? "/" : "", c->name ? c->name : "",
                     message ? ": " : "", message ? message : "");
    } else if (err == MCP_EDENIED) {
        /* Refused before it reached the tool (a declined --confirm-writes confirmation): the
         * code may tell this apart from a server that is down. */
        answer_error(h, c->id, PTC_BRIDGE_E_DENIED, "%s%s%s: %s", c->server ? c->server : "search",
                     c->name ? "/" : "", c->name ? c->name : "",
                     message != NULL ? message : mcp_strerror(err));
    } else {
        answer_error(h, c->id, PTC_BRIDGE_E_UNAVAIL, "%s%s%s failed: %s",
                     c->server ? c->server : "search", c->name ? "/" : "", c->name ? c->name : "",
                     message != NULL ? message : mcp_strerror(err));
    }
    if (c->method == PTC_BRIDGE_CALL)
        ptc__bh_audit(h, c->tool_id, c->server, c->name, c->digest, outcome_of(err), c->start_ns,
                      is_error, message);
}

static void on_done(void *data, int err, const cJSON *result, const char *message)
{
    bh_call_t *c = data;
    if (c->done) return; /* a late answer after a timeout or close: dropped */
    c->done = true;
    call_answer(c, err, result, message);
    call_unlink(c);
    if (!c->starting) {
        ptc_bridge_host_t *h = c->h;
        call_free(c);
        arm_timer(h);
    }
}

/* Gives up on a call: done is set first so that a callback during cancel is ignored. */
static void call_abandon(bh_call_t *c)
{
    ptc_bridge_host_t *h = c->h;
    c->done = true;
    c->abandoned = true;
    call_unlink(c);
    if (c->cancel_handle != NULL && h->ops->cancel != NULL)
        h->ops->cancel(h->ops_data, c->cancel_handle);
}

static void on_timer(uv_timer_t *t)
{
    ptc_bridge_host_t *h = t->data;
    uint64_t now = uv_now(h->loop);
    bh_call_t *c = h->calls;
    while (c != NULL) {
        /* clang-tidy's analyzer does not keep the list's invariant (a call without prev is
         * h->calls) and has a freed call stay in the list: a false positive */
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
        bh_call_t *next = c->next;
        if (c->deadline_ms <= now && !c->starting) {
            call_abandon(c);
            h->n.timeouts++;
            char why[96];
            snprintf(why, sizeof why, "no answer within %u ms (the per-call timeout%s)",
                     c->timeout_ms,
                     c->deadline_ms == h->lim.deadline_ms ? ", cut to the run's deadline" : "");
            call_answer(c, MCP_ETIMEDOUT, NULL, why);
            call_free(c);
            /* cancel may have finished other calls: start over from the head */
            next = h->calls;
        }
        c = next;
    }
    arm_timer(h);
}

/* ---------------------------------------------------------------------------------------- */
/* Requests                                                                                  */

static uint64_t call_timeout(ptc_bridge_host_t *h, uint64_t *deadline)
{
    uint64_t now = uv_now(h->loop);
    uint64_t d = now + h->lim.tool_timeout_ms;
    if (h->lim.deadline_ms != 0 && h->lim.deadline_ms < d) d = h->lim.deadline_ms;
    *deadline = d;
    return d > now ? d - now : 0;
}

/* Starts a call or search already checked; answers it on any failure. Takes jkey. */
static void start(ptc_bridge_host_t *h, ptc_bridge_req_t *req, const reg_tool_t *tool,
                  const char *digest, uint64_t start_ns, char *jkey, unsigned occ)
{
    bool is_call = req->method == PTC_BRIDGE_CALL;
    const char *what = is_call ? req->tool : "search";
    uint64_t deadline;
    uint64_t left = call_timeout(h, &deadline);
    if (left == 0) {
        h->n.timeouts++;
        answer_error(h, req->id, PTC_BRIDGE_E_TIMEOUT,
                     "%s was not started: the run's deadline has passed", what);
        if (is_call)
            ptc__bh_audit(h, tool->id, req->server, req->tool, digest, "timeout", start_ns, false,
                          "the run's deadline has passed");
        free(jkey);
        return;
    }
    bh_call_t *c = calloc(1, sizeof *c);
    if (c != NULL) {
        c->jkey = jkey;
        c->occ = occ;
    } else {
        free(jkey);
    }
    if (c != NULL && is_call) {
        c->tool_id = dup_str(tool->id);
        c->server = dup_str(req->server);
        c->name = dup_str(req->tool);
        if (c->tool_id == NULL || c->server == NULL || c->name == NULL) {
            call_free(c);
            c = NULL;
        }
    }
    if (c == NULL) {
        answer_error(h, req->id, PTC_BRIDGE_E_UNAVAIL,
                     "the host ran out of memory; try again with fewer calls in flight");
        return;
    }
    c->h = h;
    c->id = req->id;
    c->method = req->method;
    c->start_ns = start_ns;
    c->deadline_ms = deadline;
    c->timeout_ms = left > UINT32_MAX ? UINT32_MAX : (unsigned)left;
    if (digest != NULL) memcpy(c->digest, digest, sizeof c->digest);
    c->next = h->calls;
    if (h->calls != NULL) h->calls->prev = c;
    h->calls = c;
    h->n.in_flight++;

    void *handle = NULL;
    unsigned tmo = left > UINT32_MAX ? UINT32_MAX : (unsigned)left;
    c->starting = true;
    int rc = is_call ? h->ops->call(h->ops_data, tool, req->arguments, tmo, on_done, c, &handle)
                     : h->ops->search(h->ops_data, req->query, req->top_k, req->server,
                                      req->category, on_done, c, &handle);
    c->starting = false;
    if (rc == 0 && is_call) h->n.tool_calls++;
    if (c->done) { /* answered synchronously, or the host closed meanwhile */
        if (c->abandoned && rc == 0 && handle != NULL) h->ops->cancel(h->ops_data, handle);
        call_free(c);
        arm_timer(h);
        return;
    }
    if (rc < 0) {
        c->done = true;
        call_answer(c, rc, NULL, NULL);
        call_unlink(c);
        call_free(c);
        return;
    }
    c->cancel_handle = handle;
    arm_timer(h);
}

static void handle_call(ptc_bridge_host_t *h, ptc_bridge_req_t *req)
{
    uint64_t t0 = uv_hrtime();
    char digest[65];
    ptc__bh_args_digest(req->arguments, digest);
    const reg_tool_t *tool = h->ops->find_tool(h->ops_data, req->server, req->tool);
    if (tool == NULL) {
        h->n.refused++;
        answer_error(h, req->id, PTC_BRIDGE_E_UNKNOWN,
                     "there is no tool \"%s\" on server \"%s\" in the registry; "
                     "tools.search(...) lists the tools that exist",
                     req->tool, req->server);
        ptc__bh_audit(h, NULL, req->server, req->tool, digest, "error", t0, false, "unknown tool");
        return;
    }
    /* For the repair request's signatures: a call refused for its arguments says most. */
    if (h->lim.journal != NULL) ptc_journal_note_used(h->lim.journal, tool->id);
    const char *why = NULL;
    if (h->allow.n > 0 && !ptc__bh_patterns_match(&h->allow, tool->id))
        why = "--allow-tools";
    else if (ptc__bh_patterns_match(&h->deny, tool->id))
        why = "--deny-tools";
    if (why != NULL) {
        h->n.refused++;
        answer_error(h, req->id, PTC_BRIDGE_E_DENIED, "tool %s is not allowed by %s", tool->id,
                     why);
        ptc__bh_audit(h, tool->id, req->server, req->tool, digest, "denied", t0, false, why);
        return;
    }
    if (h->lim.refuse_writes &&
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tool->annotations, "readOnlyHint"))) {
        h->n.refused++;
        answer_error(h, req->id, PTC_BRIDGE_E_DENIED,
                     "tool %s is not annotated read-only and needs confirmation "
                     "(--confirm-writes), which this client cannot give; call it directly "
                     "or run without --confirm-writes",
                     tool->id);
        ptc__bh_audit(h, tool->id, req->server, req->tool, digest, "denied", t0, false,
                      "needs confirmation");
        return;
    }
    char vmsg[MESSAGE_MAX / 2] = "";
    if (tool->input_schema != NULL &&
        mcp_schema_validate(tool->input_schema, req->arguments, vmsg, sizeof vmsg) != 0) {
        h->n.refused++;
        answer_error(h, req->id, PTC_BRIDGE_E_INVALID,
                     "invalid arguments for %s: %s (tools.help shows its parameters)", tool->id,
                     vmsg);
        ptc__bh_audit(h, tool->id, req->server, req->tool, digest, "error", t0, false, vmsg);
        return;
    }
    char *jkey = NULL;
    unsigned occ = 0;
    if (h->lim.journal != NULL) {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tool->annotations, "readOnlyHint"))) {
            jkey = ptc_journal_key(tool->id, req->arguments);
            if (jkey == NULL) {
                h->n.refused++;
                answer_error(h, req->id, PTC_BRIDGE_E_UNAVAIL,
                             "the host ran out of memory journaling the call; try again");
                ptc__bh_audit(h, tool->id, req->server, req->tool, digest, "error", t0, false,
                              "out of memory");
                return;
            }
            occ = ptc_journal_occurrence(h->lim.journal, jkey);
            const cJSON *kept = ptc_journal_lookup(h->lim.journal, jkey, occ);
            if (kept != NULL) {
                /* An earlier attempt of this request already made this very call: its result
                 * stands, so the side effect is not repeated. */
                free(jkey);
                h->n.replayed++;
                ptc_journal_note_replay(h->lim.journal, tool->id, occ);
                answer_result(h, req->id, kept);
                ptc__bh_audit(h, tool->id, req->server, req->tool, digest, "replayed", t0, false,
                              "answered from the replay journal of an earlier attempt");
                return;
            }
        }
    }
    if (h->n.tool_calls >= h->lim.max_calls) {
        free(jkey);
        h->n.refused++;
        answer_error(h, req->id, PTC_BRIDGE_E_BUDGET,
                     "the call budget of this run (%u tool calls) is spent; do more per call "
                     "or split the work over several runs",
                     h->lim.max_calls);
        ptc__bh_audit(h, tool->id, req->server, req->tool, digest, "denied", t0, false,
                      "call budget spent");
        return;
    }
    if (h->n.in_flight >= PTC_BRIDGE_INFLIGHT_MAX) {
        free(jkey);
        h->n.refused++;
        answer_error(h, req->id, PTC_BRIDGE_E_BUDGET,
                     "%u calls are already in flight; wait for some before starting more",
                     PTC_BRIDGE_INFLIGHT_MAX);
        ptc__bh_audit(h, tool->id, req->server, req->tool, digest, "denied", t0, false,
                      "too many calls in flight");
        return;
    }
    start(h, req, tool, digest, t0, jkey, occ);
}

static void handle_search(ptc_bridge_host_t *h, ptc_bridge_req_t *req)
{
    h->n.searches++;
    if (h->ops->search == NULL) {
        answer_error(h, req->id, PTC_BRIDGE_E_UNAVAIL, "search is not available in this run");
        return;
    }
    if (h->n.in_flight >= PTC_BRIDGE_INFLIGHT_MAX) {
        answer_error(h, req->id, PTC_BRIDGE_E_BUDGET,
                     "%u requests are already in flight; wait for some before starting more",
                     PTC_BRIDGE_INFLIGHT_MAX);
        return;
    }
    start(h, req, NULL, NULL, uv_hrtime(), NULL, 0);
}

static void handle_emit(ptc_bridge_host_t *h, ptc_bridge_req_t *req)
{
    uint64_t k = h->n.emits + 1;
    char *s = cJSON_PrintUnformatted(req->record);
    if (s == NULL) {
        warn(h, "record %" PRIu64 " skipped: out of memory", k);
        answer_error(h, req->id, PTC_BRIDGE_E_UNAVAIL, "the host ran out of memory storing it");
        return;
    }
    size_t size = strlen(s);
    free(s);
    if (size > h->lim.emit_record_max) {
        warn(h, "record %" PRIu64 " skipped: %zu bytes, over the cap of %zu per record", k, size,
             h->lim.emit_record_max);
        answer_error(h, req->id, PTC_BRIDGE_E_TOOBIG,
                     "the record is %zu bytes, over the cap of %zu bytes per record; emit "
                     "smaller records",
                     size, h->lim.emit_record_max);
        return;
    }
    if (h->emit_total + size > h->lim.emit_total_max) {
        warn(h, "record %" PRIu64 " skipped: the run's records would pass %zu bytes", k,
             h->lim.emit_total_max);
        answer_error(h, req->id, PTC_BRIDGE_E_TOOBIG,
                     "this run's records would pass the cap of %zu bytes; emit less",
                     h->lim.emit_total_max);
        return;
    }
    if (!cJSON_AddItemToArray(h->outputs, req->record)) {
        answer_error(h, req->id, PTC_BRIDGE_E_UNAVAIL, "the host could not store the record");
        return;
    }
    req->record = NULL; /* now owned by outputs */
    h->emit_total += size;
    h->n.emits++;
    answer_result(h, req->id, NULL);
}

static void on_line(void *data, const char *line, size_t len, bool too_big)
{
    ptc_bridge_host_t *h = data;
    if (h->closing) return;
    h->n.bytes_in += len + 1;
    if (too_big) {
        h->n.malformed++;
        warn(h, "a request line of more than %zu bytes was skipped (its id is unknown)",
             h->lim.line_max);
        answer_error(h, -1, PTC_BRIDGE_E_TOOBIG, "a request line was over %zu bytes",
                     h->lim.line_max);
        return;
    }
    ptc_bridge_req_t req;
    char pmsg[MESSAGE_MAX / 2] = "";
    int rc = ptc_bridge_parse(line, len, h->lim.line_max, &req, pmsg, sizeof pmsg);
    if (rc < 0) {
        const char *code = rc == PTC_BRIDGE_ETOOBIG ? PTC_BRIDGE_E_TOOBIG : PTC_BRIDGE_E_INVALID;
        if (req.id < 0) h->n.malformed++;
        warn(h, "a request was skipped: %s", pmsg);
        answer_error(h, req.id, code, "malformed request: %s", pmsg);
        return;
    }
    if (h->n.bytes_in > h->lim.bytes_in_max) {
        h->n.refused++;
        answer_error(h, req.id, PTC_BRIDGE_E_BUDGET,
                     "this run's budget of %" PRIu64 " request bytes is spent; send less "
                     "data to tools",
                     h->lim.bytes_in_max);
        if (req.method == PTC_BRIDGE_EMIT) warn(h, "a record was skipped: request bytes spent");
        if (req.method == PTC_BRIDGE_CALL) {
            char digest[65];
            ptc__bh_args_digest(req.arguments, digest);
            ptc__bh_audit(h, NULL, req.server, req.tool, digest, "denied", uv_hrtime(), false,
                          "request bytes budget spent");
        }
        ptc_bridge_req_clear(&req);
        return;
    }
    switch (req.method) {
    case PTC_BRIDGE_CALL:
        handle_call(h, &req);
        break;
    case PTC_BRIDGE_SEARCH:
        handle_search(h, &req);
        break;
    case PTC_BRIDGE_EMIT:
        handle_emit(h, &req);
        break;
    default:
        answer_error(h, req.id, PTC_BRIDGE_E_INVALID, "unknown method");
        break;
    }
    ptc_bridge_req_clear(&req);
}

/* ---------------------------------------------------------------------------------------- */
/* The descriptor                                                                            */

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    ptc_bridge_host_t *h = handle->data;
    *buf = uv_buf_init(h->rbuf, READ_CHUNK);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    ptc_bridge_host_t *h = s->data;
    if (nread > 0) {
        if (mcp_framer_feed(&h->framer, buf->base, (size_t)nread) < 0)
            warn(h, "a request line was dropped: the host ran out of memory");
        return;
    }
    if (nread == 0) return;
    if (nread != UV_EOF)
        mcp_log(h->lg, MCP_LOG_DEBUG, "bridge: read failed: %s", uv_strerror((int)nread));
    mcp_framer_finish(&h->framer); /* a cut-off last line gets its warning */
    uv_read_stop(s);
    h->reading = false;
    h->peer_closed = true;
    if (h->ops->peer_closed != NULL && !h->closing) h->ops->peer_closed(h->ops_data);
}

static void host_free(ptc_bridge_host_t *h)
{
    mcp_framer_close(&h->framer);
    ptc__bh_patterns_free(&h->allow);
    ptc__bh_patterns_free(&h->deny);
    free(h->run_id);
    free(h->rbuf);
    cJSON_Delete(h->outputs);
    cJSON_Delete(h->warnings);
    ptc_bridge_router_free(h->router);
    free(h);
}

static void on_handle_closed(uv_handle_t *handle)
{
    ptc_bridge_host_t *h = handle->data;
    if (--h->handles_open == 0) host_free(h);
}

int ptc_bridge_host_new(uv_loop_t *loop, int fd, const ptc_bridge_limits_t *lim,
                        const ptc_bridge_ops_t *ops, void *ops_data, const mcp_logger_t *lg,
                        ptc_bridge_host_t **out, char *msg, size_t msg_size)
{
    if (out != NULL) *out = NULL;
    ptc_bridge_limits_t l;
    memset(&l, 0, sizeof l);
    if (lim != NULL) l = *lim;
    if (loop == NULL || fd < 0 || ops == NULL || ops->find_tool == NULL || ops->call == NULL ||
        ops->cancel == NULL || out == NULL) {
        ptc__bh_msg(msg, msg_size,
                    "bridge host: loop, fd, ops (find_tool, call, cancel) and out "
                    "are required");
        if (fd >= 0) close(fd);
        return PTC_BRIDGE_EINVAL;
    }
    if (l.max_calls == 0) l.max_calls = PTC_BRIDGE_CALLS_DEF;
    if (l.tool_timeout_ms == 0) l.tool_timeout_ms = PTC_BRIDGE_TIMEOUT_DEF;
    if (l.bytes_in_max == 0) l.bytes_in_max = PTC_BRIDGE_BYTES_IN_DEF;
    if (l.bytes_out_max == 0) l.bytes_out_max = PTC_BRIDGE_BYTES_OUT_DEF;
    if (l.line_max == 0) l.line_max = PTC_BRIDGE_LINE_MAX;
    if (l.emit_record_max == 0) l.emit_record_max = PTC_BRIDGE_EMIT_RECORD_DEF;
    if (l.emit_total_max == 0) l.emit_total_max = PTC_BRIDGE_EMIT_TOTAL_DEF;
    int rc = 0;
    if (l.emit_record_max > PTC_BRIDGE_EMIT_RECORD_MAX ||
        l.emit_total_max > PTC_BRIDGE_EMIT_TOTAL_MAX) {
        ptc__bh_msg(msg, msg_size, "emit caps are at most %u bytes per record and %u per run",
                    PTC_BRIDGE_EMIT_RECORD_MAX, PTC_BRIDGE_EMIT_TOTAL_MAX);
        rc = PTC_BRIDGE_EINVAL;
    } else if (l.run_id != NULL && strlen(l.run_id) > PTC_BRIDGE_RUN_ID_MAX) {
        ptc__bh_msg(msg, msg_size, "the run id is longer than %u bytes", PTC_BRIDGE_RUN_ID_MAX);
        rc = PTC_BRIDGE_EINVAL;
    }
    ptc_bridge_host_t *h = rc == 0 ? calloc(1, sizeof *h) : NULL;
    if (rc == 0 && h == NULL) {
        ptc__bh_msg(msg, msg_size, "out of memory");
        rc = PTC_BRIDGE_ENOMEM;
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
    h->loop = loop;
    h->lg = lg;
    h->ops = ops;
    h->ops_data = ops_data;
    h->lim = l;
    h->run_id = dup_str(l.run_id);
    h->rbuf = malloc(READ_CHUNK);
    h->outputs = cJSON_CreateArray();
    h->warnings = cJSON_CreateArray();
    h->lim.run_id = NULL;
    h->lim.allow_tools = h->lim.deny_tools = NULL;
    if (h->run_id == NULL || h->rbuf == NULL || h->outputs == NULL || h->warnings == NULL) {
        ptc__bh_msg(msg, msg_size, "out of memory");
        rc = PTC_BRIDGE_ENOMEM;
    }
    if (rc == 0)
        rc = ptc__bh_patterns_parse(l.allow_tools, &h->allow, "--allow-tools", msg, msg_size);
    if (rc == 0) rc = ptc__bh_patterns_parse(l.deny_tools, &h->deny, "--deny-tools", msg, msg_size);
    if (rc == 0 && mcp_framer_init(&h->framer, l.line_max, on_line, h) != 0) {
        ptc__bh_msg(msg, msg_size, "bridge host: bad line cap");
        rc = PTC_BRIDGE_EINVAL;
    }
    if (rc < 0) {
        close(fd);
        host_free(h);
        return rc;
    }
    int urc = uv_pipe_init(loop, &h->pipe, 0);
    if (urc == 0) {
        h->pipe.data = h;
        h->handles_open++;
        urc = uv_pipe_open(&h->pipe, fd);
        if (urc < 0) close(fd); /* the handle does not own it yet */
        if (urc == 0) urc = uv_timer_init(loop, &h->timer);
        if (urc == 0) {
            h->timer.data = h;
            h->handles_open++;
            urc = uv_read_start((uv_stream_t *)&h->pipe, on_alloc, on_read);
        }
    } else {
        close(fd);
    }
    if (urc < 0) {
        ptc__bh_msg(msg, msg_size, "the bridge descriptor cannot be used: %s", uv_strerror(urc));
        if (h->handles_open == 0) {
            host_free(h);
        } else {
            h->closing = true;
            uv_close((uv_handle_t *)&h->pipe, on_handle_closed);
            if (h->handles_open == 2) uv_close((uv_handle_t *)&h->timer, on_handle_closed);
        }
        return PTC_BRIDGE_EIO;
    }
    h->reading = true;
    *out = h;
    return 0;
}

const cJSON *ptc_bridge_host_outputs(const ptc_bridge_host_t *h)
{
    return h->outputs;
}

static cJSON *take_array(cJSON **slot)
{
    cJSON *fresh = cJSON_CreateArray();
    if (fresh == NULL) return NULL;
    cJSON *old = *slot;
    *slot = fresh;
    return old;
}

cJSON *ptc_bridge_host_take_outputs(ptc_bridge_host_t *h)
{
    /* emit_total stays: the cap is per run, however the records are collected */
    return take_array(&h->outputs);
}

const cJSON *ptc_bridge_host_warnings(const ptc_bridge_host_t *h)
{
    return h->warnings;
}

cJSON *ptc_bridge_host_take_warnings(ptc_bridge_host_t *h)
{
    if (h->warnings_dropped > 0) {
        char buf[64];
        snprintf(buf, sizeof buf, "%" PRIu64 " more warnings", h->warnings_dropped);
        cJSON *s = cJSON_CreateString(buf);
        if (s != NULL && cJSON_AddItemToArray(h->warnings, s))
            h->warnings_dropped = 0;
        else
            cJSON_Delete(s);
    }
    return take_array(&h->warnings);
}

uint64_t ptc_bridge_host_harvest(ptc_bridge_host_t *h, cJSON **outputs, cJSON **warnings)
{
    cJSON *out = ptc_bridge_host_take_outputs(h);
    cJSON *warn = ptc_bridge_host_take_warnings(h);
    if (outputs != NULL) {
        *outputs = out;
        out = NULL;
    }
    if (warnings != NULL) { /* none: no array, so that the result says nothing of them */
        *warnings = cJSON_GetArraySize(warn) > 0 ? warn : NULL;
        if (*warnings != NULL) warn = NULL;
    }
    cJSON_Delete(out);
    cJSON_Delete(warn);
    return h->n.tool_calls + h->n.replayed;
}

void ptc_bridge_host_counters(const ptc_bridge_host_t *h, ptc_bridge_counters_t *out)
{
    *out = h->n;
}

bool ptc_bridge_host_peer_closed(const ptc_bridge_host_t *h)
{
    return h->peer_closed;
}

void ptc_bridge_host_rearm(ptc_bridge_host_t *h, ptc_journal_t *journal)
{
    unsigned in_flight = h->n.in_flight; /* counted down as those calls end */
    memset(&h->n, 0, sizeof h->n);
    h->n.in_flight = in_flight;
    h->emit_total = 0;
    h->warnings_dropped = 0;
    cJSON_Delete(take_array(&h->outputs));
    cJSON_Delete(take_array(&h->warnings));
    h->lim.journal = journal;
}

void ptc_bridge_host_close(ptc_bridge_host_t *h, ptc_bridge_counters_t *out)
{
    if (h == NULL || h->closing) return;
    h->closing = true;
    uv_timer_stop(&h->timer);
    while (h->calls != NULL) {
        bh_call_t *c = h->calls;
        /* call_unlink takes c off h->calls (c->h is h, which clang-tidy's analyzer does not see),
         * so no freed call stays the head: a false positive */
        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
        call_abandon(c);
        h->n.cancelled++;
        if (c->method == PTC_BRIDGE_CALL)
            ptc__bh_audit(h, c->tool_id, c->server, c->name, c->digest, "cancelled", c->start_ns,
                          false, "the run ended");
        if (!c->starting) call_free(c); /* else start() frees it when ops->call returns */
    }
    if (out != NULL) *out = h->n;
    if (h->reading) uv_read_stop((uv_stream_t *)&h->pipe);
    uv_close((uv_handle_t *)&h->pipe, on_handle_closed);
    uv_close((uv_handle_t *)&h->timer, on_handle_closed);
}
