/* prompts.c - prompts: registration, prompts/list (paged) and prompts/get with its argument
 * checks (every value a string, every required argument present, no unknown argument) and a
 * check of the messages the handler built. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_PROMPT_NAME 128
#define GET_MSG_BYTES   512

static bool name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > MAX_PROMPT_NAME) return false;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

static cJSON *arguments_listing(const mcp_prompt_def_t *def, const mcp_logger_t *lg)
{
    cJSON *arr = cJSON_CreateArray();
    if (arr == NULL) return NULL;
    for (size_t i = 0; i < def->n_args; i++) {
        const mcp_prompt_arg_t *a = &def->args[i];
        bool dup = false;
        for (size_t j = 0; j < i && a->name != NULL; j++)
            dup = dup || strcmp(def->args[j].name, a->name) == 0;
        if (a->name == NULL || a->name[0] == '\0' || dup) {
            mcp_log(lg, MCP_LOG_ERROR, "prompt %s: argument %zu has %s name", def->name, i,
                    dup ? "a duplicate" : "no");
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON *o = cJSON_CreateObject();
        if (o == NULL || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            cJSON_Delete(arr);
            return NULL;
        }
        /* o belongs to arr from here on. */
        bool ok = cJSON_AddStringToObject(o, "name", a->name) != NULL &&
                  cJSON_AddBoolToObject(o, "required", a->required) != NULL;
        if (ok && a->description)
            ok = cJSON_AddStringToObject(o, "description", a->description) != NULL;
        if (!ok) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

int mcp_server_add_prompt(mcp_server_t *srv, const mcp_prompt_def_t *def)
{
    if (def == NULL || def->name == NULL || (def->get == NULL) == (def->get_round == NULL) ||
        !name_ok(def->name)) {
        mcp_log(srv->lg, MCP_LOG_ERROR,
                "prompt %s: needs a name of [A-Za-z0-9_.-]{1,128} and one get function",
                def && def->name ? def->name : "(unnamed)");
        return MCP_EINVAL;
    }
    if (def->n_args > MCP_MAX_PROMPT_ARGS || (def->n_args > 0 && def->args == NULL)) {
        mcp_log(srv->lg, MCP_LOG_ERROR, "prompt %s: at most %d arguments", def->name,
                MCP_MAX_PROMPT_ARGS);
        return MCP_EINVAL;
    }
    if (mcp__table_find(&srv->prompts, def->name) != NULL) {
        mcp_log(srv->lg, MCP_LOG_ERROR, "prompt %s is registered twice", def->name);
        return MCP_EINVAL;
    }
    mcp__entry_t *e = mcp__entry_new(def->name, def->name, def->title, def->description);
    if (e == NULL) return MCP_ENOMEM;
    e->get = def->get;
    e->get_round = def->get_round;
    e->complete = def->complete;
    e->data = def->data;
    int rc = MCP_ENOMEM;
    cJSON *args = arguments_listing(def, srv->lg);
    if (args == NULL) {
        rc = def->n_args > 0 ? MCP_EINVAL : MCP_ENOMEM;
        goto fail;
    }
    if (!cJSON_AddItemToObject(e->listing, "arguments", args)) {
        cJSON_Delete(args);
        goto fail;
    }
    if ((rc = mcp__table_insert(&srv->prompts, e)) < 0) goto fail;
    mcp__features_list_changed(srv, true);
    return MCP_OK;
fail:
    mcp__entry_free(e);
    return rc;
}

int mcp_server_remove_prompt(mcp_server_t *srv, const char *name)
{
    if (name == NULL || mcp__table_remove(&srv->prompts, name) < 0) return MCP_EINVAL;
    mcp__features_list_changed(srv, true);
    return MCP_OK;
}

/* Checks the client's arguments against the prompt's declared ones; writes why into msg. */
static bool args_ok(const mcp__entry_t *e, const cJSON *args, char *msg, size_t msg_size)
{
    const cJSON *decl = cJSON_GetObjectItemCaseSensitive(e->listing, "arguments");
    const cJSON *a;
    cJSON_ArrayForEach(a, args)
    {
        if (!cJSON_IsString(a)) {
            snprintf(msg, msg_size, "argument %.100s must be a string", a->string);
            return false;
        }
        bool known = false;
        const cJSON *d;
        cJSON_ArrayForEach(d, decl)
        {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(d, "name");
            known = known || strcmp(n->valuestring, a->string) == 0;
        }
        if (!known) {
            snprintf(msg, msg_size, "unknown argument %.100s (prompts/list shows the arguments)",
                     a->string);
            return false;
        }
    }
    const cJSON *d;
    cJSON_ArrayForEach(d, decl)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(d, "name");
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "required")) &&
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(args, n->valuestring))) {
            snprintf(msg, msg_size, "missing required argument %.100s", n->valuestring);
            return false;
        }
    }
    return true;
}

static int check_messages(const cJSON *messages, char *msg, size_t msg_size)
{
    if (!cJSON_IsArray(messages)) {
        snprintf(msg, msg_size, "messages is not an array");
        return MCP_EINVAL;
    }
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages)
    {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        char why[200];
        if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") != 0 &&
                                      strcmp(role->valuestring, "assistant") != 0)) {
            snprintf(msg, msg_size, "messages[%d].role must be \"user\" or \"assistant\"", i);
            return MCP_EINVAL;
        }
        if (mcp_content_validate(cJSON_GetObjectItemCaseSensitive(m, "content"), why, sizeof why) <
            0) {
            snprintf(msg, msg_size, "messages[%d].content: %s", i, why);
            return MCP_EINVAL;
        }
        i++;
    }
    return MCP_OK;
}

#define ROUND_ANSWERED 1 /* get_round answered the request itself (asked, or refused) */

/* A prompt registered with get_round (2026-07-28 MRTR): its round's input and state in, an
 * InputRequiredResult out when it asks. Returns ROUND_ANSWERED, or get's return code. */
static int get_round(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const mcp__entry_t *e,
                     const cJSON *params, const cJSON *args, cJSON **messages, char *msg,
                     size_t msg_size)
{
    mcp_prompt_round_t round = {.modern = mcp__session_modern(s),
                                .client_caps =
                                    mcp__session_modern(s) ? s->cur->caps : s->client_caps};
    /* Bound to "prompt:NAME", which no tool name can be: a tool's state is no prompt's. */
    char bind[160], why[400];
    snprintf(bind, sizeof bind, "prompt:%s", e->key);
    char *state = NULL;
    if (round.modern &&
        !mcp__mrtr_parse(s->srv, params, bind, &round.input_responses, &state, why, sizeof why)) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS, "prompts/get %.128s: %s", e->key,
                          why);
        return ROUND_ANSWERED;
    }
    round.state = state;
    int rc = e->get_round(e->key, args, &round, e->data, messages, msg, msg_size);
    free(state);
    if (rc != MCP_OK || round.input_requests == NULL) {
        cJSON_Delete(round.input_requests);
        free(round.next_state);
        return rc;
    }
    cJSON_Delete(*messages);
    *messages = NULL;
    const char *err = round.modern ? NULL : "only a 2026-07-28 client can be asked for input";
    const char *missing = NULL;
    cJSON *res = NULL;
    if (err == NULL)
        res = mcp__mrtr_result(s->srv, round.client_caps, bind, round.input_requests,
                               round.next_state, &err, &missing);
    else
        cJSON_Delete(round.input_requests);
    free(round.next_state);
    if (res != NULL) {
        mcp__session_answer(s, b, mcp_jsonrpc_result(id, res));
    } else if (missing != NULL) {
        mcp__session_answer(s, b, mcp__missing_capability(id, missing, e->key));
    } else {
        mcp_log(s->srv->lg, MCP_LOG_ERROR, "prompt %s: %s", e->key, err);
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "prompts/get %.128s: %s", e->key,
                          err);
    }
    return ROUND_ANSWERED;
}

static void handle_get(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const cJSON *params)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
    if (!cJSON_IsString(name)) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "prompts/get needs params.name (a string)");
        return;
    }
    const mcp__entry_t *e = mcp__table_find(&s->srv->prompts, name->valuestring);
    if (e == NULL) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "Unknown prompt: %.160s (prompts/list shows the prompts)",
                          name->valuestring);
        return;
    }
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
    cJSON *empty = NULL;
    if (args == NULL || cJSON_IsNull(args)) {
        args = empty = cJSON_CreateObject();
        if (empty == NULL) {
            mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
            return;
        }
    }
    char msg[GET_MSG_BYTES] = "";
    if (!cJSON_IsObject(args)) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "prompts/get %.128s: arguments must be an object of strings", e->key);
        return;
    }
    if (!args_ok(e, args, msg, sizeof msg)) {
        cJSON_Delete(empty);
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS, "prompts/get %.128s: %s", e->key,
                          msg);
        return;
    }
    cJSON *messages = NULL;
    int rc;
    if (e->get_round != NULL) {
        rc = get_round(s, b, id, e, params, args, &messages, msg, sizeof msg);
        if (rc == ROUND_ANSWERED) {
            cJSON_Delete(empty);
            return;
        }
    } else {
        rc = e->get(e->key, args, e->data, &messages, msg, sizeof msg);
    }
    cJSON_Delete(empty);
    if (rc == MCP_EINVAL) {
        cJSON_Delete(messages);
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS, "prompts/get %.128s: %s", e->key,
                          msg[0] ? msg : "the arguments were refused");
        return;
    }
    char why[256];
    if (rc == MCP_OK && check_messages(messages, why, sizeof why) < 0) {
        mcp_log(s->srv->lg, MCP_LOG_ERROR, "prompts/get %s: the handler returned bad %s", e->key,
                why);
        rc = MCP_EPROTO;
        snprintf(msg, sizeof msg, "the server built an invalid prompt (%s)", why);
    }
    if (rc < 0) {
        cJSON_Delete(messages);
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "prompts/get %.128s failed: %s",
                          e->key, msg[0] ? msg : mcp_strerror(rc));
        return;
    }
    cJSON *res = cJSON_CreateObject();
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(e->listing, "description");
    bool ok = res != NULL;
    if (ok && cJSON_IsString(desc))
        ok = cJSON_AddStringToObject(res, "description", desc->valuestring) != NULL;
    if (ok) ok = cJSON_AddItemToObject(res, "messages", messages);
    if (!ok) {
        cJSON_Delete(messages);
        cJSON_Delete(res);
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    mcp__session_answer(s, b, mcp_jsonrpc_result(id, res));
}

void mcp__prompts_handle(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                         const cJSON *params)
{
    if (strcmp(method, "prompts/list") == 0) {
        const cJSON *cur = cJSON_GetObjectItemCaseSensitive(params, "cursor");
        if (cur != NULL && !cJSON_IsString(cur) && !cJSON_IsNull(cur)) {
            mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                              "prompts/list: cursor must be a string");
            return;
        }
        bool bad = false;
        cJSON *res =
            mcp__table_page(&s->srv->prompts, "prompts", mcp__session_proto(s),
                            cJSON_IsString(cur) ? cur->valuestring : NULL, s->srv->page_size, &bad);
        if (bad)
            mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                              "prompts/list: invalid cursor (pass back a nextCursor exactly as "
                              "received)");
        else if (res == NULL)
            mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        else
            mcp__session_answer(s, b, mcp_jsonrpc_result(id, res));
    } else if (strcmp(method, "prompts/get") == 0) {
        handle_get(s, b, id, params);
    } else {
        mcp__answer_error(s, b, id, MCP_JSONRPC_METHOD_NOT_FOUND, "Method not found: %.160s",
                          method);
    }
}
