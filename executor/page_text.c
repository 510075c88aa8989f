/* page_text.c - one output page as a model reads it: a warning when no sandbox was used, the
 * caller's note, a failure's status line and the last lines of its traceback first (unless the
 * page shows all of it anyway), what self-healing did, stdout and stderr under their headings,
 * the files' lines, the truncation note and the cursor line last. Plain text from plain data:
 * the result's JSON around it is the caller's. And the text of a run still going
 * (exec_running_text) and what a cell's end means for its session (exec_cell_end_note). */
#include "executor.h"

#include <stdlib.h>
#include <string.h>

/* The status line and, when it goes first, the traceback's end. */
static void failure_head(ptc_buf_t *t, const exec_page_t *page, const exec_page_info_t *in)
{
    ptc_buf_printf(t, "Status: %s", in->status);
    if (in->exit_code >= 0) ptc_buf_printf(t, " (exit code %d)", in->exit_code);
    if (in->signal_name != NULL) ptc_buf_printf(t, " (signal %s)", in->signal_name);
    ptc_buf_str(t, "\n");
    /* The end of the traceback goes first unless the page shows all of it anyway. */
    bool tail_first = in->err_tail != NULL && in->err_tail[0] != '\0' &&
                      (page->cursor != NULL || strlen(page->err) < strlen(in->err_tail) ||
                       strlen(page->out) > EXEC_INLINE_OUTPUT);
    if (tail_first) {
        ptc_buf_str(t, "Last lines of stderr:\n");
        ptc_buf_str(t, ptc_text_last_lines(in->err_tail, EXEC_TRACEBACK_LINES));
        ptc_buf_str(t, "\n");
    }
}

/* One stream under its heading (none for a plain stdout), ending in a newline. */
static void stream(ptc_buf_t *t, const char *heading, const char *text)
{
    if (heading != NULL) ptc_buf_str(t, heading);
    ptc_buf_str(t, text);
    if (text[strlen(text) - 1] != '\n') ptc_buf_str(t, "\n");
}

/* The lines after the output: files, truncation, the cursor. */
static void tail(ptc_buf_t *t, const exec_page_t *page, bool first, const exec_page_info_t *in)
{
    if (first && in->files_text != NULL) ptc_buf_str(t, in->files_text);
    /* The first page says so too: a model reading only it must not take the output as whole. */
    if (in->truncated && (first || page->cursor == NULL))
        ptc_buf_printf(t,
                       "[output truncated: %llu bytes of stdout and %llu of stderr were produced; "
                       "only the first part of each was kept (the server's --max-output-bytes)]\n",
                       (unsigned long long)in->out_total, (unsigned long long)in->err_total);
    if (page->cursor != NULL)
        ptc_buf_printf(t, "[more output: call execute_code with cursor \"%s\"]", page->cursor);
}

/* The buffer's text handed over, or its error; frees the buffer. */
static int take_text(ptc_buf_t *t, char **text)
{
    int rc = ptc_buf_error(t);
    if (rc == 0) *text = ptc_buf_take(t, NULL);
    if (rc == 0 && *text == NULL) rc = EXEC_ENOMEM;
    ptc_buf_free(t);
    return rc;
}

int exec_page_text(const exec_page_t *page, bool first, const exec_page_info_t *in, char **text)
{
    *text = NULL;
    if (page == NULL || page->out == NULL || page->err == NULL || in == NULL || in->status == NULL)
        return EXEC_EINVAL;
    bool failed = strcmp(in->status, "ok") != 0;
    bool healed = in->heal != NULL && in->heal[0] != '\0';
    ptc_buf_t t;
    ptc_buf_init(&t, EXEC_PAGE_TEXT_MAX);
    if (in->unsandboxed)
        ptc_buf_str(&t, "WARNING: this code ran WITHOUT a sandbox (--unsafe-no-sandbox).\n");
    if (in->note != NULL) {
        ptc_buf_str(&t, in->note);
        ptc_buf_str(&t, "\n");
    }
    if (failed && first) failure_head(&t, page, in);
    /* What self-healing did comes after the status, before the output it explains. */
    if (healed) {
        ptc_buf_str(&t, in->heal);
        ptc_buf_str(&t, "\n");
    }
    if (page->out[0] != '\0')
        stream(&t, failed || page->err[0] != '\0' || healed ? "--- stdout ---\n" : NULL, page->out);
    if (page->err[0] != '\0') stream(&t, "--- stderr ---\n", page->err);
    if (first && page->out[0] == '\0' && page->err[0] == '\0' && !failed)
        ptc_buf_str(&t, "(no output)\n");
    tail(&t, page, first, in);
    /* Trailing newlines off, so the text ends with the cursor line or the output itself (not
       after a failure: truncating would clear it). */
    size_t len = ptc_buf_len(&t);
    const char *s = ptc_buf_cstr(&t);
    while (ptc_buf_error(&t) == 0 && len > 0 && s[len - 1] == '\n')
        len--;
    if (ptc_buf_error(&t) == 0) ptc_buf_truncate(&t, len);
    return take_text(&t, text);
}

int exec_running_text(const exec_running_info_t *r, char **text)
{
    *text = NULL;
    if (r == NULL || r->out == NULL || r->err == NULL || r->cursor == NULL) return EXEC_EINVAL;
    ptc_buf_t t;
    ptc_buf_init(&t, EXEC_PAGE_TEXT_MAX);
    ptc_buf_printf(&t,
                   "Still running after %.1f s (status running; the run's own limit is %.1f s, "
                   "timeout_seconds). ",
                   (double)r->elapsed_ms / 1000.0, (double)r->timeout_ms / 1000.0);
    bool any = r->out[0] != '\0' || r->err[0] != '\0';
    ptc_buf_str(&t, any ? "Output since the last answer:\n" : "No new output yet.\n");
    if (r->out[0] != '\0') stream(&t, NULL, r->out);
    if (r->err[0] != '\0') stream(&t, "--- stderr ---\n", r->err);
    ptc_buf_printf(&t,
                   "[still running: call execute_code with cursor \"%s\" to wait for more output "
                   "or the result (wait_seconds sets how long), or with that cursor and cancel: "
                   "true to stop it]",
                   r->cursor);
    return take_text(&t, text);
}

void exec_note_line(ptc_buf_t *note, const char *prefix, const char *s)
{
    if (s == NULL) return;
    if (ptc_buf_len(note)) ptc_buf_str(note, "\n");
    if (prefix != NULL) ptc_buf_str(note, prefix);
    ptc_buf_str(note, s);
}

int exec_run_end_note(ptc_buf_t *note, const exec_run_end_t *r)
{
    if (r->status == EXEC_STATUS_TIMEOUT && !r->in_session)
        ptc_buf_printf(note,
                       "The run hit its %.1f s timeout%s and was killed. For more time pass a "
                       "larger timeout_seconds (at most %g, the server's --max-timeout).",
                       r->timeout_s,
                       r->deadline_cut
                           ? " (cut to the request's overall deadline, --request-deadline)"
                           : " (timeout_seconds)",
                       r->max_timeout_s);
    else if (r->cancelled && !r->in_session)
        ptc_buf_str(note, "The run was cancelled (cancel: true) and killed.");
    else if (r->status == EXEC_STATUS_OOM)
        ptc_buf_str(note, "The run hit its memory limit and was killed.");
    return ptc_buf_error(note);
}

/* How the cell ended, when that is worth a sentence. */
static void cell_end(ptc_buf_t *note, const exec_cell_end_t *c)
{
    if (c->cancelled)
        ptc_buf_str(note, c->session_ended
                              ? "The cell was cancelled (cancel: true) and, as it did not stop on "
                                "KeyboardInterrupt, the session was killed: its state is gone."
                              : "The cell was cancelled (cancel: true) and interrupted "
                                "(KeyboardInterrupt); the session lives on with its state.");
    else if (c->timed_out && c->interrupted)
        ptc_buf_printf(note,
                       "The cell hit its %.1f s timeout (timeout_seconds) and was interrupted "
                       "(KeyboardInterrupt); the session lives on with its state. For more time "
                       "pass a larger timeout_seconds (at most %g, the server's --max-timeout).",
                       c->timeout_s, c->max_timeout_s);
    else if (c->timed_out && c->session_ended)
        ptc_buf_printf(note,
                       "The cell hit its %.1f s timeout (timeout_seconds) and did not stop within "
                       "%.0f s of the KeyboardInterrupt, so the session was killed: its state is "
                       "gone. Start a new one with session: \"new\"; for more time pass a larger "
                       "timeout_seconds (at most %g, the server's --max-timeout).",
                       c->timeout_s, EXEC_SESSION_INTERRUPT_GRACE_MS / 1000.0, c->max_timeout_s);
    else if (c->session_ended)
        ptc_buf_printf(note,
                       "The session has ended (%s): its state is gone. Start a new one with "
                       "session: \"new\".",
                       c->end_reason ? c->end_reason : "its interpreter stopped");
}

int exec_cell_end_note(ptc_buf_t *note, const exec_cell_end_t *c)
{
    if (ptc_buf_len(note)) ptc_buf_str(note, "\n");
    cell_end(note, c);
    if (!c->session_ended) {
        size_t n = ptc_buf_len(note);
        if (n > 0 && ptc_buf_cstr(note)[n - 1] != '\n') ptc_buf_str(note, "\n");
        if (c->fresh)
            ptc_buf_printf(note,
                           "Session \"%s\" started: pass \"session\": \"%s\" to run more code in "
                           "this interpreter (variables, imports and files in /tmp are kept); "
                           "{\"session\": \"%s\", \"close_session\": true} ends it.",
                           c->handle, c->handle, c->handle);
        else
            ptc_buf_printf(note, "Session \"%s\", cell %lu.", c->handle, c->cells);
    }
    return ptc_buf_error(note);
}
