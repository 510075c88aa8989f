/*
 * url.h - the URL parser of the outbound HTTP(S) client, shared between its files and its unit
 * tests. Not part of the public interface (httpc.h).
 */
#ifndef PTC_HTTPC_URL_H
#define PTC_HTTPC_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest URL accepted, in bytes. */
#define PTC__HTTP_MAX_URL 8192
/* Longest host name (DNS limit) or IP literal, without brackets. */
#define PTC__HTTP_MAX_HOST 253

typedef struct ptc__http_url {
    bool tls;                          /* https */
    bool ipv6;                         /* host was a bracketed IPv6 literal */
    char host[PTC__HTTP_MAX_HOST + 1]; /* for DNS, SNI and the certificate check: no brackets */
    uint16_t port;                     /* explicit or the scheme's default */
    bool default_port;                 /* port was not written in the URL */
    char *target; /* path and query ("/" when empty), without the fragment; owned */
} ptc__http_url_t;

/**
 * Parses an absolute http:// or https:// URL. Userinfo ("user@"), an empty host, a bad port,
 * spaces or control bytes and other schemes are refused with PTC_HTTP_EINVAL and a static reason in
 * *why (if not NULL). On PTC_HTTP_OK the caller owns out->target (free with ptc__http_url_free).
 */
int ptc__http_url_parse(const char *url, ptc__http_url_t *out, const char **why);
void ptc__http_url_free(ptc__http_url_t *u);

#endif /* PTC_HTTPC_URL_H */
