/* tool_search.c - the search_tools tool and tools.search on registry/'s search service
 * (reg_service_*: indexing and query embeddings on the thread pool, never on the loop): the
 * arguments, the start-up gate, a call's cancellation, and the servers' states in answers. */
#include "tools.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SEARCH_DEFAULT_TOP_K 5

struct ptc_search {
    reg_service_t *svc;
    size_t (*status)(const void *data, char *buf, size_t size);
    cJSON *(*status_json)(const void *data);
    const void *status_data;
    ptc_startup_t *startup; /* the first searches wait for the servers (--startup-wait) */
};

/* A search_tools call or a tools.search waiting for its query's embedding. */
typedef struct pending {
    ptc_search_t *s;
    mcp_call_t *call;        /* search_tools */
    ptc_search_done_cb done; /* or tools.search */
    void *done_data;
    reg_query_t *q;
} pending_t;

/* --- search_tools and tools.search ------------------------------------------------------- */

static void answered(void *data, int err, const reg_result_t *res, size_t n,
                     const reg_search_info_t *info, const reg_filter_t *f, const char *msg)
{
    pending_t pend = *(pending_t *)data;
    free(data);
    const ptc_search_t *s = pend.s;
    const reg_registry_t *reg = reg_service_registry(s->svc);
    if (pend.call == NULL) { /* tools.search */
        ptc_search_results_done(pend.done, pend.done_data, reg, err, res, n, msg);
    } else if (err < 0) {
        mcp_call_finish_text(pend.call, true, "search failed: %s", msg);
    } else {
        char servers[2048] = "", starting[800];
        if (s->status != NULL) s->status(s->status_data, servers, sizeof servers);
        /* Past the start-up wait, servers still starting are named, not taken for toolless. */
        ptc_startup_still_starting(s->startup, starting, sizeof starting);
        ptc_search_results_finish(pend.call, reg, res, n, info, f, servers, starting,
                                  s->status_json ? s->status_json(s->status_data) : NULL);
    }
}

/* Starts p's query (p taken): 1 while its answer is to come (then p lives until answered or
 * cancelled), 0 when it was answered already, MCP_ENOMEM (p freed in both). */
static int start(pending_t *p, const char *query, size_t top_k, const char *server,
                 const char *category)
{
    reg_query_t *q = NULL;
    /* search_tools' input schema bounds top_k to the service's 1..REG_SERVICE_TOPK_MAX. */
    if (reg_service_query(p->s->svc, query, top_k, server, category, answered, p, &q) < 0) {
        free(p);
        return MCP_ENOMEM;
    }
    if (q == NULL) return 0;
    p->q = q;
    return 1;
}

static void call_cancelled(mcp_call_t *call, void *data)
{
    ptc_search_query_cancel(data); /* the worker finishes; its answer is dropped */
    mcp_call_finish_text(call, true, "cancelled");
}

/* A query of blanks only ranks nothing meaningful: both entry points refuse it. */
static bool query_is_blank(const char *query)
{
    for (const char *p = query; *p; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') return false;
    return true;
}

static void handle(mcp_call_t *call, const cJSON *args, void *data)
{
    ptc_search_t *s = data;
    if (ptc_startup_hold(s->startup, call, args, false, handle, s)) return;
    const char *query = cJSON_GetObjectItemCaseSensitive(args, "query")->valuestring;
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(args, "top_k");
    const cJSON *server = cJSON_GetObjectItemCaseSensitive(args, "server");
    const cJSON *category = cJSON_GetObjectItemCaseSensitive(args, "category");
    size_t top_k = k ? (size_t)k->valuedouble : SEARCH_DEFAULT_TOP_K;
    if (query_is_blank(query)) {
        mcp_call_finish_text(call, true,
                             "Invalid arguments: query is empty; describe what you want to do");
        return;
    }
    pending_t *p = calloc(1, sizeof *p);
    if (p != NULL) *p = (pending_t){.s = s, .call = call};
    int rc = p == NULL ? MCP_ENOMEM
                       : start(p, query, top_k, cJSON_IsString(server) ? server->valuestring : NULL,
                               cJSON_IsString(category) ? category->valuestring : NULL);
    if (rc < 0)
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
    else if (rc == 1)
        mcp_call_on_cancel(call, call_cancelled, p); /* a cancel drops the answer to come */
}

int ptc_search_query(ptc_search_t *s, const char *query, size_t top_k, const char *server,
                     const char *category, ptc_search_done_cb done, void *data, void **handle)
{
    *handle = NULL;
    if (top_k < 1 || top_k > REG_SERVICE_TOPK_MAX || query == NULL) return MCP_EINVAL;
    if (query_is_blank(query)) {
        done(data, MCP_EINVAL, NULL, "the query is empty; describe what you want to do");
        return MCP_OK;
    }
    pending_t *p = calloc(1, sizeof *p);
    if (p == NULL) return MCP_ENOMEM;
    *p = (pending_t){.s = s, .done = done, .done_data = data};
    int rc = start(p, query, top_k, server, category);
    if (rc == 1) *handle = p;
    return rc < 0 ? rc : MCP_OK;
}

void ptc_search_query_cancel(void *handle)
{
    pending_t *p = handle;
    if (p == NULL) return;
    reg_service_query_cancel(p->q);
    free(p);
}

/* --- set-up -------------------------------------------------------------------------------- */

/* What the flags ask of the embedder (--embedder, --embed-*; --ca-file for a remote one). */
static reg_embedder_spec_t spec_of(const ptc_options_t *o)
{
    return (reg_embedder_spec_t){
        .kind = o->embedder,
        .model_dir = o->embed_model_dir,
        .url = o->embed_url,
        .remote_model = o->embed_remote_model,
        .key_env = o->embed_key_env,
        .open_remote = reg_embedder_remote_open,
        .open_remote_data = (void *)(uintptr_t)o->ca_file,
    };
}

int ptc_search_open_embedder(const ptc_options_t *o, reg_embedder_t **out, char *note,
                             size_t note_size, char *msg, size_t msg_size)
{
    reg_embedder_spec_t spec = spec_of(o);
    return reg_embedder_open(&spec, out, note, note_size, msg, msg_size);
}

/* Both number their levels as RFC 5424's severities. */
_Static_assert(REG_LOG_ERROR == (int)MCP_LOG_ERROR && REG_LOG_WARNING == (int)MCP_LOG_WARNING &&
                   REG_LOG_INFO == (int)MCP_LOG_INFO,
               "registry and MCP log levels differ");
static void service_log(void *data, reg_log_level_t level, const char *line)
{
    mcp_log(data, (mcp_level_t)level, "%s", line);
}

static void indexed(void *data)
{
    ptc_startup_poke(((ptc_search_t *)data)->startup); /* the first searches may wait */
}

int ptc_search_new(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg,
                   ptc_search_t **out)
{
    *out = NULL;
    ptc_search_t *s = calloc(1, sizeof *s);
    if (s == NULL) return MCP_ENOMEM;
    reg_service_opts_t so;
    reg_service_opts_default(&so);
    so.log = service_log;
    so.log_data = (void *)(uintptr_t)lg; /* only handed back to mcp_log, which reads it */
    so.tools_file = o->tools_file;
    reg_embedder_spec_t spec = spec_of(o);
    char msg[768] = "";
    int rc = reg_service_new(loop, &spec, &so, &s->svc, msg, sizeof msg);
    if (rc < 0) {
        mcp_log(lg, MCP_LOG_ERROR, "%s", msg);
        free(s);
        return rc == REG_ENOMEM ? MCP_ENOMEM : MCP_EINVAL;
    }
    reg_service_on_indexed(s->svc, indexed, s);
    *out = s;
    return MCP_OK;
}

int ptc_search_register(ptc_search_t *s, mcp_server_t *srv)
{
    mcp_tool_def_t def = {
        .name = "search_tools",
        .title = "Find tools by meaning",
        .description = ptc_search_description,
        .input_schema = ptc_search_input_schema,
        .output_schema = ptc_search_output_schema,
        .annotations = "{\"readOnlyHint\":true,\"openWorldHint\":false}",
        .handler = handle,
        .data = s,
    };
    return mcp_server_add_tool(srv, &def);
}

reg_registry_t *ptc_search_registry(ptc_search_t *s)
{
    return reg_service_registry(s->svc);
}

void ptc_search_changed(ptc_search_t *s)
{
    reg_service_changed(s->svc);
    ptc_startup_poke(s->startup); /* a server's listing came in (maybe nothing to index) */
}

void ptc_search_on_change(ptc_search_t *s, void (*cb)(void *data), void *data)
{
    reg_service_on_change(s->svc, cb, data);
}

void ptc_search_set_status(ptc_search_t *s, size_t (*status)(const void *, char *, size_t),
                           cJSON *(*status_json)(const void *), const void *data)
{
    s->status = status;
    s->status_json = status_json;
    s->status_data = data;
}

void ptc_search_stop(ptc_search_t *s)
{
    if (s != NULL) reg_service_stop(s->svc);
}

void ptc_search_free(ptc_search_t *s)
{
    if (s == NULL) return;
    reg_service_free(s->svc);
    free(s);
}

void ptc_search_set_startup(ptc_search_t *s, ptc_startup_t *st)
{
    if (s != NULL) s->startup = st;
}
