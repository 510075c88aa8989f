/*
 * The zygote's entry into the launcher (docs/sandbox.md, "A fork server (zygote)").
 *
 * The zygote is the sandbox's interpreter itself, started once by the pool and pre-imported,
 * running a small fork server (executor/zygote.c holds its Python source). For each sandbox it
 * calls ptc_zygote_fork() from this library through ctypes (a PyDLL: the GIL is held) with the
 * launcher's descriptors and command line. That forks here, in C, with Python's own fork hooks
 * around it (PyOS_BeforeFork and PyOS_AfterFork_Parent, as os.fork runs them), and the child
 * runs the very program ptc-sandbox-launch runs (the same parse, namespaces, id maps, cgroup,
 * init, view, credentials, rlimits, no_new_privs, Landlock, seccomp, in the same order) without
 * running any Python: the launcher's and init's processes never touch the interpreter's objects,
 * so they copy none of its pages. Where init's child would exec the interpreter, it comes back
 * here instead, runs PyOS_AfterFork_Child (what os.fork's child runs) and returns to the
 * zygote's Python, which reads the run's code from its channel as the exec'd bootstrap does.
 *
 * Built as a shared library without the sanitizers: it is loaded into an uninstrumented
 * interpreter.
 */
#include "launch.h"

#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* The launcher's program in the zygote's child. Returns the launcher's exit status in the
   launcher's process (125 at once when the zygote is already gone), and 1 in the interpreter's
   process, inside its sandbox: fds 0-3 as the exec'd interpreter would have them and nothing
   else open, the signal dispositions the zygote had, the sandbox's environment in environ
   (Python's os.environ still holds the zygote's: the caller copies it over). argv is modified
   (the launcher parses in place). */
static int zygote_launch(int argc, char **argv, pid_t zygote, int netns_sink)
{
    /* the launcher sets its PDEATHSIG too, but a zygote that died since the fork would not send
       it: check once it is set (zygote: the parent's pid before the fork) */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != zygote) return 125;
    /* the launcher expects default dispositions (an exec'd one has them: the pool's spawn
       resets them), the interpreter the zygote's (SIGPIPE and SIGXFSZ ignored, Python's SIGINT
       handler): saved here, in the frame the interpreter's process comes back to */
    struct sigaction saved[NSIG];
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int s = 1; s < NSIG; s++) {
        if (sigaction(s, NULL, &saved[s]) < 0) {
            saved[s].sa_handler = SIG_DFL; /* SIGKILL, SIGSTOP, the reserved ones */
            continue;
        }
        if (s != SIGKILL && s != SIGSTOP) sigaction(s, &dfl, NULL);
    }
    jmp_buf resume;
    if (setjmp(resume) != 0) {
        for (int s = 1; s < NSIG; s++)
            if (s != SIGKILL && s != SIGSTOP) sigaction(s, &saved[s], NULL);
        return 1;
    }
    return launch_main(argc, argv, &resume, netns_sink);
}

/* Forks one sandbox: fds are the launcher's 0-3 (stdin socket, stdout, stderr, status pipe)
   and the zygote's net namespace sink (or -1; the launcher hands it the run's namespace, which
   the zygote releases in batches), argv its command line (argc strings). Returns the launcher's pid
   in the zygote, 0 in the interpreter's process of the sandbox (see zygote_launch), -errno when the
   fork failed or the interpreter has no fork hooks. The launcher's process ends in here with the
   launcher's status. Called with SIGCHLD blocked (the zygote's reaper waits for the pidfd). */
__attribute__((visibility("default"))) int ptc_zygote_fork(const int *fds, int argc, char **argv);

/* 0 when the interpreter that loaded us has the fork hooks ptc_zygote_fork needs, else -ENOSYS:
   the probe asks before it lets the zygote be used (executor/probe.c) */
__attribute__((visibility("default"))) int ptc_zygote_ready(void);

typedef void (*py_fork_hook_t)(void);

struct fork_hooks {
    py_fork_hook_t before, parent, child;
};

/* the interpreter that loaded us exports them (extension modules link against them); true when
   all three are there */
static bool find_hooks(struct fork_hooks *h)
{
    h->before = (py_fork_hook_t)dlsym(RTLD_DEFAULT, "PyOS_BeforeFork");
    h->parent = (py_fork_hook_t)dlsym(RTLD_DEFAULT, "PyOS_AfterFork_Parent");
    h->child = (py_fork_hook_t)dlsym(RTLD_DEFAULT, "PyOS_AfterFork_Child");
    return h->before && h->parent && h->child;
}

int ptc_zygote_ready(void)
{
    struct fork_hooks h;
    return find_hooks(&h) ? 0 : -ENOSYS;
}

int ptc_zygote_fork(const int *fds, int argc, char **argv)
{
    struct fork_hooks h;
    int ret;
    if (!find_hooks(&h)) {
        ret = -ENOSYS;
    } else {
        pid_t zygote = getpid();
        h.before();
        pid_t pid = fork();
        if (pid != 0) {
            int e = errno;
            h.parent();
            ret = pid < 0 ? -e : (int)pid;
        } else {
            sigset_t chld;
            sigemptyset(&chld);
            sigaddset(&chld, SIGCHLD);
            sigprocmask(SIG_UNBLOCK, &chld, NULL);
            /* the zygote's descriptors are all past 3 but 0-3 themselves (its control socket,
               stdout, stderr): dup2 in order cannot overwrite one still to be moved */
            for (int i = 0; i < 4; i++)
                if (fds[i] != i && dup2(fds[i], i) < 0) _exit(125);
            /* the sink is past 3 too; 0-3 have their copies, so fd 4 may be overwritten */
            int sink = -1;
            if (fds[4] >= 0 && (fds[4] == LAUNCH_NETNS_FD || dup2(fds[4], LAUNCH_NETNS_FD) >= 0))
                sink = LAUNCH_NETNS_FD;
            int r = zygote_launch(argc, argv, zygote, sink);
            if (r != 1) _exit(r);
            /* the interpreter's process: Python's own state after a fork, as os.fork's child */
            h.child();
            ret = 0;
        }
    }
    return ret;
}
