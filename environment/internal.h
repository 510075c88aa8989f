/* Helpers shared by the files of the environment module; not part of its API. */
#ifndef PTC_ENVIRONMENT_INTERNAL_H
#define PTC_ENVIRONMENT_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "environment.h"

/* The interpreter's version report: printed by this code under `python -I -S -c`. The cache
   tag and platform make two builds of one version with another ABI differ. */
#define ENV__VERSION_CODE                                                                          \
    "import sys, sysconfig\n"                                                                      \
    "print(sys.version)\n"                                                                         \
    "print(sys.implementation.cache_tag, getattr(sys, 'abiflags', ''))\n"                          \
    "print(sysconfig.get_platform())\n"
#define ENV__VERSION_MAX 2048u

/* <cache>/env-<hex>.failed: the last failed build of that set, for --check (one line). */
#define ENV__FAILED_SUFFIX ".failed"

/* printf into msg when msg is not NULL; always NUL-terminated. */
void env__msg(char *msg, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Reads a whole regular file of at most max bytes into a malloc'd NUL-terminated buffer. */
int env__read_file(const char *path, size_t max, char **out, size_t *out_len);

/* strdup of s, or NULL for NULL; on ENOMEM NULL with *ok set false (a run of copies checked
   once). */
char *env__dup_or_null(const char *s, bool *ok);

/* Removes path and everything below it, never following symbolic links. 0 or -1. */
int env__remove_tree(const char *path);

/* mkdir -p with mode 0755; 0 or -1 (errno set). */
int env__mkdirs(const char *path);

/* Writes data to path through a temporary sibling and rename, so readers never see half. */
int env__write_file_atomic(const char *path, const char *data, size_t len);

/* A 32-byte SHA-256 digest as lower-case hex into out (ENV_KEY_HEX_LEN + 1 bytes). */
void env__hex(const unsigned char *digest32, char *out);

#endif
