/*
 * The seccomp policy: default-deny. A syscall the tables below do not list gets ENOSYS, the
 * answer of a kernel that does not have it, so a call added to Linux after the tables were
 * written never reaches the kernel and the library that tried it takes its fallback (glibc does
 * for clone3, fchmodat2, ...). Calls known to be dangerous get EPERM instead, the answer
 * programs expect from a sandbox (and the escape suite checks).
 *
 * One filter, generated here as BPF and loaded by init after everything else (inherited by the
 * interpreter): foreign architectures and x32 numbers are killed; clone, socket, socketpair,
 * ioctl, prctl and personality have argument blocks, comparing all 64 bits where the kernel
 * reads the full register; every other number goes through a binary search over runs of
 * numbers with one answer. Not libseccomp: compiling ~350 rules cost it about 2 ms per run
 * start (its binary-tree option included), this takes microseconds; and its rule model lets an
 * unconditional rule beat a conditional one on the same syscall and allows one comparison per
 * argument per rule, neither of which a block per checked syscall has. docs/sandbox.md explains
 * each group and how to extend the tables.
 */
#include "seccomp_policy.h"

#include "launch.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#define X32_SYSCALL_BIT 0x40000000u

/* x86_64 numbers newer than the build host's headers (Linux 6.1 on Debian 12) */
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_futex_wake
#define __NR_futex_wake 454
#endif
#ifndef __NR_futex_wait
#define __NR_futex_wait 455
#endif
#ifndef __NR_futex_requeue
#define __NR_futex_requeue 456
#endif
#ifndef __NR_statmount
#define __NR_statmount 457
#endif
#ifndef __NR_listmount
#define __NR_listmount 458
#endif
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif

_Static_assert(LAUNCH_SC_CLONE_NS_MASK ==
                   (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                    CLONE_NEWUTS | CLONE_NEWCGROUP),
               "the clone mask is every namespace flag clone() takes");

/* Allowed whatever the arguments: what CPython, its standard library, numpy/pandas/matplotlib
   (OpenBLAS threads, shared memory, font caches) and init itself (fork, reap, pass descriptors,
   the session's channel) call. Grouped as docs/sandbox.md lists them. */
/* clang-format off */
static const int allowed[] = {
    /* files and descriptors; paths are already confined by the view and Landlock */
    __NR_read, __NR_write, __NR_open, __NR_openat, __NR_openat2, __NR_creat, __NR_close,
    __NR_close_range, __NR_stat, __NR_fstat, __NR_lstat, __NR_newfstatat, __NR_statx, __NR_statfs,
    __NR_fstatfs, __NR_lseek, __NR_pread64, __NR_pwrite64, __NR_readv, __NR_writev, __NR_preadv,
    __NR_pwritev, __NR_preadv2, __NR_pwritev2, __NR_access, __NR_faccessat, __NR_faccessat2,
    __NR_dup, __NR_dup2, __NR_dup3, __NR_fcntl, __NR_flock, __NR_fsync, __NR_fdatasync, __NR_syncfs,
    __NR_sync_file_range, __NR_truncate, __NR_ftruncate, __NR_fallocate, __NR_fadvise64,
    __NR_readahead, __NR_getdents, __NR_getdents64, __NR_getcwd, __NR_chdir, __NR_fchdir,
    __NR_rename, __NR_renameat, __NR_renameat2, __NR_mkdir, __NR_mkdirat, __NR_rmdir, __NR_link,
    __NR_linkat, __NR_unlink, __NR_unlinkat, __NR_symlink, __NR_symlinkat, __NR_readlink,
    __NR_readlinkat, __NR_chmod, __NR_fchmod, __NR_fchmodat, __NR_fchmodat2, __NR_chown,
    __NR_fchown, __NR_lchown, __NR_fchownat, __NR_umask, __NR_utime, __NR_utimes, __NR_utimensat,
    __NR_futimesat, __NR_mknod, __NR_mknodat, __NR_getxattr, __NR_lgetxattr, __NR_fgetxattr,
    __NR_listxattr, __NR_llistxattr, __NR_flistxattr, __NR_setxattr, __NR_lsetxattr, __NR_fsetxattr,
    __NR_removexattr, __NR_lremovexattr, __NR_fremovexattr, __NR_sendfile, __NR_copy_file_range,
    __NR_splice, __NR_tee, __NR_inotify_init, __NR_inotify_init1, __NR_inotify_add_watch,
    __NR_inotify_rm_watch,
    /* memory (mprotect unchecked: ctypes callbacks and JITs need PROT_EXEC pages) */
    __NR_brk, __NR_mmap, __NR_munmap, __NR_mremap, __NR_mprotect, __NR_madvise, __NR_msync,
    __NR_mincore, __NR_mlock, __NR_mlock2, __NR_munlock, __NR_mlockall, __NR_munlockall,
    __NR_get_mempolicy, __NR_membarrier, __NR_pkey_mprotect, __NR_pkey_alloc, __NR_pkey_free,
    /* processes and threads (clone's flags are checked by the argument filter) */
    __NR_clone, __NR_fork, __NR_vfork, __NR_execve, __NR_execveat, __NR_exit, __NR_exit_group,
    __NR_wait4, __NR_waitid, __NR_kill, __NR_tkill, __NR_tgkill, __NR_pidfd_open,
    __NR_pidfd_send_signal, __NR_getpid, __NR_getppid, __NR_gettid, __NR_getpgrp, __NR_getpgid,
    __NR_setpgid, __NR_getsid, __NR_setsid, __NR_set_tid_address, __NR_set_robust_list,
    __NR_get_robust_list, __NR_rseq, __NR_arch_prctl, __NR_prctl, __NR_personality, __NR_futex,
    __NR_futex_waitv, __NR_futex_wake, __NR_futex_wait, __NR_futex_requeue, __NR_sched_yield,
    __NR_sched_getaffinity, __NR_sched_setaffinity, __NR_sched_getparam, __NR_sched_setparam,
    __NR_sched_getscheduler, __NR_sched_setscheduler, __NR_sched_get_priority_max,
    __NR_sched_get_priority_min, __NR_sched_rr_get_interval, __NR_sched_getattr, __NR_sched_setattr,
    __NR_getpriority, __NR_setpriority, __NR_getcpu, __NR_restart_syscall,
    /* identity: reading it, and changes the kernel refuses without capabilities */
    __NR_getuid, __NR_geteuid, __NR_getgid, __NR_getegid, __NR_getresuid, __NR_getresgid,
    __NR_getgroups, __NR_setuid, __NR_setgid, __NR_setreuid, __NR_setregid, __NR_setresuid,
    __NR_setresgid, __NR_setgroups, __NR_setfsuid, __NR_setfsgid, __NR_capget, __NR_capset,
    /* limits, time, system information */
    __NR_getrlimit, __NR_setrlimit, __NR_prlimit64, __NR_getrusage, __NR_times, __NR_sysinfo,
    __NR_uname, __NR_time, __NR_gettimeofday, __NR_clock_gettime, __NR_clock_getres,
    __NR_clock_nanosleep, __NR_nanosleep, __NR_alarm, __NR_getitimer, __NR_setitimer,
    __NR_timer_create, __NR_timer_settime, __NR_timer_gettime, __NR_timer_getoverrun,
    __NR_timer_delete, __NR_timerfd_create, __NR_timerfd_settime, __NR_timerfd_gettime,
    __NR_getrandom,
    /* signals */
    __NR_rt_sigaction, __NR_rt_sigprocmask, __NR_rt_sigreturn, __NR_rt_sigpending,
    __NR_rt_sigtimedwait, __NR_rt_sigqueueinfo, __NR_rt_tgsigqueueinfo, __NR_rt_sigsuspend,
    __NR_sigaltstack, __NR_pause, __NR_signalfd, __NR_signalfd4,
    /* waiting and events */
    __NR_pipe, __NR_pipe2, __NR_poll, __NR_ppoll, __NR_select, __NR_pselect6, __NR_epoll_create,
    __NR_epoll_create1, __NR_epoll_ctl, __NR_epoll_wait, __NR_epoll_pwait, __NR_epoll_pwait2,
    __NR_eventfd, __NR_eventfd2,
    /* sockets (socket and socketpair: AF_UNIX only, checked by the argument filter; the network
       namespace is empty) */
    __NR_socket, __NR_socketpair, __NR_connect, __NR_bind, __NR_listen, __NR_accept, __NR_accept4,
    __NR_sendto, __NR_recvfrom, __NR_sendmsg, __NR_recvmsg, __NR_sendmmsg, __NR_recvmmsg,
    __NR_shutdown, __NR_getsockname, __NR_getpeername, __NR_setsockopt, __NR_getsockopt,
    /* System V and POSIX IPC: private to the run's IPC namespace (multiprocessing, OpenMP) */
    __NR_shmget, __NR_shmat, __NR_shmdt, __NR_shmctl, __NR_semget, __NR_semop, __NR_semtimedop,
    __NR_semctl, __NR_msgget, __NR_msgsnd, __NR_msgrcv, __NR_msgctl, __NR_mq_open, __NR_mq_unlink,
    __NR_mq_timedsend, __NR_mq_timedreceive, __NR_mq_notify, __NR_mq_getsetattr,
    /* ioctl: its command is checked by the argument filter */
    __NR_ioctl,
};
/* clang-format on */
/* Known and refused with EPERM. Everything else unlisted gets ENOSYS; these are named so the
   refusal is the sandbox's usual answer and so the sweep in the test proves each one. */
/* clang-format off */
static const int refused[] = {
    /* namespaces and mounts, the new mount API included: a new user namespace brings back every
       capability inside it */
    __NR_unshare, __NR_setns, __NR_mount, __NR_umount2, __NR_pivot_root, __NR_chroot,
    __NR_move_mount, __NR_open_tree, __NR_open_tree_attr, __NR_fsopen, __NR_fsconfig, __NR_fsmount,
    __NR_fspick, __NR_mount_setattr, __NR_statmount, __NR_listmount,
    /* other processes */
    __NR_ptrace, __NR_process_vm_readv, __NR_process_vm_writev, __NR_kcmp, __NR_pidfd_getfd,
    __NR_process_madvise, __NR_process_mrelease,
    /* kernel surface with a record of bugs */
    __NR_bpf, __NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register, __NR_userfaultfd,
    __NR_keyctl, __NR_add_key, __NR_request_key, __NR_perf_event_open, __NR_fanotify_init,
    __NR_fanotify_mark, __NR_lookup_dcookie, __NR_io_setup, __NR_io_destroy, __NR_io_submit,
    __NR_io_cancel, __NR_io_getevents, __NR_io_pgetevents, __NR_memfd_secret, __NR_vmsplice,
    __NR_seccomp,
    /* the machine itself */
    __NR_kexec_load, __NR_kexec_file_load, __NR_init_module, __NR_finit_module, __NR_delete_module,
    __NR_reboot, __NR_swapon, __NR_swapoff, __NR_acct, __NR_settimeofday, __NR_clock_settime,
    __NR_clock_adjtime, __NR_adjtimex, __NR_syslog, __NR_quotactl, __NR_quotactl_fd, __NR_vhangup,
    __NR_iopl, __NR_ioperm, __NR_sethostname, __NR_setdomainname, __NR_uselib, __NR_ustat,
    __NR_sysfs, __NR__sysctl, __NR_modify_ldt, __NR_sync,
    /* file handles bypass path checks (the "shocker" escape) */
    __NR_name_to_handle_at, __NR_open_by_handle_at,
    /* NUMA placement Docker keeps for CAP_SYS_NICE */
    __NR_mbind, __NR_migrate_pages, __NR_move_pages, __NR_set_mempolicy,
    __NR_set_mempolicy_home_node,
};
/* clang-format on */

/* prctl options allowed (the rest, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_MM, PR_SET_CHILD_
   SUBREAPER, ..., get EPERM): the ones libc, CPython and its threads use, and reads */
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
static const unsigned prctl_allowed[] = {
    PR_SET_PDEATHSIG,    PR_GET_PDEATHSIG,    PR_GET_DUMPABLE,         PR_GET_KEEPCAPS,
    PR_SET_NAME,         PR_GET_NAME,         PR_GET_SECCOMP,          PR_CAPBSET_READ,
    PR_GET_SECUREBITS,   PR_SET_TIMERSLACK,   PR_GET_TIMERSLACK,       PR_GET_CHILD_SUBREAPER,
    PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS, PR_GET_TID_ADDRESS,      PR_SET_THP_DISABLE,
    PR_GET_THP_DISABLE,  PR_CAP_AMBIENT,      PR_GET_SPECULATION_CTRL, PR_SET_VMA,
};
/* personality: PER_LINUX and the query; no ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC */
static const unsigned personality_allowed[] = {0, 0xffffffffu};
/* ioctl commands refused (low 32 bits: the kernel reads the command as an unsigned int, so a
   value sign-extended by a caller still means the same command): pushing bytes into a
   terminal's input (TIOCSTI), console tricks (TIOCLINUX) */
static const unsigned ioctl_refused[] = {TIOCSTI, TIOCLINUX};

static bool listed(const int *t, size_t n, long nr)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] == nr) return true;
    return false;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

launch_sc_action_t launch_seccomp_action(long nr, bool memfd_denied)
{
    if (nr == __NR_clone || nr == __NR_socket || nr == __NR_socketpair || nr == __NR_ioctl ||
        nr == __NR_prctl || nr == __NR_personality)
        return LAUNCH_SC_ARGS;
    if (nr == __NR_clone3) return LAUNCH_SC_CLONE3;
    if (nr == __NR_memfd_create) return memfd_denied ? LAUNCH_SC_EPERM : LAUNCH_SC_ALLOW;
    if (listed(allowed, COUNT(allowed), nr)) return LAUNCH_SC_ALLOW;
    if (listed(refused, COUNT(refused), nr)) return LAUNCH_SC_EPERM;
    return LAUNCH_SC_DEFAULT;
}

/* --- the filter ---------------------------------------------------------------------------- */

#define PROG_MAX 1024 /* well above what the tables need; overflowing is an error, not a cut */
#define NR_SPAN  512  /* numbers the search distinguishes; all above get the default */
struct prog {
    struct sock_filter ins[PROG_MAX];
    unsigned n;
    bool overflow;
};

static unsigned emit(struct prog *p, struct sock_filter f)
{
    if (p->n < PROG_MAX)
        p->ins[p->n] = f;
    else
        p->overflow = true;
    return p->n++;
}

#define ARG_LO(i)    ((unsigned)(offsetof(struct seccomp_data, args) + 8 * (i)))
#define ARG_HI(i)    (ARG_LO(i) + 4) /* little-endian */
#define RET(v)       BPF_STMT(BPF_RET | BPF_K, (v))
#define RET_ERRNO(e) RET(SECCOMP_RET_ERRNO | ((e)&SECCOMP_RET_DATA))
#define RET_EPERM    RET_ERRNO(EPERM)
#define LD(off)      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))

/* Each block starts with "A == nr", and every path through it returns, so blocks need no labels:
   a block of n instructions is skipped by one jump of n. */
static void block_start(struct prog *p, int nr, unsigned len)
{
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, len));
}

/* arg (all 64 bits) must be one of vals */
static void block_one_of(struct prog *p, int nr, unsigned arg, const unsigned *vals, unsigned n)
{
    block_start(p, nr, n + 5);
    emit(p, (struct sock_filter)LD(ARG_HI(arg)));
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, (uint8_t)(n + 1)));
    emit(p, (struct sock_filter)LD(ARG_LO(arg)));
    for (unsigned i = 0; i < n; i++)
        emit(p,
             (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, vals[i], (uint8_t)(n - i), 0));
    emit(p, (struct sock_filter)RET_EPERM);
    emit(p, (struct sock_filter)RET(SECCOMP_RET_ALLOW));
}

/* arg (all 64 bits) must have none of mask's bits and nothing in the high half */
static void block_none_of(struct prog *p, int nr, unsigned arg, unsigned mask)
{
    block_start(p, nr, 6);
    emit(p, (struct sock_filter)LD(ARG_HI(arg)));
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2));
    emit(p, (struct sock_filter)LD(ARG_LO(arg)));
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1));
    emit(p, (struct sock_filter)RET_EPERM);
    emit(p, (struct sock_filter)RET(SECCOMP_RET_ALLOW));
}

/* the low 32 bits of arg must be none of vals */
static void block_low_not(struct prog *p, int nr, unsigned arg, const unsigned *vals, unsigned n)
{
    block_start(p, nr, n + 3);
    emit(p, (struct sock_filter)LD(ARG_LO(arg)));
    for (unsigned i = 0; i < n; i++)
        emit(p,
             (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, vals[i], (uint8_t)(n - i), 0));
    emit(p, (struct sock_filter)RET(SECCOMP_RET_ALLOW));
    emit(p, (struct sock_filter)RET_EPERM);
}

/* Runs of consecutive numbers with one answer (about a hundred for the tables above). */
struct run {
    unsigned first;
    uint32_t ret;
};

static uint32_t ret_of(launch_sc_action_t a)
{
    switch (a) {
    case LAUNCH_SC_ALLOW:
    case LAUNCH_SC_ARGS:
        return SECCOMP_RET_ALLOW; /* its block returned before the search */
    case LAUNCH_SC_EPERM:
        return SECCOMP_RET_ERRNO | EPERM;
    case LAUNCH_SC_CLONE3:
    case LAUNCH_SC_DEFAULT:
        break;
    }
    return SECCOMP_RET_ERRNO | ENOSYS;
}

/* 0 when the tables are inconsistent (a number past NR_SPAN, or in both tables) */
static unsigned make_runs(bool memfd_denied, struct run *runs)
{
    uint32_t ret[NR_SPAN + 1];
    for (unsigned nr = 0; nr <= NR_SPAN; nr++)
        ret[nr] = SECCOMP_RET_ERRNO | ENOSYS;
    for (size_t i = 0; i < COUNT(refused); i++) {
        if (refused[i] < 0 || refused[i] >= NR_SPAN) return 0;
        ret[refused[i]] = SECCOMP_RET_ERRNO | EPERM;
    }
    for (size_t i = 0; i < COUNT(allowed); i++) {
        if (allowed[i] < 0 || allowed[i] >= NR_SPAN ||
            ret[allowed[i]] != (SECCOMP_RET_ERRNO | ENOSYS))
            return 0;
        ret[allowed[i]] = SECCOMP_RET_ALLOW;
    }
    ret[__NR_memfd_create] = ret_of(memfd_denied ? LAUNCH_SC_EPERM : LAUNCH_SC_ALLOW);
    unsigned n = 0;
    for (unsigned nr = 0; nr <= NR_SPAN; nr++)
        if (n == 0 || runs[n - 1].ret != ret[nr]) runs[n++] = (struct run){nr, ret[nr]};
    return n;
}

/* A binary search over the runs' first numbers (A holds nr): "nr >= first of the middle run"
   jumps to the upper half, the lower half follows. About 7 comparisons for any call. */
static void search(struct prog *p, const struct run *runs, unsigned lo, unsigned hi)
{
    if (hi - lo == 1) {
        emit(p, (struct sock_filter)RET(runs[lo].ret));
        return;
    }
    unsigned mid = lo + (hi - lo) / 2;
    unsigned at =
        emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, runs[mid].first, 0, 0));
    search(p, runs, lo, mid);
    unsigned dist = p->n - at - 1;
    if (dist > 255)
        p->overflow = true; /* a jump BPF cannot encode: refuse to load rather than misjump */
    else if (at < PROG_MAX)
        p->ins[at].jt = (uint8_t)dist;
    search(p, runs, mid, hi);
}

static int load_filter(bool memfd_denied, char *err, size_t errlen)
{
    static const unsigned unix_only[] = {AF_UNIX};
    struct prog p = {.n = 0};
    struct run runs[NR_SPAN + 1];
    unsigned nruns = make_runs(memfd_denied, runs);
    if (nruns == 0) {
        snprintf(err, errlen, "the syscall tables are inconsistent (a number listed twice)");
        return -1;
    }
    emit(&p, (struct sock_filter)LD(offsetof(struct seccomp_data, arch)));
    emit(&p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
    emit(&p, (struct sock_filter)RET(SECCOMP_RET_KILL_PROCESS));
    emit(&p, (struct sock_filter)LD(offsetof(struct seccomp_data, nr)));
    emit(&p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1));
    emit(&p, (struct sock_filter)RET(SECCOMP_RET_KILL_PROCESS));
    block_none_of(&p, __NR_clone, 0, LAUNCH_SC_CLONE_NS_MASK);
    block_one_of(&p, __NR_socket, 0, unix_only, 1);
    block_one_of(&p, __NR_socketpair, 0, unix_only, 1);
    block_low_not(&p, __NR_ioctl, 1, ioctl_refused, COUNT(ioctl_refused));
    block_one_of(&p, __NR_prctl, 0, prctl_allowed, COUNT(prctl_allowed));
    block_one_of(&p, __NR_personality, 0, personality_allowed, COUNT(personality_allowed));
    search(&p, runs, 0, nruns);
    if (p.overflow) {
        snprintf(err, errlen,
                 "the filter does not fit BPF (%u instructions, at most %d, or a "
                 "jump past 255)",
                 p.n, PROG_MAX);
        return -1;
    }
    struct sock_fprog fprog = {.len = (unsigned short)p.n, .filter = p.ins};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) < 0) {
        snprintf(err, errlen, "loading the filter: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int launch_seccomp_load(bool memfd_denied, char *err, size_t errlen)
{
#if !defined(__x86_64__)
    (void)memfd_denied;
    snprintf(err, errlen, "only x86_64 is supported by this policy");
    return -1;
#else
    /* loading a filter needs no_new_privs without CAP_SYS_ADMIN (init has set it already
       unless a test switch said no; the layer's own report says which) */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        snprintf(err, errlen, "no_new_privs: %s", strerror(errno));
        return -1;
    }
    if (load_filter(memfd_denied, err, errlen) < 0) return -1;
    snprintf(err, errlen,
             "default-deny: %zu calls allowed (clone, socket, ioctl, prctl, personality "
             "argument-checked), %zu refused, the rest ENOSYS; x32/ia32 killed",
             COUNT(allowed), COUNT(refused));
    return 0;
#endif
}

int launch_seccomp_apply(char *err, size_t errlen)
{
    /* vm.memfd_noexec=2 makes memfds unexecutable; without it memfd_create itself goes */
    FILE *f = fopen("/proc/sys/vm/memfd_noexec", "re");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) != 1) v = -1;
        fclose(f);
    }
    return launch_seccomp_load(v != 2, err, errlen);
}
