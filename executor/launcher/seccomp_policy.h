/* The seccomp policy's table, for the launcher and for the test that checks the loaded filters
   against it (tests/unit/executor/test_seccomp.c). x86_64 only. */
#ifndef PTC_SECCOMP_POLICY_H
#define PTC_SECCOMP_POLICY_H

#include <stdbool.h>
#include <stddef.h>

/* What the policy does with one syscall number. */
typedef enum {
    LAUNCH_SC_DEFAULT, /* not listed: ENOSYS, so a library takes its fallback */
    LAUNCH_SC_ALLOW,   /* allowed whatever the arguments */
    LAUNCH_SC_ARGS,    /* allowed when its arguments pass the checks, else EPERM */
    LAUNCH_SC_EPERM,   /* known and refused with EPERM */
    LAUNCH_SC_CLONE3,  /* ENOSYS on purpose: glibc falls back to clone, whose flags are checked */
} launch_sc_action_t;

/* The action for syscall number nr (x86_64 numbering, no x32 bit). memfd_denied: memfd_create is
   refused because vm.memfd_noexec=2 could not be set. */
launch_sc_action_t launch_seccomp_action(long nr, bool memfd_denied);

/* Loads both filters into the calling thread (no_new_privs must be set, or CAP_SYS_ADMIN held).
   0, or -1 with the reason in err. On success err holds a one-line summary. */
int launch_seccomp_load(bool memfd_denied, char *err, size_t errlen);

/* The argument checks' constants, named for the test. */
#define LAUNCH_SC_CLONE_NS_MASK                                                                    \
    0x7e020000ul /* NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET */

#endif
