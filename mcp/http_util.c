/* http_util.c - pure helpers of the HTTP server: header checks, DNS-rebinding checks, SSE
 * formatting, the listen address. No I/O here, so that the unit tests reach every branch. */
#include "http_server_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Compares the media type at p (up to ';', ',' or the end, surrounding blanks ignored). */
static bool media_eq(const char *p, const char *end, const char *type)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    const char *q = p;
    while (q < end && *q != ';' && *q != ',')
        q++;
    while (q > p && (q[-1] == ' ' || q[-1] == '\t'))
        q--;
    size_t n = (size_t)(q - p);
    return n == strlen(type) && strncasecmp(p, type, n) == 0;
}

bool mcp__http_accepts(const char *accept, const char *type)
{
    if (accept == NULL) return false;
    const char *p = accept;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        if (media_eq(p, end, type)) return true;
        if (comma == NULL) return false;
        p = comma + 1;
    }
}

bool mcp__http_media_is(const char *content_type, const char *type)
{
    if (content_type == NULL) return false;
    const char *end = content_type + strlen(content_type);
    const char *semi = strchr(content_type, ';');
    const char *comma = strchr(content_type, ',');
    if (comma != NULL) return false; /* one media type only */
    return media_eq(content_type, semi ? semi : end, type);
}

bool mcp__http_secret_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    /* Walks the whole of b whatever a holds, so the time reveals only the lengths. */
    unsigned char diff = (unsigned char)(alen != blen);
    for (size_t i = 0; i < blen; i++) {
        unsigned char x = alen > 0 ? (unsigned char)a[i % alen] : 0;
        diff |= (unsigned char)(x ^ (unsigned char)b[i]);
    }
    return diff == 0;
}

bool mcp__http_is_loopback(const char *host)
{
    if (host == NULL) return false;
    if (strcasecmp(host, "localhost") == 0 || strcmp(host, "::1") == 0 ||
        strcmp(host, "[::1]") == 0)
        return true;
    return strncmp(host, "127.", 4) == 0;
}

/* Splits "name[:port]" / "[v6][:port]" (len bytes) into a name without brackets and a port
 * (0 when absent); false when malformed. */
static bool split_host(const char *s, size_t len, char *name, size_t name_size, unsigned *port)
{
    const char *colon = NULL;
    const char *nb, *ne;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close == NULL) return false;
        nb = s + 1;
        ne = close;
        if (close + 1 < s + len) {
            if (close[1] != ':') return false;
            colon = close + 1;
        }
    } else {
        nb = s;
        colon = memchr(s, ':', len);
        ne = colon ? colon : s + len;
        if (colon && memchr(colon + 1, ':', (size_t)(s + len - colon - 1))) return false;
    }
    size_t n = (size_t)(ne - nb);
    if (n == 0 || n >= name_size) return false;
    memcpy(name, nb, n);
    name[n] = '\0';
    *port = 0;
    if (colon != NULL) {
        const char *p = colon + 1;
        const char *end = s + len;
        if (p == end || end - p > 5) return false;
        unsigned v = 0;
        for (; p < end; p++) {
            if (!isdigit((unsigned char)*p)) return false;
            v = v * 10 + (unsigned)(*p - '0');
        }
        if (v == 0 || v > 65535) return false;
        *port = v;
    }
    return true;
}

static bool name_allowed(const char *name, const char *listen_host)
{
    if (strcasecmp(name, "localhost") == 0 || strcmp(name, "127.0.0.1") == 0 ||
        strcmp(name, "::1") == 0)
        return true;
    if (listen_host == NULL) return false;
    /* The listen host may be written with brackets ("[::1]"). */
    size_t n = strlen(listen_host);
    if (n >= 2 && listen_host[0] == '[' && listen_host[n - 1] == ']')
        return strlen(name) == n - 2 && strncasecmp(name, listen_host + 1, n - 2) == 0;
    return strcasecmp(name, listen_host) == 0;
}

bool mcp__http_host_allowed(const char *host_header, const char *listen_host, unsigned port)
{
    if (host_header == NULL) return true;
    char name[256];
    unsigned p;
    if (!split_host(host_header, strlen(host_header), name, sizeof name, &p)) return false;
    if (p != 0 && p != port) return false;
    return name_allowed(name, listen_host);
}

bool mcp__http_origin_allowed(const char *origin, const char *listen_host)
{
    if (origin == NULL) return false;
    const char *rest;
    if (strncasecmp(origin, "http://", 7) == 0)
        rest = origin + 7;
    else if (strncasecmp(origin, "https://", 8) == 0)
        rest = origin + 8;
    else
        return false;
    size_t len = strlen(rest);
    if (len > 0 && rest[len - 1] == '/') len--; /* tolerate a trailing slash */
    if (memchr(rest, '/', len) || memchr(rest, '@', len)) return false;
    char name[256];
    unsigned p;
    if (!split_host(rest, len, name, sizeof name, &p)) return false;
    /* Any port: a page served by another local program (the Inspector's UI) is local too;
     * what DNS rebinding brings is a foreign name. */
    return name_allowed(name, listen_host);
}

size_t mcp__http_path_len(const char *target)
{
    return strcspn(target, "?#");
}

int mcp__http_query_param(const char *target, const char *name, char *out, size_t size)
{
    const char *q = strchr(target, '?');
    if (q == NULL || size == 0) return MCP_EINVAL;
    size_t nlen = strlen(name);
    const char *p = q + 1;
    while (*p != '\0' && *p != '#') {
        const char *end = p + strcspn(p, "&#");
        if ((size_t)(end - p) > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
            const char *v = p + nlen + 1;
            size_t vlen = (size_t)(end - v);
            if (vlen >= size) return MCP_EINVAL;
            memcpy(out, v, vlen);
            out[vlen] = '\0';
            return MCP_OK;
        }
        if (*end != '&') break;
        p = end + 1;
    }
    return MCP_EINVAL;
}

char *mcp__sse_format(const char *id, const char *event, unsigned retry_ms, const char *data,
                      size_t len, size_t *out_len)
{
    /* Each line of data costs at most "data: " plus its newline. */
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        if (data[i] == '\n') lines++;
    size_t cap = len + lines * 7 + 64 + (id ? strlen(id) + 6 : 0) + (event ? strlen(event) + 9 : 0);
    char *buf = malloc(cap);
    if (buf == NULL) return NULL;
    size_t n = 0;
    if (id != NULL) n += (size_t)snprintf(buf + n, cap - n, "id: %s\n", id);
    if (event != NULL) n += (size_t)snprintf(buf + n, cap - n, "event: %s\n", event);
    if (retry_ms > 0) n += (size_t)snprintf(buf + n, cap - n, "retry: %u\n", retry_ms);
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || data[i] == '\n') {
            size_t l = i - start;
            /* A CR before the newline would end the line early for the reader: drop it. */
            if (l > 0 && data[start + l - 1] == '\r') l--;
            memcpy(buf + n, "data: ", 6);
            n += 6;
            memcpy(buf + n, data + start, l);
            n += l;
            buf[n++] = '\n';
            start = i + 1;
        }
    }
    buf[n++] = '\n';
    *out_len = n;
    return buf;
}

void mcp__hex(const unsigned char *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

static bool parse_u64(const char *p, const char *end, uint64_t *out)
{
    if (p == end || end - p > 19) return false;
    uint64_t v = 0;
    for (; p < end; p++) {
        if (!isdigit((unsigned char)*p)) return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return true;
}

int mcp__sse_parse_event_id(const char *id, uint64_t *stream, uint64_t *seq)
{
    if (id == NULL) return MCP_EINVAL;
    const char *us = strchr(id, '_');
    if (us == NULL || !parse_u64(id, us, stream) ||
        !parse_u64(us + 1, us + 1 + strlen(us + 1), seq))
        return MCP_EINVAL;
    return MCP_OK;
}

int mcp_http_parse_listen(const char *listen, char *host, size_t host_size, unsigned *port)
{
    if (listen == NULL || host == NULL || port == NULL) return MCP_EINVAL;
    const char *colon = strrchr(listen, ':');
    if (colon == NULL || colon == listen) return MCP_EINVAL;
    const char *hb = listen, *he = colon;
    if (listen[0] == '[') {
        if (colon[-1] != ']') return MCP_EINVAL;
        hb = listen + 1;
        he = colon - 1;
    } else if (memchr(listen, ':', (size_t)(colon - listen))) {
        return MCP_EINVAL; /* an IPv6 literal needs brackets */
    }
    size_t n = (size_t)(he - hb);
    if (n == 0 || n >= host_size) return MCP_EINVAL;
    const char *p = colon + 1;
    if (*p == '\0' || strlen(p) > 5) return MCP_EINVAL;
    unsigned v = 0;
    for (; *p; p++) {
        if (!isdigit((unsigned char)*p)) return MCP_EINVAL;
        v = v * 10 + (unsigned)(*p - '0');
    }
    if (v > 65535) return MCP_EINVAL;
    memcpy(host, hb, n);
    host[n] = '\0';
    *port = v;
    return MCP_OK;
}
