/* search_results.c - registry search results as search_tools returns them: the MCP
 * structuredContent and the text for the model. */
#include "tools.h"

#include "base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* search_tools as tools/list shows it: what it takes, what it does, what it returns (what
 * ptc_search_results_json and ptc_search_results_finish build). */
const char ptc_search_input_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"query\":{\"type\":\"string\",\"minLength\":1,\"description\":\"What you want to do, in "
    "plain words (e.g. 'create a ticket in the bug tracker').\"},"
    "\"top_k\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50,\"description\":\"How many "
    "tools to return (default 5).\"},"
    "\"server\":{\"type\":\"string\",\"description\":\"Only tools of this server.\"},"
    "\"category\":{\"type\":\"string\",\"description\":\"Only tools of this category (a "
    "server's tools are in its own name's category unless configured otherwise).\"}},"
    "\"required\":[\"query\"],\"additionalProperties\":false}";

const char ptc_search_description[] =
    "Find tools by describing what you want to do. Returns the best matching tools of the "
    "configured MCP servers, ranked by meaning, with their ids, descriptions and input schemas.";

const char ptc_search_output_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"embedder\":{\"type\":\"string\"},"
    "\"tools\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"string\"},\"server\":{\"type\":\"string\"},\"name\":{\"type\":\"string\"},"
    "\"description\":{\"type\":\"string\"},\"inputSchema\":{\"type\":\"object\"},"
    "\"score\":{\"type\":\"number\"},\"category\":{\"type\":\"string\"}},"
    "\"required\":[\"id\",\"server\",\"name\",\"description\",\"inputSchema\",\"score\","
    "\"category\"]}},"
    "\"servers\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},\"state\":{\"type\":\"string\"},"
    "\"tools\":{\"type\":\"integer\"},\"reason\":{\"type\":\"string\"}},"
    "\"required\":[\"name\",\"state\",\"tools\"]}},"
    "\"index\":{\"type\":\"object\",\"properties\":{"
    "\"tools\":{\"type\":\"integer\"},\"indexed\":{\"type\":\"integer\"},"
    "\"pending\":{\"type\":\"integer\"},\"dense\":{\"type\":\"boolean\"}}}},"
    "\"required\":[\"embedder\",\"tools\"]}";

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
        if (!cJSON_AddNumberToObject(o, "score", score) ||
            !cJSON_AddStringToObject(o, "category", t->category)) {
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
        snprintf(head, sizeof head, "%zu. %s (score %.2f; category ", i + 1, t->id,
                 (double)res[i].score);
        ptc_buf_str(&o, head);
        put_flat(&o, t->category, 64);
        ptc_buf_str(&o, ")");
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

/* "; 12 of 618 tools indexed so far, the rest found by words only" when the index is partial,
 * "; ranked by words only" when the embedder took no part: a partial answer never looks whole. */
static void index_coverage(const reg_search_info_t *info, char *buf, size_t size)
{
    buf[0] = '\0';
    if (info->pending > 0)
        snprintf(buf, size, "; %zu of %zu tools indexed so far, the rest found by words only",
                 info->indexed, info->tools);
    else if (!info->dense && info->tools > 0)
        snprintf(buf, size, "; ranked by words only");
}

/* structuredContent.index: {"tools", "indexed", "pending", "dense"}. */
static bool add_index_info(cJSON *sc, const reg_search_info_t *info)
{
    cJSON *ix = cJSON_AddObjectToObject(sc, "index");
    return ix != NULL && cJSON_AddNumberToObject(ix, "tools", (double)info->tools) != NULL &&
           cJSON_AddNumberToObject(ix, "indexed", (double)info->indexed) != NULL &&
           cJSON_AddNumberToObject(ix, "pending", (double)info->pending) != NULL &&
           cJSON_AddBoolToObject(ix, "dense", info->dense) != NULL;
}

void ptc_search_results_done(ptc_search_done_cb done, void *data, const reg_registry_t *reg,
                             int err, const reg_result_t *res, size_t n, const char *msg)
{
    if (err < 0) {
        done(data, MCP_EINVAL, NULL, msg);
        return;
    }
    cJSON *sc = ptc_search_results_json(reg, res, n);
    if (sc == NULL) {
        done(data, MCP_ENOMEM, NULL, "out of memory");
        return;
    }
    done(data, 0, sc, NULL);
    cJSON_Delete(sc);
}

void ptc_search_results_finish(mcp_call_t *call, const reg_registry_t *reg, const reg_result_t *res,
                               size_t n, const reg_search_info_t *info, const reg_filter_t *f,
                               const char *servers, const char *starting, cJSON *servers_json)
{
    cJSON *sc = ptc_search_results_json(reg, res, n);
    if (sc != NULL && !add_index_info(sc, info)) {
        cJSON_Delete(sc);
        sc = NULL;
    }
    if (sc != NULL && servers_json != NULL && cJSON_AddItemToObject(sc, "servers", servers_json))
        servers_json = NULL;
    cJSON_Delete(servers_json);
    char *list = ptc_search_results_text(res, n, 0);
    reg_registry_stats_t st;
    reg_registry_stats(reg, &st);
    size_t len = (list ? strlen(list) : 0) + strlen(servers) + strlen(starting) + 600;
    char *text = sc != NULL && list != NULL ? malloc(len) : NULL;
    if (text == NULL) {
        cJSON_Delete(sc);
        free(list);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    char coverage[160];
    index_coverage(info, coverage, sizeof coverage);
    const char *server = f->server, *category = f->category;
    const char *head = servers[0] || starting[0] ? "\nServers:\n" : "";
    if (n == 0)
        snprintf(text, len, "No tools match%s%s%s%s (%zu tools known; embedder %s%s).%s%s%s",
                 server ? " on server " : "", server ? server : "", category ? " in category " : "",
                 category ? category : "", st.tools, st.embedder, coverage, head, servers,
                 starting);
    else
        snprintf(text, len, "%s\n[embedder %s; %zu tools known%s]%s%s%s", list, st.embedder,
                 st.tools, coverage, head, servers, starting);
    free(list);
    cJSON *content = mcp_text_content(text);
    free(text);
    mcp_call_finish(call, content, sc, false);
}
