/* config_check.c - the --config part of --check: the problems of every entry, printed where
 * --check's reader looks (stdout), since --check logs only at CRITICAL. */
#include "tools.h"

#include <stdio.h>

int ptc_config_check(const ptc_options_t *o, FILE *out)
{
    if (o->config_json == NULL) return 0;
    mcp_downstream_config_t cfg;
    char msg[512];
    if (mcp_downstream_config_from_json(o->config_json, &cfg, msg, sizeof msg) < 0) {
        fprintf(out, "downstream servers: --config %s: %s\n", o->config_file, msg);
        return -1;
    }
    int dropped = 0;
    if (cfg.n_problems > 0) fprintf(out, "config problems (--config %s):\n", o->config_file);
    for (size_t i = 0; i < cfg.n_problems; i++) {
        const mcp_downstream_problem_t *pr = &cfg.problems[i];
        fprintf(out, "%s: %s: %s\n", pr->server ? pr->server : "(file)",
                pr->dropped ? "left out" : "warning", pr->message);
        if (pr->dropped) dropped++;
    }
    mcp_downstream_config_close(&cfg);
    return dropped;
}
