/*
 * model_io.c - file reading and error messages shared by the sentence-embedding model files.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

int model_fail(char *errmsg, size_t size, int err, const char *fmt, ...)
{
    if (errmsg != NULL && size > 0) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(errmsg, size, fmt, ap);
        va_end(ap);
        if (n < 0) errmsg[0] = '\0';
    }
    return err;
}

int model_path(char *buf, size_t size, const char *dir, const char *name)
{
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    int n = snprintf(buf, size, "%.*s/%s", (int)dl, dir, name);
    if (n < 0 || (size_t)n >= size) return REG_MODEL_EINVAL;
    return REG_MODEL_OK;
}

int model_read_file(const char *path, size_t cap, char **data, size_t *len)
{
    /* base's reader, with its codes said the model's way: a missing file is one the folder
     * lacks, a file that cannot be read (or is not a regular file) is an I/O failure. */
    int rc = ptc_file_read(path, cap, data, len);
    if (rc == -ENOENT || rc == -ENOTDIR) return REG_MODEL_ENOENT;
    if (rc == PTC_ETOOBIG || rc == PTC_ENOMEM || rc == 0) return rc;
    return REG_MODEL_EIO;
}

int model_read_json(const char *path, cJSON **json, char *errmsg, size_t size)
{
    char *text = NULL;
    size_t len = 0;
    *json = NULL;
    int rc = model_read_file(path, REG_MODEL_MAX_JSON_BYTES, &text, &len);
    if (rc == REG_MODEL_ENOENT) return model_fail(errmsg, size, rc, "%s is missing", path);
    if (rc == REG_MODEL_ETOOBIG)
        return model_fail(errmsg, size, rc, "%s is larger than %u bytes", path,
                          REG_MODEL_MAX_JSON_BYTES);
    if (rc != REG_MODEL_OK)
        return model_fail(errmsg, size, rc, "cannot read %s: %s", path, reg_strerror(rc));
    *json = cJSON_ParseWithLength(text, len);
    free(text);
    if (*json == NULL)
        return model_fail(errmsg, size, REG_MODEL_EFORMAT, "%s is not valid JSON", path);
    return REG_MODEL_OK;
}
