/* `--check`'s report of the declared packages: what a start would find, without building. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void print_not_built(FILE *out, const env_options_t *o, const char *hex)
{
    char line[ENV_MESSAGE_MAX + 128];
    if (env_last_failure(o->cache_dir, hex, line, sizeof line) == 1)
        fprintf(out,
                "  state: not built yet; the last start failed %s (the next start tries again)\n",
                line);
    else
        fprintf(out, "  state: not built yet (the server installs them at start%s)\n",
                o->pip_find_links && !o->pip_index_url ? ", offline from --pip-find-links" : "");
}

int env_report(FILE *out, const env_options_t *o)
{
    if (out == NULL || o == NULL) return 1;
    if (o->n_specs == 0 && o->requirements_file == NULL) {
        fprintf(out, "packages: none declared (the standard library only)\n");
        return 0;
    }
    if (o->python == NULL || o->cache_dir == NULL) {
        fprintf(out, "packages: ERROR: no interpreter or cache folder\n");
        return 1;
    }
    env_key_t key;
    char msg[ENV_MESSAGE_MAX];
    if (env_key_compute(o->python, o->specs, o->n_specs, o->requirements_file, &key, msg,
                        sizeof msg) < 0) {
        fprintf(out, "packages: ERROR: %s\n", msg);
        return 1;
    }
    fprintf(out, "packages: ");
    for (size_t i = 0; i < key.n_specs; i++)
        fprintf(out, "%s%s", i ? ", " : "", key.specs[i]);
    if (o->requirements_file)
        fprintf(out, "%s-r %s", key.n_specs ? ", " : "", o->requirements_file);
    char first_line[256];
    snprintf(first_line, sizeof first_line, "%.*s", (int)strcspn(key.python_version, "\n"),
             key.python_version);
    fprintf(out, "\n  interpreter: %s (%s)\n", o->python, first_line);
    fprintf(out, "  key: %.12s\n  folder: %s/env-%s\n", key.hex, o->cache_dir, key.hex);
    char site[4096];
    char *installed = NULL;
    if (env_lookup(o->cache_dir, &key, site, sizeof site, &installed) == 1)
        fprintf(out, "  state: ready (%s)\n  installed: %s\n", site, installed ? installed : "");
    else
        print_not_built(out, o, key.hex);
    free(installed);
    env_key_free(&key);
    return 0;
}

void env_custom_report(FILE *out, const env_custom_t *c)
{
    fprintf(out, "custom helpers: %s\n", c->dir);
    for (size_t i = 0; i < c->n_modules; i++)
        fprintf(out, "  import %s  (from %s)\n", c->modules[i], c->sources[i]);
}

void env_scan_report(FILE *out, const env_scan_t *scan, const char *id_prefix)
{
    for (size_t i = 0; i < scan->n_errors; i++)
        fprintf(out, "  ERROR %s:%d: %s (its functions are not listed)\n", scan->errors[i].file,
                scan->errors[i].line, scan->errors[i].error);
    for (size_t i = 0; i < scan->n_fns; i++) {
        const char *sig = scan->fns[i].signature;
        fprintf(out, "  %s%s%s%s\n", id_prefix ? id_prefix : "", scan->fns[i].name, sig ? ": " : "",
                sig ? sig : "");
    }
}
