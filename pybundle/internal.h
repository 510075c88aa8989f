/* internal.h - what the files of pybundle/ share (not a public header). */
#ifndef PTC_PYBUNDLE_INTERNAL_H
#define PTC_PYBUNDLE_INTERNAL_H

#include "pybundle.h"

/* A capped text buffer (PTC_PYBUNDLE_FILE_MAX): the first failure sticks in err, so callers
 * check once at the end. */
typedef struct buf {
    char *p;
    size_t len, cap;
    int err;
} buf_t;

void ptc__pybundle_put(buf_t *b, const char *s, size_t n);
void ptc__pybundle_puts(buf_t *b, const char *s);
void ptc__pybundle_buf_free(buf_t *b);

#endif
