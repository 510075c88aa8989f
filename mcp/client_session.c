/* client_session.c - the MCP client to one downstream server: lifecycle (start, handshake,
 * restart with backoff, stop, free) and its public getters. The handshake is in client_handshake.c,
 * its calls in client_calls.c, the tools listing in client_listing.c, the requests the server
 * sends us in client_peers.c.
 *
 * Re-entrancy: hooks and call callbacks run user code that may call back into the client,
 * free it included. Every entry point brackets its work with enter()/leave() (in the other
 * files mcp__client_enter/mcp__client_leave); a free asked for inside is carried out by the
 * outermost leave(), so the client's memory stays valid while any of its frames is on the
 * stack. */
#include "client_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void really_free(mcp_client_t *c);

static void enter(mcp_client_t *c)
{
    c->depth++;
}

/* Returns true when the client was freed: the caller must not touch it any more. */
static bool leave(mcp_client_t *c)
{
    if (--c->depth == 0 && c->free_pending) {
        really_free(c);
        return true;
    }
    return false;
}

void mcp__client_enter(mcp_client_t *c)
{
    enter(c);
}

bool mcp__client_leave(mcp_client_t *c)
{
    return leave(c);
}

bool mcp__client_gone(const mcp_client_t *c)
{
    return c->free_pending;
}

const char *mcp_client_state_name(mcp_client_state_t state)
{
    switch (state) {
    case MCP_CLIENT_STARTING:
        return "starting";
    case MCP_CLIENT_READY:
        return "ready";
    case MCP_CLIENT_FAILED:
        return "failed";
    case MCP_CLIENT_STOPPED:
        return "stopped";
    }
    return "unknown";
}

void mcp_client_opts_default(mcp_client_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->start_timeout_ms = MCP_CLIENT_DEFAULT_START_TIMEOUT_MS;
    o->call_wait_ms = MCP_CLIENT_DEFAULT_CALL_WAIT_MS;
    o->stop_grace_ms = MCP_CLIENT_DEFAULT_STOP_GRACE_MS;
    o->restart_max = MCP_CLIENT_DEFAULT_RESTART_MAX;
    o->restart_base_ms = MCP_CLIENT_DEFAULT_RESTART_BASE_MS;
    o->restart_cap_ms = MCP_CLIENT_DEFAULT_RESTART_CAP_MS;
    o->healthy_ms = MCP_CLIENT_DEFAULT_HEALTHY_MS;
    o->max_message_bytes = MCP_CLIENT_DEFAULT_MAX_MESSAGE_BYTES;
    o->max_stderr_line = MCP_CLIENT_DEFAULT_MAX_STDERR_LINE;
    o->max_calls = MCP_CLIENT_DEFAULT_MAX_CALLS;
    o->max_tools = MCP_CLIENT_DEFAULT_MAX_TOOLS;
}

/* --- state ----------------------------------------------------------------------------- */

static void set_state(mcp_client_t *c, mcp_client_state_t st, const char *reason)
{
    char *r = reason != NULL ? mcp__strdup(reason) : NULL;
    free(c->reason);
    c->reason = r;
    c->state = st;
    switch (st) {
    case MCP_CLIENT_READY:
        mcp_log(c->lg, MCP_LOG_INFO, "downstream server %s is ready (%d tools)", c->name,
                cJSON_GetArraySize(c->tools));
        break;
    case MCP_CLIENT_FAILED:
        mcp_log(c->lg, MCP_LOG_ERROR, "downstream server %s failed: %s", c->name,
                reason != NULL ? reason : "unknown reason");
        break;
    case MCP_CLIENT_STARTING:
        if (reason != NULL)
            mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s: %s", c->name, reason);
        break;
    case MCP_CLIENT_STOPPED:
        mcp_log(c->lg, MCP_LOG_INFO, "downstream server %s stopped", c->name);
        break;
    }
    if (c->hooks.state_changed != NULL) c->hooks.state_changed(c, st, c->reason, c->hooks.data);
}

/* --- lifecycle ------------------------------------------------------------------------- */

static void on_healthy(uv_timer_t *t)
{
    mcp_client_t *c = t->data;
    if (c->attempts > 0)
        mcp_log(c->lg, MCP_LOG_DEBUG, "downstream server %s has been healthy; restart count reset",
                c->name);
    c->attempts = 0;
}

void mcp__client_become_ready(mcp_client_t *c)
{
    uv_timer_stop(c->start_timer);
    c->ever_ready = true;
    if (c->opts.healthy_ms > 0) uv_timer_start(c->healthy_timer, on_healthy, c->opts.healthy_ms, 0);
    set_state(c, MCP_CLIENT_READY, NULL);
    if (mcp__client_gone(c) || c->state != MCP_CLIENT_READY) return;
    mcp__client_flush_waiting(c);
    if (!mcp__client_gone(c) && c->relist && !c->listing && c->state == MCP_CLIENT_READY)
        mcp__client_start_listing(c);
    if (!mcp__client_gone(c) && c->modern && !c->listening && c->state == MCP_CLIENT_READY)
        mcp__client_start_listen(c);
}

static void on_deferred(uv_timer_t *t);

static void defer(mcp_client_t *c, mcp__client_deferred_t what, uint64_t ms)
{
    c->deferred = what;
    uv_timer_start(c->defer_timer, on_deferred, ms, 0);
}

static void set_failed(mcp_client_t *c, const char *reason)
{
    set_state(c, MCP_CLIENT_FAILED, reason);
    if (mcp__client_gone(c)) return;
    mcp__client_fail_calls(c, MCP__CALLS_WAITING, MCP_ESTATE,
                           c->reason != NULL ? c->reason : "failed");
}

/* The running server is gone (or never came up). Decides between a restart and giving up. */
static void after_failure(mcp_client_t *c, const char *reason)
{
    uv_timer_stop(c->start_timer);
    uv_timer_stop(c->healthy_timer);
    c->listing = false;
    cJSON_Delete(c->listing_tools);
    c->listing_tools = NULL;
    cJSON_Delete(c->init_result);
    c->init_result = NULL;
    mcp__client_fail_calls(c, MCP__CALLS_INTERNAL, 0, "");
    char what[MCP__CLIENT_REASON_MAX + 64];
    snprintf(what, sizeof what, "the server %s while the call was in flight", reason);
    mcp__client_fail_calls(c, MCP__CALLS_SENT_USER, MCP_ECLOSED, what);
    if (!mcp__client_gone(c)) mcp__client_cancel_peers(c);
    if (mcp__client_gone(c)) return;
    if (!c->ever_ready) {
        set_failed(c, reason);
        return;
    }
    c->attempts++;
    char msg[MCP__CLIENT_REASON_MAX + 128];
    if (c->attempts > c->opts.restart_max) {
        snprintf(msg, sizeof msg, "gave up after %u restarts; last failure: %s",
                 c->opts.restart_max, reason);
        set_failed(c, msg);
        return;
    }
    uint64_t delay = c->opts.restart_base_ms;
    for (unsigned i = 1; i < c->attempts && delay < c->opts.restart_cap_ms; i++)
        delay *= 2;
    if (delay > c->opts.restart_cap_ms) delay = c->opts.restart_cap_ms;
    snprintf(msg, sizeof msg, "%s; restarting in %llu ms (attempt %u of %u)", reason,
             (unsigned long long)delay, c->attempts, c->opts.restart_max);
    defer(c, MCP__DEFER_SPAWN, delay);
    set_state(c, MCP_CLIENT_STARTING, msg);
}

/* The current start attempt failed: kill what runs and decide. */
void mcp__client_start_failure(mcp_client_t *c, const char *reason)
{
    if (c->proc != NULL) {
        mcp__proc_t *p = c->proc;
        c->proc = NULL;
        mcp__proc_stop(p, true, true);
    }
    if (c->http != NULL) {
        mcp__http_conn_t *h = c->http;
        c->http = NULL;
        mcp__http_close(h);
    }
    after_failure(c, reason);
}

static void connect_http(mcp_client_t *c)
{
    if (c->legacy_sse) {
        set_failed(c, "the legacy SSE transport (\"type\": \"sse\") is not supported yet; point "
                      "\"url\" at the server's Streamable HTTP endpoint with \"type\": \"http\"");
        return;
    }
    if (c->opts.http == NULL) {
        set_failed(c, "http downstream servers need ptc-mcp's HTTP client, and none was set up");
        return;
    }
    c->gen++;
    c->garbage_logged = 0;
    int rc = mcp__http_open(c, c->gen, &c->http);
    if (rc < 0) {
        after_failure(c, mcp_strerror(rc));
        return;
    }
    c->spawns++;
    mcp_log(c->lg, MCP_LOG_INFO, "downstream server %s: connecting to %s", c->name, c->url);
    mcp__client_send_initialize(c);
}

static void spawn_now(mcp_client_t *c)
{
    char reason[MCP__CLIENT_REASON_MAX];
    if (c->kind == MCP_DOWNSTREAM_HTTP) {
        connect_http(c);
        return;
    }
    char *file = mcp__client_which(c->argv[0], c->envp, reason, sizeof reason);
    if (file == NULL) {
        after_failure(c, reason);
        return;
    }
    struct stat st;
    if (c->cwd != NULL && (stat(c->cwd, &st) != 0 || !S_ISDIR(st.st_mode))) {
        snprintf(reason, sizeof reason, "its \"cwd\" %.512s is not a folder", c->cwd);
        free(file);
        after_failure(c, reason);
        return;
    }
    c->gen++;
    c->garbage_logged = 0;
    int rc = mcp__proc_spawn(c, file, c->argv, c->envp, c->cwd, c->gen, c->opts.max_message_bytes,
                             c->opts.max_stderr_line, c->opts.stop_grace_ms, &c->proc);
    if (rc < 0) {
        snprintf(reason, sizeof reason, "cannot run %.512s: %s", file, uv_strerror(rc));
        free(file);
        after_failure(c, reason);
        return;
    }
    c->spawns++;
    mcp_log(c->lg, MCP_LOG_INFO, "downstream server %s: started %s (pid %d)", c->name, file,
            c->proc->pid);
    free(file);
    mcp__client_send_initialize(c);
}

static void finish_stop(mcp_client_t *c)
{
    c->stopping = false;
    void (*done)(mcp_client_t *, void *) = c->stop_done;
    void *data = c->stop_data;
    c->stop_done = NULL;
    set_state(c, MCP_CLIENT_STOPPED, NULL);
    if (!mcp__client_gone(c) && done != NULL) done(c, data);
}

static void on_deferred(uv_timer_t *t)
{
    mcp_client_t *c = t->data;
    mcp__client_deferred_t what = c->deferred;
    c->deferred = MCP__DEFER_NONE;
    enter(c);
    if (what == MCP__DEFER_SPAWN)
        spawn_now(c);
    else if (what == MCP__DEFER_STOPPED)
        finish_stop(c);
    leave(c);
}

void mcp__client_on_exit(mcp_client_t *c, mcp__proc_t *p)
{
    if (c->proc != p) return;
    enter(c);
    c->proc = NULL;
    char how[MCP__CLIENT_REASON_MAX];
    mcp__proc_describe_exit(p, how, sizeof how);
    if (c->stopping) {
        finish_stop(c);
    } else if (c->state == MCP_CLIENT_READY) {
        mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s %s", c->name, how);
        after_failure(c, how);
    } else {
        char reason[MCP__CLIENT_REASON_MAX + 64];
        snprintf(reason, sizeof reason, "%s before the handshake finished", how);
        after_failure(c, reason);
    }
    leave(c);
}

void mcp__client_on_http_failure(mcp_client_t *c, mcp__http_conn_t *h, const char *reason)
{
    if (c->http != h) return;
    enter(c);
    c->http = NULL;
    mcp__http_close(h);
    if (c->state == MCP_CLIENT_READY)
        mcp_log(c->lg, MCP_LOG_WARNING, "downstream server %s: %s", c->name, reason);
    after_failure(c, reason);
    leave(c);
}

/* --- public API ------------------------------------------------------------------------ */

static void free_strv(char **v)
{
    if (v == NULL) return;
    for (size_t i = 0; v[i] != NULL; i++)
        free(v[i]);
    free(v);
}

static char *kv_join(const char *name, const char *value)
{
    size_t n = strlen(name) + 1 + strlen(value) + 1;
    char *s = malloc(n);
    if (s != NULL) snprintf(s, n, "%s=%s", name, value);
    return s;
}

static bool name_in_list(const char *name, size_t nl, const char *list, char sep)
{
    for (const char *p = list; *p != '\0';) {
        const char *end = strchr(p, sep);
        size_t wl = end != NULL ? (size_t)(end - p) : strlen(p);
        if (wl == nl && strncmp(p, name, nl) == 0) return true;
        if (end == NULL) break;
        p = end + 1;
    }
    return false;
}

static bool name_withheld(const char *name, size_t nl, const char *const *withheld)
{
    for (size_t i = 0; withheld != NULL && withheld[i] != NULL; i++)
        if (strlen(withheld[i]) == nl && strncmp(withheld[i], name, nl) == 0) return true;
    return false;
}

/* Whether the base variable "NAME=VALUE" (name nl bytes) passes to a child: the SDKs' default
 * list and the locale, so that a downstream tool that reports its environment hands sandboxed
 * code none of the server's secrets. Values starting "()" are exported shell functions, which
 * the SDKs skip too (a shell in the child would run them). */
static bool env_inherited(const char *kv, size_t nl, const char *const *withheld)
{
    if (name_withheld(kv, nl, withheld)) return false;
    if (strncmp(kv + nl + 1, "()", 2) == 0) return false;
    if (name_in_list(kv, nl, MCP_CLIENT_INHERITED_ENV, ' ')) return true;
    if ((nl == 4 && strncmp(kv, "LANG", 4) == 0) || (nl == 8 && strncmp(kv, "LANGUAGE", 8) == 0))
        return true;
    return nl > 3 && strncmp(kv, "LC_", 3) == 0;
}

/* Builds argv and the environment, expanding ${VAR}. Returns MCP_OK or an error (logged). */
static int build_command(mcp_client_t *c, const mcp_downstream_server_t *e, char *const *base,
                         const char *const *withheld)
{
    bool too_long = false;
    const char *cfg_path = NULL;
    char *cfg_path_owned = NULL;
    c->argv = calloc(e->n_args + 2, sizeof *c->argv);
    if (c->argv == NULL) return MCP_ENOMEM;
    c->argv[0] = mcp__client_expand(e->command, base, c->name, c->lg, &too_long);
    for (size_t i = 0; i < e->n_args && c->argv[i] != NULL; i++)
        c->argv[i + 1] = mcp__client_expand(e->args[i], base, c->name, c->lg, &too_long);
    if (c->argv[e->n_args] == NULL) goto fail;

    size_t n_base = 0;
    while (base != NULL && base[n_base] != NULL)
        n_base++;
    c->envp = calloc(n_base + e->n_env + 2, sizeof *c->envp);
    if (c->envp == NULL) return MCP_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < n_base; i++) {
        const char *eq = strchr(base[i], '=');
        if (eq == NULL) continue;
        size_t nl = (size_t)(eq - base[i]);
        if (!env_inherited(base[i], nl, withheld)) continue;
        bool replaced = nl == 4 && strncmp(base[i], "PATH", 4) == 0;
        for (size_t j = 0; j < e->n_env && !replaced; j++)
            replaced = strlen(e->env[j].name) == nl && strncmp(e->env[j].name, base[i], nl) == 0;
        if (replaced) continue;
        if ((c->envp[n++] = mcp__strdup(base[i])) == NULL) goto fail;
    }
    for (size_t j = 0; j < e->n_env; j++) {
        char *v = mcp__client_expand(e->env[j].value, base, c->name, c->lg, &too_long);
        if (v == NULL) goto fail;
        if (strcmp(e->env[j].name, "PATH") == 0) {
            free(cfg_path_owned);
            cfg_path = cfg_path_owned = v;
            continue;
        }
        if (name_withheld(e->env[j].name, strlen(e->env[j].name), withheld))
            mcp_log(c->lg, MCP_LOG_NOTICE,
                    "downstream server %s: its \"env\" passes %s, which ptc-mcp otherwise keeps "
                    "from downstream servers (it holds one of ptc-mcp's secrets)",
                    c->name, e->env[j].name);
        c->envp[n] = kv_join(e->env[j].name, v);
        free(v);
        if (c->envp[n++] == NULL) goto fail;
    }
    /* PATH: the entry's own first, then ours, then the command's folder, so that a
     * "#!/usr/bin/env node" script named by full path finds the node beside it. */
    const char *base_path =
        name_withheld("PATH", 4, withheld) ? NULL : mcp__client_env_get(base, "PATH");
    const char *slash = strrchr(c->argv[0], '/');
    size_t total = 6 + (cfg_path ? strlen(cfg_path) : 0) + (base_path ? strlen(base_path) : 0) +
                   (slash ? (size_t)(slash - c->argv[0]) : 0) + 4;
    if (total > PTC_CAP_CLIENT_EXPANDED) {
        too_long = true;
        goto fail;
    }
    char *path = malloc(total);
    if (path == NULL) goto fail;
    size_t len = (size_t)snprintf(path, total, "PATH=");
    const char *parts[3] = {cfg_path, base_path, NULL};
    size_t plen[3] = {cfg_path ? strlen(cfg_path) : 0, base_path ? strlen(base_path) : 0, 0};
    if (slash != NULL && slash != c->argv[0]) {
        parts[2] = c->argv[0];
        plen[2] = (size_t)(slash - c->argv[0]);
    }
    for (size_t i = 0; i < 3; i++) {
        if (parts[i] == NULL || plen[i] == 0) continue;
        len += (size_t)snprintf(path + len, total - len, "%s%.*s", len > 5 ? ":" : "", (int)plen[i],
                                parts[i]);
    }
    c->envp[n++] = path;
    free(cfg_path_owned);
    return MCP_OK;
fail:
    free(cfg_path_owned);
    if (too_long)
        mcp_log(c->lg, MCP_LOG_ERROR,
                "downstream server %s: an argument or environment value is longer than %u bytes "
                "after ${VAR} expansion",
                c->name, PTC_CAP_CLIENT_EXPANDED);
    return too_long ? MCP_ETOOBIG : MCP_ENOMEM;
}

int mcp_client_new(uv_loop_t *loop, const mcp_downstream_server_t *entry,
                   const mcp_client_opts_t *opts, const mcp_client_hooks_t *hooks,
                   const mcp_logger_t *lg, mcp_client_t **out)
{
    *out = NULL;
    if (loop == NULL || entry == NULL || entry->name == NULL) return MCP_EINVAL;
    if (entry->kind == MCP_DOWNSTREAM_STDIO && entry->command == NULL) return MCP_EINVAL;
    if (entry->kind == MCP_DOWNSTREAM_HTTP &&
        (entry->url == NULL || entry->n_headers > MCP_DOWNSTREAM_MAX_HEADERS))
        return MCP_EINVAL;
    mcp_client_t *c = calloc(1, sizeof *c);
    if (c == NULL) return MCP_ENOMEM;
    c->loop = loop;
    c->lg = lg;
    if (hooks != NULL) c->hooks = *hooks;
    if (opts != NULL)
        c->opts = *opts;
    else
        mcp_client_opts_default(&c->opts);
    c->opts.environ = NULL;
    c->opts.withheld_env = NULL;
    if (c->opts.max_message_bytes == 0)
        c->opts.max_message_bytes = MCP_CLIENT_DEFAULT_MAX_MESSAGE_BYTES;
    if (c->opts.max_stderr_line == 0) c->opts.max_stderr_line = MCP_CLIENT_DEFAULT_MAX_STDERR_LINE;
    if (c->opts.max_calls == 0) c->opts.max_calls = MCP_CLIENT_DEFAULT_MAX_CALLS;
    if (c->opts.max_tools == 0) c->opts.max_tools = MCP_CLIENT_DEFAULT_MAX_TOOLS;
    c->state = MCP_CLIENT_STOPPED;
    c->kind = entry->kind;
    c->next_id = 1;
    c->name = mcp__strdup(entry->name);
    c->tools = cJSON_CreateArray();
    c->start_timer = malloc(sizeof *c->start_timer);
    c->defer_timer = malloc(sizeof *c->defer_timer);
    c->healthy_timer = malloc(sizeof *c->healthy_timer);
    int rc = MCP_ENOMEM;
    if (c->name == NULL || c->tools == NULL || c->start_timer == NULL || c->defer_timer == NULL ||
        c->healthy_timer == NULL) {
        free(c->start_timer);
        free(c->defer_timer);
        free(c->healthy_timer);
        c->start_timer = c->defer_timer = c->healthy_timer = NULL;
        goto fail;
    }
    uv_timer_init(loop, c->start_timer);
    uv_timer_init(loop, c->defer_timer);
    uv_timer_init(loop, c->healthy_timer);
    c->start_timer->data = c->defer_timer->data = c->healthy_timer->data = c;
    if (entry->kind == MCP_DOWNSTREAM_HTTP) {
        char *const *base = opts != NULL && opts->environ != NULL ? opts->environ : environ;
        bool too_long = false;
        c->legacy_sse = entry->type != NULL && strcmp(entry->type, "sse") == 0;
        c->url = mcp__client_expand(entry->url, base, c->name, lg, &too_long);
        if (c->url == NULL) goto fail;
        if (entry->n_headers > 0) {
            c->headers = calloc(entry->n_headers, sizeof *c->headers);
            if (c->headers == NULL) goto fail;
        }
        for (size_t i = 0; i < entry->n_headers; i++) {
            c->headers[i].name = mcp__strdup(entry->headers[i].name);
            c->headers[i].value =
                mcp__client_expand(entry->headers[i].value, base, c->name, lg, &too_long);
            c->n_headers++;
            if (c->headers[i].name == NULL || c->headers[i].value == NULL) goto fail;
        }
    } else {
        char *const *base = opts != NULL && opts->environ != NULL ? opts->environ : environ;
        if ((rc = build_command(c, entry, base, opts != NULL ? opts->withheld_env : NULL)) < 0)
            goto fail;
        if (entry->cwd != NULL && (c->cwd = mcp__strdup(entry->cwd)) == NULL) {
            rc = MCP_ENOMEM;
            goto fail;
        }
    }
    *out = c;
    return MCP_OK;
fail:
    really_free(c);
    return rc;
}

int mcp_client_start(mcp_client_t *c)
{
    if (mcp__client_gone(c) || c->stopping) return MCP_ESTATE;
    if (c->state == MCP_CLIENT_STARTING || c->state == MCP_CLIENT_READY) return MCP_ESTATE;
    c->attempts = 0;
    c->ever_ready = false;
    free(c->reason);
    c->reason = NULL;
    c->state = MCP_CLIENT_STARTING;
    defer(c, MCP__DEFER_SPAWN, 0);
    return MCP_OK;
}

void mcp_client_stop(mcp_client_t *c, void (*done)(mcp_client_t *c, void *data), void *data)
{
    if (mcp__client_gone(c) || c->stopping) return;
    enter(c);
    c->stopping = true;
    c->stop_done = done;
    c->stop_data = data;
    uv_timer_stop(c->start_timer);
    uv_timer_stop(c->healthy_timer);
    uv_timer_stop(c->defer_timer);
    c->deferred = MCP__DEFER_NONE;
    c->listing = false;
    mcp__client_fail_calls(c, MCP__CALLS_INTERNAL, 0, "");
    mcp__client_fail_calls(c, MCP__CALLS_ALL_USER, MCP_ECANCELED, "the server is being stopped");
    if (!mcp__client_gone(c)) mcp__client_cancel_peers(c);
    if (!mcp__client_gone(c)) {
        if (c->http != NULL) {
            mcp__http_conn_t *h = c->http;
            c->http = NULL;
            mcp__http_close(h);
        }
        if (c->proc != NULL)
            mcp__proc_stop(c->proc, false, false);
        else
            defer(c, MCP__DEFER_STOPPED, 0);
    }
    leave(c);
}

static void really_free(mcp_client_t *c)
{
    c->depth++; /* callbacks below must not free again */
    memset(&c->hooks, 0, sizeof c->hooks);
    mcp__client_fail_calls(c, MCP__CALLS_INTERNAL, 0, "");
    mcp__client_fail_calls(c, MCP__CALLS_ALL_USER, MCP_ECANCELED, "the client was closed");
    for (mcp_client_peer_req_t *r = c->peers; r != NULL;) {
        mcp_client_peer_req_t *next = r->next;
        r->c = NULL;
        r->cancelled = true;
        r->prev = r->next = NULL;
        r = next;
    }
    c->peers = NULL;
    if (c->proc != NULL) mcp__proc_stop(c->proc, true, false);
    c->proc = NULL;
    if (c->http != NULL) mcp__http_close(c->http);
    c->http = NULL;
    for (size_t i = 0; i < c->n_headers; i++) {
        free(c->headers[i].name);
        free(c->headers[i].value);
    }
    free(c->headers);
    mcp__close_free((uv_handle_t *)c->start_timer);
    mcp__close_free((uv_handle_t *)c->defer_timer);
    mcp__close_free((uv_handle_t *)c->healthy_timer);
    free_strv(c->argv);
    free_strv(c->envp);
    free(c->name);
    free(c->command);
    free(c->url);
    free(c->cwd);
    free(c->reason);
    free(c->last_cursor);
    cJSON_Delete(c->tools);
    cJSON_Delete(c->listing_tools);
    cJSON_Delete(c->init_result);
    cJSON_Delete(c->roots);
    free(c);
}

void mcp_client_free(mcp_client_t *c)
{
    if (c == NULL || c->free_pending) return;
    c->free_pending = true;
    memset(&c->hooks, 0, sizeof c->hooks);
    if (c->depth == 0) really_free(c);
}

const char *mcp_client_name(const mcp_client_t *c)
{
    return c->name;
}

mcp_client_state_t mcp_client_state(const mcp_client_t *c, const char **reason)
{
    if (reason != NULL) *reason = c->reason;
    return c->state;
}

const cJSON *mcp_client_tools(const mcp_client_t *c)
{
    return c->tools;
}

const cJSON *mcp_client_server_init(const mcp_client_t *c)
{
    return c->state == MCP_CLIENT_READY ? c->init_result : NULL;
}

int mcp_client_pid(const mcp_client_t *c)
{
    return c->proc != NULL ? c->proc->pid : 0;
}

unsigned mcp_client_spawn_count(const mcp_client_t *c)
{
    return c->spawns;
}

int mcp_client_set_roots(mcp_client_t *c, const cJSON *roots)
{
    if (roots != NULL && !cJSON_IsArray(roots)) return MCP_EINVAL;
    cJSON *copy = roots != NULL ? cJSON_Duplicate(roots, true) : NULL;
    if (roots != NULL && copy == NULL) return MCP_ENOMEM;
    cJSON_Delete(c->roots);
    c->roots = copy;
    /* A stateless server asks for the roots in every round instead. */
    if (c->opts.has_roots && c->state == MCP_CLIENT_READY && !c->modern)
        mcp__client_send(c, mcp_jsonrpc_request(NULL, "notifications/roots/list_changed", NULL));
    return MCP_OK;
}
