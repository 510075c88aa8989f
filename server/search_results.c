/* search_results.c - registry search results as search_tools returns them: the MCP
 * structuredContent and the text for the model. */
#include "tools.h"

#include "base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *ptc_search_results_json(const reg_registry_t *reg, const reg_result_t *res, size_t n)
{
    if (n > 0 && res == NULL) return NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *tools = cJSON_CreateArray();
    if (root == NULL || tools == NULL || !cJSON_AddItemToObject(root, "tools", tools)) {
        cJSON_Delete(root);
        cJSON_Delete(tools);
        return NULL;
    }
    if (cJSON_AddStringToObject(root, "embedder", reg_registry_embedder_name(reg)) == NULL) {
        cJSON_Delete(root);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const reg_tool_t *t = res[i].tool;
        cJSON *o = cJSON_CreateObject();
        cJSON *schema = t ? cJSON_Duplicate(t->input_schema, 1) : NULL;
        if (o == NULL || schema == NULL || !cJSON_AddItemToArray(tools, o)) {
            cJSON_Delete(o);
            cJSON_Delete(schema);
            cJSON_Delete(root);
            return NULL;
        }
        double score = round((double)res[i].score * 1e4) / 1e4;
        if (!cJSON_AddStringToObject(o, "id", t->id) ||
            !cJSON_AddStringToObject(o, "server", t->server) ||
            !cJSON_AddStringToObject(o, "name", t->name) ||
            !cJSON_AddStringToObject(o, "description", t->description) ||
            !cJSON_AddItemToObject(o, "inputSchema", schema)) {
            if (cJSON_GetObjectItemCaseSensitive(o, "inputSchema") != schema) cJSON_Delete(schema);
            cJSON_Delete(root);
            return NULL;
        }
        if (!cJSON_AddNumberToObject(o, "score", score)) {
            cJSON_Delete(root);
            return NULL;
        }
    }
    return root;
}

/* Appends s with newlines folded to spaces, cut to max bytes on a UTF-8 boundary. */
static void put_flat(ptc_buf_t *o, const char *s, size_t max)
{
    size_t len = strlen(s), n = ptc_utf8_cut(s, len, max);
    for (size_t i = 0; i < n; i++)
        ptc_buf_append(o, s[i] == '\n' || s[i] == '\r' ? " " : s + i, 1);
    if (n < len) ptc_buf_str(o, "...");
}

static int is_required(const cJSON *schema, const char *name)
{
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(schema, "required");
    const cJSON *r;
    cJSON_ArrayForEach(r, req)
    {
        if (cJSON_IsString(r) && strcmp(r->valuestring, name) == 0) return 1;
    }
    return 0;
}

char *ptc_search_results_text(const reg_result_t *res, size_t n, size_t desc_max)
{
    if (n > 0 && res == NULL) return NULL;
    if (desc_max == 0) desc_max = 200;
    ptc_buf_t o;
    ptc_buf_init(&o, PTC_CAP_SEARCH_TEXT);
    if (n == 0) ptc_buf_str(&o, "No matching tools.");
    for (size_t i = 0; i < n; i++) {
        const reg_tool_t *t = res[i].tool;
        char head[REG_ID_MAX + 64];
        snprintf(head, sizeof head, "%zu. %s (score %.2f)", i + 1, t->id, (double)res[i].score);
        ptc_buf_str(&o, head);
        if (t->description[0]) {
            ptc_buf_str(&o, ": ");
            put_flat(&o, t->description, desc_max);
        }
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(t->input_schema, "properties");
        const cJSON *p;
        int first = 1;
        cJSON_ArrayForEach(p, props)
        {
            if (p->string == NULL) continue;
            ptc_buf_str(&o, first ? " | params: " : ", ");
            first = 0;
            put_flat(&o, p->string, 64);
            if (is_required(t->input_schema, p->string)) ptc_buf_str(&o, "*");
        }
        ptc_buf_str(&o, "\n");
    }
    return ptc_buf_take(&o, NULL); /* NULL past the cap or on ENOMEM */
}
