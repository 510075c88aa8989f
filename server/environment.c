/* environment.c - the sandbox's environment wired into the server: the declared packages
 * (environment/'s env_t: installed on the loop, mounted into runs once ready), the user's own
 * helpers (published at start-up, listed by a sandboxed scan into the registry as server
 * "custom"), what execute_code's description and results say about them, the pruning of old
 * folders, and --check's report. */
#include "execute_internal.h"

#include "environment.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define ENV_PRUNE_AGE_S           (30L * 24 * 60 * 60) /* env-* and custom-* unused this long go */
#define ENV_PRUNE_TMP_AGE_S       (24L * 60 * 60)      /* a dead builder's temporary folder */
#define ENV_SCAN_TIMEOUT_MS       10000u
#define ENV_MAX_INSTALL_TIMEOUT_S 86400u /* a day: far from the unsigned's range */
#define ENV_WAIT_TICK_MS          200u
#define ENV_CUSTOM_SERVER         "custom"
#define ENV_SANDBOX_LIB_ROOT      EXEC_RO_LIB_PATH "/"
/* <cache>/env-<hex>.failed: the last failed build of that set, for --check (one line). */
#define ENV_FAILED_SUFFIX ".failed"

typedef struct env_waiter {
    struct ptc_env *env;
    uint64_t deadline_ms; /* uv_now */
    ptc_env_wait_cb cb;
    void *data;
    struct env_waiter *next;
} env_waiter_t;

struct ptc_env {
    uv_loop_t *loop;
    const mcp_logger_t *lg;
    char cache_dir[4096];
    env_t *env; /* NULL without --packages/--requirements */
    char **specs;
    size_t n_specs;
    bool has_requirements;
    bool optional;
    uint64_t started_ms;
    env_custom_t custom;
    bool has_custom;
    /* the scan of the helpers: a sandboxed run */
    exec_run_t *scan;
    ptc_search_t *search;
    /* runs waiting for the build */
    env_waiter_t *waiters;
    uv_timer_t tick;
    bool tick_on;
    /* pruning, once, on the thread pool */
    uv_work_t prune;
    bool prune_queued, prune_running;
    char keep_env[ENV_KEY_HEX_LEN + 8], keep_custom[ENV_KEY_HEX_LEN + 8];
    long pruned;
    bool closing;
    void (*on_change)(void *data);
    void *change_data;
};

/* --- the log -------------------------------------------------------------------------------- */

static void env_log(env_log_level_t level, const char *line, void *user)
{
    ptc_env_t *e = user;
    mcp_level_t l = level == ENV_LOG_ERROR ? MCP_LOG_ERROR : MCP_LOG_INFO;
    mcp_log(e->lg, l, "packages: %s", line);
}

/* --- pruning -------------------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        (void)rmdir(path);
    else
        (void)unlink(path);
    return 0;
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void prune_work(uv_work_t *w)
{
    ptc_env_t *e = w->data;
    e->pruned = 0;
    DIR *d = opendir(e->cache_dir);
    if (d == NULL) return;
    time_t now = time(NULL);
    struct dirent *de;
    char path[4096 + 256];
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        bool tmp = (starts(n, ".env-") || starts(n, ".custom-")) && strstr(n, ".tmp-") != NULL;
        bool pub = starts(n, "env-") || starts(n, "custom-");
        if (!tmp && !pub) continue;
        if (strcmp(n, e->keep_env) == 0 || strcmp(n, e->keep_custom) == 0) continue;
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", e->cache_dir, n) >= sizeof path ||
            lstat(path, &st) != 0)
            continue;
        long age = tmp ? ENV_PRUNE_TMP_AGE_S : ENV_PRUNE_AGE_S;
        if ((int64_t)st.st_mtim.tv_sec >= (int64_t)now - age) continue;
        size_t nl = strlen(n), fl = strlen(ENV_FAILED_SUFFIX);
        if (S_ISREG(st.st_mode) && nl > fl && strcmp(n + nl - fl, ENV_FAILED_SUFFIX) == 0) {
            if (unlink(path) == 0) e->pruned++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) continue;
        /* FTW_PHYS: a symbolic link inside is removed, never followed. */
        (void)nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        if (lstat(path, &st) != 0) e->pruned++;
    }
    closedir(d);
}

static void maybe_free(ptc_env_t *e);

static void prune_done(uv_work_t *w, int status)
{
    ptc_env_t *e = w->data;
    e->prune_running = false;
    if (status == 0 && e->pruned > 0 && !e->closing)
        mcp_log(e->lg, MCP_LOG_INFO, "removed %ld package or helper folder(s) unused for %ld days",
                e->pruned, ENV_PRUNE_AGE_S / (24 * 60 * 60));
    maybe_free(e);
}

/* Once per process, when the folders in use are known (the packages' key once the build
 * ended). */
static void start_prune(ptc_env_t *e)
{
    if (e->prune_queued || e->closing || e->cache_dir[0] == '\0') return;
    e->prune_queued = true;
    env_status_t st;
    if (e->env != NULL) {
        env_status(e->env, &st);
        if (st.key_hex[0]) snprintf(e->keep_env, sizeof e->keep_env, "env-%s", st.key_hex);
    }
    if (e->has_custom) snprintf(e->keep_custom, sizeof e->keep_custom, "custom-%s", e->custom.hex);
    e->prune.data = e;
    if (uv_queue_work(e->loop, &e->prune, prune_work, prune_done) == 0) e->prune_running = true;
}

/* --- waiting for the build ------------------------------------------------------------------ */

static void release_waiters(ptc_env_t *e, bool all)
{
    uint64_t now = uv_now(e->loop);
    env_waiter_t **p = &e->waiters;
    while (*p != NULL) {
        env_waiter_t *w = *p;
        if (!all && w->deadline_ms > now) {
            p = &w->next;
            continue;
        }
        *p = w->next;
        ptc_env_wait_cb cb = w->cb;
        void *data = w->data;
        free(w);
        cb(data); /* may add or cancel other waiters: the list is re-read */
        p = &e->waiters;
    }
    if (e->waiters == NULL && e->tick_on) {
        uv_timer_stop(&e->tick);
        e->tick_on = false;
    }
}

static void on_tick(uv_timer_t *t)
{
    release_waiters(t->data, false);
}

ptc_env_waiter_t *ptc_env_wait(ptc_env_t *e, uint64_t max_ms, ptc_env_wait_cb cb, void *data)
{
    env_waiter_t *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    w->env = e;
    w->deadline_ms = uv_now(e->loop) + max_ms;
    w->cb = cb;
    w->data = data;
    w->next = e->waiters;
    e->waiters = w;
    if (!e->tick_on) {
        uv_timer_start(&e->tick, on_tick, ENV_WAIT_TICK_MS, ENV_WAIT_TICK_MS);
        e->tick_on = true;
    }
    return (ptc_env_waiter_t *)w;
}

void ptc_env_wait_cancel(ptc_env_waiter_t *handle)
{
    env_waiter_t *w = (env_waiter_t *)handle;
    if (w == NULL) return;
    if (w->env == NULL) { /* ptc_env_free let it go: its owner frees it */
        free(w);
        return;
    }
    for (env_waiter_t **p = &w->env->waiters; *p != NULL; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            free(w);
            return;
        }
}

/* Records (or, once ready, forgets) the set's last failure where --check finds it. A small
 * write on the loop's thread, once per start. */
static void record_failure(const ptc_env_t *e, const env_status_t *st)
{
    if (!st->key_hex[0]) return;
    char path[4096 + 128];
    if ((size_t)snprintf(path, sizeof path, "%s/env-%s%s", e->cache_dir, st->key_hex,
                         ENV_FAILED_SUFFIX) >= sizeof path)
        return;
    if (st->state != ENV_STATE_FAILED) {
        (void)unlink(path);
        return;
    }
    FILE *f = fopen(path, "we");
    if (f == NULL) return;
    fprintf(f, "installing %s failed: %s\n",
            st->failed_package ? st->failed_package : "the packages", st->message);
    fclose(f);
}

static void on_env_done(env_state_t state, void *user)
{
    ptc_env_t *e = user;
    env_status_t st;
    env_status(e->env, &st);
    record_failure(e, &st);
    if (state == ENV_STATE_READY) {
        if (st.reused)
            mcp_log(e->lg, MCP_LOG_INFO, "packages ready (reused %s, no pip run): %s", st.site_dir,
                    st.installed ? st.installed : "");
        else
            mcp_log(e->lg, MCP_LOG_INFO, "packages installed in %.1f s into %s: %s",
                    (double)st.install_ms / 1000.0, st.site_dir, st.installed ? st.installed : "");
    } else {
        mcp_log(e->lg, MCP_LOG_ERROR, "packages: installing %s failed: %s%s%s",
                st.failed_package ? st.failed_package : "the packages", st.message,
                st.tail && st.tail[0] ? "; pip's last lines:\n" : "", st.tail ? st.tail : "");
        mcp_log(e->lg, MCP_LOG_ERROR, "%s",
                e->optional ? "runs go on without the packages (--packages-optional)"
                            : "execute_code refuses runs until a restart installs them "
                              "(--packages-optional runs them without)");
    }
    start_prune(e);
    release_waiters(e, true);
    if (e->on_change != NULL) e->on_change(e->change_data);
}

/* --- set-up --------------------------------------------------------------------------------- */

/* The program's cache base (reg_cache_base): env-*, custom-* sit beside pybundle-*. The
 * library makes the folder when it writes there. */
static int cache_base(char *out, size_t size)
{
    return reg_cache_base(out, size) < 0 ? -1 : 0;
}

/* The env_options_t of the flags; specs are e's. */
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
    e->started_ms = uv_now(loop);
    e->specs = calloc(ENV_MAX_SPECS, sizeof *e->specs);
    if (e->specs == NULL || uv_timer_init(loop, &e->tick) != 0) {
        free(e->specs);
        free(e);
        return MCP_ENOMEM;
    }
    e->tick.data = e;
    *out = e; /* from here ptc_env_free cleans up */
    int n = ptc_options_packages(o, e->specs, ENV_MAX_SPECS, stderr);
    if (n < 0) return MCP_EINVAL;
    e->n_specs = (size_t)n;
    e->has_requirements = o->requirements != NULL;
    if (o->package_install_timeout > ENV_MAX_INSTALL_TIMEOUT_S) {
        mcp_log(lg, MCP_LOG_ERROR, "--package-install-timeout: at most %u seconds",
                ENV_MAX_INSTALL_TIMEOUT_S);
        return MCP_EINVAL;
    }
    bool declared = e->n_specs > 0 || e->has_requirements;
    if ((declared || o->n_custom_tools > 0) && cache_base(e->cache_dir, sizeof e->cache_dir) < 0) {
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
        int rc = env_start(loop, &eo, &e->env, msg, sizeof msg);
        if (rc < 0) {
            mcp_log(lg, MCP_LOG_ERROR, "--packages/--requirements: %s", msg);
            return MCP_EINVAL;
        }
        env_status_t st;
        env_status(e->env, &st);
        if (st.state == ENV_STATE_FAILED) on_env_done(st.state, e);
    }
    if (o->n_custom_tools > 0) {
        int rc = env_custom_publish(e->cache_dir, o->custom_tools, o->n_custom_tools, &e->custom,
                                    msg, sizeof msg);
        if (rc < 0) {
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

static void on_tick_closed(uv_handle_t *h)
{
    ptc_env_t *e = h->data;
    e->tick.data = NULL; /* closed */
    maybe_free(e);
}

static void maybe_free(ptc_env_t *e)
{
    if (!e->closing || e->prune_running || e->tick.data != NULL) return;
    ptc_options_packages_free(e->specs, e->n_specs);
    free(e->specs);
    env_custom_free(&e->custom);
    free(e);
}

void ptc_env_free(ptc_env_t *e)
{
    if (e == NULL) return;
    e->closing = true;
    exec_run_cancel(e->scan);
    e->scan = NULL;
    /* Waiting requests are cancelled by their sessions (which end before this); a waiter
       still held is only detached, so that its owner's cancel frees it safely. */
    while (e->waiters != NULL) {
        env_waiter_t *w = e->waiters;
        e->waiters = w->next;
        w->env = NULL;
        w->next = NULL;
    }
    env_free(e->env);
    e->env = NULL;
    uv_close((uv_handle_t *)&e->tick, on_tick_closed);
}

/* --- what runs and results see ---------------------------------------------------------------- */

ptc_env_run_t ptc_env_for_run(const ptc_env_t *e, uint64_t *building_ms)
{
    if (building_ms) *building_ms = 0;
    if (e == NULL || e->env == NULL) return PTC_ENV_RUN;
    env_status_t st;
    env_status(e->env, &st);
    switch (st.state) {
    case ENV_STATE_BUILDING:
        if (building_ms) *building_ms = uv_now(e->loop) - e->started_ms;
        return PTC_ENV_WAIT;
    case ENV_STATE_FAILED:
        return e->optional ? PTC_ENV_RUN : PTC_ENV_REFUSE;
    default:
        return PTC_ENV_RUN;
    }
}

size_t ptc_env_path_dirs(const ptc_env_t *e, const char **dirs, size_t max)
{
    size_t n = 0;
    if (e == NULL) return 0;
    if (e->env != NULL && n < max) {
        env_status_t st;
        env_status(e->env, &st);
        if (st.state == ENV_STATE_READY && st.site_dir != NULL) dirs[n++] = st.site_dir;
    }
    if (e->has_custom && n < max) dirs[n++] = e->custom.dir;
    return n;
}

static void add_specs(sbuf_t *b, const ptc_env_t *e)
{
    for (size_t i = 0; i < e->n_specs; i++)
        ptc__sb_fmt(b, "%s%s", i ? ", " : "", e->specs[i]);
    if (e->has_requirements) ptc__sb_fmt(b, "%sthe requirements file's", e->n_specs ? ", " : "");
}

/* The installed version of a requested spec, from "name version, name version" (names
   compared as PEP 503 does: case and runs of -_. do not matter). */
static bool find_version(const char *installed, const char *spec, char *out, size_t size)
{
    char want[ENV_MAX_SPEC_LEN];
    if (env_spec_normalise(spec, want, sizeof want) < 0) return false;
    size_t wl = strcspn(want, "[<>=!~; @");
    const char *p = installed;
    while (p != NULL && *p) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t item = strcspn(p, ",");
        size_t nl = strcspn(p, " ,");
        char name[ENV_MAX_SPEC_LEN];
        if (nl < sizeof name) {
            memcpy(name, p, nl);
            name[nl] = '\0';
            char norm[ENV_MAX_SPEC_LEN];
            if (env_spec_normalise(name, norm, sizeof norm) == 0 && strlen(norm) == wl &&
                strncmp(norm, want, wl) == 0) {
                snprintf(out, size, "%.*s", (int)item, p);
                return true;
            }
        }
        p += item;
    }
    return false;
}

char *ptc_env_describe(const ptc_env_t *e)
{
    sbuf_t b = {0};
    env_status_t st = {.state = ENV_STATE_ABSENT};
    if (e != NULL && e->env != NULL) env_status(e->env, &st);
    switch (st.state) {
    case ENV_STATE_READY:
        ptc__sb_str(&b, "the standard library and these packages are installed: ");
        if (e->has_requirements) {
            ptc__sb_str(&b, st.installed ? st.installed : "");
        } else {
            for (size_t i = 0; i < e->n_specs; i++) {
                char v[ENV_MAX_SPEC_LEN];
                if (!find_version(st.installed ? st.installed : "", e->specs[i], v, sizeof v))
                    snprintf(v, sizeof v, "%s", e->specs[i]);
                ptc__sb_fmt(&b, "%s%s", i ? ", " : "", v);
            }
        }
        break;
    case ENV_STATE_BUILDING:
        ptc__sb_str(&b, "the standard library is available, and these packages are being "
                        "installed (runs wait for them briefly): ");
        add_specs(&b, e);
        break;
    case ENV_STATE_FAILED:
        ptc__sb_fmt(&b, "standard library only (installing %s failed)",
                    st.failed_package ? st.failed_package : "the declared packages");
        break;
    default:
        ptc__sb_str(&b, "the standard library is available");
    }
    if (e != NULL && e->has_custom && e->custom.n_modules > 0) {
        ptc__sb_str(&b, "; your own helper modules are importable too: ");
        for (size_t i = 0; i < e->custom.n_modules; i++)
            ptc__sb_fmt(&b, "%s`import %s`", i ? ", " : "", e->custom.modules[i]);
        ptc__sb_str(&b, " (plain Python calls, no bridge; search_tools lists their functions)");
    }
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
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

char *ptc_env_result_note(const ptc_env_t *e)
{
    if (e == NULL || e->env == NULL) return NULL;
    env_status_t st;
    env_status(e->env, &st);
    sbuf_t b = {0};
    if (st.state == ENV_STATE_FAILED) {
        ptc__sb_fmt(&b, "The declared packages are not installed: installing %s failed. %s",
                    st.failed_package ? st.failed_package : "them", st.message ? st.message : "");
        ptc__sb_str(&b, e->optional ? " This run went without them (--packages-optional)."
                                    : " Runs are refused until they are installed "
                                      "(--packages-optional runs them without).");
        if (st.tail && st.tail[0]) {
            ptc__sb_str(&b, "\npip's last lines:\n");
            ptc__sb_str(&b, st.tail);
        }
    } else if (st.state == ENV_STATE_BUILDING) {
        ptc__sb_fmt(&b, "The environment is still being built (%.0f s so far): pip is installing ",
                    (double)(uv_now(e->loop) - e->started_ms) / 1000.0);
        add_specs(&b, e);
        ptc__sb_str(&b, ". Try again in a while.");
    } else {
        return NULL;
    }
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

bool ptc_env_is_custom(const char *server)
{
    return server != NULL && strcmp(server, ENV_CUSTOM_SERVER) == 0;
}

/* --- the helpers' registry entries -------------------------------------------------------- */

/* The host path of a file the scan names (a path under the run's read-only folder). */
static void host_file(const ptc_env_t *e, const char *file, char *out, size_t size)
{
    const char *rel =
        starts(file, ENV_SANDBOX_LIB_ROOT) ? file + strlen(ENV_SANDBOX_LIB_ROOT) : file;
    size_t top = strcspn(rel, "/");
    for (size_t i = 0; i < e->custom.n_modules; i++) {
        const char *m = e->custom.modules[i];
        bool is_file = rel[top] == '\0';
        if (is_file && strlen(m) + 3 == top && strncmp(rel, m, strlen(m)) == 0) {
            snprintf(out, size, "%s", e->custom.sources[i]);
            return;
        }
        if (!is_file && strlen(m) == top && strncmp(rel, m, top) == 0) {
            snprintf(out, size, "%s%s", e->custom.sources[i], rel + top);
            return;
        }
    }
    snprintf(out, size, "%s", file);
}

static cJSON *tool_of(const cJSON *t)
{
    const cJSON *mod = cJSON_GetObjectItemCaseSensitive(t, "module");
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(t, "signature");
    const cJSON *doc = cJSON_GetObjectItemCaseSensitive(t, "docstring");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "inputSchema");
    if (!cJSON_IsString(mod) || !cJSON_IsString(fn) || !cJSON_IsObject(schema)) return NULL;
    sbuf_t name = {0}, d = {0};
    ptc__sb_fmt(&name, "%s.%s", mod->valuestring, fn->valuestring);
    ptc__sb_fmt(&d, "%s", cJSON_IsString(sig) ? sig->valuestring : fn->valuestring);
    if (cJSON_IsString(doc)) {
        ptc__sb_str(&d, "\n");
        ptc__sb_str(&d, doc->valuestring);
    }
    /* the module part can be dotted (a package's submodule): import the top one's path */
    ptc__sb_fmt(&d, "\nRuns inside the sandbox: import %s; a plain Python call, no bridge.",
                mod->valuestring);
    cJSON *o = cJSON_CreateObject();
    bool ok = !name.failed && !d.failed && o != NULL &&
              cJSON_AddStringToObject(o, "name", name.s) &&
              cJSON_AddStringToObject(o, "description", d.s) &&
              cJSON_AddItemToObject(o, "inputSchema", cJSON_Duplicate(schema, true));
    free(name.s);
    free(d.s);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Logs the scan's errors and puts its tools into reg (server "custom"); returns how many
   tools, or -1 when the output was not the scan's JSON. */
static int apply_scan(ptc_env_t *e, reg_registry_t *reg, const char *out, size_t len, FILE *print)
{
    cJSON *doc = cJSON_ParseWithLength(out, len);
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(doc, "tools");
    const cJSON *errors = cJSON_GetObjectItemCaseSensitive(doc, "errors");
    if (!cJSON_IsArray(tools) || !cJSON_IsArray(errors)) {
        cJSON_Delete(doc);
        return -1;
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, errors)
    {
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(x, "file");
        const cJSON *line = cJSON_GetObjectItemCaseSensitive(x, "line");
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(x, "error");
        char host[4096 + 256];
        host_file(e, cJSON_IsString(file) ? file->valuestring : "?", host, sizeof host);
        int ln = cJSON_IsNumber(line) ? (int)line->valuedouble : 0;
        const char *why = cJSON_IsString(err) ? err->valuestring : "not readable";
        if (print != NULL)
            fprintf(print, "  ERROR %s:%d: %s (its functions are not listed)\n", host, ln, why);
        else
            mcp_log(e->lg, MCP_LOG_ERROR,
                    "--custom-tools %s:%d: %s; that file's functions are not listed, the other "
                    "helpers are",
                    host, ln, why);
    }
    cJSON *arr = cJSON_CreateArray();
    int n = 0;
    cJSON_ArrayForEach(x, tools)
    {
        cJSON *t = tool_of(x);
        if (t == NULL || arr == NULL || !cJSON_AddItemToArray(arr, t)) {
            cJSON_Delete(t);
            continue;
        }
        if (print != NULL) {
            const cJSON *sig = cJSON_GetObjectItemCaseSensitive(x, "signature");
            fprintf(print, "  %s__%s%s%s\n", ENV_CUSTOM_SERVER,
                    cJSON_GetObjectItemCaseSensitive(t, "name")->valuestring,
                    cJSON_IsString(sig) ? ": " : "", cJSON_IsString(sig) ? sig->valuestring : "");
        }
        n++;
    }
    if (reg != NULL && arr != NULL) {
        char msg[256];
        if (reg_registry_set_server_tools(reg, ENV_CUSTOM_SERVER, arr, msg, sizeof msg) < 0) {
            mcp_log(e->lg, MCP_LOG_ERROR, "custom helpers: not added to the registry: %s", msg);
            n = -1;
        }
    }
    cJSON_Delete(arr);
    cJSON_Delete(doc);
    return n;
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
    int n =
        apply_scan(e, ptc_search_registry(e->search), (const char *)r->out.data, r->out.len, NULL);
    if (n < 0) {
        mcp_log(e->lg, MCP_LOG_ERROR, "custom helpers: the scan's output was not understood");
        return;
    }
    mcp_log(e->lg, MCP_LOG_INFO, "custom helpers: %d function(s) listed as server %s", n,
            ENV_CUSTOM_SERVER);
    ptc_search_changed(e->search);
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

/* --- --check ------------------------------------------------------------------------------ */

typedef struct check_scan {
    ptc_env_t *e;
    int status;
} check_scan_t;

static void check_scan_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    check_scan_t *cs = user;
    (void)run;
    if (r->status != EXEC_STATUS_OK) {
        printf("  the scan did not finish: %s%s%s\n", exec_status_name(r->status),
               r->message ? ": " : "", r->message ? r->message : "");
        cs->status = 1;
        return;
    }
    if (apply_scan(cs->e, NULL, (const char *)r->out.data, r->out.len, stdout) < 0) {
        printf("  the scan's output was not understood\n");
        cs->status = 1;
    }
}

static int check_custom(const ptc_options_t *o, const char *cache)
{
    ptc_env_t e;
    memset(&e, 0, sizeof e);
    char msg[ENV_MESSAGE_MAX];
    if (env_custom_publish(cache, o->custom_tools, o->n_custom_tools, &e.custom, msg, sizeof msg) <
        0) {
        printf("custom helpers: ERROR: %s\n", msg);
        return 1;
    }
    printf("custom helpers: %s\n", e.custom.dir);
    for (size_t i = 0; i < e.custom.n_modules; i++)
        printf("  import %s  (from %s)\n", e.custom.modules[i], e.custom.sources[i]);
    e.has_custom = true;
    check_scan_t cs = {.e = &e, .status = 0};
    uv_loop_t loop;
    exec_pool_t *pool = NULL;
    if (uv_loop_init(&loop) != 0) {
        env_custom_free(&e.custom);
        return 1;
    }
    exec_options_t eo;
    exec_options_init(&eo);
    if (o->python) eo.python = o->python;
    eo.unsafe_no_sandbox = o->unsafe_no_sandbox;
    eo.keep_warm = false; /* one run */
    int rc = exec_pool_new(&loop, &eo, &pool);
    exec_run_t *run = NULL;
    if (rc == 0) rc = start_scan(pool, &e.custom, check_scan_done, &cs, &run);
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
    env_custom_free(&e.custom);
    return cs.status;
}

static void print_not_built(const ptc_options_t *o, const char *cache, const char *hex)
{
    char path[4096 + 128], line[ENV_MESSAGE_MAX + 128] = "";
    snprintf(path, sizeof path, "%s/env-%s%s", cache, hex, ENV_FAILED_SUFFIX);
    FILE *f = fopen(path, "re");
    if (f != NULL) {
        if (fgets(line, sizeof line, f) == NULL) line[0] = '\0';
        fclose(f);
        line[strcspn(line, "\n")] = '\0';
    }
    if (line[0])
        printf("  state: not built yet; the last start failed %s (the next start tries again)\n",
               line);
    else
        printf("  state: not built yet (the server installs them at start%s)\n",
               o->pip_find_links && !o->pip_index_url ? ", offline from --pip-find-links" : "");
}

int ptc_env_check(const ptc_options_t *o)
{
    char *specs[ENV_MAX_SPECS];
    int n = ptc_options_packages(o, specs, ENV_MAX_SPECS, stdout);
    if (n < 0) return 1;
    bool declared = n > 0 || o->requirements != NULL;
    char cache[4096];
    int status = 0;
    if ((declared || o->n_custom_tools > 0) && cache_base(cache, sizeof cache) < 0) {
        printf("packages: ERROR: no cache folder ($XDG_CACHE_HOME or $HOME)\n");
        ptc_options_packages_free(specs, (size_t)n);
        return 1;
    }
    if (!declared) {
        printf("packages: none declared (the standard library only)\n");
    } else {
        env_options_t eo;
        fill_options(o, specs, (size_t)n, cache, &eo);
        env_key_t key;
        char msg[ENV_MESSAGE_MAX];
        if (env_key_compute(eo.python, (const char *const *)specs, (size_t)n, o->requirements, &key,
                            msg, sizeof msg) < 0) {
            printf("packages: ERROR: %s\n", msg);
            status = 1;
        } else {
            printf("packages: ");
            for (size_t i = 0; i < key.n_specs; i++)
                printf("%s%s", i ? ", " : "", key.specs[i]);
            if (o->requirements) printf("%s-r %s", key.n_specs ? ", " : "", o->requirements);
            char first_line[256];
            snprintf(first_line, sizeof first_line, "%.*s", (int)strcspn(key.python_version, "\n"),
                     key.python_version);
            printf("\n  interpreter: %s (%s)\n", eo.python, first_line);
            printf("  key: %.12s\n  folder: %s/env-%s\n", key.hex, cache, key.hex);
            char site[4096];
            char *installed = NULL;
            int found = env_lookup(cache, &key, site, sizeof site, &installed);
            if (found == 1)
                printf("  state: ready (%s)\n  installed: %s\n", site, installed ? installed : "");
            else
                print_not_built(o, cache, key.hex);
            free(installed);
            env_key_free(&key);
        }
    }
    ptc_options_packages_free(specs, (size_t)n);
    if (o->n_custom_tools == 0) {
        printf("custom helpers: none\n");
    } else if (check_custom(o, cache) != 0) {
        status = 1;
    }
    return status;
}
