/* fuzz_bridge.c - libFuzzer target for what sandboxed code writes to the host: bridge request
 * lines (bridge/proto.c), and the identifier sanitiser that turns catalog names into Python
 * names (pybundle/pybundle.c). The first byte picks the target. */
#include "bridge.h"
#include "pybundle.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static void fuzz_request(const uint8_t *data, size_t size)
{
    ptc_bridge_req_t req;
    char msg[256] = "";
    int rc = ptc_bridge_parse((const char *)data, size, 4096, &req, msg, sizeof msg);
    if (rc != PTC_BRIDGE_OK) {
        if (msg[0] == '\0' || req.server || req.arguments || req.record) abort();
        ptc_bridge_req_clear(&req);
        return;
    }
    if (req.id < 1 || req.id > PTC_BRIDGE_ID_MAX) abort();
    switch (req.method) {
    case PTC_BRIDGE_CALL:
        if (!req.server || !req.tool || !cJSON_IsObject(req.arguments)) abort();
        break;
    case PTC_BRIDGE_SEARCH:
        if (!req.query || req.top_k < 1 || req.top_k > PTC_BRIDGE_TOPK_MAX) abort();
        break;
    case PTC_BRIDGE_EMIT:
        if (!req.record) abort();
        break;
    default:
        abort();
    }
    /* An answer to anything parsed is one line of valid JSON carrying the same id. */
    size_t len = 0;
    char *line = ptc_bridge_answer_result(req.id, req.arguments ? req.arguments : req.record, &len);
    if (line) {
        if (len == 0 || line[len - 1] != '\n' || memchr(line, '\n', len - 1)) abort();
        cJSON *back = cJSON_Parse(line);
        if (!back) abort();
        if (cJSON_GetObjectItem(back, "id")->valuedouble != (double)req.id) abort();
        cJSON_Delete(back);
        free(line);
    }
    ptc_bridge_req_clear(&req);
}

static void fuzz_identifier(const uint8_t *data, size_t size)
{
    char *name = malloc(size + 1);
    if (!name) return;
    memcpy(name, data, size);
    name[size] = '\0';
    char out[PTC_PYBUNDLE_IDENT_MAX + 1];
    size_t n = ptc_pybundle_identifier(name, out, sizeof out);
    if (n == 0 || n > PTC_PYBUNDLE_IDENT_MAX || strlen(out) != n) abort();
    if (out[0] >= '0' && out[0] <= '9') abort();
    for (size_t i = 0; i < n; i++)
        if (!is_ident_char(out[i])) abort();
    free(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    if (data[0] & 1)
        fuzz_identifier(data + 1, size - 1);
    else
        fuzz_request(data + 1, size - 1);
    return 0;
}
