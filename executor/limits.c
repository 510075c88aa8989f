/* limits.c - the bounds a host's settings must keep before a pool is made: the pool's options,
 * the files out, and a host's own bound on code. One check for exec_pool_new,
 * exec_pool_set_files_limits and a host turning its flags into options, which also learns which
 * bound was passed, to name its own flag. */
#include "executor.h"

int exec_options_check(const exec_options_t *opts, const exec_files_limits_t *files,
                       size_t code_bytes, exec_bound_t *bad)
{
    exec_bound_t b = EXEC_BOUND_NONE;
    if (opts != NULL && opts->max_concurrent > EXEC_MAX_CONCURRENT)
        b = EXEC_BOUND_CONCURRENT;
    else if (opts != NULL &&
             (opts->stdout_keep > EXEC_MAX_KEEP_BYTES || opts->stderr_keep > EXEC_MAX_KEEP_BYTES))
        b = EXEC_BOUND_KEEP_BYTES;
    else if (opts != NULL && opts->warm_sandboxes > EXEC_MAX_WARM)
        b = EXEC_BOUND_WARM;
    else if (code_bytes > EXEC_MAX_CODE_BYTES)
        b = EXEC_BOUND_CODE_BYTES;
    else if (files != NULL && (files->file_bytes > EXEC_FILES_LIMIT_BYTES ||
                               files->call_bytes > EXEC_FILES_LIMIT_BYTES))
        b = EXEC_BOUND_FILE_BYTES;
    else if (files != NULL && files->count > EXEC_FILES_LIMIT_COUNT)
        b = EXEC_BOUND_FILE_COUNT;
    if (bad != NULL) *bad = b;
    return b == EXEC_BOUND_NONE ? 0 : EXEC_EINVAL;
}
