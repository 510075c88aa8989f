/* schema.c - validation of tool arguments against the subset of JSON Schema that tool
 * inputSchemas use in practice. Unknown keywords are ignored, as JSON Schema says. */
#include "mcp.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#define SCHEMA_MAX_DEPTH 64

typedef struct vctx {
    char *msg;
    size_t size;
} vctx_t;

static const char *json_type_name(const cJSON *v)
{
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "boolean";
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        return (isfinite(d) && d == floor(d)) ? "integer" : "number";
    }
    if (cJSON_IsString(v)) return "string";
    if (cJSON_IsArray(v)) return "array";
    if (cJSON_IsObject(v)) return "object";
    return "unknown";
}

static bool type_matches(const char *want, const cJSON *v)
{
    const char *have = json_type_name(v);
    if (strcmp(want, have) == 0) return true;
    return strcmp(want, "number") == 0 && strcmp(have, "integer") == 0;
}

static int fail(vctx_t *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(vctx_t *c, const char *path, const char *fmt, ...)
{
    char reason[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    snprintf(c->msg, c->size, "%s: %s", path[0] != '\0' ? path : "arguments", reason);
    return MCP_EINVAL;
}

static void child_path(char *out, size_t size, const char *path, const char *key, int index)
{
    if (key != NULL)
        snprintf(out, size, "%s%s%s", path, path[0] != '\0' ? "." : "", key);
    else
        snprintf(out, size, "%s[%d]", path, index);
}

static int validate(vctx_t *c, const cJSON *schema, const cJSON *v, const char *path, int depth);

static int check_type(vctx_t *c, const cJSON *schema, const cJSON *v, const char *path)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    if (cJSON_IsString(type)) {
        if (!type_matches(type->valuestring, v))
            return fail(c, path, "expected %s, got %s", type->valuestring, json_type_name(v));
    } else if (cJSON_IsArray(type)) {
        char list[128] = "";
        size_t at = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, type)
        {
            if (cJSON_IsString(t) && type_matches(t->valuestring, v)) return MCP_OK;
            if (cJSON_IsString(t) && at + strlen(t->valuestring) + 4 < sizeof list)
                at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", at ? " or " : "",
                                       t->valuestring);
        }
        return fail(c, path, "expected %s, got %s", list, json_type_name(v));
    }
    return MCP_OK;
}

static int check_enum(vctx_t *c, const cJSON *schema, const cJSON *v, const char *path)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum");
    if (cJSON_IsArray(en)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, en)
        {
            if (cJSON_Compare(e, v, true)) return MCP_OK;
        }
        char *allowed = cJSON_PrintUnformatted(en);
        int rc = fail(c, path, "must be one of %s", allowed != NULL ? allowed : "the enum");
        cJSON_free(allowed);
        return rc;
    }
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(schema, "const");
    if (cst != NULL && !cJSON_Compare(cst, v, true)) return fail(c, path, "has the wrong value");
    return MCP_OK;
}

static int check_number(vctx_t *c, const cJSON *schema, const cJSON *v, const char *path)
{
    if (!cJSON_IsNumber(v)) return MCP_OK;
    double d = v->valuedouble;
    char buf[64];
    const cJSON *k;
    if ((k = cJSON_GetObjectItemCaseSensitive(schema, "minimum")) && cJSON_IsNumber(k) &&
        d < k->valuedouble) {
        snprintf(buf, sizeof buf, "%g", k->valuedouble);
        return fail(c, path, "must be >= %s", buf);
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(schema, "maximum")) && cJSON_IsNumber(k) &&
        d > k->valuedouble) {
        snprintf(buf, sizeof buf, "%g", k->valuedouble);
        return fail(c, path, "must be <= %s", buf);
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(schema, "exclusiveMinimum")) && cJSON_IsNumber(k) &&
        d <= k->valuedouble) {
        snprintf(buf, sizeof buf, "%g", k->valuedouble);
        return fail(c, path, "must be > %s", buf);
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(schema, "exclusiveMaximum")) && cJSON_IsNumber(k) &&
        d >= k->valuedouble) {
        snprintf(buf, sizeof buf, "%g", k->valuedouble);
        return fail(c, path, "must be < %s", buf);
    }
    return MCP_OK;
}

static int check_count(vctx_t *c, const cJSON *schema, const char *path, size_t n,
                       const char *min_key, const char *max_key, const char *unit)
{
    const cJSON *k;
    char buf[64];
    if ((k = cJSON_GetObjectItemCaseSensitive(schema, min_key)) && cJSON_IsNumber(k) &&
        (double)n < k->valuedouble) {
        snprintf(buf, sizeof buf, "%g", k->valuedouble);
        return fail(c, path, "needs at least %s %s", buf, unit);
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(schema, max_key)) && cJSON_IsNumber(k) &&
        (double)n > k->valuedouble) {
        snprintf(buf, sizeof buf, "%g", k->valuedouble);
        return fail(c, path, "allows at most %s %s", buf, unit);
    }
    return MCP_OK;
}

static int check_object(vctx_t *c, const cJSON *schema, const cJSON *v, const char *path, int depth)
{
    if (!cJSON_IsObject(v)) return MCP_OK;
    char sub[512];
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(schema, "required");
    const cJSON *r;
    cJSON_ArrayForEach(r, req)
    {
        if (cJSON_IsString(r) && cJSON_GetObjectItemCaseSensitive(v, r->valuestring) == NULL) {
            child_path(sub, sizeof sub, path, r->valuestring, 0);
            return fail(c, sub, "is required but missing");
        }
    }
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
    const cJSON *field;
    cJSON_ArrayForEach(field, v)
    {
        child_path(sub, sizeof sub, path, field->string, 0);
        const cJSON *ps =
            cJSON_IsObject(props) ? cJSON_GetObjectItemCaseSensitive(props, field->string) : NULL;
        if (ps != NULL) {
            int rc = validate(c, ps, field, sub, depth + 1);
            if (rc < 0) return rc;
        } else if (cJSON_IsFalse(addl)) {
            return fail(c, sub, "is not an allowed property");
        } else if (cJSON_IsObject(addl)) {
            int rc = validate(c, addl, field, sub, depth + 1);
            if (rc < 0) return rc;
        }
    }
    return check_count(c, schema, path, (size_t)cJSON_GetArraySize(v), "minProperties",
                       "maxProperties", "properties");
}

static int check_array(vctx_t *c, const cJSON *schema, const cJSON *v, const char *path, int depth)
{
    if (!cJSON_IsArray(v)) return MCP_OK;
    int rc = check_count(c, schema, path, (size_t)cJSON_GetArraySize(v), "minItems", "maxItems",
                         "items");
    if (rc < 0) return rc;
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
    if (!cJSON_IsObject(items)) return MCP_OK;
    char sub[512];
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
    {
        child_path(sub, sizeof sub, path, NULL, i++);
        rc = validate(c, items, e, sub, depth + 1);
        if (rc < 0) return rc;
    }
    return MCP_OK;
}

static int validate(vctx_t *c, const cJSON *schema, const cJSON *v, const char *path, int depth)
{
    if (depth > SCHEMA_MAX_DEPTH) return fail(c, path, "is nested too deeply");
    if (cJSON_IsFalse(schema)) return fail(c, path, "is not allowed");
    if (!cJSON_IsObject(schema)) return MCP_OK; /* true or unknown: anything goes */
    int rc;
    if ((rc = check_type(c, schema, v, path)) < 0) return rc;
    if ((rc = check_enum(c, schema, v, path)) < 0) return rc;
    if ((rc = check_number(c, schema, v, path)) < 0) return rc;
    if (cJSON_IsString(v) &&
        (rc = check_count(c, schema, path, ptc_utf8_count(v->valuestring, strlen(v->valuestring)),
                          "minLength", "maxLength", "characters")) < 0)
        return rc;
    if ((rc = check_object(c, schema, v, path, depth)) < 0) return rc;
    return check_array(c, schema, v, path, depth);
}

int mcp_schema_validate(const cJSON *schema, const cJSON *value, char *msg, size_t msg_size)
{
    char dummy[1];
    vctx_t c = {msg != NULL ? msg : dummy, msg != NULL ? msg_size : sizeof dummy};
    if (c.size > 0) c.msg[0] = '\0';
    return validate(&c, schema, value, "", 0);
}
