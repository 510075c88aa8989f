/*
 * Per-run cgroup: memory (and no swap), pids and one CPU. cgroup v2 when its controllers can be
 * enabled below our own cgroup, else v1 (memory, pids, cpu hierarchies, as on Debian hosts with
 * the hybrid layout). Created by the launcher before init runs and removed after the namespace is
 * gone. An ordinary user usually cannot create cgroups: the layers are then reported unavailable
 * and init falls back to RLIMIT_AS (see launch_child.c).
 */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CG_RMDIR_TRIES   40   /* x 5 ms: tasks of a killed namespace take a moment to leave */
#define CG_CLEANER_TRIES 1200 /* x 50 ms, in a detached child, when they take longer */

enum { CG_MEM, CG_PIDS, CG_CPU, CG_N };
static const char *const cg_ctrl[CG_N] = {"memory", "pids", "cpu"};
static const exec_layer_id_t cg_layer[CG_N] = {EXEC_LAYER_CGROUP_MEMORY, EXEC_LAYER_CGROUP_PIDS,
                                               EXEC_LAYER_CGROUP_CPU};

struct launch_cgroup {
    bool v2;
    char dir[CG_N][LAUNCH_PATH_MAX]; /* v1: one per controller; v2: dir[0] only */
    bool have[CG_N];
};

/* snprintf that reports truncation instead of hiding it */
static bool fmt(char *out, size_t len, const char *a, const char *b, const char *c)
{
    int n = snprintf(out, len, "%s%s%s", a, b, c);
    return n >= 0 && (size_t)n < len;
}

static int put(const char *dir, const char *file, const char *text)
{
    char path[LAUNCH_PATH_MAX];
    if (!fmt(path, sizeof path, dir, "/", file)) return -ENAMETOOLONG;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    int err = w == (ssize_t)len ? 0 : (w < 0 ? -errno : -EIO);
    close(fd);
    return err;
}

static long long get_key(const char *dir, const char *file, const char *key)
{
    char path[LAUNCH_PATH_MAX], line[256];
    if (!fmt(path, sizeof path, dir, "/", file)) return -1;
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    long long v = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
            v = strtoll(line + klen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

/* Our cgroup path for a v1 controller ("memory") or v2 (ctrl NULL), from /proc/self/cgroup. */
static int own_path(const char *ctrl, char *out, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return -1;
    char line[LAUNCH_PATH_MAX];
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        char *a = strchr(line, ':');
        char *b = a ? strchr(a + 1, ':') : NULL;
        if (!b) continue;
        *a = *b = '\0';
        char *nl = strchr(b + 1, '\n');
        if (nl) *nl = '\0';
        bool match = false;
        if (!ctrl) {
            match = strcmp(line, "0") == 0 && a[1] == '\0';
        } else {
            char *save = NULL;
            for (char *tok = strtok_r(a + 1, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
                if (strcmp(tok, ctrl) == 0) match = true;
        }
        if (match) {
            snprintf(out, len, "%s", strcmp(b + 1, "/") == 0 ? "" : b + 1);
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

static bool has_word(const char *path, const char *word)
{
    FILE *f = fopen(path, "re");
    if (!f) return false;
    char buf[512];
    bool found = false;
    if (fgets(buf, sizeof buf, f))
        for (char *save = NULL, *t = strtok_r(buf, " \n", &save); t;
             t = strtok_r(NULL, " \n", &save))
            if (strcmp(t, word) == 0) found = true;
    fclose(f);
    return found;
}

static void unique_name(char *out, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(out, len, "ptc-run-%d-%ld", (int)getpid(), (long)(ts.tv_nsec & 0xffffff));
}

static void set_limits(struct launch_cgroup *cg, const struct launch_cfg *cfg, int c)
{
    char v[64];
    const char *d = cg->dir[cg->v2 ? 0 : c];
    int r = -1;
    if (c == CG_MEM) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)cfg->memory_bytes);
        if (cg->v2) {
            r = put(d, "memory.max", v);
            put(d, "memory.swap.max", "0"); /* absent without swap accounting: fine */
        } else {
            r = put(d, "memory.limit_in_bytes", v);
            put(d, "memory.memsw.limit_in_bytes", v);
            put(d, "memory.swappiness", "0");
        }
        if (r == 0)
            launch_layer(cg_layer[c], EXEC_LAYER_ACTIVE, "cgroup %s, %llu MiB",
                         cg->v2 ? "v2" : "v1", (unsigned long long)(cfg->memory_bytes >> 20));
    } else if (c == CG_PIDS) {
        snprintf(v, sizeof v, "%u", cfg->pids);
        r = put(d, "pids.max", v);
        if (r == 0)
            launch_layer(cg_layer[c], EXEC_LAYER_ACTIVE, "cgroup %s, %u tasks",
                         cg->v2 ? "v2" : "v1", cfg->pids);
    } else {
        /* a 100 ms period; the quota is the share of it (1000 thousandths: all of one core) */
        unsigned long long quota = (unsigned long long)cfg->cpu_millis * 100;
        if (cg->v2) {
            snprintf(v, sizeof v, "%llu 100000", quota);
            r = put(d, "cpu.max", v);
        } else {
            snprintf(v, sizeof v, "%llu", quota);
            r = put(d, "cpu.cfs_period_us", "100000");
            if (r == 0) r = put(d, "cpu.cfs_quota_us", v);
        }
        if (r == 0)
            launch_layer(cg_layer[c], EXEC_LAYER_ACTIVE, "cgroup %s, %u.%03u CPU",
                         cg->v2 ? "v2" : "v1", cfg->cpu_millis / 1000, cfg->cpu_millis % 1000);
    }
    if (r != 0) {
        launch_layer(cg_layer[c], EXEC_LAYER_UNAVAILABLE, "writing the limit: %s", strerror(-r));
        if (!cg->v2) rmdir(cg->dir[c]);
        cg->have[c] = false;
    }
}

static bool try_v2(struct launch_cgroup *cg, const struct launch_cfg *cfg)
{
    static const char *const mounts[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    char own[LAUNCH_PATH_MAX], parent[LAUNCH_PATH_MAX], name[64];
    if (own_path(NULL, own, sizeof own) < 0) return false;
    for (size_t m = 0; m < 2; m++) {
        char probe[LAUNCH_PATH_MAX];
        if (!fmt(probe, sizeof probe, mounts[m], "/cgroup.controllers", "")) continue;
        if (access(probe, F_OK) < 0) continue;
        if (!fmt(parent, sizeof parent, mounts[m], own, "")) return false;
        char ctl[LAUNCH_PATH_MAX];
        if (!fmt(ctl, sizeof ctl, parent, "/cgroup.controllers", "")) return false;
        if (!has_word(ctl, "memory") || !has_word(ctl, "pids")) return false;
        if (!fmt(ctl, sizeof ctl, parent, "/cgroup.subtree_control", "")) return false;
        if (!has_word(ctl, "memory") || !has_word(ctl, "pids")) {
            /* fails when our cgroup holds processes (and is not the root): then use v1 */
            if (put(parent, "cgroup.subtree_control", "+memory +pids") < 0) return false;
            put(parent, "cgroup.subtree_control", "+cpu");
        }
        unique_name(name, sizeof name);
        if (!fmt(cg->dir[0], sizeof cg->dir[0], parent, "/", name)) return false;
        if (mkdir(cg->dir[0], 0755) < 0) return false;
        cg->v2 = true;
        for (int c = 0; c < CG_N; c++) {
            cg->have[c] = true;
            set_limits(cg, cfg, c);
        }
        return true;
    }
    return false;
}

struct launch_cgroup *launch_cgroup_create(const struct launch_cfg *cfg)
{
    struct launch_cgroup *cg = calloc(1, sizeof *cg);
    if (!cg) {
        for (int c = 0; c < CG_N; c++)
            launch_layer(cg_layer[c], EXEC_LAYER_UNAVAILABLE, "out of memory");
        return NULL;
    }
    bool any = false;
    if (geteuid() != 0) {
        for (int c = 0; c < CG_N; c++)
            launch_layer(cg_layer[c], EXEC_LAYER_UNAVAILABLE,
                         "not root: no writable cgroup (memory capped by RLIMIT_AS instead)");
        free(cg);
        return NULL;
    }
    if (!try_v2(cg, cfg)) {
        char name[64];
        unique_name(name, sizeof name);
        for (int c = 0; c < CG_N; c++) {
            if (launch_disabled(cfg, cg_layer[c])) continue;
            char own[LAUNCH_PATH_MAX];
            if (own_path(cg_ctrl[c], own, sizeof own) < 0) {
                launch_layer(cg_layer[c], EXEC_LAYER_UNAVAILABLE, "no v1 %s hierarchy", cg_ctrl[c]);
                continue;
            }
            char base[LAUNCH_PATH_MAX];
            if (!fmt(base, sizeof base, "/sys/fs/cgroup/", cg_ctrl[c], own) ||
                !fmt(cg->dir[c], sizeof cg->dir[c], base, "/", name)) {
                launch_layer(cg_layer[c], EXEC_LAYER_UNAVAILABLE, "cgroup path too long");
                continue;
            }
            if (mkdir(cg->dir[c], 0755) < 0) {
                launch_layer(cg_layer[c], EXEC_LAYER_UNAVAILABLE, "mkdir %s: %s", cg->dir[c],
                             strerror(errno));
                continue;
            }
            cg->have[c] = true;
            set_limits(cg, cfg, c);
        }
    }
    for (int c = 0; c < CG_N; c++) {
        if (launch_disabled(cfg, cg_layer[c])) {
            if (cg->have[c]) { /* v2 made it already: lift the limit instead */
                if (c == CG_MEM) put(cg->dir[0], "memory.max", "max");
                if (c == CG_PIDS) put(cg->dir[0], "pids.max", "max");
                if (c == CG_CPU) put(cg->dir[0], "cpu.max", "max");
                if (cg->v2) cg->have[c] = false;
            }
            launch_layer(cg_layer[c], EXEC_LAYER_DISABLED, "test switch");
        }
        any |= cg->have[c];
    }
    if (!any && !cg->v2) {
        free(cg);
        return NULL;
    }
    return cg;
}

bool launch_cgroup_has_memory(const struct launch_cgroup *cg)
{
    return cg && cg->have[CG_MEM];
}

int launch_cgroup_attach(struct launch_cgroup *cg, pid_t pid)
{
    char v[32];
    snprintf(v, sizeof v, "%d", (int)pid);
    if (cg->v2) {
        int r = put(cg->dir[0], "cgroup.procs", v);
        if (r < 0) errno = -r;
        return r;
    }
    for (int c = 0; c < CG_N; c++) {
        if (!cg->have[c]) continue;
        int r = put(cg->dir[c], "cgroup.procs", v);
        if (r < 0) {
            errno = -r;
            return r;
        }
    }
    return 0;
}

bool launch_cgroup_oom(struct launch_cgroup *cg)
{
    if (!cg || !cg->have[CG_MEM]) return false;
    if (cg->v2) return get_key(cg->dir[0], "memory.events", "oom_kill") > 0;
    return get_key(cg->dir[CG_MEM], "memory.oom_control", "oom_kill") > 0;
}

/* rmdir every directory still there; true when none is left */
static bool remove_dirs(struct launch_cgroup *cg)
{
    bool left = false;
    int n = cg->v2 ? 1 : CG_N;
    for (int c = 0; c < n; c++) {
        if (!cg->v2 && !cg->have[c]) continue;
        if (!cg->dir[c][0]) continue;
        if (rmdir(cg->dir[c]) == 0 || errno != EBUSY)
            cg->dir[c][0] = '\0';
        else
            left = true;
    }
    return !left;
}

void launch_cgroup_destroy(struct launch_cgroup *cg)
{
    if (!cg) return;
    if (cg->v2) put(cg->dir[0], "cgroup.kill", "1");
    struct timespec ts = {0, 5 * 1000 * 1000};
    for (int t = 0; t < CG_RMDIR_TRIES && !remove_dirs(cg); t++)
        nanosleep(&ts, NULL);
    if (!remove_dirs(cg)) {
        /* tasks of a big or OOM-killed run can take long to leave on a busy host: a detached
           child keeps trying, so that the run's result is not held back */
        pid_t pid = fork();
        if (pid == 0) {
            setsid();
            for (int fd = 0; fd < 3; fd++) {
                int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (nul >= 0 && nul != fd) {
                    dup2(nul, fd);
                    close(nul);
                }
            }
            close(LAUNCH_REPORT_FD);
            struct timespec slow = {0, 50 * 1000 * 1000};
            for (int t = 0; t < CG_CLEANER_TRIES && !remove_dirs(cg); t++)
                nanosleep(&slow, NULL);
            _exit(0);
        }
    }
    free(cg);
}
