/*
 * http_internal.h - pieces of the outbound HTTP(S) client shared between its files and its unit
 * tests. Not part of the public interface (mcp.h).
 */
#ifndef PTC_MCP_HTTP_INTERNAL_H
#define PTC_MCP_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest URL accepted, in bytes. */
#define MCP__HTTP_MAX_URL 8192
/* Longest host name (DNS limit) or IP literal, without brackets. */
#define MCP__HTTP_MAX_HOST 253

typedef struct mcp__http_url {
    bool tls;                          /* https */
    bool ipv6;                         /* host was a bracketed IPv6 literal */
    char host[MCP__HTTP_MAX_HOST + 1]; /* for DNS, SNI and the certificate check: no brackets */
    uint16_t port;                     /* explicit or the scheme's default */
    bool default_port;                 /* port was not written in the URL */
    char *target; /* path and query ("/" when empty), without the fragment; owned */
} mcp__http_url_t;

/**
 * Parses an absolute http:// or https:// URL. Userinfo ("user@"), an empty host, a bad port,
 * spaces or control bytes and other schemes are refused with MCP_EINVAL and a static reason in
 * *why (if not NULL). On MCP_OK the caller owns out->target (free with mcp__http_url_free).
 */
int mcp__http_url_parse(const char *url, mcp__http_url_t *out, const char **why);
void mcp__http_url_free(mcp__http_url_t *u);

#endif /* PTC_MCP_HTTP_INTERNAL_H */
