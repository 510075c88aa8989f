/*
 * Loading the seccomp policy. The BPF programs are built at build time: gen/seccomp_gen.c
 * compiles the tables of seccomp_table.c with libseccomp (default ENOSYS, foreign architectures
 * and x32 numbers killed, the argument checks as masked 64-bit comparisons) and exports one
 * program per runtime variant (memfd_create allowed or refused) into seccomp_filters.h. Compiling
 * ~350 rules with libseccomp at every run start cost 2.2-2.7 ms; installing the prebuilt program
 * costs what the kernel takes to check and JIT it (about 230 us). docs/sandbox.md has the policy.
 */
#include "seccomp_policy.h"

#include "launch.h"
#include "seccomp_filters.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

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
    /* the kernel does not write the program, but sock_fprog's pointer is not const: copy it */
    struct sock_filter ins[LAUNCH_SC_PROG_MAX];
    size_t n;
    if (memfd_denied) {
        n = COUNT(launch_sc_prog_memfd_refused);
        memcpy(ins, launch_sc_prog_memfd_refused, sizeof launch_sc_prog_memfd_refused);
    } else {
        n = COUNT(launch_sc_prog_memfd_allowed);
        memcpy(ins, launch_sc_prog_memfd_allowed, sizeof launch_sc_prog_memfd_allowed);
    }
    struct sock_fprog fprog = {.len = (unsigned short)n, .filter = ins};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) < 0) {
        snprintf(err, errlen, "loading the filter: %s", strerror(errno));
        return -1;
    }
    size_t nallowed, nrefused;
    launch_seccomp_counts(&nallowed, &nrefused);
    snprintf(err, errlen,
             "default-deny (libseccomp %s, %zu instructions): %zu calls allowed (clone, socket, "
             "ioctl, prctl, personality argument-checked), %zu refused, the rest ENOSYS; "
             "x32/ia32 killed",
             LAUNCH_SC_LIBSECCOMP_VERSION, n, nallowed, nrefused);
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
