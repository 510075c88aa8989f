/* Declared packages: one `pip install --target` folder per key, built off the event loop
 * (uv_spawn of the interpreter, then of pip with a timer), published by rename(2).
 *
 * Stages: VERSION (ask the interpreter, 10 s) -> a published folder with its marker file means
 * READY at once (no pip) -> PIP into <cache>/.env-<hex>.tmp-XXXXXX/site -> marker written ->
 * rename to <cache>/env-<hex>. A builder that loses the rename race to another process uses the
 * winner's folder and removes its own. Removal of a temporary folder runs on the thread pool. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "internal.h"

#define VERSION_TIMEOUT_MS 10000u
#define LINE_MAX_KEEP      400u /* longer pip lines are cut in the tail and the log */
#define MAX_ENV_VARS       4096u
#define PATH_LEN           4096u

typedef enum { STAGE_NONE, STAGE_VERSION, STAGE_PIP, STAGE_REMOVE } stage_t;

struct env_t {
    uv_loop_t *loop;
    /* copies of the options */
    char *python, *cache_dir, *req_file, *index_url, *find_links;
    char **specs;
    size_t n_specs;
    bool no_index;
    unsigned timeout_s;
    env_options_t cb; /* only the callbacks and their user pointers are used */
    char *req_content;
    char pip_cfg[32], pip_nouser[32]; /* the variables pip_environment adds */

    env_state_t state;
    env_key_t key;
    bool have_key;
    char final_dir[PATH_LEN], site_dir[PATH_LEN], tmp_dir[PATH_LEN];
    bool tmp_made;

    /* the child of the current stage */
    stage_t stage;
    uv_process_t proc;
    uv_pipe_t out;
    uv_timer_t timer;
    bool proc_open, out_open, timer_open;
    /* a stage ends when both handles are closed (a next stage reuses them) */
    bool exited, out_eof, timed_out;
    int spawn_failed; /* uv_spawn's error for this stage, or 0 */
    bool proc_alive;  /* spawned and not yet reaped: kill() may target its pid */
    int64_t exit_status;
    int term_signal;
    uint64_t started_ms;
    char line[LINE_MAX_KEEP + 1]; /* the partial line being read */
    size_t line_len;
    bool line_cut;
    char *version; /* VERSION: what the interpreter printed */
    size_t version_len;
    char tail[ENV_TAIL_LINES][LINE_MAX_KEEP + 1]; /* ring of pip's last lines */
    size_t tail_next, tail_count;
    char collecting[ENV_MAX_SPEC_LEN + 1]; /* the last "Collecting X" pip printed */
    char named[ENV_MAX_SPEC_LEN + 1];      /* the requirement an error line named */

    uv_work_t work; /* STAGE_REMOVE */
    bool work_pending;
    env_state_t pending_state;
    char readbuf[16384];

    bool reused, pip_ran;
    uint64_t install_ms;
    char message[ENV_MESSAGE_MAX];
    char tail_text[ENV_TAIL_BYTES];
    char *installed;
    bool closing;
    int handles; /* open libuv handles; freed when 0 and no work pending */
};

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

static void logf_(env_t *env, env_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void logf_(env_t *env, env_log_level_t level, const char *fmt, ...)
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

static uint64_t now_ms(env_t *env)
{
    uv_update_time(env->loop);
    return uv_now(env->loop);
}

/* ---- the end states ----------------------------------------------------------------------- */
static void finish(env_t *env, env_state_t state)
{
    env->state = state;
    env->stage = STAGE_NONE;
    /* a use touches the folder: pruning of old cache folders goes by mtime, as for the tools
       packages (one syscall; a failure only makes the folder look older) */
    if (state == ENV_STATE_READY) (void)utimensat(AT_FDCWD, env->final_dir, NULL, 0);
    if (state == ENV_STATE_READY)
        logf_(env, ENV_LOG_INFO, "packages ready in %s%s: %s", env->site_dir,
              env->reused ? " (reused)" : "", env->installed ? env->installed : "");
    else
        logf_(env, ENV_LOG_ERROR, "%s", env->message);
    if (env->cb.on_done && !env->closing) env->cb.on_done(state, env->cb.done_user);
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
        finish(env, env->pending_state);
}

/* Removes the temporary folder on the thread pool (it can hold a large tree), then finishes
   with state: the state stays BUILDING until nothing is left behind. */
static void remove_tmp_then(env_t *env, env_state_t state)
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
    if (!env->closing) finish(env, state);
}

static void fail(env_t *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(env_t *env, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(env->message, sizeof env->message, fmt, ap);
    va_end(ap);
    remove_tmp_then(env, ENV_STATE_FAILED);
}

/* ---- reading the child's output ------------------------------------------------------------ */
static void copy_name(char *dst, size_t len, const char *src)
{
    /* a requirement ends at white space, a quote, a parenthesis or a comma */
    size_t n = 0;
    while (src[n] && n + 1 < len && !strchr(" \t'\"(),", src[n]))
        n++;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Remembers which requirement pip was busy with or named in an error. */
static void scan_pip_line(env_t *env, const char *l)
{
    static const char *const named[] = {
        "No matching distribution found for ",
        "satisfies the requirement ",
        "Failed building wheel for ",
        "Failed to build ",
        "Could not build wheels for ",
        "Invalid requirement: ",
        "Cannot install ",
    };
    const char *p = l;
    while (*p == ' ')
        p++;
    if (strncmp(p, "Collecting ", 11) == 0)
        copy_name(env->collecting, sizeof env->collecting, p + 11);
    if (env->named[0]) return; /* the first error names the culprit; later ones follow from it */
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        const char *m = strstr(l, named[i]);
        if (m == NULL) continue;
        m += strlen(named[i]);
        while (*m == '\'' || *m == '"')
            m++;
        copy_name(env->named, sizeof env->named, m);
        if (env->named[0]) return;
    }
}

static void end_line(env_t *env)
{
    env->line[env->line_len] = '\0';
    if (env->stage == STAGE_PIP) {
        if (env->line_len > 0) {
            memcpy(env->tail[env->tail_next], env->line, env->line_len + 1);
            env->tail_next = (env->tail_next + 1) % ENV_TAIL_LINES;
            if (env->tail_count < ENV_TAIL_LINES) env->tail_count++;
            scan_pip_line(env, env->line);
            logf_(env, ENV_LOG_PROGRESS, "pip: %s%s", env->line, env->line_cut ? "..." : "");
        }
    }
    env->line_len = 0;
    env->line_cut = false;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    env_t *env = h->data;
    buf->base = env->readbuf;
    buf->len = sizeof env->readbuf;
}

static void stage_maybe_done(env_t *env);

static void on_out_closed(uv_handle_t *h)
{
    env_t *env = h->data;
    env->handles--;
    env->out_eof = true;
    stage_maybe_done(env);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    env_t *env = s->data;
    if (n < 0) {
        if (env->line_len) end_line(env);
        uv_read_stop(s);
        if (env->out_open) {
            env->out_open = false;
            uv_close((uv_handle_t *)&env->out, on_out_closed);
        }
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        char c = buf->base[i];
        if (env->stage == STAGE_VERSION) {
            if (env->version_len < ENV__VERSION_MAX - 1) {
                env->version[env->version_len++] = c;
                env->version[env->version_len] = '\0';
            }
            continue;
        }
        if (c == '\n' || c == '\r') {
            end_line(env);
        } else if (env->line_len < LINE_MAX_KEEP) {
            env->line[env->line_len++] = c;
        } else {
            env->line_cut = true;
        }
    }
}

static void on_proc_closed(uv_handle_t *h)
{
    env_t *env = h->data;
    env->handles--;
    env->proc_open = false;
    env->exited = true;
    stage_maybe_done(env);
}

static void on_exit_(uv_process_t *p, int64_t status, int sig)
{
    env_t *env = p->data;
    env->proc_alive = false;
    env->exit_status = status;
    env->term_signal = sig;
    if (env->timer_open) uv_timer_stop(&env->timer);
    uv_close((uv_handle_t *)p, on_proc_closed);
}

static void kill_group(env_t *env)
{
    if (env->proc_alive && env->proc.pid > 0) {
        /* pip runs in its own session (UV_PROCESS_DETACHED): its build back ends die with it */
        kill(-env->proc.pid, SIGKILL);
        kill(env->proc.pid, SIGKILL);
    }
}

static void on_timeout(uv_timer_t *t)
{
    env_t *env = t->data;
    env->timed_out = true;
    kill_group(env);
}

/* Spawns argv with stdout and stderr on one pipe, the timer armed for timeout_ms. */
static int spawn_stage(env_t *env, stage_t stage, char **argv, char **envp, uint64_t timeout_ms)
{
    uv_file fds[2];
    int rc = uv_pipe(fds, UV_NONBLOCK_PIPE, 0);
    if (rc != 0) return rc;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_INHERIT_FD, .data.fd = fds[1]},
        {.flags = UV_INHERIT_FD, .data.fd = fds[1]},
    };
    uv_process_options_t po = {
        .exit_cb = on_exit_,
        .file = argv[0],
        .args = argv,
        .env = envp,
        .stdio_count = 3,
        .stdio = stdio,
        .flags = UV_PROCESS_DETACHED,
    };
    env->stage = stage;
    env->exited = env->out_eof = env->timed_out = false;
    env->spawn_failed = 0;
    env->line_len = 0;
    env->proc.data = env;
    rc = uv_spawn(env->loop, &env->proc, &po);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        /* uv_spawn leaves an initialised handle that must still be closed; the stage is over
           only when it is (the handle is reused), so the caller fails from its callback */
        env->handles++;
        env->proc.data = env;
        env->spawn_failed = rc;
        env->proc_open = true;
        env->out_eof = true;
        uv_close((uv_handle_t *)&env->proc, on_proc_closed);
        return 0;
    }
    env->handles++;
    env->proc_open = true;
    env->proc_alive = true;
    bool fd_owned = false;
    rc = uv_pipe_init(env->loop, &env->out, 0);
    if (rc == 0) {
        env->handles++;
        env->out_open = true;
        env->out.data = env;
        rc = uv_pipe_open(&env->out, fds[0]);
        fd_owned = rc == 0;
        if (rc == 0) rc = uv_read_start((uv_stream_t *)&env->out, on_alloc, on_read);
    }
    if (rc != 0) {
        if (!fd_owned) close(fds[0]);
        if (env->out_open) {
            env->out_open = false;
            uv_close((uv_handle_t *)&env->out, on_out_closed);
        } else {
            env->out_eof = true;
        }
        /* the exit callback ends the stage as a failure (killed); its output is lost */
        kill_group(env);
        return 0;
    }
    env->started_ms = now_ms(env);
    uv_timer_start(&env->timer, on_timeout, timeout_ms, 0);
    return 0;
}

/* ---- stage PIP ----------------------------------------------------------------------------- */

/* The pip child's environment: the server's, without PIP_* (pip reads its options from them)
   and PYTHON* (they change what the interpreter imports), and with PIP_CONFIG_FILE=/dev/null,
   pip's documented switch that skips every configuration file (global, user and site). */
static char **pip_environment(env_t *env)
{
    size_t n = 0;
    while (n < MAX_ENV_VARS && environ[n])
        n++;
    char **out = calloc(n + 3, sizeof *out);
    if (out == NULL) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "PIP_", 4) == 0 || strncmp(environ[i], "PYTHON", 6) == 0) continue;
        out[o++] = environ[i];
    }
    out[o++] = env->pip_cfg;
    out[o++] = env->pip_nouser;
    out[o] = NULL;
    return out;
}

/* pip under an umask of 022: the folder is read by the sandbox's unprivileged uid. */
#define PIP_LAUNCH                                                                                 \
    "import os, runpy, sys\n"                                                                      \
    "os.umask(0o022)\n"                                                                            \
    "sys.argv[0] = 'pip'\n"                                                                        \
    "runpy.run_module('pip', run_name='__main__', alter_sys=True)\n"

static int start_pip(env_t *env)
{
    char target[PATH_LEN + 8];
    snprintf(target, sizeof target, "%s/%s", env->tmp_dir, ENV_SITE_DIR);
    size_t max = 32 + env->key.n_specs;
    char **argv = calloc(max, sizeof *argv);
    char **envp = pip_environment(env);
    if (argv == NULL || envp == NULL) {
        free(argv);
        free(envp);
        return UV_ENOMEM;
    }
    size_t a = 0;
    /* local copies: libuv's argv is char ** (never written), string literals are const */
    char dash_i[] = "-I", dash_c[] = "-c", launch[] = PIP_LAUNCH, install[] = "install",
         isolated[] = "--isolated", no_input[] = "--no-input",
         no_check[] = "--disable-pip-version-check", no_warn[] = "--no-warn-script-location",
         progress[] = "--progress-bar", off[] = "off", target_opt[] = "--target",
         index_opt[] = "--index-url", links_opt[] = "--find-links", no_index[] = "--no-index",
         req_opt[] = "-r";
    argv[a++] = env->python;
    argv[a++] = dash_i;
    argv[a++] = dash_c;
    argv[a++] = launch;
    argv[a++] = install;
    argv[a++] = isolated;
    argv[a++] = no_input;
    argv[a++] = no_check;
    argv[a++] = no_warn;
    argv[a++] = progress;
    argv[a++] = off;
    argv[a++] = target_opt;
    argv[a++] = target;
    if (env->index_url) {
        argv[a++] = index_opt;
        argv[a++] = env->index_url;
    }
    if (env->find_links) {
        argv[a++] = links_opt;
        argv[a++] = env->find_links;
    }
    if (env->no_index) argv[a++] = no_index;
    if (env->req_file) {
        argv[a++] = req_opt;
        argv[a++] = env->req_file;
    }
    for (size_t i = 0; i < env->key.n_specs; i++)
        argv[a++] = env->key.specs[i];
    argv[a] = NULL;
    env->tail_count = env->tail_next = 0;
    env->collecting[0] = env->named[0] = '\0';
    int rc = spawn_stage(env, STAGE_PIP, argv, envp, (uint64_t)env->timeout_s * 1000u);
    free(argv);
    free(envp);
    if (rc == 0 && env->spawn_failed == 0) env->pip_ran = true;
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "name version, ..." from the *.dist-info folders pip left in site (malloc'd, or NULL). */
static char *list_installed(const char *site)
{
    DIR *d = opendir(site);
    if (d == NULL) return NULL;
    char **names = NULL;
    size_t n = 0, cap = 0, total = 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 10 || strcmp(e->d_name + len - 10, ".dist-info") != 0) continue;
        char *dash = strchr(e->d_name, '-');
        if (dash == NULL) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 32;
            char **t = realloc(names, nc * sizeof *t);
            if (t == NULL) break;
            names = t;
            cap = nc;
        }
        char *s = strndup(e->d_name, len - 10);
        if (s == NULL) break;
        /* "python_dateutil-2.9.0" -> "python-dateutil 2.9.0": the name as PEP 503 spells it */
        size_t name_len = (size_t)(dash - e->d_name);
        for (size_t k = 0; k < name_len; k++)
            s[k] = s[k] == '_' || s[k] == '.' ? '-' : (char)tolower((unsigned char)s[k]);
        s[name_len] = ' ';
        names[n++] = s;
        total += strlen(s) + 2;
    }
    closedir(d);
    char *out = malloc(total);
    if (out) {
        size_t at = 0;
        if (n) qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(names[i]);
            if (i) {
                memcpy(out + at, ", ", 2);
                at += 2;
            }
            memcpy(out + at, names[i], len);
            at += len;
        }
        out[at] = '\0';
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return out;
}

static int write_marker(env_t *env, const char *dir)
{
    cJSON *m = cJSON_CreateObject();
    cJSON *specs = cJSON_AddArrayToObject(m, "specs");
    if (m == NULL || specs == NULL) {
        cJSON_Delete(m);
        return ENV_ENOMEM;
    }
    bool ok = cJSON_AddStringToObject(m, "key", env->key.hex) &&
              cJSON_AddStringToObject(m, "python", env->key.python_version) &&
              cJSON_AddStringToObject(m, "installed", env->installed ? env->installed : "") &&
              cJSON_AddNumberToObject(m, "install_ms", (double)env->install_ms) &&
              cJSON_AddBoolToObject(m, "requirements_file", env->req_file != NULL);
    for (size_t i = 0; ok && i < env->key.n_specs; i++) {
        cJSON *s = cJSON_CreateString(env->key.specs[i]);
        ok = s && cJSON_AddItemToArray(specs, s);
    }
    char *text = ok ? cJSON_Print(m) : NULL;
    cJSON_Delete(m);
    if (text == NULL) return ENV_ENOMEM;
    char path[PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/%s", dir, ENV_MARKER_FILE);
    int rc = env__write_file_atomic(path, text, strlen(text));
    free(text);
    return rc;
}

/* The published folder final_dir is complete when its marker, naming hex, is there (written
   before the rename). *installed (may be NULL) gets the marker's list, malloc'd. */
static bool marker_says(const char *final_dir, const char *hex, char **installed)
{
    char path[PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/%s", final_dir, ENV_MARKER_FILE);
    char *text = NULL;
    if (env__read_file(path, 1u << 20, &text, NULL) != 0) return false;
    cJSON *m = cJSON_Parse(text);
    free(text);
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(m, "key");
    const cJSON *inst = cJSON_GetObjectItemCaseSensitive(m, "installed");
    bool ok = cJSON_IsString(key) && strcmp(key->valuestring, hex) == 0;
    if (ok && installed) *installed = strdup(cJSON_IsString(inst) ? inst->valuestring : "");
    cJSON_Delete(m);
    return ok;
}

static bool read_published(env_t *env)
{
    char *installed = NULL;
    if (!marker_says(env->final_dir, env->key.hex, &installed)) return false;
    free(env->installed);
    env->installed = installed;
    return true;
}

int env_lookup(const char *cache_dir, const env_key_t *key, char *site, size_t site_len,
               char **installed)
{
    if (cache_dir == NULL || key == NULL || strlen(key->hex) != ENV_KEY_HEX_LEN) return ENV_EINVAL;
    if (installed) *installed = NULL;
    char final_dir[PATH_LEN];
    int n = snprintf(final_dir, sizeof final_dir, "%s/env-%s", cache_dir, key->hex);
    if (n < 0 || (size_t)n >= sizeof final_dir) return ENV_EINVAL;
    if (!marker_says(final_dir, key->hex, installed)) return 0;
    if (site && site_len) snprintf(site, site_len, "%s/%s", final_dir, ENV_SITE_DIR);
    return 1;
}

static void build_tail(env_t *env)
{
    size_t o = 0;
    env->tail_text[0] = '\0';
    size_t first = (env->tail_next + ENV_TAIL_LINES - env->tail_count) % ENV_TAIL_LINES;
    for (size_t i = 0; i < env->tail_count; i++) {
        const char *l = env->tail[(first + i) % ENV_TAIL_LINES];
        int n = snprintf(env->tail_text + o, sizeof env->tail_text - o, "%s\n", l);
        if (n < 0 || (size_t)n >= sizeof env->tail_text - o) break;
        o += (size_t)n;
    }
}

/* The last line that starts with "ERROR:", else the last line: the one-line reason. */
static const char *pip_reason(env_t *env)
{
    const char *best = NULL;
    size_t first = (env->tail_next + ENV_TAIL_LINES - env->tail_count) % ENV_TAIL_LINES;
    for (size_t i = 0; i < env->tail_count; i++) {
        const char *l = env->tail[(first + i) % ENV_TAIL_LINES];
        if (strncmp(l, "ERROR:", 6) == 0 || best == NULL) best = l;
    }
    return best ? best : "no output";
}

static void pip_done(env_t *env)
{
    env->install_ms = now_ms(env) - env->started_ms;
    build_tail(env);
    if (env->timed_out) {
        fail(env,
             "installing the packages took longer than %u s and was stopped (raise "
             "--package-install-timeout, or check the network); the next start tries again",
             env->timeout_s);
        return;
    }
    if (env->term_signal != 0 || env->exit_status != 0) {
        if (env->tail_count > 0 && strstr(env->tail_text, "No module named pip")) {
            fail(env,
                 "%s has no pip: install it (Debian: apt-get install python3-pip) or pass "
                 "--python a virtual environment's interpreter; the next start tries again",
                 env->python);
            return;
        }
        const char *pkg = env->named[0] ? env->named : env->collecting;
        fail(env, "pip failed%s%s (%s %d): %s; the next start tries again",
             pkg[0] ? " installing " : "", pkg, env->term_signal ? "signal" : "exit",
             env->term_signal ? env->term_signal : (int)env->exit_status, pip_reason(env));
        return;
    }
    char site[PATH_LEN + 8];
    snprintf(site, sizeof site, "%s/%s", env->tmp_dir, ENV_SITE_DIR);
    free(env->installed);
    env->installed = list_installed(site);
    int rc = write_marker(env, env->tmp_dir);
    if (rc != 0) {
        fail(env, "the package folder's marker could not be written in %s", env->tmp_dir);
        return;
    }
    if (rename(env->tmp_dir, env->final_dir) == 0) {
        env->tmp_made = false;
        logf_(env, ENV_LOG_INFO, "pip installed the packages in %.1f s",
              (double)env->install_ms / 1000.0);
        finish(env, ENV_STATE_READY);
        return;
    }
    int err = errno;
    if ((err == ENOTEMPTY || err == EEXIST) && read_published(env)) {
        /* another server published the same key first: use its folder, drop ours */
        logf_(env, ENV_LOG_INFO, "another process published %s first; using it", env->final_dir);
        env->reused = true;
        remove_tmp_then(env, ENV_STATE_READY);
        return;
    }
    fail(env, "the package folder could not be published as %s: %s", env->final_dir, strerror(err));
}

/* ---- stage VERSION -------------------------------------------------------------------------- */
static void version_done(env_t *env)
{
    if (env->timed_out || env->term_signal || env->exit_status != 0 || env->version_len == 0) {
        fail(env, "%s did not report its version (%s); no packages are installed", env->python,
             env->timed_out ? "no answer in 10 s" : "it failed");
        return;
    }
    char msg[ENV_MESSAGE_MAX];
    int rc = env_key_from_parts(env->version, (const char *const *)env->specs, env->n_specs,
                                env->req_content, &env->key, msg, sizeof msg);
    if (rc != 0) {
        fail(env, "%s", msg);
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
        fail(env, "the cache folder's path is too long");
        return;
    }
    if (read_published(env)) {
        env->reused = true;
        finish(env, ENV_STATE_READY);
        return;
    }
    if (mkdtemp(env->tmp_dir) == NULL || chmod(env->tmp_dir, 0755) != 0) {
        fail(env, "cannot make a folder in %s: %s", env->cache_dir, strerror(errno));
        return;
    }
    env->tmp_made = true;
    logf_(env, ENV_LOG_INFO, "installing %zu package specifier(s)%s with %s (key %.12s)",
          env->key.n_specs, env->req_file ? " and a requirements file" : "", env->python,
          env->key.hex);
    rc = start_pip(env);
    if (rc != 0) fail(env, "pip could not be started: %s", uv_strerror(rc));
}

static void stage_maybe_done(env_t *env)
{
    if (!env->exited || !env->out_eof) return;
    if (env->closing) {
        if (env->tmp_made) remove_tmp_then(env, ENV_STATE_FAILED);
        maybe_destroy(env);
        return;
    }
    if (env->spawn_failed) {
        if (env->stage == STAGE_VERSION)
            fail(env, "%s could not be run (%s); no packages are installed", env->python,
                 uv_strerror(env->spawn_failed));
        else
            fail(env, "pip could not be started with %s: %s", env->python,
                 uv_strerror(env->spawn_failed));
    } else if (env->stage == STAGE_VERSION) {
        version_done(env);
    } else if (env->stage == STAGE_PIP) {
        pip_done(env);
    }
}

/* ---- public -------------------------------------------------------------------------------- */
static char *dup_or_null(const char *s, bool *ok)
{
    if (s == NULL) return NULL;
    char *d = strdup(s);
    if (d == NULL) *ok = false;
    return d;
}

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
    env->python = dup_or_null(opts->python, &ok);
    env->cache_dir = dup_or_null(opts->cache_dir, &ok);
    env->req_file = dup_or_null(opts->requirements_file, &ok);
    env->index_url = dup_or_null(opts->pip_index_url, &ok);
    env->find_links = dup_or_null(opts->pip_find_links, &ok);
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
        env->specs[i] = dup_or_null(opts->specs[i], &ok);
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
    char dash_i[] = "-I", dash_s[] = "-S", dash_c[] = "-c", code[] = ENV__VERSION_CODE;
    char *argv[] = {env->python, dash_i, dash_s, dash_c, code, NULL};
    rc = spawn_stage(env, STAGE_VERSION, argv, NULL, VERSION_TIMEOUT_MS);
    *out = env;
    if (rc != 0) {
        /* a state, like every other failure of the build: the caller keeps serving */
        snprintf(env->message, sizeof env->message,
                 "%s could not be run (%s); no packages are installed", env->python,
                 uv_strerror(rc));
        env->state = ENV_STATE_FAILED;
        logf_(env, ENV_LOG_ERROR, "%s", env->message);
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
}

void env_free(env_t *env)
{
    if (env == NULL || env->closing) return;
    env->closing = true;
    kill_group(env);
    close_handle(env, (uv_handle_t *)&env->timer, &env->timer_open);
    if (env->proc_open || env->out_open) {
        /* the close callbacks (SIGKILL was sent) remove the temporary folder and free */
        return;
    }
    if (env->tmp_made && !env->work_pending) remove_tmp_then(env, ENV_STATE_FAILED);
    maybe_destroy(env);
}
