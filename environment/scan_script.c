/* The helper-scanning script, compiled in from custom_tools_scan.py. */
#include "internal.h"

#include "custom_tools_scan_py.h"

const char *env_custom_scan_script(size_t *len)
{
    /* the generated array ends with a NUL that is not part of the script */
    if (len) *len = sizeof ptc_custom_tools_scan_py - 1;
    return (const char *)ptc_custom_tools_scan_py;
}
