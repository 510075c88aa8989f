/*
 * run_result.c - what a finished run returns: its exec_result_t, read from the run's state (the
 * launcher's report, the exit status or signal, a timeout, a refusal or a failed setup) with a
 * message that says what happened (kept in the run). It starts, stops and frees nothing.
 */
#include "internal.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

void exec__build_result(exec_run_t *run, exec_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->exit_code = -1;
    res->out = exec__buf_output(&run->out);
    res->err = exec__buf_output(&run->err);
    res->files = run->rx.n_files ? run->rx.files : NULL;
    res->n_files = run->rx.n_files;
    uint64_t end = run->end_ns ? run->end_ns : uv_hrtime();
    res->duration_ms = run->start_ns ? (end - run->start_ns) / 1000000u : 0;
    res->sandbox = run->pool->unsafe ? EXEC_SANDBOX_NONE : exec__level(run->rep.layers);
    res->warm_start = run->took_warm;
    res->zygote = run->zygote;

    if (run->message[0]) { /* refused before or at spawn */
        res->status = EXEC_STATUS_REFUSED;
        res->message = run->message;
        return;
    }
    if (run->rep.error[0]) {
        snprintf(run->message, sizeof run->message,
                 "sandbox setup failed: %s. Run `ptc-mcp --check`; docs/sandbox.md explains each "
                 "layer.",
                 run->rep.error);
        res->status = EXEC_STATUS_REFUSED;
        res->message = run->message;
        return;
    }
    int sig = 0, code = -1;
    bool known = true;
    if (run->pool->unsafe) {
        sig = run->term_signal;
        code = sig ? -1 : (int)run->exit_status;
    } else if (run->rep.sig) {
        sig = run->rep.code;
    } else if (run->rep.exit) {
        code = run->rep.code;
    } else if (run->rep.answer) {
        code = run->rep.answer_code;
    } else {
        known = false;
    }
    if (run->timed_out) {
        res->status = EXEC_STATUS_TIMEOUT;
        res->signal = SIGKILL; /* that is how the tree ended */
    } else if (run->rep.oom) {
        res->status = EXEC_STATUS_OOM;
        res->signal = sig;
        res->exit_code = code;
    } else if (!known) {
        res->status = EXEC_STATUS_ERROR;
        snprintf(run->message, sizeof run->message,
                 "the sandbox launcher ended without a report (exit %lld, signal %d)",
                 (long long)run->exit_status, run->term_signal);
        res->message = run->message;
        res->signal = run->term_signal;
    } else if (sig) {
        res->status = EXEC_STATUS_KILLED;
        res->signal = sig;
    } else {
        res->exit_code = code;
        res->status = code == 0 ? EXEC_STATUS_OK : EXEC_STATUS_ERROR;
    }
    if (res->signal)
        res->signal_name = exec__signal_name(res->signal, run->signame, sizeof run->signame);
}
