/*
 * Escape suite driver: runs each attack script in attacks/ THROUGH the executor (the same pool the
 * server uses) and checks the exact containment, plus what only the host can see: nothing of the
 * run is left running (no process below this one, a subreaper, nor one whose command line
 * carries the run's token), the server (this process) and a sentinel process survive, the loopback
 * listener was never reached.
 *
 * `escape_driver DIR` runs every attack with all layers on; `--no-userns` (as an ordinary user)
 * runs those that fit the Landlock-only mode with user namespaces switched off; `--controls` runs
 * the negative controls: one layer off (the test-only switch) and the matching attack must then
 * report an escape, which proves that attack's check can fail; `--environment` runs every attack
 * with a package folder mounted as the declared packages and the user's helpers are (with a
 * setuid-root program and a world-writable file in it), plus env_mount.py and rw_mount.py (a
 * --mount ...:rw folder owned by an ordinary user, with a root-owned file in it as root; the
 * driver then checks that nothing the code made there is root's on the host); `--session` runs each
 * containment attack as a cell of a workspace session (after a first cell), then checks that a new
 * session sees nothing the first one left (session_residue.py). Attacks never run on the bare
 * host.
 * (no-new-privs has no control of its own: Landlock and seccomp cannot be applied without it.)
 */
#include "executor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PYTHON         "/usr/bin/python3"
#define SCRIPT_MAX     (64u << 10)
#define LEFTOVER_WAIT  3000 /* ms for the kernel to reap a killed namespace */
#define FLOOD_BYTES    (100ull << 20)
#define KEEP_BYTES     (1u << 20)
#define RUN_TIMEOUT_MS 30000u

/* WANT_PAIR: two runs of the script at once, both contained */
enum { WANT_CONTAINED, WANT_TIMEOUT, WANT_MEMORY, WANT_FLOOD, WANT_ESCAPE, WANT_PAIR };
#define PAIR_WAIT_S 2 /* how long each of a pair waits for the other before it looks */

typedef struct {
    const char *script;
    int want;
    unsigned timeout_ms;
    const char *disable; /* controls only */
} esc_case_t;

static const esc_case_t cases[] = {
    {"net.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"vsock.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"read_secrets.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"write_fs.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"exec_tmp.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"identity.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"ptrace_kill.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"see_procs.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"leaked_fd.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"links.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"fork_bomb.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"memory_bomb.py", WANT_MEMORY, RUN_TIMEOUT_MS, NULL},
    {"disk_fill.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"cpu_spin.py", WANT_TIMEOUT, 1500, NULL},
    {"grandchild.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"output_flood.py", WANT_FLOOD, RUN_TIMEOUT_MS, NULL},
    {"namespaces.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"kernel_surface.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"foreign_abi.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"proc_info.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    {"cgroup_paths.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    /* what a fork server could leak (docs/sandbox.md, "A fork server (zygote)"); they hold
       without one too */
    {"sibling_marker.py", WANT_PAIR, RUN_TIMEOUT_MS, NULL},
    {"zygote_reach.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
};

/* an ordinary user without user namespaces (the test switch turns user-ns off): the
   Landlock-only mode; attacks whose exact errnos assume a mount namespace are left out, and so
   are proc_info.py and cgroup_paths.py: that mode has neither /proc masks nor a cgroup
   namespace (both need a user namespace; the layers say unavailable) */
static const esc_case_t landlock_cases[] = {
    {"fs_landlock.py", WANT_CONTAINED, RUN_TIMEOUT_MS, "user-ns"},
    {"net.py", WANT_CONTAINED, RUN_TIMEOUT_MS, "user-ns"},
    {"vsock.py", WANT_CONTAINED, RUN_TIMEOUT_MS, "user-ns"},
    {"ptrace_kill.py", WANT_CONTAINED, RUN_TIMEOUT_MS, "user-ns"},
    {"memory_bomb.py", WANT_MEMORY, RUN_TIMEOUT_MS, "user-ns"},
    {"cpu_spin.py", WANT_TIMEOUT, 1500, "user-ns"},
    {"grandchild.py", WANT_CONTAINED, RUN_TIMEOUT_MS, "user-ns"},
    {"output_flood.py", WANT_FLOOD, RUN_TIMEOUT_MS, "user-ns"},
    {"namespaces.py", WANT_CONTAINED, RUN_TIMEOUT_MS, "user-ns"},
    {"kernel_surface.py", WANT_CONTAINED, RUN_TIMEOUT_MS, "user-ns"},
    {"foreign_abi.py", WANT_CONTAINED, RUN_TIMEOUT_MS, "user-ns"},
};

/* one layer off, the attack that only that layer stops must get through */
static const esc_case_t controls[] = {
    {"vsock.py", WANT_ESCAPE, RUN_TIMEOUT_MS, "seccomp"},
    {"kernel_surface.py", WANT_ESCAPE, RUN_TIMEOUT_MS, "seccomp"},
    {"see_procs.py", WANT_ESCAPE, RUN_TIMEOUT_MS, "pid-ns"},
    {"identity.py", WANT_ESCAPE, RUN_TIMEOUT_MS, "caps-drop"},
    /* read-only: the host's /tmp holds the secret and Landlock alone allows /tmp */
    {"read_secrets.py", WANT_ESCAPE, RUN_TIMEOUT_MS, "mount-ns"},
    {"proc_info.py", WANT_ESCAPE, RUN_TIMEOUT_MS, "proc-mask"},
    {"cgroup_paths.py", WANT_ESCAPE, RUN_TIMEOUT_MS, "cgroup-ns"},
};

typedef enum { MODE_WALLS, MODE_CONTROLS, MODE_LANDLOCK, MODE_ENV, MODE_SESSION } mode_t_;

typedef struct {
    bool done;
    exec_status_t status;
    int exit_code;
    char signame[16];
    char *out, *err;
    uint64_t out_total;
    size_t out_len;
    bool out_trunc;
    bool zygote; /* its sandbox was forked by the zygote */
    char message[800];
} result_t;

static void fill_result(result_t *res, const exec_result_t *r)
{
    res->done = true;
    res->status = r->status;
    res->exit_code = r->exit_code;
    snprintf(res->signame, sizeof res->signame, "%s", r->signal_name ? r->signal_name : "");
    res->out = strndup((const char *)r->out.data, r->out.len > 4096 ? 4096 : r->out.len);
    res->err = strndup((const char *)r->err.data, r->err.len > 4096 ? 4096 : r->err.len);
    res->out_total = r->out.total;
    res->out_len = r->out.len;
    res->out_trunc = r->out.truncated;
    res->zygote = r->zygote;
    snprintf(res->message, sizeof res->message, "%s", r->message ? r->message : "");
}

static void on_done(exec_run_t *run, const exec_result_t *r, void *user)
{
    (void)run;
    fill_result(user, r);
}

static void on_cell_done(exec_session_t *s, const exec_result_t *r, void *user)
{
    (void)s;
    fill_result(user, r);
}

static void result_clear(result_t *res)
{
    free(res->out);
    free(res->err);
    memset(res, 0, sizeof *res);
}

/* Runs one cell and waits for it; false when it could not start. */
static bool run_cell(uv_loop_t *loop, exec_session_t *s, const char *code, unsigned timeout_ms,
                     result_t *res)
{
    result_clear(res);
    exec_session_callbacks_t cb = {.on_done = on_cell_done, .user = res};
    int r = exec_session_run(s, code, timeout_ms, &cb);
    if (r < 0) {
        snprintf(res->message, sizeof res->message, "exec_session_run: %s", exec_strerror(r));
        return false;
    }
    while (!res->done && uv_run(loop, UV_RUN_ONCE) != 0) {
    }
    return res->done;
}

static char *read_file(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "re");
    if (!f) return NULL;
    char *buf = malloc(SCRIPT_MAX);
    size_t n = buf ? fread(buf, 1, SCRIPT_MAX - 1, f) : 0;
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

/* The start of /proc/PID/file for a /proc entry that is a process (len - 1 bytes at most, so
   that the caller can terminate it); -1 for other entries and unreadable files. */
static ssize_t read_proc_entry(const struct dirent *e, const char *file, char *buf, size_t len)
{
    if (e->d_name[0] < '0' || e->d_name[0] > '9') return -1;
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/%s", e->d_name, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    return n;
}

/* any process whose command line carries token (the code, so launcher and interpreter) */
static int count_with_token(const char *token)
{
    DIR *d = opendir("/proc");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    char buf[8192];
    while ((e = readdir(d))) {
        ssize_t len = read_proc_entry(e, "cmdline", buf, sizeof buf);
        if (len <= 0) continue;
        for (ssize_t i = 0; i < len; i++)
            if (buf[i] == '\0') buf[i] = ' ';
        buf[len] = '\0';
        if (strstr(buf, token)) n++;
    }
    closedir(d);
    return n;
}

typedef struct {
    pid_t pid, ppid;
    char state;
} proc_stat_t;

/* Live processes below this one, the sentinel aside; zombies below it are reaped. The driver
   is a subreaper (main), so what a run leaves behind (a setsid escapee, a daemon) is
   reparented to it, not to init: counted however the code arrived (a warm run's and a
   session's come over a descriptor, so no command line carries the token). -1: /proc
   unreadable. */
static int count_descendants(pid_t sentinel)
{
    DIR *d = opendir("/proc");
    if (!d) return -1;
    size_t n = 0, cap = 1024;
    proc_stat_t *ps = malloc(cap * sizeof *ps);
    if (!ps) {
        closedir(d);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        char buf[1024];
        ssize_t len = read_proc_entry(e, "stat", buf, sizeof buf);
        if (len <= 0) continue;
        buf[len] = '\0';
        /* "pid (comm) S ppid ...": comm may hold spaces and parentheses */
        char *rp = strrchr(buf, ')');
        if (!rp || rp[1] != ' ' || rp[2] == '\0' || rp[3] != ' ') continue;
        char st = rp[2];
        long ppid = strtol(rp + 4, NULL, 10);
        if (n == cap) {
            proc_stat_t *bigger = realloc(ps, 2 * cap * sizeof *ps);
            if (!bigger) break;
            ps = bigger;
            cap *= 2;
        }
        ps[n++] = (proc_stat_t){(pid_t)strtol(buf, NULL, 10), (pid_t)ppid, st};
    }
    closedir(d);
    pid_t self = getpid();
    int live = 0;
    for (size_t i = 0; i < n; i++) {
        if (ps[i].pid == sentinel) continue;
        pid_t up = ps[i].ppid;
        for (int depth = 0; depth < 64 && up > 1 && up != self; depth++) {
            size_t j = 0;
            while (j < n && ps[j].pid != up)
                j++;
            up = j < n ? ps[j].ppid : 0;
        }
        if (up != self) continue;
        if (ps[i].state == 'Z' || ps[i].state == 'X') {
            if (ps[i].ppid == self) waitpid(ps[i].pid, NULL, WNOHANG);
            continue;
        }
        live++;
    }
    free(ps);
    return live;
}

static bool leftovers_gone(const char *token, pid_t sentinel)
{
    for (int waited = 0; waited < LEFTOVER_WAIT; waited += 50) {
        if (count_with_token(token) == 0 && count_descendants(sentinel) == 0) return true;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

typedef struct {
    int listen_fd, port;
    int leaked_fd;
    pid_t sentinel;
    char secret[128];
    char dir[64];
    char env_dir[128]; /* --environment: the mounted package folder */
    char rw_dir[128];  /* --environment: the folder rw_mount.py gets read-write */
} host_t;

#define RW_OWNER     4321 /* as root: the rw folder's owner, an ordinary uid */
#define RW_ROOT_FILE "root-file"

#define ENV_MODULE "ptc_escape_envmod"

/* A package folder like the environment's: a module, a world-writable file and (as root) a
 * setuid-root copy of id. */
static int env_setup(host_t *h)
{
    if (snprintf(h->env_dir, sizeof h->env_dir, "%s/env", h->dir) >= (int)sizeof h->env_dir ||
        mkdir(h->env_dir, 0755) < 0)
        return -1;
    char path[256];
    snprintf(path, sizeof path, "%s/%s.py", h->env_dir, ENV_MODULE);
    FILE *f = fopen(path, "we");
    if (!f) return -1;
    fputs("VALUE = 42\n", f);
    fclose(f);
    chmod(path, 0644);
    snprintf(path, sizeof path, "%s/writable.txt", h->env_dir);
    if ((f = fopen(path, "we")) == NULL) return -1;
    fclose(f);
    chmod(path, 0666);
    if (geteuid() == 0) {
        snprintf(path, sizeof path, "%s/suid-id", h->env_dir);
        int in = open("/usr/bin/id", O_RDONLY | O_CLOEXEC);
        int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
        char buf[65536];
        ssize_t n;
        while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
            if (write(out, buf, (size_t)n) != n) break;
        if (in >= 0) close(in);
        if (out >= 0) close(out);
        if (in < 0 || out < 0 || chmod(path, 04755) < 0) return -1;
    }
    /* the rw folder: an ordinary user's (as root), with a root-owned file among its files */
    if (snprintf(h->rw_dir, sizeof h->rw_dir, "%s/rw", h->dir) >= (int)sizeof h->rw_dir ||
        mkdir(h->rw_dir, 0755) < 0)
        return -1;
    if (geteuid() == 0) {
        snprintf(path, sizeof path, "%s/" RW_ROOT_FILE, h->rw_dir);
        if ((f = fopen(path, "we")) == NULL) return -1;
        fputs("root's\n", f);
        fclose(f);
        if (chmod(path, 0644) < 0 || chown(h->rw_dir, RW_OWNER, RW_OWNER) < 0) return -1;
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* what the code left in the rw folder, seen from the host: nothing of root's but the file the
   driver put there, and that one unchanged; why says what was found */
static char rw_found[256];
static int rw_check_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)flag;
    if (ftw->level == 0 || rw_found[0]) return 0;
    bool planted = strcmp(path + ftw->base, RW_ROOT_FILE) == 0 && ftw->level == 1;
    if (st->st_uid == 0 && !planted)
        snprintf(rw_found, sizeof rw_found, "%s is root's on the host", path);
    else if (planted && (st->st_size != 7 || (st->st_mode & 07777) != 0644))
        snprintf(rw_found, sizeof rw_found, "the root-owned %s was changed", path);
    else if ((st->st_mode & (S_ISUID | S_ISGID)) && (st->st_uid == 0 || st->st_gid == 0))
        snprintf(rw_found, sizeof rw_found, "%s is setuid/setgid root on the host", path);
    return 0;
}

static const char *rw_check(const host_t *h)
{
    rw_found[0] = '\0';
    if (nftw(h->rw_dir, rw_check_entry, 16, FTW_PHYS) < 0)
        snprintf(rw_found, sizeof rw_found, "cannot walk %s: %s", h->rw_dir, strerror(errno));
    return rw_found[0] ? rw_found : NULL;
}

static void env_teardown(host_t *h)
{
    if (!h->env_dir[0]) return;
    const char *names[] = {ENV_MODULE ".py", "writable.txt", "suid-id"};
    char path[256];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", h->env_dir, names[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/__pycache__", h->env_dir);
    rmdir(path); /* read-only inside: nothing can have been written there */
    rmdir(h->env_dir);
    if (h->rw_dir[0]) nftw(h->rw_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int host_setup(host_t *h)
{
    memset(h, 0, sizeof *h);
    snprintf(h->dir, sizeof h->dir, "/tmp/ptc-escape-XXXXXX");
    if (!mkdtemp(h->dir)) return -1;
    chmod(h->dir, 0755);
    if (snprintf(h->secret, sizeof h->secret, "%s/config.json", h->dir) >= (int)sizeof h->secret)
        return -1;
    FILE *f = fopen(h->secret, "we");
    if (!f) return -1;
    fputs("{\"token\": \"TOPSECRET\"}\n", f);
    fclose(f);
    chmod(h->secret, 0644);
    /* deliberately no O_CLOEXEC: a careless server leaking a descriptor */
    h->leaked_fd = open(h->secret, O_RDONLY);
    h->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (h->listen_fd < 0 || bind(h->listen_fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(h->listen_fd, 8) < 0 || getsockname(h->listen_fd, (struct sockaddr *)&a, &al) < 0)
        return -1;
    h->port = ntohs(a.sin_port);
    h->sentinel = fork();
    if (h->sentinel == 0) {
        for (;;)
            pause();
    }
    return h->sentinel > 0 && h->leaked_fd >= 0 ? 0 : -1;
}

static void host_teardown(host_t *h)
{
    if (h->sentinel > 0) {
        kill(h->sentinel, SIGKILL);
        waitpid(h->sentinel, NULL, 0);
    }
    close(h->leaked_fd);
    close(h->listen_fd);
    unlink(h->secret);
    env_teardown(h);
    rmdir(h->dir);
}

/* Session mode: cell 1 "x = 1", cell 2 the attack (into *res), cell 3 leaves residue; then a new
 * session runs session_residue.py (into *res2). */
static int run_in_sessions(uv_loop_t *loop, exec_pool_t *pool, const char *code,
                           const char *residue_code, unsigned timeout_ms, result_t *res,
                           result_t *res2, char *why, size_t why_size)
{
    exec_session_t *a = NULL, *b = NULL;
    int r = exec_session_new(pool, NULL, &a);
    if (r < 0) return r;
    result_t warm = {0};
    if (!run_cell(loop, a, "x = 1", timeout_ms, &warm) || warm.status != EXEC_STATUS_OK)
        snprintf(why, why_size, "the first cell failed: %.300s", warm.message);
    result_clear(&warm);
    if (!why[0] && !run_cell(loop, a, code, timeout_ms, res))
        snprintf(why, why_size, "the attack cell did not run: %.300s", res->message);
    static const char leave[] =
        "import os\nopen('/tmp/ptc_escape_left', 'w').write('x')\n"
        "globals()['ptc_escape_left'] = 1\nos.ptc_escape_left = 1\nprint('LEFT')\n";
    if (!why[0] && exec_session_end_reason(a) == NULL &&
        (!run_cell(loop, a, leave, timeout_ms, &warm) || !warm.out || !strstr(warm.out, "LEFT")))
        snprintf(why, why_size, "the residue cell failed: %.300s", warm.message);
    result_clear(&warm);
    if (!why[0] && (r = exec_session_new(pool, NULL, &b)) < 0)
        snprintf(why, why_size, "the second session: %s", exec_strerror(r));
    if (!why[0] && !run_cell(loop, b, residue_code, timeout_ms, res2))
        snprintf(why, why_size, "the residue check did not run: %.300s", res2->message);
    exec_session_close(a);
    exec_session_close(b);
    return 0;
}

/* the pool's zygote: our child whose command line holds its script (executor/zygote.c); 0 */
static pid_t find_zygote(void)
{
    DIR *d = opendir("/proc");
    if (!d) return 0;
    pid_t found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        char buf[1024];
        ssize_t len = read_proc_entry(e, "stat", buf, sizeof buf - 1);
        if (len <= 0) continue;
        buf[len] = '\0';
        char *rp = strrchr(buf, ')');
        if (!rp || rp[1] != ' ' || rp[2] == '\0' || rp[3] != ' ') continue;
        if (strtol(rp + 4, NULL, 10) != getpid()) continue;
        len = read_proc_entry(e, "cmdline", buf, sizeof buf - 1);
        if (len <= 0) continue;
        for (ssize_t i = 0; i < len; i++)
            if (buf[i] == '\0') buf[i] = ' ';
        buf[len] = '\0';
        if (strstr(buf, "_ptc_zygote")) found = (pid_t)strtol(e->d_name, NULL, 10);
    }
    closedir(d);
    return found;
}

/* code with the constants that need the pool: the zygote's pid, the pair's wait (malloc'd) */
static char *with_pool_constants(const char *code, pid_t zygote)
{
    size_t cap = strlen(code) + 128;
    char *full = malloc(cap);
    if (full)
        snprintf(full, cap, "ZYGOTE_PID = %d\nPAIR_WAIT_S = %d\n%s", (int)zygote, PAIR_WAIT_S,
                 code);
    return full;
}

static bool run_case(const char *dir, const esc_case_t *c, const host_t *h, const char *common,
                     mode_t_ mode)
{
    char *script = read_file(dir, c->script);
    if (!script) {
        printf("FAIL %s: cannot read the script\n", c->script);
        return false;
    }
    char token[96];
    snprintf(token, sizeof token, "ptc-escape-%d-%ld-%s", (int)getpid(), (long)time(NULL),
             c->script);
    size_t cap = strlen(script) + strlen(common) + 1024;
    char *code = malloc(cap);
    if (!code) return false;
    snprintf(code, cap,
             "TOKEN = %s%s%s\nSERVER_PID = %d\nSENTINEL_PID = %d\nLISTEN_PORT = %d\n"
             "SECRET_FILE = '%s'\nLEAKED_FD = %d\nNO_USERNS = %s\nENV_DIR_MARK = '%s'\nIN_SESSION "
             "= %s\n%s\n%s",
             "'", token, "'", (int)getpid(), (int)h->sentinel, h->port, h->secret, h->leaked_fd,
             c->disable && strcmp(c->disable, "user-ns") == 0 ? "True" : "False", ENV_MODULE,
             mode == MODE_SESSION ? "True" : "False", common, script);
    free(script);
    char *residue_code = NULL;
    if (mode == MODE_SESSION) {
        char *rs = read_file(dir, "session_residue.py");
        size_t rcap = (rs ? strlen(rs) : 0) + strlen(common) + 256;
        residue_code = rs ? malloc(rcap) : NULL;
        if (residue_code)
            snprintf(residue_code, rcap,
                     "LEFT_FILE = 'ptc_escape_left'\nLEFT_GLOBAL = 'ptc_escape_left'\n%s\n%s",
                     common, rs);
        free(rs);
        if (!residue_code) {
            printf("FAIL %s: cannot read session_residue.py\n", c->script);
            free(code);
            return false;
        }
    }

    uv_loop_t loop;
    uv_loop_init(&loop);
    exec_options_t o;
    exec_options_init(&o);
    o.python = PYTHON;
    o.launcher = TEST_LAUNCHER;
    o.stdout_keep = KEEP_BYTES;
    o.test_disable_layer = c->disable;
    bool rw_case = strcmp(c->script, "rw_mount.py") == 0;
    char rw_spec[160];
    const char *rw_mounts[1] = {rw_spec};
    if (rw_case) {
        snprintf(rw_spec, sizeof rw_spec, "%s:/rw:rw", h->rw_dir);
        o.mounts = rw_mounts;
        o.n_mounts = 1;
    }
    exec_pool_t *pool = NULL;
    result_t res = {0}, res2 = {0};
    /* The zygote is on unless PTC_ZYGOTE=0 (exec_options_init): then every one-shot run must
       come from it, or the suite would pass on the launcher's sandboxes alone; with it off
       (the *_launcher entries) none may, or those would test the zygote twice */
    bool want_zygote = o.zygote && mode != MODE_SESSION && mode != MODE_LANDLOCK;
    bool ok = true;
    char why[512] = "";
    int r = exec_pool_new(&loop, &o, &pool);
    if (r < 0) {
        printf("FAIL %s: pool: %s\n", c->script, exec_strerror(r));
        free(code);
        free(residue_code);
        return false;
    }
    bool memcg = exec_pool_probe(pool)->state[EXEC_LAYER_CGROUP_MEMORY] == EXEC_LAYER_ACTIVE;
    if (want_zygote && !exec_pool_probe(pool)->zygote)
        snprintf(why, sizeof why, "the zygote is on (%s is not 0) but inactive: %s",
                 EXEC_ZYGOTE_ENV, exec_pool_probe(pool)->zygote_reason);
    char *full = with_pool_constants(code, exec_pool_probe(pool)->zygote ? find_zygote() : 0);
    if (!full) {
        printf("FAIL %s: out of memory\n", c->script);
        exec_pool_free(pool);
        uv_run(&loop, UV_RUN_DEFAULT);
        free(code);
        free(residue_code);
        return false;
    }
    free(code);
    code = full;
    if (why[0]) {
        r = 0;
    } else if (mode == MODE_SESSION) {
        r = run_in_sessions(&loop, pool, code, residue_code, c->timeout_ms, &res, &res2, why,
                            sizeof why);
    } else {
        exec_run_opts_t ro;
        exec_run_opts_init(&ro);
        const char *dirs[1] = {h->env_dir};
        if (mode == MODE_ENV) {
            ro.path_dirs = dirs;
            ro.n_path_dirs = 1;
        }
        exec_callbacks_t cb = {.on_done = on_done, .user = &res};
        exec_callbacks_t cb2 = {.on_done = on_done, .user = &res2};
        r = exec_run_start_ex(pool, code, c->timeout_ms, &ro, &cb, NULL);
        if (r == 0 && c->want == WANT_PAIR)
            r = exec_run_start(pool, code, c->timeout_ms, &cb2, NULL);
        if (r == 0) uv_run(&loop, UV_RUN_DEFAULT);
    }
    exec_pool_free(pool);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    free(code);
    free(residue_code);
    if (!why[0] && (r < 0 || !res.done)) {
        printf("FAIL %s: run did not complete (%s; %s)\n", c->script, exec_strerror(r), why);
        result_clear(&res);
        result_clear(&res2);
        return false;
    }
    bool contained_line = res.out && strstr(res.out, "CONTAINED\n") && !strstr(res.out, "ESCAPED");
    if (mode == MODE_SESSION && !why[0] &&
        (res2.status != EXEC_STATUS_OK || !res2.out || !strstr(res2.out, "CONTAINED\n") ||
         strstr(res2.out, "ESCAPED")))
        snprintf(why, sizeof why, "a new session saw what the attack's session left: %.300s",
                 res2.out ? res2.out : res2.message);
    if (!why[0] && want_zygote && (!res.zygote || (c->want == WANT_PAIR && !res2.zygote)))
        snprintf(why, sizeof why, "the run's sandbox did not come from the zygote");
    if (!why[0] && !o.zygote && (res.zygote || res2.zygote))
        snprintf(why, sizeof why, "the run's sandbox came from the zygote though %s=0",
                 EXEC_ZYGOTE_ENV);
    if (why[0]) {
        /* already failed */
    } else
        switch (c->want) {
        case WANT_PAIR:
            if (res.status != EXEC_STATUS_OK || !contained_line || res2.status != EXEC_STATUS_OK ||
                !res2.out || !strstr(res2.out, "CONTAINED\n") || strstr(res2.out, "ESCAPED"))
                snprintf(why, sizeof why,
                         "status %s / %s, expected ok + CONTAINED twice; the other: %.300s",
                         exec_status_name(res.status), exec_status_name(res2.status),
                         res2.out ? res2.out : "");
            break;
        case WANT_CONTAINED:
            if (res.status != EXEC_STATUS_OK || !contained_line)
                snprintf(why, sizeof why, "status %s exit %d, expected ok + CONTAINED",
                         exec_status_name(res.status), res.exit_code);
            break;
        case WANT_TIMEOUT:
            if (res.status != EXEC_STATUS_TIMEOUT)
                snprintf(why, sizeof why, "status %s, expected timeout",
                         exec_status_name(res.status));
            break;
        case WANT_MEMORY:
            /* a memory cgroup OOM-kills; RLIMIT_AS (ordinary user) makes the allocation fail */
            if (memcg ? res.status != EXEC_STATUS_OOM
                      : (res.status != EXEC_STATUS_OK || !contained_line))
                snprintf(why, sizeof why, "status %s (memory cgroup %s)",
                         exec_status_name(res.status), memcg ? "active" : "unavailable");
            break;
        case WANT_FLOOD:
            if (res.status != EXEC_STATUS_OK || res.out_total != FLOOD_BYTES ||
                res.out_len != KEEP_BYTES || !res.out_trunc || !strstr(res.err, "CONTAINED"))
                snprintf(why, sizeof why, "status %s total %llu kept %zu",
                         exec_status_name(res.status), (unsigned long long)res.out_total,
                         res.out_len);
            break;
        case WANT_ESCAPE:
            if (!res.out || !strstr(res.out, "ESCAPED"))
                snprintf(why, sizeof why,
                         "with %s off the attack was still contained: the test "
                         "cannot tell the wall is there",
                         c->disable);
            break;
        }
    const char *rw_bad = rw_case && !why[0] ? rw_check(h) : NULL;
    if (rw_bad) snprintf(why, sizeof why, "in the rw folder: %s", rw_bad);
    if (!why[0] && !leftovers_gone(token, h->sentinel))
        snprintf(why, sizeof why, "processes of the run are still alive");
    if (!why[0] && (kill(h->sentinel, 0) < 0 || waitpid(h->sentinel, NULL, WNOHANG) != 0))
        snprintf(why, sizeof why, "the sentinel process was killed");
    int conn = accept(h->listen_fd, NULL, NULL);
    if (!why[0] && conn >= 0) snprintf(why, sizeof why, "the loopback listener got a connection");
    if (conn >= 0) close(conn);
    if (why[0]) {
        ok = false;
        printf("FAIL %s%s%s: %s\n  message: %s\n  stdout: %.2000s\n  stderr: %.2000s\n", c->script,
               c->disable ? " without " : "", c->disable ? c->disable : "", why, res.message,
               res.out ? res.out : "", res.err ? res.err : "");
    } else {
        printf("ok   %s%s%s (%s)\n", c->script, c->disable ? " without " : "",
               c->disable ? c->disable : "", exec_status_name(res.status));
    }
    fflush(stdout);
    result_clear(&res);
    result_clear(&res2);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: escape_driver ATTACKS_DIR [--controls | --no-userns]\n");
        return 2;
    }
    const char *flag = argc > 2 ? argv[2] : "";
    mode_t_ mode = strcmp(flag, "--controls") == 0      ? MODE_CONTROLS
                   : strcmp(flag, "--no-userns") == 0   ? MODE_LANDLOCK
                   : strcmp(flag, "--environment") == 0 ? MODE_ENV
                   : strcmp(flag, "--session") == 0     ? MODE_SESSION
                                                        : MODE_WALLS;
    if (flag[0] && mode == MODE_WALLS) {
        fprintf(stderr, "unknown flag %s\n", flag);
        return 2;
    }
    bool ctl = mode == MODE_CONTROLS;
    bool no_userns = mode == MODE_LANDLOCK;
    signal(SIGPIPE, SIG_IGN);
    /* leftovers come to us (count_descendants), not to init */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
        fprintf(stderr, "PR_SET_CHILD_SUBREAPER: %s\n", strerror(errno));
        return 2;
    }
    char *common = read_file(argv[1], "_common.py");
    if (!common) {
        fprintf(stderr, "cannot read %s/_common.py\n", argv[1]);
        return 2;
    }
    host_t h;
    if (host_setup(&h) < 0) {
        fprintf(stderr, "host setup failed: %s\n", strerror(errno));
        return 2;
    }
    if (mode == MODE_ENV && env_setup(&h) < 0) {
        fprintf(stderr, "package folder setup failed: %s\n", strerror(errno));
        host_teardown(&h);
        return 2;
    }
    if (no_userns && geteuid() == 0) {
        /* root without a user namespace keeps the other namespaces: not the mode tested here */
        printf("SKIP: the Landlock-only mode is for ordinary users; run it as one\n");
        host_teardown(&h);
        free(common);
        return 77;
    }
    printf("escape suite as uid %d (%s)\n", (int)geteuid(),
           ctl                    ? "negative controls"
           : no_userns            ? "Landlock-only mode"
           : mode == MODE_ENV     ? "walls, package folder mounted"
           : mode == MODE_SESSION ? "walls, in workspace sessions"
                                  : "walls");
    const esc_case_t *list = ctl ? controls : no_userns ? landlock_cases : cases;
    size_t n = ctl         ? sizeof controls / sizeof controls[0]
               : no_userns ? sizeof landlock_cases / sizeof landlock_cases[0]
                           : sizeof cases / sizeof cases[0];
    static const esc_case_t env_cases[] = {
        {"env_mount.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
        {"rw_mount.py", WANT_CONTAINED, RUN_TIMEOUT_MS, NULL},
    };
    int failed = 0;
    size_t ran = 0;
    for (size_t i = 0; i < n; i++) {
        /* a session's cell is judged for containment; timeouts, floods and memory are the
           one-shot suite's (a session cell's timeout interrupts instead of killing) */
        if (mode == MODE_SESSION && list[i].want != WANT_CONTAINED) continue;
        ran++;
        if (!run_case(argv[1], &list[i], &h, common, mode)) failed++;
    }
    for (size_t i = 0; mode == MODE_ENV && i < sizeof env_cases / sizeof env_cases[0]; i++) {
        ran++;
        if (!run_case(argv[1], &env_cases[i], &h, common, mode)) failed++;
    }
    n = ran;
    host_teardown(&h);
    free(common);
    printf("%d of %zu failed\n", failed, n);
    return failed ? 1 : 0;
}
