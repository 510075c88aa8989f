/* pybundle.c - generates the sandbox's `tools` Python package from a catalog (pybundle.h). */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mbedtls/sha256.h>

#include "pybundle_runtime_py.h"

const char *ptc_pybundle_strerror(int err)
{
    switch (err) {
        PTC_PYBUNDLE_ERRORS(PTC_ERR_CASE)
    }
    return reg_strerror(err);
}

/* ---------------------------------------------------------------------------------------- */
/* Python text                                                                              */

/* Writes s as a double-quoted, pure-ASCII Python string literal: quotes, backslashes and every
 * control or non-ASCII character are escaped, so no byte of s can end the literal or the line. */
static void py_str(ptc_buf_t *b, const char *s, size_t n)
{
    ptc_buf_append(b, "\"", 1);
    size_t i = 0;
    while (i < n && ptc_buf_error(b) == 0) {
        unsigned cp;
        size_t k = ptc_utf8_decode(s + i, n - i, &cp);
        if (k == 0) {
            cp = 0xFFFD;
            k = 1;
        }
        i += k;
        char esc[16];
        if (cp == '"' || cp == '\\') {
            esc[0] = '\\', esc[1] = (char)cp, esc[2] = '\0';
        } else if (cp == '\n') {
            memcpy(esc, "\\n", 3);
        } else if (cp == '\t') {
            memcpy(esc, "\\t", 3);
        } else if (cp >= 0x20 && cp < 0x7F) {
            esc[0] = (char)cp, esc[1] = '\0';
        } else if (cp < 0x100) {
            snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
        } else if (cp < 0x10000) {
            snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
        } else {
            snprintf(esc, sizeof esc, "\\U%08x", (unsigned)cp);
        }
        ptc_buf_str(b, esc);
    }
    ptc_buf_append(b, "\"", 1);
}

static const char *const PY_KEYWORDS[] = {
    "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
    "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
    "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
    "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield",
};

static bool in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}

/* Room left for a leading '_', a trailing '_' and a collision suffix "_NNNNN". */
#define IDENT_CORE_MAX (PTC_PYBUNDLE_IDENT_MAX - 8)
#define SUFFIX_MAX     99999

size_t ptc_pybundle_identifier(const char *name, char *out, size_t out_size)
{
    if (!out || out_size < PTC_PYBUNDLE_IDENT_MAX + 1) return 0;
    size_t o = 0;
    const unsigned char *s = (const unsigned char *)(name ? name : "");
    if (*s >= '0' && *s <= '9') out[o++] = '_';
    for (size_t i = 0; s[i] && o < IDENT_CORE_MAX;) {
        unsigned char c = s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_') {
            out[o++] = (char)c;
            i++;
            continue;
        }
        size_t k = ptc_utf8_decode((const char *)s + i, strlen((const char *)s + i), NULL);
        i += k ? k : 1;
        out[o++] = '_';
    }
    if (o == 0) out[o++] = '_';
    out[o] = '\0';
    size_t n = o;
    bool dunder = n > 4 && strncmp(out, "__", 2) == 0 && strcmp(out + n - 2, "__") == 0;
    if (dunder || in_list(out, PY_KEYWORDS, sizeof PY_KEYWORDS / sizeof *PY_KEYWORDS)) {
        out[n++] = '_';
        out[n] = '\0';
    }
    return n;
}

/* A set of names taken in one namespace (linear: namespaces are bounded by the tool cap). */
typedef struct names {
    char **v;
    size_t n, cap;
} names_t;

static bool names_has(const names_t *ns, const char *s)
{
    for (size_t i = 0; i < ns->n; i++)
        if (strcmp(ns->v[i], s) == 0) return true;
    return false;
}

static int names_add(names_t *ns, const char *s)
{
    /* Every namespace holds at most one name per tool given a function (servers, modules,
     * functions) or per parameter of one (PTC_PYBUNDLE_PARAMS_MAX, fewer); the codes are base's
     * (PTC_PYBUNDLE_ENOMEM is PTC_ENOMEM). */
    int rc = ptc_array_reserve(&ns->v, &ns->cap, ns->n + 1, sizeof *ns->v, PTC_PYBUNDLE_TOOLS_MAX);
    if (rc < 0) return rc;
    ns->v[ns->n] = strdup(s);
    if (!ns->v[ns->n]) return PTC_PYBUNDLE_ENOMEM;
    ns->n++;
    return 0;
}

static void names_free(names_t *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    free(ns->v);
    memset(ns, 0, sizeof *ns);
}

/* The unique identifier for name in ns (added to ns); reserved names get a trailing '_'. */
static int unique_name(names_t *ns, const char *const *reserved, size_t nreserved, const char *name,
                       char out[PTC_PYBUNDLE_IDENT_MAX + 1])
{
    size_t n = ptc_pybundle_identifier(name, out, PTC_PYBUNDLE_IDENT_MAX + 1);
    if (in_list(out, reserved, nreserved)) {
        out[n++] = '_';
        out[n] = '\0';
    }
    if (names_has(ns, out)) {
        char base[PTC_PYBUNDLE_IDENT_MAX + 1];
        memcpy(base, out, n + 1);
        int i = 2;
        for (; i <= SUFFIX_MAX; i++) {
            char cand[PTC_PYBUNDLE_IDENT_MAX + 16];
            int len = snprintf(cand, sizeof cand, "%s_%d", base, i);
            if (len < 0 || len > PTC_PYBUNDLE_IDENT_MAX) return PTC_PYBUNDLE_EINVAL;
            memcpy(out, cand, (size_t)len + 1);
            if (!names_has(ns, out) && !in_list(out, reserved, nreserved)) break;
        }
        if (i > SUFFIX_MAX) return PTC_PYBUNDLE_EINVAL;
    }
    return names_add(ns, out);
}

/* Globals of a generated server module (a function or parameter must not shadow them). */
static const char *const MODULE_RESERVED[] = {"_ptc_rt", "_ptc_b", "_ptc_Any"};
/* Names of the package itself (a server module must not replace them on import). */
static const char *const PACKAGE_RESERVED[] = {
    "ToolError", "call",     "acall",    "search",     "asearch",  "emit",    "aemit",
    "help",      "_runtime", "_catalog", "_importlib", "_MODULES", "_invoke",
};
#define NRES(a) (sizeof(a) / sizeof *(a))

/* JSON Schema type -> (annotation in the module, name in the signature text). */
static void type_hint(const cJSON *prop, const char **annot, const char **shown)
{
    static const char *const json[] = {"string", "integer", "number", "boolean", "array", "object"};
    static const char *const py[] = {"str", "int", "float", "bool", "list", "dict"};
    *annot = "_ptc_Any";
    *shown = "Any";
    const cJSON *t = cJSON_IsObject(prop) ? cJSON_GetObjectItemCaseSensitive(prop, "type") : NULL;
    const char *name = NULL;
    if (cJSON_IsString(t)) {
        name = t->valuestring;
    } else if (cJSON_IsArray(t)) {
        /* ["string", "null"] is an optional string; anything wider stays Any. */
        const cJSON *it;
        cJSON_ArrayForEach(it, t)
        {
            if (!cJSON_IsString(it)) return;
            if (strcmp(it->valuestring, "null") == 0) continue;
            if (name) return;
            name = it->valuestring;
        }
    }
    if (!name) return;
    for (size_t i = 0; i < NRES(json); i++) {
        if (strcmp(name, json[i]) == 0) {
            static const char *const annots[] = {"_ptc_b.str",  "_ptc_b.int",  "_ptc_b.float",
                                                 "_ptc_b.bool", "_ptc_b.list", "_ptc_b.dict"};
            *annot = annots[i];
            *shown = py[i];
            return;
        }
    }
}

typedef struct param {
    const char *wire;  /* original name (borrowed from the schema) */
    const cJSON *prop; /* its schema, may be NULL */
    bool required;
    char ident[PTC_PYBUNDLE_IDENT_MAX + 1];
} param_t;

static bool schema_requires(const cJSON *required, const char *name)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, required)
    {
        if (cJSON_IsString(it) && strcmp(it->valuestring, name) == 0) return true;
    }
    return false;
}

static bool params_have(const param_t *ps, size_t n, const char *wire)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ps[i].wire, wire) == 0) return true;
    return false;
}

/* Collects parameters, required first (schema order), then optional; at most
 * PTC_PYBUNDLE_PARAMS_MAX (the rest stay reachable through tools.call). */
static size_t collect_params(const cJSON *schema, param_t *ps)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(schema, "required");
    if (!cJSON_IsObject(props)) props = NULL;
    if (!cJSON_IsArray(req)) req = NULL;
    size_t n = 0;
    const cJSON *it;
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 1) {
            /* Required names the schema forgot to describe are still required arguments. */
            cJSON_ArrayForEach(it, req)
            {
                if (n == PTC_PYBUNDLE_PARAMS_MAX) return n;
                if (!cJSON_IsString(it) || params_have(ps, n, it->valuestring)) continue;
                ps[n++] = (param_t){.wire = it->valuestring, .prop = NULL, .required = true};
            }
            continue;
        }
        cJSON_ArrayForEach(it, props)
        {
            if (n == PTC_PYBUNDLE_PARAMS_MAX) return n;
            if (!it->string) continue;
            bool r = schema_requires(req, it->string);
            if (r != (pass == 0) || params_have(ps, n, it->string)) continue;
            ps[n++] = (param_t){.wire = it->string, .prop = it, .required = r};
        }
    }
    return n;
}

/* The first line of s, at most max bytes, cut on a character. */
static void first_line(const char *s, size_t max, ptc_buf_t *out)
{
    size_t n = strcspn(s, "\r\n");
    if (n > max) n = ptc_utf8_cut(s, strlen(s), max);
    ptc_buf_append(out, s, n);
}

/* The docstring's Returns section: what tools._runtime's _unwrap gives back. With an
 * outputSchema the result is its structuredContent, a dict whose top-level keys are listed. */
static void returns_doc(ptc_buf_t *doc, const cJSON *out)
{
    if (doc->len >= PTC_PYBUNDLE_DOC_MAX) return;
    ptc_buf_str(doc, doc->len ? "\n\nReturns:\n    " : "Returns:\n    ");
    if (out == NULL) {
        ptc_buf_str(doc, "The tool's structuredContent when it sends one; else its text "
                         "parsed as JSON when it is JSON; else the text (str); a result "
                         "without text gives its content list. A tool error raises "
                         "tools.ToolError.");
        return;
    }
    ptc_buf_str(doc, "dict: the tool's structuredContent, per its outputSchema. A tool "
                     "error raises tools.ToolError.");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(out, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(out, "required");
    if (!cJSON_IsObject(props)) return;
    const cJSON *it;
    cJSON_ArrayForEach(it, props)
    {
        if (it->string == NULL || doc->len >= PTC_PYBUNDLE_DOC_MAX) continue;
        const char *annot, *shown;
        type_hint(it, &annot, &shown);
        ptc_buf_str(doc, "\n    ");
        first_line(it->string, 100, doc);
        ptc_buf_str(doc, " (");
        ptc_buf_str(doc, shown);
        ptc_buf_str(doc,
                    cJSON_IsArray(req) && schema_requires(req, it->string) ? ")" : ", optional)");
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(it, "description");
        if (cJSON_IsString(d) && d->valuestring[0]) {
            ptc_buf_str(doc, ": ");
            first_line(d->valuestring, 400, doc);
        }
    }
}

/* Writes one function into mod and its entry into fns (the _catalog.json list). */
static int gen_function(ptc_buf_t *mod, cJSON *fns, names_t *fnames, const reg_tool_t *t)
{
    char fname[PTC_PYBUNDLE_IDENT_MAX + 1];
    int rc = unique_name(fnames, MODULE_RESERVED, NRES(MODULE_RESERVED), t->name, fname);
    if (rc) return rc;
    param_t *ps = calloc(PTC_PYBUNDLE_PARAMS_MAX, sizeof *ps);
    if (!ps) return PTC_PYBUNDLE_ENOMEM;
    size_t np = collect_params(t->input_schema, ps);
    names_t pnames = {0};
    ptc_buf_t sig, doc;
    ptc__pybundle_buf_init(&sig);
    ptc__pybundle_buf_init(&doc);
    for (size_t i = 0; i < np && !rc; i++)
        rc = unique_name(&pnames, MODULE_RESERVED, NRES(MODULE_RESERVED), ps[i].wire, ps[i].ident);
    if (rc) goto out;

    ptc_buf_str(mod, "\n\ndef ");
    ptc_buf_str(mod, fname);
    ptc_buf_str(mod, "(");
    ptc_buf_str(&sig, fname);
    ptc_buf_str(&sig, "(");
    for (size_t i = 0; i < np; i++) {
        const char *annot, *shown;
        type_hint(ps[i].prop, &annot, &shown);
        const char *sep = i ? ", " : "";
        ptc_buf_str(mod, sep);
        ptc_buf_str(mod, ps[i].ident);
        ptc_buf_str(mod, ": ");
        ptc_buf_str(mod, annot);
        ptc_buf_str(&sig, sep);
        ptc_buf_str(&sig, ps[i].ident);
        ptc_buf_str(&sig, ": ");
        ptc_buf_str(&sig, shown);
        if (!ps[i].required) {
            ptc_buf_str(mod, " = None");
            ptc_buf_str(&sig, " = None");
        }
    }
    /* A declared outputSchema (an object, by MCP's rule) means the call returns that object. */
    const cJSON *out = t->output_schema;
    ptc_buf_str(mod, out ? ") -> _ptc_b.dict:\n    " : ") -> _ptc_Any:\n    ");
    ptc_buf_str(&sig, out ? ") -> dict" : ")");

    /* Docstring: the description, then one line per parameter, all within DOC_MAX. */
    ptc_buf_append(&doc, t->description,
                   ptc_utf8_cut(t->description, strlen(t->description), PTC_PYBUNDLE_DOC_MAX));
    if (np) ptc_buf_str(&doc, doc.len ? "\n\nArgs:" : "Args:");
    for (size_t i = 0; i < np && doc.len < PTC_PYBUNDLE_DOC_MAX; i++) {
        const char *annot, *shown;
        type_hint(ps[i].prop, &annot, &shown);
        ptc_buf_str(&doc, "\n    ");
        ptc_buf_str(&doc, ps[i].ident);
        ptc_buf_str(&doc, " (");
        ptc_buf_str(&doc, shown);
        ptc_buf_str(&doc, ps[i].required ? ", required)" : ", optional)");
        const cJSON *d =
            ps[i].prop ? cJSON_GetObjectItemCaseSensitive(ps[i].prop, "description") : NULL;
        if (cJSON_IsString(d) && d->valuestring[0]) {
            ptc_buf_str(&doc, ": ");
            first_line(d->valuestring, 400, &doc);
        }
    }
    returns_doc(&doc, out);
    if (ptc_buf_error(&doc)) {
        rc = ptc_buf_error(&doc);
        goto out;
    }
    py_str(mod, doc.p ? doc.p : "", doc.len);
    ptc_buf_str(mod, "\n    return _ptc_rt._invoke(");
    py_str(mod, t->server, strlen(t->server));
    ptc_buf_str(mod, ", ");
    py_str(mod, t->name, strlen(t->name));
    for (int want = 1; want >= 0; want--) {
        ptc_buf_str(mod, ", {");
        bool first = true;
        for (size_t i = 0; i < np; i++) {
            if (ps[i].required != (want == 1)) continue;
            if (!first) ptc_buf_str(mod, ", ");
            first = false;
            py_str(mod, ps[i].wire, strlen(ps[i].wire));
            ptc_buf_str(mod, ": ");
            ptc_buf_str(mod, ps[i].ident);
        }
        ptc_buf_str(mod, "}");
    }
    ptc_buf_str(mod, ")\n");

    ptc_buf_t summary;
    ptc__pybundle_buf_init(&summary);
    first_line(t->description, 200, &summary);
    cJSON *fn = cJSON_CreateObject();
    if (ptc_buf_error(&sig) || ptc_buf_error(&summary) || !fn || !cJSON_AddItemToArray(fns, fn) ||
        !cJSON_AddStringToObject(fn, "name", fname) ||
        !cJSON_AddStringToObject(fn, "tool", t->name) ||
        !cJSON_AddStringToObject(fn, "id", t->id) ||
        !cJSON_AddStringToObject(fn, "signature", sig.p ? sig.p : "") ||
        !cJSON_AddStringToObject(fn, "summary", summary.p ? summary.p : "")) {
        rc = ptc_buf_error(&sig)       ? ptc_buf_error(&sig)
             : ptc_buf_error(&summary) ? ptc_buf_error(&summary)
                                       : PTC_PYBUNDLE_ENOMEM;
    }
    ptc_buf_free(&summary);
out:
    ptc_buf_free(&sig);
    ptc_buf_free(&doc);
    names_free(&pnames);
    free(ps);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* Cache key                                                                                */

static int hash_field(mbedtls_sha256_context *ctx, const char *s)
{
    /* Length-prefixed so that no two different catalogs give the same byte stream. */
    uint64_t n = s ? strlen(s) : 0;
    if (mbedtls_sha256_update_ret(ctx, (const unsigned char *)&n, sizeof n))
        return PTC_PYBUNDLE_ECRYPTO;
    if (n && mbedtls_sha256_update_ret(ctx, (const unsigned char *)s, (size_t)n))
        return PTC_PYBUNDLE_ECRYPTO;
    return 0;
}

static int hash_json(mbedtls_sha256_context *ctx, const cJSON *j)
{
    if (!j) return hash_field(ctx, "");
    char *s = cJSON_PrintUnformatted(j);
    if (!s) return PTC_PYBUNDLE_ENOMEM;
    int rc = hash_field(ctx, s);
    free(s);
    return rc;
}

int ptc_pybundle_key(const reg_catalog_t *cat, char key[65])
{
    if (!cat || !key) return PTC_PYBUNDLE_EINVAL;
    mbedtls_sha256_context ctx;
    mbedtls_sha256_init(&ctx);
    int rc = mbedtls_sha256_starts_ret(&ctx, 0) ? PTC_PYBUNDLE_ECRYPTO : 0;
    if (!rc) rc = hash_field(&ctx, PTC_PYBUNDLE_VERSION);
    /* The runtime is copied into every bundle: a binary with another runtime needs new ones. */
    uint64_t rt_len = sizeof ptc_pybundle_runtime_py;
    if (!rc &&
        (mbedtls_sha256_update_ret(&ctx, (const unsigned char *)&rt_len, sizeof rt_len) ||
         mbedtls_sha256_update_ret(&ctx, ptc_pybundle_runtime_py, sizeof ptc_pybundle_runtime_py)))
        rc = PTC_PYBUNDLE_ECRYPTO;
    size_t n = reg_catalog_count(cat);
    for (size_t i = 0; i < n && !rc; i++) {
        const reg_tool_t *t = reg_catalog_at(cat, i);
        rc = hash_field(&ctx, t->id);
        if (!rc) rc = hash_field(&ctx, t->server);
        if (!rc) rc = hash_field(&ctx, t->name);
        if (!rc) rc = hash_field(&ctx, t->title);
        if (!rc) rc = hash_field(&ctx, t->description);
        if (!rc) rc = hash_json(&ctx, t->input_schema);
        if (!rc) rc = hash_json(&ctx, t->annotations);
        if (!rc) rc = hash_json(&ctx, t->output_schema);
    }
    unsigned char digest[32];
    if (!rc && mbedtls_sha256_finish_ret(&ctx, digest)) rc = PTC_PYBUNDLE_ECRYPTO;
    mbedtls_sha256_free(&ctx);
    if (rc) return rc;
    for (size_t i = 0; i < 32; i++)
        snprintf(key + 2 * i, 3, "%02x", digest[i]);
    return PTC_PYBUNDLE_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Files                                                                                    */

static int write_file(const char *dir, const char *name, const char *data, size_t len)
{
    char path[PTC_PYBUNDLE_PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return PTC_PYBUNDLE_EINVAL;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return PTC_PYBUNDLE_EIO;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            close(fd);
            return PTC_PYBUNDLE_EIO;
        }
        off += (size_t)w;
    }
    /* Readable by the sandbox's own uid whatever the umask was. */
    if (fchmod(fd, 0644) != 0 || close(fd) != 0) return PTC_PYBUNDLE_EIO;
    return PTC_PYBUNDLE_OK;
}

/* Removes a temporary bundle: files of tmp/tools, then the two folders. */
static void remove_tmp(const char *tmp)
{
    char tools[PTC_PYBUNDLE_PATH_MAX];
    if ((size_t)snprintf(tools, sizeof tools, "%s/tools", tmp) >= sizeof tools) return;
    DIR *d = opendir(tools);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            unlinkat(dirfd(d), e->d_name, 0);
        }
        closedir(d);
    }
    rmdir(tools);
    rmdir(tmp);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    /* Depth first, so a folder is empty by the time it comes; a failure leaves it in place. */
    if (type == FTW_DP)
        (void)rmdir(path);
    else
        (void)unlink(path);
    return 0;
}

long ptc_pybundle_prune(const char *cache_dir, const char *keep_root, int64_t now, long max_age_s)
{
    if (cache_dir == NULL || !cache_dir[0] || max_age_s < 0) return PTC_PYBUNDLE_EINVAL;
    const char *keep = keep_root != NULL ? strrchr(keep_root, '/') : NULL;
    keep = keep != NULL ? keep + 1 : keep_root;
    DIR *d = opendir(cache_dir);
    if (d == NULL) return 0;
    long removed = 0;
    struct dirent *e;
    char path[PTC_PYBUNDLE_PATH_MAX];
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strncmp(n, "pybundle-", 9) != 0 && strncmp(n, ".pybundle-", 10) != 0) continue;
        if (keep != NULL && strcmp(n, keep) == 0) continue;
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", cache_dir, n) >= sizeof path ||
            lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
            (int64_t)st.st_mtim.tv_sec >= now - max_age_s)
            continue;
        /* FTW_PHYS: a symlink planted inside is removed, never followed. */
        (void)nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        if (lstat(path, &st) != 0) removed++;
    }
    closedir(d);
    return removed;
}

static void set_msg(char *msg, size_t msg_size, const char *what, const char *path, int err)
{
    if (msg && msg_size)
        snprintf(msg, msg_size, "%s %s: %s; check that the cache folder is writable (--cache-dir)",
                 what, path, strerror(err));
}

static const char INIT_PY_HEAD[] =
    "\"\"\"Registry tools as Python functions (generated by ptc-mcp; do not edit).\n"
    "\n"
    "from tools.<module> import <function>, or tools.<module>.<function>(...);\n"
    "tools.help() lists the modules; tools.call(server, tool, **args) takes original names;\n"
    "tools.search(query, top_k=5, server=None, category=None) searches the registry;\n"
    "tools.emit(obj) returns a record.\n"
    "\"\"\"\n"
    "from ._runtime import ToolError, acall, aemit, asearch, call, emit, help, search\n"
    "\n"
    "__all__ = ['ToolError', 'call', 'acall', 'search', 'asearch', 'emit', 'aemit', 'help']\n"
    "\n"
    "_MODULES = frozenset([";

static const char INIT_PY_TAIL[] =
    "])\n"
    "\n"
    "\n"
    "def __getattr__(name):\n"
    "    # tools.<module> works without importing the module first. importlib is imported here,\n"
    "    # not at the top: `import tools` stays cheap.\n"
    "    if name in _MODULES:\n"
    "        import importlib\n"
    "\n"
    "        return importlib.import_module('.' + name, __name__)\n"
    "    raise AttributeError('module %r has no attribute %r; tools.help() lists the modules'\n"
    "                         % (__name__, name))\n";

static const char MODULE_HEAD[] = "import builtins as _ptc_b\n"
                                  "from typing import Any as _ptc_Any\n"
                                  "\n"
                                  "from . import _runtime as _ptc_rt\n";

typedef struct gen {
    const reg_catalog_t *cat;
    const char *tools_dir;
    cJSON *catalog; /* _catalog.json */
    ptc_buf_t init; /* __init__.py */
    size_t modules, functions, skipped;
} gen_t;

/* Writes the module of one server (tools i.. of that server, up to the tool cap). */
static int gen_module(gen_t *g, names_t *mnames, const char *server, size_t ntools)
{
    char mname[PTC_PYBUNDLE_IDENT_MAX + 1];
    int rc = unique_name(mnames, PACKAGE_RESERVED, NRES(PACKAGE_RESERVED), server, mname);
    if (rc) return rc;
    ptc_buf_t mod;
    ptc__pybundle_buf_init(&mod);
    names_t fnames = {0};
    cJSON *modules = cJSON_GetObjectItemCaseSensitive(g->catalog, "modules");
    cJSON *info = cJSON_CreateObject();
    cJSON *fns = cJSON_CreateArray();
    if (!info || !fns || !cJSON_AddItemToObject(modules, mname, info)) {
        cJSON_Delete(info);
        cJSON_Delete(fns);
        return PTC_PYBUNDLE_ENOMEM;
    }
    if (!cJSON_AddStringToObject(info, "server", server) ||
        !cJSON_AddItemToObject(info, "functions", fns)) {
        cJSON_Delete(fns);
        return PTC_PYBUNDLE_ENOMEM;
    }
    ptc_buf_str(&mod, "# Generated by ptc-mcp from the tool registry; do not edit.\n");
    ptc_buf_t doc;
    ptc__pybundle_buf_init(&doc);
    ptc_buf_str(&doc, "Tools of the MCP server ");
    ptc_buf_str(&doc, server);
    ptc_buf_str(&doc, ".");
    py_str(&mod, doc.p ? doc.p : "", doc.len);
    rc = ptc_buf_error(&doc);
    ptc_buf_free(&doc);
    ptc_buf_str(&mod, "\n");
    ptc_buf_str(&mod, MODULE_HEAD);
    for (size_t i = 0; i < ntools && !rc; i++) {
        const reg_tool_t *t = reg_catalog_at(g->cat, i);
        if (strcmp(t->server, server) != 0) continue;
        /* One function is far below the soft cap, so the hard cap is never reached. */
        if (mod.len > PTC_PYBUNDLE_MODULE_SOFT) {
            g->skipped++;
            continue;
        }
        rc = gen_function(&mod, fns, &fnames, t);
        if (!rc) g->functions++;
    }
    if (!rc) rc = ptc_buf_error(&mod);
    if (!rc) {
        char file[PTC_PYBUNDLE_IDENT_MAX + 8];
        snprintf(file, sizeof file, "%s.py", mname);
        rc = write_file(g->tools_dir, file, mod.p, mod.len);
    }
    if (!rc) {
        if (g->modules) ptc_buf_str(&g->init, ", ");
        py_str(&g->init, mname, strlen(mname));
        g->modules++;
    }
    names_free(&fnames);
    ptc_buf_free(&mod);
    return rc;
}

static int generate(gen_t *g, const char *key)
{
    g->catalog = cJSON_CreateObject();
    if (!g->catalog || !cJSON_AddStringToObject(g->catalog, "generator", PTC_PYBUNDLE_VERSION) ||
        !cJSON_AddStringToObject(g->catalog, "key", key) ||
        !cJSON_AddObjectToObject(g->catalog, "modules"))
        return PTC_PYBUNDLE_ENOMEM;
    ptc_buf_str(&g->init, INIT_PY_HEAD);

    names_t mnames = {0}, servers = {0};
    /* Only the first TOOLS_MAX tools become functions: this also bounds the quadratic name
     * checks below. The others stay reachable through tools.call(). */
    size_t n = reg_catalog_count(g->cat);
    if (n > PTC_PYBUNDLE_TOOLS_MAX) {
        g->skipped = n - PTC_PYBUNDLE_TOOLS_MAX;
        n = PTC_PYBUNDLE_TOOLS_MAX;
    }
    int rc = 0;
    /* Servers in order of first appearance, so module names (and suffixes) are stable. */
    for (size_t i = 0; i < n && !rc; i++) {
        const reg_tool_t *t = reg_catalog_at(g->cat, i);
        if (names_has(&servers, t->server)) continue;
        rc = names_add(&servers, t->server);
        if (!rc) rc = gen_module(g, &mnames, t->server, n);
    }
    names_free(&mnames);
    names_free(&servers);
    if (rc) return rc;

    ptc_buf_str(&g->init, INIT_PY_TAIL);
    if (ptc_buf_error(&g->init)) return ptc_buf_error(&g->init);
    rc = write_file(g->tools_dir, "__init__.py", g->init.p, g->init.len);
    if (!rc)
        rc = write_file(g->tools_dir, "_runtime.py", (const char *)ptc_pybundle_runtime_py,
                        sizeof ptc_pybundle_runtime_py);
    if (rc) return rc;
    char *json = cJSON_Print(g->catalog);
    if (!json) return PTC_PYBUNDLE_ENOMEM;
    rc = write_file(g->tools_dir, "_catalog.json", json, strlen(json));
    free(json);
    return rc;
}

int ptc_pybundle_build(const reg_catalog_t *cat, const char *cache_dir, ptc_pybundle_info_t *info,
                       char *msg, size_t msg_size)
{
    if (!info) return PTC_PYBUNDLE_EINVAL;
    memset(info, 0, sizeof *info);
    if (!cat || !cache_dir || !cache_dir[0] || strlen(cache_dir) > PTC_PYBUNDLE_PATH_MAX - 128) {
        if (msg && msg_size)
            snprintf(msg, msg_size, "no catalog or an empty or too long cache path");
        return PTC_PYBUNDLE_EINVAL;
    }
    int rc = ptc_pybundle_key(cat, info->key);
    if (rc) return rc;
    char probe[PTC_PYBUNDLE_PATH_MAX], tmp[PTC_PYBUNDLE_PATH_MAX], tools[PTC_PYBUNDLE_PATH_MAX];
    /* The cache path was bounded above, so these cannot be cut; checked all the same. */
    if ((size_t)snprintf(info->root, sizeof info->root, "%s/pybundle-%s", cache_dir, info->key) >=
            sizeof info->root ||
        (size_t)snprintf(probe, sizeof probe, "%s/tools/_catalog.json", info->root) >=
            sizeof probe ||
        (size_t)snprintf(tmp, sizeof tmp, "%s/.pybundle-%.16s-XXXXXX", cache_dir, info->key) >=
            sizeof tmp ||
        (size_t)snprintf(tools, sizeof tools, "%s/tools", tmp) >= sizeof tools)
        return PTC_PYBUNDLE_EINVAL;
    size_t tmp_len = strlen(tmp);
    struct stat st;
    /* rename() publishes whole folders only, so a present folder is a complete bundle. Its
     * mtime records the use, so that pruning (ptc_pybundle_prune) leaves it alone. */
    if (stat(probe, &st) == 0) {
        (void)utimensat(AT_FDCWD, info->root, NULL, 0);
        return PTC_PYBUNDLE_OK;
    }

    if (mkdir(cache_dir, 0700) != 0 && errno != EEXIST) {
        set_msg(msg, msg_size, "cannot create the cache folder", cache_dir, errno);
        return PTC_PYBUNDLE_EIO;
    }
    if (!mkdtemp(tmp)) {
        set_msg(msg, msg_size, "cannot create a temporary folder in", cache_dir, errno);
        return PTC_PYBUNDLE_EIO;
    }
    memcpy(tools, tmp, tmp_len); /* mkdtemp filled in the X's */
    if (chmod(tmp, 0755) != 0 || mkdir(tools, 0755) != 0 || chmod(tools, 0755) != 0) {
        set_msg(msg, msg_size, "cannot prepare", tmp, errno);
        remove_tmp(tmp);
        return PTC_PYBUNDLE_EIO;
    }
    gen_t g = {.cat = cat, .tools_dir = tools};
    ptc__pybundle_buf_init(&g.init);
    rc = generate(&g, info->key);
    cJSON_Delete(g.catalog);
    ptc_buf_free(&g.init);
    if (rc) {
        if (msg && msg_size)
            snprintf(msg, msg_size, "generating the tools package in %s failed: %s", tmp,
                     ptc_pybundle_strerror(rc));
        remove_tmp(tmp);
        return rc;
    }
    if (rename(tmp, info->root) != 0) {
        int e = errno;
        remove_tmp(tmp);
        /* Another process published the same key first: its folder is just as good. */
        if ((e == EEXIST || e == ENOTEMPTY) && stat(probe, &st) == 0) {
            (void)utimensat(AT_FDCWD, info->root, NULL, 0);
            return PTC_PYBUNDLE_OK;
        }
        set_msg(msg, msg_size, "cannot publish the tools package as", info->root, e);
        return PTC_PYBUNDLE_EIO;
    }
    info->generated = true;
    info->modules = g.modules;
    info->functions = g.functions;
    info->skipped = g.skipped;
    return PTC_PYBUNDLE_OK;
}

static bool ident_char(char c)
{
    return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool ptc_pybundle_code_uses(const char *code)
{
    static const char word[] = "tools";
    bool uses = false;
    for (const char *p = strstr(code, word); !uses && p != NULL; p = strstr(p + 1, word))
        uses = (p == code || !ident_char(p[-1])) && !ident_char(p[sizeof word - 1]);
    return uses;
}
