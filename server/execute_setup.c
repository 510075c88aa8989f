/* execute_setup.c - execute_code's set-up: its flags checked and turned into the executor's
 * pool, page and file stores and workspace, the fallback repairer, the audit log; its schemas
 * and its description (re-registered when the tools package's modules change); its end. */
#include "execute_internal.h"

#include "pybundle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The page store: at most this much output is kept for cursors, for this long when idle. */
#define EXECUTE_PAGES_MAX_BYTES (64u << 20)
#define EXECUTE_PAGES_MAX_RUNS  256u
#define EXECUTE_PAGES_TTL_MS    (30u * 60 * 1000)
/* Files out: kept like the pages (same TTL), this much at most (--file-store-bytes); images up
 * to EXECUTE_IMAGE_MAX_BYTES each become image content blocks (--max-image-bytes). */
#define EXECUTE_FILES_STORE_BYTES   (128u << 20)
#define EXECUTE_FILES_STORE_ENTRIES 1024u
#define EXECUTE_IMAGE_MAX_BYTES     (5u << 20)
/* One deadline covers a request's runs and repairs (--request-deadline, by default 50 s: under
 * the common 60 s client timeout); a day at most keeps the milliseconds far from overflow. */
#define EXECUTE_REQUEST_DEADLINE_MAX_S 86400
static const char input_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"code\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Python 3 source to run. "
    "Print what you want to see; only stdout and stderr come back.\"},"
    "\"timeout_seconds\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"description\":\"Wall-clock "
    "limit for this run (default 30).\"},"
    "\"cursor\":{\"type\":\"string\",\"description\":\"The next_cursor of an earlier result: pass "
    "it alone to get the next page of that run's output.\"},"
    "\"session\":{\"type\":\"string\",\"minLength\":1,\"description\":\"\\\"new\\\" runs the code "
    "in a "
    "new live interpreter and returns its handle (structuredContent.session); pass that handle "
    "to run more code in the same interpreter: variables, imports, open files, /tmp and the "
    "working directory are kept. Without it every run starts fresh.\"},"
    "\"close_session\":{\"type\":\"boolean\",\"description\":\"With session and no code: ends "
    "that session.\"},"
    "\"wait_seconds\":{\"type\":\"number\",\"minimum\":0,\"maximum\":3600,\"description\":\"How "
    "long this call waits for the run (default: the server's --wait-seconds, 45). A run still "
    "going then comes back as status running with its output so far and a next_cursor: call "
    "again with that cursor (and wait_seconds) to wait for more; timeout_seconds still bounds "
    "the run.\"},"
    "\"cancel\":{\"type\":\"boolean\",\"description\":\"With the cursor of a run that came back "
    "running: stops it and returns its result.\"},"
    "\"max_repairs\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10,\"description\":\"How "
    "many times a failed run may be repaired and run again (the client's model fixes it through "
    "sampling; tool calls that already succeeded are replayed, not repeated). 0 turns it off; "
    "the default is the server's --max-repairs.\"}},"
    "\"additionalProperties\":false}";

/* Every result, a run's or a page's, success or failure, validates against this. */
static const char output_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"status\":{\"type\":\"string\",\"enum\":[\"ok\",\"error\",\"timeout\",\"killed\",\"oom\","
    "\"refused\",\"running\"]},"
    "\"session\":{\"type\":[\"string\",\"null\"]},"
    "\"interrupted\":{\"type\":\"boolean\"},\"session_ended\":{\"type\":\"boolean\"},"
    "\"exit_code\":{\"type\":[\"integer\",\"null\"]},"
    "\"signal\":{\"type\":[\"string\",\"null\"]},"
    "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"
    "\"stdout_bytes\":{\"type\":\"integer\"},\"stderr_bytes\":{\"type\":\"integer\"},"
    "\"truncated\":{\"type\":\"boolean\"},"
    "\"duration_ms\":{\"type\":\"integer\"},"
    "\"next_cursor\":{\"type\":[\"string\",\"null\"]},"
    "\"tool_calls\":{\"type\":\"integer\"},"
    "\"outputs\":{\"type\":\"array\"},"
    "\"attempts\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
    "\"final_code\":{\"type\":\"string\"},"
    "\"repair\":{\"type\":\"object\"},"
    "\"environment\":{\"type\":\"object\",\"properties\":{"
    "\"state\":{\"type\":\"string\",\"enum\":[\"building\",\"failed\"]},"
    "\"packages\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"failed_package\":{\"type\":[\"string\",\"null\"]},"
    "\"message\":{\"type\":\"string\"},\"pip_tail\":{\"type\":\"string\"},"
    "\"optional\":{\"type\":\"boolean\"}},\"required\":[\"state\",\"packages\"]},"
    "\"sandbox\":{\"type\":\"string\",\"enum\":[\"full\",\"degraded\",\"none\"]},"
    "\"files\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},\"mime_type\":{\"type\":\"string\"},"
    "\"bytes\":{\"type\":\"integer\"},\"uri\":{\"type\":[\"string\",\"null\"]},"
    "\"truncated\":{\"type\":\"boolean\"},\"omitted\":{\"type\":\"boolean\"},"
    "\"reason\":{\"type\":\"string\"}},\"required\":[\"name\",\"mime_type\",\"bytes\","
    "\"uri\"]}}},"
    "\"required\":[\"status\",\"exit_code\",\"signal\",\"stdout\",\"stderr\",\"stdout_bytes\","
    "\"stderr_bytes\",\"truncated\",\"duration_ms\",\"next_cursor\",\"tool_calls\",\"outputs\","
    "\"attempts\",\"sandbox\"]}";

/* The description is description_head, what the code can import (environment/: the standard
 * library, the declared packages, the user's helpers), then description. */
static const char description_head[] =
    "Run Python 3 code in a sandbox and return its output. Each call starts fresh unless it "
    "passes a session (session: \"new\" keeps a live interpreter whose handle later calls "
    "pass); there is no network; /tmp is a small private scratch space; ";
static const char description[] =
    ". Print results to stdout. Long output comes in pages: call "
    "again with only the returned cursor for the next page. A failed run returns isError with "
    "the end of the traceback first. A failed run is repaired and run again where the client "
    "can sample (max_repairs); calls to tools that already succeeded are not repeated.";

/* --- set-up -------------------------------------------------------------------------------- */

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
    else if (o->request_deadline > EXECUTE_REQUEST_DEADLINE_MAX_S)
        mcp_log(lg, MCP_LOG_ERROR, "--request-deadline: at most %d seconds",
                EXECUTE_REQUEST_DEADLINE_MAX_S);
    else if (o->repair_url == NULL && (o->repair_model != NULL || o->repair_key_env != NULL))
        mcp_log(lg, MCP_LOG_ERROR,
                "--repair-model and --repair-key-env need --repair-url (the "
                "chat-completions endpoint)");
    else
        return MCP_OK;
    return MCP_EINVAL;
}

/* The fallback repairer of --repair-url, its lines in ex's log. */
static int open_repairer(ptc_execute_t *ex, const ptc_options_t *o)
{
    char msg[600];
    /* The hook only reads the logger: dropping const is what its void * costs. */
    int rc = ptc_repair_http_new(ex->loop, o->repair_url, o->repair_model, o->repair_key_env,
                                 o->ca_file, mcp_log_hook, (void *)(uintptr_t)ex->lg, &ex->repairer,
                                 msg, sizeof msg);
    if (rc < 0) {
        mcp_log(ex->lg, MCP_LOG_ERROR, "%s", msg);
        return MCP_EINVAL;
    }
    mcp_log(ex->lg, MCP_LOG_INFO, "fallback repairer: %s", ptc_repair_http_name(ex->repairer));
    ex->http_desc = (ptc_repairer_desc_t){.id = "http",
                                          .who = "fallback repairer",
                                          .by = "the fallback repairer",
                                          .asking = ptc_repair_http_name(ex->repairer)};
    return MCP_OK;
}

/* The executor's pool, page and file stores and workspace; logs why not. */
static int open_executor(ptc_execute_t *ex, const ptc_options_t *o, const exec_options_t *eo,
                         const exec_files_limits_t *fl)
{
    int rc = exec_pages_new(EXECUTE_PAGES_MAX_BYTES, EXECUTE_PAGES_MAX_RUNS, EXECUTE_PAGES_TTL_MS,
                            &ex->pages);
    if (rc == 0)
        rc = exec_filestore_new(o->file_store_bytes ? o->file_store_bytes
                                                    : EXECUTE_FILES_STORE_BYTES,
                                EXECUTE_FILES_STORE_ENTRIES, EXECUTE_PAGES_TTL_MS, &ex->files);
    if (rc == 0) rc = exec_pool_new(ex->loop, eo, &ex->pool);
    if (rc == 0) rc = exec_pool_set_files_limits(ex->pool, fl);
    if (rc == 0) {
        const exec_ws_options_t wo = {
            .pool = ex->pool,
            .pages = ex->pages,
            .files = ex->files,
            .max_sessions = o->max_sessions,
            .session_idle_ms = (uint64_t)(o->session_idle_timeout * 1000.0),
            .max_runs = EXECUTE_MAX_LONGRUNS,
            .run_keep_ms = EXECUTE_LONGRUN_KEEP_MS,
        };
        const exec_ws_callbacks_t wcb = {
            .session_ended = ptc__sessions_ended,
            .run_ended = ptc__longrun_ended,
            .session_release = ptc__sessions_release,
            .owner_dropped = ptc__ends_dropped,
            .data = ex,
        };
        rc = exec_workspace_new(ex->loop, &wo, &wcb, &ex->ws);
    }
    if (rc < 0)
        mcp_log(ex->lg, MCP_LOG_ERROR, "executor: %s. %s", exec_strerror(rc), exec_error_hint(rc));
    return rc < 0 ? MCP_EINVAL : MCP_OK;
}

/* What the sandbox level means for the runs to come, in the log. */
static void log_sandbox(const ptc_execute_t *ex)
{
    const exec_probe_t *probe = exec_pool_probe(ex->pool);
    if (ex->unsafe)
        mcp_log(ex->lg, MCP_LOG_WARNING,
                "--unsafe-no-sandbox: execute_code runs code WITHOUT isolation, with this "
                "server's rights");
    else if (exec_pool_refusing(ex->pool))
        mcp_log(ex->lg, MCP_LOG_ERROR, "execute_code will refuse to run: %s", probe->message);
    else
        mcp_log(ex->lg, MCP_LOG_INFO, "sandbox: %s", exec_sandbox_level_name(probe->level));
}

int ptc_execute_new(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg,
                    env_host_t *env, ptc_execute_t **out)
{
    *out = NULL;
    exec_options_t eo;
    ptc_execute_sandbox_options(o, &eo);
    if (o->max_concurrent) eo.max_concurrent = (unsigned)o->max_concurrent;
    eo.max_queue = (unsigned)o->max_queue;
    eo.pass_env = o->pass_env;
    eo.n_pass_env = o->n_pass_env;
    eo.test_disable_layer = getenv("PTC_TEST_DISABLE_LAYER");
    if (o->max_output_bytes) eo.stdout_keep = eo.stderr_keep = o->max_output_bytes;
    const exec_files_limits_t fl = {
        .file_bytes = o->max_file_bytes ? o->max_file_bytes : EXECUTE_FILE_MAX_BYTES,
        .call_bytes = o->max_call_files_bytes,
        .count = o->max_files > EXEC_FILES_LIMIT_COUNT ? EXEC_FILES_LIMIT_COUNT + 1u
                                                       : (unsigned)o->max_files};
    /* The code goes to the launcher as one argv string (MAX_ARG_STRLEN is 128 KiB): the flag
       can lower the bound, not raise it past what the executor passes. */
    size_t code_bytes = o->max_code_bytes ? o->max_code_bytes : EXEC_MAX_CODE_BYTES;
    int rc = check_flags(o, &eo, &fl, code_bytes, lg);
    ptc_execute_t *ex = rc == MCP_OK ? calloc(1, sizeof *ex) : NULL;
    if (rc == MCP_OK && ex == NULL) rc = MCP_ENOMEM;
    if (rc == MCP_OK) {
        ex->loop = loop;
        ex->lg = lg;
        ex->env = env;
        ex->page_chars = o->output_page_chars;
        ex->max_timeout_s = o->max_timeout;
        ex->unsafe = o->unsafe_no_sandbox;
        ex->lim.tool_timeout_ms = (unsigned)(o->tool_timeout * 1000.0);
        ex->confirm_writes = o->confirm_writes;
        ex->lim.allow_tools = o->allow_tools;
        ex->lim.deny_tools = o->deny_tools;
        ex->max_repairs = o->max_repairs;
        ex->wait_ms = (uint64_t)(o->wait_seconds * 1000.0);
        ex->deadline_ms = (uint64_t)(o->request_deadline * 1000.0);
        if (ex->deadline_ms == 0) ex->deadline_ms = 1;
        ex->max_code_bytes = code_bytes;
        ex->image_max_bytes = o->max_image_bytes ? o->max_image_bytes : EXECUTE_IMAGE_MAX_BYTES;
    }
    if (rc == MCP_OK && o->audit_log != NULL &&
        (ex->audit = ex->lim.audit = fopen(o->audit_log, "ae")) == NULL) {
        mcp_log(lg, MCP_LOG_ERROR, "--audit-log %s: %s", o->audit_log, strerror(errno));
        rc = MCP_EINVAL;
    }
    if (rc == MCP_OK && o->repair_url != NULL) rc = open_repairer(ex, o);
    if (rc == MCP_OK) rc = open_executor(ex, o, &eo, &fl);
    if (rc == MCP_OK) {
        log_sandbox(ex);
        *out = ex;
    } else {
        ptc_execute_free(ex);
    }
    return rc;
}

static int register_with(ptc_execute_t *ex, mcp_server_t *srv, const char *desc)
{
    mcp_tool_def_t def = {
        .name = "execute_code",
        .title = "Run Python in a sandbox",
        .description = desc,
        .input_schema = input_schema,
        .output_schema = output_schema,
        .annotations = "{\"readOnlyHint\":false,\"destructiveHint\":false,\"idempotentHint\":false,"
                       "\"openWorldHint\":false}",
        .handler = ptc__execute_handle,
        .data = ex,
        /* A run that outlives its wait becomes a task for a client of the tasks extension
         * (execute_longrun.c). */
        .task_support = MCP_TASK_OPTIONAL,
    };
    mcp_server_on_task_cancel(srv, ptc__mrtr_cancel_task, ex);
    return mcp_server_add_tool(srv, &def);
}

/* The description: the fixed parts around what the code can import, then the tools package's
 * modules. NULL on ENOMEM. */
static char *compose(const ptc_execute_t *ex, const cJSON *modules)
{
    ptc_buf_t d;
    ptc_buf_init(&d, PTC_CAP_EXECUTE_TEXT);
    char *libs = env_host_describe(ex->env);
    ptc_buf_str(&d, description_head);
    ptc_buf_str(&d, libs != NULL ? libs : "");
    ptc_buf_str(&d, description);
    /* The user's helpers (server "custom") are imported directly, not through tools. */
    int served = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, modules)
    {
        const cJSON *server = cJSON_GetObjectItemCaseSensitive(m, "server");
        if (!cJSON_IsString(server) || !env_is_custom_server(server->valuestring)) served++;
    }
    if (served > 0) {
        ptc_buf_str(&d, " Tools of the connected MCP servers are Python functions here: "
                        "`from tools.MODULE import FUNCTION` (modules: ");
        int i = 0;
        cJSON_ArrayForEach(m, modules)
        {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "module");
            const cJSON *server = cJSON_GetObjectItemCaseSensitive(m, "server");
            if (!cJSON_IsString(name)) continue;
            if (cJSON_IsString(server) && env_is_custom_server(server->valuestring)) continue;
            if (i++ > 0) ptc_buf_str(&d, ", ");
            ptc_buf_str(&d, name->valuestring);
        }
        ptc_buf_str(&d, "); search_tools gives their signatures. `tools.emit(obj)` returns a JSON "
                        "record in structuredContent.outputs; failed calls raise tools.ToolError.");
    }
    char *text = libs != NULL ? ptc_buf_take(&d, NULL) : NULL;
    ptc_buf_free(&d);
    free(libs);
    return text;
}

int ptc_execute_register(ptc_execute_t *ex, mcp_server_t *srv)
{
    char *desc = compose(ex, NULL);
    if (desc == NULL) return MCP_ENOMEM;
    int rc = register_with(ex, srv, desc);
    if (rc < 0) {
        free(desc);
        return rc;
    }
    free(ex->described);
    ex->described = desc;
    return ptc__ends_register(ex, srv);
}

void ptc_execute_describe(ptc_execute_t *ex, mcp_server_t *srv, const cJSON *modules)
{
    /* Runs will bind these folders (the tools package, the packages once ready, the helpers):
     * have the warm sandboxes made with them, else every run starts cold. */
    if (!ex->unsafe) {
        exec_run_opts_t ro;
        exec_run_opts_init(&ro);
        ro.ro_dir = ex->bundle ? ptc_pybundle_cache_root(ex->bundle) : NULL;
        const char *dirs[EXEC_MAX_PATH_DIRS];
        ro.n_path_dirs = env_host_path_dirs(ex->env, dirs, EXEC_MAX_PATH_DIRS);
        ro.path_dirs = dirs;
        if (ro.ro_dir != NULL || ro.n_path_dirs > 0) (void)exec_pool_warm_for_ex(ex->pool, &ro);
    }
    char *desc = compose(ex, modules);
    if (desc == NULL) return;
    /* Unchanged (e.g. no servers yet): no re-registration, so no list_changed for nothing. */
    if (ex->described != NULL && strcmp(ex->described, desc) == 0) {
        free(desc);
        return;
    }
    mcp_server_hold_notifications(srv, true);
    mcp_server_remove_tool(srv, "execute_code");
    if (register_with(ex, srv, desc) < 0)
        mcp_log(ex->lg, MCP_LOG_ERROR, "execute_code could not be registered again");
    mcp_server_hold_notifications(srv, false);
    free(ex->described);
    ex->described = desc;
}

void ptc_execute_attach(ptc_execute_t *ex, ptc_search_t *search, ptc_downstream_t *downstream,
                        ptc_pybundle_cache_t *bundle, ptc_startup_t *st)
{
    ex->search = search;
    ex->downstream = downstream;
    ex->bundle = bundle;
    ex->startup = st;
}

exec_pool_t *ptc__execute_pool(const ptc_execute_t *ex)
{
    return ex->pool;
}

void ptc_execute_free(ptc_execute_t *ex)
{
    if (ex == NULL) return;
    if (ex->audit != NULL) fclose(ex->audit);
    ptc_repair_http_free(ex->repairer);
    free(ex->described);
    ptc__ends_free(ex);
    /* Parked jobs, long runs, then sessions (exec_workspace_free stops them first); before the
       pool: their sandboxes are its children. */
    exec_workspace_free(ex->ws);
    exec_pool_free(ex->pool);
    exec_pages_free(ex->pages);
    exec_filestore_free(ex->files);
    free(ex);
}

void ptc_execute_stop(ptc_execute_t *ex)
{
    /* Parked jobs first (their on_park_end kills them), then the runs and sessions. */
    exec_workspace_stop(ex->ws);
}

exec_filestore_t *ptc_execute_files(const ptc_execute_t *ex)
{
    return ex->files;
}

exec_pages_t *ptc_execute_pages(const ptc_execute_t *ex)
{
    return ex->pages;
}

uv_loop_t *ptc_execute_loop(const ptc_execute_t *ex)
{
    return ex->loop;
}
