/*
 * seccomp_gen: compiles the seccomp policy's tables (../seccomp_table.c) with libseccomp at
 * build time and writes the BPF programs as C arrays (seccomp_filters.h), one per runtime variant
 * of the policy: memfd_create allowed, or refused when vm.memfd_noexec=2 could not be set. The
 * launcher installs them as they are, so no run start pays for libseccomp's compile (2.2-2.7 ms
 * for these ~350 rules). Usage: seccomp_gen OUTPUT.h
 *
 * libseccomp lets a rule compare each argument once, so a check that is a conjunction on one
 * argument ("none of these values") becomes a union of rules: the values' complement as a prefix
 * tree over the low 32 bits, one masked comparison per subtree that holds none of them.
 */
#include "seccomp_policy.h"

#include <errno.h>
#include <linux/filter.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HI32 0xffffffff00000000ull

/* SCMP_CMP() leaves datum_b out for one-value comparisons (clang's -Wextra flags it) */
static struct scmp_arg_cmp cmp(unsigned arg, enum scmp_compare op, uint64_t a, uint64_t b)
{
    return (struct scmp_arg_cmp){.arg = arg, .op = op, .datum_a = a, .datum_b = b};
}

static int add(scmp_filter_ctx ctx, uint32_t act, int nr, struct scmp_arg_cmp cmp)
{
    int rc = seccomp_rule_add_exact_array(ctx, act, nr, 1, &cmp);
    if (rc < 0) fprintf(stderr, "seccomp_gen: rule for syscall %d: %s\n", nr, strerror(-rc));
    return rc;
}

static uint32_t min_of(const launch_sc_argrule_t *r)
{
    uint32_t m = UINT32_MAX;
    for (size_t i = 0; i < r->n; i++)
        if (r->vals[i] < m) m = r->vals[i];
    return m;
}

static uint32_t max_of(const launch_sc_argrule_t *r)
{
    uint32_t m = 0;
    for (size_t i = 0; i < r->n; i++)
        if (r->vals[i] > m) m = r->vals[i];
    return m;
}

/* Sets of low halves written as masked comparisons: x belongs to cube i when
   (x & mask[i]) == datum[i]. */
#define CUBES_MAX 2048
struct cubes {
    uint32_t mask[CUBES_MAX], datum[CUBES_MAX];
    size_t n;
};

static bool cube_holds_a_value(const launch_sc_argrule_t *r, uint32_t mask, uint32_t datum)
{
    for (size_t i = 0; i < r->n; i++)
        if ((r->vals[i] & mask) == datum) return true;
    return false;
}

/* Cubes whose union is "the low half is none of vals", for the subtree of low halves that start
   with prefix's top depth bits: a prefix tree, one cube per subtree that holds none of them.
   With hi_zero, the caller's LT smallest / GT largest rules cover what lies outside them. */
static int tree(struct cubes *c, const launch_sc_argrule_t *r, bool hi_zero, uint32_t prefix,
                unsigned depth)
{
    uint32_t mask = depth == 0 ? 0 : ~0u << (32 - depth);
    if (hi_zero && ((prefix | ~mask) < min_of(r) || prefix > max_of(r))) return 0;
    if (!cube_holds_a_value(r, mask, prefix)) {
        if (c->n == CUBES_MAX) return -ENOSPC;
        c->mask[c->n] = mask;
        c->datum[c->n++] = prefix;
        return 0;
    }
    if (depth == 32) return 0; /* one of vals itself */
    uint32_t bit = 1u << (31 - depth);
    int rc = tree(c, r, hi_zero, prefix, depth + 1);
    if (rc < 0) return rc;
    return tree(c, r, hi_zero, prefix | bit, depth + 1);
}

/* Rules for act whose union is "the low 32 bits of arg are none of vals" (and, with hi_zero,
   "the high 32 bits are zero"). */
static int add_complement(scmp_filter_ctx ctx, uint32_t act, const launch_sc_argrule_t *r,
                          bool hi_zero)
{
    struct cubes *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    int rc = tree(c, r, hi_zero, 0, 0);
    if (rc < 0) fprintf(stderr, "seccomp_gen: syscall %d: too many comparisons\n", r->nr);
    for (size_t i = 0; i < c->n && rc >= 0; i++)
        rc = add(ctx, act, r->nr,
                 cmp(r->arg, SCMP_CMP_MASKED_EQ, (hi_zero ? HI32 : 0) | c->mask[i], c->datum[i]));
    free(c);
    return rc;
}

static int add_argrule(scmp_filter_ctx ctx, const launch_sc_argrule_t *r)
{
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    int rc = 0;
    switch (r->check) {
    case LAUNCH_SC_ONE_OF:
        for (size_t i = 0; i < r->n && rc >= 0; i++)
            rc = add(ctx, SCMP_ACT_ALLOW, r->nr, cmp(r->arg, SCMP_CMP_EQ, r->vals[i], 0));
        /* 64-bit comparisons: below the smallest, above the largest (the high half included),
           then what lies between */
        if (rc >= 0 && min_of(r) > 0)
            rc = add(ctx, eperm, r->nr, cmp(r->arg, SCMP_CMP_LT, min_of(r), 0));
        if (rc >= 0) rc = add(ctx, eperm, r->nr, cmp(r->arg, SCMP_CMP_GT, max_of(r), 0));
        if (rc >= 0) rc = add_complement(ctx, eperm, r, true);
        return rc;
    case LAUNCH_SC_NO_BITS:
        if (r->n != 1) return -EINVAL;
        rc = add(ctx, SCMP_ACT_ALLOW, r->nr, cmp(r->arg, SCMP_CMP_MASKED_EQ, HI32 | r->vals[0], 0));
        if (rc >= 0) rc = add(ctx, eperm, r->nr, cmp(r->arg, SCMP_CMP_GT, 0xffffffffull, 0));
        for (unsigned b = 0; b < 32 && rc >= 0; b++)
            if (r->vals[0] & (1u << b))
                rc = add(ctx, eperm, r->nr, cmp(r->arg, SCMP_CMP_MASKED_EQ, 1ull << b, 1ull << b));
        return rc;
    case LAUNCH_SC_LOW_NOT:
        for (size_t i = 0; i < r->n && rc >= 0; i++)
            rc = add(ctx, eperm, r->nr, cmp(r->arg, SCMP_CMP_MASKED_EQ, 0xffffffffull, r->vals[i]));
        if (rc >= 0) rc = add_complement(ctx, SCMP_ACT_ALLOW, r, false);
        return rc;
    }
    return -EINVAL;
}

static scmp_filter_ctx build(bool memfd_denied)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
    if (!ctx) {
        fprintf(stderr, "seccomp_gen: seccomp_init failed\n");
        return NULL;
    }
    /* foreign architectures and x32 numbers (libseccomp's x86_64 filter sends those to the
       bad-arch action) die; the binary tree keeps a call's path short at run time */
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc >= 0) rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (rc < 0) fprintf(stderr, "seccomp_gen: filter attributes: %s\n", strerror(-rc));
    size_t nrules;
    const launch_sc_argrule_t *rules = launch_seccomp_argrules(&nrules);
    for (size_t i = 0; i < nrules && rc >= 0; i++)
        rc = add_argrule(ctx, &rules[i]);
    for (int nr = 0; nr < LAUNCH_SC_NR_SPAN && rc >= 0; nr++) {
        switch (launch_seccomp_action(nr, memfd_denied)) {
        case LAUNCH_SC_ALLOW:
            rc = seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, nr, 0);
            break;
        case LAUNCH_SC_EPERM:
            rc = seccomp_rule_add_exact(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
            break;
        case LAUNCH_SC_ARGS:   /* added above */
        case LAUNCH_SC_CLONE3: /* the default */
        case LAUNCH_SC_DEFAULT:
            break;
        }
        if (rc < 0) fprintf(stderr, "seccomp_gen: syscall %d: %s\n", nr, strerror(-rc));
    }
    if (rc < 0) {
        seccomp_release(ctx);
        return NULL;
    }
    return ctx;
}

/* Writes ctx's program as the array name; its length in *len. */
static int write_prog(FILE *out, const char *name, scmp_filter_ctx ctx, size_t *len)
{
    FILE *tmp = tmpfile();
    if (!tmp) {
        perror("seccomp_gen: tmpfile");
        return -1;
    }
    int rc = seccomp_export_bpf(ctx, fileno(tmp));
    if (rc < 0) {
        fprintf(stderr, "seccomp_gen: export: %s\n", strerror(-rc));
        fclose(tmp);
        return -1;
    }
    rewind(tmp);
    fprintf(out, "static const struct sock_filter %s[] = {\n", name);
    struct sock_filter f;
    size_t n = 0;
    while (fread(&f, sizeof f, 1, tmp) == 1) {
        fprintf(out, "    {0x%02x, %u, %u, 0x%08x},\n", f.code, f.jt, f.jf, f.k);
        n++;
    }
    fprintf(out, "};\n");
    int bad = ferror(tmp);
    fclose(tmp);
    if (bad || n == 0 || n > BPF_MAXINSNS) {
        fprintf(stderr, "seccomp_gen: %s: %zu instructions (at most %d)\n", name, n, BPF_MAXINSNS);
        return -1;
    }
    *len = n;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: seccomp_gen OUTPUT.h\n");
        return 2;
    }
    long bad = launch_seccomp_conflict();
    if (bad >= 0) {
        fprintf(stderr, "seccomp_gen: syscall %ld is listed twice or out of range\n", bad);
        return 1;
    }
    FILE *out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    const struct scmp_version *v = seccomp_version();
    fprintf(out,
            "/* Generated by seccomp_gen from executor/launcher/seccomp_table.c with libseccomp "
            "%u.%u.%u: do not edit. */\n#include <linux/filter.h>\n"
            "#define LAUNCH_SC_LIBSECCOMP_VERSION \"%u.%u.%u\"\n",
            v->major, v->minor, v->micro, v->major, v->minor, v->micro);
    static const char *const names[] = {"launch_sc_prog_memfd_allowed",
                                        "launch_sc_prog_memfd_refused"};
    size_t max = 0;
    int rc = 0;
    for (int denied = 0; denied < 2 && rc == 0; denied++) {
        scmp_filter_ctx ctx = build(denied);
        size_t len = 0;
        rc = ctx ? write_prog(out, names[denied], ctx, &len) : -1;
        if (ctx) seccomp_release(ctx);
        if (len > max) max = len;
    }
    fprintf(out, "#define LAUNCH_SC_PROG_MAX %zu\n", max);
    if (fclose(out) != 0) rc = -1;
    if (rc != 0) {
        remove(argv[1]);
        return 1;
    }
    return 0;
}
