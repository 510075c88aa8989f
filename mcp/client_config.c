/* client_config.c - the downstream servers' config in Claude Desktop's format. Errors name the
 * entry and field, because users edit this file by hand. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ERR(...)                                                                                   \
    do {                                                                                           \
        if (msg != NULL && msg_size > 0) snprintf(msg, msg_size, __VA_ARGS__);                     \
        return MCP_EINVAL;                                                                         \
    } while (0)

static void free_kv(mcp_downstream_kv_t *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(kv[i].name);
        free(kv[i].value);
    }
    free(kv);
}

static void free_server(mcp_downstream_server_t *s)
{
    free(s->name);
    free(s->type);
    free(s->command);
    for (size_t i = 0; i < s->n_args; i++)
        free(s->args[i]);
    free(s->args);
    free_kv(s->env, s->n_env);
    free(s->cwd);
    free(s->url);
    free_kv(s->headers, s->n_headers);
    memset(s, 0, sizeof *s);
}

void mcp_downstream_config_close(mcp_downstream_config_t *cfg)
{
    if (cfg == NULL) return;
    for (size_t i = 0; i < cfg->n_servers; i++)
        free_server(&cfg->servers[i]);
    free(cfg->servers);
    cfg->servers = NULL;
    cfg->n_servers = 0;
}

/* An optional string member: absent or null leaves *out NULL. */
static int opt_string(const cJSON *entry, const char *key, const char *name, char **out, char *msg,
                      size_t msg_size)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(entry, key);
    if (v == NULL || cJSON_IsNull(v)) return MCP_OK;
    if (!cJSON_IsString(v)) ERR("mcpServers.%s.%s: expected a string", name, key);
    *out = mcp__strdup(v->valuestring);
    return *out != NULL ? MCP_OK : MCP_ENOMEM;
}

static int parse_kv(const cJSON *entry, const char *key, const char *name,
                    mcp_downstream_kv_t **out, size_t *n_out, char *msg, size_t msg_size)
{
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(entry, key);
    if (obj == NULL || cJSON_IsNull(obj)) return MCP_OK;
    if (!cJSON_IsObject(obj))
        ERR("mcpServers.%s.%s: expected an object of strings ({\"NAME\": \"value\"})", name, key);
    size_t n = (size_t)cJSON_GetArraySize(obj);
    if (n > MCP_DOWNSTREAM_MAX_ENV)
        ERR("mcpServers.%s.%s: more than %d entries", name, key, MCP_DOWNSTREAM_MAX_ENV);
    if (n == 0) return MCP_OK;
    mcp_downstream_kv_t *kv = calloc(n, sizeof *kv);
    if (kv == NULL) return MCP_ENOMEM;
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
    {
        if (!cJSON_IsString(it)) {
            free_kv(kv, i);
            /* Claude Desktop passes only strings; saying so beats a silent conversion. */
            ERR("mcpServers.%s.%s.%s: expected a string (quote numbers and booleans)", name, key,
                it->string);
        }
        if (it->string[0] == '\0' || strchr(it->string, '=') != NULL) {
            free_kv(kv, i);
            ERR("mcpServers.%s.%s: \"%s\" is not a valid variable name", name, key, it->string);
        }
        kv[i].name = mcp__strdup(it->string);
        kv[i].value = mcp__strdup(it->valuestring);
        i++;
        if (kv[i - 1].name == NULL || kv[i - 1].value == NULL) {
            free_kv(kv, i);
            return MCP_ENOMEM;
        }
    }
    *out = kv;
    *n_out = i;
    return MCP_OK;
}

static int parse_args(const cJSON *entry, mcp_downstream_server_t *s, char *msg, size_t msg_size)
{
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(entry, "args");
    if (args == NULL || cJSON_IsNull(args)) return MCP_OK;
    if (!cJSON_IsArray(args)) ERR("mcpServers.%s.args: expected an array of strings", s->name);
    size_t n = (size_t)cJSON_GetArraySize(args);
    if (n > MCP_DOWNSTREAM_MAX_ARGS)
        ERR("mcpServers.%s.args: more than %d arguments", s->name, MCP_DOWNSTREAM_MAX_ARGS);
    if (n == 0) return MCP_OK;
    s->args = calloc(n, sizeof *s->args);
    if (s->args == NULL) return MCP_ENOMEM;
    const cJSON *it;
    cJSON_ArrayForEach(it, args)
    {
        if (!cJSON_IsString(it))
            ERR("mcpServers.%s.args[%zu]: expected a string", s->name, s->n_args);
        s->args[s->n_args] = mcp__strdup(it->valuestring);
        if (s->args[s->n_args] == NULL) return MCP_ENOMEM;
        s->n_args++;
    }
    return MCP_OK;
}

static int parse_entry(const cJSON *entry, mcp_downstream_server_t *s, char *msg, size_t msg_size)
{
    const char *name = s->name;
    if (!cJSON_IsObject(entry))
        ERR("mcpServers.%s: expected an object with \"command\" or \"url\"", name);
    int rc;
    if ((rc = opt_string(entry, "type", name, &s->type, msg, msg_size)) < 0 ||
        (rc = opt_string(entry, "command", name, &s->command, msg, msg_size)) < 0 ||
        (rc = opt_string(entry, "url", name, &s->url, msg, msg_size)) < 0 ||
        (rc = opt_string(entry, "cwd", name, &s->cwd, msg, msg_size)) < 0)
        return rc;
    if (s->type != NULL) {
        if (strcmp(s->type, "stdio") == 0)
            s->kind = MCP_DOWNSTREAM_STDIO;
        else if (strcmp(s->type, "http") == 0 || strcmp(s->type, "streamable-http") == 0 ||
                 strcmp(s->type, "streamableHttp") == 0 || strcmp(s->type, "sse") == 0)
            s->kind = MCP_DOWNSTREAM_HTTP;
        else
            ERR("mcpServers.%s.type: \"%s\" is not one of \"stdio\", \"http\", \"sse\"", name,
                s->type);
    } else {
        s->kind = s->command == NULL && s->url != NULL ? MCP_DOWNSTREAM_HTTP : MCP_DOWNSTREAM_STDIO;
    }
    if (s->kind == MCP_DOWNSTREAM_STDIO) {
        if (s->command == NULL || s->command[0] == '\0')
            ERR("mcpServers.%s: a stdio server needs \"command\" (a program name or path)", name);
    } else {
        if (s->url == NULL ||
            (strncmp(s->url, "http://", 7) != 0 && strncmp(s->url, "https://", 8) != 0))
            ERR("mcpServers.%s.url: an http server needs an \"http://\" or \"https://\" URL", name);
    }
    if ((rc = parse_args(entry, s, msg, msg_size)) < 0 ||
        (rc = parse_kv(entry, "env", name, &s->env, &s->n_env, msg, msg_size)) < 0 ||
        (rc = parse_kv(entry, "headers", name, &s->headers, &s->n_headers, msg, msg_size)) < 0)
        return rc;
    return MCP_OK;
}

int mcp_downstream_config_from_json(const cJSON *root, mcp_downstream_config_t *out, char *msg,
                                    size_t msg_size)
{
    memset(out, 0, sizeof *out);
    if (msg != NULL && msg_size > 0) msg[0] = '\0';
    if (!cJSON_IsObject(root)) ERR("the config must be a JSON object with \"mcpServers\"");
    const cJSON *servers = cJSON_GetObjectItemCaseSensitive(root, "mcpServers");
    if (servers == NULL || cJSON_IsNull(servers)) return MCP_OK;
    if (!cJSON_IsObject(servers))
        ERR("mcpServers: expected an object mapping server names to entries");
    size_t n = (size_t)cJSON_GetArraySize(servers);
    if (n > MCP_DOWNSTREAM_MAX_SERVERS)
        ERR("mcpServers: more than %d servers", MCP_DOWNSTREAM_MAX_SERVERS);
    if (n == 0) return MCP_OK;
    out->servers = calloc(n, sizeof *out->servers);
    if (out->servers == NULL) return MCP_ENOMEM;
    const cJSON *entry;
    int rc = MCP_OK;
    cJSON_ArrayForEach(entry, servers)
    {
        const char *name = entry->string;
        size_t nl = strlen(name);
        if (nl == 0 || nl > MCP_DOWNSTREAM_MAX_NAME) {
            if (msg != NULL && msg_size > 0)
                snprintf(msg, msg_size, "mcpServers: a server name must have 1 to %d bytes",
                         MCP_DOWNSTREAM_MAX_NAME);
            rc = MCP_EINVAL;
            break;
        }
        for (size_t i = 0; i < out->n_servers; i++) {
            if (strcmp(out->servers[i].name, name) == 0) {
                if (msg != NULL && msg_size > 0)
                    snprintf(msg, msg_size, "mcpServers.%s: the name appears twice", name);
                rc = MCP_EINVAL;
                break;
            }
        }
        if (rc < 0) break;
        mcp_downstream_server_t *s = &out->servers[out->n_servers++];
        s->name = mcp__strdup(name);
        if (s->name == NULL) {
            rc = MCP_ENOMEM;
            break;
        }
        rc = parse_entry(entry, s, msg, msg_size);
        if (rc < 0) break;
    }
    if (rc < 0) {
        if (rc == MCP_ENOMEM && msg != NULL && msg_size > 0)
            snprintf(msg, msg_size, "out of memory reading the config");
        mcp_downstream_config_close(out);
    }
    return rc;
}

int mcp_downstream_config_parse(const char *json, size_t len, mcp_downstream_config_t *out,
                                char *msg, size_t msg_size)
{
    memset(out, 0, sizeof *out);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (root == NULL) {
        size_t off = end != NULL && end >= json ? (size_t)(end - json) : 0;
        size_t line = 1;
        for (size_t i = 0; i < off && i < len; i++)
            line += json[i] == '\n';
        ERR("the config is not valid JSON (near line %zu, byte %zu)", line, off);
    }
    int rc = mcp_downstream_config_from_json(root, out, msg, msg_size);
    cJSON_Delete(root);
    return rc;
}
