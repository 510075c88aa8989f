/* internal.h - what the files of pybundle/ share (not a public header). */
#ifndef PTC_PYBUNDLE_INTERNAL_H
#define PTC_PYBUNDLE_INTERNAL_H

#include "pybundle.h"

#include "base.h"

/* The generated files are base's capped buffers (PTC_PYBUNDLE_FILE_MAX each): the first
 * failure sticks, so callers check once at the end, with ptc_buf_error(), whose codes are this
 * library's too (PTC_PYBUNDLE_ETOOBIG, PTC_PYBUNDLE_ENOMEM). */
void ptc__pybundle_buf_init(ptc_buf_t *b);

#endif
