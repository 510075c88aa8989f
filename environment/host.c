/* host.c - the environment of one server process (env_host_t): the declared packages' build
 * with its outcome in the host's log, the user's helpers published, the pruning once the folders
 * in use are known, what runs and results see of the packages' state, the helpers' scan run on
 * the executor with its functions handed over as tool entries, and `--check`'s report of both.
 * Nothing here knows MCP: the host gets log lines and tool entries through callbacks. */
#include "environment.h"

#include "executor.h"

#include <cjson/cJSON.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define ENV_DAY_S (24L * 60 * 60)

struct env_host {
    uv_loop_t *loop;
    char cache_dir[4096];
    env_t *env; /* NULL when nothing is declared */
    char **specs;
    size_t n_specs;
    bool optional;
    env_custom_t custom;
    bool has_custom;
    exec_run_t *scan; /* the helpers' scan: a sandboxed run */
    env_host_publish_fn publish;
    void *publish_user;
    env_prune_t *prune; /* once per process, on the thread pool */
    bool prune_started;
    void (*log)(env_log_level_t level, const char *line, void *user);
    void *log_user;
    void (*on_change)(void *data);
    void *change_data;
};

/* One line to the host's log (nothing without a log callback). */
static void host_log(const env_host_t *h, env_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void host_log(const env_host_t *h, env_log_level_t level, const char *fmt, ...)
{
    if (h->log == NULL) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    /* the failure line carries pip's last lines: sized to fit rather than cut */
    char *line = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (line != NULL) {
        va_start(ap, fmt);
        (void)vsnprintf(line, (size_t)n + 1, fmt, ap);
        va_end(ap);
        h->log(level, line, h->log_user);
    }
    free(line);
}

/* The build's own lines (pip's output included), marked as the packages'. */
static void build_log(env_log_level_t level, const char *line, void *user)
{
    host_log(user, level == ENV_LOG_ERROR ? ENV_LOG_ERROR : ENV_LOG_INFO, "packages: %s", line);
}

static void prune_done(long removed, void *user)
{
    env_host_t *h = user;
    h->prune = NULL;
    if (removed > 0)
        host_log(h, ENV_LOG_INFO, "removed %ld package or helper folder(s) unused for %ld days",
                 removed, ENV_PRUNE_AGE_S / ENV_DAY_S);
}

/* Once per process, when the folders in use are known (the packages' key once the build
   ended). */
static void start_prune(env_host_t *h)
{
    if (h->prune_started || h->cache_dir[0] == '\0') return;
    h->prune_started = true;
    env_status_t st;
    env_status(h->env, &st);
    (void)env_prune_start(h->loop, h->cache_dir, st.key_hex, h->has_custom ? h->custom.hex : NULL,
                          prune_done, h, &h->prune);
}

static void build_done(env_state_t state, void *user)
{
    env_host_t *h = user;
    env_status_t st;
    env_status(h->env, &st);
    (void)env_record_outcome(h->env); /* for --check; a failure to write only loses that */
    if (state == ENV_STATE_READY && st.reused) {
        host_log(h, ENV_LOG_INFO, "packages ready (reused %s, no pip run): %s", st.site_dir,
                 st.installed);
    } else if (state == ENV_STATE_READY) {
        host_log(h, ENV_LOG_INFO, "packages installed in %.1f s into %s: %s",
                 (double)st.install_ms / 1000.0, st.site_dir, st.installed);
    } else {
        host_log(h, ENV_LOG_ERROR, "packages: installing %s failed: %s%s%s",
                 st.failed_package ? st.failed_package : "the packages", st.message,
                 st.tail[0] ? "; pip's last lines:\n" : "", st.tail);
        host_log(h, ENV_LOG_ERROR, "%s",
                 h->optional ? "runs go on without the packages (--packages-optional)"
                             : "execute_code refuses runs until a restart installs them "
                               "(--packages-optional runs them without)");
    }
    start_prune(h);
    if (h->on_change != NULL) h->on_change(h->change_data);
}

static bool host_declared(const env_host_options_t *o)
{
    return o->build.n_specs > 0 || o->build.requirements_file != NULL;
}

/* The build's options: o's, with the host's callbacks. */
static void build_options(env_host_t *h, const env_host_options_t *o, env_options_t *eo)
{
    *eo = o->build;
    eo->log = build_log;
    eo->log_user = h;
    eo->on_done = build_done;
    eo->done_user = h;
}

/* The specs as the host keeps them for env_host_result_json. */
static int copy_specs(env_host_t *h, const env_host_options_t *o)
{
    int rc = ENV_OK;
    if (o->build.n_specs > ENV_MAX_SPECS) rc = ENV_ETOOBIG;
    if (rc == ENV_OK && o->build.n_specs > 0) {
        h->specs = calloc(o->build.n_specs, sizeof *h->specs);
        if (h->specs == NULL) rc = ENV_ENOMEM;
    }
    for (size_t i = 0; rc == ENV_OK && i < o->build.n_specs; i++) {
        h->specs[i] = strdup(o->build.specs[i]);
        if (h->specs[i] == NULL) rc = ENV_ENOMEM;
        h->n_specs = i + 1;
    }
    return rc;
}

/* Starts the build and publishes the helpers (the steps of env_host_new after its checks). */
static int host_start(env_host_t *h, const env_host_options_t *o)
{
    char msg[ENV_MESSAGE_MAX];
    int rc = copy_specs(h, o);
    if (rc == ENV_OK && host_declared(o)) {
        env_options_t eo;
        build_options(h, o, &eo);
        rc = env_start(h->loop, &eo, &h->env, msg, sizeof msg);
        if (rc < 0) {
            host_log(h, ENV_LOG_ERROR, "--packages/--requirements: %s", msg);
        } else {
            env_status_t st;
            env_status(h->env, &st);
            if (st.state == ENV_STATE_FAILED) build_done(st.state, h);
        }
    }
    if (rc == ENV_OK && o->n_custom > 0) {
        rc = env_custom_publish(h->cache_dir, o->custom_paths, o->n_custom, &h->custom, msg,
                                sizeof msg);
        if (rc < 0) {
            host_log(h, ENV_LOG_ERROR, "--custom-tools: %s", msg);
        } else {
            h->has_custom = true;
            host_log(h, ENV_LOG_INFO, "custom helpers: %zu module(s) in %s", h->custom.n_modules,
                     h->custom.dir);
        }
    }
    if (rc == ENV_OK && !host_declared(o)) start_prune(h);
    return rc;
}

/* The checks of env_host_new that need no file system, each failure logged. */
static int check_options(const env_host_t *h, const env_host_options_t *o, const char *cache)
{
    int rc = ENV_OK;
    if ((host_declared(o) || o->n_custom > 0) && cache[0] == '\0') {
        host_log(h, ENV_LOG_ERROR, "no cache folder for --packages and --custom-tools");
        rc = ENV_EINVAL;
    } else if (o->build.install_timeout_s > ENV_MAX_INSTALL_TIMEOUT_S) {
        host_log(h, ENV_LOG_ERROR, "--package-install-timeout: at most %u seconds",
                 ENV_MAX_INSTALL_TIMEOUT_S);
        rc = ENV_EINVAL;
    } else if (strlen(cache) >= sizeof h->cache_dir) {
        rc = ENV_ETOOBIG;
    }
    return rc;
}

int env_host_new(uv_loop_t *loop, const env_host_options_t *o, env_host_t **out)
{
    *out = NULL;
    int rc = ENV_OK;
    const char *cache = o->build.cache_dir != NULL ? o->build.cache_dir : "";
    env_host_t *h = loop != NULL ? calloc(1, sizeof *h) : NULL;
    if (h == NULL) rc = loop == NULL ? ENV_EINVAL : ENV_ENOMEM;
    if (rc == ENV_OK) {
        h->loop = loop;
        h->optional = o->optional;
        h->log = o->log;
        h->log_user = o->log_user;
        rc = check_options(h, o, cache);
    }
    if (rc == ENV_OK) {
        /* the cache folder matters only when something is declared: pruning looks at it then */
        if (host_declared(o) || o->n_custom > 0) memcpy(h->cache_dir, cache, strlen(cache) + 1);
        rc = host_start(h, o);
    }
    if (rc < 0) {
        env_host_free(h);
        h = NULL;
    }
    *out = h;
    return rc;
}

void env_host_on_change(env_host_t *h, void (*cb)(void *data), void *data)
{
    if (h == NULL) return;
    h->on_change = cb;
    h->change_data = data;
}

void env_host_free(env_host_t *h)
{
    if (h == NULL) return;
    exec_run_cancel(h->scan);
    /* the build stops and frees itself as the loop runs on; its waiters are only let go, so
       that their owners' cancels stay safe */
    env_free(h->env);
    env_prune_cancel(h->prune);
    for (size_t i = 0; i < h->n_specs; i++)
        free(h->specs[i]);
    free(h->specs);
    env_custom_free(&h->custom);
    free(h);
}

/* ---- what runs and results see --------------------------------------------------------------- */

env_run_t env_host_for_run(const env_host_t *h, uint64_t *building_ms)
{
    env_run_t what = ENV_RUN_NOW;
    env_status_t st = {.state = ENV_STATE_ABSENT};
    if (building_ms != NULL) *building_ms = 0;
    if (h != NULL && h->env != NULL) env_status(h->env, &st);
    if (st.state == ENV_STATE_BUILDING) {
        if (building_ms != NULL) *building_ms = st.elapsed_ms;
        what = ENV_RUN_WAIT;
    } else if (st.state == ENV_STATE_FAILED && !h->optional) {
        what = ENV_RUN_REFUSE;
    }
    return what;
}

env_waiter_t *env_host_wait(env_host_t *h, uint64_t max_ms, void (*cb)(void *data), void *data)
{
    return h == NULL ? NULL : env_wait(h->env, max_ms, cb, data);
}

size_t env_host_path_dirs(const env_host_t *h, const char **dirs, size_t max)
{
    return h == NULL ? 0 : env_path_dirs(h->env, h->has_custom ? &h->custom : NULL, dirs, max);
}

char *env_host_describe(const env_host_t *h)
{
    return env_describe(h ? h->env : NULL, h && h->has_custom ? &h->custom : NULL);
}

char *env_host_result_note(const env_host_t *h)
{
    return h == NULL ? NULL : env_result_note(h->env, h->optional);
}

/* The failure's fields of env_host_result_json into j; false on ENOMEM. */
static bool add_failure(const env_host_t *h, const env_status_t *st, cJSON *j)
{
    return (st->failed_package ? cJSON_AddStringToObject(j, "failed_package", st->failed_package)
                               : cJSON_AddNullToObject(j, "failed_package")) &&
           cJSON_AddStringToObject(j, "message", st->message ? st->message : "") &&
           cJSON_AddStringToObject(j, "pip_tail", st->tail ? st->tail : "") &&
           cJSON_AddBoolToObject(j, "optional", h->optional);
}

cJSON *env_host_result_json(const env_host_t *h)
{
    env_status_t st = {.state = ENV_STATE_ABSENT};
    if (h != NULL && h->env != NULL) env_status(h->env, &st);
    if (st.state != ENV_STATE_FAILED && st.state != ENV_STATE_BUILDING) return NULL;
    cJSON *j = cJSON_CreateObject();
    cJSON *pk = cJSON_AddArrayToObject(j, "packages");
    bool ok = pk != NULL && cJSON_AddStringToObject(j, "state", env_state_name(st.state));
    for (size_t i = 0; ok && i < h->n_specs; i++)
        ok = cJSON_AddItemToArray(pk, cJSON_CreateString(h->specs[i]));
    if (ok && st.state == ENV_STATE_FAILED) ok = add_failure(h, &st, j);
    if (!ok) {
        cJSON_Delete(j);
        j = NULL;
    }
    return j;
}

bool env_is_custom_server(const char *server)
{
    return server != NULL && strcmp(server, ENV_CUSTOM_SERVER) == 0;
}

/* ---- the helpers' scan ----------------------------------------------------------------------- */

cJSON *env_scan_tools_json(const env_scan_t *scan)
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
            arr = NULL;
        }
    }
    return arr;
}

/* The scan's output as env_scan_t; ENV_E* for output that is not the scan's. */
static int parse_scan(const env_custom_t *c, const exec_result_t *r, env_scan_t *scan)
{
    return env_scan_parse(c, EXEC_RO_LIB_PATH, (const char *)r->out.data, r->out.len, scan);
}

/* The scan's functions handed to the host; what came of it in the log. */
static void publish_scan(env_host_t *h, const env_scan_t *scan)
{
    for (size_t i = 0; i < scan->n_errors; i++)
        host_log(h, ENV_LOG_ERROR,
                 "--custom-tools %s:%d: %s; that file's functions are not listed, the other "
                 "helpers are",
                 scan->errors[i].file, scan->errors[i].line, scan->errors[i].error);
    cJSON *tools = env_scan_tools_json(scan);
    char msg[256] = "out of memory";
    if (tools == NULL || h->publish(tools, msg, sizeof msg, h->publish_user) < 0)
        host_log(h, ENV_LOG_ERROR, "custom helpers: not added to the registry: %s", msg);
    else
        host_log(h, ENV_LOG_INFO, "custom helpers: %zu function(s) listed as server %s",
                 scan->n_fns, ENV_CUSTOM_SERVER);
    cJSON_Delete(tools);
}

static void scan_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    env_host_t *h = user;
    (void)run;
    h->scan = NULL;
    env_scan_t scan;
    if (r->status != EXEC_STATUS_OK) {
        host_log(h, ENV_LOG_ERROR,
                 "custom helpers: the sandboxed scan of their functions did not finish "
                 "(%s%s%s%.*s): they are importable but not searchable",
                 exec_status_name(r->status), r->message ? ": " : "", r->message ? r->message : "",
                 (int)(r->err.len > 400 ? 400 : r->err.len), (const char *)r->err.data);
    } else if (parse_scan(&h->custom, r, &scan) < 0) {
        host_log(h, ENV_LOG_ERROR, "custom helpers: the scan's output was not understood");
    } else {
        publish_scan(h, &scan);
        env_scan_free(&scan);
    }
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

int env_host_scan_start(env_host_t *h, exec_pool_t *pool, env_host_publish_fn publish, void *user)
{
    int rc = ENV_OK;
    if (h == NULL || pool == NULL || publish == NULL || h->scan != NULL) rc = ENV_EINVAL;
    if (rc == ENV_OK && h->has_custom) {
        h->publish = publish;
        h->publish_user = user;
        rc = start_scan(pool, &h->custom, scan_done, h, &h->scan);
        if (rc < 0) {
            h->scan = NULL;
            host_log(h, ENV_LOG_ERROR, "custom helpers: the scan could not start: %s",
                     exec_strerror(rc));
        }
    }
    return rc;
}

/* ---- `--check` ------------------------------------------------------------------------------- */

typedef struct check_scan {
    FILE *out;
    const env_custom_t *custom;
    int status;
} check_scan_t;

static void check_scan_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    check_scan_t *cs = user;
    (void)run;
    env_scan_t scan;
    if (r->status != EXEC_STATUS_OK) {
        fprintf(cs->out, "  the scan did not finish: %s%s%s\n", exec_status_name(r->status),
                r->message ? ": " : "", r->message ? r->message : "");
        cs->status = 1;
    } else if (parse_scan(cs->custom, r, &scan) < 0) {
        fprintf(cs->out, "  the scan's output was not understood\n");
        cs->status = 1;
    } else {
        env_scan_report(cs->out, &scan, ENV_CUSTOM_SERVER "__");
        env_scan_free(&scan);
    }
}

/* The helpers' functions: one sandboxed scan on a private loop. */
static int check_scan(FILE *out, const env_custom_t *c, const exec_options_t *sandbox)
{
    check_scan_t cs = {.out = out, .custom = c, .status = 0};
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) return 1;
    exec_options_t eo = *sandbox;
    eo.keep_warm = false; /* one run */
    exec_pool_t *pool = NULL;
    int rc = exec_pool_new(&loop, &eo, &pool);
    exec_run_t *run = NULL;
    if (rc == 0) rc = start_scan(pool, c, check_scan_done, &cs, &run);
    if (rc < 0) {
        fprintf(out, "  the scan could not start: %s\n", exec_strerror(rc));
        cs.status = 1;
    } else {
        fprintf(out, "functions:\n");
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    exec_pool_free(pool);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return cs.status;
}

int env_host_check(FILE *out, const env_host_options_t *o, const exec_options_t *sandbox)
{
    int status = env_report(out, &o->build);
    if (o->n_custom == 0) {
        fprintf(out, "custom helpers: none\n");
    } else {
        env_custom_t c;
        char msg[ENV_MESSAGE_MAX];
        if (env_custom_publish(o->build.cache_dir, o->custom_paths, o->n_custom, &c, msg,
                               sizeof msg) < 0) {
            fprintf(out, "custom helpers: ERROR: %s\n", msg);
            status = 1;
        } else {
            env_custom_report(out, &c);
            if (check_scan(out, &c, sandbox) != 0) status = 1;
            env_custom_free(&c);
        }
    }
    return status;
}
