/* filestore.c - the store behind execute_code's file URIs: the files a run left in its output
 * folder, kept server-side under unguessable keys, bounded like the output pages (total bytes,
 * entries, idle TTL; least recently used goes first). Also tells a file's MIME type. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define FILE_ID_BYTES 16 /* 128 random bits: the key is a capability, like a cursor */

typedef struct fentry {
    exec__lru_node_t node; /* first: most recently used first */
    char *key;             /* 32 hex digits, '/', the escaped name */
    char *name;
    const char *mime; /* static */
    unsigned char *data;
    size_t len;
    uint64_t last_used_ms;
} fentry_t;

struct exec_filestore {
    size_t max_bytes, max_entries, bytes, n;
    uint64_t ttl_ms;
    exec__lru_t lru;
};

int exec_filestore_new(size_t max_bytes, size_t max_entries, uint64_t ttl_ms,
                       exec_filestore_t **out)
{
    *out = NULL;
    if (max_bytes == 0 || max_entries == 0 || ttl_ms == 0) return EXEC_EINVAL;
    exec_filestore_t *s = calloc(1, sizeof *s);
    if (s == NULL) return EXEC_ENOMEM;
    s->max_bytes = max_bytes;
    s->max_entries = max_entries;
    s->ttl_ms = ttl_ms;
    *out = s;
    return EXEC_OK;
}

static void entry_free(fentry_t *e)
{
    free(e->key);
    free(e->name);
    free(e->data);
    free(e);
}

static void drop(exec_filestore_t *s, fentry_t *e)
{
    exec__lru_unlink(&s->lru, &e->node);
    s->bytes -= e->len;
    s->n--;
    entry_free(e);
}

void exec_filestore_free(exec_filestore_t *s)
{
    if (s == NULL) return;
    while (s->lru.head)
        drop(s, (fentry_t *)s->lru.head);
    free(s);
}

size_t exec_filestore_entries(const exec_filestore_t *s)
{
    return s->n;
}

size_t exec_filestore_bytes(const exec_filestore_t *s)
{
    return s->bytes;
}

static void expire(exec_filestore_t *s, uint64_t now_ms)
{
    while (s->lru.tail && now_ms - ((fentry_t *)s->lru.tail)->last_used_ms >= s->ttl_ms)
        drop(s, (fentry_t *)s->lru.tail);
}

static const char hexdig[] = "0123456789ABCDEF";

char *exec_filestore_escape(const char *name)
{
    /* RFC 3986 unreserved characters stay; every other byte is %XX, so any name (the output
       folder allows all bytes but '/' and NUL) makes one URI path segment. */
    size_t n = strlen(name);
    char *o = malloc(3 * n + 1);
    if (o == NULL) return NULL;
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            o[k++] = (char)c;
        } else {
            o[k++] = '%';
            o[k++] = hexdig[c >> 4];
            o[k++] = hexdig[c & 15];
        }
    }
    o[k] = '\0';
    return o;
}

int exec_filestore_put(exec_filestore_t *s, const unsigned char *owner, const char *name,
                       const unsigned char *data, size_t len, const char *mime, uint64_t now_ms,
                       char **key)
{
    *key = NULL;
    if (name == NULL || name[0] == '\0' || strchr(name, '/') != NULL || mime == NULL ||
        (data == NULL && len > 0))
        return EXEC_EINVAL;
    expire(s, now_ms);
    if (len > s->max_bytes) return EXEC_ETOOBIG;
    unsigned char id[FILE_ID_BYTES];
    if (getrandom(id, sizeof id, 0) != (ssize_t)sizeof id) return EXEC_ENOMEM;
    fentry_t *e = calloc(1, sizeof *e);
    char *esc = exec_filestore_escape(name);
    if (e == NULL || esc == NULL) {
        free(e);
        free(esc);
        return EXEC_ENOMEM;
    }
    size_t klen = 2 * FILE_ID_BYTES + 1 + strlen(esc);
    e->key = malloc(klen + 1);
    e->name = strdup(name);
    e->data = malloc(len ? len : 1);
    if (e->key == NULL || e->name == NULL || e->data == NULL) {
        free(esc);
        entry_free(e);
        return EXEC_ENOMEM;
    }
    for (size_t i = 0; i < FILE_ID_BYTES; i++) {
        e->key[2 * i] = "0123456789abcdef"[id[i] >> 4];
        e->key[2 * i + 1] = "0123456789abcdef"[id[i] & 15];
    }
    snprintf(e->key + 2 * FILE_ID_BYTES, klen + 1 - 2 * FILE_ID_BYTES, "/%s", esc);
    free(esc);
    if (len) memcpy(e->data, data, len);
    e->len = len;
    e->mime = mime;
    e->last_used_ms = now_ms;
    memcpy(e->node.owner, owner, sizeof e->node.owner);
    *key = strdup(e->key);
    if (*key == NULL) {
        entry_free(e);
        return EXEC_ENOMEM;
    }
    while (s->lru.head && (s->n >= s->max_entries || s->bytes + len > s->max_bytes))
        drop(s, (fentry_t *)s->lru.tail);
    exec__lru_push_front(&s->lru, &e->node);
    s->n++;
    s->bytes += len;
    return EXEC_OK;
}

int exec_filestore_get(exec_filestore_t *s, const unsigned char *owner, const char *key,
                       uint64_t now_ms, exec_stored_file_t *f)
{
    memset(f, 0, sizeof *f);
    expire(s, now_ms);
    if (key == NULL) return EXEC_EEXPIRED;
    fentry_t *e = (fentry_t *)s->lru.head;
    /* The whole key must match: the random part is the capability, the name only a label. */
    while (e && strcmp(e->key, key) != 0)
        e = (fentry_t *)e->node.next;
    /* Another owner's key is an unknown one: same answer, and its use refreshes nothing. */
    if (e == NULL || !exec__lru_owned_by(&e->node, owner)) return EXEC_EEXPIRED;
    e->last_used_ms = now_ms;
    exec__lru_unlink(&s->lru, &e->node);
    exec__lru_push_front(&s->lru, &e->node);
    f->name = e->name;
    f->mime_type = e->mime;
    f->data = e->data;
    f->len = e->len;
    return EXEC_OK;
}

static void drop_node(void *store, exec__lru_node_t *n)
{
    drop(store, (fentry_t *)n);
}

size_t exec_filestore_drop_owner(exec_filestore_t *s, const unsigned char *owner)
{
    return exec__lru_drop_owner(&s->lru, owner, drop_node, s);
}

/* --- MIME types ----------------------------------------------------------------------------- */

static bool has_ext(const char *name, const char *ext)
{
    size_t n = strlen(name), k = strlen(ext);
    if (n <= k || name[n - k - 1] != '.') return false;
    for (size_t i = 0; i < k; i++) {
        char c = name[n - k + i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != ext[i]) return false;
    }
    return true;
}

/* The image type the bytes say they are (magic numbers), or NULL. */
static const char *sniff_image(const unsigned char *d, size_t len)
{
    if (len >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) return "image/png";
    if (len >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return "image/jpeg";
    if (len >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return "image/gif";
    if (len >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return "image/webp";
    return NULL;
}

static bool image_ext_matches(const char *name, const char *mime)
{
    if (strcmp(mime, "image/png") == 0) return has_ext(name, "png");
    if (strcmp(mime, "image/jpeg") == 0)
        return has_ext(name, "jpg") || has_ext(name, "jpeg") || has_ext(name, "jpe");
    if (strcmp(mime, "image/gif") == 0) return has_ext(name, "gif");
    return has_ext(name, "webp");
}

/* Text: valid UTF-8 (base's rule) without NUL bytes. A file's data may be its first bytes only,
 * so a character cut at the very end still counts as text. */
static bool is_utf8_text(const unsigned char *d, size_t len)
{
    if (memchr(d, 0, len) != NULL) return false;
    bool cut;
    return ptc_utf8_valid_len((const char *)d, len, &cut) == len || cut;
}

const char *exec_file_mime_type(const char *name, const unsigned char *data, size_t len)
{
    const char *img = sniff_image(data, len);
    /* An image needs both its bytes and its name to say so: a .txt that starts like a PNG is
       not shown as a picture, nor a .png holding something else. */
    if (img != NULL && image_ext_matches(name, img)) return img;
    static const struct {
        const char *ext, *mime;
    } text_types[] = {
        {"csv", "text/csv"},          {"tsv", "text/tab-separated-values"},
        {"json", "application/json"}, {"md", "text/markdown"},
        {"html", "text/html"},        {"htm", "text/html"},
        {"svg", "image/svg+xml"},     {"xml", "application/xml"},
        {"py", "text/x-python"},      {"txt", "text/plain"},
        {"log", "text/plain"},
    };
    bool text = is_utf8_text(data, len);
    for (size_t i = 0; i < sizeof text_types / sizeof text_types[0]; i++)
        if (has_ext(name, text_types[i].ext))
            return text ? text_types[i].mime : "application/octet-stream";
    if (has_ext(name, "pdf")) return "application/pdf";
    return text ? "text/plain" : "application/octet-stream";
}

bool exec_mime_is_image(const char *mime)
{
    return strcmp(mime, "image/png") == 0 || strcmp(mime, "image/jpeg") == 0 ||
           strcmp(mime, "image/gif") == 0 || strcmp(mime, "image/webp") == 0;
}

bool exec_mime_is_text(const char *mime)
{
    return strncmp(mime, "text/", 5) == 0 || strcmp(mime, "application/json") == 0 ||
           strcmp(mime, "application/xml") == 0 || strcmp(mime, "image/svg+xml") == 0;
}
