/* environment.c - the sandbox's environment (environment/'s env_host_t) wired into the server:
 * the flags made its options with the program's cache folder, its lines in the server log, the
 * helpers' tool entries put into the registry as server "custom", and --check's report. What the
 * build, the scan and the texts do is environment/'s (docs/environment.md). */
#include "tools.h"

#include <stdlib.h>
#include <string.h>

static void host_log(env_log_level_t level, const char *line, void *user)
{
    mcp_log(user, level == ENV_LOG_ERROR ? MCP_LOG_ERROR : MCP_LOG_INFO, "%s", line);
}

/* The host's options of the flags: specs and cache are the caller's. */
static void host_options(const ptc_options_t *o, char **specs, size_t n, const char *cache,
                         env_host_options_t *ho)
{
    memset(ho, 0, sizeof *ho);
    env_options_init(&ho->build);
    if (o->python) ho->build.python = o->python;
    ho->build.cache_dir = cache;
    ho->build.specs = (const char *const *)specs;
    ho->build.n_specs = n;
    ho->build.requirements_file = o->requirements;
    /* past the bound the host refuses it (saying so): no conversion out of range */
    ho->build.install_timeout_s = o->package_install_timeout > ENV_MAX_INSTALL_TIMEOUT_S
                                      ? ENV_MAX_INSTALL_TIMEOUT_S + 1u
                                      : (unsigned)(o->package_install_timeout + 0.5);
    ho->build.pip_index_url = o->pip_index_url;
    ho->build.pip_find_links = o->pip_find_links;
    /* A wheelhouse without an index is an offline install: pip must not reach for its own
       default index when a wheel is missing there. */
    ho->build.pip_no_index = o->pip_find_links != NULL && o->pip_index_url == NULL;
    ho->optional = o->packages_optional;
    ho->custom_paths = o->custom_tools;
    ho->n_custom = o->n_custom_tools;
}

/* The program's cache base (reg_cache_base: env-*, custom-* sit beside pybundle-*) into cache
 * when anything is declared; false when there is none. */
static bool cache_for(const ptc_options_t *o, int n_specs, char *cache, size_t size)
{
    bool declared = n_specs > 0 || o->requirements != NULL || o->n_custom_tools > 0;
    cache[0] = '\0';
    return !declared || reg_cache_base(cache, size) >= 0;
}

int ptc_env_new(uv_loop_t *loop, const ptc_options_t *o, mcp_logger_t *lg, env_host_t **out)
{
    *out = NULL;
    char *specs[ENV_MAX_SPECS];
    char cache[4096];
    int n = ptc_options_packages(o, specs, ENV_MAX_SPECS, stderr);
    int rc = n < 0 ? MCP_EINVAL : MCP_OK;
    if (rc == MCP_OK && !cache_for(o, n, cache, sizeof cache)) {
        mcp_log(lg, MCP_LOG_ERROR,
                "no cache folder ($XDG_CACHE_HOME or $HOME) for --packages and --custom-tools");
        rc = MCP_EINVAL;
    }
    if (rc == MCP_OK) {
        env_host_options_t ho;
        host_options(o, specs, (size_t)n, cache, &ho);
        ho.log = host_log;
        ho.log_user = lg;
        if (env_host_new(loop, &ho, out) < 0) rc = MCP_EINVAL;
    }
    if (n > 0) ptc_options_packages_free(specs, (size_t)n);
    return rc;
}

/* The helpers' entries into search's registry, as server "custom". */
static int publish_custom(const cJSON *tools, char *msg, size_t len, void *user)
{
    ptc_search_t *search = user;
    reg_registry_t *reg = ptc_search_registry(search);
    int rc =
        reg == NULL ? 0 : reg_registry_set_server_tools(reg, ENV_CUSTOM_SERVER, tools, msg, len);
    if (rc == 0) ptc_search_changed(search);
    return rc;
}

void ptc_env_scan_custom(env_host_t *e, ptc_execute_t *ex, ptc_search_t *search)
{
    if (e != NULL) (void)env_host_scan_start(e, ptc_execute_pool(ex), publish_custom, search);
}

int ptc_env_check(const ptc_options_t *o)
{
    char *specs[ENV_MAX_SPECS];
    char cache[4096];
    int n = ptc_options_packages(o, specs, ENV_MAX_SPECS, stdout);
    int status = n < 0 ? 1 : 0;
    if (status == 0 && !cache_for(o, n, cache, sizeof cache)) {
        printf("packages: ERROR: no cache folder ($XDG_CACHE_HOME or $HOME)\n");
        status = 1;
    } else if (status == 0) {
        env_host_options_t ho;
        host_options(o, specs, (size_t)n, cache, &ho);
        exec_options_t eo; /* the scan's sandbox */
        exec_options_init(&eo);
        if (o->python) eo.python = o->python;
        eo.unsafe_no_sandbox = o->unsafe_no_sandbox;
        status = env_host_check(stdout, &ho, &eo);
    }
    if (n > 0) ptc_options_packages_free(specs, (size_t)n);
    return status;
}
