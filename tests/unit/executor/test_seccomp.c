/* executor: the seccomp policy (executor/launcher/seccomp_policy.c), checked the way Firecracker
   validates its filters: the real filters are loaded into a forked child and every syscall
   number is probed.

   "Reached the kernel" is observed without running anything: the child stacks a third filter
   that answers SECCOMP_RET_USER_NOTIF for calls whose sixth argument is a magic value. The kernel
   takes the strictest answer of all filters and ERRNO outranks USER_NOTIF, so a probe that the
   policy refuses returns the policy's errno, and one that the policy allows becomes a
   notification, which this process (the supervisor) answers with a marker errno. So reboot,
   kexec_load, exit and fork are probed as safely as getpid, and nothing is skipped. The real
   filters never look at the sixth argument. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "seccomp_policy.h"

#define MAGIC      0x5ec0ffee7e57ab1eull /* the probe's sixth argument */
#define REACHED    EHWPOISON             /* the supervisor's answer: the policy let it through */
#define SWEEP_LAST 470                   /* past the highest x86_64 number of Linux 6.x */
#define X32_BIT    0x40000000l
#define GUARD_S    60 /* hang guard for a probing child, not a timed assertion */
#define MSG_MAX    65536

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif

/* --- the probing child and its supervisor ------------------------------------------------- */

typedef void (*probe_fn)(int out, bool memfd_denied);

static void say(int out, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
    if (n > 0 && write(out, line, (size_t)n) < 0) _exit(120);
}

/* syscall(nr, args..., MAGIC): 0 when it reached the kernel, else the errno it got. Not through
   libc's syscall(): the kernel shows the filters all six argument registers whatever the call,
   so a MAGIC left in r9 would turn later calls of libc and of the sanitizers into probes. The
   argument registers are cleared after the call. */
static int probe(long nr, const unsigned long a[5])
{
    long ret = nr;
    // cppcheck-suppress constStatement ; a register variable bound by asm, used by the asm below
    register unsigned long r10 __asm__("r10") = a[3];
    // cppcheck-suppress constStatement ; the same
    register unsigned long r8 __asm__("r8") = a[4];
    register unsigned long r9 __asm__("r9") = (unsigned long)MAGIC;
    __asm__ volatile("syscall\n\t"
                     "xor %%r8d, %%r8d\n\t"
                     "xor %%r9d, %%r9d\n\t"
                     "xor %%r10d, %%r10d"
                     : "+a"(ret), "+r"(r10), "+r"(r8), "+r"(r9)
                     : "D"(a[0]), "S"(a[1]), "d"(a[2])
                     : "rcx", "r11", "memory");
    if (ret >= 0 || ret < -4095) return -1; /* the supervisor never answers success */
    return -ret == REACHED ? 0 : (int)-ret;
}

static int load_notify_filter(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[5])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)MAGIC, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[5]) + 4),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(MAGIC >> 32), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                        &prog);
}

static void send_fd(int sock, int fd)
{
    char data = 'L';
    struct iovec iov = {.iov_base = &data, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(sock, &mh, 0) != 1) _exit(121);
}

static int recv_fd(int sock)
{
    char data;
    struct iovec iov = {.iov_base = &data, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != 1) return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

typedef struct {
    char msg[MSG_MAX];
    size_t len;
    int status;
    unsigned notifications;
} outcome_t;

/* Forks a child that loads the notify filter (when notify), then the policy, then runs fn,
   which writes its findings to `out`. The parent answers notifications and collects the text. */
static void run_child(probe_fn fn, bool memfd_denied, bool notify, outcome_t *o)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        /* the child's signals end it: cmocka's handlers would jump back into the test runner */
        static const int sigs[] = {SIGILL, SIGSEGV, SIGBUS, SIGSYS, SIGFPE, SIGABRT};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        alarm(GUARD_S);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) _exit(122);
        if (notify) {
            int lfd = load_notify_filter();
            if (lfd < 0) {
                say(sv[1], "FAIL notify filter: %s\n", strerror(errno));
                _exit(1);
            }
            send_fd(sv[1], lfd);
            close(lfd);
        }
        char err[512];
        if (launch_seccomp_load(memfd_denied, err, sizeof err) < 0) {
            say(sv[1], "FAIL loading the policy: %s\n", err);
            _exit(1);
        }
        fn(sv[1], memfd_denied);
        _exit(0);
    }
    close(sv[1]);
    memset(o, 0, sizeof *o);
    int lfd = notify ? recv_fd(sv[0]) : -1;
    if (notify && lfd < 0) {
        /* the child failed before handing it over: its message follows */
        o->len = (size_t)read(sv[0], o->msg, sizeof o->msg - 1);
    }
    bool eof = notify && lfd < 0;
    while (!eof) {
        struct pollfd pf[2] = {{.fd = sv[0], .events = POLLIN}, {.fd = lfd, .events = POLLIN}};
        int r = poll(pf, lfd >= 0 ? 2 : 1, GUARD_S * 1000);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (lfd >= 0 && (pf[1].revents & POLLIN)) {
            struct seccomp_notif req;
            memset(&req, 0, sizeof req);
            if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, &req) == 0) {
                struct seccomp_notif_resp resp = {.id = req.id, .error = -REACHED};
                (void)ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
                o->notifications++;
            }
        }
        if (pf[0].revents & (POLLIN | POLLHUP)) {
            ssize_t n = read(sv[0], o->msg + o->len, sizeof o->msg - 1 - o->len);
            if (n <= 0)
                eof = true;
            else
                o->len += (size_t)n;
        }
    }
    o->msg[o->len] = 0;
    if (lfd >= 0) close(lfd);
    close(sv[0]);
    assert_int_equal(waitpid(pid, &o->status, 0), pid);
}

static void expect_clean(const outcome_t *o)
{
    if (strstr(o->msg, "FAIL") || !WIFEXITED(o->status) || WEXITSTATUS(o->status) != 0) {
        print_message("%s", o->msg);
        fail_msg("probing child: status %#x", o->status);
    }
}

static const char *action_name(launch_sc_action_t a)
{
    switch (a) {
    case LAUNCH_SC_ALLOW:
        return "allowed";
    case LAUNCH_SC_ARGS:
        return "argument-checked";
    case LAUNCH_SC_EPERM:
        return "EPERM";
    case LAUNCH_SC_CLONE3:
        return "ENOSYS (clone3)";
    case LAUNCH_SC_DEFAULT:
        return "ENOSYS (default)";
    }
    return "?";
}

/* --- the sweep ---------------------------------------------------------------------------- */

/* The numbers swept: 0..SWEEP_LAST, then some no kernel has yet, up to just below the x32 bit */
static const long beyond[] = {471, 500, 511, 512, 547, 548, 600, 1000, 4096, 65535, X32_BIT - 1};
#define SWEEP_COUNT (SWEEP_LAST + 1 + sizeof beyond / sizeof beyond[0])

static long sweep_nr(size_t i)
{
    return i <= SWEEP_LAST ? (long)i : beyond[i - SWEEP_LAST - 1];
}

/* Calls the kernel lets past seccomp on purpose: uretprobe (335, Linux 6.11) and uprobe (336,
   6.16) serve the kernel's own uprobe trampolines, are not filtered (a filter could not know
   to allow them), and from anywhere else only raise SIGILL or answer ENXIO. */
static bool seccomp_passthrough(long nr)
{
    return nr == 335 || nr == 336;
}

static size_t sweep_from; /* where the next sweeping child starts (set before the fork) */

static void sweep(int out, bool memfd_denied)
{
    static const unsigned long zero[5] = {0};
    for (size_t i = sweep_from; i < SWEEP_COUNT; i++) {
        long nr = sweep_nr(i);
        launch_sc_action_t a = launch_seccomp_action(nr, memfd_denied);
        if (a == LAUNCH_SC_ARGS) continue; /* their rules have their own tests below */
        say(out, "@%zu\n", i);             /* the parent learns where a child died */
        int got = probe(nr, zero);
        int want = a == LAUNCH_SC_ALLOW ? 0 : a == LAUNCH_SC_EPERM ? EPERM : ENOSYS;
        if (got != want && got > 0 && seccomp_passthrough(nr))
            say(out, "KERNEL %ld %d\n", nr, got); /* the parent compares with no filter */
        else if (got != want)
            say(out, "FAIL syscall %ld (%s): %s\n", nr, action_name(a),
                got == 0    ? "reached the kernel"
                : got == -1 ? "ran for real"
                            : strerror(got));
    }
}

/* What syscall nr does with no filter at all: 1000 + the signal it raises, else its errno.
   Only for the pass-through numbers (harmless outside a uprobe trampoline). */
static int unfiltered(long nr)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        signal(SIGILL, SIG_DFL);
        signal(SIGSYS, SIG_DFL);
        int e = syscall(nr, 0, 0, 0, 0, 0, 0) < 0 ? errno : 0;
        if (write(sv[1], &e, sizeof e) < 0) _exit(1);
        _exit(0);
    }
    close(sv[1]);
    int e = 0, st;
    ssize_t n = read(sv[0], &e, sizeof e);
    close(sv[0]);
    assert_int_equal(waitpid(p, &st, 0), p);
    if (WIFSIGNALED(st)) return 1000 + WTERMSIG(st);
    assert_int_equal(n, (ssize_t)sizeof e);
    return e;
}

/* A pass-through number the kernel answered without asking seccomp: the probe got no
   notification (so no filter allowed it), and without any filter it does the same. Reported,
   not failed. */
static unsigned kernel_before_seccomp(const char *msg)
{
    unsigned n = 0;
    for (const char *l = strstr(msg, "KERNEL "); l; l = strstr(l + 1, "KERNEL ")) {
        char *end;
        long nr = strtol(l + 7, &end, 10);
        char *end2;
        int got = (int)strtol(end, &end2, 10);
        if (end == l + 7 || end2 == end || *end2 != '\n') fail_msg("bad line %.40s", l);
        int plain = unfiltered(nr);
        if (plain != got)
            fail_msg("syscall %ld: %s under the policy, %d without a filter", nr, strerror(got),
                     plain);
        print_message("syscall %ld: the kernel answers %s without asking seccomp, as without a "
                      "filter (a uprobe call): not the policy's\n",
                      nr, strerror(got));
        n++;
    }
    return n;
}

static void sweep_test(bool memfd_denied)
{
    unsigned notifications = 0, trapped = 0, children = 0;
    sweep_from = 0;
    while (sweep_from < SWEEP_COUNT) {
        outcome_t o;
        run_child(sweep, memfd_denied, true, &o);
        notifications += o.notifications;
        children++;
        trapped += kernel_before_seccomp(o.msg);
        for (char *l = strstr(o.msg, "FAIL"); l; l = strstr(l + 1, "\nFAIL"))
            print_message("%.*s\n", (int)strcspn(l + (*l == '\n'), "\n"), l + (*l == '\n'));
        if (strstr(o.msg, "FAIL")) fail_msg("the sweep found calls the policy mishandles");
        if (WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0) break;
        /* died at the number in flight: the policy answers every number it refuses with an
           errno, so a signal there is the kernel acting without seccomp, which only a
           pass-through number may show (and must show the same way without any filter) */
        char *at = NULL;
        for (char *l = strstr(o.msg, "@"); l; l = strstr(l + 1, "@"))
            at = l;
        if (!at || !WIFSIGNALED(o.status))
            fail_msg("sweeping child: status %#x, %.300s", o.status, o.msg);
        char *end;
        size_t i = strtoul(at + 1, &end, 10);
        if (end == at + 1 || *end != '\n') fail_msg("bad progress line %.40s", at);
        long nr = sweep_nr(i);
        int sig = WTERMSIG(o.status);
        if (sig == SIGSYS || !seccomp_passthrough(nr) || unfiltered(nr) != 1000 + sig)
            fail_msg("syscall %ld (%s) killed the probe with signal %d", nr,
                     action_name(launch_seccomp_action(nr, memfd_denied)), sig);
        print_message("syscall %ld: the kernel raises signal %d without asking seccomp, as "
                      "without a filter (a uprobe call): skipped\n",
                      nr, sig);
        trapped++;
        sweep_from = i + 1;
    }
    unsigned want[5] = {0};
    for (size_t i = 0; i < SWEEP_COUNT; i++)
        want[launch_seccomp_action(sweep_nr(i), memfd_denied)]++;
    print_message(
        "swept %zu numbers in %u children: %u allowed reached the kernel, %u EPERM, "
        "%u ENOSYS, %u argument-checked (tested below), %u passed through seccomp by the kernel\n",
        SWEEP_COUNT, children, notifications, want[LAUNCH_SC_EPERM],
        want[LAUNCH_SC_DEFAULT] + want[LAUNCH_SC_CLONE3], want[LAUNCH_SC_ARGS], trapped);
    /* every allowed number notified exactly once, nothing else did */
    assert_int_equal(notifications, want[LAUNCH_SC_ALLOW]);
}

static void test_sweep_finds_nothing_reaching_the_kernel_outside_the_allowlist(void **state)
{
    (void)state;
    sweep_test(true);
}

static void test_sweep_with_memfd_allowed(void **state)
{
    (void)state;
    sweep_test(false);
}

/* The table against the claims made about it, so an edit of the table cannot drop one quietly:
   the issue's calls are refused and the everyday ones allowed. (A number listed in both tables
   makes the load fail, which every other test here would show.) */
static void test_table_keeps_its_claims(void **state)
{
    (void)state;
    static const long must_refuse[] = {
        SYS_mount,
        SYS_umount2,
        SYS_unshare,
        SYS_setns,
        SYS_pivot_root,
        SYS_chroot,
        428 /* open_tree */,
        429 /* move_mount */,
        430 /* fsopen */,
        431 /* fsconfig */,
        432 /* fsmount */,
        433 /* fspick */,
        442 /* mount_setattr */,
        457 /* statmount */,
        458 /* listmount */,
        467 /* open_tree_attr */,
        SYS_ptrace,
        SYS_process_vm_readv,
        SYS_bpf,
        425 /* io_uring_setup */,
        SYS_userfaultfd,
        SYS_keyctl,
        SYS_add_key,
        SYS_perf_event_open,
        SYS_kexec_load,
        SYS_init_module,
        SYS_finit_module,
        SYS_reboot,
        SYS_open_by_handle_at,
        SYS_name_to_handle_at,
        SYS_iopl,
        SYS_modify_ldt,
        SYS_seccomp,
    };
    for (size_t i = 0; i < sizeof must_refuse / sizeof must_refuse[0]; i++) {
        launch_sc_action_t a = launch_seccomp_action(must_refuse[i], false);
        if (a != LAUNCH_SC_EPERM) fail_msg("syscall %ld is %s", must_refuse[i], action_name(a));
    }
    static const long must_allow[] = {
        SYS_read,     SYS_write,      SYS_openat,    SYS_close,
        SYS_mmap,     SYS_futex,      SYS_execve,    SYS_wait4,
        SYS_getpid,   SYS_fork,       SYS_sendmsg,   SYS_recvmsg,
        SYS_poll,     SYS_epoll_wait, SYS_prlimit64, SYS_sched_getaffinity,
        SYS_getrandom};
    for (size_t i = 0; i < sizeof must_allow / sizeof must_allow[0]; i++)
        assert_int_equal(launch_seccomp_action(must_allow[i], false), LAUNCH_SC_ALLOW);
    assert_int_equal(launch_seccomp_action(SYS_clone3, false), LAUNCH_SC_CLONE3);
    assert_int_equal(launch_seccomp_action(SYS_memfd_create, true), LAUNCH_SC_EPERM);
    assert_int_equal(launch_seccomp_action(SYS_memfd_create, false), LAUNCH_SC_ALLOW);
    /* a number the policy has never heard of */
    assert_int_equal(launch_seccomp_action(1000, false), LAUNCH_SC_DEFAULT);
}

/* --- the argument rules ------------------------------------------------------------------- */

typedef struct {
    const char *what;
    long nr;
    unsigned long a[5];
    int want; /* 0: reaches the kernel; else the errno */
} arg_case_t;

#define HI (1ul << 32)
static const arg_case_t arg_cases[] = {
    /* clone: fork's and pthread's flags pass; any namespace flag, or anything in the high
       half, is refused */
    {"clone(SIGCHLD)", SYS_clone, {SIGCHLD}, 0},
    {"clone(thread flags)",
     SYS_clone,
     {CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
      CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID},
     0},
    {"clone(CLONE_VM|CLONE_VFORK)", SYS_clone, {CLONE_VM | CLONE_VFORK | SIGCHLD}, 0},
    {"clone(NEWUSER)", SYS_clone, {SIGCHLD | CLONE_NEWUSER}, EPERM},
    {"clone(NEWNS)", SYS_clone, {SIGCHLD | CLONE_NEWNS}, EPERM},
    {"clone(NEWPID)", SYS_clone, {SIGCHLD | CLONE_NEWPID}, EPERM},
    {"clone(NEWNET)", SYS_clone, {SIGCHLD | CLONE_NEWNET}, EPERM},
    {"clone(NEWIPC)", SYS_clone, {SIGCHLD | CLONE_NEWIPC}, EPERM},
    {"clone(NEWUTS)", SYS_clone, {SIGCHLD | CLONE_NEWUTS}, EPERM},
    {"clone(NEWCGROUP)", SYS_clone, {SIGCHLD | CLONE_NEWCGROUP}, EPERM},
    {"clone(SIGCHLD + high bit)", SYS_clone, {SIGCHLD | HI}, EPERM},
    {"clone(SIGCHLD + top bit)", SYS_clone, {SIGCHLD | (1ul << 63)}, EPERM},
    /* socket and socketpair: AF_UNIX, exactly */
    {"socket(AF_UNIX)", SYS_socket, {AF_UNIX, SOCK_STREAM}, 0},
    {"socket(AF_UNIX, DGRAM)", SYS_socket, {AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC}, 0},
    {"socket(AF_UNSPEC)", SYS_socket, {AF_UNSPEC, SOCK_STREAM}, EPERM},
    {"socket(AF_INET)", SYS_socket, {AF_INET, SOCK_STREAM}, EPERM},
    {"socket(AF_INET6)", SYS_socket, {AF_INET6, SOCK_DGRAM}, EPERM},
    {"socket(AF_NETLINK)", SYS_socket, {AF_NETLINK, SOCK_RAW}, EPERM},
    {"socket(AF_PACKET)", SYS_socket, {AF_PACKET, SOCK_RAW}, EPERM},
    {"socket(AF_VSOCK)", SYS_socket, {AF_VSOCK, SOCK_STREAM}, EPERM},
    {"socket(AF_UNIX + high bit)", SYS_socket, {AF_UNIX | HI, SOCK_STREAM}, EPERM},
    {"socketpair(AF_UNIX)", SYS_socketpair, {AF_UNIX, SOCK_STREAM}, 0},
    {"socketpair(AF_INET)", SYS_socketpair, {AF_INET, SOCK_STREAM}, EPERM},
    {"socketpair(AF_VSOCK)", SYS_socketpair, {AF_VSOCK, SOCK_STREAM}, EPERM},
    {"socketpair(AF_UNIX + high bit)", SYS_socketpair, {AF_UNIX | HI, SOCK_STREAM}, EPERM},
    /* ioctl: every command but the refused ones; the kernel reads the command as 32 bits, so a
       sign-extended TIOCSTI is TIOCSTI (refused) and a TCGETS with high bits is TCGETS */
    {"ioctl(TCGETS)", SYS_ioctl, {0, TCGETS}, 0},
    {"ioctl(FIONREAD)", SYS_ioctl, {0, FIONREAD}, 0},
    {"ioctl(TCGETS + high bits)", SYS_ioctl, {0, TCGETS | 0xffffffff00000000ul}, 0},
    {"ioctl(TIOCSTI)", SYS_ioctl, {0, TIOCSTI}, EPERM},
    {"ioctl(TIOCLINUX)", SYS_ioctl, {0, TIOCLINUX}, EPERM},
    {"ioctl(TIOCSTI + high bit)", SYS_ioctl, {0, TIOCSTI | HI}, EPERM},
    {"ioctl(TIOCSTI sign-extended)", SYS_ioctl, {0, TIOCSTI | 0xffffffff00000000ul}, EPERM},
    {"ioctl(fd 7, TIOCSTI)", SYS_ioctl, {7, TIOCSTI}, EPERM},
    /* prctl: a list of options, exactly */
    {"prctl(PR_SET_NAME)", SYS_prctl, {PR_SET_NAME}, 0},
    {"prctl(PR_GET_NAME)", SYS_prctl, {PR_GET_NAME}, 0},
    {"prctl(PR_SET_PDEATHSIG)", SYS_prctl, {PR_SET_PDEATHSIG, SIGKILL}, 0},
    {"prctl(PR_GET_DUMPABLE)", SYS_prctl, {PR_GET_DUMPABLE}, 0},
    {"prctl(PR_SET_NO_NEW_PRIVS)", SYS_prctl, {PR_SET_NO_NEW_PRIVS, 1}, 0},
    {"prctl(PR_CAPBSET_READ)", SYS_prctl, {PR_CAPBSET_READ, 0}, 0},
    {"prctl(PR_SET_VMA)", SYS_prctl, {PR_SET_VMA}, 0},
    {"prctl(0)", SYS_prctl, {0}, EPERM},
    {"prctl(PR_SET_DUMPABLE)", SYS_prctl, {PR_SET_DUMPABLE, 1}, 0},
    {"prctl(PR_SET_SECCOMP)", SYS_prctl, {PR_SET_SECCOMP, 2}, EPERM},
    {"prctl(PR_SET_MM)", SYS_prctl, {PR_SET_MM, 1}, EPERM},
    {"prctl(PR_SET_CHILD_SUBREAPER)", SYS_prctl, {PR_SET_CHILD_SUBREAPER, 1}, EPERM},
    {"prctl(PR_SET_SPECULATION_CTRL)", SYS_prctl, {PR_SET_SPECULATION_CTRL}, EPERM},
    {"prctl(PR_SET_NAME + high bit)", SYS_prctl, {PR_SET_NAME | HI}, EPERM},
    /* personality: PER_LINUX and the query */
    {"personality(PER_LINUX)", SYS_personality, {0}, 0},
    {"personality(query)", SYS_personality, {0xffffffff}, 0},
    {"personality(ADDR_NO_RANDOMIZE)", SYS_personality, {0x0040000}, EPERM},
    {"personality(READ_IMPLIES_EXEC)", SYS_personality, {0x0400000}, EPERM},
    {"personality(PER_LINUX + high bit)", SYS_personality, {HI}, EPERM},
    {"personality(query + high bit)", SYS_personality, {0xffffffff | HI}, EPERM},
};

static void arg_probe(int out, bool memfd_denied)
{
    (void)memfd_denied;
    unsigned reached = 0, refused = 0;
    for (size_t i = 0; i < sizeof arg_cases / sizeof arg_cases[0]; i++) {
        const arg_case_t *c = &arg_cases[i];
        int got = probe(c->nr, c->a);
        if (got != c->want)
            say(out, "FAIL %s: want %s, got %s\n", c->what,
                c->want ? strerror(c->want) : "reached the kernel",
                got == 0    ? "reached the kernel"
                : got == -1 ? "ran for real"
                            : strerror(got));
        if (c->want == 0)
            reached++;
        else
            refused++;
    }
    say(out, "argument rules: %u calls allowed, %u refused\n", reached, refused);
}

static void test_argument_rules_allow_their_values_and_refuse_every_change(void **state)
{
    (void)state;
    outcome_t o;
    run_child(arg_probe, true, true, &o);
    expect_clean(&o);
    print_message("%s", o.msg);
    unsigned want = 0;
    for (size_t i = 0; i < sizeof arg_cases / sizeof arg_cases[0]; i++)
        want += arg_cases[i].want == 0;
    assert_int_equal(o.notifications, want);
}

/* The argument checks, generically: libseccomp compares each argument once per rule, so the
   generator writes "none of these values" as a union of masked comparisons over a prefix tree.
   Every rule's values (SIGCHLD for the bit mask) with each one of the 64 bits flipped must get
   what the check says, computed here from the table, not from the generated program. */
static bool check_passes(const launch_sc_argrule_t *r, uint64_t x)
{
    bool in = false;
    for (size_t i = 0; i < r->n; i++)
        in = in || (r->check == LAUNCH_SC_LOW_NOT ? (uint32_t)x == r->vals[i] : x == r->vals[i]);
    switch (r->check) {
    case LAUNCH_SC_ONE_OF:
        return in;
    case LAUNCH_SC_NO_BITS:
        return (x >> 32) == 0 && (x & r->vals[0]) == 0;
    case LAUNCH_SC_LOW_NOT:
        return !in;
    }
    return false;
}

/* The argument values probed for rule r into vals (at most max): each base value (the rule's
   values, or SIGCHLD for a bit mask) and it with each one of its 64 bits flipped. */
static unsigned bit_flip_values(const launch_sc_argrule_t *r, uint64_t *vals, unsigned max)
{
    unsigned n = 0;
    size_t nbase = r->check == LAUNCH_SC_NO_BITS ? 1 : r->n;
    for (size_t i = 0; i < nbase; i++) {
        uint64_t base = r->check == LAUNCH_SC_NO_BITS ? SIGCHLD : r->vals[i];
        if (n < max) vals[n++] = base;
        for (unsigned b = 0; b < 64; b++)
            if (n < max) vals[n++] = base ^ (1ull << b);
    }
    return n;
}

#define FLIPS_MAX 4096
static void bit_flips(int out, bool memfd_denied)
{
    (void)memfd_denied;
    size_t nrules;
    const launch_sc_argrule_t *rules = launch_seccomp_argrules(&nrules);
    uint64_t *vals = calloc(FLIPS_MAX, sizeof *vals);
    if (!vals) {
        say(out, "FAIL out of memory\n");
        return;
    }
    unsigned probes = 0, bad = 0;
    for (size_t i = 0; i < nrules; i++) {
        unsigned n = bit_flip_values(&rules[i], vals, FLIPS_MAX);
        for (unsigned j = 0; j < n; j++) {
            unsigned long a[5] = {0, 0, 0, 0, 0};
            a[rules[i].arg] = vals[j];
            if (rules[i].nr == SYS_clone) a[1] = 0; /* no new stack: fork-like, never runs */
            int want = check_passes(&rules[i], vals[j]) ? 0 : EPERM;
            int got = probe(rules[i].nr, a);
            probes++;
            if (got != want && bad++ < 20)
                say(out, "FAIL syscall %d arg %u = %#llx: want %s, got %s\n", rules[i].nr,
                    rules[i].arg, (unsigned long long)vals[j],
                    want ? strerror(want) : "reached the kernel",
                    got == 0    ? "reached the kernel"
                    : got == -1 ? "ran for real"
                                : strerror(got));
        }
    }
    free(vals);
    say(out, "bit flips: %u probes, %u wrong\n", probes, bad);
}

static void test_argument_rules_hold_for_every_bit(void **state)
{
    (void)state;
    size_t nrules;
    const launch_sc_argrule_t *rules = launch_seccomp_argrules(&nrules);
    uint64_t *vals = calloc(FLIPS_MAX, sizeof *vals);
    assert_non_null(vals);
    unsigned want = 0, total = 0;
    for (size_t i = 0; i < nrules; i++) {
        unsigned n = bit_flip_values(&rules[i], vals, FLIPS_MAX);
        total += n;
        for (unsigned j = 0; j < n; j++)
            want += check_passes(&rules[i], vals[j]);
    }
    free(vals);
    assert_true(total < FLIPS_MAX);
    outcome_t o;
    run_child(bit_flips, true, true, &o);
    expect_clean(&o);
    print_message("%s", o.msg);
    assert_int_equal(o.notifications, want);
}

/* The allowed forms of the checked calls really run under the policy (no notify filter). */
static void real_calls(int out, bool memfd_denied)
{
    (void)memfd_denied;
    int fd = (int)syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        say(out, "FAIL socket(AF_UNIX): %s\n", strerror(errno));
    else
        close(fd);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        say(out, "FAIL socketpair(AF_UNIX): %s\n", strerror(errno));
    else {
        close(sv[0]);
        close(sv[1]);
    }
    pid_t p = fork(); /* glibc's fork: clone without namespace flags */
    if (p == 0) _exit(7);
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
        say(out, "FAIL fork: %s\n", p < 0 ? strerror(errno) : "child did not exit 7");
    if (prctl(PR_SET_NAME, "probe", 0, 0, 0) < 0)
        say(out, "FAIL prctl(PR_SET_NAME): %s\n", strerror(errno));
    if (syscall(SYS_personality, 0xffffffffu) < 0)
        say(out, "FAIL personality(query): %s\n", strerror(errno));
    struct termios t;
    if (ioctl(out, TCGETS, &t) == 0 || errno != ENOTTY)
        say(out, "FAIL ioctl(TCGETS) on a socket: want ENOTTY from the kernel, got %s\n",
            strerror(errno));
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m, 4096, PROT_READ | PROT_EXEC) < 0)
        say(out, "FAIL mmap/mprotect(PROT_EXEC): %s\n", strerror(errno));
    /* and the refused ones are refused for real too */
    if (syscall(SYS_clone3, NULL, 0) >= 0 || errno != ENOSYS)
        say(out, "FAIL clone3: want ENOSYS, got %s\n", strerror(errno));
    if (syscall(SYS_socket, AF_INET, SOCK_STREAM, 0) >= 0 || errno != EPERM)
        say(out, "FAIL socket(AF_INET): want EPERM, got %s\n", strerror(errno));
}

static void test_allowed_forms_really_run(void **state)
{
    (void)state;
    outcome_t o;
    run_child(real_calls, true, false, &o);
    expect_clean(&o);
}

/* --- architectures ------------------------------------------------------------------------ */

static void x32_getpid(int out, bool memfd_denied)
{
    (void)memfd_denied;
    syscall(X32_BIT | SYS_getpid);
    say(out, "FAIL an x32 getpid returned\n");
}

static void x32_top(int out, bool memfd_denied)
{
    (void)memfd_denied;
    syscall(0xfffffffel); /* far above the x32 bit */
    say(out, "FAIL syscall 0xfffffffe returned\n");
}

static void test_x32_numbers_kill_the_process(void **state)
{
    (void)state;
    probe_fn fns[] = {x32_getpid, x32_top};
    for (size_t i = 0; i < 2; i++) {
        outcome_t o;
        run_child(fns[i], true, false, &o);
        if (!WIFSIGNALED(o.status) || WTERMSIG(o.status) != SIGSYS)
            fail_msg("x32 probe %zu: status %#x, %s", i, o.status, o.msg);
    }
}

/* getpid through int 0x80 (the ia32 entry) from an executable page */
static void ia32_getpid(int out, bool memfd_denied)
{
    (void)memfd_denied;
    static const unsigned char code[] = {0xb8, 0x14, 0, 0, 0, 0xcd, 0x80, 0xc3};
    void *m =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        say(out, "FAIL mmap: %s\n", strerror(errno));
        return;
    }
    memcpy(m, code, sizeof code);
    int (*fn)(void);
    memcpy(&fn, &m, sizeof fn);
    fn();
    say(out, "ia32 returned\n");
}

static void test_ia32_entry_kills_the_process(void **state)
{
    (void)state;
    /* first without the policy: a kernel without ia32 emulation raises SIGSEGV itself */
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        ia32_getpid(sv[1], false);
        _exit(0);
    }
    close(sv[1]);
    close(sv[0]);
    int st;
    assert_int_equal(waitpid(p, &st, 0), p);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) {
        print_message("ia32 emulation is off on this kernel (int 0x80 -> SIGSEGV): skipped\n");
        skip();
    }
    outcome_t o;
    run_child(ia32_getpid, true, false, &o);
    if (!WIFSIGNALED(o.status) || WTERMSIG(o.status) != SIGSYS)
        fail_msg("int 0x80 under the policy: status %#x, %s", o.status, o.msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_keeps_its_claims),
        cmocka_unit_test(test_sweep_finds_nothing_reaching_the_kernel_outside_the_allowlist),
        cmocka_unit_test(test_sweep_with_memfd_allowed),
        cmocka_unit_test(test_argument_rules_allow_their_values_and_refuse_every_change),
        cmocka_unit_test(test_argument_rules_hold_for_every_bit),
        cmocka_unit_test(test_allowed_forms_really_run),
        cmocka_unit_test(test_x32_numbers_kill_the_process),
        cmocka_unit_test(test_ia32_entry_kills_the_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
