/* file.c - reading a whole file with a size cap (base.h). */
#include "base.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_CHUNK 65536 /* bytes asked of each read() */

int ptc_file_read(const char *path, size_t max, char **out, size_t *len)
{
    *out = NULL;
    if (len != NULL) *len = 0;
    if (path == NULL) return PTC_EINVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode))
        rc = S_ISDIR(st.st_mode) ? -EISDIR : PTC_EINVAL;
    else if ((unsigned long long)st.st_size > max)
        rc = PTC_ETOOBIG;
    /* The size from fstat is a hint only: a file that grows while read still stops at max. */
    ptc_buf_t b;
    ptc_buf_init(&b, max);
    char chunk[FILE_CHUNK];
    while (rc == 0) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            rc = -errno;
        else if (n == 0)
            break;
        else
            rc = ptc_buf_append(&b, chunk, (size_t)n);
    }
    close(fd);
    if (rc == 0) {
        *out = ptc_buf_take(&b, len);
        if (*out == NULL) rc = PTC_ENOMEM;
    }
    ptc_buf_free(&b);
    return rc;
}
