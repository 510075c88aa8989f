/* internal.h - what the files of pybundle/ share (not a public header). */
#ifndef PTC_PYBUNDLE_INTERNAL_H
#define PTC_PYBUNDLE_INTERNAL_H

#include "pybundle.h"

#include "base.h"

/* The generated files are base's capped buffers (PTC_PYBUNDLE_FILE_MAX each): the first
 * failure sticks, so callers check once at the end. */
void ptc__pybundle_buf_init(ptc_buf_t *b);
/* A buffer's failure as this library's code (PTC_PYBUNDLE_ETOOBIG, PTC_PYBUNDLE_ENOMEM), or 0. */
int ptc__pybundle_buf_err(const ptc_buf_t *b);

#endif
