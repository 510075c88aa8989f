/* The helpers' scan output (custom_tools_scan.py's JSON) turned into tool entries and errors,
 * with the file paths the sandboxed scan saw mapped back to the helpers' own paths. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base.h"
#include "internal.h"

/* The host path of a file the scan names (a path under the run's folder sandbox_dir). */
static void host_file(const env_custom_t *c, const char *sandbox_dir, const char *file,
                      ptc_buf_t *out)
{
    size_t root = strlen(sandbox_dir);
    const char *rel = file;
    if (root > 0 && strncmp(file, sandbox_dir, root) == 0 && file[root] == '/')
        rel = file + root + 1;
    size_t top = strcspn(rel, "/");
    for (size_t i = 0; i < c->n_modules; i++) {
        const char *m = c->modules[i];
        bool is_file = rel[top] == '\0';
        if (is_file && strlen(m) + 3 == top && strncmp(rel, m, strlen(m)) == 0) {
            ptc_buf_str(out, c->sources[i]);
            return;
        }
        if (!is_file && strlen(m) == top && strncmp(rel, m, top) == 0) {
            ptc_buf_printf(out, "%s%s", c->sources[i], rel + top);
            return;
        }
    }
    ptc_buf_str(out, file);
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* One entry of "tools": 1 when filled, 0 when it lacks what a tool needs, ENV_E* else. */
static int fn_of(const cJSON *t, env_helper_fn_t *fn)
{
    const char *mod = str_of(t, "module"), *name = str_of(t, "function");
    const char *sig = str_of(t, "signature"), *doc = str_of(t, "docstring");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "inputSchema");
    if (mod == NULL || name == NULL || !cJSON_IsObject(schema)) return 0;
    ptc_buf_t n, d;
    ptc_buf_init(&n, ENV_TEXT_MAX);
    ptc_buf_init(&d, ENV_TEXT_MAX);
    ptc_buf_printf(&n, "%s.%s", mod, name);
    ptc_buf_str(&d, sig ? sig : name);
    if (doc != NULL) {
        ptc_buf_str(&d, "\n");
        ptc_buf_str(&d, doc);
    }
    /* the module part can be dotted (a package's submodule): import the top one's path */
    ptc_buf_printf(&d, "\nRuns inside the sandbox: import %s; a plain Python call, no bridge.",
                   mod);
    int rc = ptc_buf_error(&n) ? ptc_buf_error(&n) : ptc_buf_error(&d);
    fn->name = ptc_buf_take(&n, NULL);
    fn->description = ptc_buf_take(&d, NULL);
    fn->signature = sig ? strdup(sig) : NULL;
    fn->input_schema = cJSON_PrintUnformatted(schema);
    if (rc == 0 && (fn->name == NULL || fn->description == NULL || (sig && !fn->signature) ||
                    fn->input_schema == NULL))
        rc = ENV_ENOMEM;
    if (rc != 0) return rc == PTC_ETOOBIG ? ENV_ETOOBIG : ENV_ENOMEM;
    return 1;
}

static int error_of(const env_custom_t *c, const char *sandbox_dir, const cJSON *x,
                    env_helper_error_t *e)
{
    const char *file = str_of(x, "file"), *why = str_of(x, "error");
    const cJSON *line = cJSON_GetObjectItemCaseSensitive(x, "line");
    ptc_buf_t h;
    ptc_buf_init(&h, ENV_TEXT_MAX);
    host_file(c, sandbox_dir, file ? file : "?", &h);
    e->file = ptc_buf_take(&h, NULL);
    e->line = cJSON_IsNumber(line) ? (int)line->valuedouble : 0;
    e->error = strdup(why ? why : "not readable");
    return e->file == NULL || e->error == NULL ? ENV_ENOMEM : 0;
}

int env_scan_parse(const env_custom_t *c, const char *sandbox_dir, const char *out, size_t len,
                   env_scan_t *scan)
{
    if (scan == NULL) return ENV_EINVAL;
    memset(scan, 0, sizeof *scan);
    if (c == NULL || sandbox_dir == NULL || (out == NULL && len > 0)) return ENV_EINVAL;
    if (len > ENV_SCAN_OUTPUT_MAX) return ENV_ETOOBIG;
    cJSON *doc = cJSON_ParseWithLength(out, len);
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(doc, "tools");
    const cJSON *errors = cJSON_GetObjectItemCaseSensitive(doc, "errors");
    int rc = 0;
    if (!cJSON_IsArray(tools) || !cJSON_IsArray(errors)) rc = ENV_EINVAL;
    size_t nt = rc ? 0 : (size_t)cJSON_GetArraySize(tools);
    size_t ne = rc ? 0 : (size_t)cJSON_GetArraySize(errors);
    if (rc == 0) {
        scan->fns = calloc(nt ? nt : 1, sizeof *scan->fns);
        scan->errors = calloc(ne ? ne : 1, sizeof *scan->errors);
        if (scan->fns == NULL || scan->errors == NULL) rc = ENV_ENOMEM;
    }
    const cJSON *x;
    if (rc == 0) {
        cJSON_ArrayForEach(x, errors)
        {
            if (scan->n_errors == ne) break;
            rc = error_of(c, sandbox_dir, x, &scan->errors[scan->n_errors++]);
            if (rc < 0) break;
        }
    }
    if (rc == 0) {
        cJSON_ArrayForEach(x, tools)
        {
            if (scan->n_fns == nt) break;
            int got = fn_of(x, &scan->fns[scan->n_fns]);
            if (got != 0) scan->n_fns++; /* a failed entry's parts are freed with the list */
            if (got < 0) rc = got;
            if (rc < 0) break;
        }
    }
    cJSON_Delete(doc);
    if (rc < 0) env_scan_free(scan);
    return rc;
}

void env_scan_free(env_scan_t *scan)
{
    if (scan == NULL) return;
    for (size_t i = 0; scan->fns != NULL && i < scan->n_fns; i++) {
        free(scan->fns[i].name);
        free(scan->fns[i].signature);
        free(scan->fns[i].description);
        free(scan->fns[i].input_schema);
    }
    for (size_t i = 0; scan->errors != NULL && i < scan->n_errors; i++) {
        free(scan->errors[i].file);
        free(scan->errors[i].error);
    }
    free(scan->fns);
    free(scan->errors);
    memset(scan, 0, sizeof *scan);
}
