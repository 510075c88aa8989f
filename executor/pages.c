/* pages.c - the output page store behind execute_code's cursors. */
#include "internal.h"

#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define CURSOR_ID_BYTES 16

typedef struct entry {
    exec__lru_node_t node; /* first: most recently used first */
    unsigned char id[CURSOR_ID_BYTES];
    char *text; /* stdout then stderr, one buffer */
    char *meta;
    size_t out_len, err_len;
    size_t page_chars;
    uint64_t last_used_ms;
} entry_t;

struct exec_pages {
    size_t max_bytes, max_entries, bytes, n;
    uint64_t ttl_ms;
    exec__lru_t lru;
};

int exec_pages_new(size_t max_bytes, size_t max_entries, uint64_t ttl_ms, exec_pages_t **out)
{
    *out = NULL;
    if (max_bytes == 0 || max_entries == 0 || ttl_ms == 0) return EXEC_EINVAL;
    exec_pages_t *p = calloc(1, sizeof *p);
    if (p == NULL) return EXEC_ENOMEM;
    p->max_bytes = max_bytes;
    p->max_entries = max_entries;
    p->ttl_ms = ttl_ms;
    *out = p;
    return EXEC_OK;
}

static void drop(exec_pages_t *p, entry_t *e)
{
    exec__lru_unlink(&p->lru, &e->node);
    p->bytes -= e->out_len + e->err_len;
    p->n--;
    free(e->text);
    free(e->meta);
    free(e);
}

void exec_pages_free(exec_pages_t *p)
{
    if (p == NULL) return;
    while (p->lru.head)
        drop(p, (entry_t *)p->lru.head);
    free(p);
}

size_t exec_pages_entries(const exec_pages_t *p)
{
    return p->n;
}

size_t exec_pages_bytes(const exec_pages_t *p)
{
    return p->bytes;
}

static void expire(exec_pages_t *p, uint64_t now_ms)
{
    while (p->lru.tail && now_ms - ((entry_t *)p->lru.tail)->last_used_ms >= p->ttl_ms)
        drop(p, (entry_t *)p->lru.tail);
}

/* Byte length of the first `chars` characters of s[0..len). */
static size_t utf8_prefix(const char *s, size_t len, size_t chars)
{
    size_t i = 0;
    while (i < len && chars > 0) {
        i++;
        while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80)
            i++;
        chars--;
    }
    return i;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d == NULL) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static const char hexdig[] = "0123456789abcdef";

static char *make_cursor(const entry_t *e, uint64_t offset)
{
    /* 32 hex digits of a random id, then the character offset: unguessable and opaque. */
    char *c = malloc(2 * CURSOR_ID_BYTES + 1 + 20 + 1);
    if (c == NULL) return NULL;
    for (size_t i = 0; i < CURSOR_ID_BYTES; i++) {
        c[2 * i] = hexdig[e->id[i] >> 4];
        c[2 * i + 1] = hexdig[e->id[i] & 15];
    }
    snprintf(c + 2 * CURSOR_ID_BYTES, 22, ".%llu", (unsigned long long)offset);
    return c;
}

/* Fills page with chars characters from character offset `from` of e's text. */
static int cut(const entry_t *e, uint64_t from, size_t chars, exec_page_t *page)
{
    memset(page, 0, sizeof *page);
    size_t total = e->out_len + e->err_len;
    size_t start = utf8_prefix(e->text, total, (size_t)from);
    size_t end = start + utf8_prefix(e->text + start, total - start, chars);
    /* The page splits at the stdout/stderr boundary into its two parts. */
    size_t o0 = start < e->out_len ? start : e->out_len, o1 = end < e->out_len ? end : e->out_len;
    size_t e0 = start > e->out_len ? start : e->out_len, e1 = end > e->out_len ? end : e->out_len;
    page->out = dup_n(e->text + o0, o1 - o0);
    page->err = dup_n(e->text + e0, e1 - e0);
    if (page->out == NULL || page->err == NULL) {
        exec_page_clear(page);
        return EXEC_ENOMEM;
    }
    if (e->meta != NULL && (page->meta = dup_n(e->meta, strlen(e->meta))) == NULL) {
        exec_page_clear(page);
        return EXEC_ENOMEM;
    }
    if (end < total) {
        page->cursor = make_cursor(e, from + chars);
        if (page->cursor == NULL) {
            exec_page_clear(page);
            return EXEC_ENOMEM;
        }
    }
    return EXEC_OK;
}

int exec_pages_first(exec_pages_t *p, const unsigned char *owner, const char *meta, const char *out,
                     size_t out_len, const char *err, size_t err_len, size_t page_chars,
                     uint64_t now_ms, exec_page_t *page)
{
    memset(page, 0, sizeof *page);
    if (page_chars == 0) return EXEC_EINVAL;
    expire(p, now_ms);
    /* Keep at most the store's whole budget for one run; the caller reports the rest. */
    out_len = ptc_utf8_cut(out, out_len, p->max_bytes);
    err_len = ptc_utf8_cut(err, err_len, p->max_bytes - out_len);
    entry_t *e = calloc(1, sizeof *e);
    if (e == NULL) return EXEC_ENOMEM;
    e->text = malloc(out_len + err_len + 1);
    e->meta = meta != NULL ? dup_n(meta, strlen(meta)) : NULL;
    if (e->text == NULL || (meta != NULL && e->meta == NULL)) {
        free(e->text);
        free(e->meta);
        free(e);
        return EXEC_ENOMEM;
    }
    if (out_len) memcpy(e->text, out, out_len);
    if (err_len) memcpy(e->text + out_len, err, err_len);
    e->text[out_len + err_len] = '\0';
    e->out_len = out_len;
    e->err_len = err_len;
    e->page_chars = page_chars;
    e->last_used_ms = now_ms;
    memcpy(e->node.owner, owner, sizeof e->node.owner);
    int rc = cut(e, 0, page_chars, page);
    if (rc == 0 && page->cursor != NULL) {
        if (getrandom(e->id, sizeof e->id, 0) != (ssize_t)sizeof e->id) {
            rc = EXEC_ENOMEM;
        } else {
            free(page->cursor);
            page->cursor = make_cursor(e, page_chars); /* now with the entry's real id */
            if (page->cursor == NULL) rc = EXEC_ENOMEM;
        }
        if (rc < 0) exec_page_clear(page);
    }
    if (rc < 0 || page->cursor == NULL) {
        /* Failed, or everything fitted on one page: nothing to keep. */
        free(e->text);
        free(e->meta);
        free(e);
        return rc;
    }
    while (p->lru.head && (p->n >= p->max_entries || p->bytes + out_len + err_len > p->max_bytes))
        drop(p, (entry_t *)p->lru.tail);
    exec__lru_push_front(&p->lru, &e->node);
    p->n++;
    p->bytes += out_len + err_len;
    return EXEC_OK;
}

static int hexval(char c)
{
    const char *q = strchr(hexdig, c);
    return c != '\0' && q ? (int)(q - hexdig) : -1;
}

int exec_pages_next(exec_pages_t *p, const unsigned char *owner, const char *cursor,
                    uint64_t now_ms, exec_page_t *page)
{
    memset(page, 0, sizeof *page);
    expire(p, now_ms);
    unsigned char id[CURSOR_ID_BYTES];
    if (cursor == NULL || strlen(cursor) < 2 * CURSOR_ID_BYTES + 2 ||
        cursor[2 * CURSOR_ID_BYTES] != '.')
        return EXEC_EEXPIRED;
    for (size_t i = 0; i < CURSOR_ID_BYTES; i++) {
        int hi = hexval(cursor[2 * i]), lo = hexval(cursor[2 * i + 1]);
        if (hi < 0 || lo < 0) return EXEC_EEXPIRED;
        id[i] = (unsigned char)(hi << 4 | lo);
    }
    char *end;
    unsigned long long offset = strtoull(cursor + 2 * CURSOR_ID_BYTES + 1, &end, 10);
    if (*end != '\0' || end == cursor + 2 * CURSOR_ID_BYTES + 1) return EXEC_EEXPIRED;
    entry_t *e = (entry_t *)p->lru.head;
    while (e && memcmp(e->id, id, sizeof id) != 0)
        e = (entry_t *)e->node.next;
    /* Another owner's cursor is an unknown one: same answer, and its use refreshes nothing. */
    if (e == NULL || !exec__lru_owned_by(&e->node, owner)) return EXEC_EEXPIRED;
    size_t total_chars = ptc_utf8_count(e->text, e->out_len + e->err_len);
    if (offset >= total_chars) return EXEC_EEXPIRED;
    e->last_used_ms = now_ms;
    exec__lru_unlink(&p->lru, &e->node);
    exec__lru_push_front(&p->lru, &e->node);
    return cut(e, offset, e->page_chars, page);
}

static void drop_node(void *store, exec__lru_node_t *n)
{
    drop(store, (entry_t *)n);
}

size_t exec_pages_drop_owner(exec_pages_t *p, const unsigned char *owner)
{
    return exec__lru_drop_owner(&p->lru, owner, drop_node, p);
}

void exec_page_clear(exec_page_t *page)
{
    free(page->out);
    free(page->err);
    free(page->cursor);
    free(page->meta);
    memset(page, 0, sizeof *page);
}

char *exec_pages_utf8_sanitize(const char *bytes, size_t len, size_t *out_len)
{
    /* base/'s one rule: every byte that starts no valid sequence, NUL included, is U+FFFD */
    return ptc_utf8_sanitize(bytes, len, out_len);
}
