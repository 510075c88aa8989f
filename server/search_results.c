/* search_results.c - registry search results as search_tools returns them: the MCP
 * structuredContent and the text for the model. */
#include "tools.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_MAX (1u << 20) /* the rendered list never grows past this */

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

typedef struct out {
    char *p;
    size_t n, cap;
    int err;
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
    if (o->err) return;
    if (o->n + n + 1 > TEXT_MAX) {
        o->err = 1;
        return;
    }
    if (o->n + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 1024;
        while (cap < o->n + n + 1)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (p == NULL) {
            o->err = 1;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    o->p[o->n] = 0;
}

static void puts_(out_t *o, const char *s)
{
    put(o, s, strlen(s));
}

/* Appends s with newlines folded to spaces, cut to max bytes on a UTF-8 boundary. */
static void put_flat(out_t *o, const char *s, size_t max)
{
    size_t n = strlen(s);
    int cut = 0;
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
        cut = 1;
    }
    for (size_t i = 0; i < n; i++)
        put(o, s[i] == '\n' || s[i] == '\r' ? " " : s + i, 1);
    if (cut) puts_(o, "...");
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
    out_t o = {0};
    if (n == 0) puts_(&o, "No matching tools.");
    for (size_t i = 0; i < n; i++) {
        const reg_tool_t *t = res[i].tool;
        char head[REG_ID_MAX + 64];
        snprintf(head, sizeof head, "%zu. %s (score %.2f)", i + 1, t->id, (double)res[i].score);
        puts_(&o, head);
        if (t->description[0]) {
            puts_(&o, ": ");
            put_flat(&o, t->description, desc_max);
        }
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(t->input_schema, "properties");
        const cJSON *p;
        int first = 1;
        cJSON_ArrayForEach(p, props)
        {
            if (p->string == NULL) continue;
            puts_(&o, first ? " | params: " : ", ");
            first = 0;
            put_flat(&o, p->string, 64);
            if (is_required(t->input_schema, p->string)) puts_(&o, "*");
        }
        puts_(&o, "\n");
    }
    if (o.err) {
        free(o.p);
        return NULL;
    }
    return o.p;
}
