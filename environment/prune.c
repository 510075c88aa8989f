/* Pruning the cache: env-* and custom-* folders (and env-*.failed records) no server touched
 * for a month, and temporary folders dead builders left, removed on the thread pool. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define PRUNE_PATH_LEN 4096u

struct env_prune {
    uv_work_t work;
    char *cache_dir, *keep_env, *keep_custom;
    long removed;
    bool cancelled;
    void (*cb)(long removed, void *user);
    void *user;
};

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Whether n is "<prefix><hex>" for a kept hex. */
static bool kept(const char *n, const char *prefix, const char *hex)
{
    return hex != NULL && hex[0] && starts(n, prefix) && strcmp(n + strlen(prefix), hex) == 0;
}

long env_prune_dir(const char *cache_dir, const char *keep_env, const char *keep_custom, time_t now)
{
    if (cache_dir == NULL || cache_dir[0] == '\0') return 0;
    DIR *d = opendir(cache_dir);
    if (d == NULL) return 0;
    long pruned = 0;
    struct dirent *de;
    char path[PRUNE_PATH_LEN + 256];
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        bool tmp = (starts(n, ".env-") || starts(n, ".custom-")) && strstr(n, ".tmp-") != NULL;
        bool pub = starts(n, "env-") || starts(n, "custom-");
        if (!tmp && !pub) continue;
        if (kept(n, "env-", keep_env) || kept(n, "custom-", keep_custom)) continue;
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", cache_dir, n) >= sizeof path ||
            lstat(path, &st) != 0)
            continue;
        long age = tmp ? ENV_PRUNE_TMP_AGE_S : ENV_PRUNE_AGE_S;
        if ((int64_t)st.st_mtim.tv_sec >= (int64_t)now - age) continue;
        size_t nl = strlen(n), fl = strlen(ENV__FAILED_SUFFIX);
        if (S_ISREG(st.st_mode) && nl > fl && strcmp(n + nl - fl, ENV__FAILED_SUFFIX) == 0) {
            if (unlink(path) == 0) pruned++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) continue;
        /* a symbolic link inside is removed, never followed */
        (void)env__remove_tree(path);
        if (lstat(path, &st) != 0) pruned++;
    }
    closedir(d);
    return pruned;
}

static void prune_free(env_prune_t *p)
{
    free(p->cache_dir);
    free(p->keep_env);
    free(p->keep_custom);
    free(p);
}

static void prune_work(uv_work_t *w)
{
    env_prune_t *p = w->data;
    p->removed = env_prune_dir(p->cache_dir, p->keep_env, p->keep_custom, time(NULL));
}

static void prune_done(uv_work_t *w, int status)
{
    env_prune_t *p = w->data;
    if (!p->cancelled && p->cb != NULL) p->cb(status == 0 ? p->removed : 0, p->user);
    prune_free(p);
}

int env_prune_start(uv_loop_t *loop, const char *cache_dir, const char *keep_env,
                    const char *keep_custom, void (*cb)(long removed, void *user), void *user,
                    env_prune_t **out)
{
    if (out != NULL) *out = NULL;
    if (loop == NULL || cache_dir == NULL || out == NULL) return ENV_EINVAL;
    env_prune_t *p = calloc(1, sizeof *p);
    if (p == NULL) return ENV_ENOMEM;
    bool ok = true;
    p->cache_dir = env__dup_or_null(cache_dir, &ok);
    p->keep_env = env__dup_or_null(keep_env, &ok);
    p->keep_custom = env__dup_or_null(keep_custom, &ok);
    if (!ok) {
        prune_free(p);
        return ENV_ENOMEM;
    }
    p->cb = cb;
    p->user = user;
    p->work.data = p;
    if (uv_queue_work(loop, &p->work, prune_work, prune_done) != 0) {
        prune_free(p);
        return ENV_EIO;
    }
    *out = p;
    return 0;
}

void env_prune_cancel(env_prune_t *p)
{
    if (p != NULL) p->cancelled = true;
}
