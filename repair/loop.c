/* loop.c - the repair loop of one execute_code request (docs/self-healing.md): the attempts,
 * their history, the stop rules, the repair requests and the deadline, driven through the
 * host's operations (ptc_repair_ops_t): the loop itself never runs code nor talks to a model. */
#include "repair.h"

#include "base.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ptc_repair_loop {
    uv_loop_t *uv;
    const ptc_repair_ops_t *ops;
    void *data;
    uint64_t timeout_ms;             /* asked for each run */
    size_t code_max;                 /* a repair longer than this holds no usable code */
    uint64_t t0, deadline;           /* uv_now() at the start, and when the request must end */
    uint64_t last_read;              /* the clock's last reading (ms since t0) */
    long max_repairs, repairs_used;  /* max_repairs 0: no self-healing */
    bool no_repairer;                /* asked for, but nobody can repair (known at the start) */
    unsigned attempt;                /* 1-based, the current run's */
    char *codes[PTC_REPAIR_MAX + 1]; /* every attempt's program */
    cJSON *attempts;                 /* the history for the result */
    ptc_journal_t *journal;          /* NULL without self-healing */
    bool have_last;                  /* a run has finished */
    char last_fp[PTC_REPAIR_FP_MAX]; /* its fingerprint */
    void *ask;                       /* the repair request in flight (the host's handle) */
    const ptc_repairer_desc_t *by;   /* who repaired (NULL before the first request) */
    uv_timer_t *timer;               /* the deadline while a repair is asked for */
    char stop_reason[400];
};

/* --- set-up -------------------------------------------------------------------------------- */

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

int ptc_repair_loop_new(uv_loop_t *uv, const char *code, uint64_t timeout_ms, long max_repairs,
                        uint64_t deadline_ms, size_t code_max, const ptc_repair_ops_t *ops,
                        void *data, ptc_repair_loop_t **out)
{
    *out = NULL;
    if (max_repairs < 0 || max_repairs > PTC_REPAIR_MAX) return PTC_REPAIR_EINVAL;
    ptc_repair_loop_t *l = calloc(1, sizeof *l);
    if (l == NULL) return PTC_REPAIR_ENOMEM;
    l->uv = uv;
    l->ops = ops;
    l->data = data;
    l->attempt = 1;
    l->timeout_ms = timeout_ms ? timeout_ms : 1;
    l->code_max = code_max;
    l->max_repairs = max_repairs;
    l->t0 = uv_now(uv);
    /* A run asked to last longer than the deadline gets its time; repairs then get none. */
    l->deadline = l->t0 + (l->timeout_ms > deadline_ms ? l->timeout_ms : deadline_ms);
    l->codes[0] = strdup(code);
    l->attempts = cJSON_CreateArray();
    if (l->codes[0] == NULL || l->attempts == NULL ||
        (max_repairs > 0 && ptc_journal_new(&l->journal) < 0)) {
        ptc_repair_loop_free(l);
        return PTC_REPAIR_ENOMEM;
    }
    *out = l;
    return 0;
}

void ptc_repair_loop_free(ptc_repair_loop_t *l)
{
    if (l == NULL) return;
    if (l->timer != NULL) {
        uv_timer_stop(l->timer);
        uv_close((uv_handle_t *)l->timer, timer_closed);
    }
    if (l->ask != NULL) l->ops->cancel(l->data, l->ask);
    ptc_journal_free(l->journal);
    for (size_t i = 0; i < sizeof l->codes / sizeof l->codes[0]; i++)
        free(l->codes[i]);
    cJSON_Delete(l->attempts);
    free(l);
}

/* --- what the host reads ------------------------------------------------------------------- */

bool ptc_repair_loop_healing(const ptc_repair_loop_t *l)
{
    return l->max_repairs > 0 && !l->no_repairer;
}

unsigned ptc_repair_loop_attempt(const ptc_repair_loop_t *l)
{
    return l->attempt;
}

long ptc_repair_loop_max_repairs(const ptc_repair_loop_t *l)
{
    return l->max_repairs;
}

const char *ptc_repair_loop_code(const ptc_repair_loop_t *l)
{
    return l->codes[l->attempt - 1];
}

ptc_journal_t *ptc_repair_loop_journal(const ptc_repair_loop_t *l)
{
    return l->journal;
}

bool ptc_repair_loop_asking(const ptc_repair_loop_t *l)
{
    return l->ask != NULL;
}

void ptc_repair_loop_clock(ptc_repair_loop_t *l, double *elapsed_ms, double *total_ms)
{
    /* uv_now() stands still within a loop iteration, and MCP wants each progress value above
     * the one before: a run's last tick and the "attempt N failed; asking ..." that follows its
     * end in the same millisecond read one ms apart here, so the elapsed time a client sees
     * stays whole milliseconds (mcp/ would otherwise raise the second by a hair). */
    uint64_t now = uv_now(l->uv) - l->t0;
    l->last_read = now > l->last_read ? now : l->last_read + 1;
    *elapsed_ms = (double)l->last_read;
    *total_ms = (double)(l->deadline - l->t0);
}

const char *ptc_repair_loop_stopped(const ptc_repair_loop_t *l)
{
    return l->stop_reason;
}

cJSON *ptc_repair_loop_take_attempts(ptc_repair_loop_t *l)
{
    cJSON *a = l->attempts;
    l->attempts = NULL;
    return a;
}

/* --- the loop ------------------------------------------------------------------------------ */

static void progress(ptc_repair_loop_t *l, const char *msg)
{
    if (l->ops->progress == NULL) return;
    double elapsed, total;
    ptc_repair_loop_clock(l, &elapsed, &total);
    l->ops->progress(l->data, elapsed, total, msg);
}

void ptc_repair_loop_run_progress(ptc_repair_loop_t *l, uint64_t elapsed_ms, uint64_t output_bytes,
                                  uint64_t tool_calls)
{
    if (l->ops->progress == NULL) return;
    char msg[160];
    int k = 0;
    bool healing = ptc_repair_loop_healing(l);
    if (healing)
        k = snprintf(msg, sizeof msg, "attempt %u of %ld: ", l->attempt, l->max_repairs + 1);
    snprintf(msg + k, sizeof msg - (size_t)k,
             "running %.1f s, %llu bytes of output, %llu tool calls", (double)elapsed_ms / 1000.0,
             (unsigned long long)output_bytes, (unsigned long long)tool_calls);
    /* Without repairs progress is the run's own clock; with them, the request's (runs and
     * repairs together), so that it keeps increasing from one attempt to the next. */
    double elapsed = (double)elapsed_ms, total = (double)l->timeout_ms;
    if (healing) ptc_repair_loop_clock(l, &elapsed, &total);
    l->ops->progress(l->data, elapsed, total, msg);
}

/* Ends the loop with the last failure and says why no (further) repair was made. The host's
 * finish may free the loop: callers return right after. */
static void stop(ptc_repair_loop_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void stop(ptc_repair_loop_t *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->stop_reason, sizeof l->stop_reason, fmt, ap);
    va_end(ap);
    l->ops->finish(l->data);
}

/* Starts the current attempt's run; on failure answers (refused, or the last failure). */
static void start_run(ptc_repair_loop_t *l)
{
    uint64_t now = uv_now(l->uv);
    uint64_t timeout = l->timeout_ms;
    if (ptc_repair_loop_healing(l)) {
        uint64_t left = l->deadline > now ? l->deadline - now : 0;
        if (left < timeout) timeout = left;
    }
    if (timeout == 0) timeout = 1;
    if (l->journal != NULL) ptc_journal_begin_attempt(l->journal);
    char msg[400] = "";
    if (l->ops->run(l->data, ptc_repair_loop_code(l), timeout, msg, sizeof msg) >= 0) return;
    if (l->have_last) {
        stop(l, "the repaired code could not be started: %s", msg);
        return;
    }
    l->ops->refused(l->data, msg);
}

void ptc_repair_loop_start(ptc_repair_loop_t *l)
{
    /* Without anyone to repair (a client that cannot sample and no --repair-url), progress and
     * the result say nothing of attempts or of why repairs stopped: the failure comes with the
     * repair packet for the client's own model, as it would after repairs. */
    char why[300];
    if (l->max_repairs > 0 && l->ops->repairer(l->data, why, sizeof why) == NULL) {
        l->no_repairer = true;
        ptc_journal_free(l->journal); /* nothing will be rerun */
        l->journal = NULL;
    }
    start_run(l);
}

void ptc_repair_loop_refused(ptc_repair_loop_t *l, const char *message)
{
    if (l->have_last) {
        stop(l, "the repaired code could not be run: %s", message);
        return;
    }
    l->ops->refused(l->data, message);
}

static bool failed(const ptc_repair_run_t *r)
{
    return strcmp(r->status, "ok") != 0;
}

/* Appends the finished attempt to the history. */
static void record_attempt(ptc_repair_loop_t *l, const ptc_repair_run_t *r, const char *fp,
                           cJSON *replayed)
{
    cJSON *a = cJSON_CreateObject();
    char changes[64] = "";
    unsigned n = l->attempt;
    if (n > 1)
        ptc_repair_diff_summary(l->codes[n - 2], ptc_repair_loop_code(l), changes, sizeof changes);
    bool ok = a != NULL && cJSON_AddNumberToObject(a, "attempt", n) &&
              cJSON_AddStringToObject(a, "status", r->status) &&
              (r->exit_code >= 0 ? cJSON_AddNumberToObject(a, "exit_code", r->exit_code)
                                 : cJSON_AddNullToObject(a, "exit_code")) &&
              (fp != NULL ? cJSON_AddStringToObject(a, "error", fp)
                          : cJSON_AddNullToObject(a, "error")) &&
              (n > 1 ? cJSON_AddStringToObject(a, "changes", changes)
                     : cJSON_AddNullToObject(a, "changes")) &&
              (n > 1 && l->by != NULL ? cJSON_AddStringToObject(a, "repaired_by", l->by->id)
                                      : cJSON_AddNullToObject(a, "repaired_by")) &&
              cJSON_AddNumberToObject(a, "duration_ms", (double)r->duration_ms) &&
              cJSON_AddNumberToObject(a, "tool_calls", (double)r->tool_calls);
    if (ok && replayed != NULL) {
        ok = cJSON_AddItemToObject(a, "replayed", replayed);
        if (ok) replayed = NULL;
    } else if (ok) {
        ok = cJSON_AddArrayToObject(a, "replayed") != NULL;
    }
    cJSON_Delete(replayed);
    if (!ok || !cJSON_AddItemToArray(l->attempts, a)) cJSON_Delete(a);
}

/* The failed run's error as sent to a repairer and shown in the packet: its last lines. */
static void error_tail(const ptc_repair_run_t *r, ptc_buf_t *b)
{
    if (strcmp(r->status, "timeout") == 0)
        ptc_buf_printf(b, "(the run was killed at its %.1f s timeout)\n",
                       (double)r->timeout_ms / 1000.0);
    else if (strcmp(r->status, "oom") == 0)
        ptc_buf_str(b, "(the run was killed at its memory limit)\n");
    else if (strcmp(r->status, "killed") == 0)
        ptc_buf_printf(b, "(the run was killed by %s)\n",
                       r->signal_name ? r->signal_name : "a signal");
    ptc_buf_str(b, ptc_text_last_lines(r->err ? r->err : "", PTC_REPAIR_ERROR_LINES));
}

static void on_deadline(uv_timer_t *t)
{
    ptc_repair_loop_t *l = t->data;
    if (l->ask != NULL) l->ops->cancel(l->data, l->ask);
    l->ask = NULL;
    stop(l, "the request's overall deadline (%.0f s) passed while waiting for the repair",
         (double)(l->deadline - l->t0) / 1000.0);
}

static void on_repaired(void *data, int err, const char *reply, const char *message)
{
    ptc_repair_loop_t *l = data;
    l->ask = NULL;
    if (l->timer != NULL) uv_timer_stop(l->timer);
    if (err < 0) {
        stop(l, "the %s did not give a fix: %s", l->by->who,
             message ? message : l->ops->strerror(err));
        return;
    }
    char *code = ptc_repair_extract_code(reply);
    if (code == NULL) {
        stop(l, "out of memory reading the repair");
        return;
    }
    if (code[0] == '\0' || strlen(code) > l->code_max) {
        free(code);
        stop(l, "the repair holds no usable code");
        return;
    }
    for (unsigned i = 0; i < l->attempt; i++) {
        if (ptc_repair_same_code(l->codes[i], code)) {
            free(code);
            stop(l,
                 "the repair changed nothing (the same code as attempt %u), which counts as the "
                 "same error",
                 i + 1);
            return;
        }
    }
    l->repairs_used++;
    l->codes[l->attempt++] = code;
    char msg[96];
    snprintf(msg, sizeof msg, "attempt %u of %ld: running the repaired code", l->attempt,
             l->max_repairs + 1);
    progress(l, msg);
    start_run(l);
}

/* Asks the host's repairer for a fix of the last failure; without one, stops (the host then
 * answers with the repair packet). */
static void ask_repair(ptc_repair_loop_t *l, const ptc_repair_run_t *r)
{
    char why[300] = "";
    const ptc_repairer_desc_t *by = l->ops->repairer(l->data, why, sizeof why);
    if (by == NULL) {
        stop(l, "%s", why);
        return;
    }
    ptc_buf_t tail;
    ptc_buf_init(&tail, PTC_CAP_REPAIR_TEXT);
    error_tail(r, &tail);
    const cJSON *used = l->journal ? ptc_journal_used(l->journal) : NULL;
    char *sigs =
        l->ops->signatures ? l->ops->signatures(l->data, ptc_repair_loop_code(l), used) : NULL;
    char *prompt =
        ptc_buf_error(&tail) != 0
            ? NULL
            : ptc_repair_prompt(ptc_repair_loop_code(l), l->attempt, ptc_buf_cstr(&tail), sigs);
    ptc_buf_free(&tail);
    free(sigs);
    if (prompt == NULL) {
        stop(l, "out of memory building the repair request");
        return;
    }
    l->by = by;
    /* Said before the request goes: a repairer of a 2026-07-28 client (MRTR) answers the
     * client's call with the request, and a progress update after it would have no call. */
    char msg[PTC_REPAIR_FP_MAX + 96];
    snprintf(msg, sizeof msg, "attempt %u of %ld failed (%.200s); asking %s for a fix", l->attempt,
             l->max_repairs + 1, l->last_fp, by->asking);
    progress(l, msg);
    int rc = l->ops->ask(l->data, prompt, on_repaired, l, &l->ask);
    free(prompt);
    if (rc < 0) {
        l->ask = NULL;
        stop(l, "the repair request could not be sent: %s", l->ops->strerror(rc));
        return;
    }
    if (l->timer == NULL) {
        l->timer = malloc(sizeof *l->timer);
        if (l->timer != NULL && uv_timer_init(l->uv, l->timer) < 0) {
            free(l->timer);
            l->timer = NULL;
        }
    }
    if (l->timer == NULL) {
        stop(l, "out of memory waiting for the repair");
        return;
    }
    l->timer->data = l;
    uv_timer_start(l->timer, on_deadline, l->deadline - uv_now(l->uv), 0);
}

void ptc_repair_loop_ran(ptc_repair_loop_t *l, const ptc_repair_run_t *r)
{
    cJSON *replayed = l->journal ? ptc_journal_take_replayed(l->journal) : NULL;
    char fp[PTC_REPAIR_FP_MAX] = "";
    bool fail = failed(r);
    if (fail)
        ptc_repair_fingerprint(r->status, r->exit_code, r->signal_name, r->err, fp, sizeof fp);
    record_attempt(l, r, fail ? fp : NULL, replayed);
    bool had_last = l->have_last;
    l->have_last = true;
    if (!fail || !ptc_repair_loop_healing(l)) {
        l->ops->finish(l->data);
        return;
    }
    if (r->no_rerun != NULL) {
        stop(l, "%s, so a repaired version could not run", r->no_rerun);
        return;
    }
    /* The loop stops at a repeated error: a repair that did not change it will not. */
    if (had_last && strcmp(fp, l->last_fp) == 0) {
        stop(l, "the same error came back after the repair (%s)", fp);
        return;
    }
    snprintf(l->last_fp, sizeof l->last_fp, "%s", fp);
    if (l->repairs_used >= l->max_repairs) {
        stop(l, "the repair budget is spent (max_repairs %ld)", l->max_repairs);
        return;
    }
    if (l->journal != NULL && ptc_journal_lost(l->journal)) {
        stop(l, "not every tool call could be journaled, so a rerun could repeat a side effect");
        return;
    }
    uint64_t now = uv_now(l->uv);
    if (l->deadline <= now || l->deadline - now < PTC_REPAIR_MIN_LEFT_MS) {
        stop(l, "the request's overall deadline (%.0f s) leaves no time for a repair",
             (double)(l->deadline - l->t0) / 1000.0);
        return;
    }
    ask_repair(l, r);
}

/* --- the report ---------------------------------------------------------------------------- */

/* The history as text: one line per attempt, what was replayed. */
static void history(const ptc_repair_loop_t *l, bool fail, ptc_buf_t *b)
{
    int n = cJSON_GetArraySize(l->attempts);
    ptc_buf_printf(b, "Self-healing: %d attempts, %d repair%s by %s; the last one %s.", n, n - 1,
                   n == 2 ? "" : "s", l->by != NULL ? l->by->by : "a repairer",
                   fail ? "failed too" : "succeeded");
    const cJSON *a;
    cJSON_ArrayForEach(a, l->attempts)
    {
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(a, "error");
        const cJSON *ch = cJSON_GetObjectItemCaseSensitive(a, "changes");
        const cJSON *rp = cJSON_GetObjectItemCaseSensitive(a, "replayed");
        ptc_buf_printf(b, "\n  attempt %d: %s",
                       cJSON_GetObjectItemCaseSensitive(a, "attempt")->valueint,
                       cJSON_GetObjectItemCaseSensitive(a, "status")->valuestring);
        if (cJSON_IsString(ch)) ptc_buf_printf(b, " (code changed %s)", ch->valuestring);
        if (cJSON_IsString(err)) ptc_buf_printf(b, ": %.300s", err->valuestring);
        if (cJSON_GetArraySize(rp) > 0) {
            ptc_buf_printf(b, "; %d call%s replayed, not run again:", cJSON_GetArraySize(rp),
                           cJSON_GetArraySize(rp) == 1 ? "" : "s");
            const cJSON *x;
            cJSON_ArrayForEach(x, rp)
            {
                ptc_buf_printf(b, " %s #%d",
                               cJSON_GetObjectItemCaseSensitive(x, "tool")->valuestring,
                               cJSON_GetObjectItemCaseSensitive(x, "occurrence")->valueint);
            }
        }
    }
}

int ptc_repair_loop_report(const ptc_repair_loop_t *l, const ptc_repair_run_t *last, char **text,
                           cJSON **packet)
{
    *text = NULL;
    *packet = NULL;
    bool fail = failed(last);
    int n_attempts = cJSON_GetArraySize(l->attempts);
    const char *code = ptc_repair_loop_code(l);
    ptc_buf_t heal;
    ptc_buf_init(&heal, PTC_CAP_REPAIR_TEXT);
    if (n_attempts > 1) history(l, fail, &heal);
    if (l->stop_reason[0] != '\0') {
        if (heal.len) ptc_buf_str(&heal, "\n");
        ptc_buf_printf(&heal, "Repairs stopped: %s.", l->stop_reason);
    }
    if (n_attempts > 1) {
        ptc_buf_printf(&heal, "\n%s:\n```python\n",
                       fail ? "Last code tried" : "Final code that worked");
        ptc_buf_str(&heal, code);
        ptc_buf_str(&heal, "```");
    }
    cJSON *p = NULL;
    bool ok = true;
    if (fail && l->max_repairs > 0) {
        char fp[PTC_REPAIR_FP_MAX];
        ptc_repair_fingerprint(last->status, last->exit_code, last->signal_name, last->err, fp,
                               sizeof fp);
        unsigned line = ptc_repair_failing_line(last->err);
        char line_text[PTC_REPAIR_LINE_MAX];
        ptc_repair_code_line(code, line, line_text, sizeof line_text);
        ptc_buf_t tail;
        ptc_buf_init(&tail, PTC_CAP_REPAIR_TEXT);
        error_tail(last, &tail);
        p = ptc_buf_error(&tail) != 0 ? NULL
                                      : ptc_repair_packet(fp, ptc_buf_cstr(&tail), line, line_text);
        ptc_buf_free(&tail);
        ok = p != NULL && (l->stop_reason[0] == '\0' ||
                           cJSON_AddStringToObject(p, "stopped", l->stop_reason) != NULL);
        if (heal.len) ptc_buf_str(&heal, "\n");
        ptc_buf_printf(&heal, "Repair packet: error %s", fp);
        if (line > 0) ptc_buf_printf(&heal, "; failing line %u: %s", line, line_text);
        ptc_buf_str(&heal, ". Fix the code and call execute_code again.");
    }
    *text = ok ? ptc_buf_take(&heal, NULL) : NULL; /* NULL after a failure */
    ptc_buf_free(&heal);
    if (*text == NULL) {
        cJSON_Delete(p);
        return PTC_REPAIR_ENOMEM;
    }
    *packet = p;
    return 0;
}
