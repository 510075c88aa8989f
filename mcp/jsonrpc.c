/* jsonrpc.c - JSON-RPC 2.0 message classification and construction. */
#include "mcp.h"

#include "base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ids are strings or integers (MCP forbids null ids on requests; JSON-RPC discourages
 * fractional numbers, MCP requires integers). */
static bool id_valid(const cJSON *id)
{
    if (cJSON_IsString(id)) return true;
    if (!cJSON_IsNumber(id)) return false;
    double v = id->valuedouble;
    return isfinite(v) && v == floor(v) && fabs(v) <= 9007199254740991.0;
}

mcp_msg_kind_t mcp_jsonrpc_classify(const cJSON *msg, const char **why)
{
    const char *dummy;
    if (why == NULL) why = &dummy;
    *why = NULL;
    if (!cJSON_IsObject(msg)) {
        *why = "a JSON-RPC message must be an object";
        return MCP_MSG_INVALID;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");
    if (!cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0) {
        *why = "\"jsonrpc\" must be \"2.0\"";
        return MCP_MSG_INVALID;
    }
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(msg, "result");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(msg, "error");
    if (method != NULL) {
        if (!cJSON_IsString(method) || method->valuestring[0] == '\0') {
            *why = "\"method\" must be a non-empty string";
            return MCP_MSG_INVALID;
        }
        if (result != NULL || error != NULL) {
            *why = "a request must not carry \"result\" or \"error\"";
            return MCP_MSG_INVALID;
        }
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
        if (params != NULL && !cJSON_IsObject(params) && !cJSON_IsArray(params)) {
            *why = "\"params\" must be an object";
            return MCP_MSG_INVALID;
        }
        if (id == NULL) return MCP_MSG_NOTIFICATION;
        if (!id_valid(id)) {
            *why = "\"id\" must be a string or an integer";
            return MCP_MSG_INVALID;
        }
        return MCP_MSG_REQUEST;
    }
    if (result != NULL && error != NULL) {
        *why = "a response must not carry both \"result\" and \"error\"";
        return MCP_MSG_INVALID;
    }
    if (result != NULL) {
        if (!id_valid(id)) {
            *why = "a response needs a string or integer \"id\"";
            return MCP_MSG_INVALID;
        }
        return MCP_MSG_RESPONSE;
    }
    if (error != NULL) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
        if (!cJSON_IsObject(error) || !cJSON_IsNumber(code)) {
            *why = "\"error\" must be an object with a numeric \"code\"";
            return MCP_MSG_INVALID;
        }
        if (id != NULL && !cJSON_IsNull(id) && !id_valid(id)) {
            *why = "\"id\" must be a string, an integer or null";
            return MCP_MSG_INVALID;
        }
        return MCP_MSG_ERROR;
    }
    *why = "a message needs \"method\" (request or notification) or \"result\"/\"error\"";
    return MCP_MSG_INVALID;
}

/* The keys and "2.0" are constants, added without a copy (cJSON's *CS and reference items):
 * four allocations fewer per answer. cJSON_Duplicate and the replace functions copy them as
 * needed, and cJSON_Delete frees neither. */
static cJSON *envelope(const cJSON *id)
{
    cJSON *m = cJSON_CreateObject();
    if (m == NULL) return NULL;
    cJSON *ver = cJSON_CreateStringReference("2.0");
    if (ver == NULL || !cJSON_AddItemToObjectCS(m, "jsonrpc", ver)) {
        cJSON_Delete(ver);
        cJSON_Delete(m);
        return NULL;
    }
    cJSON *idc = id != NULL ? cJSON_Duplicate(id, true) : cJSON_CreateNull();
    if (idc == NULL || !cJSON_AddItemToObjectCS(m, "id", idc)) {
        cJSON_Delete(idc);
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

cJSON *mcp_jsonrpc_result(const cJSON *id, cJSON *result)
{
    cJSON *m = result != NULL ? envelope(id) : NULL;
    if (m == NULL || !cJSON_AddItemToObjectCS(m, "result", result)) {
        cJSON_Delete(m);
        cJSON_Delete(result);
        return NULL;
    }
    return m;
}

cJSON *mcp_jsonrpc_error(const cJSON *id, int code, const char *message, cJSON *data)
{
    cJSON *m = envelope(id);
    cJSON *e = cJSON_CreateObject();
    if (m == NULL || e == NULL || cJSON_AddNumberToObject(e, "code", code) == NULL ||
        cJSON_AddStringToObject(e, "message", message != NULL ? message : "error") == NULL) {
        cJSON_Delete(m);
        cJSON_Delete(e);
        cJSON_Delete(data);
        return NULL;
    }
    if (data != NULL && !cJSON_AddItemToObject(e, "data", data)) {
        cJSON_Delete(data);
        cJSON_Delete(e);
        cJSON_Delete(m);
        return NULL;
    }
    if (!cJSON_AddItemToObject(m, "error", e)) {
        cJSON_Delete(e);
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

cJSON *mcp_jsonrpc_request(const cJSON *id, const char *method, cJSON *params)
{
    cJSON *m = cJSON_CreateObject();
    if (m == NULL || cJSON_AddStringToObject(m, "jsonrpc", "2.0") == NULL) goto fail;
    if (id != NULL) {
        cJSON *idc = cJSON_Duplicate(id, true);
        if (idc == NULL || !cJSON_AddItemToObject(m, "id", idc)) {
            cJSON_Delete(idc);
            goto fail;
        }
    }
    if (cJSON_AddStringToObject(m, "method", method) == NULL) goto fail;
    if (params != NULL && !cJSON_AddItemToObject(m, "params", params)) goto fail;
    return m;
fail:
    cJSON_Delete(params);
    cJSON_Delete(m);
    return NULL;
}

/* --- printing ------------------------------------------------------------------------------ */

/* What cJSON prints for a number, without its sprintf/sscanf round trip for the integers that
 * ids, counts and codes are (that round trip was the largest cost of answering a ping). */
static int print_number(double v, ptc_buf_t *b)
{
    char num[32];
    size_t n;
    if (!isfinite(v)) {
        return ptc_buf_append(b, "null", 4);
    } else if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        /* Exact in a double, hence in an int64 too: digits from the end. */
        int64_t i = (int64_t)v;
        uint64_t u = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
        char *p = num + sizeof num;
        do {
            *--p = (char)('0' + u % 10);
            u /= 10;
        } while (u != 0);
        if (i < 0) *--p = '-';
        n = (size_t)(num + sizeof num - p);
        return ptc_buf_append(b, p, n);
    }
    /* As cJSON does: 15 digits when they give the same double back, else 17. */
    int k = snprintf(num, sizeof num, "%1.15g", v);
    if (k <= 0 || strtod(num, NULL) != v) k = snprintf(num, sizeof num, "%1.17g", v);
    if (k <= 0 || (size_t)k >= sizeof num) return PTC_EINVAL;
    return ptc_buf_append(b, num, (size_t)k);
}

#define KEY_FAST_MAX 60 /* longest object key printed in the same append as its comma */

/* A JSON string with the escapes cJSON uses: the two that must be escaped, the short forms of
 * control characters, \u00XX for the other ones; other bytes (UTF-8) as they are. */
static int print_string(const char *s, ptc_buf_t *b)
{
    static const char hex[] = "0123456789abcdef";
    if (s == NULL) s = "";
    ptc_buf_append(b, "\"", 1);
    const char *run = s;
    for (const char *p = s;; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        ptc_buf_append(b, run, (size_t)(p - run));
        if (c == '\0') break;
        char esc[6] = {'\\', 0};
        size_t n = 2;
        switch (c) {
        case '"':
        case '\\':
            esc[1] = (char)c;
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        ptc_buf_append(b, esc, n);
        run = p + 1;
    }
    return ptc_buf_append(b, "\"", 1);
}

static int print_value(const cJSON *item, ptc_buf_t *b, int depth)
{
    /* cJSON's own parser nests at most CJSON_NESTING_LIMIT deep; built trees are no deeper in
     * practice, and a bound keeps the recursion's stack bounded whatever is built. */
    if (depth > CJSON_NESTING_LIMIT) return PTC_EINVAL;
    switch (item->type & 0xFF) {
    case cJSON_False:
        return ptc_buf_append(b, "false", 5);
    case cJSON_True:
        return ptc_buf_append(b, "true", 4);
    case cJSON_NULL:
        return ptc_buf_append(b, "null", 4);
    case cJSON_Number:
        return print_number(item->valuedouble, b);
    case cJSON_String:
        return print_string(item->valuestring, b);
    case cJSON_Raw:
        return item->valuestring != NULL ? ptc_buf_str(b, item->valuestring) : PTC_EINVAL;
    case cJSON_Array:
    case cJSON_Object: {
        bool obj = (item->type & 0xFF) == cJSON_Object;
        char open = obj ? '{' : '[';
        for (const cJSON *c = item->child; c != NULL; c = c->next) {
            /* The bracket or comma, and the member's key, in one append when the key needs no
             * escape (every key we build): appends one byte at a time were a sixth of a
             * ping's cost. */
            char pre[KEY_FAST_MAX + 4];
            size_t n = 0;
            pre[n++] = c == item->child ? open : ',';
            if (obj) {
                size_t kl = c->string != NULL ? strlen(c->string) : 0;
                bool plain = kl <= KEY_FAST_MAX;
                for (size_t i = 0; plain && i < kl; i++) {
                    unsigned char k = (unsigned char)c->string[i];
                    plain = k >= 0x20 && k != '"' && k != '\\';
                }
                if (plain) {
                    pre[n++] = '"';
                    memcpy(pre + n, c->string, kl);
                    n += kl;
                    pre[n++] = '"';
                    pre[n++] = ':';
                    ptc_buf_append(b, pre, n);
                } else {
                    ptc_buf_append(b, pre, n);
                    print_string(c->string, b);
                    ptc_buf_append(b, ":", 1);
                }
            } else {
                ptc_buf_append(b, pre, n);
            }
            int rc = print_value(c, b, depth + 1);
            if (rc < 0) return rc;
        }
        if (item->child == NULL) return ptc_buf_append(b, obj ? "{}" : "[]", 2);
        return ptc_buf_append(b, obj ? "}" : "]", 1);
    }
    default:
        return PTC_EINVAL; /* cJSON_Invalid: cJSON refuses to print it too */
    }
}

int mcp_jsonrpc_print(const cJSON *item, ptc_buf_t *b)
{
    size_t mark = ptc_buf_len(b);
    int rc = item != NULL ? print_value(item, b, 0) : PTC_EINVAL;
    if (rc == 0) rc = ptc_buf_error(b);
    if (rc < 0) ptc_buf_truncate(b, mark);
    /* ENOMEM and the buffer's cap pass through (MCP_ENOMEM and MCP_ETOOBIG are base's codes). */
    return rc < 0 ? (rc == PTC_ENOMEM || rc == PTC_ETOOBIG ? rc : MCP_EINVAL) : MCP_OK;
}
