/*
 * The probe is a real run of `pass` through the launcher: the layers it reports are the ones a
 * run gets, not a guess from kernel version numbers.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* process tree, rlimits, no_new_privs, seccomp; the filesystem pair is checked apart */
static const exec_layer_id_t mandatory[] = {EXEC_LAYER_PROCESS_TREE, EXEC_LAYER_RLIMITS,
                                            EXEC_LAYER_NO_NEW_PRIVS, EXEC_LAYER_SECCOMP};

void exec__parse_layer(const char *rest, exec_layer_state_t *state, char (*reason)[EXEC_REASON_MAX])
{
    /* "NAME STATE [REASON]" */
    char name[32], st[16];
    size_t nl = strcspn(rest, " "), sl;
    if (nl == 0 || nl >= sizeof name) return;
    memcpy(name, rest, nl);
    name[nl] = '\0';
    const char *s = rest + nl + strspn(rest + nl, " ");
    sl = strcspn(s, " \n");
    if (sl == 0 || sl >= sizeof st) return;
    memcpy(st, s, sl);
    st[sl] = '\0';
    const char *why = s + sl + strspn(s + sl, " \n");
    int id = exec_layer_from_name(name);
    if (id < 0) return;
    state[id] = strcmp(st, "active") == 0        ? EXEC_LAYER_ACTIVE
                : strcmp(st, "disabled") == 0    ? EXEC_LAYER_DISABLED
                : strcmp(st, "unavailable") == 0 ? EXEC_LAYER_UNAVAILABLE
                                                 : EXEC_LAYER_UNKNOWN;
    if (reason) snprintf(reason[id], EXEC_REASON_MAX, "%s", why);
}

exec_sandbox_level_t exec__level(const exec_layer_state_t *state)
{
    for (int i = 0; i < EXEC_LAYER_COUNT; i++)
        if (state[i] != EXEC_LAYER_ACTIVE) return EXEC_SANDBOX_DEGRADED;
    return EXEC_SANDBOX_FULL;
}

static bool ok(const exec_probe_t *p, exec_layer_id_t id)
{
    /* a layer the test switch turned off counts as present: tests must run without it */
    return p->state[id] == EXEC_LAYER_ACTIVE || p->state[id] == EXEC_LAYER_DISABLED;
}

static void judge(exec_probe_t *p, const char *error_line)
{
    char missing[400] = "";
    size_t used = 0;
    for (size_t i = 0; i < sizeof mandatory / sizeof mandatory[0]; i++) {
        if (ok(p, mandatory[i])) continue;
        int n = snprintf(missing + used, sizeof missing - used, "%s%s", used ? ", " : "",
                         exec_layer_name(mandatory[i]));
        if (n > 0 && (size_t)n < sizeof missing - used) used += (size_t)n;
    }
    bool fs =
        (ok(p, EXEC_LAYER_MOUNT_NS) && ok(p, EXEC_LAYER_ROOTFS)) || ok(p, EXEC_LAYER_LANDLOCK);
    if (!fs) {
        int n = snprintf(missing + used, sizeof missing - used, "%s%s", used ? ", " : "",
                         "filesystem confinement (mount-ns + rootfs, or landlock)");
        if (n > 0 && (size_t)n < sizeof missing - used) used += (size_t)n;
    }
    p->mandatory_ok = used == 0 && !error_line[0];
    p->level = exec__level(p->state);
    if (error_line[0])
        snprintf(p->message, sizeof p->message,
                 "the sandbox could not be set up (%.*s). Fix the host as docs/sandbox.md says "
                 "(user namespaces, seccomp), or pass --unsafe-no-sandbox to run without it.",
                 (int)(sizeof p->message / 2), error_line);
    else if (!p->mandatory_ok)
        snprintf(p->message, sizeof p->message,
                 "mandatory sandbox layers missing: %.*s. Fix the host as docs/sandbox.md says, or "
                 "pass --unsafe-no-sandbox to run without them.",
                 (int)(sizeof p->message / 2), missing);
    else if (!p->python_ok)
        snprintf(p->message, sizeof p->message,
                 "the sandbox works but the interpreter did not run inside it; check --python "
                 "(the real binary, readable by the server's user).");
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One read of fd into buf, waiting for it until deadline (now_ms()): the bytes read, 0 at EOF,
   -ETIMEDOUT at the deadline, or another -errno when reading failed. */
static ssize_t read_by(int fd, char *buf, size_t len, uint64_t deadline)
{
    for (;;) {
        uint64_t t = now_ms();
        if (t >= deadline) return -ETIMEDOUT;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, (int)(deadline - t)) <= 0) continue;
        ssize_t got = read(fd, buf, len);
        if (got >= 0) return got;
        if (errno != EINTR) return -errno;
    }
}

static void handle_line(exec_probe_t *out, char *line, char *error_line, size_t error_len)
{
    if (strncmp(line, "layer ", 6) == 0)
        exec__parse_layer(line + 6, out->state, out->reason);
    else if (strcmp(line, "exit 0") == 0)
        out->python_ok = true;
    else if (strncmp(line, "error ", 6) == 0 && !error_line[0])
        exec__copy(error_line, error_len, line + 6);
}

/* What the zygote needs of the interpreter, checked where the pool starts it (outside the
   sandbox, as the same command with the same environment): the library loads into it and finds
   its fork hooks, and the fork server's calls exist (pidfd_open, which the kernel must have too,
   gc.freeze, recvmsg). Prints why not on one line (the library's path shortened: the reason
   has EXEC_REASON_MAX) and exits 1. argv[1] is the library. */
static const char zygote_check[] =
    "import sys\n"
    "try:\n"
    "    import os, gc, ctypes, _socket\n"
    "    gc.freeze, _socket.socket.recvmsg, _socket.socket.sendmsg\n"
    "    os.close(os.pidfd_open(os.getpid()))\n"
    "    if ctypes.PyDLL(sys.argv[1]).ptc_zygote_ready() != 0:\n"
    "        raise OSError('no fork hooks (PyOS_BeforeFork) exported')\n"
    "except BaseException as e:\n"
    "    print(type(e).__name__, str(e).replace(sys.argv[1], 'the library'))\n"
    "    sys.exit(1)\n";

/* Runs zygote_check with cmd's interpreter: true when it can be the zygote, else false with why
   (its first line, or how it ended) in why. Blocks for one interpreter start (the probe's own
   budget at most). */
static bool zygote_python_ok(const struct exec__cmd *cmd, const char *lib, char *why, size_t len)
{
    bool fit = false;
    int p[2] = {-1, -1};
    char *lib_arg = strdup(lib);
    int r = !lib_arg ? ENOMEM : pipe2(p, O_CLOEXEC) < 0 ? errno : 0;
    pid_t pid = -1;
    if (r == 0) {
        char i_[] = "-I", b_[] = "-B", c_[] = "-c", script[sizeof zygote_check];
        memcpy(script, zygote_check, sizeof script);
        char *argv[] = {cmd->python, i_, b_, c_, script, lib_arg, NULL};
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        r = posix_spawn(&pid, cmd->python, &fa, NULL, argv, cmd->env);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
    }
    if (r != 0) {
        snprintf(why, len, "cannot start %s: %s", cmd->python, strerror(r));
    } else {
        char line[EXEC_REASON_MAX];
        size_t got = 0;
        uint64_t deadline = now_ms() + EXEC_PROBE_WAIT_MS;
        bool timed_out = false;
        while (got < sizeof line - 1) {
            ssize_t n = read_by(p[0], line + got, sizeof line - 1 - got, deadline);
            timed_out = n == -ETIMEDOUT;
            if (n <= 0) break;
            got += (size_t)n;
        }
        line[got] = '\0';
        line[strcspn(line, "\n")] = '\0';
        if (timed_out) kill(pid, SIGKILL);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        if (timed_out)
            snprintf(why, len, "its check did not finish");
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            fit = true;
        else if (line[0])
            snprintf(why, len, "%s", line);
        else if (WIFSIGNALED(st))
            snprintf(why, len, "its check ended with signal %d", WTERMSIG(st));
        else
            snprintf(why, len, "its check exited %d", WEXITSTATUS(st));
    }
    if (p[0] >= 0) close(p[0]);
    free(lib_arg);
    return fit;
}

int exec_probe(const exec_options_t *opts, exec_probe_t *out)
{
    if (!opts || !out) return EXEC_EINVAL;
    memset(out, 0, sizeof *out);
    struct exec__cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    int r = exec__cmd_build(opts, &cmd);
    if (r < 0) {
        exec__copy(out->message, sizeof out->message, cmd.error);
        size_t used = strlen(out->message);
        exec__copy(out->message + used, sizeof out->message - used, ". ");
        used = strlen(out->message);
        exec__copy(out->message + used, sizeof out->message - used, exec_error_hint(r));
        for (int i = 0; i < EXEC_LAYER_COUNT; i++)
            snprintf(out->reason[i], EXEC_REASON_MAX, "not probed");
        exec__cmd_free(&cmd);
        out->level = EXEC_SANDBOX_DEGRADED;
        return r;
    }
    char *argv[EXEC_MAX_ARGS + 6];
    size_t n = 0;
    for (size_t i = 0; i < cmd.n_args; i++)
        argv[n++] = cmd.args[i];
    char cpu_o[] = "--cpu-seconds", cpu_v[] = "5", dash[] = "--", code[] = "pass";
    argv[n++] = cpu_o;
    argv[n++] = cpu_v;
    argv[n++] = dash;
    argv[n++] = code;
    argv[n] = NULL;

    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        exec__cmd_free(&cmd);
        return EXEC_EPROBE;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 3);
    pid_t pid;
    r = posix_spawn(&pid, cmd.launcher, &fa, NULL, argv, cmd.env);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    char lib[PATH_MAX];
    bool zygote_lib = exec__zygote_library(cmd.launcher, lib, sizeof lib) == 0;
    if (r != 0) {
        close(p[0]);
        exec__cmd_free(&cmd);
        snprintf(out->message, sizeof out->message, "cannot start the launcher: %s. %s",
                 strerror(r), exec_error_hint(EXEC_ESPAWN));
        return EXEC_ESPAWN;
    }
    char buf[EXEC_REPORT_LINE], error_line[400] = "";
    size_t len = 0;
    uint64_t deadline = now_ms() + EXEC_PROBE_WAIT_MS;
    bool timed_out = false;
    for (;;) {
        ssize_t got = read_by(p[0], buf + len, sizeof buf - 1 - len, deadline);
        timed_out = got == -ETIMEDOUT;
        if (got <= 0) break;
        len += (size_t)got;
        char *nl;
        while ((nl = memchr(buf, '\n', len))) {
            *nl = '\0';
            handle_line(out, buf, error_line, sizeof error_line);
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len);
        }
        if (len == sizeof buf - 1) len = 0; /* an absurd line: drop it */
    }
    close(p[0]);
    if (timed_out) kill(pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) snprintf(error_line, sizeof error_line, "the probe run did not finish");
    for (int i = 0; i < EXEC_LAYER_COUNT; i++)
        if (out->state[i] == EXEC_LAYER_UNKNOWN && !out->reason[i][0])
            snprintf(out->reason[i], EXEC_REASON_MAX, "not reached (setup stopped earlier)");
    judge(out, error_line);
    unsigned warm = opts->warm_sandboxes ? opts->warm_sandboxes : EXEC_DEFAULT_WARM;
    out->warm_start =
        opts->keep_warm && !opts->unsafe_no_sandbox && out->mandatory_ok && out->python_ok;
    if (out->warm_start)
        snprintf(out->warm_reason, EXEC_REASON_MAX,
                 "%u sandbox(es) kept set up ahead, interpreter started and waiting for the code "
                 "(runs with a bridge too)",
                 warm);
    else
        snprintf(out->warm_reason, EXEC_REASON_MAX, "%s",
                 opts->unsafe_no_sandbox ? "no sandbox (--unsafe-no-sandbox)"
                 : !opts->keep_warm      ? "turned off (keep_warm)"
                                         : "runs are refused (see above)");
    char unfit[EXEC_REASON_MAX] = "";
    out->zygote = opts->zygote && out->warm_start &&
                  out->state[EXEC_LAYER_USER_NS] == EXEC_LAYER_ACTIVE && zygote_lib &&
                  zygote_python_ok(&cmd, lib, unfit, sizeof unfit);
    exec__cmd_free(&cmd);
    if (unfit[0])
        snprintf(out->zygote_reason, EXEC_REASON_MAX,
                 "interpreter unfit, the launcher starts each sandbox: %.*s", EXEC_REASON_MAX / 2,
                 unfit);
    else
        snprintf(out->zygote_reason, EXEC_REASON_MAX, "%s",
                 out->zygote ? "sandboxes forked from a pre-started interpreter (" EXEC_ZYGOTE_ENV
                               "=0 turns it off)"
                 : !opts->zygote ? "off (" EXEC_ZYGOTE_ENV "=0 in the environment): the launcher "
                                   "starts each sandbox"
                 : !out->warm_start ? "needs warm start: the launcher starts each sandbox"
                 : out->state[EXEC_LAYER_USER_NS] != EXEC_LAYER_ACTIVE
                     ? "needs user namespaces: the launcher starts each sandbox"
                     : EXEC_ZYGOTE_LIBRARY " not found next to the launcher: the launcher starts "
                                           "each sandbox");
    return 0;
}

size_t exec_probe_report(const exec_probe_t *p, char *buf, size_t len)
{
    size_t need = 0;
    char line[EXEC_REASON_MAX + 64];
#define EMIT(...)                                                                                  \
    do {                                                                                           \
        int n_ = snprintf(line, sizeof line, __VA_ARGS__);                                         \
        if (n_ > 0) {                                                                              \
            if (buf && need < len) snprintf(buf + need, len - need, "%s", line);                   \
            need += (size_t)n_;                                                                    \
        }                                                                                          \
    } while (0)
    if (buf && len) buf[0] = '\0';
    if (!p) return 0;
    EMIT("sandbox layers:\n");
    for (int i = 0; i < EXEC_LAYER_COUNT; i++) {
        const char *st = p->state[i] == EXEC_LAYER_ACTIVE        ? "active"
                         : p->state[i] == EXEC_LAYER_UNAVAILABLE ? "unavailable"
                         : p->state[i] == EXEC_LAYER_DISABLED    ? "disabled(test)"
                                                                 : "unknown";
        EMIT("  %-14s %-12s %s\n", exec_layer_name((exec_layer_id_t)i), st, p->reason[i]);
    }
    EMIT("mandatory layers (process tree, rlimits, no_new_privs, seccomp, filesystem): %s\n",
         p->mandatory_ok ? "present" : "MISSING");
    EMIT("interpreter inside the sandbox: %s\n", p->python_ok ? "runs" : "FAILED");
    EMIT("sandbox level: %s\n", exec_sandbox_level_name(p->level));
    EMIT("warm start: %s: %s\n", p->warm_start ? "active" : "inactive", p->warm_reason);
    EMIT("zygote: %s: %s\n", p->zygote ? "active" : "inactive", p->zygote_reason);
    if (p->message[0]) EMIT("%s\n", p->message);
#undef EMIT
    return need;
}
