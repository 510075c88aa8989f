/* Percentiles for the exec benches (header only: each bench is one program). */
#ifndef PTC_BENCH_STATS_H
#define PTC_BENCH_STATS_H

#include <stdlib.h>

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the p-th percentile (0..1) of v[0..n), which it sorts */
static inline double bench_pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof v[0], bench_cmp);
    return v[(int)(p * (n - 1) + 0.5)];
}

#endif
