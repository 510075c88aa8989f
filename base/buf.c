/* buf.c - the capped growable buffer (base.h). */
#include "base.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_FIRST_CAP 256 /* the first allocation; doubled after */

const char *ptc_strerror(int err)
{
    switch (err) {
        PTC_ERRORS(PTC_ERR_CASE)
    }
    return err < 0 && err >= PTC_ERR_ERRNO_MIN ? "system error" : "unknown error";
}

void ptc_buf_init(ptc_buf_t *b, size_t max)
{
    b->p = NULL;
    b->len = b->cap = 0;
    b->max = max < SIZE_MAX ? max : SIZE_MAX - 1; /* room for the NUL */
    b->err = 0;
}

void ptc_buf_free(ptc_buf_t *b)
{
    free(b->p);
    ptc_buf_init(b, b->max);
}

/* Room for need more bytes and the NUL: 0, or the failure (which sticks). */
static int reserve(ptc_buf_t *b, size_t need)
{
    if (b->err != 0) return b->err;
    if (need > b->max - b->len) return b->err = PTC_ETOOBIG;
    if (b->p != NULL && b->len + need + 1 <= b->cap) return 0; /* no buffer: cap is 0 */
    size_t cap = b->cap ? b->cap : BUF_FIRST_CAP;
    while (cap < b->len + need + 1)
        cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
    if (cap > b->max + 1) cap = b->max + 1;
    char *p = realloc(b->p, cap);
    if (p == NULL) return b->err = PTC_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int ptc_buf_append(ptc_buf_t *b, const void *data, size_t n)
{
    int rc = reserve(b, n);
    if (rc < 0) return rc;
    if (n > 0) memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int ptc_buf_str(ptc_buf_t *b, const char *s)
{
    return ptc_buf_append(b, s, strlen(s));
}

int ptc_buf_printf(ptc_buf_t *b, const char *fmt, ...)
{
    if (b->err != 0) return b->err;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return b->err = PTC_EINVAL;
    int rc = reserve(b, (size_t)n);
    if (rc < 0) return rc;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int ptc_buf_error(const ptc_buf_t *b)
{
    return b->err;
}

size_t ptc_buf_len(const ptc_buf_t *b)
{
    return b->len;
}

void ptc_buf_truncate(ptc_buf_t *b, size_t len)
{
    if (len < b->len) b->len = len;
    if (b->p != NULL) b->p[b->len] = '\0';
    b->err = 0;
}

void ptc_buf_consume(ptc_buf_t *b, size_t n)
{
    if (n >= b->len) n = b->len;
    if (n == 0) return;
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = '\0';
}

const char *ptc_buf_cstr(const ptc_buf_t *b)
{
    return b->p != NULL ? b->p : "";
}

char *ptc_buf_take(ptc_buf_t *b, size_t *len)
{
    if (len != NULL) *len = 0;
    if (b->err == 0 && b->p == NULL && reserve(b, 0) == 0) b->p[0] = '\0';
    if (b->err != 0) {
        ptc_buf_free(b);
        return NULL;
    }
    char *p = b->p;
    if (len != NULL) *len = b->len;
    ptc_buf_init(b, b->max);
    return p;
}
