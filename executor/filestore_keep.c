/* filestore_keep.c - a file a run left, kept for its owner as a result lists it: its name as
 * text, its type, its key in the store (or why it was left out), whether it is shown as an
 * image within the bounds of one message, and its line in the result's text. */
#include "executor.h"

#include <stdlib.h>
#include <string.h>

/* Whether a kept file is shown as an image, or the note saying why not. */
static const char *picture_of(exec_kept_file_t *k, const exec_file_t *f,
                              const exec_keep_bounds_t *b, size_t *shown)
{
    const char *note = NULL;
    /* A cut image would show broken; a big one would fill the client's context. */
    k->picture = k->key != NULL && !f->truncated && exec_mime_is_image(k->mime);
    if (k->picture && f->len > b->image_max) {
        k->picture = false;
        note = "larger than the image bound (--max-image-bytes): not shown, read it by uri";
    } else if (k->picture && *shown + f->len > b->images_max) {
        k->picture = false;
        note = "not shown: the result's images would pass what one message may carry; read it "
               "by uri";
    }
    if (k->picture) *shown += f->len;
    return note;
}

int exec_filestore_keep(exec_filestore_t *s, const unsigned char *owner, const exec_file_t *f,
                        uint64_t now_ms, const exec_keep_bounds_t *b, size_t *shown,
                        exec_kept_file_t *k)
{
    memset(k, 0, sizeof *k);
    if (s == NULL || owner == NULL || f == NULL || b == NULL || shown == NULL) return EXEC_EINVAL;
    int rc = 0;
    k->name = exec_pages_utf8_sanitize(f->name, strlen(f->name), NULL);
    if (k->name == NULL) rc = EXEC_ENOMEM;
    k->mime =
        f->omitted ? "application/octet-stream" : exec_file_mime_type(f->name, f->data, f->len);
    k->size = f->size;
    k->truncated = f->truncated;
    k->omitted = f->omitted;
    k->reason = f->reason;
    if (rc == 0 && !f->omitted) {
        rc = exec_filestore_put(s, owner, f->name, f->data, f->len, k->mime, now_ms, &k->key);
        if (rc < 0 && rc != EXEC_ENOMEM) {
            rc = 0;
            k->omitted = true;
            k->reason = "larger than the server's whole file store (--file-store-bytes)";
        }
    }
    if (rc == 0) {
        const char *note = picture_of(k, f, b, shown);
        if (k->reason == NULL) k->reason = note;
        k->noted = note != NULL;
    }
    if (rc < 0) exec_kept_file_clear(k);
    return rc;
}

void exec_kept_file_clear(exec_kept_file_t *k)
{
    if (k == NULL) return;
    free(k->name);
    free(k->key);
    memset(k, 0, sizeof *k);
}

int exec_kept_file_line(ptc_buf_t *text, const exec_kept_file_t *k, const char *uri)
{
    ptc_buf_printf(text, "- %.300s (%s, %llu bytes", k->name, k->mime, (unsigned long long)k->size);
    if (k->omitted || k->truncated || k->noted)
        ptc_buf_printf(text, "; %s: %s",
                       k->omitted     ? "omitted"
                       : k->truncated ? "truncated"
                                      : "note",
                       k->reason);
    ptc_buf_str(text, ")");
    if (uri != NULL) {
        ptc_buf_str(text, " ");
        ptc_buf_str(text, uri);
    }
    if (k->picture) ptc_buf_str(text, " [shown as an image]");
    ptc_buf_str(text, "\n");
    return ptc_buf_error(text);
}
