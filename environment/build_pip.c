/* The pip stage of a build: pip's command line and environment, the list of what it
 * installed, the marker file written before publishing, the rename that publishes (or the
 * use of a concurrent builder's folder), and the look-up of a published folder (env_lookup). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "build_internal.h"

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

int env__start_pip(env_t *env)
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
    int rc = env__spawn_stage(env, STAGE_PIP, argv, envp, (uint64_t)env->timeout_s * 1000u);
    free(argv);
    free(envp);
    if (rc == 0 && env->spawn_failed == 0) env->pip_ran = true;
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "name version, ..." from the *.dist-info folders pip left in site (malloc'd), or NULL when
 * the folder cannot be read or the list cannot be made whole (past PTC_CAP_INSTALLED_PACKAGES,
 * or out of memory): no list rather than a list that leaves some out. */
static char *list_installed(const char *site)
{
    DIR *d = opendir(site);
    if (d == NULL) return NULL;
    char **names = NULL;
    size_t n = 0, cap = 0, total = 1;
    bool whole = true;
    struct dirent *e;
    while (whole && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 10 || strcmp(e->d_name + len - 10, ".dist-info") != 0) continue;
        char *dash = strchr(e->d_name, '-');
        if (dash == NULL) continue;
        char *s = NULL;
        if (ptc_array_reserve(&names, &cap, n + 1, sizeof *names, PTC_CAP_INSTALLED_PACKAGES) < 0 ||
            (s = strndup(e->d_name, len - 10)) == NULL) {
            whole = false;
            continue;
        }
        /* "python_dateutil-2.9.0" -> "python-dateutil 2.9.0": the name as PEP 503 spells it */
        size_t name_len = (size_t)(dash - e->d_name);
        for (size_t k = 0; k < name_len; k++)
            s[k] = s[k] == '_' || s[k] == '.' ? '-' : (char)tolower((unsigned char)s[k]);
        s[name_len] = ' ';
        names[n++] = s;
        total += strlen(s) + 2;
    }
    closedir(d);
    char *out = whole ? malloc(total) : NULL;
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

bool env__read_published(env_t *env)
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

void env__pip_done(env_t *env)
{
    env->install_ms = env__now_ms(env) - env->started_ms;
    build_tail(env);
    if (env->timed_out) {
        env__fail(env,
                  "installing the packages took longer than %u s and was stopped (raise "
                  "--package-install-timeout, or check the network); the next start tries again",
                  env->timeout_s);
        return;
    }
    if (env->term_signal != 0 || env->exit_status != 0) {
        if (env->tail_count > 0 && strstr(env->tail_text, "No module named pip")) {
            env__fail(env,
                      "%s has no pip: install it (Debian: apt-get install python3-pip) or pass "
                      "--python a virtual environment's interpreter; the next start tries again",
                      env->python);
            return;
        }
        const char *pkg = env->named[0] ? env->named : env->collecting;
        env__fail(env, "pip failed%s%s (%s %d): %s; the next start tries again",
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
        env__fail(env, "the package folder's marker could not be written in %s", env->tmp_dir);
        return;
    }
    if (rename(env->tmp_dir, env->final_dir) == 0) {
        env->tmp_made = false;
        env__logf(env, ENV_LOG_INFO, "pip installed the packages in %.1f s",
                  (double)env->install_ms / 1000.0);
        env__finish(env, ENV_STATE_READY);
        return;
    }
    int err = errno;
    if ((err == ENOTEMPTY || err == EEXIST) && env__read_published(env)) {
        /* another server published the same key first: use its folder, drop ours */
        env__logf(env, ENV_LOG_INFO, "another process published %s first; using it",
                  env->final_dir);
        env->reused = true;
        env__remove_tmp_then(env, ENV_STATE_READY);
        return;
    }
    env__fail(env, "the package folder could not be published as %s: %s", env->final_dir,
              strerror(err));
}
