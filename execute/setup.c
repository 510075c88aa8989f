/* setup.c - execute_code's set-up: its configuration checked and turned into the executor's
 * pool, page and file stores and workspace, the fallback repairer, the audit log; its schemas
 * and its description (re-registered when the tools package's modules change); its end. */
#include "internal.h"

#include "pybundle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The page store: at most this much output is kept for cursors, for this long when idle. */
#define EXECUTE_PAGES_MAX_BYTES (64u << 20)
#define EXECUTE_PAGES_MAX_RUNS  256u
#define EXECUTE_PAGES_TTL_MS    (UINT64_C(30) * 60 * 1000)
/* Files out: kept like the pages (same TTL), this much at most (--file-store-bytes); images up
 * to EXECUTE_IMAGE_MAX_BYTES each become image content blocks (--max-image-bytes). */
#define EXECUTE_FILES_STORE_BYTES   (128u << 20)
#define EXECUTE_FILES_STORE_ENTRIES 1024u
#define EXECUTE_IMAGE_MAX_BYTES     (5u << 20)
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

/* The fallback repairer of --repair-url, its lines in ex's log. */
static int open_repairer(ptc_execute_t *ex, const ptc_execute_config_t *c)
{
    char msg[600];
    /* The hook only reads the logger: dropping const is what its void * costs. */
    int rc = ptc_repair_http_new(ex->loop, c->repair_url, c->repair_model, c->repair_key_env,
                                 c->ca_file, mcp_log_hook, (void *)(uintptr_t)ex->lg, &ex->repairer,
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
static int open_executor(ptc_execute_t *ex, const ptc_execute_config_t *c)
{
    int rc = exec_pages_new(EXECUTE_PAGES_MAX_BYTES, EXECUTE_PAGES_MAX_RUNS, EXECUTE_PAGES_TTL_MS,
                            &ex->pages);
    if (rc == 0)
        rc = exec_filestore_new(c->file_store_bytes ? c->file_store_bytes
                                                    : EXECUTE_FILES_STORE_BYTES,
                                EXECUTE_FILES_STORE_ENTRIES, EXECUTE_PAGES_TTL_MS, &ex->files);
    if (rc == 0) rc = exec_pool_new(ex->loop, &c->sandbox, &ex->pool);
    if (rc == 0) rc = exec_pool_set_files_limits(ex->pool, &c->files);
    if (rc == 0) {
        const exec_ws_options_t wo = {
            .pool = ex->pool,
            .pages = ex->pages,
            .files = ex->files,
            .max_sessions = c->max_sessions,
            .session_idle_ms = (uint64_t)(c->session_idle_s * 1000.0),
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

int ptc_execute_new(uv_loop_t *loop, const ptc_execute_config_t *c, const mcp_logger_t *lg,
                    env_host_t *env, ptc_execute_t **out)
{
    *out = NULL;
    /* The binary names its flags for these first; another host gets one line for the lot. */
    if (exec_options_check(&c->sandbox, &c->files, c->max_code_bytes, NULL) < 0 ||
        c->max_code_bytes == 0 || c->page_chars == 0 || c->max_repairs < 0 ||
        c->max_repairs > PTC_REPAIR_MAX || !(c->max_timeout_s > 0) ||
        !(c->request_deadline_s >= 0 && c->request_deadline_s <= PTC_EXECUTE_DEADLINE_MAX_S)) {
        mcp_log(lg, MCP_LOG_ERROR,
                "execute_code: a setting is out of its bounds (execute.h, "
                "ptc_execute_config_t)");
        return MCP_EINVAL;
    }
    ptc_execute_t *ex = calloc(1, sizeof *ex);
    if (ex == NULL) return MCP_ENOMEM;
    ex->loop = loop;
    ex->lg = lg;
    ex->env = env;
    ex->page_chars = c->page_chars;
    ex->max_timeout_s = c->max_timeout_s;
    ex->unsafe = c->sandbox.unsafe_no_sandbox;
    ex->lim.tool_timeout_ms = (unsigned)(c->tool_timeout_s * 1000.0);
    ex->confirm_writes = c->confirm_writes;
    ex->lim.allow_tools = c->allow_tools;
    ex->lim.deny_tools = c->deny_tools;
    ex->max_repairs = c->max_repairs;
    ex->wait_ms = (uint64_t)(c->wait_s * 1000.0);
    ex->deadline_ms = (uint64_t)(c->request_deadline_s * 1000.0);
    if (ex->deadline_ms == 0) ex->deadline_ms = 1;
    ex->max_code_bytes = c->max_code_bytes;
    ex->image_max_bytes = c->image_max_bytes ? c->image_max_bytes : EXECUTE_IMAGE_MAX_BYTES;
    int rc = MCP_OK;
    if (c->audit_log != NULL && (ex->audit = ex->lim.audit = fopen(c->audit_log, "ae")) == NULL) {
        mcp_log(lg, MCP_LOG_ERROR, "--audit-log %s: %s", c->audit_log, strerror(errno));
        rc = MCP_EINVAL;
    }
    if (rc == MCP_OK && c->repair_url != NULL) rc = open_repairer(ex, c);
    if (rc == MCP_OK) rc = open_executor(ex, c);
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
         * (longrun.c). */
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

void ptc_execute_attach(ptc_execute_t *ex, const ptc_execute_peers_t *peers,
                        ptc_pybundle_cache_t *bundle)
{
    ex->peers = *peers;
    ex->attached = true;
    ex->bundle = bundle;
}

exec_pool_t *ptc_execute_pool(const ptc_execute_t *ex)
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
