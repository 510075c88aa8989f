/* execute_result.c - execute_code's result as a model reads it: the structured fields every
 * result carries, the text (failures' last traceback lines first, what self-healing did, the
 * output, the cursor line), cut into pages kept in the executor's page store. */
#include "execute_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* --- the model-facing text ----------------------------------------------------------------- */

void ptc__sb_put(sbuf_t *b, const char *s, size_t n)
{
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (ns == NULL) {
            b->failed = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void ptc__sb_str(sbuf_t *b, const char *s)
{
    ptc__sb_put(b, s, strlen(s));
}

void ptc__sb_fmt(sbuf_t *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    ptc__sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static cJSON *meta_of(const cJSON *sc)
{
    /* What a page repeats of its run: everything but the page's own text and cursor. */
    cJSON *m = cJSON_Duplicate(sc, true);
    if (m == NULL) return NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(m, "stdout");
    cJSON_DeleteItemFromObjectCaseSensitive(m, "stderr");
    cJSON_DeleteItemFromObjectCaseSensitive(m, "next_cursor");
    /* Emitted records come with the first page only. */
    cJSON_ReplaceItemInObjectCaseSensitive(m, "outputs", cJSON_CreateArray());
    return m;
}

/*
 * Builds the result of one page: sc holds the run's fields (status, codes, byte counts...) and
 * gets the page's stdout, stderr and next_cursor added; the text puts failures' last traceback
 * lines first and always ends with the cursor line when there is more.
 */
void ptc__execute_finish_page(mcp_call_t *call, cJSON *sc, const exec_page_t *page, bool first,
                              const char *note, const char *err_tail, const char *heal)
{
    const char *status = cJSON_GetObjectItemCaseSensitive(sc, "status")->valuestring;
    bool failed = strcmp(status, "ok") != 0;
    cJSON_AddStringToObject(sc, "stdout", page->out);
    cJSON_AddStringToObject(sc, "stderr", page->err);
    if (page->cursor)
        cJSON_AddStringToObject(sc, "next_cursor", page->cursor);
    else
        cJSON_AddNullToObject(sc, "next_cursor");

    sbuf_t t = {0};
    const cJSON *sandbox = cJSON_GetObjectItemCaseSensitive(sc, "sandbox");
    if (cJSON_IsString(sandbox) && strcmp(sandbox->valuestring, "none") == 0)
        ptc__sb_str(&t, "WARNING: this code ran WITHOUT a sandbox (--unsafe-no-sandbox).\n");
    if (note) {
        ptc__sb_str(&t, note);
        ptc__sb_str(&t, "\n");
    }
    if (failed && first) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(sc, "exit_code");
        const cJSON *sig = cJSON_GetObjectItemCaseSensitive(sc, "signal");
        ptc__sb_fmt(&t, "Status: %s", status);
        if (cJSON_IsNumber(code)) ptc__sb_fmt(&t, " (exit code %d)", code->valueint);
        if (cJSON_IsString(sig)) ptc__sb_fmt(&t, " (signal %s)", sig->valuestring);
        ptc__sb_str(&t, "\n");
        /* The end of the traceback goes first unless the page shows all of it anyway. */
        bool tail_first = err_tail != NULL && err_tail[0] != '\0' &&
                          (page->cursor != NULL || strlen(page->err) < strlen(err_tail) ||
                           strlen(page->out) > EXECUTE_INLINE_OUTPUT);
        if (tail_first) {
            ptc__sb_str(&t, "Last lines of stderr:\n");
            ptc__sb_str(&t, ptc_repair_last_lines(err_tail, EXECUTE_TRACEBACK_LINES));
            ptc__sb_str(&t, "\n");
        }
    }
    /* What self-healing did comes after the status, before the output it explains. */
    if (heal != NULL && heal[0] != '\0') {
        ptc__sb_str(&t, heal);
        ptc__sb_str(&t, "\n");
    }
    if (page->out[0] != '\0') {
        if (failed || page->err[0] != '\0' || (heal != NULL && heal[0] != '\0'))
            ptc__sb_str(&t, "--- stdout ---\n");
        ptc__sb_str(&t, page->out);
        if (page->out[strlen(page->out) - 1] != '\n') ptc__sb_str(&t, "\n");
    }
    if (page->err[0] != '\0') {
        ptc__sb_str(&t, "--- stderr ---\n");
        ptc__sb_str(&t, page->err);
        if (page->err[strlen(page->err) - 1] != '\n') ptc__sb_str(&t, "\n");
    }
    if (first && page->out[0] == '\0' && page->err[0] == '\0' && !failed)
        ptc__sb_str(&t, "(no output)\n");
    const cJSON *trunc = cJSON_GetObjectItemCaseSensitive(sc, "truncated");
    if (cJSON_IsTrue(trunc) && page->cursor == NULL) {
        ptc__sb_fmt(&t,
                    "[output truncated: %.0f bytes of stdout and %.0f of stderr were produced; "
                    "only the first part was kept]\n",
                    cJSON_GetObjectItemCaseSensitive(sc, "stdout_bytes")->valuedouble,
                    cJSON_GetObjectItemCaseSensitive(sc, "stderr_bytes")->valuedouble);
    }
    if (page->cursor)
        ptc__sb_fmt(&t, "[more output: call execute_code with cursor \"%s\"]", page->cursor);
    if (t.failed || t.s == NULL) {
        free(t.s);
        cJSON_Delete(sc);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    /* Trailing newline off, so the text ends with the cursor line or the output itself. */
    while (t.len > 0 && t.s[t.len - 1] == '\n')
        t.s[--t.len] = '\0';
    cJSON *content = mcp_text_content(t.s);
    free(t.s);
    mcp_call_finish(call, content, sc, failed);
}

/* The fields every result carries, before the page's own. Takes nothing. */
cJSON *ptc__execute_base_fields(const char *status, int exit_code, const char *signal,
                                uint64_t out_b, uint64_t err_b, bool truncated,
                                uint64_t duration_ms, const char *sandbox)
{
    cJSON *sc = cJSON_CreateObject();
    if (sc == NULL) return NULL;
    bool ok = cJSON_AddStringToObject(sc, "status", status) &&
              (exit_code >= 0 ? cJSON_AddNumberToObject(sc, "exit_code", exit_code)
                              : cJSON_AddNullToObject(sc, "exit_code")) &&
              (signal ? cJSON_AddStringToObject(sc, "signal", signal)
                      : cJSON_AddNullToObject(sc, "signal")) &&
              cJSON_AddNumberToObject(sc, "stdout_bytes", (double)out_b) &&
              cJSON_AddNumberToObject(sc, "stderr_bytes", (double)err_b) &&
              cJSON_AddBoolToObject(sc, "truncated", truncated) &&
              cJSON_AddNumberToObject(sc, "duration_ms", (double)duration_ms) &&
              cJSON_AddNumberToObject(sc, "tool_calls", 0) &&
              cJSON_AddArrayToObject(sc, "outputs") && cJSON_AddArrayToObject(sc, "attempts") &&
              cJSON_AddStringToObject(sc, "sandbox", sandbox);
    if (!ok) {
        cJSON_Delete(sc);
        return NULL;
    }
    return sc;
}

/* The packages' state while building or after a failure (environment.c), into sc. */
static bool add_env(const ptc_execute_t *ex, cJSON *sc)
{
    cJSON *env = ptc_env_result_json(ex->env);
    return env == NULL || cJSON_AddItemToObject(sc, "environment", env);
}

void ptc__execute_finish_refused(ptc_execute_t *ex, mcp_call_t *call, const char *message)
{
    ptc__execute_finish_message(ex, call, "refused", message);
}

void ptc__execute_finish_message(ptc_execute_t *ex, mcp_call_t *call, const char *status,
                                 const char *message)
{
    cJSON *sc =
        ptc__execute_base_fields(status, -1, NULL, 0, 0, false, 0, ex->unsafe ? "none" : "full");
    if (sc != NULL && !add_env(ex, sc)) {
        cJSON_Delete(sc);
        sc = NULL;
    }
    char empty_out[1] = "", empty_err[1] = "";
    exec_page_t page = {.out = empty_out, .err = empty_err, .cursor = NULL};
    if (sc == NULL) {
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    ptc__execute_finish_page(call, sc, &page, true, message, NULL, NULL);
}

void ptc__execute_outcome_clear(outcome_t *o)
{
    free(o->out);
    free(o->err);
    free(o->signal_name);
    cJSON_Delete(o->outputs);
    cJSON_Delete(o->warnings);
    memset(o, 0, sizeof *o);
}

/* --- the final answer ---------------------------------------------------------------------- */

ptc_repair_run_t ptc__execute_run_of(const outcome_t *o)
{
    return (ptc_repair_run_t){
        .status = exec_status_name(o->status),
        .exit_code = o->exit_code,
        .signal_name = o->signal_name,
        .err = o->err,
        .timeout_ms = o->timeout_ms,
        .duration_ms = o->duration_ms,
        .tool_calls = o->tool_calls,
    };
}

void ptc__execute_finish_job(job_t *j)
{
    ptc_execute_t *ex = j->ex;
    mcp_call_t *call = j->call;
    outcome_t *o = &j->last;
    cJSON *sc = ptc__execute_base_fields(exec_status_name(o->status), o->exit_code, o->signal_name,
                                         o->out_total, o->err_total, o->truncated, o->duration_ms,
                                         exec_sandbox_level_name(o->sandbox));
    sbuf_t note = {0};
    if (o->status == EXEC_STATUS_TIMEOUT && j->sess == NULL) /* a session's cell: see below */
        ptc__sb_fmt(&note,
                    "The run hit its %.1f s timeout%s and was killed. For more time pass a larger "
                    "timeout_seconds (at most %g, the server's --max-timeout).",
                    (double)o->timeout_ms / 1000.0,
                    o->deadline_cut ? " (cut to the request's overall deadline, --request-deadline)"
                                    : " (timeout_seconds)",
                    ex->max_timeout_s);
    else if (o->cancelled && j->sess == NULL)
        ptc__sb_str(&note, "The run was cancelled (cancel: true) and killed.");
    else if (o->status == EXEC_STATUS_OOM)
        ptc__sb_str(&note, "The run hit its memory limit and was killed.");
    const cJSON *w;
    cJSON_ArrayForEach(w, o->warnings)
    {
        if (!cJSON_IsString(w)) continue;
        if (note.len) ptc__sb_str(&note, "\n");
        ptc__sb_str(&note, "Warning: ");
        ptc__sb_str(&note, w->valuestring);
    }
    /* A run without the declared packages (--packages-optional after a failed build). */
    char *env_note = ptc_env_result_note(ex->env);
    if (env_note != NULL) {
        if (note.len) ptc__sb_str(&note, "\n");
        ptc__sb_str(&note, env_note);
        free(env_note);
    }
    /* What self-healing did: the history, why it stopped, the final code, the packet. */
    char *heal = NULL;
    cJSON *packet = NULL;
    ptc_repair_run_t run = ptc__execute_run_of(o);
    bool ok = sc != NULL && ptc_repair_loop_report(j->loop, &run, &heal, &packet) == 0 &&
              ptc__session_result(j, sc, &note);
    cJSON *attempts = ptc_repair_loop_take_attempts(j->loop);
    if (ok) ok = add_env(ex, sc);
    if (ok) {
        cJSON_ReplaceItemInObjectCaseSensitive(sc, "tool_calls",
                                               cJSON_CreateNumber((double)o->tool_calls));
        cJSON_ReplaceItemInObjectCaseSensitive(sc, "outputs", o->outputs);
        o->outputs = NULL;
        bool repaired = cJSON_GetArraySize(attempts) > 1;
        cJSON_ReplaceItemInObjectCaseSensitive(sc, "attempts", attempts);
        attempts = NULL;
        if (repaired)
            ok = cJSON_AddStringToObject(sc, "final_code", ptc_repair_loop_code(j->loop)) != NULL;
        if (ok && packet != NULL) {
            ok = cJSON_AddItemToObject(sc, "repair", packet);
            if (ok) packet = NULL;
        }
    }
    cJSON_Delete(attempts);
    cJSON_Delete(packet);
    cJSON *meta = ok ? meta_of(sc) : NULL;
    char *meta_text = meta ? cJSON_PrintUnformatted(meta) : NULL;
    cJSON_Delete(meta);
    exec_page_t page;
    int rc = meta_text ? exec_pages_first(ex->pages, meta_text, o->out, o->out_len, o->err,
                                          o->err_len, ex->page_chars, uv_now(ex->loop), &page)
                       : EXEC_PAGES_ENOMEM;
    cJSON_free(meta_text);
    char *err = o->err;
    o->err = NULL;
    ptc__execute_job_free(j);
    if (rc < 0 || !ok || note.failed) {
        free(err);
        free(note.s);
        free(heal);
        cJSON_Delete(sc);
        if (rc == 0) exec_page_clear(&page);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR,
                                  "out of memory building the result");
        return;
    }
    ptc__execute_finish_page(call, sc, &page, true, note.s, err, heal);
    free(note.s);
    free(heal);
    free(err);
    exec_page_clear(&page);
}

void ptc__execute_fetch_page(ptc_execute_t *ex, mcp_call_t *call, const char *cursor)
{
    exec_page_t page;
    int rc = exec_pages_next(ex->pages, cursor, uv_now(ex->loop), &page);
    if (rc == EXEC_PAGES_EXPIRED) {
        mcp_call_finish_text(call, true,
                             "Unknown or expired cursor: output is kept for 30 minutes after its "
                             "last page was read. Run the code again.");
        return;
    }
    cJSON *sc = rc == 0 && page.meta ? cJSON_Parse(page.meta) : NULL;
    if (sc == NULL) {
        exec_page_clear(&page);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    ptc__execute_finish_page(call, sc, &page, false, NULL, NULL, NULL);
    exec_page_clear(&page);
}
