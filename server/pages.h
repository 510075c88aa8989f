/* pages.h - execute_code output kept server-side and handed out in pages behind opaque cursors.
 * Bounded: total bytes, number of entries, and an idle TTL; least recently used goes first. */
#ifndef PTC_SERVER_PAGES_H
#define PTC_SERVER_PAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ptc_pages ptc_pages_t;

typedef struct ptc_page {
    char *out;    /* the page's part of stdout (UTF-8, NUL-terminated), owned */
    char *err;    /* the page's part of stderr, owned */
    char *cursor; /* opaque cursor of the next page, or NULL when this was the last; owned */
    char *meta;   /* copy of the meta text stored with the run (NULL if none); owned */
} ptc_page_t;

enum {
    PTC_PAGES_OK = 0,
    PTC_PAGES_ENOMEM = -1,
    PTC_PAGES_EINVAL = -2,
    PTC_PAGES_EXPIRED = -3, /* unknown, expired or evicted cursor */
};

/** max_bytes: all stored output together; max_entries: runs kept; ttl_ms: idle lifetime. */
int ptc_pages_new(size_t max_bytes, size_t max_entries, uint64_t ttl_ms, ptc_pages_t **out);
void ptc_pages_free(ptc_pages_t *p);

/**
 * Cuts the first page (page_chars Unicode characters: stdout first, then stderr) of a run's
 * output and, when more is left, keeps the whole output and returns a cursor for the rest.
 * meta (borrowed, may be NULL) is text kept with the run and returned with every page of it.
 * out/err are borrowed and must be valid UTF-8 (see ptc_utf8_sanitize). Output larger than the
 * store's byte budget is still paged for what fits: the rest is counted as dropped.
 */
int ptc_pages_first(ptc_pages_t *p, const char *meta, const char *out, size_t out_len,
                    const char *err, size_t err_len, size_t page_chars, uint64_t now_ms,
                    ptc_page_t *page);
/** The page behind a cursor (repeatable until it expires). PTC_PAGES_EXPIRED when unknown. */
int ptc_pages_next(ptc_pages_t *p, const char *cursor, uint64_t now_ms, ptc_page_t *page);
/** Frees a page's strings. */
void ptc_page_clear(ptc_page_t *page);
/** Entries and bytes currently kept (for tests and --check). */
size_t ptc_pages_entries(const ptc_pages_t *p);
size_t ptc_pages_bytes(const ptc_pages_t *p);

/**
 * Returns a NUL-terminated copy of bytes with every invalid UTF-8 sequence (and NUL byte)
 * replaced by U+FFFD; *out_len gets its length. NULL on allocation failure.
 */
char *ptc_utf8_sanitize(const char *bytes, size_t len, size_t *out_len);

#endif
