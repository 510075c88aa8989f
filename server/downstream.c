/* downstream.c - the downstream MCP servers of --config: one client each in mcp/'s relay
 * (which routes their requests to our callers and, with --expose-tools, proxies their tools),
 * their tools fed to the registry (search_tools) and named by its ids. */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ptc_downstream {
    const mcp_logger_t *lg;
    mcp_client_hooks_t hooks; /* ours: the relay calls them for every client */
    ptc_search_t *search;
    ptc_startup_t *startup; /* told when a server is ready or failed */
    mcp_downstream_config_t cfg;
    mcp_http_client_t *http;
    mcp_relay_t *relay;
};

/* The --config entry's "category" of server `name`, or NULL. */
static const char *config_category(const ptc_downstream_t *d, const char *name)
{
    for (size_t i = 0; i < d->cfg.n_servers; i++)
        if (strcmp(d->cfg.servers[i].name, name) == 0) return d->cfg.servers[i].category;
    return NULL;
}

/* A copy of tools where each tool without a category of its own ("category" or
 * _meta.category, as the registry reads it) gets the server's; NULL when out of memory. */
static cJSON *with_category(const cJSON *tools, const char *category)
{
    cJSON *copy = cJSON_Duplicate(tools, true);
    cJSON *t;
    cJSON_ArrayForEach(t, copy)
    {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(t, "_meta");
        if (!cJSON_IsObject(t) || cJSON_IsString(cJSON_GetObjectItemCaseSensitive(t, "category")) ||
            cJSON_IsString(cJSON_GetObjectItemCaseSensitive(meta, "category")))
            continue;
        cJSON_DeleteItemFromObjectCaseSensitive(t, "category"); /* not a string: replaced */
        if (cJSON_AddStringToObject(t, "category", category) == NULL) {
            cJSON_Delete(copy);
            return NULL;
        }
    }
    return copy;
}

static void on_tools(mcp_client_t *c, const cJSON *tools, void *data)
{
    ptc_downstream_t *d = data;
    char msg[256];
    const char *name = mcp_client_name(c);
    const char *category = config_category(d, name);
    cJSON *categorised = category != NULL ? with_category(tools, category) : NULL;
    bool oom = category != NULL && categorised == NULL;
    int rc = oom ? MCP_ENOMEM
                 : reg_registry_set_server_tools(ptc_search_registry(d->search), name,
                                                 categorised != NULL ? categorised : tools, msg,
                                                 sizeof msg);
    cJSON_Delete(categorised);
    if (rc < 0) {
        mcp_log(d->lg, MCP_LOG_ERROR, "server %s: its tools were not indexed: %s", name,
                oom ? "out of memory" : msg);
    } else {
        mcp_log(d->lg, MCP_LOG_INFO, "server %s: %d tools", name, cJSON_GetArraySize(tools));
        ptc_search_changed(d->search);
        mcp_relay_relist(d->relay, name); /* --expose-tools: their new registry ids */
    }
}

static void on_state(mcp_client_t *c, mcp_client_state_t state, const char *reason, void *data)
{
    ptc_downstream_t *d = data;
    mcp_level_t level = state == MCP_CLIENT_FAILED ? MCP_LOG_ERROR : MCP_LOG_INFO;
    mcp_log(d->lg, level, "server %s: %s%s%s", mcp_client_name(c), mcp_client_state_name(state),
            reason ? ": " : "", reason ? reason : "");
    ptc_startup_poke(d->startup);
}

/* --expose-tools lists a server's tools under their registry ids: the registry's entries of
 * that server from *pos on (mcp_relay_tools_fn). */
static bool exposed_tools(void *data, const char *server, size_t *pos, mcp_relay_tool_t *out)
{
    ptc_downstream_t *d = data;
    const reg_catalog_t *cat = reg_registry_catalog(ptc_search_registry(d->search));
    const reg_tool_t *t = NULL;
    while (*pos < reg_catalog_count(cat) && t == NULL) {
        t = reg_catalog_at(cat, (*pos)++);
        if (strcmp(t->server, server) != 0) t = NULL;
    }
    if (t != NULL)
        *out = (mcp_relay_tool_t){.id = t->id,
                                  .name = t->name,
                                  .title = t->title,
                                  .description = t->description,
                                  .input_schema = t->input_schema,
                                  .annotations = t->annotations};
    return t != NULL;
}

/* The clients' options: every server may ask for sampling and elicitation (whether a connected
 * client can take the request is decided when one comes: ours start before any client
 * connects), and the variables that hold ptc-mcp's own secrets never reach a downstream server
 * (whose tools sandboxed code can call), even when named in the inherited default set. */
static void client_opts(const ptc_downstream_t *d, const ptc_options_t *o, mcp_client_opts_t *co,
                        const char *kept[4])
{
    mcp_client_opts_default(co);
    co->http = d->http;
    co->can_sample = true;
    co->can_elicit = true;
    const char *withheld[] = {o->auth_token_env, o->repair_key_env, o->embed_key_env};
    for (size_t i = 0, k = 0; i < 3; i++)
        if (withheld[i] != NULL && withheld[i][0] != '\0') kept[k++] = withheld[i];
    co->withheld_env = kept;
}

int ptc_downstream_new(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg,
                       ptc_search_t *search, ptc_downstream_t **out)
{
    ptc_downstream_t *d = calloc(1, sizeof *d);
    int rc = d != NULL ? MCP_OK : MCP_ENOMEM;
    char msg[512], source[600];
    if (rc == MCP_OK) {
        d->lg = lg;
        d->search = search;
        d->hooks =
            (mcp_client_hooks_t){.state_changed = on_state, .tools_changed = on_tools, .data = d};
        mcp_relay_opts_t ro = {.tool_timeout_ms = (unsigned)(o->tool_timeout * 1000.0),
                               .tools = exposed_tools,
                               .tools_data = d};
        rc = mcp_relay_new(loop, &ro, &d->hooks, lg, &d->relay);
    }
    if (rc == MCP_OK && o->config_json != NULL &&
        mcp_downstream_config_from_json(o->config_json, &d->cfg, msg, sizeof msg) < 0) {
        mcp_log(lg, MCP_LOG_ERROR, "--config %s: %s", o->config_file, msg);
        rc = MCP_EINVAL;
    }
    if (rc == MCP_OK && o->config_json != NULL) {
        snprintf(source, sizeof source, "--config %s", o->config_file);
        mcp_downstream_config_log(&d->cfg, lg, source);
    }
    if (rc == MCP_OK && d->cfg.n_servers > 0) {
        mcp_http_client_opts_t ho;
        mcp_http_client_opts_default(&ho);
        ho.ca_file = o->ca_file;
        if (mcp_http_client_new(loop, &ho, lg, &d->http) < 0) {
            mcp_log(lg, MCP_LOG_WARNING, "no HTTP client: http servers in --config will fail");
            d->http = NULL;
        }
        mcp_client_opts_t co;
        const char *kept[4] = {NULL, NULL, NULL, NULL};
        client_opts(d, o, &co, kept);
        rc = mcp_relay_start(d->relay, &d->cfg, &co);
    }
    if (rc < 0) {
        ptc_downstream_free(d);
        d = NULL;
    }
    *out = d;
    return rc;
}

void ptc_downstream_set_server(ptc_downstream_t *d, mcp_server_t *srv)
{
    mcp_relay_set_server(d->relay, srv);
}

void ptc_downstream_set_startup(ptc_downstream_t *d, ptc_startup_t *st)
{
    if (d != NULL) d->startup = st;
}

void ptc_downstream_expose(ptc_downstream_t *d, mcp_server_t *srv)
{
    mcp_relay_expose(d->relay, srv);
}

mcp_relay_t *ptc_downstream_relay(const ptc_downstream_t *d)
{
    return d != NULL ? d->relay : NULL;
}

/* The clients of d's relay (none for a NULL d), for mcp_clients_*. */
static mcp_client_t *const *clients_of(const ptc_downstream_t *d, size_t *n)
{
    return mcp_relay_clients(d != NULL ? d->relay : NULL, n);
}

size_t ptc_downstream_status(const ptc_downstream_t *d, char *buf, size_t size)
{
    size_t n;
    mcp_client_t *const *c = clients_of(d, &n);
    return mcp_clients_status(c, n, buf, size);
}

cJSON *ptc_downstream_status_json(const ptc_downstream_t *d)
{
    size_t n;
    mcp_client_t *const *c = clients_of(d, &n);
    return mcp_clients_status_json(c, n);
}

mcp_client_t *ptc_downstream_client(const ptc_downstream_t *d, const char *server)
{
    return mcp_relay_client(d != NULL ? d->relay : NULL, server);
}

size_t ptc_downstream_failed(const ptc_downstream_t *d)
{
    size_t n;
    mcp_client_t *const *c = clients_of(d, &n);
    return mcp_clients_count_in(c, n, MCP_CLIENT_FAILED);
}

size_t ptc_downstream_count(const ptc_downstream_t *d)
{
    size_t n;
    clients_of(d, &n);
    return n;
}

bool ptc_downstream_settled(const ptc_downstream_t *d)
{
    size_t n;
    mcp_client_t *const *c = clients_of(d, &n);
    return mcp_clients_settled(c, n);
}

size_t ptc_downstream_starting(const ptc_downstream_t *d, char *buf, size_t size)
{
    size_t n;
    mcp_client_t *const *c = clients_of(d, &n);
    return mcp_clients_starting(c, n, buf, size);
}

void ptc_downstream_stop(ptc_downstream_t *d)
{
    if (d != NULL) mcp_relay_stop(d->relay);
}

void ptc_downstream_free(ptc_downstream_t *d)
{
    if (d == NULL) return;
    mcp_relay_free(d->relay);
    mcp_http_client_free(d->http);
    mcp_downstream_config_close(&d->cfg);
    free(d);
}

bool ptc_downstream_packaged(const ptc_downstream_t *d, const cJSON *modules)
{
    size_t n;
    mcp_client_t *const *clients = clients_of(d, &n);
    bool all = true;
    for (size_t i = 0; all && i < n; i++) {
        if (mcp_client_state(clients[i], NULL) != MCP_CLIENT_READY ||
            cJSON_GetArraySize(mcp_client_tools(clients[i])) == 0)
            continue;
        bool found = false;
        const cJSON *m;
        cJSON_ArrayForEach(m, modules)
        {
            const cJSON *server = cJSON_GetObjectItemCaseSensitive(m, "server");
            found = found || (cJSON_IsString(server) &&
                              strcmp(server->valuestring, mcp_client_name(clients[i])) == 0);
        }
        all = found;
    }
    return all;
}
