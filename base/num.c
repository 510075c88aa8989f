/*
 * num.c - strict decimal parsing for the line protocols between the server and its sandboxes.
 * The other end of those lines is code we do not trust, so where sscanf's %llu would take a
 * sign, leading blanks or an overflowing value, these take digits only and say when a number
 * does not fit.
 */
#include "base.h"

#include <stdint.h>

int ptc_parse_u64(const char *s, const char **end, uint64_t *out)
{
    if (s == NULL || out == NULL) return PTC_EINVAL;
    const char *p = s;
    uint64_t v = 0;
    while (*p >= '0' && *p <= '9') {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return PTC_ERANGE;
        v = v * 10 + d;
        p++;
    }
    if (p == s) return PTC_EINVAL;
    if (end != NULL)
        *end = p;
    else if (*p != '\0')
        return PTC_EINVAL;
    *out = v;
    return 0;
}

int ptc_parse_int(const char *s, const char **end, int *out)
{
    if (s == NULL || out == NULL) return PTC_EINVAL;
    bool neg = s[0] == '-';
    uint64_t v;
    int rc = ptc_parse_u64(s + neg, end, &v);
    if (rc < 0) return rc;
    if (v > (neg ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT32_MAX)) return PTC_ERANGE;
    *out = neg ? (int)(0 - (int64_t)v) : (int)v;
    return 0;
}

int ptc_parse_u64s(const char *s, uint64_t *out, size_t n, const char **end)
{
    if (s == NULL || (out == NULL && n > 0)) return PTC_EINVAL;
    const char *p = s;
    for (size_t i = 0; i < n; i++) {
        if (*p++ != ' ') return PTC_EINVAL;
        int rc = ptc_parse_u64(p, &p, &out[i]);
        if (rc < 0) return rc;
    }
    if (end != NULL)
        *end = p;
    else if (*p != '\0')
        return PTC_EINVAL;
    return 0;
}
