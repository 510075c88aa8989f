/* client_config.c - the downstream servers' config in Claude Desktop's format. Errors name the
 * entry and field, because users edit this file by hand; a bad entry drops only itself, since
 * one typo must not take every other server away. */
#include "client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    free(s->category);
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
    for (size_t i = 0; i < cfg->n_problems; i++) {
        free(cfg->problems[i].server);
        free(cfg->problems[i].message);
    }
    free(cfg->problems);
    cfg->problems = NULL;
    cfg->n_problems = cfg->cap_problems = 0;
}

static int add_problem(mcp_downstream_config_t *cfg, const char *server, bool dropped,
                       const char *message)
{
    /* the codes are base's (MCP_ENOMEM is PTC_ENOMEM; past the cap MCP_ETOOBIG) */
    int rc = ptc_array_reserve(&cfg->problems, &cfg->cap_problems, cfg->n_problems + 1,
                               sizeof *cfg->problems, MCP_DOWNSTREAM_MAX_PROBLEMS);
    if (rc < 0) return rc;
    mcp_downstream_problem_t *pr = &cfg->problems[cfg->n_problems];
    pr->server = server != NULL ? mcp__strdup(server) : NULL;
    pr->message = mcp__strdup(message);
    pr->dropped = dropped;
    if ((server != NULL && pr->server == NULL) || pr->message == NULL) {
        free(pr->server);
        free(pr->message);
        return MCP_ENOMEM;
    }
    cfg->n_problems++;
    return MCP_OK;
}

void mcp_downstream_config_log(const mcp_downstream_config_t *cfg, const mcp_logger_t *lg,
                               const char *source)
{
    for (size_t i = 0; i < cfg->n_problems; i++) {
        const mcp_downstream_problem_t *pr = &cfg->problems[i];
        if (pr->dropped)
            mcp_log(lg, MCP_LOG_ERROR, "%s: %s; this server is left out, the others start", source,
                    pr->message);
        else
            mcp_log(lg, MCP_LOG_WARNING, "%s: %s", source, pr->message);
    }
}

int mcp_downstream_config_check(const cJSON *root, const char *source, FILE *out)
{
    mcp_downstream_config_t cfg;
    char msg[512];
    int dropped = 0;
    if (mcp_downstream_config_from_json(root, &cfg, msg, sizeof msg) < 0) {
        fprintf(out, "downstream servers: %s: %s\n", source, msg);
        return MCP_EINVAL;
    }
    if (cfg.n_problems > 0) fprintf(out, "config problems (%s):\n", source);
    for (size_t i = 0; i < cfg.n_problems; i++) {
        const mcp_downstream_problem_t *pr = &cfg.problems[i];
        fprintf(out, "%s: %s: %s\n", pr->server ? pr->server : "(file)",
                pr->dropped ? "left out" : "warning", pr->message);
        dropped += pr->dropped;
    }
    mcp_downstream_config_close(&cfg);
    return dropped;
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
    /* Headers have a cap of their own: the HTTP client's, which would otherwise cut them. */
    int max = strcmp(key, "headers") == 0 ? MCP_DOWNSTREAM_MAX_HEADERS : MCP_DOWNSTREAM_MAX_ENV;
    if (n > (size_t)max) ERR("mcpServers.%s.%s: more than %d entries", name, key, max);
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
        (rc = opt_string(entry, "cwd", name, &s->cwd, msg, msg_size)) < 0 ||
        (rc = opt_string(entry, "category", name, &s->category, msg, msg_size)) < 0)
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

/* Keys of an entry: ours, and those other clients write (Claude Code, VS Code, Cline, Cursor),
 * accepted in silence so that a config reused from them gives no noise; anything else is most
 * likely a typo ("comand", "arg") and gets a warning naming it. */
static const char *const known_keys[] = {"command", "args", "env", "cwd", "type", "url", "headers",
                                         "category",
                                         /* other clients' keys, not used here */
                                         "disabled", "alwaysLoad", "autoApprove", "alwaysAllow",
                                         "timeout", "description", "transportType", NULL};

static bool known_key(const char *k)
{
    for (size_t i = 0; known_keys[i] != NULL; i++)
        if (strcmp(known_keys[i], k) == 0) return true;
    return false;
}

static int warn_unknown_keys(mcp_downstream_config_t *cfg, const cJSON *entry, const char *name)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, entry)
    {
        if (known_key(it->string)) continue;
        char m[512];
        if (strcmp(it->string, "envFile") == 0) /* VS Code's: the server would lack them */
            snprintf(m, sizeof m,
                     "mcpServers.%s.envFile: not read by ptc-mcp; put the variables in \"env\"",
                     name);
        else
            snprintf(m, sizeof m,
                     "mcpServers.%s.%.128s: unknown key, ignored (an entry has \"command\", "
                     "\"args\", \"env\", \"cwd\" or \"type\", \"url\", \"headers\"; "
                     "\"category\")",
                     name, it->string);
        int rc = add_problem(cfg, name, false, m);
        if (rc < 0) return rc;
    }
    return MCP_OK;
}

/* The program a stdio entry would run, looked up as the client will (PATH from the entry's
 * env when it sets one literally, else ours), or NULL. ${VAR} in the command is not expanded:
 * such an entry is not recognised, which only costs the early refusal. */
static char *resolve_command(const mcp_downstream_server_t *s)
{
    if (s->command[0] != '/' && strchr(s->command, '/') != NULL && s->cwd != NULL &&
        s->cwd[0] == '/') {
        size_t n = strlen(s->cwd) + 1 + strlen(s->command) + 1;
        char *p = malloc(n);
        if (p != NULL) snprintf(p, n, "%s/%s", s->cwd, s->command);
        return p;
    }
    const char *path = getenv("PATH");
    for (size_t i = 0; i < s->n_env; i++)
        if (strcmp(s->env[i].name, "PATH") == 0 && strstr(s->env[i].value, "${") == NULL)
            path = s->env[i].value;
    char *kv = NULL;
    if (path != NULL) {
        size_t n = strlen(path) + 6;
        if ((kv = malloc(n)) == NULL) return NULL;
        snprintf(kv, n, "PATH=%s", path);
    }
    char *envp[2] = {kv, NULL};
    char why[64];
    char *file = mcp__client_which(s->command, envp, why, sizeof why);
    free(kv);
    return file;
}

/* Why this stdio entry must not start (it would start ptc-mcp itself), in why[]; false if it
 * may. */
static bool starts_itself(const mcp_downstream_server_t *s, char *why, size_t why_size)
{
    const char *parent = getenv(MCP_DOWNSTREAM_PARENT_ENV);
    if (parent != NULL && parent[0] != '\0') {
        snprintf(why, why_size,
                 "mcpServers.%s: not started: this ptc-mcp was itself started as a downstream "
                 "server by ptc-mcp (pid %.32s, %s in the environment) and starts no processes, "
                 "so that a config listing ptc-mcp cannot start an endless chain of them; remove "
                 "the ptc-mcp entry from the first one's --config",
                 s->name, parent, MCP_DOWNSTREAM_PARENT_ENV);
        return true;
    }
    char *file = resolve_command(s);
    if (file == NULL) return false; /* not found: the client reports it when it starts */
    struct stat a, b;
    bool self = stat(file, &a) == 0 && stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev &&
                a.st_ino == b.st_ino;
    if (self)
        snprintf(why, why_size,
                 "mcpServers.%s: not started: \"command\" (%.512s) is ptc-mcp itself, which would "
                 "start itself again with the same config, endlessly; remove this entry (a config "
                 "reused from Claude Desktop often lists ptc-mcp)",
                 s->name, file);
    free(file);
    return self;
}

/* Parses one entry into cfg (a new last server), or records why it is dropped. Returns < 0
 * only for ENOMEM, or ETOOBIG past the problems' cap. */
static int add_entry(mcp_downstream_config_t *cfg, const cJSON *entry)
{
    const char *name = entry->string;
    size_t nl = strlen(name);
    char m[1024];
    if (nl == 0 || nl > MCP_DOWNSTREAM_MAX_NAME) {
        snprintf(m, sizeof m, "mcpServers.\"%.40s%s\": a server name must have 1 to %d bytes", name,
                 nl > 40 ? "..." : "", MCP_DOWNSTREAM_MAX_NAME);
        return add_problem(cfg, NULL, true, m);
    }
    for (size_t i = 0; i < cfg->n_servers; i++) {
        if (strcmp(cfg->servers[i].name, name) == 0) {
            snprintf(m, sizeof m,
                     "mcpServers.%s: the name appears twice; the second entry is left out", name);
            return add_problem(cfg, name, true, m);
        }
    }
    /* Cline's and others' switch: the user asked for this server not to run. */
    const cJSON *disabled =
        cJSON_IsObject(entry) ? cJSON_GetObjectItemCaseSensitive(entry, "disabled") : NULL;
    if (disabled != NULL && !cJSON_IsBool(disabled) && !cJSON_IsNull(disabled)) {
        snprintf(m, sizeof m, "mcpServers.%s.disabled: expected true or false", name);
        return add_problem(cfg, name, true, m);
    }
    if (cJSON_IsTrue(disabled)) {
        snprintf(m, sizeof m, "mcpServers.%s: \"disabled\": true, not started", name);
        return add_problem(cfg, name, true, m);
    }
    /* Built in the first free slot, which counts only once the entry is kept. */
    mcp_downstream_server_t *s = &cfg->servers[cfg->n_servers];
    memset(s, 0, sizeof *s);
    if ((s->name = mcp__strdup(name)) == NULL) return MCP_ENOMEM;
    m[0] = '\0';
    int rc = parse_entry(entry, s, m, sizeof m);
    bool drop = rc < 0 || (s->kind == MCP_DOWNSTREAM_STDIO && starts_itself(s, m, sizeof m));
    if (drop) {
        free_server(s);
        return rc == MCP_ENOMEM ? rc : add_problem(cfg, name, true, m);
    }
    cfg->n_servers++;
    return warn_unknown_keys(cfg, entry, name);
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
        if ((rc = add_entry(out, entry)) < 0) break;
    }
    if (rc < 0) {
        if (msg != NULL && msg_size > 0 && rc == MCP_ETOOBIG)
            snprintf(msg, msg_size,
                     "mcpServers: more than %d problems (entries left out, unknown keys)",
                     MCP_DOWNSTREAM_MAX_PROBLEMS);
        else if (msg != NULL && msg_size > 0)
            snprintf(msg, msg_size, "out of memory reading the config");
        mcp_downstream_config_close(out);
    }
    return rc;
}

cJSON *mcp_json_parse_located(const char *json, size_t len, char *msg, size_t msg_size)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (root != NULL) return root;
    size_t off = end != NULL && end >= json ? (size_t)(end - json) : 0;
    if (off > len) off = len;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off; i++) {
        if (json[i] == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)json[i] & 0xC0) != 0x80) {
            col++; /* a UTF-8 continuation byte is part of the character before */
        }
    }
    if (msg == NULL || msg_size == 0) return NULL;
    size_t rest = off;
    while (rest < len &&
           (json[rest] == ' ' || json[rest] == '\t' || json[rest] == '\n' || json[rest] == '\r'))
        rest++;
    if (rest >= len) {
        snprintf(msg, msg_size,
                 "near line %zu, column %zu: the JSON ends too early (an unclosed {, [ or \")",
                 line, col);
        return NULL;
    }
    size_t n = 0; /* the text at the error, up to the end of its line */
    while (n < 20 && off + n < len && json[off + n] != '\n' && json[off + n] != '\r')
        n++;
    /* cJSON stops at or just after the offending character: "near", and the text there (or
     * before it, when the error is at the end of a line). */
    size_t from = off;
    if (n == 0) {
        while (from > 0 && off - from < 20 && json[from - 1] != '\n')
            from--;
        n = off - from;
    }
    snprintf(msg, msg_size, "near line %zu, column %zu: not valid JSON (%s \"%.*s\")", line, col,
             from < off ? "after" : "at", (int)n, json + from);
    return NULL;
}

int mcp_downstream_config_parse(const char *json, size_t len, mcp_downstream_config_t *out,
                                char *msg, size_t msg_size)
{
    memset(out, 0, sizeof *out);
    char where[160];
    cJSON *root = mcp_json_parse_located(json, len, where, sizeof where);
    if (root == NULL) ERR("the config is not valid JSON: %s", where);
    int rc = mcp_downstream_config_from_json(root, out, msg, msg_size);
    cJSON_Delete(root);
    return rc;
}
