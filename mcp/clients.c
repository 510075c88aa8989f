/* clients.c - questions asked of a set of downstream clients at once (a server's --config
 * servers): their states as text or JSON, how many failed or are starting, one by name. The
 * set is the caller's array: this file keeps nothing. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mcp_client_t *mcp_clients_find(mcp_client_t *const *clients, size_t n, const char *name)
{
    for (size_t i = 0; name != NULL && i < n; i++)
        if (strcmp(mcp_client_name(clients[i]), name) == 0) return clients[i];
    return NULL;
}

size_t mcp_clients_status(mcp_client_t *const *clients, size_t n, char *buf, size_t size)
{
    size_t used = 0;
    if (size > 0) buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *reason = NULL;
        mcp_client_state_t st = mcp_client_state(clients[i], &reason);
        const cJSON *tools = mcp_client_tools(clients[i]);
        int k = snprintf(buf + used, used < size ? size - used : 0, "%s: %s, %d tools%s%s\n",
                         mcp_client_name(clients[i]), mcp_client_state_name(st),
                         tools ? cJSON_GetArraySize(tools) : 0, reason ? "; " : "",
                         reason ? reason : "");
        if (k > 0) used += (size_t)k;
    }
    return used;
}

cJSON *mcp_clients_status_json(mcp_client_t *const *clients, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        const char *reason = NULL;
        mcp_client_state_t st = mcp_client_state(clients[i], &reason);
        const cJSON *tools = mcp_client_tools(clients[i]);
        cJSON *o = cJSON_CreateObject();
        if (o == NULL || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o); /* not in arr: ours to free */
            cJSON_Delete(arr);
            return NULL;
        }
        if (!cJSON_AddStringToObject(o, "name", mcp_client_name(clients[i])) ||
            !cJSON_AddStringToObject(o, "state", mcp_client_state_name(st)) ||
            !cJSON_AddNumberToObject(o, "tools", tools ? cJSON_GetArraySize(tools) : 0) ||
            (reason && !cJSON_AddStringToObject(o, "reason", reason))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

size_t mcp_clients_count_in(mcp_client_t *const *clients, size_t n, mcp_client_state_t state)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += mcp_client_state(clients[i], NULL) == state;
    return k;
}

bool mcp_clients_settled(mcp_client_t *const *clients, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        mcp_client_state_t st = mcp_client_state(clients[i], NULL);
        if (st != MCP_CLIENT_READY && st != MCP_CLIENT_FAILED) return false;
    }
    return true;
}

size_t mcp_clients_starting(mcp_client_t *const *clients, size_t n, char *buf, size_t size)
{
    size_t k = 0, used = 0;
    if (size > 0) buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (mcp_client_state(clients[i], NULL) != MCP_CLIENT_STARTING) continue;
        int w = snprintf(buf + used, used < size ? size - used : 0, "%s%s", k ? ", " : "",
                         mcp_client_name(clients[i]));
        if (w > 0) used += (size_t)w;
        k++;
    }
    return k;
}

void mcp_client_refusal(const mcp_client_t *c, int rc, char *buf, size_t size)
{
    const char *reason = NULL;
    mcp_client_state_t st = mcp_client_state(c, &reason);
    snprintf(buf, size, "server %s cannot take the call (%s%s%s): %s", mcp_client_name(c),
             mcp_client_state_name(st), reason ? ": " : "", reason ? reason : "", mcp_strerror(rc));
}

int mcp_clients_start_all(uv_loop_t *loop, const mcp_downstream_config_t *cfg,
                          const mcp_client_opts_t *opts, const mcp_client_hooks_t *hooks,
                          const mcp_logger_t *lg, mcp_client_t ***out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (cfg->n_servers == 0) return MCP_OK;
    mcp_client_t **clients = calloc(cfg->n_servers, sizeof *clients);
    if (clients == NULL) return MCP_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < cfg->n_servers; i++) {
        mcp_client_t *c = NULL;
        /* One broken entry never keeps the others from starting. */
        int rc = mcp_client_new(loop, &cfg->servers[i], opts, hooks, lg, &c);
        if (rc < 0) {
            mcp_log(lg, MCP_LOG_ERROR, "server %s: %s", cfg->servers[i].name, mcp_strerror(rc));
            continue;
        }
        clients[n++] = c;
        if ((rc = mcp_client_start(c)) < 0)
            mcp_log(lg, MCP_LOG_ERROR, "server %s: cannot start: %s", cfg->servers[i].name,
                    mcp_strerror(rc));
    }
    *out = clients;
    *n_out = n;
    return MCP_OK;
}

void mcp_clients_free(mcp_client_t **clients, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mcp_client_free(clients[i]);
    free(clients);
}
