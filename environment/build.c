/* Declared packages: one `pip install --target` folder per key, built off the event loop
 * (uv_spawn of the interpreter, then of pip with a timer), published by rename(2).
 *
 * Stages: VERSION (ask the interpreter, 10 s) -> a published folder with its marker file means
 * READY at once (no pip) -> PIP into <cache>/.env-<hex>.tmp-XXXXXX/site -> marker written ->
 * rename to <cache>/env-<hex>. A builder that loses the rename race to another process uses the
 * winner's folder and removes its own. Removal of a temporary folder runs on the thread pool.
 *
 * This file holds the life cycle (env_start, env_status, env_free), the end states and the
 * VERSION stage; build_child.c the stage's child process, build_pip.c the PIP stage. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_internal.h"

const char *env_state_name(env_state_t state)
{
    switch (state) {
    case ENV_STATE_ABSENT:
        return "absent";
    case ENV_STATE_BUILDING:
        return "building";
    case ENV_STATE_READY:
        return "ready";
    case ENV_STATE_FAILED:
        return "failed";
    }
    return "unknown";
}

void env_options_init(env_options_t *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->python = "/usr/bin/python3";
    opts->install_timeout_s = ENV_DEFAULT_INSTALL_TIMEOUT_S;
}

void env__logf(env_t *env, env_log_level_t level, const char *fmt, ...)
{
    if (env->cb.log == NULL || env->closing) return;
    char buf[ENV_MESSAGE_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    env->cb.log(level, buf, env->cb.log_user);
}

static void env_destroy(env_t *env)
{
    free(env->python);
    free(env->cache_dir);
    free(env->req_file);
    free(env->index_url);
    free(env->find_links);
    for (size_t i = 0; i < env->n_specs; i++)
        free(env->specs[i]);
    free(env->specs);
    free(env->req_content);
    free(env->version);
    free(env->installed);
    env_key_free(&env->key);
    free(env);
}

static void maybe_destroy(env_t *env)
{
    if (env->closing && env->handles == 0 && !env->work_pending && !env->proc_open)
        env_destroy(env);
}

static void on_handle_closed(uv_handle_t *h)
{
    env_t *env = h->data;
    env->handles--;
    maybe_destroy(env);
}

static void close_handle(env_t *env, uv_handle_t *h, bool *open)
{
    if (!*open) return;
    *open = false;
    h->data = env;
    uv_close(h, on_handle_closed);
}

uint64_t env__now_ms(env_t *env)
{
    uv_update_time(env->loop);
    return uv_now(env->loop);
}

/* ---- the end states ----------------------------------------------------------------------- */
void env__finish(env_t *env, env_state_t state)
{
    env->state = state;
    env->stage = STAGE_NONE;
    /* a use touches the folder: pruning of old cache folders goes by mtime, as for the tools
       packages (one syscall; a failure only makes the folder look older) */
    if (state == ENV_STATE_READY) (void)utimensat(AT_FDCWD, env->final_dir, NULL, 0);
    if (state == ENV_STATE_READY)
        env__logf(env, ENV_LOG_INFO, "packages ready in %s%s: %s", env->site_dir,
                  env->reused ? " (reused)" : "", env->installed ? env->installed : "");
    else
        env__logf(env, ENV_LOG_ERROR, "%s", env->message);
    if (env->cb.on_done && !env->closing) env->cb.on_done(state, env->cb.done_user);
    /* after on_done: the wiring has seen the new state when the waiting runs go on */
    if (!env->closing) env__release_waiters(env, true);
}

static void remove_work(uv_work_t *w)
{
    env_t *env = w->data;
    env__remove_tree(env->tmp_dir);
}

static void after_remove(uv_work_t *w, int status)
{
    (void)status;
    env_t *env = w->data;
    env->work_pending = false;
    env->tmp_made = false;
    if (env->closing)
        maybe_destroy(env);
    else
        env__finish(env, env->pending_state);
}

/* Removes the temporary folder on the thread pool (it can hold a large tree), then finishes
   with state: the state stays BUILDING until nothing is left behind. */
void env__remove_tmp_then(env_t *env, env_state_t state)
{
    env->pending_state = state;
    if (env->tmp_made && !env->work_pending) {
        env->stage = STAGE_REMOVE;
        env->work.data = env;
        env->work_pending = true;
        if (uv_queue_work(env->loop, &env->work, remove_work, after_remove) == 0) return;
        env->work_pending = false;
        env__remove_tree(env->tmp_dir); /* only with a broken loop; stay correct */
        env->tmp_made = false;
    }
    if (!env->closing) env__finish(env, state);
}

void env__fail(env_t *env, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(env->message, sizeof env->message, fmt, ap);
    va_end(ap);
    env__remove_tmp_then(env, ENV_STATE_FAILED);
}

/* ---- stage VERSION -------------------------------------------------------------------------- */
static void version_done(env_t *env)
{
    if (env->timed_out || env->term_signal || env->exit_status != 0 || env->version_len == 0) {
        env__fail(env, "%s did not report its version (%s); no packages are installed", env->python,
                  env->timed_out ? "no answer in 10 s" : "it failed");
        return;
    }
    char msg[ENV_MESSAGE_MAX];
    int rc = env_key_from_parts(env->version, (const char *const *)env->specs, env->n_specs,
                                env->req_content, &env->key, msg, sizeof msg);
    if (rc != 0) {
        env__fail(env, "%s", msg);
        return;
    }
    env->have_key = true;
    int n1 =
        snprintf(env->final_dir, sizeof env->final_dir, "%s/env-%s", env->cache_dir, env->key.hex);
    int n2 = snprintf(env->site_dir, sizeof env->site_dir, "%s/%s", env->final_dir, ENV_SITE_DIR);
    int n3 = snprintf(env->tmp_dir, sizeof env->tmp_dir, "%s/.env-%s.tmp-XXXXXX", env->cache_dir,
                      env->key.hex);
    if (n1 < 0 || n2 < 0 || n3 < 0 || (size_t)n2 >= sizeof env->site_dir ||
        (size_t)n3 >= sizeof env->tmp_dir) {
        env__fail(env, "the cache folder's path is too long");
        return;
    }
    if (env__read_published(env)) {
        env->reused = true;
        env__finish(env, ENV_STATE_READY);
        return;
    }
    if (mkdtemp(env->tmp_dir) == NULL || chmod(env->tmp_dir, 0755) != 0) {
        env__fail(env, "cannot make a folder in %s: %s", env->cache_dir, strerror(errno));
        return;
    }
    env->tmp_made = true;
    env__logf(env, ENV_LOG_INFO, "installing %zu package specifier(s)%s with %s (key %.12s)",
              env->key.n_specs, env->req_file ? " and a requirements file" : "", env->python,
              env->key.hex);
    rc = env__start_pip(env);
    if (rc != 0) env__fail(env, "pip could not be started: %s", uv_strerror(rc));
}

void env__stage_maybe_done(env_t *env)
{
    if (!env->exited || !env->out_eof) return;
    if (env->closing) {
        if (env->tmp_made) env__remove_tmp_then(env, ENV_STATE_FAILED);
        maybe_destroy(env);
        return;
    }
    if (env->spawn_failed) {
        if (env->stage == STAGE_VERSION)
            env__fail(env, "%s could not be run (%s); no packages are installed", env->python,
                      uv_strerror(env->spawn_failed));
        else
            env__fail(env, "pip could not be started with %s: %s", env->python,
                      uv_strerror(env->spawn_failed));
    } else if (env->stage == STAGE_VERSION) {
        version_done(env);
    } else if (env->stage == STAGE_PIP) {
        env__pip_done(env);
    }
}

/* ---- public -------------------------------------------------------------------------------- */
int env_start(uv_loop_t *loop, const env_options_t *opts, env_t **out, char *msg, size_t len)
{
    if (loop == NULL || opts == NULL || out == NULL || opts->python == NULL ||
        opts->cache_dir == NULL || (opts->n_specs > 0 && opts->specs == NULL))
        return ENV_EINVAL;
    if (opts->n_specs == 0 && opts->requirements_file == NULL) {
        env__msg(msg, len, "no packages declared");
        return ENV_EINVAL;
    }
    if (opts->n_specs > ENV_MAX_SPECS) {
        env__msg(msg, len, "%zu package specifiers: at most %u", opts->n_specs, ENV_MAX_SPECS);
        return ENV_ETOOBIG;
    }
    /* refuse a bad spec now, while the caller can still tell the user before serving */
    for (size_t i = 0; i < opts->n_specs; i++) {
        char buf[ENV_MAX_SPEC_LEN + 64];
        if (env_spec_normalise(opts->specs[i], buf, sizeof buf) != 0) {
            env__msg(msg, len,
                     "package specifier \"%.200s\" is not a requirement (a name, then extras, "
                     "version and markers; options and paths go in --requirements)",
                     opts->specs[i] ? opts->specs[i] : "");
            return ENV_EINVAL;
        }
    }
    env_t *env = calloc(1, sizeof *env);
    if (env == NULL) return ENV_ENOMEM;
    bool ok = true;
    env->loop = loop;
    env->python = env__dup_or_null(opts->python, &ok);
    env->cache_dir = env__dup_or_null(opts->cache_dir, &ok);
    env->req_file = env__dup_or_null(opts->requirements_file, &ok);
    env->index_url = env__dup_or_null(opts->pip_index_url, &ok);
    env->find_links = env__dup_or_null(opts->pip_find_links, &ok);
    env->no_index = opts->pip_no_index;
    env->timeout_s =
        opts->install_timeout_s ? opts->install_timeout_s : ENV_DEFAULT_INSTALL_TIMEOUT_S;
    env->cb.log = opts->log;
    env->cb.log_user = opts->log_user;
    env->cb.on_done = opts->on_done;
    env->cb.done_user = opts->done_user;
    env->version = malloc(ENV__VERSION_MAX);
    env->specs = calloc(opts->n_specs ? opts->n_specs : 1, sizeof *env->specs);
    if (env->version == NULL || env->specs == NULL) ok = false;
    for (size_t i = 0; ok && i < opts->n_specs; i++) {
        env->specs[i] = env__dup_or_null(opts->specs[i], &ok);
        if (ok) env->n_specs++;
    }
    if (!ok) {
        env_destroy(env);
        return ENV_ENOMEM;
    }
    env->version[0] = '\0';
    snprintf(env->pip_cfg, sizeof env->pip_cfg, "PIP_CONFIG_FILE=/dev/null");
    snprintf(env->pip_nouser, sizeof env->pip_nouser, "PYTHONNOUSERSITE=1");
    if (env->req_file) {
        int rc = env__read_file(env->req_file, ENV_MAX_REQUIREMENTS_BYTES, &env->req_content, NULL);
        if (rc != 0) {
            env__msg(msg, len, "requirements file %s: %s", env->req_file,
                     rc == ENV_ETOOBIG ? "larger than 256 KiB" : strerror(errno));
            env_destroy(env);
            return rc == ENV_ENOMEM ? rc : ENV_EIO;
        }
    }
    if (env__mkdirs(env->cache_dir) != 0) {
        env__msg(msg, len, "cache folder %s: %s", env->cache_dir, strerror(errno));
        env_destroy(env);
        return ENV_EIO;
    }
    int rc = uv_timer_init(loop, &env->timer);
    if (rc != 0) {
        env_destroy(env);
        return ENV_ENOMEM;
    }
    env->timer.data = env;
    env->timer_open = true;
    env->handles = 1;
    env->state = ENV_STATE_BUILDING;
    env->begun_ms = uv_now(loop);
    char dash_i[] = "-I", dash_s[] = "-S", dash_c[] = "-c", code[] = ENV__VERSION_CODE;
    char *argv[] = {env->python, dash_i, dash_s, dash_c, code, NULL};
    rc = env__spawn_stage(env, STAGE_VERSION, argv, NULL, VERSION_TIMEOUT_MS);
    *out = env;
    if (rc != 0) {
        /* a state, like every other failure of the build: the caller keeps serving */
        snprintf(env->message, sizeof env->message,
                 "%s could not be run (%s); no packages are installed", env->python,
                 uv_strerror(rc));
        env->state = ENV_STATE_FAILED;
        env__logf(env, ENV_LOG_ERROR, "%s", env->message);
    }
    return 0;
}

void env_status(const env_t *env, env_status_t *st)
{
    memset(st, 0, sizeof *st);
    if (env == NULL) {
        st->state = ENV_STATE_ABSENT;
        st->key_hex = st->message = st->tail = st->installed = "";
        return;
    }
    st->state = env->state;
    st->key_hex = env->have_key ? env->key.hex : "";
    st->site_dir = env->state == ENV_STATE_READY ? env->site_dir : NULL;
    st->reused = env->reused;
    st->pip_ran = env->pip_ran;
    st->install_ms = env->install_ms;
    st->message = env->state == ENV_STATE_FAILED ? env->message : "";
    const char *pkg = env->named[0] ? env->named : env->collecting;
    st->failed_package = env->state == ENV_STATE_FAILED && pkg[0] ? pkg : NULL;
    st->tail = env->state == ENV_STATE_FAILED ? env->tail_text : "";
    st->installed = env->state == ENV_STATE_READY && env->installed ? env->installed : "";
    st->elapsed_ms = uv_now(env->loop) - env->begun_ms;
}

void env_free(env_t *env)
{
    if (env == NULL || env->closing) return;
    env->closing = true;
    env__kill_group(env);
    env__drop_waiters(env);
    close_handle(env, (uv_handle_t *)&env->tick, &env->tick_open);
    close_handle(env, (uv_handle_t *)&env->timer, &env->timer_open);
    if (env->proc_open || env->out_open) {
        /* the close callbacks (SIGKILL was sent) remove the temporary folder and free */
        return;
    }
    if (env->tmp_made && !env->work_pending) env__remove_tmp_then(env, ENV_STATE_FAILED);
    maybe_destroy(env);
}
