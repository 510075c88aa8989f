/* array.c - the capped growable array (base.h). */
#include "base.h"

#include <stdlib.h>
#include <string.h>

/* The first capacity of an array that grows: small arrays then need one allocation. */
#define ARRAY_FIRST_CAP 16

int ptc_array_reserve(void *pv, size_t *cap, size_t need, size_t elem, size_t max)
{
    if (pv == NULL || cap == NULL || elem == 0) return PTC_EINVAL;
    if (need <= *cap) return 0;
    if (need > max || need > SIZE_MAX / elem) return PTC_ETOOBIG;
    size_t nc = *cap ? *cap : ARRAY_FIRST_CAP;
    while (nc < need)
        nc = nc > SIZE_MAX / 2 ? SIZE_MAX : nc * 2;
    if (nc > max) nc = max;
    if (nc > SIZE_MAX / elem) nc = SIZE_MAX / elem; /* still >= need: checked above */
    /* The caller's pointer is read and written through memcpy, so that any T ** can be passed
     * without breaking the aliasing rules a void ** cast would. */
    void *old;
    memcpy(&old, pv, sizeof old);
    void *p = realloc(old, nc * elem);
    if (p == NULL) return PTC_ENOMEM;
    memcpy(pv, &p, sizeof p);
    *cap = nc;
    return 0;
}
