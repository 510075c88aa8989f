/* resources.c - execute_code's output pages as MCP resources: the template
 * ptc://output/{cursor} reads the page behind a cursor that execute_code handed out, so a client
 * can show or attach a long output without another tool call. Reading does not consume the
 * page: it stays readable until the cursor expires, as with execute_code's cursor argument.
 * ptc://files/{id}/{name} reads a file a run left in /tmp/outputs (the file store). */
#include "internal.h"

#include "base.h"

#include <mbedtls/base64.h>
#include <stdlib.h>
#include <string.h>

#define OUTPUT_URI_PREFIX "ptc://output/"

static int read_output(const char *uri, const cJSON *vars, const mcp_identity_t *who, void *data,
                       cJSON **contents, char *msg, size_t msg_size)
{
    ptc_execute_t *ex = data;
    const char *cursor = cJSON_GetObjectItemCaseSensitive(vars, "cursor")->valuestring;
    exec_page_t page;
    /* Only the client that ran the code finds its pages (see exec_pages_next). */
    int rc = exec_pages_next(ex->pages, who->b, cursor, uv_now(ex->loop), &page);
    if (rc == EXEC_EEXPIRED) {
        snprintf(msg, msg_size,
                 "unknown or expired cursor (output is kept for 30 minutes after its last page "
                 "was read)");
        return MCP_EINVAL;
    }
    if (rc < 0) return MCP_ENOMEM;
    ptc_buf_t t;
    ptc_buf_init(&t, PTC_CAP_RESOURCE_TEXT);
    bool has_err = page.err[0] != '\0';
    if (has_err && page.out[0] != '\0') ptc_buf_str(&t, "--- stdout ---\n");
    ptc_buf_str(&t, page.out);
    if (has_err) {
        if (t.len > 0 && t.p[t.len - 1] != '\n') ptc_buf_str(&t, "\n");
        ptc_buf_str(&t, "--- stderr ---\n");
        ptc_buf_str(&t, page.err);
    }
    if (page.cursor != NULL) {
        if (t.len > 0 && t.p[t.len - 1] != '\n') ptc_buf_str(&t, "\n");
        ptc_buf_str(&t, "[more output: " OUTPUT_URI_PREFIX);
        ptc_buf_str(&t, page.cursor);
        ptc_buf_str(&t, "]");
    }
    exec_page_clear(&page);
    cJSON *arr = cJSON_CreateArray();
    cJSON *c = cJSON_CreateObject();
    char *text = ptc_buf_take(&t, NULL);
    bool ok = text != NULL && arr != NULL && c != NULL && cJSON_AddItemToArray(arr, c);
    if (!ok) cJSON_Delete(c);
    ok = ok && cJSON_AddStringToObject(c, "uri", uri) != NULL &&
         cJSON_AddStringToObject(c, "mimeType", "text/plain") != NULL &&
         cJSON_AddStringToObject(c, "text", text) != NULL;
    free(text);
    if (!ok) {
        cJSON_Delete(arr);
        return MCP_ENOMEM;
    }
    *contents = arr;
    return MCP_OK;
}

#define FILES_URI_PREFIX "ptc://files/"

char *ptc_base64(const unsigned char *data, size_t len)
{
    size_t need = 0;
    mbedtls_base64_encode(NULL, 0, &need, data, len);
    unsigned char *b64 = malloc(need + 1);
    size_t n = 0;
    if (b64 == NULL) return NULL;
    if (mbedtls_base64_encode(b64, need + 1, &n, data, len) != 0) {
        free(b64);
        return NULL;
    }
    b64[n] = '\0';
    return (char *)b64;
}

/* A file a run left in /tmp/outputs: the URI (its random part is the capability) names it. */
static int read_file(const char *uri, const cJSON *vars, const mcp_identity_t *who, void *data,
                     cJSON **contents, char *msg, size_t msg_size)
{
    (void)vars;
    ptc_execute_t *ex = data;
    exec_stored_file_t f;
    /* Only the client whose run wrote the file finds it (see exec_filestore_get). */
    int rc =
        exec_filestore_get(ex->files, who->b, uri + strlen(FILES_URI_PREFIX), uv_now(ex->loop), &f);
    if (rc < 0) {
        snprintf(msg, msg_size,
                 "unknown or expired file (files are kept for 30 minutes after their last read, "
                 "while the store has room)");
        return MCP_EINVAL;
    }
    char *text = NULL, *blob = NULL;
    if (exec_mime_is_text(f.mime_type))
        text = exec_pages_utf8_sanitize((const char *)f.data, f.len, NULL);
    else
        blob = ptc_base64(f.data, f.len);
    cJSON *arr = cJSON_CreateArray();
    cJSON *c = cJSON_CreateObject();
    bool ok =
        (text != NULL || blob != NULL) && arr != NULL && c != NULL && cJSON_AddItemToArray(arr, c);
    if (!ok) cJSON_Delete(c);
    ok = ok && cJSON_AddStringToObject(c, "uri", uri) != NULL &&
         cJSON_AddStringToObject(c, "mimeType", f.mime_type) != NULL &&
         cJSON_AddStringToObject(c, text ? "text" : "blob", text ? text : blob) != NULL;
    free(text);
    free(blob);
    if (!ok) {
        cJSON_Delete(arr);
        return MCP_ENOMEM;
    }
    *contents = arr;
    return MCP_OK;
}

int ptc_execute_resources_register(ptc_execute_t *ex, mcp_server_t *srv)
{
    const mcp_resource_def_t files = {
        .uri = FILES_URI_PREFIX "{id}/{name}",
        .name = "execute_code output file",
        .title = "execute_code output file",
        .description = "A file that code wrote to /tmp/outputs, as listed in the result's "
                       "files[].uri: text for text types, else base64",
        .read = read_file,
        .data = ex,
    };
    int rc = mcp_server_add_resource_template(srv, &files);
    if (rc < 0) return rc;
    const mcp_resource_def_t def = {
        .uri = OUTPUT_URI_PREFIX "{cursor}",
        .name = "execute_code output page",
        .title = "execute_code output page",
        .description = "The page of an execute_code result behind a cursor it returned "
                       "(next_cursor): stdout, then stderr, and the next page's URI when there "
                       "is more",
        .mime_type = "text/plain",
        .read = read_output,
        .data = ex,
    };
    return mcp_server_add_resource_template(srv, &def);
}
