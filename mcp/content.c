/* content.c - content blocks (text, image, audio, embedded resources) as tool results, prompt
 * messages and sampling use them, and their validation. */
#include "internal.h"

#include <stdarg.h>
#include <string.h>

cJSON *mcp_text_block(const char *text)
{
    if (text == NULL) return NULL;
    cJSON *b = cJSON_CreateObject();
    if (b == NULL || cJSON_AddStringToObject(b, "type", "text") == NULL ||
        cJSON_AddStringToObject(b, "text", text) == NULL) {
        cJSON_Delete(b);
        return NULL;
    }
    return b;
}

cJSON *mcp_media_block(const char *type, const char *base64, const char *mime_type)
{
    if (type == NULL || base64 == NULL || mime_type == NULL) return NULL;
    cJSON *b = cJSON_CreateObject();
    if (b == NULL || cJSON_AddStringToObject(b, "type", type) == NULL ||
        cJSON_AddStringToObject(b, "data", base64) == NULL ||
        cJSON_AddStringToObject(b, "mimeType", mime_type) == NULL) {
        cJSON_Delete(b);
        return NULL;
    }
    return b;
}

cJSON *mcp_resource_block(const char *uri, const char *mime_type, const char *text,
                          const char *blob)
{
    if (uri == NULL || (text == NULL) == (blob == NULL)) return NULL;
    cJSON *b = cJSON_CreateObject();
    cJSON *r = cJSON_CreateObject();
    bool ok = b != NULL && r != NULL && cJSON_AddStringToObject(b, "type", "resource") != NULL &&
              cJSON_AddStringToObject(r, "uri", uri) != NULL;
    if (ok && mime_type != NULL) ok = cJSON_AddStringToObject(r, "mimeType", mime_type) != NULL;
    if (ok) ok = cJSON_AddStringToObject(r, text ? "text" : "blob", text ? text : blob) != NULL;
    if (ok) ok = cJSON_AddItemToObject(b, "resource", r);
    if (!ok) {
        cJSON_Delete(r);
        cJSON_Delete(b);
        return NULL;
    }
    return b;
}

static int fail(char *msg, size_t msg_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *msg, size_t msg_size, const char *fmt, ...)
{
    if (msg != NULL && msg_size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msg_size, fmt, ap);
        va_end(ap);
    }
    return MCP_EINVAL;
}

/* Standard base64 (RFC 4648 section 4) with optional '=' padding at the end only. */
static bool is_base64(const char *s)
{
    size_t n = strlen(s), pad = 0;
    while (pad < n && pad < 2 && s[n - 1 - pad] == '=')
        pad++;
    if ((n % 4) != 0 && pad > 0) return false;
    for (size_t i = 0; i < n - pad; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/'))
            return false;
    }
    return (n - pad) % 4 != 1;
}

static const char *str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int mcp_content_validate(const cJSON *block, char *msg, size_t msg_size)
{
    if (!cJSON_IsObject(block)) return fail(msg, msg_size, "a content block must be an object");
    const char *type = str(block, "type");
    if (type == NULL) return fail(msg, msg_size, "content block: type must be a string");
    if (strcmp(type, "text") == 0) {
        if (str(block, "text") == NULL)
            return fail(msg, msg_size, "text block: text must be a string");
    } else if (strcmp(type, "image") == 0 || strcmp(type, "audio") == 0) {
        const char *data = str(block, "data");
        if (data == NULL || !is_base64(data))
            return fail(msg, msg_size, "%s block: data must be a base64 string", type);
        if (str(block, "mimeType") == NULL)
            return fail(msg, msg_size, "%s block: mimeType must be a string", type);
    } else if (strcmp(type, "resource") == 0) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(block, "resource");
        if (!cJSON_IsObject(r)) return fail(msg, msg_size, "resource block: resource missing");
        if (str(r, "uri") == NULL)
            return fail(msg, msg_size, "resource block: resource.uri must be a string");
        const char *text = str(r, "text"), *blob = str(r, "blob");
        if ((text == NULL) == (blob == NULL))
            return fail(msg, msg_size, "resource block: resource needs either text or blob");
        if (blob != NULL && !is_base64(blob))
            return fail(msg, msg_size, "resource block: resource.blob must be base64");
    } else if (strcmp(type, "resource_link") == 0) {
        if (str(block, "uri") == NULL || str(block, "name") == NULL)
            return fail(msg, msg_size, "resource_link block: uri and name must be strings");
    } else {
        return fail(msg, msg_size, "content block: unknown type \"%.40s\"", type);
    }
    return MCP_OK;
}
