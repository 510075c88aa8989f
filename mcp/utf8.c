/* utf8.c - what a downstream server sends is made valid UTF-8 before it is parsed: one bad
 * byte would otherwise travel on into our own answers (invalid JSON for our client) and into
 * the bridge, whose reader refuses the line. Ill-formed sequences become U+FFFD, one per
 * maximal ill-formed subpart (Unicode's "substitution of maximal subparts"). */
#include "client_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The length of the well-formed sequence at s[0..len), or 0 with *bad set to the bytes of its
 * maximal ill-formed subpart (at least 1). */
static size_t well_formed(const unsigned char *s, size_t len, size_t *bad)
{
    unsigned char b = s[0];
    if (b < 0x80) return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range (RFC 3629 table) */
    if (b >= 0xC2 && b <= 0xDF) {
        n = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        if (b == 0xE0) lo = 0xA0; /* overlong */
        if (b == 0xED) hi = 0x9F; /* surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        if (b == 0xF0) lo = 0x90; /* overlong */
        if (b == 0xF4) hi = 0x8F; /* past U+10FFFF */
    } else {
        *bad = 1;
        return 0;
    }
    size_t i = 1;
    for (; i < n && i < len; i++) {
        unsigned char c = s[i];
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (c < l || c > h) break;
    }
    if (i == n) return n;
    *bad = i;
    return 0;
}

int mcp__utf8_sanitize(const char *s, size_t len, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = len;
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, bad = 0;
    while (i < len) {
        size_t n = well_formed(u + i, len - i, &bad);
        if (n == 0) break;
        i += n;
    }
    if (i == len) return 0;
    /* Each replacement (3 bytes) stands for at least one byte: 3 * len bounds the copy. */
    if (len > (SIZE_MAX - 1) / 3) return MCP_ENOMEM;
    char *o = malloc(3 * len + 1);
    if (o == NULL) return MCP_ENOMEM;
    memcpy(o, s, i);
    size_t k = i;
    int replaced = 0;
    while (i < len) {
        size_t n = well_formed(u + i, len - i, &bad);
        if (n > 0) {
            memcpy(o + k, s + i, n);
            k += n;
            i += n;
            continue;
        }
        memcpy(o + k, "\xEF\xBF\xBD", 3);
        k += 3;
        i += bad;
        if (replaced < INT_MAX) replaced++;
    }
    o[k] = '\0';
    *out = o;
    *out_len = k;
    return replaced;
}
