/* nulscan.c - finds \u0000 in the string arguments of a raw tools/call message. cJSON ends its
 * strings at the first NUL, so a handler would see a silently shortened argument (a program cut
 * in the middle); the raw text is the only place the NUL can still be seen. This scanner walks
 * the text once (only when it holds "\u0000" at all), following object keys to
 * params.arguments.NAME, and notes the first NUL of each message (each member of a batch). */
#include "internal.h"

#include <string.h>

#define NUL_MAX_DEPTH 64

typedef struct {
    bool is_obj;
    bool want_key;
    const char *key; /* raw key text (between the quotes) of the current member */
    size_t key_len;
} level_t;

static bool key_is(const level_t *l, const char *name)
{
    size_t n = strlen(name);
    return l->is_obj && l->key != NULL && l->key_len == n && memcmp(l->key, name, n) == 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Scans the string whose opening quote is at *pp; leaves *pp after the closing quote. Returns
 * the character offset (code points, as the handler's language counts) of the first NUL, or
 * -1. */
static long scan_string(const char **pp, const char *end)
{
    const char *p = *pp + 1;
    long chars = 0, nul = -1;
    while (p < end && *p != '"') {
        if (*p == '\\' && p + 1 < end) {
            if (p[1] == 'u' && p + 6 <= end) {
                int v = 0;
                for (int i = 2; i < 6; i++)
                    v = v * 16 + (hexval(p[i]) < 0 ? 0 : hexval(p[i]));
                if (v == 0 && nul < 0) nul = chars;
                /* The low half of a surrogate pair is part of the same character. */
                if (!(v >= 0xDC00 && v <= 0xDFFF)) chars++;
                p += 6;
            } else {
                chars++;
                p += 2;
            }
            continue;
        }
        if (((unsigned char)*p & 0xC0) != 0x80) chars++;
        p++;
    }
    *pp = p < end ? p + 1 : end;
    return nul;
}

size_t mcp__nul_scan(const char *json, size_t len, mcp__nul_hit_t *hits, size_t max)
{
    static const char needle[] = "\\u0000";
    if (max == 0 || len < sizeof needle - 1) return 0;
    bool any = false;
    for (const char *p = memchr(json, '\\', len); p != NULL && !any;
         p = memchr(p + 1, '\\', (size_t)(json + len - p - 1)))
        any = (size_t)(json + len - p) >= sizeof needle - 1 &&
              memcmp(p, needle, sizeof needle - 1) == 0;
    if (!any) return 0;

    level_t st[NUL_MAX_DEPTH];
    int depth = 0; /* levels in use; deeper ones are counted but not tracked */
    int member = 0, base = 0, seen = -1;
    size_t n = 0;
    const char *p = json, *end = json + len;
    while (p < end && n < max) {
        char c = *p;
        if (c == '{' || c == '[') {
            if (depth == 0 && c == '[') base = 1; /* a batch: messages are one level down */
            if (depth < NUL_MAX_DEPTH)
                st[depth] = (level_t){.is_obj = c == '{', .want_key = c == '{'};
            depth++;
            p++;
        } else if (c == '}' || c == ']') {
            if (depth > 0) depth--;
            p++;
        } else if (c == ',') {
            if (depth > 0 && depth <= NUL_MAX_DEPTH && st[depth - 1].is_obj)
                st[depth - 1].want_key = true;
            if (depth == 1 && base == 1) member++;
            p++;
        } else if (c == '"') {
            const char *start = p + 1;
            long nul = scan_string(&p, end);
            level_t *top = depth > 0 && depth <= NUL_MAX_DEPTH ? &st[depth - 1] : NULL;
            if (top != NULL && top->is_obj && top->want_key) {
                top->key = start;
                top->key_len = (size_t)(p - 1 - start);
                top->want_key = false;
            } else if (nul >= 0 && member != seen && depth >= base + 3 && depth <= NUL_MAX_DEPTH &&
                       key_is(&st[base], "params") && key_is(&st[base + 1], "arguments") &&
                       st[base + 2].is_obj) {
                mcp__nul_hit_t *h = &hits[n++];
                h->member = member;
                h->offset = nul;
                size_t kl = st[base + 2].key_len;
                if (kl >= sizeof h->arg) kl = sizeof h->arg - 1;
                memcpy(h->arg, st[base + 2].key, kl);
                h->arg[kl] = '\0';
                seen = member;
            }
        } else {
            p++;
        }
    }
    return n;
}
