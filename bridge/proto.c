/* proto.c - parsing bridge request lines and building answer lines (bridge.h). */
#include "bridge.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ptc_bridge_strerror(int err)
{
    switch (err) {
        PTC_BRIDGE_ERRORS(PTC_ERR_CASE)
    }
    return mcp_strerror(err);
}

static void set_msg(char *msg, size_t msg_size, const char *text)
{
    if (msg && msg_size) snprintf(msg, msg_size, "%s", text);
}

void ptc_bridge_req_clear(ptc_bridge_req_t *req)
{
    if (!req) return;
    free(req->server);
    free(req->tool);
    free(req->query);
    free(req->category);
    cJSON_Delete(req->arguments);
    cJSON_Delete(req->record);
    memset(req, 0, sizeof *req);
    req->id = -1;
}

/* A bounded, NUL-free copy of a JSON string member; NULL with *rc set when absent or bad. */
static char *take_string(const cJSON *obj, const char *key, size_t max, bool allow_empty, int *rc,
                         char *msg, size_t msg_size)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    char buf[160];
    if (!cJSON_IsString(it) || !it->valuestring) {
        snprintf(buf, sizeof buf, "params.%s must be a string", key);
        set_msg(msg, msg_size, buf);
        *rc = PTC_BRIDGE_EINVAL;
        return NULL;
    }
    size_t n = strlen(it->valuestring);
    if (n > max) {
        snprintf(buf, sizeof buf, "params.%s is longer than %zu bytes", key, max);
        set_msg(msg, msg_size, buf);
        *rc = PTC_BRIDGE_ETOOBIG;
        return NULL;
    }
    if (n == 0 && !allow_empty) {
        snprintf(buf, sizeof buf, "params.%s must not be empty", key);
        set_msg(msg, msg_size, buf);
        *rc = PTC_BRIDGE_EINVAL;
        return NULL;
    }
    char *s = malloc(n + 1);
    if (!s) {
        set_msg(msg, msg_size, "out of memory");
        *rc = PTC_BRIDGE_ENOMEM;
        return NULL;
    }
    memcpy(s, it->valuestring, n + 1);
    return s;
}

/* An integral JSON number within [lo, hi]; false otherwise. */
static bool int_in_range(const cJSON *it, double lo, double hi, int64_t *out)
{
    if (!cJSON_IsNumber(it)) return false;
    double d = it->valuedouble;
    if (!(d >= lo && d <= hi)) return false; /* also rejects NaN */
    int64_t v = (int64_t)d;
    if ((double)v != d) return false;
    *out = v;
    return true;
}

/* An optional filter string of a search: absent or null leaves *out NULL; anything else must
 * be a non-empty string of at most PTC_BRIDGE_NAME_MAX bytes. False with *rc set when bad. */
static bool take_filter(const cJSON *params, const char *key, char **out, int *rc, char *msg,
                        size_t msg_size)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(params, key);
    if (it == NULL || cJSON_IsNull(it)) return true;
    *out = take_string(params, key, PTC_BRIDGE_NAME_MAX, false, rc, msg, msg_size);
    return *out != NULL;
}

static int parse_params(cJSON *params, ptc_bridge_req_t *req, char *msg, size_t msg_size)
{
    int rc = PTC_BRIDGE_OK;
    switch (req->method) {
    case PTC_BRIDGE_CALL: {
        req->server = take_string(params, "server", PTC_BRIDGE_NAME_MAX, false, &rc, msg, msg_size);
        if (!req->server) return rc;
        req->tool = take_string(params, "tool", PTC_BRIDGE_NAME_MAX, false, &rc, msg, msg_size);
        if (!req->tool) return rc;
        cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
        if (!args || cJSON_IsNull(args)) {
            req->arguments = cJSON_CreateObject();
            if (!req->arguments) return PTC_BRIDGE_ENOMEM;
            return PTC_BRIDGE_OK;
        }
        if (!cJSON_IsObject(args)) {
            set_msg(msg, msg_size, "params.arguments must be an object of argument names");
            return PTC_BRIDGE_EINVAL;
        }
        req->arguments = cJSON_DetachItemViaPointer(params, args);
        return PTC_BRIDGE_OK;
    }
    case PTC_BRIDGE_SEARCH: {
        req->query = take_string(params, "query", PTC_BRIDGE_QUERY_MAX, false, &rc, msg, msg_size);
        if (!req->query) return rc;
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(params, "top_k");
        req->top_k = PTC_BRIDGE_TOPK_DEF;
        if (k && !cJSON_IsNull(k)) {
            int64_t v;
            if (!int_in_range(k, 1, PTC_BRIDGE_TOPK_MAX, &v)) {
                set_msg(msg, msg_size, "params.top_k must be an integer from 1 to 50");
                return PTC_BRIDGE_EINVAL;
            }
            req->top_k = (int)v;
        }
        if (!take_filter(params, "server", &req->server, &rc, msg, msg_size) ||
            !take_filter(params, "category", &req->category, &rc, msg, msg_size))
            return rc;
        return PTC_BRIDGE_OK;
    }
    case PTC_BRIDGE_EMIT: {
        cJSON *rec = cJSON_GetObjectItemCaseSensitive(params, "record");
        if (!rec) {
            set_msg(msg, msg_size, "params.record is missing");
            return PTC_BRIDGE_EINVAL;
        }
        req->record = cJSON_DetachItemViaPointer(params, rec);
        return PTC_BRIDGE_OK;
    }
    }
    return PTC_BRIDGE_EINVAL;
}

int ptc_bridge_parse(const char *line, size_t len, size_t max_line, ptc_bridge_req_t *req,
                     char *msg, size_t msg_size)
{
    if (!req) return PTC_BRIDGE_EINVAL;
    memset(req, 0, sizeof *req);
    req->id = -1;
    if (!line) {
        set_msg(msg, msg_size, "no line");
        return PTC_BRIDGE_EINVAL;
    }
    if (max_line == 0) max_line = PTC_BRIDGE_LINE_MAX;
    req->line_bytes = len;
    if (len > max_line) {
        char buf[128];
        snprintf(buf, sizeof buf, "the request line is longer than %zu bytes", max_line);
        set_msg(msg, msg_size, buf);
        return PTC_BRIDGE_ETOOBIG;
    }
    size_t n = len;
    if (n && line[n - 1] == '\n') n--;
    if (n && line[n - 1] == '\r') n--;
    /* cJSON stops at a NUL and would accept "{...}\0junk"; one line must be one whole value. */
    if (memchr(line, '\0', n)) {
        set_msg(msg, msg_size, "the request line contains a NUL byte");
        return PTC_BRIDGE_EINVAL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(line, n, &end, false);
    if (!root) {
        set_msg(msg, msg_size, "the request line is not valid JSON");
        return PTC_BRIDGE_EINVAL;
    }
    int rc = PTC_BRIDGE_EINVAL;
    for (const char *p = end; p && p < line + n; p++) {
        if (*p != ' ' && *p != '\t') {
            set_msg(msg, msg_size, "the request line holds more than one JSON value");
            goto out;
        }
    }
    if (!cJSON_IsObject(root)) {
        set_msg(msg, msg_size, "a request must be a JSON object");
        goto out;
    }
    int64_t id;
    if (!int_in_range(cJSON_GetObjectItemCaseSensitive(root, "id"), 1, (double)PTC_BRIDGE_ID_MAX,
                      &id)) {
        set_msg(msg, msg_size, "the request id must be an integer from 1 to 2^53-1");
        goto out;
    }
    req->id = id;
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(root, "method");
    const char *m = cJSON_IsString(method) ? method->valuestring : NULL;
    if (m && strcmp(m, "call") == 0) {
        req->method = PTC_BRIDGE_CALL;
    } else if (m && strcmp(m, "search") == 0) {
        req->method = PTC_BRIDGE_SEARCH;
    } else if (m && strcmp(m, "emit") == 0) {
        req->method = PTC_BRIDGE_EMIT;
    } else {
        set_msg(msg, msg_size, "method must be \"call\", \"search\" or \"emit\"");
        goto out;
    }
    cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "params");
    if (!cJSON_IsObject(params)) {
        set_msg(msg, msg_size, "params must be an object");
        goto out;
    }
    rc = parse_params(params, req, msg, msg_size);
out:
    cJSON_Delete(root);
    if (rc != PTC_BRIDGE_OK) {
        int64_t keep = req->id;
        size_t bytes = req->line_bytes;
        ptc_bridge_req_clear(req);
        req->id = keep;
        req->line_bytes = bytes;
    }
    return rc;
}

/* "{"id":N," + body + "}\n" without duplicating a possibly large result tree. */
static char *frame(int64_t id, const char *key, const char *body, size_t *len)
{
    char head[64];
    int h = id < 0 ? snprintf(head, sizeof head, "{\"id\":null,\"%s\":", key)
                   : snprintf(head, sizeof head, "{\"id\":%" PRId64 ",\"%s\":", id, key);
    if (h < 0 || (size_t)h >= sizeof head) return NULL;
    size_t b = strlen(body);
    size_t total = (size_t)h + b + 2;
    char *line = malloc(total + 1);
    if (!line) return NULL;
    memcpy(line, head, (size_t)h);
    memcpy(line + h, body, b);
    line[total - 2] = '}';
    line[total - 1] = '\n';
    line[total] = '\0';
    if (len) *len = total;
    return line;
}

char *ptc_bridge_answer_result(int64_t id, const cJSON *result, size_t *len)
{
    if (!result) return frame(id, "result", "null", len);
    char *body = cJSON_PrintUnformatted(result);
    if (!body) return NULL;
    char *line = frame(id, "result", body, len);
    free(body);
    return line;
}

char *ptc_bridge_answer_error(int64_t id, const char *code, const char *message, size_t *len)
{
    cJSON *err = cJSON_CreateObject();
    if (!err) return NULL;
    char *line = NULL;
    if (cJSON_AddStringToObject(err, "code", code ? code : PTC_BRIDGE_E_INVALID) &&
        cJSON_AddStringToObject(err, "message", message ? message : "")) {
        char *body = cJSON_PrintUnformatted(err);
        if (body) {
            line = frame(id, "error", body, len);
            free(body);
        }
    }
    cJSON_Delete(err);
    return line;
}
