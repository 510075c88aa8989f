/* mrtr.c - multi-round-trip requests (2026-07-28, SEP-2322): InputRequiredResult, and the
 * integrity-protected requestState that carries a tool's progress from one round to the next
 * through the client.
 *
 * A requestState is "v1.EXPIRES.STATE.MAC": EXPIRES the wall clock in ms since the epoch past
 * which it is refused (a wall clock, not the monotonic one, because instances that share a key
 * read each other's states), STATE the tool's bytes in base64, MAC the base64 HMAC-SHA256 of
 * "v1.EXPIRES.STATE" and the tool's name under the server's key. The key is random per
 * process unless mcp_server_set_state_key gave one, so by default a state is honoured only by
 * the process that wrote it. */
#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/base64.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/md.h>
#include <mbedtls/platform_util.h>

#define MAC_BYTES 32

int mcp__mrtr_key_init(unsigned char key[32])
{
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
    static const unsigned char pers[] = "ptc-mcp requestState key";
    int ret = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, pers, sizeof pers - 1);
    if (ret == 0) ret = mbedtls_ctr_drbg_random(&drbg, key, 32);
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
    return ret == 0 ? MCP_OK : MCP_EIO;
}

int mcp_server_set_state_key(mcp_server_t *srv, const unsigned char *key, size_t len)
{
    if (srv == NULL || key == NULL || len < MCP_STATE_KEY_MIN_BYTES) return MCP_EINVAL;
    /* The key used is derived from the one given (HMAC-SHA256 under it of a fixed label), so
     * the same secret used for something else never signs a state with its own bytes, and a
     * key of any length fits the 32 bytes kept. */
    static const char label[] = "ptc-mcp requestState key v1";
    unsigned char derived[MAC_BYTES];
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
    if (md == NULL ||
        mbedtls_md_hmac(md, key, len, (const unsigned char *)label, sizeof label - 1, derived) != 0)
        return MCP_EIO;
    memcpy(srv->state_key, derived, sizeof srv->state_key);
    mbedtls_platform_zeroize(derived, sizeof derived);
    return MCP_OK;
}

/* HMAC-SHA256 of `signed_part` "\n" tool under key, base64 into out (at least 45 bytes). */
static int mac_b64(const unsigned char *key, const char *signed_part, size_t n, const char *tool,
                   char *out, size_t out_size)
{
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
    mbedtls_md_context_t ctx;
    unsigned char mac[MAC_BYTES];
    mbedtls_md_init(&ctx);
    int ret = md == NULL ? -1 : mbedtls_md_setup(&ctx, md, 1);
    if (ret == 0) ret = mbedtls_md_hmac_starts(&ctx, key, 32);
    if (ret == 0) ret = mbedtls_md_hmac_update(&ctx, (const unsigned char *)signed_part, n);
    if (ret == 0) ret = mbedtls_md_hmac_update(&ctx, (const unsigned char *)"\n", 1);
    if (ret == 0) ret = mbedtls_md_hmac_update(&ctx, (const unsigned char *)tool, strlen(tool));
    if (ret == 0) ret = mbedtls_md_hmac_finish(&ctx, mac);
    mbedtls_md_free(&ctx);
    size_t olen = 0;
    if (ret == 0)
        ret = mbedtls_base64_encode((unsigned char *)out, out_size, &olen, mac, sizeof mac);
    return ret == 0 ? MCP_OK : MCP_EIO;
}

/* The requestState for `state` (malloc'd), or NULL on ENOMEM. */
static char *state_seal(const mcp_server_t *srv, const char *tool, const char *state)
{
    size_t n = strlen(state), b64_len = 0;
    mbedtls_base64_encode(NULL, 0, &b64_len, (const unsigned char *)state, n);
    size_t cap = 48 + b64_len + 64;
    char *out = malloc(cap);
    if (out == NULL) return NULL;
    int len = snprintf(out, cap, "v1.%" PRIu64 ".", mcp__wall_ms() + MCP_MRTR_STATE_TTL_MS);
    size_t olen = 0;
    if (len < 0 || mbedtls_base64_encode((unsigned char *)out + len, cap - (size_t)len, &olen,
                                         (const unsigned char *)state, n) != 0) {
        free(out);
        return NULL;
    }
    size_t signed_len = (size_t)len + olen;
    out[signed_len] = '.';
    if (mac_b64(srv->state_key, out, signed_len, tool, out + signed_len + 1, cap - signed_len - 1) <
        0) {
        free(out);
        return NULL;
    }
    return out;
}

/* The state inside requestState `rs` (malloc'd) if it verifies for tool; NULL otherwise
 * (*bad set) or on ENOMEM (*bad clear). */
static char *state_open(const mcp_server_t *srv, const char *tool, const char *rs, bool *bad)
{
    *bad = true;
    const char *last = strrchr(rs, '.');
    char *endp = NULL;
    if (strncmp(rs, "v1.", 3) != 0 || last == NULL || last < rs + 3) return NULL;
    uint64_t expires = strtoull(rs + 3, &endp, 10);
    if (endp == rs + 3 || *endp != '.' || endp >= last) return NULL;
    char mac[64];
    if (mac_b64(srv->state_key, rs, (size_t)(last - rs), tool, mac, sizeof mac) < 0) {
        *bad = false;
        return NULL;
    }
    /* Compared in constant time: the MAC is the secret a forger would probe for. */
    size_t n = strlen(mac);
    if (strlen(last + 1) != n) return NULL;
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(mac[i] ^ last[1 + i]);
    if (diff != 0 || mcp__wall_ms() > expires) return NULL;
    const unsigned char *b64 = (const unsigned char *)endp + 1;
    size_t b64_len = (size_t)(last - (const char *)b64), olen = 0;
    mbedtls_base64_decode(NULL, 0, &olen, b64, b64_len);
    char *state = malloc(olen + 1);
    if (state == NULL) {
        *bad = false;
        return NULL;
    }
    if (mbedtls_base64_decode((unsigned char *)state, olen + 1, &olen, b64, b64_len) != 0 ||
        memchr(state, '\0', olen) != NULL) {
        free(state);
        return NULL;
    }
    state[olen] = '\0';
    *bad = false;
    return state;
}

bool mcp__mrtr_parse(const mcp_server_t *srv, const cJSON *params, const char *bind,
                     const cJSON **responses, char **state, char *why, size_t why_size)
{
    *responses = NULL;
    *state = NULL;
    const cJSON *ir = cJSON_GetObjectItemCaseSensitive(params, "inputResponses");
    if (ir != NULL) {
        if (!cJSON_IsObject(ir)) {
            snprintf(why, why_size, "Invalid params: inputResponses must be an object");
            return false;
        }
        const cJSON *r;
        cJSON_ArrayForEach(r, ir)
        {
            if (!cJSON_IsObject(r)) {
                snprintf(why, why_size,
                         "Invalid params: inputResponses.%.80s must be an object (the "
                         "client's result for that input request)",
                         r->string);
                return false;
            }
        }
        *responses = ir;
    }
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(params, "requestState");
    if (rs == NULL) return true;
    bool bad = false;
    if (cJSON_IsString(rs)) *state = state_open(srv, bind, rs->valuestring, &bad);
    if (!cJSON_IsString(rs) || bad) {
        snprintf(why, why_size,
                 "Invalid params: requestState failed its integrity check (it was changed, "
                 "belongs to another request or to a server process with another key, or "
                 "expired); send the "
                 "request again without it");
        return false;
    }
    if (*state == NULL) {
        snprintf(why, why_size, "out of memory");
        return false;
    }
    return true;
}

bool mcp__mrtr_read(mcp_call_t *c, char *why, size_t why_size)
{
    return mcp__mrtr_parse(c->s->srv, c->params, c->tool, &c->input_responses, &c->state, why,
                           why_size);
}

const cJSON *mcp_call_input_responses(const mcp_call_t *call)
{
    return call->input_responses;
}

const char *mcp_call_request_state(const mcp_call_t *call)
{
    return call->state;
}

/* The capability an input request's method needs, or NULL for a method MRTR does not carry. */
static const char *capability_of(const char *method)
{
    if (strcmp(method, "sampling/createMessage") == 0) return "sampling";
    if (strcmp(method, "elicitation/create") == 0) return "elicitation";
    if (strcmp(method, "roots/list") == 0) return "roots";
    return NULL;
}

cJSON *mcp__mrtr_result(const mcp_server_t *srv, const cJSON *caps, const char *bind,
                        cJSON *input_requests, const char *state, const char **err,
                        const char **missing)
{
    *err = NULL;
    *missing = NULL;
    if (!cJSON_IsObject(input_requests) || input_requests->child == NULL)
        *err = "InputRequiredResult needs at least one input request";
    else if (state != NULL && strlen(state) > MCP_MRTR_MAX_STATE)
        *err = "InputRequiredResult: the state is larger than MCP_MRTR_MAX_STATE";
    const cJSON *r;
    const cJSON *list = *err == NULL ? input_requests : NULL;
    cJSON_ArrayForEach(r, list)
    {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "method");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "params");
        const char *cap = cJSON_IsString(m) ? capability_of(m->valuestring) : NULL;
        if (cap == NULL || (p != NULL && !cJSON_IsObject(p))) {
            *err = "InputRequiredResult: an input request is not {method, params} of "
                   "sampling/createMessage, elicitation/create or roots/list";
            break;
        }
        if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(caps, cap))) {
            *missing = cap;
            break;
        }
    }
    if (*err != NULL || *missing != NULL) {
        cJSON_Delete(input_requests);
        return NULL;
    }
    cJSON *res = cJSON_CreateObject();
    bool ok = res != NULL && cJSON_AddStringToObject(res, "resultType", "input_required") != NULL &&
              cJSON_AddItemToObject(res, "inputRequests", input_requests);
    if (ok) input_requests = NULL;
    if (ok && state != NULL) {
        char *sealed = state_seal(srv, bind, state);
        ok = sealed != NULL && cJSON_AddStringToObject(res, "requestState", sealed) != NULL;
        free(sealed);
    }
    cJSON_Delete(input_requests);
    if (!ok) {
        cJSON_Delete(res);
        *err = "out of memory";
        return NULL;
    }
    return res;
}

void mcp_call_finish_input_required(mcp_call_t *call, cJSON *input_requests, const char *state)
{
    const char *err = NULL, *missing = NULL;
    cJSON *res = NULL;
    /* A task's call has no session but still asks (the task parks in input_required). */
    if (!call->modern || (call->s == NULL && call->task == NULL)) {
        cJSON_Delete(input_requests);
        err = "InputRequiredResult is only for 2026-07-28 clients (use mcp_call_request)";
    } else {
        res = mcp__mrtr_result(call->srv, call->caps, call->tool, input_requests, state, &err,
                               &missing);
    }
    if (missing != NULL) {
        mcp_call_finish_missing_capability(call, missing);
        return;
    }
    if (res == NULL) {
        mcp_log(call->srv != NULL ? call->srv->lg : NULL, MCP_LOG_ERROR, "tool %s: %s", call->tool,
                err);
        mcp_call_finish_rpc_error(call, MCP_JSONRPC_INTERNAL_ERROR, err);
        return;
    }
    mcp__call_complete(call, mcp_jsonrpc_result(call->id, res));
}
