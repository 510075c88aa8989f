/* execute_setup.c - execute_code's flags: checked (each bound named by its flag) and turned into
 * the engine's configuration (execute/), and the sandbox's options that --check probes too. */
#include "tools.h"

#include "repair.h"

#include <stdlib.h>

void ptc_execute_sandbox_options(const ptc_options_t *o, exec_options_t *eo)
{
    exec_options_init(eo);
    if (o->python) eo->python = o->python;
    eo->mounts = o->mounts;
    eo->n_mounts = o->n_mounts;
    eo->unsafe_no_sandbox = o->unsafe_no_sandbox;
    if (o->memory_limit) eo->memory_bytes = o->memory_limit;
    if (o->tmp_size) eo->tmp_bytes = o->tmp_size;
    /* in range: ptc_options_parse checked it */
    if (o->cpu_limit > 0) eo->cpu_millis = (unsigned)(o->cpu_limit * 1000.0 + 0.5);
}

/* The flags the executor bounds (exec_options_check), and the server's own: a sentence naming
 * the flag for each one passed. MCP_EINVAL then. */
static int check_flags(const ptc_options_t *o, const exec_options_t *eo,
                       const exec_files_limits_t *fl, size_t code_bytes, const mcp_logger_t *lg)
{
    exec_bound_t bad = EXEC_BOUND_NONE;
    (void)exec_options_check(eo, fl, code_bytes, &bad);
    if (bad == EXEC_BOUND_CODE_BYTES)
        mcp_log(lg, MCP_LOG_ERROR,
                "--max-code-bytes: at most %u (the code travels to the sandbox as one argument)",
                (unsigned)EXEC_MAX_CODE_BYTES);
    else if (bad == EXEC_BOUND_KEEP_BYTES)
        mcp_log(lg, MCP_LOG_ERROR, "--max-output-bytes: at most %u", (unsigned)EXEC_MAX_KEEP_BYTES);
    else if (bad == EXEC_BOUND_FILE_BYTES || bad == EXEC_BOUND_FILE_COUNT)
        mcp_log(lg, MCP_LOG_ERROR,
                "--max-file-bytes and --max-call-files-bytes: at most %u MiB; --max-files: at "
                "most %u",
                (unsigned)(EXEC_FILES_LIMIT_BYTES >> 20), (unsigned)EXEC_FILES_LIMIT_COUNT);
    else if (bad != EXEC_BOUND_NONE)
        mcp_log(lg, MCP_LOG_ERROR, "executor: %s. %s", exec_strerror(EXEC_EINVAL),
                exec_error_hint(EXEC_EINVAL));
    else if (o->max_repairs > PTC_REPAIR_MAX)
        mcp_log(lg, MCP_LOG_ERROR, "--max-repairs: at most %d", PTC_REPAIR_MAX);
    else if (o->request_deadline > PTC_EXECUTE_DEADLINE_MAX_S)
        mcp_log(lg, MCP_LOG_ERROR, "--request-deadline: at most %d seconds",
                PTC_EXECUTE_DEADLINE_MAX_S);
    else if (o->repair_url == NULL && (o->repair_model != NULL || o->repair_key_env != NULL))
        mcp_log(lg, MCP_LOG_ERROR,
                "--repair-model and --repair-key-env need --repair-url (the "
                "chat-completions endpoint)");
    else
        return MCP_OK;
    return MCP_EINVAL;
}

int ptc_execute_open(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg,
                     env_host_t *env, ptc_execute_t **out)
{
    *out = NULL;
    ptc_execute_config_t c = {
        .files = {.file_bytes = o->max_file_bytes ? o->max_file_bytes : PTC_EXECUTE_FILE_MAX_BYTES,
                  .call_bytes = o->max_call_files_bytes,
                  .count = o->max_files > EXEC_FILES_LIMIT_COUNT ? EXEC_FILES_LIMIT_COUNT + 1u
                                                                 : (unsigned)o->max_files},
        .file_store_bytes = o->file_store_bytes,
        .image_max_bytes = o->max_image_bytes,
        /* The code goes to the launcher as one argv string (MAX_ARG_STRLEN is 128 KiB): the
           flag can lower the bound, not raise it past what the executor passes. */
        .max_code_bytes = o->max_code_bytes ? o->max_code_bytes : EXEC_MAX_CODE_BYTES,
        .page_chars = o->output_page_chars,
        .max_timeout_s = o->max_timeout,
        .tool_timeout_s = o->tool_timeout,
        .allow_tools = o->allow_tools,
        .deny_tools = o->deny_tools,
        .confirm_writes = o->confirm_writes,
        .max_repairs = o->max_repairs,
        .request_deadline_s = o->request_deadline,
        .max_sessions = o->max_sessions,
        .session_idle_s = o->session_idle_timeout,
        .wait_s = o->wait_seconds,
        .audit_log = o->audit_log,
        .repair_url = o->repair_url,
        .repair_model = o->repair_model,
        .repair_key_env = o->repair_key_env,
        .ca_file = o->ca_file,
    };
    exec_options_t *eo = &c.sandbox;
    ptc_execute_sandbox_options(o, eo);
    if (o->max_concurrent) eo->max_concurrent = (unsigned)o->max_concurrent;
    eo->max_queue = (unsigned)o->max_queue;
    eo->pass_env = o->pass_env;
    eo->n_pass_env = o->n_pass_env;
    eo->test_disable_layer = getenv("PTC_TEST_DISABLE_LAYER");
    if (o->max_output_bytes) eo->stdout_keep = eo->stderr_keep = o->max_output_bytes;
    int rc = check_flags(o, eo, &c.files, c.max_code_bytes, lg);
    return rc < 0 ? rc : ptc_execute_new(loop, &c, lg, env, out);
}
