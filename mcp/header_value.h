/* header_value.h - HTTP header values of the 2026-07-28 wire (SEP-2243), one encoder and one
 * decoder for both sides: the server checks Mcp-Name / Mcp-Param-* against the body
 * (transport_http.c), the downstream client sends them (client_http.c). Internal to mcp/. */
#ifndef PTC_MCP_HEADER_VALUE_H
#define PTC_MCP_HEADER_VALUE_H

#include <stdbool.h>
#include <stddef.h>

/* value as a header value into out (size bytes): literal when it is visible ASCII without
 * edge blanks (and does not look like the sentinel), else "=?base64?...?=" of its bytes.
 * False when it does not fit. */
bool mcp__header_value_encode(const char *value, char *out, size_t size);
/* The value a received header carries: got itself, or for "=?base64?...?=" its strict-base64
 * payload decoded into out (size bytes, NUL-terminated). NULL when the payload is not valid
 * base64 or does not fit. */
const char *mcp__header_value_decode(const char *got, char *out, size_t size);
/* True when name is an RFC 9110 token (what may follow "Mcp-Param-" in a header name). */
bool mcp__header_name_is_token(const char *name);

#endif
