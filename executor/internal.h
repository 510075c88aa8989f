/* Internal to the executor library: the launcher command line shared by the pool and the probe. */
#ifndef PTC_EXECUTOR_INTERNAL_H
#define PTC_EXECUTOR_INTERNAL_H

#include "executor.h"

#define EXEC_MAX_ARGS      (24 + 2 * EXEC_MAX_MOUNTS)
#define EXEC_MAX_ENV       (16 + EXEC_MAX_PASS_ENV)
#define EXEC_REPORT_LINE   1024 /* longest status line read from the launcher */
#define EXEC_PROBE_WAIT_MS 10000

/* What every run hands to the launcher; built once from the options. All strings owned. */
struct exec__cmd {
    char *launcher;            /* NULL when not found */
    char *python;              /* the path run inside the sandbox */
    char *args[EXEC_MAX_ARGS]; /* launcher options up to, not including, "--" (NULL-ended) */
    size_t n_args;
    char *env[EXEC_MAX_ENV]; /* NAME=VALUE, NULL-ended */
    size_t n_env;
    char error[512]; /* why building failed, for the user */
};

/* Returns 0 or an EXEC_E* code with cmd->error filled. cmd must be zeroed; free with _free. */
int exec__cmd_build(const exec_options_t *opts, struct exec__cmd *cmd);
void exec__cmd_free(struct exec__cmd *cmd);

/* strlcpy: copies what fits, always terminates (len > 0) */
static inline void exec__copy(char *dst, size_t len, const char *src)
{
    size_t n = 0;
    while (src[n] && n + 1 < len)
        n++;
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
    dst[n] = '\0';
}

/* Status line parsing shared with the pool: updates the probe-like layer table. */
void exec__parse_layer(const char *rest, exec_layer_state_t *state,
                       char (*reason)[EXEC_REASON_MAX]);
exec_sandbox_level_t exec__level(const exec_layer_state_t *state);

#endif
