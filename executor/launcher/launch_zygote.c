/*
 * The zygote's entry into the launcher (docs/sandbox.md, "A fork server (zygote)").
 *
 * The zygote is the sandbox's interpreter itself, started once by the pool and pre-imported,
 * running a small fork server (executor/zygote.c holds its Python source). For each sandbox it
 * forks (os.fork, so Python's own at-fork handlers run), and the child calls
 * ptc_zygote_launch() from this library through ctypes with the launcher's command line: the
 * very program ptc-sandbox-launch runs (the same parse, namespaces, id maps, cgroup, init, view,
 * credentials, rlimits, no_new_privs, Landlock, seccomp, in the same order). Where init's child
 * would exec the interpreter, it returns here instead, and from here to the zygote's Python,
 * which reads the run's code from its channel as the exec'd bootstrap does.
 *
 * Built as a shared library without the sanitizers: it is loaded into an uninstrumented
 * interpreter.
 */
#include "launch.h"

#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Returns the launcher's exit status in the launcher's process (the zygote's child exits with
   it; 125 at once when the zygote is already gone), and 1 in the interpreter's process, inside its
   sandbox: fds 0-3 as the exec'd interpreter would have them and nothing else open, the signal
   dispositions the zygote had, the sandbox's environment in environ (Python's os.environ still
   holds the zygote's: the caller copies it over). argv is modified (the launcher parses in place).
 */
__attribute__((visibility("default"))) int ptc_zygote_launch(int argc, char **argv, pid_t zygote);

int ptc_zygote_launch(int argc, char **argv, pid_t zygote)
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
    return launch_main(argc, argv, &resume);
}
