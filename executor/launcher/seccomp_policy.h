/* The seccomp policy: its tables (seccomp_table.c), read by the build-time generator that
   compiles them with libseccomp (gen/seccomp_gen.c) and by the test that checks the loaded
   programs against them (tests/unit/executor/test_seccomp.c); and the loader of the generated
   programs (seccomp_policy.c). x86_64 only. */
#ifndef PTC_SECCOMP_POLICY_H
#define PTC_SECCOMP_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Numbers the tables may hold (0 .. LAUNCH_SC_NR_SPAN-1); all above get the default. */
#define LAUNCH_SC_NR_SPAN 512

/* How one LAUNCH_SC_ARGS syscall's argument is checked; failing the check is EPERM. */
typedef enum {
    LAUNCH_SC_ONE_OF,  /* all 64 bits are one of vals */
    LAUNCH_SC_NO_BITS, /* none of vals[0]'s bits set and the high 32 bits zero */
    LAUNCH_SC_LOW_NOT, /* the low 32 bits (the kernel reads an unsigned int) are none of vals */
} launch_sc_check_t;

typedef struct {
    int nr;       /* syscall number */
    unsigned arg; /* argument index, 0..5 */
    launch_sc_check_t check;
    const uint32_t *vals;
    size_t n;
} launch_sc_argrule_t;

/* The argument checks, n of them. */
const launch_sc_argrule_t *launch_seccomp_argrules(size_t *n);

/* A number listed both allowed and refused, or outside 0..LAUNCH_SC_NR_SPAN-1; -1 if none. */
long launch_seccomp_conflict(void);

/* How many numbers the allowed and refused tables list. */
void launch_seccomp_counts(size_t *nallowed, size_t *nrefused);

/* Loads the generated program for memfd_denied into the calling thread (no_new_privs must be
   set, or CAP_SYS_ADMIN held). 0, or -1 with the reason in err. On success err holds a one-line
   summary. */
int launch_seccomp_load(bool memfd_denied, char *err, size_t errlen);

/* The argument checks' constants, named for the test. */
#define LAUNCH_SC_CLONE_NS_MASK                                                                    \
    0x7e020000ul /* NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET */

#endif
