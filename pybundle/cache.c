/* cache.c - keeps the sandbox's `tools` Python package in step with the registry: after every
 * change, a snapshot of the catalog is turned into a package (pybundle.c) on the thread pool,
 * since generating writes files. Runs use the newest finished package. */
#include "pybundle.h"

#include "base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct ptc_pybundle_cache {
    uv_loop_t *loop;
    ptc_pybundle_log_fn log;
    void *log_data;
    reg_registry_t *reg;
    char cache_dir[PTC_PYBUNDLE_PATH_MAX];
    /* The build on the thread pool and its inputs/outputs. */
    uv_work_t work;
    bool building, dirty, stopping;
    cJSON *snapshot;
    int rc;
    char msg[256];
    ptc_pybundle_info_t info;
    bool prune_done;    /* old packages are pruned after the first build only */
    long pruned;        /* folders the worker removed, -1 when it did not prune */
    cJSON *new_modules; /* read by the worker from the new package's _catalog.json */
    /* The newest finished package. */
    char *root;
    cJSON *modules; /* [{"module", "server"}] for execute_code's description */
    unsigned long generated;
    void (*on_built)(void *data);
    void *on_built_data;
    /* The package in use is touched daily, so that another server's pruning (of packages unused
     * for REG_CACHE_PRUNE_AGE_S) never takes it from a server that runs for months. */
    uv_timer_t touch;
    bool touch_on, touching;
    uv_fs_t touch_req;
};

#define BUNDLE_TOUCH_MS (24u * 60 * 60 * 1000)

static void say(const ptc_pybundle_cache_t *b, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One line for the owner's log (room for a full path and its sentence). */
static void say(const ptc_pybundle_cache_t *b, int level, const char *fmt, ...)
{
    if (b->log == NULL) return;
    char line[PTC_PYBUNDLE_PATH_MAX + 512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    b->log(b->log_data, level, line);
}

/* The program's cache base (reg_cache_base), created 0700 as needed with its parent. */
static int cache_dir(char *out, size_t size)
{
    if (reg_cache_base(out, size) < 0) return -1;
    char *slash = strrchr(out, '/');
    if (slash == NULL || slash == out) return -1;
    *slash = '\0';
    int rc = mkdir(out, 0700) < 0 && errno != EEXIST ? -1 : 0;
    *slash = '/';
    if (rc < 0 || (mkdir(out, 0700) < 0 && errno != EEXIST)) return -1;
    return 0;
}

static int by_server_and_name(const void *a, const void *b)
{
    const reg_tool_t *x = *(const reg_tool_t *const *)a, *y = *(const reg_tool_t *const *)b;
    int c = strcmp(x->server, y->server);
    return c != 0 ? c : strcmp(x->name, y->name);
}

/* The registry's tools as Tool objects with their server, sorted by server and name: the
 * registry's own order depends on which server came up first, and the package (and its cache
 * key) must not. */
static cJSON *snapshot(const reg_catalog_t *cat)
{
    size_t n = reg_catalog_count(cat);
    const reg_tool_t **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (sorted == NULL) return NULL;
    for (size_t i = 0; i < n; i++)
        sorted[i] = reg_catalog_at(cat, i);
    qsort(sorted, n, sizeof *sorted, by_server_and_name);
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        const reg_tool_t *t = sorted[i];
        cJSON *o = cJSON_CreateObject();
        cJSON *schema = cJSON_Duplicate(t->input_schema, true);
        cJSON *ann = t->annotations ? cJSON_Duplicate(t->annotations, true) : NULL;
        bool ok = o != NULL && schema != NULL && cJSON_AddItemToArray(arr, o) &&
                  cJSON_AddStringToObject(o, "server", t->server) &&
                  cJSON_AddStringToObject(o, "name", t->name) &&
                  cJSON_AddStringToObject(o, "description", t->description) &&
                  (!t->title[0] || cJSON_AddStringToObject(o, "title", t->title)) &&
                  cJSON_AddItemToObject(o, "inputSchema", schema);
        if (ok) schema = NULL;
        if (ok && ann) {
            ok = cJSON_AddItemToObject(o, "annotations", ann);
            if (ok) ann = NULL;
        }
        /* The return type and docstring of the generated function come from it. */
        if (ok && t->output_schema) {
            cJSON *out = cJSON_Duplicate(t->output_schema, true);
            ok = out != NULL && cJSON_AddItemToObject(o, "outputSchema", out);
            if (!ok) cJSON_Delete(out);
        }
        cJSON_Delete(schema);
        cJSON_Delete(ann);
        if (!ok) {
            if (o != NULL && cJSON_GetArraySize(arr) == 0) cJSON_Delete(o);
            cJSON_Delete(arr);
            arr = NULL;
        }
    }
    free(sorted);
    return arr;
}

/* The modules the package has, read back from its _catalog.json (small; once per build). */
static cJSON *read_modules(const char *root)
{
    char path[PTC_PYBUNDLE_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/tools/_catalog.json", root);
    char *buf = NULL;
    /* Written by the generator, so within its cap for one file. */
    if (ptc_file_read(path, PTC_PYBUNDLE_FILE_MAX, &buf, NULL) < 0) return NULL;
    cJSON *doc = cJSON_Parse(buf);
    free(buf);
    cJSON *out = cJSON_CreateArray();
    const cJSON *mods = cJSON_GetObjectItemCaseSensitive(doc, "modules");
    const cJSON *m;
    cJSON_ArrayForEach(m, mods)
    {
        const char *name = m->string;
        const cJSON *server = cJSON_GetObjectItemCaseSensitive(m, "server");
        if (name == NULL || !cJSON_IsString(server) || out == NULL) continue;
        cJSON *o = cJSON_CreateObject();
        if (o == NULL || !cJSON_AddItemToArray(out, o)) {
            cJSON_Delete(o);
            continue;
        }
        cJSON_AddStringToObject(o, "module", name);
        cJSON_AddStringToObject(o, "server", server->valuestring);
    }
    cJSON_Delete(doc);
    return out;
}

static void build_work(uv_work_t *w)
{
    ptc_pybundle_cache_t *b = w->data;
    reg_catalog_t *cat = NULL;
    b->rc = reg_catalog_new(&cat);
    if (b->rc == 0)
        b->rc = reg_catalog_load_json(cat, b->snapshot, NULL, NULL, b->msg, sizeof b->msg);
    if (b->rc == 0) b->rc = ptc_pybundle_build(cat, b->cache_dir, &b->info, b->msg, sizeof b->msg);
    reg_catalog_free(cat);
    /* Once per process, here on the thread pool: packages of catalogs gone for a month. The
     * one just built is in use; the folder of any other running server was touched when
     * that server last built it. */
    b->pruned = -1;
    if (b->rc == 0 && !b->prune_done) {
        b->prune_done = true;
        b->pruned = ptc_pybundle_prune(b->cache_dir, b->info.root, (int64_t)time(NULL),
                                       REG_CACHE_PRUNE_AGE_S);
    }
    b->new_modules = b->rc == 0 ? read_modules(b->info.root) : NULL;
}

static void start_build(ptc_pybundle_cache_t *b);

static void build_done(uv_work_t *w, int status)
{
    ptc_pybundle_cache_t *b = w->data;
    b->building = false;
    cJSON_Delete(b->snapshot);
    b->snapshot = NULL;
    if (status != 0 || b->rc < 0) {
        say(b, PTC_PYBUNDLE_LOG_ERROR, "tools package for sandboxed code not built: %s",
            status != 0 ? uv_strerror(status) : b->msg);
    } else {
        char *root = strdup(b->info.root);
        if (root != NULL) {
            free(b->root);
            b->root = root;
            cJSON_Delete(b->modules);
            b->modules = b->new_modules;
            b->new_modules = NULL;
        }
        if (b->info.generated) {
            b->generated++;
            say(b, PTC_PYBUNDLE_LOG_INFO,
                "tools package generated: %zu modules, %zu functions (%zu without one) in %s",
                b->info.modules, b->info.functions, b->info.skipped, b->info.root);
        } else {
            say(b, PTC_PYBUNDLE_LOG_DEBUG, "tools package unchanged: %s", b->info.root);
        }
    }
    if (b->pruned > 0)
        say(b, PTC_PYBUNDLE_LOG_INFO, "removed %ld tools package(s) unused for %ld days from %s",
            b->pruned, REG_CACHE_PRUNE_AGE_S / (24 * 60 * 60), b->cache_dir);
    cJSON_Delete(b->new_modules); /* when it was not taken above */
    b->new_modules = NULL;
    if (status == 0 && b->rc == 0 && b->on_built != NULL && !b->stopping)
        b->on_built(b->on_built_data);
    if (b->dirty && !b->stopping) start_build(b);
}

static void start_build(ptc_pybundle_cache_t *b)
{
    b->dirty = false;
    b->snapshot = snapshot(reg_registry_catalog(b->reg));
    if (b->snapshot == NULL) {
        say(b, PTC_PYBUNDLE_LOG_ERROR, "tools package: out of memory");
        return;
    }
    b->work.data = b;
    int rc = uv_queue_work(b->loop, &b->work, build_work, build_done);
    if (rc < 0) {
        cJSON_Delete(b->snapshot);
        b->snapshot = NULL;
        say(b, PTC_PYBUNDLE_LOG_ERROR, "tools package: %s", uv_strerror(rc));
        return;
    }
    b->building = true;
}

static void touch_done(uv_fs_t *req)
{
    ptc_pybundle_cache_t *b = req->data;
    if (req->result < 0)
        say(b, PTC_PYBUNDLE_LOG_WARNING, "tools package %s: not marked as in use: %s", req->path,
            uv_strerror((int)req->result));
    uv_fs_req_cleanup(req);
    b->touching = false;
}

static void touch_cb(uv_timer_t *t)
{
    ptc_pybundle_cache_t *b = t->data;
    if (b->root == NULL || b->touching || b->stopping) return;
    double now = (double)time(NULL);
    b->touch_req.data = b;
    /* libuv copies the path: b->root may be replaced by a build meanwhile. */
    if (uv_fs_utime(b->loop, &b->touch_req, b->root, now, now, touch_done) == 0) b->touching = true;
}

int ptc_pybundle_cache_new(uv_loop_t *loop, reg_registry_t *reg, ptc_pybundle_log_fn log,
                           void *log_data, ptc_pybundle_cache_t **out)
{
    *out = NULL;
    ptc_pybundle_cache_t *b = calloc(1, sizeof *b);
    if (b == NULL) return PTC_PYBUNDLE_ENOMEM;
    b->loop = loop;
    b->log = log;
    b->log_data = log_data;
    b->reg = reg;
    if (cache_dir(b->cache_dir, sizeof b->cache_dir) < 0) {
        say(b, PTC_PYBUNDLE_LOG_WARNING,
            "no cache folder ($XDG_CACHE_HOME or $HOME): sandboxed code cannot import tools");
        b->cache_dir[0] = '\0';
    }
    if (uv_timer_init(loop, &b->touch) == 0) {
        b->touch.data = b;
        b->touch_on = true;
        if (uv_timer_start(&b->touch, touch_cb, BUNDLE_TOUCH_MS, BUNDLE_TOUCH_MS) == 0)
            uv_unref((uv_handle_t *)&b->touch); /* never keeps the loop alive by itself */
    }
    *out = b;
    return 0;
}

void ptc_pybundle_cache_refresh(ptc_pybundle_cache_t *b)
{
    if (b == NULL || b->stopping || b->cache_dir[0] == '\0') return;
    if (b->building) {
        b->dirty = true; /* built again with the newest catalog when this build ends */
        return;
    }
    start_build(b);
}

const char *ptc_pybundle_cache_root(const ptc_pybundle_cache_t *b)
{
    return b ? b->root : NULL;
}

const cJSON *ptc_pybundle_cache_modules(const ptc_pybundle_cache_t *b)
{
    return b ? b->modules : NULL;
}

void ptc_pybundle_cache_on_built(ptc_pybundle_cache_t *b, void (*cb)(void *data), void *data)
{
    b->on_built = cb;
    b->on_built_data = data;
}

unsigned long ptc_pybundle_cache_generated(const ptc_pybundle_cache_t *b)
{
    return b ? b->generated : 0;
}

void ptc_pybundle_cache_stop(ptc_pybundle_cache_t *b)
{
    if (b == NULL) return;
    b->stopping = true;
    if (b->touch_on) {
        b->touch_on = false;
        uv_close((uv_handle_t *)&b->touch, NULL); /* b outlives the loop run that closes it */
    }
}

void ptc_pybundle_cache_free(ptc_pybundle_cache_t *b)
{
    if (b == NULL) return;
    cJSON_Delete(b->snapshot);
    cJSON_Delete(b->modules);
    free(b->root);
    free(b);
}
