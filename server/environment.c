/* environment.c - the sandbox's environment (environment/) wired into the server: the flags made
 * env options, the library's lines and outcomes in the server log, the packages' state in runs
 * and results, the helpers' scan run on the executor with its entries put into the registry as
 * server "custom", and --check's report. What a build, a waiter, the pruning, the scan's parsing
 * and the texts do is environment/'s (docs/environment.md). */
#include "execute_internal.h"

#include "environment.h"

#include <stdlib.h>
#include <string.h>

#define ENV_SCAN_TIMEOUT_MS       10000u
#define ENV_MAX_INSTALL_TIMEOUT_S 86400u /* a day: far from the unsigned's range */
#define ENV_CUSTOM_SERVER         "custom"
#define ENV_DAY_S                 (24L * 60 * 60)

struct ptc_env {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    char cache_dir[4096];
    env_t *env; /* NULL without --packages/--requirements */
    char **specs;
    size_t n_specs;
    bool optional;
    env_custom_t custom;
    bool has_custom;
    exec_run_t *scan; /* the helpers' scan: a sandboxed run */
    ptc_search_t *search;
    env_prune_t *prune; /* once per process, on the thread pool */
    bool prune_started;
    void (*on_change)(void *data);
    void *change_data;
};

static void env_log(env_log_level_t level, const char *line, void *user)
{
    ptc_env_t *e = user;
    mcp_log(e->lg, level == ENV_LOG_ERROR ? MCP_LOG_ERROR : MCP_LOG_INFO, "packages: %s", line);
}

static void prune_done(long removed, void *user)
{
    ptc_env_t *e = user;
    e->prune = NULL;
    if (removed > 0)
        mcp_log(e->lg, MCP_LOG_INFO, "removed %ld package or helper folder(s) unused for %ld days",
                removed, ENV_PRUNE_AGE_S / ENV_DAY_S);
}

/* Once per process, when the folders in use are known (the packages' key once the build
   ended). */
static void start_prune(ptc_env_t *e)
{
    if (e->prune_started || e->cache_dir[0] == '\0') return;
    e->prune_started = true;
    env_status_t st;
    env_status(e->env, &st);
    (void)env_prune_start(e->loop, e->cache_dir, st.key_hex, e->has_custom ? e->custom.hex : NULL,
                          prune_done, e, &e->prune);
}

static void on_env_done(env_state_t state, void *user)
{
    ptc_env_t *e = user;
    env_status_t st;
    env_status(e->env, &st);
    (void)env_record_outcome(e->env); /* for --check; a failure to write only loses that */
    if (state == ENV_STATE_READY && st.reused) {
        mcp_log(e->lg, MCP_LOG_INFO, "packages ready (reused %s, no pip run): %s", st.site_dir,
                st.installed);
    } else if (state == ENV_STATE_READY) {
        mcp_log(e->lg, MCP_LOG_INFO, "packages installed in %.1f s into %s: %s",
                (double)st.install_ms / 1000.0, st.site_dir, st.installed);
    } else {
        mcp_log(e->lg, MCP_LOG_ERROR, "packages: installing %s failed: %s%s%s",
                st.failed_package ? st.failed_package : "the packages", st.message,
                st.tail[0] ? "; pip's last lines:\n" : "", st.tail);
        mcp_log(e->lg, MCP_LOG_ERROR, "%s",
                e->optional ? "runs go on without the packages (--packages-optional)"
                            : "execute_code refuses runs until a restart installs them "
                              "(--packages-optional runs them without)");
    }
    start_prune(e);
    if (e->on_change != NULL) e->on_change(e->change_data);
}

/* --- set-up --------------------------------------------------------------------------------- */

/* The env_options_t of the flags; specs are the caller's. */
static void fill_options(const ptc_options_t *o, char **specs, size_t n, const char *cache,
                         env_options_t *eo)
{
    env_options_init(eo);
    if (o->python) eo->python = o->python;
    eo->cache_dir = cache;
    eo->specs = (const char *const *)specs;
    eo->n_specs = n;
    eo->requirements_file = o->requirements;
    eo->install_timeout_s = (unsigned)(o->package_install_timeout + 0.5);
    eo->pip_index_url = o->pip_index_url;
    eo->pip_find_links = o->pip_find_links;
    /* A wheelhouse without an index is an offline install: pip must not reach for its own
       default index when a wheel is missing there. */
    eo->pip_no_index = o->pip_find_links != NULL && o->pip_index_url == NULL;
}

int ptc_env_new(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg, ptc_env_t **out)
{
    *out = NULL;
    ptc_env_t *e = calloc(1, sizeof *e);
    if (e == NULL) return MCP_ENOMEM;
    e->loop = loop;
    e->lg = lg;
    e->optional = o->packages_optional;
    e->specs = calloc(ENV_MAX_SPECS, sizeof *e->specs);
    if (e->specs == NULL) {
        free(e);
        return MCP_ENOMEM;
    }
    *out = e; /* from here ptc_env_free cleans up */
    int n = ptc_options_packages(o, e->specs, ENV_MAX_SPECS, stderr);
    if (n < 0) return MCP_EINVAL;
    e->n_specs = (size_t)n;
    if (o->package_install_timeout > ENV_MAX_INSTALL_TIMEOUT_S) {
        mcp_log(lg, MCP_LOG_ERROR, "--package-install-timeout: at most %u seconds",
                ENV_MAX_INSTALL_TIMEOUT_S);
        return MCP_EINVAL;
    }
    /* the program's cache base (reg_cache_base): env-*, custom-* sit beside pybundle-* */
    bool declared = e->n_specs > 0 || o->requirements != NULL;
    if ((declared || o->n_custom_tools > 0) &&
        reg_cache_base(e->cache_dir, sizeof e->cache_dir) < 0) {
        mcp_log(lg, MCP_LOG_ERROR,
                "no cache folder ($XDG_CACHE_HOME or $HOME) for --packages and --custom-tools");
        return MCP_EINVAL;
    }
    char msg[ENV_MESSAGE_MAX];
    if (declared) {
        env_options_t eo;
        fill_options(o, e->specs, e->n_specs, e->cache_dir, &eo);
        eo.log = env_log;
        eo.log_user = e;
        eo.on_done = on_env_done;
        eo.done_user = e;
        if (env_start(loop, &eo, &e->env, msg, sizeof msg) < 0) {
            mcp_log(lg, MCP_LOG_ERROR, "--packages/--requirements: %s", msg);
            return MCP_EINVAL;
        }
        env_status_t st;
        env_status(e->env, &st);
        if (st.state == ENV_STATE_FAILED) on_env_done(st.state, e);
    }
    if (o->n_custom_tools > 0) {
        if (env_custom_publish(e->cache_dir, o->custom_tools, o->n_custom_tools, &e->custom, msg,
                               sizeof msg) < 0) {
            mcp_log(lg, MCP_LOG_ERROR, "--custom-tools: %s", msg);
            return MCP_EINVAL;
        }
        e->has_custom = true;
        mcp_log(lg, MCP_LOG_INFO, "custom helpers: %zu module(s) in %s", e->custom.n_modules,
                e->custom.dir);
    }
    if (!declared) start_prune(e);
    return MCP_OK;
}

void ptc_env_on_change(ptc_env_t *e, void (*cb)(void *data), void *data)
{
    e->on_change = cb;
    e->change_data = data;
}

void ptc_env_free(ptc_env_t *e)
{
    if (e == NULL) return;
    exec_run_cancel(e->scan);
    /* the build stops and frees itself as the loop runs on; its waiters are only let go, so
       that their owners' cancels stay safe */
    env_free(e->env);
    env_prune_cancel(e->prune);
    ptc_options_packages_free(e->specs, e->n_specs);
    free(e->specs);
    env_custom_free(&e->custom);
    free(e);
}

/* --- what runs and results see -------------------------------------------------------------- */

ptc_env_run_t ptc_env_for_run(const ptc_env_t *e, uint64_t *building_ms)
{
    if (building_ms) *building_ms = 0;
    if (e == NULL || e->env == NULL) return PTC_ENV_RUN;
    env_status_t st;
    env_status(e->env, &st);
    switch (st.state) {
    case ENV_STATE_BUILDING:
        if (building_ms) *building_ms = st.elapsed_ms;
        return PTC_ENV_WAIT;
    case ENV_STATE_FAILED:
        return e->optional ? PTC_ENV_RUN : PTC_ENV_REFUSE;
    default:
        return PTC_ENV_RUN;
    }
}

ptc_env_waiter_t *ptc_env_wait(ptc_env_t *e, uint64_t max_ms, ptc_env_wait_cb cb, void *data)
{
    /* the handle is the library's waiter under the wiring's opaque name */
    return e == NULL ? NULL : (ptc_env_waiter_t *)env_wait(e->env, max_ms, cb, data);
}

void ptc_env_wait_cancel(ptc_env_waiter_t *handle)
{
    env_wait_cancel((env_waiter_t *)handle);
}

size_t ptc_env_path_dirs(const ptc_env_t *e, const char **dirs, size_t max)
{
    return e == NULL ? 0 : env_path_dirs(e->env, e->has_custom ? &e->custom : NULL, dirs, max);
}

char *ptc_env_describe(const ptc_env_t *e)
{
    return env_describe(e ? e->env : NULL, e && e->has_custom ? &e->custom : NULL);
}

char *ptc_env_result_note(const ptc_env_t *e)
{
    return e == NULL ? NULL : env_result_note(e->env, e->optional);
}

cJSON *ptc_env_result_json(const ptc_env_t *e)
{
    if (e == NULL || e->env == NULL) return NULL;
    env_status_t st;
    env_status(e->env, &st);
    if (st.state != ENV_STATE_FAILED && st.state != ENV_STATE_BUILDING) return NULL;
    cJSON *j = cJSON_CreateObject();
    cJSON *pk = cJSON_AddArrayToObject(j, "packages");
    bool ok = pk != NULL && cJSON_AddStringToObject(j, "state", env_state_name(st.state));
    for (size_t i = 0; ok && i < e->n_specs; i++)
        ok = cJSON_AddItemToArray(pk, cJSON_CreateString(e->specs[i]));
    if (ok && st.state == ENV_STATE_FAILED) {
        ok = (st.failed_package ? cJSON_AddStringToObject(j, "failed_package", st.failed_package)
                                : cJSON_AddNullToObject(j, "failed_package")) &&
             cJSON_AddStringToObject(j, "message", st.message ? st.message : "") &&
             cJSON_AddStringToObject(j, "pip_tail", st.tail ? st.tail : "") &&
             cJSON_AddBoolToObject(j, "optional", e->optional);
    }
    if (!ok) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

bool ptc_env_is_custom(const char *server)
{
    return server != NULL && strcmp(server, ENV_CUSTOM_SERVER) == 0;
}

/* --- the helpers' registry entries ---------------------------------------------------------- */

/* The scan's output as env_scan_t; ENV_E* for output that is not the scan's. */
static int parse_scan(const env_custom_t *c, const exec_result_t *r, env_scan_t *scan)
{
    return env_scan_parse(c, EXEC_RO_LIB_PATH, (const char *)r->out.data, r->out.len, scan);
}

/* The scan's functions as the registry's tool entries (caller deletes; NULL on ENOMEM). */
static cJSON *tools_of(const env_scan_t *scan)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr != NULL && i < scan->n_fns; i++) {
        const env_helper_fn_t *f = &scan->fns[i];
        cJSON *t = cJSON_CreateObject();
        cJSON *schema = cJSON_Parse(f->input_schema);
        bool ok = t != NULL && schema != NULL && cJSON_AddStringToObject(t, "name", f->name) &&
                  cJSON_AddStringToObject(t, "description", f->description) &&
                  cJSON_AddItemToObject(t, "inputSchema", schema);
        if (!ok) cJSON_Delete(schema);
        if (!ok || !cJSON_AddItemToArray(arr, t)) {
            cJSON_Delete(t);
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

static void scan_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    ptc_env_t *e = user;
    (void)run;
    e->scan = NULL;
    if (r->status != EXEC_STATUS_OK) {
        mcp_log(
            e->lg, MCP_LOG_ERROR,
            "custom helpers: the sandboxed scan of their functions did not finish (%s%s%s%.*s): "
            "they are importable but not searchable",
            exec_status_name(r->status), r->message ? ": " : "", r->message ? r->message : "",
            (int)(r->err.len > 400 ? 400 : r->err.len), (const char *)r->err.data);
        return;
    }
    env_scan_t scan;
    if (parse_scan(&e->custom, r, &scan) < 0) {
        mcp_log(e->lg, MCP_LOG_ERROR, "custom helpers: the scan's output was not understood");
        return;
    }
    for (size_t i = 0; i < scan.n_errors; i++)
        mcp_log(e->lg, MCP_LOG_ERROR,
                "--custom-tools %s:%d: %s; that file's functions are not listed, the other "
                "helpers are",
                scan.errors[i].file, scan.errors[i].line, scan.errors[i].error);
    cJSON *tools = tools_of(&scan);
    char msg[256] = "out of memory";
    reg_registry_t *reg = ptc_search_registry(e->search);
    if (reg != NULL && (tools == NULL || reg_registry_set_server_tools(
                                             reg, ENV_CUSTOM_SERVER, tools, msg, sizeof msg) < 0)) {
        mcp_log(e->lg, MCP_LOG_ERROR, "custom helpers: not added to the registry: %s", msg);
    } else {
        mcp_log(e->lg, MCP_LOG_INFO, "custom helpers: %zu function(s) listed as server %s",
                scan.n_fns, ENV_CUSTOM_SERVER);
        ptc_search_changed(e->search);
    }
    cJSON_Delete(tools);
    env_scan_free(&scan);
}

typedef void (*scan_done_fn)(exec_run_t *run, const exec_result_t *r, void *user);

static int start_scan(exec_pool_t *pool, const env_custom_t *c, scan_done_fn done, void *user,
                      exec_run_t **out)
{
    exec_run_opts_t ro;
    exec_run_opts_init(&ro);
    ro.ro_dir = c->dir; /* the script reads the first PYTHONPATH entry: this folder */
    exec_callbacks_t cb = {.on_done = done, .user = user};
    return exec_run_start_ex(pool, env_custom_scan_script(NULL), ENV_SCAN_TIMEOUT_MS, &ro, &cb,
                             out);
}

void ptc_env_scan_custom(ptc_env_t *e, ptc_execute_t *ex, ptc_search_t *search)
{
    if (e == NULL || !e->has_custom) return;
    e->search = search;
    int rc = start_scan(ptc__execute_pool(ex), &e->custom, scan_done, e, &e->scan);
    if (rc < 0) {
        e->scan = NULL;
        mcp_log(e->lg, MCP_LOG_ERROR, "custom helpers: the scan could not start: %s",
                exec_strerror(rc));
    }
}

/* --- --check -------------------------------------------------------------------------------- */

typedef struct check_scan {
    const env_custom_t *custom;
    int status;
} check_scan_t;

static void check_scan_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    check_scan_t *cs = user;
    (void)run;
    env_scan_t scan;
    if (r->status != EXEC_STATUS_OK) {
        printf("  the scan did not finish: %s%s%s\n", exec_status_name(r->status),
               r->message ? ": " : "", r->message ? r->message : "");
        cs->status = 1;
    } else if (parse_scan(cs->custom, r, &scan) < 0) {
        printf("  the scan's output was not understood\n");
        cs->status = 1;
    } else {
        env_scan_report(stdout, &scan, ENV_CUSTOM_SERVER "__");
        env_scan_free(&scan);
    }
}

/* The helpers: published, then scanned in a sandboxed run on a private loop. */
static int check_custom(const ptc_options_t *o, const char *cache)
{
    env_custom_t c;
    char msg[ENV_MESSAGE_MAX];
    if (env_custom_publish(cache, o->custom_tools, o->n_custom_tools, &c, msg, sizeof msg) < 0) {
        printf("custom helpers: ERROR: %s\n", msg);
        return 1;
    }
    env_custom_report(stdout, &c);
    check_scan_t cs = {.custom = &c, .status = 0};
    uv_loop_t loop;
    exec_pool_t *pool = NULL;
    if (uv_loop_init(&loop) != 0) {
        env_custom_free(&c);
        return 1;
    }
    exec_options_t eo;
    exec_options_init(&eo);
    if (o->python) eo.python = o->python;
    eo.unsafe_no_sandbox = o->unsafe_no_sandbox;
    eo.keep_warm = false; /* one run */
    int rc = exec_pool_new(&loop, &eo, &pool);
    exec_run_t *run = NULL;
    if (rc == 0) rc = start_scan(pool, &c, check_scan_done, &cs, &run);
    if (rc < 0) {
        printf("  the scan could not start: %s\n", exec_strerror(rc));
        cs.status = 1;
    } else {
        printf("functions:\n");
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    exec_pool_free(pool);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    env_custom_free(&c);
    return cs.status;
}

int ptc_env_check(const ptc_options_t *o)
{
    char *specs[ENV_MAX_SPECS];
    int n = ptc_options_packages(o, specs, ENV_MAX_SPECS, stdout);
    if (n < 0) return 1;
    bool declared = n > 0 || o->requirements != NULL;
    char cache[4096] = "";
    int status = 0;
    if ((declared || o->n_custom_tools > 0) && reg_cache_base(cache, sizeof cache) < 0) {
        printf("packages: ERROR: no cache folder ($XDG_CACHE_HOME or $HOME)\n");
        status = 1;
    } else {
        env_options_t eo;
        fill_options(o, specs, (size_t)n, cache, &eo);
        status = env_report(stdout, &eo);
        if (o->n_custom_tools == 0)
            printf("custom helpers: none\n");
        else if (check_custom(o, cache) != 0)
            status = 1;
    }
    ptc_options_packages_free(specs, (size_t)n);
    return status;
}
