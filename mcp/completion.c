/* completion.c - completion/complete: suggestions for a prompt argument (ref/prompt) or a
 * resource template variable (ref/resource), from the completer registered with it. */
#include "internal.h"

#include <string.h>

#define MAX_COMPLETION_VALUE_BYTES 4096

static const cJSON *str_field(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v : NULL;
}

/* True if `arg` names a declared argument of a prompt, or a {variable} of a template. */
static bool knows_arg(const mcp__entry_t *e, bool prompt, const char *arg)
{
    if (prompt) {
        const cJSON *d;
        cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(e->listing, "arguments"))
        {
            if (strcmp(cJSON_GetObjectItemCaseSensitive(d, "name")->valuestring, arg) == 0)
                return true;
        }
        return false;
    }
    size_t n = strlen(arg);
    for (const char *p = strchr(e->key, '{'); p != NULL; p = strchr(p + 1, '{'))
        if (strncmp(p + 1, arg, n) == 0 && p[1 + n] == '}') return true;
    return false;
}

void mcp__completion_handle(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const cJSON *params)
{
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(params, "ref");
    const cJSON *arg = cJSON_GetObjectItemCaseSensitive(params, "argument");
    const cJSON *type = str_field(ref, "type");
    const cJSON *an = str_field(arg, "name");
    const cJSON *av = str_field(arg, "value");
    if (type == NULL || an == NULL || av == NULL) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "completion/complete needs params.ref.type and params.argument.name "
                          "and .value (strings)");
        return;
    }
    bool prompt = strcmp(type->valuestring, "ref/prompt") == 0;
    const cJSON *key = NULL;
    const mcp__entry_t *e = NULL;
    if (prompt) {
        key = str_field(ref, "name");
        if (key != NULL) e = mcp__table_find(&s->srv->prompts, key->valuestring);
    } else if (strcmp(type->valuestring, "ref/resource") == 0) {
        key = str_field(ref, "uri");
        if (key != NULL) e = mcp__table_find(&s->srv->templates, key->valuestring);
    } else {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "completion/complete: ref.type must be \"ref/prompt\" or "
                          "\"ref/resource\", not \"%.40s\"",
                          type->valuestring);
        return;
    }
    if (e == NULL) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS, "completion/complete: no %s %.200s",
                          prompt ? "prompt" : "resource template",
                          key != NULL ? key->valuestring : "(ref.name / ref.uri missing)");
        return;
    }
    if (!knows_arg(e, prompt, an->valuestring)) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "completion/complete: %.128s has no argument %.100s", e->key,
                          an->valuestring);
        return;
    }
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(params, "context"), "arguments");
    cJSON *values = NULL;
    int rc = MCP_OK;
    if (e->complete != NULL)
        rc = e->complete(an->valuestring, av->valuestring, cJSON_IsObject(ctx) ? ctx : NULL,
                         e->data, &values);
    else
        values = cJSON_CreateArray();
    if (rc < 0 || !cJSON_IsArray(values)) {
        cJSON_Delete(values);
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR,
                          "completion/complete for %.128s failed: %s", e->key,
                          rc < 0 ? mcp_strerror(rc) : "the completer returned no array");
        return;
    }
    /* Keep the first strings of sane size; say how many there were. */
    int total = 0;
    cJSON *kept = cJSON_CreateArray();
    const cJSON *v;
    cJSON_ArrayForEach(v, values)
    {
        if (!cJSON_IsString(v) || strlen(v->valuestring) > MAX_COMPLETION_VALUE_BYTES) continue;
        total++;
        if (kept != NULL && total <= MCP_MAX_COMPLETION_VALUES &&
            !cJSON_AddItemToArray(kept, cJSON_CreateString(v->valuestring))) {
            cJSON_Delete(kept);
            kept = NULL;
        }
    }
    cJSON_Delete(values);
    cJSON *res = cJSON_CreateObject();
    cJSON *c = cJSON_AddObjectToObject(res, "completion");
    bool ok = kept != NULL && c != NULL && cJSON_AddItemToObject(c, "values", kept);
    if (ok) kept = NULL;
    if (ok) ok = cJSON_AddNumberToObject(c, "total", total) != NULL;
    if (ok) ok = cJSON_AddBoolToObject(c, "hasMore", total > MCP_MAX_COMPLETION_VALUES) != NULL;
    cJSON_Delete(kept);
    if (!ok) {
        cJSON_Delete(res);
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    mcp__session_answer(s, b, mcp_jsonrpc_result(id, res));
}
