/* utf8.c - UTF-8: decode, validate, sanitise, count, cut at a character boundary (base.h). */
#include "base.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Unicode's table of well-formed byte sequences (RFC 3629): how many bytes the sequence s[0]
 * starts needs (*need; 0: s[0] starts none), and how many of s[0..n) fit it so far. The second
 * byte's range is what leaves out overlong forms (E0, F0), surrogates (ED) and code points past
 * U+10FFFF (F4). The one rule the functions below follow. */
static size_t seq_prefix(const unsigned char *s, size_t n, size_t *need)
{
    unsigned char b = s[0], lo = 0x80, hi = 0xBF;
    if (b < 0x80) {
        *need = 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
        *need = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        *need = 3;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        *need = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        *need = 0;
        return 0;
    }
    size_t i = 1;
    while (i < *need && i < n && s[i] >= (i == 1 ? lo : 0x80) && s[i] <= (i == 1 ? hi : 0xBF))
        i++;
    return i;
}

size_t ptc_utf8_decode(const char *str, size_t n, unsigned *cp_out)
{
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0) return 0;
    size_t need;
    if (seq_prefix(s, n, &need) != need || need == 0) return 0;
    static const unsigned char lead_bits[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    unsigned cp = s[0] & lead_bits[need];
    for (size_t k = 1; k < need; k++)
        cp = cp << 6 | (s[k] & 0x3F);
    if (cp_out) *cp_out = cp;
    return need;
}

size_t ptc_utf8_valid_len(const char *str, size_t n, bool *cut_at_end)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    bool cut = false;
    while (i < n) {
        size_t need, got = seq_prefix(s + i, n - i, &need);
        if (need == 0 || got < need) {
            cut = need > 0 && i + got == n;
            break;
        }
        i += need;
    }
    if (cut_at_end) *cut_at_end = cut;
    return i;
}

bool ptc_utf8_valid(const char *s, size_t n)
{
    return ptc_utf8_valid_len(s, n, NULL) == n;
}

/* The bytes of the maximal ill-formed subpart at s[0..n) (Unicode's "substitution of maximal
 * subparts", what Python's errors="replace" and browsers do): the longest start of a sequence
 * that could still have been well formed, at least 1. Called where ptc_utf8_decode found none. */
static size_t ill_formed_len(const unsigned char *s, size_t n)
{
    size_t need, got = seq_prefix(s, n, &need);
    return got > 0 && got < need ? got : 1;
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
