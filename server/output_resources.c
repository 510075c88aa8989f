/* output_resources.c - execute_code's output pages as MCP resources: the template
 * ptc://output/{cursor} reads the page behind a cursor that execute_code handed out, so a client
 * can show or attach a long output without another tool call. Reading does not consume the
 * page: it stays readable until the cursor expires, as with execute_code's cursor argument. */
#include "executor.h"
#include "tools.h"

#include "base.h"

#include <stdlib.h>
#include <string.h>

#define OUTPUT_URI_PREFIX "ptc://output/"

static int read_output(const char *uri, const cJSON *vars, void *data, cJSON **contents, char *msg,
                       size_t msg_size)
{
    ptc_execute_t *ex = data;
    const char *cursor = cJSON_GetObjectItemCaseSensitive(vars, "cursor")->valuestring;
    exec_page_t page;
    int rc = exec_pages_next(ptc_execute_pages(ex), cursor, uv_now(ptc_execute_loop(ex)), &page);
    if (rc == EXEC_PAGES_EXPIRED) {
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

int ptc_output_resources_register(ptc_execute_t *ex, mcp_server_t *srv)
{
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
