/* utf8.c - UTF-8: decode, validate, sanitise, count, cut at a character boundary (base.h). */
#include "base.h"

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

char *ptc_utf8_sanitize(const char *s, size_t n, size_t *out_len)
{
    if (out_len != NULL) *out_len = 0;
    /* Each bad byte becomes U+FFFD (3 bytes), so 3x is the worst case. */
    if (n > (SIZE_MAX - 1) / 3) return NULL;
    char *o = malloc(n * 3 + 1);
    if (o == NULL) return NULL;
    size_t i = 0, len = 0;
    while (i < n) {
        size_t k = s[i] == '\0' ? 0 : ptc_utf8_decode(s + i, n - i, NULL);
        if (k > 0) {
            memcpy(o + len, s + i, k);
            len += k;
            i += k;
        } else {
            memcpy(o + len, "\xEF\xBF\xBD", 3);
            len += 3;
            i++;
        }
    }
    o[len] = '\0';
    if (out_len != NULL) *out_len = len;
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
