/* What a tool description and a run's result say about the environment: what the code can
 * import (the packages with their installed versions, those being installed, a failure, the
 * helpers' modules) and the note on a result while the packages are built or after they
 * failed. */
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "build_internal.h"

/* The requested specs as given, then the requirements file, comma-separated. */
static void add_specs(ptc_buf_t *b, const env_t *env)
{
    for (size_t i = 0; i < env->n_specs; i++)
        ptc_buf_printf(b, "%s%s", i ? ", " : "", env->specs[i]);
    if (env->req_file) ptc_buf_printf(b, "%sthe requirements file's", env->n_specs ? ", " : "");
}

/* The installed version of a requested spec, from "name version, name version" (names
   compared as PEP 503 does: case and runs of -_. do not matter). */
static bool find_version(const char *installed, const char *spec, char *out, size_t size)
{
    char want[ENV_MAX_SPEC_LEN];
    if (env_spec_normalise(spec, want, sizeof want) < 0) return false;
    size_t wl = strcspn(want, "[<>=!~; @");
    const char *p = installed;
    while (p != NULL && *p) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t item = strcspn(p, ",");
        size_t nl = strcspn(p, " ,");
        char name[ENV_MAX_SPEC_LEN];
        if (nl < sizeof name) {
            memcpy(name, p, nl);
            name[nl] = '\0';
            char norm[ENV_MAX_SPEC_LEN];
            if (env_spec_normalise(name, norm, sizeof norm) == 0 && strlen(norm) == wl &&
                strncmp(norm, want, wl) == 0) {
                snprintf(out, size, "%.*s", (int)item, p);
                return true;
            }
        }
        p += item;
    }
    return false;
}

char *env_describe(const env_t *env, const env_custom_t *custom)
{
    ptc_buf_t b;
    ptc_buf_init(&b, ENV_TEXT_MAX);
    env_status_t st = {.state = ENV_STATE_ABSENT};
    if (env != NULL) env_status(env, &st);
    switch (st.state) {
    case ENV_STATE_READY:
        ptc_buf_str(&b, "the standard library and these packages are installed: ");
        if (env->req_file) {
            ptc_buf_str(&b, st.installed ? st.installed : "");
        } else {
            for (size_t i = 0; i < env->n_specs; i++) {
                char v[ENV_MAX_SPEC_LEN];
                if (!find_version(st.installed ? st.installed : "", env->specs[i], v, sizeof v))
                    snprintf(v, sizeof v, "%s", env->specs[i]);
                ptc_buf_printf(&b, "%s%s", i ? ", " : "", v);
            }
        }
        break;
    case ENV_STATE_BUILDING:
        ptc_buf_str(&b, "the standard library is available, and these packages are being "
                        "installed (runs wait for them briefly): ");
        add_specs(&b, env);
        break;
    case ENV_STATE_FAILED:
        ptc_buf_printf(&b, "standard library only (installing %s failed)",
                       st.failed_package ? st.failed_package : "the declared packages");
        break;
    default:
        ptc_buf_str(&b, "the standard library is available");
    }
    if (custom != NULL && custom->n_modules > 0) {
        ptc_buf_str(&b, "; your own helper modules are importable too: ");
        for (size_t i = 0; i < custom->n_modules; i++)
            ptc_buf_printf(&b, "%s`import %s`", i ? ", " : "", custom->modules[i]);
        ptc_buf_str(&b, " (plain Python calls, no bridge; search_tools lists their functions)");
    }
    return ptc_buf_take(&b, NULL);
}

char *env_result_note(const env_t *env, bool optional)
{
    if (env == NULL) return NULL;
    env_status_t st;
    env_status(env, &st);
    ptc_buf_t b;
    ptc_buf_init(&b, ENV_TEXT_MAX);
    if (st.state == ENV_STATE_FAILED) {
        ptc_buf_printf(&b, "The declared packages are not installed: installing %s failed. %s",
                       st.failed_package ? st.failed_package : "them",
                       st.message ? st.message : "");
        ptc_buf_str(&b, optional ? " This run went without them (--packages-optional)."
                                 : " Runs are refused until they are installed "
                                   "(--packages-optional runs them without).");
        if (st.tail && st.tail[0]) {
            ptc_buf_str(&b, "\npip's last lines:\n");
            ptc_buf_str(&b, st.tail);
        }
    } else if (st.state == ENV_STATE_BUILDING) {
        ptc_buf_printf(&b,
                       "The environment is still being built (%.0f s so far): pip is installing ",
                       (double)st.elapsed_ms / 1000.0);
        add_specs(&b, env);
        ptc_buf_str(&b, ". Try again in a while.");
    } else {
        return NULL;
    }
    return ptc_buf_take(&b, NULL);
}

size_t env_path_dirs(const env_t *env, const env_custom_t *custom, const char **dirs, size_t max)
{
    size_t n = 0;
    if (env != NULL && n < max) {
        env_status_t st;
        env_status(env, &st);
        if (st.state == ENV_STATE_READY && st.site_dir != NULL) dirs[n++] = st.site_dir;
    }
    if (custom != NULL && n < max) dirs[n++] = custom->dir;
    return n;
}
