/* page_text.c - one output page as a model reads it: a warning when no sandbox was used, the
 * caller's note, a failure's status line and the last lines of its traceback first (unless the
 * page shows all of it anyway), what self-healing did, stdout and stderr under their headings,
 * the files' lines, the truncation note and the cursor line last. Plain text from plain data:
 * the result's JSON around it is the caller's. */
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
    int rc = ptc_buf_error(&t);
    /* Trailing newlines off, so the text ends with the cursor line or the output itself. */
    size_t len = ptc_buf_len(&t);
    const char *s = ptc_buf_cstr(&t);
    while (len > 0 && s[len - 1] == '\n')
        len--;
    ptc_buf_truncate(&t, len);
    if (rc == 0) *text = ptc_buf_take(&t, NULL);
    if (rc == 0 && *text == NULL) rc = EXEC_ENOMEM;
    ptc_buf_free(&t);
    return rc;
}
