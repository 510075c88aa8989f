/*
 * The seccomp policy's tables: default-deny. A syscall the tables below do not list gets ENOSYS,
 * the answer of a kernel that does not have it, so a call added to Linux after the tables were
 * written never reaches the kernel and the library that tried it takes its fallback (glibc does
 * for clone3, fchmodat2, ...). Calls known to be dangerous get EPERM instead, the answer
 * programs expect from a sandbox (and the escape suite checks).
 *
 * Read at build time by the generator (gen/seccomp_gen.c), which compiles them with libseccomp
 * into the BPF programs the launcher loads, and by the test, which checks the loaded programs
 * against launch_seccomp_action. docs/sandbox.md explains each group and how to extend them.
 */
#include "seccomp_policy.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

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

/* prctl options allowed (the rest, PR_SET_SECCOMP, PR_SET_MM, PR_SET_CHILD_SUBREAPER, ..., get
   EPERM): the ones libc, CPython and its threads use, and reads. PR_SET_DUMPABLE: a zygote's
   interpreter is forked from init (undumpable), not exec'd, and makes itself dumpable as the
   exec would (launch_child.c); the flag is the caller's own, so the code gains nothing by it
   (its process is dumpable after an exec anyway, and init runs no code). */
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
static const uint32_t prctl_allowed[] = {
    PR_SET_PDEATHSIG,    PR_GET_PDEATHSIG,    PR_GET_DUMPABLE,         PR_GET_KEEPCAPS,
    PR_SET_NAME,         PR_GET_NAME,         PR_GET_SECCOMP,          PR_CAPBSET_READ,
    PR_GET_SECUREBITS,   PR_SET_TIMERSLACK,   PR_GET_TIMERSLACK,       PR_GET_CHILD_SUBREAPER,
    PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS, PR_GET_TID_ADDRESS,      PR_SET_THP_DISABLE,
    PR_GET_THP_DISABLE,  PR_CAP_AMBIENT,      PR_GET_SPECULATION_CTRL, PR_SET_VMA,
    PR_SET_DUMPABLE,
};
/* personality: PER_LINUX and the query; no ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC */
static const uint32_t personality_allowed[] = {0, 0xffffffffu};
/* ioctl commands refused (low 32 bits: the kernel reads the command as an unsigned int, so a
   value sign-extended by a caller still means the same command): pushing bytes into a
   terminal's input (TIOCSTI), console tricks (TIOCLINUX) */
static const uint32_t ioctl_refused[] = {TIOCSTI, TIOCLINUX};

static bool listed(const int *t, size_t n, long nr)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] == nr) return true;
    return false;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const uint32_t unix_only[] = {AF_UNIX};
static const uint32_t clone_ns_mask[] = {LAUNCH_SC_CLONE_NS_MASK};

/* The argument checks; each syscall here is LAUNCH_SC_ARGS in launch_seccomp_action. */
static const launch_sc_argrule_t argrules[] = {
    {__NR_clone, 0, LAUNCH_SC_NO_BITS, clone_ns_mask, COUNT(clone_ns_mask)},
    {__NR_socket, 0, LAUNCH_SC_ONE_OF, unix_only, COUNT(unix_only)},
    {__NR_socketpair, 0, LAUNCH_SC_ONE_OF, unix_only, COUNT(unix_only)},
    {__NR_ioctl, 1, LAUNCH_SC_LOW_NOT, ioctl_refused, COUNT(ioctl_refused)},
    {__NR_prctl, 0, LAUNCH_SC_ONE_OF, prctl_allowed, COUNT(prctl_allowed)},
    {__NR_personality, 0, LAUNCH_SC_ONE_OF, personality_allowed, COUNT(personality_allowed)},
};

const launch_sc_argrule_t *launch_seccomp_argrules(size_t *n)
{
    *n = COUNT(argrules);
    return argrules;
}

long launch_seccomp_conflict(void)
{
    for (size_t i = 0; i < COUNT(allowed); i++)
        if (allowed[i] < 0 || allowed[i] >= LAUNCH_SC_NR_SPAN ||
            listed(refused, COUNT(refused), allowed[i]))
            return allowed[i];
    for (size_t i = 0; i < COUNT(refused); i++)
        if (refused[i] < 0 || refused[i] >= LAUNCH_SC_NR_SPAN) return refused[i];
    return -1;
}

void launch_seccomp_counts(size_t *nallowed, size_t *nrefused)
{
    *nallowed = COUNT(allowed);
    *nrefused = COUNT(refused);
}

launch_sc_action_t launch_seccomp_action(long nr, bool memfd_denied)
{
    for (size_t i = 0; i < COUNT(argrules); i++)
        if (argrules[i].nr == nr) return LAUNCH_SC_ARGS;
    if (nr == __NR_clone3) return LAUNCH_SC_CLONE3;
    if (nr == __NR_memfd_create) return memfd_denied ? LAUNCH_SC_EPERM : LAUNCH_SC_ALLOW;
    if (listed(allowed, COUNT(allowed), nr)) return LAUNCH_SC_ALLOW;
    if (listed(refused, COUNT(refused), nr)) return LAUNCH_SC_EPERM;
    return LAUNCH_SC_DEFAULT;
}
