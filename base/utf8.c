/* utf8.c - UTF-8: decode, validate, sanitise, count, cut at a character boundary (base.h). */
#include "base.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t ptc_utf8_decode(const char *str, size_t n, unsigned *cp_out)
{
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0) return 0;
    unsigned char c = s[0];
    size_t need;
    unsigned cp;
    if (c < 0x80) {
        if (cp_out) *cp_out = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (need >= n) return 0;
    for (size_t k = 1; k <= need; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[k] & 0x3F);
    }
    /* Overlong forms, surrogates and code points past U+10FFFF are invalid too. */
    if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    if (cp_out) *cp_out = cp;
    return need + 1;
}

bool ptc_utf8_valid(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t k = ptc_utf8_decode(s + i, n - i, NULL);
        if (k == 0) return false;
        i += k;
    }
    return true;
}

/* The bytes of the maximal ill-formed subpart at s[0..n) (Unicode's "substitution of maximal
 * subparts", what Python's errors="replace" and browsers do): the longest start of a sequence
 * that could still have been well formed, at least 1. Called where ptc_utf8_decode found none. */
static size_t ill_formed_len(const unsigned char *s, size_t n)
{
    unsigned char b = s[0], lo = 0x80, hi = 0xBF; /* the second byte's range (RFC 3629) */
    size_t need;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        if (b == 0xE0) lo = 0xA0; /* overlong */
        if (b == 0xED) hi = 0x9F; /* surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        if (b == 0xF0) lo = 0x90; /* overlong */
        if (b == 0xF4) hi = 0x8F; /* past U+10FFFF */
    } else {
        return 1;
    }
    size_t i = 1;
    while (i < need && i < n && s[i] >= (i == 1 ? lo : 0x80) && s[i] <= (i == 1 ? hi : 0xBF))
        i++;
    return i < need ? i : 1; /* i == need: well formed after all (not reached from decode's 0) */
}

int ptc_utf8_clean(const char *s, size_t n, char **out, size_t *out_len)
{
    *out = NULL;
    if (out_len != NULL) *out_len = n;
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) { /* the common case, text that needs nothing, is not copied */
        size_t k = u[i] == 0 ? 0 : ptc_utf8_decode(s + i, n - i, NULL);
        if (k == 0) break;
        i += k;
    }
    if (i == n) return 0;
    /* Each replacement (3 bytes) stands for at least one byte, so 3x is the worst case. */
    if (n > (SIZE_MAX - 1) / 3) return PTC_ENOMEM;
    char *o = malloc(n * 3 + 1);
    if (o == NULL) return PTC_ENOMEM;
    memcpy(o, s, i);
    size_t len = i;
    int replaced = 0;
    while (i < n) {
        size_t k = u[i] == 0 ? 0 : ptc_utf8_decode(s + i, n - i, NULL);
        if (k > 0) {
            memcpy(o + len, s + i, k);
            len += k;
            i += k;
            continue;
        }
        memcpy(o + len, "\xEF\xBF\xBD", 3);
        len += 3;
        i += u[i] == 0 ? 1 : ill_formed_len(u + i, n - i);
        if (replaced < INT_MAX) replaced++;
    }
    o[len] = '\0';
    *out = o;
    if (out_len != NULL) *out_len = len;
    return replaced;
}

char *ptc_utf8_sanitize(const char *s, size_t n, size_t *out_len)
{
    char *o = NULL;
    int r = ptc_utf8_clean(s, n, &o, out_len);
    if (r == 0 && o == NULL) { /* nothing to replace: a plain copy */
        o = malloc(n + 1);
        if (o != NULL) {
            memcpy(o, s, n);
            o[n] = '\0';
        }
    }
    if (o == NULL && out_len != NULL) *out_len = 0; /* r < 0, or the copy failed */
    return o;
}

size_t ptc_utf8_count(const char *s, size_t n)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += ((unsigned char)s[i] & 0xC0) != 0x80;
    return chars;
}

size_t ptc_utf8_cut(const char *s, size_t n, size_t max)
{
    if (max >= n) return n;
    /* s[max] is the first byte left out: a continuation byte there means the character it
     * belongs to would be split, so cut before that character's lead byte (at most 3 back). */
    size_t cut = max;
    while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80 && max - cut < 3)
        cut--;
    return cut;
}

const char *ptc_text_last_lines(const char *s, unsigned lines)
{
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '\n')
        n--;
    const char *p = s + n;
    while (p > s) {
        if (p[-1] == '\n' && --lines == 0) break;
        p--;
    }
    return p;
}
