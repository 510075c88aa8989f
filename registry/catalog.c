/* catalog.c - the tools the registry knows: ids, loading --tools-file, per-server removal. */
#include "internal.h"

#include "base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tool {
    reg_tool_t view;
    char *id, *server, *name, *title, *description, *category;
    char *sn_key; /* the by_server_name key (sn_key) */
    cJSON *schema, *annotations, *output_schema;
} tool_t;

/* The key of (server, name): the server's length, ':', then both names. The length makes it
 * unambiguous whatever bytes the names hold. Returns the length, or -1 when it does not fit. */
static int sn_key(const char *server, const char *name, char *out, size_t size)
{
    int n = snprintf(out, size, "%zu:%s%s", strlen(server), server, name);
    return n < 0 || (size_t)n >= size ? -1 : n;
}

#define SN_KEY_MAX (2 * REG_NAME_MAX + 24)

/* Tools per server, so that removing a server with no tools (every first tools/list of a
 * downstream server) costs a lookup, not a scan of the whole catalog. */
typedef struct server_count {
    char *name;
    size_t count;
} server_count_t;

struct reg_catalog {
    tool_t **tools;
    size_t n, cap;
    reg__map_t by_id; /* id -> position in tools */
    uint64_t next_seq;
    server_count_t *servers;
    size_t nservers, servers_cap;
    reg__map_t by_server; /* name -> position in servers */
    /* (server, name) -> position in tools; the first of duplicates wins, as a scan would. */
    reg__map_t by_server_name;
};

/* Adds one tool to server's count, creating the entry. */
static int server_ref(reg_catalog_t *cat, const char *server)
{
    size_t i;
    if (reg__map_get(&cat->by_server, server, &i)) {
        cat->servers[i].count++;
        return REG_OK;
    }
    /* A server has a tool in the catalog, so the catalog's cap bounds them; the codes are
     * base's (REG_ENOMEM is PTC_ENOMEM). */
    int rc = ptc_array_reserve(&cat->servers, &cat->servers_cap, cat->nservers + 1,
                               sizeof *cat->servers, REG_CATALOG_MAX);
    if (rc < 0) return rc;
    char *name = reg__strdup(server);
    if (name == NULL) return REG_ENOMEM;
    if (reg__map_put(&cat->by_server, name, cat->nservers) < 0) {
        free(name);
        return REG_ENOMEM;
    }
    cat->servers[cat->nservers++] = (server_count_t){name, 1};
    return REG_OK;
}

/* Drops n tools from server's count, deleting the entry at zero. */
static void server_unref(reg_catalog_t *cat, const char *server, size_t n)
{
    size_t i;
    if (!reg__map_get(&cat->by_server, server, &i)) return;
    if (cat->servers[i].count > n) {
        cat->servers[i].count -= n;
        return;
    }
    reg__map_del(&cat->by_server, cat->servers[i].name);
    free(cat->servers[i].name);
    size_t last = --cat->nservers;
    if (i != last) {
        cat->servers[i] = cat->servers[last];
        (void)reg__map_put(&cat->by_server, cat->servers[i].name, i); /* replaces: no alloc */
    }
}

static int is_name_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

size_t reg_sanitize_name(const char *in, char *out, size_t out_size)
{
    if (out == NULL || out_size == 0) return 0;
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(in ? in : ""); *p && o + 1 < out_size;
         p++) {
        if (is_name_byte(*p)) {
            out[o++] = (char)*p;
            continue;
        }
        /* One '_' for a whole UTF-8 sequence, not one per byte: "café" -> "caf_". */
        if (*p >= 0xC0)
            while ((p[1] & 0xC0) == 0x80)
                p++;
        out[o++] = '_';
    }
    if (o == 0 && out_size > 1) out[o++] = '_';
    out[o] = 0;
    return o;
}

void reg_make_id(const char *server, const char *tool, char out[REG_ID_MAX + 1])
{
    char s[REG_ID_MAX + 1], t[REG_ID_MAX + 1];
    size_t sn = reg_sanitize_name(server, s, sizeof s);
    size_t tn = reg_sanitize_name(tool, t, sizeof t);
    /* The server part keeps at most half of the id; the tool part gets what is left. */
    size_t room = REG_ID_MAX - 2, smax = room / 2;
    if (sn + 2 + tn > REG_ID_MAX) {
        size_t allow = tn < room - smax ? room - tn : smax;
        if (sn > allow) sn = allow;
        if (tn > room - sn) tn = room - sn;
    }
    memcpy(out, s, sn);
    out[sn] = '_';
    out[sn + 1] = '_';
    memcpy(out + sn + 2, t, tn);
    out[sn + 2 + tn] = 0;
}

int reg_catalog_new(reg_catalog_t **out)
{
    if (out == NULL) return REG_EINVAL;
    *out = calloc(1, sizeof **out);
    return *out ? REG_OK : REG_ENOMEM;
}

static void tool_free(tool_t *t)
{
    if (t == NULL) return;
    free(t->id);
    free(t->server);
    free(t->name);
    free(t->title);
    free(t->description);
    free(t->category);
    free(t->sn_key);
    cJSON_Delete(t->schema);
    cJSON_Delete(t->annotations);
    cJSON_Delete(t->output_schema);
    free(t);
}

void reg_catalog_free(reg_catalog_t *cat)
{
    if (cat == NULL) return;
    for (size_t i = 0; i < cat->n; i++)
        tool_free(cat->tools[i]);
    free(cat->tools);
    reg__map_free(&cat->by_id);
    reg__map_free(&cat->by_server_name);
    for (size_t i = 0; i < cat->nservers; i++)
        free(cat->servers[i].name);
    free(cat->servers);
    reg__map_free(&cat->by_server);
    free(cat);
}

static const cJSON *opt_member(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNull(v) ? NULL : v;
}

/* The tool's own category: "category" or _meta.category, when a string. */
static const char *tool_category(const cJSON *tool)
{
    const cJSON *c = opt_member(tool, "category");
    if (cJSON_IsString(c) && c->valuestring[0]) return c->valuestring;
    const cJSON *meta = opt_member(tool, "_meta");
    c = cJSON_IsObject(meta) ? opt_member(meta, "category") : NULL;
    if (cJSON_IsString(c) && c->valuestring[0]) return c->valuestring;
    return NULL;
}

/* Checks one Tool object; on error writes what is wrong (without a location prefix). */
static int check_tool(const cJSON *tool, const char *server, char *msg, size_t msg_size)
{
    if (!cJSON_IsObject(tool)) return reg__fail(msg, msg_size, REG_EINVAL, "is not an object");
    const cJSON *name = opt_member(tool, "name");
    if (!cJSON_IsString(name) || name->valuestring[0] == 0)
        return reg__fail(msg, msg_size, REG_EINVAL, "\"name\" must be a non-empty string");
    if (strlen(name->valuestring) > REG_NAME_MAX)
        return reg__fail(msg, msg_size, REG_ETOOBIG, "\"name\" is longer than %d bytes",
                         REG_NAME_MAX);
    if (server == NULL) {
        const cJSON *s = opt_member(tool, "server");
        if (s == NULL)
            return reg__fail(msg, msg_size, REG_EINVAL,
                             "tool \"%s\" has no \"server\"; add one to each tool or give a "
                             "default server",
                             name->valuestring);
        if (!cJSON_IsString(s) || s->valuestring[0] == 0)
            return reg__fail(msg, msg_size, REG_EINVAL,
                             "tool \"%s\": \"server\" must be a non-empty string",
                             name->valuestring);
        server = s->valuestring;
    }
    if (strlen(server) > REG_NAME_MAX)
        return reg__fail(msg, msg_size, REG_ETOOBIG, "server name is longer than %d bytes",
                         REG_NAME_MAX);
    static const char *const strings[] = {"title", "description", "category"};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        const cJSON *v = opt_member(tool, strings[i]);
        if (v != NULL && !cJSON_IsString(v))
            return reg__fail(msg, msg_size, REG_EINVAL, "tool \"%s\": \"%s\" must be a string",
                             name->valuestring, strings[i]);
    }
    static const char *const objects[] = {"inputSchema", "annotations"};
    for (size_t i = 0; i < sizeof objects / sizeof objects[0]; i++) {
        const cJSON *v = opt_member(tool, objects[i]);
        if (v != NULL && !cJSON_IsObject(v))
            return reg__fail(msg, msg_size, REG_EINVAL, "tool \"%s\": \"%s\" must be an object",
                             name->valuestring, objects[i]);
    }
    return REG_OK;
}

static char *dup_cut(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);
    n = ptc_utf8_cut(s, n, max); /* not inside a UTF-8 sequence */
    char *d = malloc(n + 1);
    if (d == NULL) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static const char *str_member(const cJSON *obj, const char *key)
{
    const cJSON *v = opt_member(obj, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Picks a free id: base, then base_2, base_3, ... with the base cut so the suffix fits. */
static int unique_id(const reg_catalog_t *cat, const char *base, char out[REG_ID_MAX + 1])
{
    if (!reg__map_get(&cat->by_id, base, NULL)) {
        snprintf(out, REG_ID_MAX + 1, "%s", base);
        return REG_OK;
    }
    for (unsigned k = 2; k <= REG_SUFFIX_MAX; k++) {
        char suffix[16];
        int sl = snprintf(suffix, sizeof suffix, "_%u", k);
        size_t bl = strlen(base);
        if (bl + (size_t)sl > REG_ID_MAX) bl = REG_ID_MAX - (size_t)sl;
        memcpy(out, base, bl);
        memcpy(out + bl, suffix, (size_t)sl + 1);
        if (!reg__map_get(&cat->by_id, out, NULL)) return REG_OK;
    }
    return REG_ETOOBIG;
}

static int add_checked(reg_catalog_t *cat, const char *server, const cJSON *tool,
                       const reg_tool_t **out_tool)
{
    if (server == NULL) server = str_member(tool, "server");
    if (cat->n >= REG_CATALOG_MAX) return REG_ETOOBIG;
    /* n < REG_CATALOG_MAX (checked above): only ENOMEM is left (REG_ENOMEM is PTC_ENOMEM). */
    int grown =
        ptc_array_reserve(&cat->tools, &cat->cap, cat->n + 1, sizeof *cat->tools, REG_CATALOG_MAX);
    if (grown < 0) return grown;
    const char *name = str_member(tool, "name");
    char base[REG_ID_MAX + 1], id[REG_ID_MAX + 1];
    reg_make_id(server, name, base);
    int rc = unique_id(cat, base, id);
    if (rc < 0) return rc;

    tool_t *t = calloc(1, sizeof *t);
    if (t == NULL) return REG_ENOMEM;
    const char *category = tool_category(tool);
    t->id = reg__strdup(id);
    t->server = reg__strdup(server);
    t->name = reg__strdup(name);
    t->title = dup_cut(str_member(tool, "title"), REG_TEXT_MAX);
    t->description = dup_cut(str_member(tool, "description"), REG_TEXT_MAX);
    t->category = reg__strdup(category ? category : server);
    char key[SN_KEY_MAX];
    t->sn_key = sn_key(server, name, key, sizeof key) < 0 ? NULL : reg__strdup(key);
    const cJSON *schema = opt_member(tool, "inputSchema");
    t->schema = schema ? cJSON_Duplicate(schema, 1) : cJSON_Parse("{\"type\":\"object\"}");
    const cJSON *ann = opt_member(tool, "annotations");
    t->annotations = ann ? cJSON_Duplicate(ann, 1) : NULL;
    /* What the tool's results hold: the generated Python function's return type says it. */
    const cJSON *out = opt_member(tool, "outputSchema");
    if (!cJSON_IsObject(out)) out = NULL;
    t->output_schema = out ? cJSON_Duplicate(out, 1) : NULL;
    if (!t->id || !t->server || !t->name || !t->title || !t->description || !t->category ||
        !t->sn_key || !t->schema || (ann && !t->annotations) || (out && !t->output_schema)) {
        tool_free(t);
        return REG_ENOMEM;
    }
    t->view =
        (reg_tool_t){t->id,       t->server, t->name,        t->title,        t->description,
                     t->category, t->schema, t->annotations, ++cat->next_seq, t->output_schema};
    if (server_ref(cat, t->server) < 0) {
        tool_free(t);
        return REG_ENOMEM;
    }
    if (reg__map_put(&cat->by_id, t->id, cat->n) < 0) {
        server_unref(cat, t->server, 1);
        tool_free(t);
        return REG_ENOMEM;
    }
    if (!reg__map_get(&cat->by_server_name, t->sn_key, NULL) &&
        reg__map_put(&cat->by_server_name, t->sn_key, cat->n) < 0) {
        reg__map_del(&cat->by_id, t->id);
        server_unref(cat, t->server, 1);
        tool_free(t);
        return REG_ENOMEM;
    }
    cat->tools[cat->n++] = t;
    if (out_tool != NULL) *out_tool = &t->view;
    return REG_OK;
}

int reg_catalog_add(reg_catalog_t *cat, const char *server, const cJSON *tool, char *msg,
                    size_t msg_size, const reg_tool_t **out_tool)
{
    if (cat == NULL || tool == NULL)
        return reg__fail(msg, msg_size, REG_EINVAL, "no catalog or no tool given");
    int rc = check_tool(tool, server, msg, msg_size);
    if (rc < 0) return rc;
    rc = add_checked(cat, server, tool, out_tool);
    if (rc < 0) return reg__fail(msg, msg_size, rc, "could not add tool: %s", reg_strerror(rc));
    return REG_OK;
}

/* Drops tools from position `keep` on (rolls back a partial load). */
static void truncate_to(reg_catalog_t *cat, size_t keep)
{
    while (cat->n > keep) {
        tool_t *t = cat->tools[--cat->n];
        reg__map_del(&cat->by_id, t->id);
        size_t at;
        if (reg__map_get(&cat->by_server_name, t->sn_key, &at) && at == cat->n)
            reg__map_del(&cat->by_server_name, t->sn_key);
        server_unref(cat, t->server, 1);
        tool_free(t);
    }
}

int reg_catalog_load_json(reg_catalog_t *cat, const cJSON *root, const char *default_server,
                          size_t *added, char *msg, size_t msg_size)
{
    if (added != NULL) *added = 0;
    if (cat == NULL || root == NULL)
        return reg__fail(msg, msg_size, REG_EINVAL, "no catalog or no document given");
    const cJSON *arr = root;
    if (cJSON_IsObject(root)) arr = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (!cJSON_IsArray(arr))
        return reg__fail(msg, msg_size, REG_EINVAL,
                         "expected a JSON array of MCP Tool objects or an object "
                         "{\"tools\": [...]}");
    size_t i = 0;
    const cJSON *tool;
    char why[256];
    cJSON_ArrayForEach(tool, arr)
    {
        const char *server = default_server;
        const cJSON *s = cJSON_IsObject(tool) ? opt_member(tool, "server") : NULL;
        if (cJSON_IsString(s) && s->valuestring[0]) server = NULL; /* the tool's own wins */
        int rc = check_tool(tool, server, why, sizeof why);
        if (rc < 0) return reg__fail(msg, msg_size, rc, "tool #%zu (counting from 0) %s", i, why);
        i++;
    }
    if (cat->n + i > REG_CATALOG_MAX)
        return reg__fail(msg, msg_size, REG_ETOOBIG, "more than %d tools in the catalog",
                         REG_CATALOG_MAX);
    size_t keep = cat->n;
    cJSON_ArrayForEach(tool, arr)
    {
        const cJSON *s = opt_member(tool, "server");
        const char *server = cJSON_IsString(s) && s->valuestring[0] ? NULL : default_server;
        int rc = add_checked(cat, server, tool, NULL);
        if (rc < 0) {
            truncate_to(cat, keep);
            return reg__fail(msg, msg_size, rc, "could not add the tools: %s", reg_strerror(rc));
        }
    }
    if (added != NULL) *added = i;
    return REG_OK;
}

/* 1-based line and column of byte offset `at` in text, for parse error messages. */
static void locate(const char *text, size_t at, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at && text[i]; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

int reg_catalog_load_file(reg_catalog_t *cat, const char *path, const char *default_server,
                          size_t *added, char *msg, size_t msg_size)
{
    if (added != NULL) *added = 0;
    if (cat == NULL || path == NULL)
        return reg__fail(msg, msg_size, REG_EINVAL, "no catalog or no path given");
    char *buf = NULL;
    size_t len = 0;
    int rc = ptc_file_read(path, REG_FILE_MAX, &buf, &len);
    if (rc == PTC_ETOOBIG)
        return reg__fail(msg, msg_size, REG_ETOOBIG, "tools file %s is larger than %u MiB", path,
                         REG_FILE_MAX >> 20);
    if (rc == PTC_ENOMEM)
        return reg__fail(msg, msg_size, REG_ENOMEM, "cannot read tools file %s: %s", path,
                         reg_strerror(REG_ENOMEM));
    if (rc < 0)
        return reg__fail(msg, msg_size, REG_EIO, "cannot open tools file %s: %s", path,
                         strerror(-rc));
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (root == NULL) {
        size_t line, col;
        locate(buf, end ? (size_t)(end - buf) : 0, &line, &col);
        free(buf);
        return reg__fail(msg, msg_size, REG_EINVAL,
                         "tools file %s is not valid JSON (error near line %zu, column %zu)", path,
                         line, col);
    }
    free(buf);
    char why[512];
    rc = reg_catalog_load_json(cat, root, default_server, added, why, sizeof why);
    cJSON_Delete(root);
    if (rc < 0) return reg__fail(msg, msg_size, rc, "tools file %s: %s", path, why);
    return REG_OK;
}

size_t reg_catalog_remove_server(reg_catalog_t *cat, const char *server)
{
    size_t si;
    if (cat == NULL || server == NULL || !reg__map_get(&cat->by_server, server, &si)) return 0;
    /* Compare with the count table's own copy: `server` may be a string of a tool freed here. */
    server = cat->servers[si].name;
    size_t o = 0, removed = 0;
    for (size_t i = 0; i < cat->n; i++) {
        tool_t *t = cat->tools[i];
        if (strcmp(t->server, server) == 0) {
            reg__map_del(&cat->by_id, t->id);
            reg__map_del(&cat->by_server_name, t->sn_key); /* every duplicate goes too */
            tool_free(t);
            removed++;
            continue;
        }
        cat->tools[o++] = t;
    }
    cat->n = o;
    server_unref(cat, server, removed);
    if (removed > 0) {
        /* Positions shifted: re-point the survivors (replacing puts cannot fail). */
        for (size_t i = 0; i < cat->n; i++)
            (void)reg__map_put(&cat->by_id, cat->tools[i]->id, i);
        /* Backwards, so that the first of duplicates is the one left. */
        for (size_t i = cat->n; i-- > 0;)
            (void)reg__map_put(&cat->by_server_name, cat->tools[i]->sn_key, i);
    }
    return removed;
}

size_t reg_catalog_count(const reg_catalog_t *cat)
{
    return cat ? cat->n : 0;
}

const reg_tool_t *reg_catalog_at(const reg_catalog_t *cat, size_t i)
{
    return cat && i < cat->n ? &cat->tools[i]->view : NULL;
}

const reg_tool_t *reg_catalog_find(const reg_catalog_t *cat, const char *id)
{
    size_t i;
    if (cat == NULL || id == NULL || !reg__map_get(&cat->by_id, id, &i)) return NULL;
    return &cat->tools[i]->view;
}

const reg_tool_t *reg_catalog_find_tool(const reg_catalog_t *cat, const char *server,
                                        const char *name)
{
    char key[SN_KEY_MAX];
    size_t i;
    if (cat == NULL || server == NULL || name == NULL ||
        sn_key(server, name, key, sizeof key) < 0 || !reg__map_get(&cat->by_server_name, key, &i))
        return NULL;
    return &cat->tools[i]->view;
}

/* ---------------------------------------------------------------------------------------- */
/* Index text                                                                               */

/* The index and embedding texts are capped by design (REG_TEXT_MAX * 2, REG_EMBED_TEXT_MAX):
 * the buffer refuses past its cap, so each piece is cut here, at a character boundary, to
 * what the cap leaves. */
static void sb_put(ptc_buf_t *b, const char *s, size_t n)
{
    ptc_buf_append(b, s, ptc_utf8_cut(s, n, b->max - b->len));
}

/* Appends text as a sentence: a separator first, and a period unless it ends with one. */
static void sb_sentence(ptc_buf_t *b, const char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\n'))
        n--;
    if (n == 0) return;
    if (b->len > 0) sb_put(b, " ", 1);
    sb_put(b, s, n);
    if (s[n - 1] != '.' && s[n - 1] != '?' && s[n - 1] != '!') sb_put(b, ".", 1);
}

static void sb_split(ptc_buf_t *b, const char *ident)
{
    char tmp[2 * REG_NAME_MAX + 2];
    int n = reg_text_split(ident, tmp, sizeof tmp);
    if (n > 0 || n == REG_ETOOBIG) sb_sentence(b, tmp);
}

char *reg_tool_index_text(const reg_tool_t *tool)
{
    if (tool == NULL) return NULL;
    ptc_buf_t b;
    ptc_buf_init(&b, 2 * (size_t)REG_TEXT_MAX - 1); /* with its NUL */
    /* The server's name first: users name the product ("on GitLab", "in Trello") and many
     * tools do not (list_branches, add_comment); with it, recall@5 on dev2 went 0.68 -> 0.71
     * for BM25 and 0.76 -> 0.82 for the model (bench/eval/README.md). */
    sb_split(&b, tool->server);
    sb_split(&b, tool->name);
    sb_sentence(&b, tool->title);
    sb_sentence(&b, tool->description);
    const cJSON *props = tool->input_schema
                             ? cJSON_GetObjectItemCaseSensitive(tool->input_schema, "properties")
                             : NULL;
    const cJSON *p;
    if (cJSON_IsObject(props)) {
        cJSON_ArrayForEach(p, props)
        {
            if (p->string == NULL) continue;
            sb_split(&b, p->string);
            const cJSON *d =
                cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "description") : NULL;
            if (cJSON_IsString(d)) sb_sentence(&b, d->valuestring);
        }
    }
    return ptc_buf_take(&b, NULL); /* NULL on ENOMEM */
}

char *reg_tool_embed_text(const reg_tool_t *tool)
{
    if (tool == NULL) return NULL;
    ptc_buf_t b;
    ptc_buf_init(&b, REG_EMBED_TEXT_MAX - 1); /* with its NUL */
    /* The server's name first, as in reg_tool_index_text. */
    sb_split(&b, tool->server);
    sb_split(&b, tool->name);
    sb_sentence(&b, tool->title);
    sb_sentence(&b, tool->description);
    /* Parameter names say what a tool acts on ("channel id", "due on"); their descriptions
     * are mostly formats and defaults, which pull a mean-pooled vector away from the topic. */
    const cJSON *props = tool->input_schema
                             ? cJSON_GetObjectItemCaseSensitive(tool->input_schema, "properties")
                             : NULL;
    const cJSON *p;
    bool first = true;
    if (cJSON_IsObject(props)) {
        cJSON_ArrayForEach(p, props)
        {
            char tmp[2 * REG_NAME_MAX + 2];
            if (p->string == NULL) continue;
            int n = reg_text_split(p->string, tmp, sizeof tmp);
            if (n <= 0 && n != REG_ETOOBIG) continue;
            sb_put(&b, first ? (b.len > 0 ? " Parameters: " : "Parameters: ") : ", ",
                   first ? (b.len > 0 ? 13 : 12) : 2);
            sb_put(&b, tmp, strlen(tmp));
            first = false;
        }
        if (!first) sb_put(&b, ".", 1);
    }
    return ptc_buf_take(&b, NULL); /* NULL on ENOMEM */
}

/* True when c can end a word (so a quote right after it is an apostrophe: "user's"). */
static bool word_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

char *reg_query_embed_text(const char *query)
{
    if (query == NULL) return NULL;
    size_t len = strnlen(query, REG_QUERY_MAX);
    char *out = malloc(len + 1);
    if (out == NULL) return NULL;
    size_t o = 0;
    bool kept_word = false;
    for (size_t i = 0; i < len;) {
        char c = query[i];
        if ((c == '\'' || c == '"') && (i == 0 || !word_char((unsigned char)query[i - 1]))) {
            const char *end = memchr(query + i + 1, c, len - i - 1);
            if (end != NULL) {
                i = (size_t)(end - query) + 1;
                continue;
            }
        }
        if (word_char((unsigned char)c)) kept_word = true;
        out[o++] = c;
        i++;
    }
    out[o] = 0;
    if (!kept_word) {
        /* Nothing but quoted text: the quotes are the request. */
        memcpy(out, query, len);
        out[len] = 0;
    }
    return out;
}
