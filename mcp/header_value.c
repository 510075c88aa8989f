/* header_value.c - the SEP-2243 header value encoding, shared by the server's checks and the
 * downstream client (header_value.h). */
#include "header_value.h"

#include <string.h>

#include <mbedtls/base64.h>

#define SENTINEL     "=?base64?"
#define SENTINEL_LEN 9

bool mcp__header_value_encode(const char *value, char *out, size_t size)
{
    size_t n = strlen(value);
    bool literal = n > 0 && value[0] != ' ' && value[n - 1] != ' ' &&
                   strncmp(value, SENTINEL, SENTINEL_LEN) != 0;
    for (size_t i = 0; literal && i < n; i++)
        literal = (unsigned char)value[i] >= 0x20 && (unsigned char)value[i] < 0x7f;
    if (literal) {
        if (n >= size) return false;
        memcpy(out, value, n + 1);
        return true;
    }
    size_t olen = 0;
    if (size < SENTINEL_LEN + 3) return false;
    if (mbedtls_base64_encode((unsigned char *)out + SENTINEL_LEN, size - SENTINEL_LEN - 2, &olen,
                              (const unsigned char *)value, n) != 0)
        return false;
    memcpy(out, SENTINEL, SENTINEL_LEN);
    memcpy(out + SENTINEL_LEN + olen, "?=", 3);
    return true;
}

const char *mcp__header_value_decode(const char *got, char *out, size_t size)
{
    size_t n = strlen(got), olen = 0;
    if (n < SENTINEL_LEN + 2 || strncmp(got, SENTINEL, SENTINEL_LEN) != 0 ||
        strcmp(got + n - 2, "?=") != 0)
        return got;
    const unsigned char *b64 = (const unsigned char *)got + SENTINEL_LEN;
    size_t b64_len = n - SENTINEL_LEN - 2;
    if (size == 0 ||
        mbedtls_base64_decode((unsigned char *)out, size - 1, &olen, b64, b64_len) != 0)
        return NULL;
    /* Strict: mbedtls also takes a payload without its padding (dropping a partial group) or
     * with stray bits in the last character; only the one canonical spelling of the bytes
     * passes, which is what re-encoding them gives. */
    unsigned char again[5]; /* four characters and the NUL mbedtls writes */
    size_t done = 0;
    for (size_t i = 0; i < olen; i += 3) {
        size_t k = olen - i < 3 ? olen - i : 3, alen = 0;
        if (done + 4 > b64_len ||
            mbedtls_base64_encode(again, sizeof again, &alen, (unsigned char *)out + i, k) != 0)
            return NULL;
        if (memcmp(again, b64 + done, 4) != 0) return NULL;
        done += 4;
    }
    if (done != b64_len) return NULL;
    out[olen] = '\0';
    return out;
}

bool mcp__header_name_is_token(const char *name)
{
    if (name == NULL || name[0] == '\0') return false;
    for (const char *p = name; *p != '\0'; p++) {
        unsigned char ch = (unsigned char)*p;
        bool alnum =
            (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        if (!alnum && strchr("!#$%&'*+-.^_`|~", ch) == NULL) return false;
    }
    return true;
}
