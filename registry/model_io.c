/*
 * model_io.c - file reading and error messages shared by the sentence-embedding model files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? REG_MODEL_ENOENT : REG_MODEL_EIO;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return REG_MODEL_EIO;
    }
    if ((uint64_t)sb.st_size > cap) {
        close(fd);
        return REG_MODEL_ETOOBIG;
    }
    size_t want = (size_t)sb.st_size;
    char *buf = malloc(want + 1);
    if (buf == NULL) {
        close(fd);
        return REG_MODEL_ENOMEM;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != want) {
        free(buf);
        return REG_MODEL_EIO;
    }
    buf[got] = '\0';
    *data = buf;
    *len = got;
    return REG_MODEL_OK;
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
