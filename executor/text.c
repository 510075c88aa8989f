/* Output bytes to text: the pool keeps raw bytes; callers that need UTF-8 (JSON) convert here. */
#include "executor.h"

#include <stdlib.h>
#include <string.h>

/* length of the valid UTF-8 sequence at p (RFC 3629: no overlongs, no surrogates, at most
   U+10FFFF), or 0 */
static size_t valid_seq(const unsigned char *p, size_t left)
{
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0; /* overlong */
        if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90; /* overlong */
        if (c == 0xF4) hi = 0x8F; /* past U+10FFFF */
    } else {
        return 0;
    }
    if (left < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

char *exec_utf8_text(const unsigned char *data, size_t len, size_t *out_len)
{
    if (out_len) *out_len = 0;
    if (!data && len) return NULL;
    if (len > (SIZE_MAX - 1) / 3) return NULL;
    char *out = malloc(len * 3 + 1); /* every byte may become U+FFFD (3 bytes) */
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = valid_seq(data + i, len - i);
        if (n) {
            memcpy(out + o, data + i, n);
            o += n;
            i += n;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    if (out_len) *out_len = o;
    return out;
}
