/* url.c - parsing of the absolute http(s) URLs the outbound client accepts. */
#include "url.h"
#include "httpc.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int fail(const char **why, const char *reason)
{
    if (why != NULL) *why = reason;
    return PTC_HTTP_EINVAL;
}

/* RFC 3986 reg-name characters we accept in a host name: letters, digits, '-', '.', '_'. */
static bool host_char_ok(char ch)
{
    return isalnum((unsigned char)ch) || ch == '-' || ch == '.' || ch == '_';
}

int ptc__http_url_parse(const char *url, ptc__http_url_t *out, const char **why)
{
    if (url == NULL || out == NULL) return fail(why, "no URL given");
    memset(out, 0, sizeof *out);
    size_t len = strlen(url);
    if (len > PTC__HTTP_MAX_URL) return fail(why, "URL is too long");
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)url[i];
        /* Spaces and control bytes would let a caller smuggle extra request lines. */
        if (ch <= 0x20 || ch == 0x7f) return fail(why, "URL contains a space or control byte");
    }

    const char *p;
    if (strncasecmp(url, "https://", 8) == 0) {
        out->tls = true;
        p = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        p = url + 7;
    } else {
        return fail(why, "URL must start with http:// or https://");
    }

    size_t auth_len = strcspn(p, "/?#");
    const char *auth_end = p + auth_len;
    if (memchr(p, '@', auth_len) != NULL)
        return fail(why, "credentials in the URL (user@host) are not supported; use a header");

    const char *host = p, *host_end;
    const char *after;
    if (*p == '[') {
        host = p + 1;
        host_end = memchr(host, ']', (size_t)(auth_end - host));
        if (host_end == NULL) return fail(why, "IPv6 address in the URL lacks its closing ']'");
        after = host_end + 1;
        out->ipv6 = true;
    } else {
        host_end = memchr(p, ':', auth_len);
        if (host_end == NULL) host_end = auth_end;
        after = host_end;
    }
    size_t host_len = (size_t)(host_end - host);
    if (host_len == 0) return fail(why, "URL has no host");
    if (host_len > PTC__HTTP_MAX_HOST) return fail(why, "host name in the URL is too long");
    memcpy(out->host, host, host_len);
    out->host[host_len] = '\0';
    if (out->ipv6) {
        unsigned char addr[16];
        if (inet_pton(AF_INET6, out->host, addr) != 1)
            return fail(why, "bracketed host is not an IPv6 address");
    } else {
        for (size_t i = 0; i < host_len; i++)
            if (!host_char_ok(out->host[i])) return fail(why, "host name has a bad character");
    }

    out->port = out->tls ? 443 : 80;
    out->default_port = true;
    if (after < auth_end) {
        if (*after != ':') return fail(why, "unexpected text after the host");
        const char *d = after + 1;
        if (d == auth_end) return fail(why, "empty port in the URL");
        unsigned long port = 0;
        for (; d < auth_end; d++) {
            if (!isdigit((unsigned char)*d)) return fail(why, "port is not a number");
            port = port * 10 + (unsigned long)(*d - '0');
            if (port > 65535) return fail(why, "port is out of range (1-65535)");
        }
        if (port == 0) return fail(why, "port is out of range (1-65535)");
        out->port = (uint16_t)port;
        out->default_port = false;
    }

    /* The fragment never goes on the wire. */
    size_t target_len = strcspn(auth_end, "#");
    bool need_slash = target_len == 0 || auth_end[0] == '?';
    out->target = malloc(target_len + 2);
    if (out->target == NULL) {
        if (why != NULL) *why = "out of memory";
        return PTC_HTTP_ENOMEM;
    }
    size_t o = 0;
    if (need_slash) out->target[o++] = '/';
    memcpy(out->target + o, auth_end, target_len);
    out->target[o + target_len] = '\0';
    return PTC_HTTP_OK;
}

void ptc__http_url_free(ptc__http_url_t *u)
{
    if (u == NULL) return;
    free(u->target);
    u->target = NULL;
}
