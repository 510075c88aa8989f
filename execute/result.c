/* result.c - execute_code's result shaped for MCP: the structured fields every result
 * carries, its notes, the files' listing and image blocks, and the text of each page, which the
 * executor writes (exec_page_text: failures' last traceback lines first, what self-healing did,
 * the output, the cursor line) over the pages it keeps (exec_pages_first, exec_pages_next). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* --- the model-facing text ----------------------------------------------------------------- */

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

/* What the page's text says around its output, read from the run's fields in sc. */
static exec_page_info_t info_of(const cJSON *sc)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(sc, "exit_code");
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(sc, "signal");
    const cJSON *sandbox = cJSON_GetObjectItemCaseSensitive(sc, "sandbox");
    return (exec_page_info_t){
        .status = cJSON_GetObjectItemCaseSensitive(sc, "status")->valuestring,
        .exit_code = cJSON_IsNumber(code) ? code->valueint : -1,
        .signal_name = cJSON_IsString(sig) ? sig->valuestring : NULL,
        .unsandboxed = cJSON_IsString(sandbox) && strcmp(sandbox->valuestring, "none") == 0,
        .truncated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sc, "truncated")),
        .out_total = (uint64_t)cJSON_GetObjectItemCaseSensitive(sc, "stdout_bytes")->valuedouble,
        .err_total = (uint64_t)cJSON_GetObjectItemCaseSensitive(sc, "stderr_bytes")->valuedouble,
    };
}

/*
 * Builds the result of one page: sc holds the run's fields (status, codes, byte counts...) and
 * gets the page's stdout, stderr and next_cursor added; the text is the executor's
 * (exec_page_text: failures' last traceback lines first, the cursor line last).
 */
static void finish_page_with(mcp_call_t *call, cJSON *sc, const exec_page_t *page, bool first,
                             const char *note, const char *err_tail, const char *heal,
                             const char *files_text, cJSON *images)
{
    exec_page_info_t in = info_of(sc);
    bool failed = strcmp(in.status, "ok") != 0;
    in.note = note;
    in.err_tail = err_tail;
    in.heal = heal;
    in.files_text = files_text;
    char *text = NULL;
    int rc = exec_page_text(page, first, &in, &text);
    cJSON_AddStringToObject(sc, "stdout", page->out);
    cJSON_AddStringToObject(sc, "stderr", page->err);
    if (page->cursor)
        cJSON_AddStringToObject(sc, "next_cursor", page->cursor);
    else
        cJSON_AddNullToObject(sc, "next_cursor");
    cJSON *content = rc == 0 ? mcp_text_content(text) : NULL;
    free(text);
    if (content == NULL) {
        cJSON_Delete(sc);
        cJSON_Delete(images);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    /* The pictures follow the text, as blocks of their own: their bytes are nowhere else. */
    cJSON *img;
    while (images != NULL && (img = cJSON_DetachItemFromArray(images, 0)))
        cJSON_AddItemToArray(content, img);
    cJSON_Delete(images);
    mcp_call_finish(call, content, sc, failed);
}

void ptc__execute_finish_page(mcp_call_t *call, cJSON *sc, const exec_page_t *page, bool first,
                              const char *note, const char *err_tail, const char *heal)
{
    finish_page_with(call, sc, page, first, note, err_tail, heal, NULL, NULL);
}

/* --- files out ----------------------------------------------------------------------------- */

#define FILES_URI_PREFIX "ptc://files/"

static cJSON *image_block(const exec_file_t *f, const char *mime)
{
    char *b64 = ptc_base64(f->data, f->len);
    cJSON *blk = b64 ? mcp_media_block("image", b64, mime) : NULL;
    free(b64);
    return blk;
}

/* One entry of structuredContent.files (and its line of text); keeps the bytes in the store. */
static bool keep_one(ptc_execute_t *ex, const mcp_identity_t *owner, const exec_file_t *f,
                     outcome_t *o, ptc_buf_t *text, size_t *shown)
{
    const exec_keep_bounds_t b = {.image_max = ex->image_max_bytes,
                                  .images_max = EXECUTE_IMAGES_MAX_RESULT_BYTES};
    exec_kept_file_t k;
    if (exec_filestore_keep(ex->files, owner->b, f, uv_now(ex->loop), &b, shown, &k) < 0)
        return false;
    char *uri = NULL;
    cJSON *e = cJSON_CreateObject();
    bool ok = e != NULL && cJSON_AddItemToArray(o->files, e);
    if (!ok) cJSON_Delete(e);
    if (ok && k.key != NULL) {
        size_t pl = strlen(FILES_URI_PREFIX), kl = strlen(k.key);
        ok = (uri = malloc(pl + kl + 1)) != NULL;
        if (ok) {
            memcpy(uri, FILES_URI_PREFIX, pl);
            memcpy(uri + pl, k.key, kl + 1);
        }
    }
    ok = ok && cJSON_AddStringToObject(e, "name", k.name) &&
         cJSON_AddStringToObject(e, "mime_type", k.mime) &&
         cJSON_AddNumberToObject(e, "bytes", (double)k.size) &&
         (uri ? cJSON_AddStringToObject(e, "uri", uri) : cJSON_AddNullToObject(e, "uri"));
    if (ok && k.truncated) ok = cJSON_AddBoolToObject(e, "truncated", true);
    if (ok && k.omitted) ok = cJSON_AddBoolToObject(e, "omitted", true);
    if (ok && k.reason) ok = cJSON_AddStringToObject(e, "reason", k.reason);
    if (ok && k.picture) {
        cJSON *blk = image_block(f, k.mime);
        ok = blk != NULL && cJSON_AddItemToArray(o->images, blk);
        if (!ok) cJSON_Delete(blk);
    }
    if (ok) (void)exec_kept_file_line(text, &k, uri); /* the buffer's failure is checked once */
    free(uri);
    exec_kept_file_clear(&k);
    return ok;
}

int ptc__execute_keep_files(ptc_execute_t *ex, const mcp_identity_t *owner, const exec_result_t *r,
                            outcome_t *o)
{
    o->files = cJSON_CreateArray();
    o->images = cJSON_CreateArray();
    if (o->files == NULL || o->images == NULL) return MCP_ENOMEM;
    if (r->n_files == 0) return 0;
    ptc_buf_t text;
    ptc_buf_init(&text, PTC_CAP_EXECUTE_TEXT);
    ptc_buf_printf(&text, "Files in %s (readable through resources/read):\n", EXEC_OUTPUT_DIR);
    size_t shown = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < r->n_files; i++)
        ok = keep_one(ex, owner, &r->files[i], o, &text, &shown);
    o->files_text = ok ? ptc_buf_take(&text, NULL) : NULL;
    ptc_buf_free(&text);
    return o->files_text != NULL ? 0 : MCP_ENOMEM;
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
              cJSON_AddStringToObject(sc, "sandbox", sandbox) &&
              cJSON_AddArrayToObject(sc, "files");
    if (!ok) {
        cJSON_Delete(sc);
        return NULL;
    }
    return sc;
}

/* The packages' state while building or after a failure (environment/), into sc. */
static bool add_env(const ptc_execute_t *ex, cJSON *sc)
{
    cJSON *env = env_host_result_json(ex->env);
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
    cJSON_Delete(o->files);
    cJSON_Delete(o->images);
    free(o->files_text);
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
        /* a repair reruns the cell in the same interpreter (its state is what the cell
           needs); when the cell ended the session there is none to rerun it in */
        .no_rerun = o->session_ended ? "the cell ended its session (its state is gone)" : NULL,
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
    ptc_buf_t note;
    ptc_buf_init(&note, PTC_CAP_EXECUTE_TEXT);
    const exec_run_end_t end = {.status = o->status,
                                .cancelled = o->cancelled,
                                .in_session = j->sess != NULL, /* see ptc__session_result */
                                .timeout_s = (double)o->timeout_ms / 1000.0,
                                .deadline_cut = o->deadline_cut,
                                .max_timeout_s = ex->max_timeout_s};
    (void)exec_run_end_note(&note, &end); /* the buffer's failure is checked once, below */
    const cJSON *w;
    cJSON_ArrayForEach(w, o->warnings)
    {
        if (cJSON_IsString(w)) exec_note_line(&note, "Warning: ", w->valuestring);
    }
    /* A run without the declared packages (--packages-optional after a failed build). */
    char *env_note = env_host_result_note(ex->env);
    exec_note_line(&note, NULL, env_note);
    free(env_note);
    /* A failed run past --startup-wait may have missed a server's module: say which are
     * still starting, rather than let "No module named 'tools.X'" stand alone. */
    char starting[800];
    if (o->status != EXEC_STATUS_OK && ex->attached &&
        ex->peers.still_starting(ex->peers.data, starting, sizeof starting) > 0)
        exec_note_line(&note, NULL, starting);
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
        if (o->files != NULL) {
            cJSON_ReplaceItemInObjectCaseSensitive(sc, "files", o->files);
            o->files = NULL;
        }
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
    int rc = meta_text
                 ? exec_pages_first(ex->pages, j->owner.b, meta_text, o->out, o->out_len, o->err,
                                    o->err_len, ex->page_chars, uv_now(ex->loop), &page)
                 : EXEC_ENOMEM;
    cJSON_free(meta_text);
    char *err = o->err;
    o->err = NULL;
    cJSON *images = o->images;
    o->images = NULL;
    char *files_text = o->files_text;
    o->files_text = NULL;
    ptc__execute_job_free(j);
    if (rc < 0 || !ok || ptc_buf_error(&note) != 0) {
        free(err);
        ptc_buf_free(&note);
        free(heal);
        free(files_text);
        cJSON_Delete(images);
        cJSON_Delete(sc);
        if (rc == 0) exec_page_clear(&page);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR,
                                  "out of memory building the result");
        return;
    }
    finish_page_with(call, sc, &page, true, ptc_buf_len(&note) ? ptc_buf_cstr(&note) : NULL, err,
                     heal, files_text, images);
    ptc_buf_free(&note);
    free(heal);
    free(err);
    free(files_text);
    exec_page_clear(&page);
}

void ptc__execute_fetch_page(ptc_execute_t *ex, mcp_call_t *call, const char *cursor)
{
    exec_page_t page;
    mcp_identity_t who;
    mcp_call_identity(call, &who);
    int rc = exec_pages_next(ex->pages, who.b, cursor, uv_now(ex->loop), &page);
    if (rc == EXEC_EEXPIRED) {
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
