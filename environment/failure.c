/* The record of a set's last failed build, <cache>/env-<hex>.failed: written when a start's
 * build fails, removed when one succeeds, read by `--check` to say why the last start failed. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "build_internal.h"

static int record_path(const char *cache_dir, const char *hex, char *out, size_t size)
{
    int n = snprintf(out, size, "%s/env-%s%s", cache_dir, hex, ENV__FAILED_SUFFIX);
    return n < 0 || (size_t)n >= size ? ENV_EINVAL : 0;
}

int env_record_outcome(const env_t *env)
{
    if (env == NULL) return ENV_EINVAL;
    env_status_t st;
    env_status(env, &st);
    if (!st.key_hex[0]) return 0; /* no key: nothing could be recorded under it */
    char path[PATH_LEN + 128];
    if (record_path(env->cache_dir, st.key_hex, path, sizeof path) < 0) return ENV_EINVAL;
    if (st.state != ENV_STATE_FAILED) {
        (void)unlink(path);
        return 0;
    }
    FILE *f = fopen(path, "we");
    if (f == NULL) return ENV_EIO;
    int w = fprintf(f, "installing %s failed: %s\n",
                    st.failed_package ? st.failed_package : "the packages", st.message);
    return fclose(f) != 0 || w < 0 ? ENV_EIO : 0;
}

int env_last_failure(const char *cache_dir, const char *key_hex, char *line, size_t len)
{
    if (cache_dir == NULL || key_hex == NULL || line == NULL || len == 0) return ENV_EINVAL;
    line[0] = '\0';
    char path[PATH_LEN + 128];
    if (record_path(cache_dir, key_hex, path, sizeof path) < 0) return ENV_EINVAL;
    FILE *f = fopen(path, "re");
    if (f == NULL) return 0;
    if (fgets(line, len > INT_MAX ? INT_MAX : (int)len, f) == NULL) line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\n")] = '\0';
    return line[0] ? 1 : 0;
}
