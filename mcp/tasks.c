/* tasks.c - the tasks extension of 2026-07-28 (io.modelcontextprotocol/tasks, SEP-2663): a
 * tools/call answered with a CreateTaskResult goes on without its request, and the server keeps
 * what becomes of it in a task table that tasks/get, tasks/update and tasks/cancel reach.
 *
 * Why the table is the server's and not a session's: a stateless request over HTTP is a session
 * of its own that ends with its answer, and the polls come as other requests (to any session).
 * A task is bound to the identity of the request that made it, as cursors are (identity.c).
 *
 * Input inside a task is MRTR's (mrtr.c): the handler finishes a round with an
 * InputRequiredResult; the task keeps its inputRequests and sealed requestState, collects the
 * answers of tasks/update (one at a time if the client likes), and when none is missing runs
 * the handler again as the next round, with all the answers and that state. */
#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mbedtls/md.h>

typedef enum task_status {
    TASK_WORKING,
    TASK_INPUT_REQUIRED,
    TASK_COMPLETED,
    TASK_FAILED,
    TASK_CANCELLED,
} task_status_t;

static const char *const status_names[] = {"working", "input_required", "completed", "failed",
                                           "cancelled"};

#define TASK_ID_CHARS 32 /* 128 bits in hex */

typedef struct mcp__task {
    char id[TASK_ID_CHARS + 1];
    mcp_identity_t owner;
    task_status_t status;
    char *status_message;     /* statusMessage, or NULL */
    uint64_t created_wall_ms; /* createdAt (wall clock) */
    uint64_t updated_wall_ms; /* lastUpdatedAt */
    uint64_t updated_ms;      /* the monotonic clock at the last change: expiry */
    mcp_call_t *call;         /* the round running now, or NULL */
    char *tool;
    cJSON *params; /* the creating request's params: what each further round starts from */
    cJSON *caps;   /* its clientCapabilities */
    char protocol[16];
    cJSON *result;   /* completed: the tool's result */
    cJSON *error;    /* failed: the JSON-RPC error object */
    cJSON *pending;  /* input_required: the inputRequests not answered yet */
    cJSON *answers;  /* input_required: the answers so far */
    char *req_state; /* input_required: the round's sealed requestState, or NULL */
    struct mcp__task *prev, *next;
} mcp__task_t;

typedef struct mcp__tasks {
    mcp_server_t *srv;
    unsigned char key[32]; /* makes the ids */
    uint64_t made;         /* tasks made so far: what the id hashes */
    mcp__task_t *head;     /* newest first */
    size_t n;
} mcp__tasks_t;

/* --- helpers ------------------------------------------------------------------------------ */

/* ISO 8601 in UTC with milliseconds: 2026-07-28T12:34:56.789Z. */
static void iso_time(uint64_t ms, char out[32])
{
    time_t secs = (time_t)(ms / 1000u);
    struct tm tm;
    if (gmtime_r(&secs, &tm) == NULL || strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(out, 32, "1970-01-01T00:00:00.000Z");
        return;
    }
    size_t n = strlen(out);
    snprintf(out + n, 32 - n, ".%03uZ", (unsigned)(ms % 1000u));
}

static bool terminal(task_status_t st)
{
    return st == TASK_COMPLETED || st == TASK_FAILED || st == TASK_CANCELLED;
}

bool mcp__caps_have_extension(const cJSON *caps, const char *ext)
{
    const cJSON *exts = cJSON_GetObjectItemCaseSensitive(caps, "extensions");
    return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(exts, ext));
}

cJSON *mcp__missing_extension(const cJSON *id, const char *ext, const char *what)
{
    /* The capability error, with the extension named inside "extensions". */
    cJSON *msg = mcp__missing_capability(id, "extensions", what);
    cJSON *err = cJSON_GetObjectItemCaseSensitive(msg, "error");
    cJSON *req = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(err, "data"),
                                                  "requiredCapabilities");
    char m[300];
    snprintf(m, sizeof m,
             "Missing required client capability: the extension %.80s (%.80s needs it; list it "
             "under extensions in the request's clientCapabilities)",
             ext, what);
    cJSON *text = cJSON_CreateString(m);
    if (cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(req, "extensions"), ext) == NULL ||
        text == NULL || !cJSON_ReplaceItemInObjectCaseSensitive(err, "message", text)) {
        cJSON_Delete(text);
        cJSON_Delete(msg);
        return NULL;
    }
    return msg;
}

/* The id of the n-th task: HMAC-SHA256(key, n) cut to 128 bits, in hex. Unguessable without
 * the key, which is random per server, and never the same twice. */
static int make_id(const mcp__tasks_t *tt, uint64_t n, char out[TASK_ID_CHARS + 1])
{
    unsigned char msg[8], mac[32];
    for (int i = 0; i < 8; i++)
        msg[i] = (unsigned char)(n >> (8 * i));
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
    if (md == NULL || mbedtls_md_hmac(md, tt->key, sizeof tt->key, msg, sizeof msg, mac) != 0)
        return MCP_EIO;
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < TASK_ID_CHARS / 2; i++) {
        out[2 * i] = hex[mac[i] >> 4];
        out[2 * i + 1] = hex[mac[i] & 15];
    }
    out[TASK_ID_CHARS] = '\0';
    return MCP_OK;
}

static void unlink_task(mcp__tasks_t *tt, mcp__task_t *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        tt->head = t->next;
    if (t->next) t->next->prev = t->prev;
    t->prev = t->next = NULL;
    tt->n--;
}

static void clear_input(mcp__task_t *t)
{
    cJSON_Delete(t->pending);
    cJSON_Delete(t->answers);
    free(t->req_state);
    t->pending = t->answers = NULL;
    t->req_state = NULL;
}

static void task_free(mcp__task_t *t)
{
    if (t->call != NULL) t->call->task = NULL; /* its finish then only frees it */
    clear_input(t);
    free(t->status_message);
    free(t->tool);
    cJSON_Delete(t->params);
    cJSON_Delete(t->caps);
    cJSON_Delete(t->result);
    cJSON_Delete(t->error);
    free(t);
}

static cJSON *detailed(const mcp__task_t *t);

/* t changed (to status st): stamped, and a change of status told to the subscriptions/listen
 * streams of its owner that asked for it (notifications/tasks: its DetailedTask, as tasks/get
 * would answer now). Callers set what the status shows (result, error, inputRequests) first. */
static void touch(mcp_server_t *srv, mcp__task_t *t, task_status_t st)
{
    bool changed = t->status != st;
    t->status = st;
    t->updated_wall_ms = mcp__wall_ms();
    t->updated_ms = mcp__now_ms();
    if (!changed || srv == NULL || !mcp__listen_wants_task(srv, t->id, &t->owner)) return;
    cJSON *task = detailed(t);
    if (task == NULL) {
        mcp_log(srv->lg, MCP_LOG_WARNING, "task %.12s...: out of memory for its notification",
                t->id);
        return;
    }
    mcp__listen_task_changed(srv, t->id, &t->owner, task);
    cJSON_Delete(task);
}

/* Drops t from the table. One that waited for input can never go on: its tool is told, as for
 * a cancel, so that what it kept for the next round goes too. */
static void forget(mcp__tasks_t *tt, mcp__task_t *t)
{
    unlink_task(tt, t);
    mcp_server_t *srv = tt->srv;
    if (t->status == TASK_INPUT_REQUIRED && srv->task_cancel_fn != NULL)
        srv->task_cancel_fn(t->id, &t->owner, srv->task_cancel_data);
    task_free(t);
}

/* Forgets the tasks that ended (or waited for input) MCP_TASK_TTL_MS ago. Done at every
 * access rather than by a timer, so the server holds no handle a loop must close. */
static void sweep(mcp__tasks_t *tt)
{
    uint64_t now = mcp__now_ms();
    mcp__task_t *t = tt->head;
    while (t != NULL) {
        mcp__task_t *next = t->next;
        if (t->call == NULL && now - t->updated_ms > MCP_TASK_TTL_MS) forget(tt, t);
        t = next;
    }
}

/* The caller's task of that id, or NULL (unknown, expired, or another identity's). */
static mcp__task_t *find(mcp__tasks_t *tt, const char *id, const mcp_identity_t *who)
{
    if (tt == NULL) return NULL;
    sweep(tt);
    /* sweep unlinked every task it freed (the analyzer loses the unlink). */
    // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
    for (mcp__task_t *t = tt->head; t != NULL; t = t->next)
        // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
        if (strcmp(t->id, id) == 0 && mcp_identity_equal(&t->owner, who)) return t;
    return NULL;
}

bool mcp__task_owned(mcp_server_t *srv, const char *task_id, const mcp_identity_t *who)
{
    return find(srv->tasks, task_id, who) != NULL;
}

/* The Task fields every answer about t carries, added to obj. */
static bool add_task_fields(cJSON *obj, const mcp__task_t *t)
{
    char created[32], updated[32];
    iso_time(t->created_wall_ms, created);
    iso_time(t->updated_wall_ms, updated);
    return cJSON_AddStringToObject(obj, "taskId", t->id) != NULL &&
           cJSON_AddStringToObject(obj, "status", status_names[t->status]) != NULL &&
           (t->status_message == NULL ||
            cJSON_AddStringToObject(obj, "statusMessage", t->status_message) != NULL) &&
           cJSON_AddStringToObject(obj, "createdAt", created) != NULL &&
           cJSON_AddStringToObject(obj, "lastUpdatedAt", updated) != NULL &&
           cJSON_AddNumberToObject(obj, "ttlMs", MCP_TASK_TTL_MS) != NULL &&
           cJSON_AddNumberToObject(obj, "pollIntervalMs", MCP_TASK_POLL_MS) != NULL;
}

/* A JSON-RPC error object {code, message}, or NULL on ENOMEM. */
static cJSON *error_object(int code, const char *message)
{
    cJSON *e = cJSON_CreateObject();
    if (e == NULL || cJSON_AddNumberToObject(e, "code", code) == NULL ||
        cJSON_AddStringToObject(e, "message", message) == NULL) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

/* --- a call becomes a task ---------------------------------------------------------------- */

bool mcp_call_client_has_extension(const mcp_call_t *call, const char *id)
{
    return call->modern && mcp__caps_have_extension(call->caps, id);
}

bool mcp_call_is_task(const mcp_call_t *call)
{
    return call->task != NULL;
}

bool mcp_call_can_become_task(const mcp_call_t *call)
{
    if (call->task != NULL || call->s == NULL || call->cancelled ||
        !mcp_call_client_has_extension(call, MCP_EXT_TASKS))
        return false;
    /* Looked up again: the entry the call started from may have been removed since. */
    const mcp__entry_t *e = mcp__server_find_tool(call->srv, call->tool);
    return e != NULL && e->task_support != MCP_TASK_FORBIDDEN;
}

static mcp__tasks_t *table(mcp_server_t *srv)
{
    if (srv->tasks != NULL) return srv->tasks;
    mcp__tasks_t *tt = calloc(1, sizeof *tt);
    if (tt == NULL) return NULL;
    if (mcp__mrtr_key_init(tt->key) < 0) {
        mcp_log(srv->lg, MCP_LOG_ERROR, "could not make the task id key (random generator)");
        free(tt);
        return NULL;
    }
    tt->srv = srv;
    srv->tasks = tt;
    return tt;
}

/* Room for one more task: the oldest ended one goes at the cap; false when all are alive. */
static bool make_room(mcp__tasks_t *tt)
{
    sweep(tt);
    if (tt->n < MCP_TASK_MAX_TASKS) return true;
    mcp__task_t *oldest = NULL;
    for (mcp__task_t *t = tt->head; t != NULL; t = t->next)
        if (t->call == NULL && (terminal(t->status) || t->status == TASK_INPUT_REQUIRED))
            oldest = t;
    if (oldest == NULL) return false;
    forget(tt, oldest);
    return true;
}

int mcp_call_become_task(mcp_call_t *call)
{
    if (call->task != NULL) return MCP_OK;
    if (!mcp_call_can_become_task(call)) return MCP_ENOTSUP;
    mcp__tasks_t *tt = table(call->srv);
    if (tt == NULL) return MCP_ENOMEM;
    if (!make_room(tt)) return MCP_EBUSY;
    mcp__task_t *t = calloc(1, sizeof *t);
    if (t == NULL) return MCP_ENOMEM;
    if (make_id(tt, tt->made, t->id) < 0) {
        free(t);
        return MCP_EIO;
    }
    t->owner = call->who;
    t->tool = mcp__strdup(call->tool);
    t->params = cJSON_Duplicate(call->params, true);
    t->caps = cJSON_Duplicate(call->caps, true);
    snprintf(t->protocol, sizeof t->protocol, "%s", call->protocol);
    t->created_wall_ms = mcp__wall_ms();
    touch(NULL, t, TASK_WORKING); /* new: nobody can have asked for it yet */
    cJSON *res = cJSON_CreateObject();
    if (t->tool == NULL || t->params == NULL || t->caps == NULL || res == NULL ||
        cJSON_AddStringToObject(res, "resultType", "task") == NULL || !add_task_fields(res, t)) {
        cJSON_Delete(res);
        task_free(t);
        return MCP_ENOMEM;
    }
    /* A later round starts from these params with its own answers and state. */
    cJSON_DeleteItemFromObjectCaseSensitive(t->params, "inputResponses");
    cJSON_DeleteItemFromObjectCaseSensitive(t->params, "requestState");
    cJSON *msg = mcp_jsonrpc_result(call->id, res);
    if (msg == NULL) {
        task_free(t);
        return MCP_ENOMEM;
    }
    tt->made++;
    /* In the table before the answer leaves: a tasks/get right after it finds the task. */
    t->next = tt->head;
    /* the head is a live task: the analyzer follows a path where sweep's unlink is lost */
    // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
    if (tt->head) tt->head->prev = t;
    tt->head = t;
    tt->n++;
    t->call = call;
    call->task = t;
    mcp__call_answer_detach(call, msg);
    return MCP_OK;
}

/* --- a round ends ------------------------------------------------------------------------- */

void mcp__task_settle(mcp_call_t *c, cJSON *msg)
{
    mcp__task_t *t = c->task;
    c->task = NULL;
    t->call = NULL;
    if (terminal(t->status) || msg == NULL) { /* cancelled meanwhile: the outcome is dropped */
        cJSON_Delete(msg);
        return;
    }
    cJSON *res = cJSON_DetachItemFromObjectCaseSensitive(msg, "result");
    cJSON *err = cJSON_DetachItemFromObjectCaseSensitive(msg, "error");
    cJSON_Delete(msg);
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(res, "resultType");
    if (cJSON_IsString(rt) && strcmp(rt->valuestring, "input_required") == 0) {
        /* The handler asks: the task waits for tasks/update to bring every answer. */
        clear_input(t);
        t->pending = cJSON_DetachItemFromObjectCaseSensitive(res, "inputRequests");
        cJSON *rs = cJSON_GetObjectItemCaseSensitive(res, "requestState");
        t->req_state = cJSON_IsString(rs) ? mcp__strdup(rs->valuestring) : NULL;
        t->answers = cJSON_CreateObject();
        cJSON_Delete(res);
        if (t->pending == NULL || t->answers == NULL || (cJSON_IsString(rs) && !t->req_state)) {
            clear_input(t);
            t->error = error_object(MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
            touch(c->srv, t, TASK_FAILED);
            return;
        }
        touch(c->srv, t, TASK_INPUT_REQUIRED);
        return;
    }
    clear_input(t);
    if (res != NULL) {
        /* The task's own answer says "complete"; the inlined result is the tool's. */
        cJSON_DeleteItemFromObjectCaseSensitive(res, "resultType");
        t->result = res;
        cJSON_Delete(err);
        touch(c->srv, t, TASK_COMPLETED);
        return;
    }
    /* A protocol error of the tool (not a tool error, which is a result with isError). */
    t->error = err;
    touch(c->srv, t, TASK_FAILED);
}

/* Every answer of tasks/update is in: the handler's next round. */
static void resume(mcp_server_t *srv, mcp__task_t *t)
{
    cJSON *params = cJSON_Duplicate(t->params, true);
    bool ok = params != NULL && cJSON_AddItemToObject(params, "inputResponses", t->answers);
    if (ok) t->answers = NULL;
    if (ok && t->req_state != NULL)
        ok = cJSON_AddStringToObject(params, "requestState", t->req_state) != NULL;
    clear_input(t);
    touch(srv, t, TASK_WORKING);
    mcp_call_t *c =
        ok ? mcp__call_round_new(srv, t->tool, params, t->caps, t->protocol, &t->owner) : NULL;
    if (!ok) cJSON_Delete(params);
    if (c == NULL) {
        t->error = error_object(MCP_JSONRPC_INTERNAL_ERROR, "out of memory resuming the task");
        touch(srv, t, TASK_FAILED);
        return;
    }
    /* The round's call is the task's until it finishes (mcp__task_settle clears it). */
    t->call = c;
    c->task = t;
    mcp__call_round_run(c);
}

/* --- tasks/get, tasks/update, tasks/cancel ------------------------------------------------- */

static void answer(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, cJSON *res)
{
    if (res == NULL) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    mcp__session_answer(s, b, mcp_jsonrpc_result(id, res));
}

static cJSON *detailed(const mcp__task_t *t)
{
    cJSON *res = cJSON_CreateObject();
    if (res == NULL || !add_task_fields(res, t)) {
        cJSON_Delete(res);
        return NULL;
    }
    const cJSON *extra = t->status == TASK_COMPLETED        ? t->result
                         : t->status == TASK_FAILED         ? t->error
                         : t->status == TASK_INPUT_REQUIRED ? t->pending
                                                            : NULL;
    const char *field = t->status == TASK_COMPLETED ? "result"
                        : t->status == TASK_FAILED  ? "error"
                                                    : "inputRequests";
    if (extra != NULL) {
        cJSON *copy = cJSON_Duplicate(extra, true);
        if (copy == NULL || !cJSON_AddItemToObject(res, field, copy)) {
            cJSON_Delete(copy);
            cJSON_Delete(res);
            return NULL;
        }
    }
    return res;
}

static void handle_update(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, mcp__task_t *t,
                          const cJSON *params)
{
    const cJSON *ir = cJSON_GetObjectItemCaseSensitive(params, "inputResponses");
    if (!cJSON_IsObject(ir)) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "Invalid params: tasks/update needs inputResponses (an object)");
        return;
    }
    const cJSON *r;
    cJSON_ArrayForEach(r, ir)
    {
        if (!cJSON_IsObject(r)) {
            mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                              "Invalid params: inputResponses.%.80s must be an object (the "
                              "client's result for that input request)",
                              r->string);
            return;
        }
    }
    if (t->status == TASK_INPUT_REQUIRED) {
        /* Keys the task did not ask (or asked and got already) are ignored. */
        cJSON_ArrayForEach(r, ir)
        {
            if (!cJSON_HasObjectItem(t->pending, r->string)) continue;
            cJSON *copy = cJSON_Duplicate(r, true);
            if (copy == NULL || !cJSON_AddItemToObject(t->answers, r->string, copy)) {
                cJSON_Delete(copy);
                mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
                return;
            }
            cJSON_DeleteItemFromObjectCaseSensitive(t->pending, r->string);
        }
        if (t->pending->child == NULL)
            resume(s->srv, t);
        else
            touch(s->srv, t, TASK_INPUT_REQUIRED);
    }
    answer(s, b, id, cJSON_CreateObject());
}

static void cancel_task(mcp_server_t *srv, mcp__task_t *t, const char *why)
{
    if (terminal(t->status)) return; /* cancelling an ended task changes nothing */
    clear_input(t);
    free(t->status_message);
    t->status_message = mcp__strdup(why);
    touch(srv, t, TASK_CANCELLED);
    mcp_call_t *c = t->call;
    /* The handler's cancel callback stops the work; its finish is dropped (settle). Between
     * rounds the tool is told instead: it may hold work for the next round. */
    if (c != NULL)
        mcp__call_cancel(c, true);
    else if (srv->task_cancel_fn != NULL)
        srv->task_cancel_fn(t->id, &t->owner, srv->task_cancel_data);
}

const char *mcp_call_task_id(const mcp_call_t *call)
{
    return call->task != NULL ? call->task->id : NULL;
}

void mcp_server_on_task_cancel(mcp_server_t *srv, mcp_task_cancel_fn fn, void *data)
{
    srv->task_cancel_fn = fn;
    srv->task_cancel_data = data;
}

bool mcp__tasks_handle(mcp_session_t *s, mcp__batch_t *b, const cJSON *id, const char *method,
                       const cJSON *params)
{
    if (strncmp(method, "tasks/", 6) != 0) return false;
    bool get = strcmp(method, "tasks/get") == 0, update = strcmp(method, "tasks/update") == 0,
         cancel = strcmp(method, "tasks/cancel") == 0;
    if (!get && !update && !cancel) {
        /* tasks/result and tasks/list were the 2025-11-25 experiment's: removed by SEP-2663 (the
         * result is inlined in tasks/get, and there is no listing). */
        mcp__answer_error(s, b, id, MCP_JSONRPC_METHOD_NOT_FOUND,
                          "Method not found: %.80s (the tasks extension has tasks/get, "
                          "tasks/update and tasks/cancel)",
                          method);
        return true;
    }
    if (!mcp__caps_have_extension(s->cur->caps, MCP_EXT_TASKS)) {
        cJSON *msg = mcp__missing_extension(id, MCP_EXT_TASKS, method);
        if (msg == NULL)
            mcp__answer_error(s, b, id, MCP_JSONRPC_INTERNAL_ERROR, "out of memory");
        else
            mcp__session_answer(s, b, msg);
        return true;
    }
    const cJSON *tid = cJSON_GetObjectItemCaseSensitive(params, "taskId");
    if (!cJSON_IsString(tid)) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "Invalid params: %s needs taskId (a string)", method);
        return true;
    }
    mcp_identity_t who;
    mcp__request_identity(s, &who);
    mcp__task_t *t = find(s->srv->tasks, tid->valuestring, &who);
    if (t == NULL) {
        mcp__answer_error(s, b, id, MCP_JSONRPC_INVALID_PARAMS,
                          "Invalid params: unknown taskId %.80s (it never existed, expired "
                          "%u s after its last change, belongs to another client, or lives on "
                          "another server instance: tasks stay in the process that made them)",
                          tid->valuestring, (unsigned)(MCP_TASK_TTL_MS / 1000));
        return true;
    }
    if (get)
        answer(s, b, id, detailed(t));
    else if (update)
        handle_update(s, b, id, t, params);
    else {
        cancel_task(s->srv, t, "Cancelled by the client (tasks/cancel).");
        answer(s, b, id, cJSON_CreateObject());
    }
    return true;
}

void mcp_server_cancel_tasks(mcp_server_t *srv)
{
    mcp__tasks_t *tt = srv->tasks;
    if (tt == NULL) return;
    /* A cancel callback may finish its call at once, which touches only that task. */
    for (mcp__task_t *t = tt->head; t != NULL; t = t->next)
        cancel_task(srv, t, "Cancelled: the server is shutting down.");
}

void mcp__tasks_free(mcp_server_t *srv)
{
    mcp__tasks_t *tt = srv->tasks;
    if (tt == NULL) return;
    while (tt->head != NULL) {
        /* unlink_task moved the head on: the analyzer loses that (a head-popping loop). */
        mcp__task_t *t = tt->head;
        // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
        unlink_task(tt, t);
        task_free(t);
    }
    free(tt);
    srv->tasks = NULL;
}
