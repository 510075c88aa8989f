/* workspace_park.c - requests parked for their client's next round (see executor.h): entries
 * behind unguessable handles bound to an owner, with an optional tag, a bound on how many wait
 * and on how long each waits. One timer serves them all, due at the earliest entry's end, so a
 * parked entry costs no libuv handle of its own. The entries are an exec__lru list (newest at
 * the head), whose node also holds the owner.
 *
 * As in workspace.c, the list is walked from its head again after each entry ended, since an
 * end callback may park or remove others; clang-analyzer does not follow the unlinking and
 * reports those walks as uses after free: the NOLINTs below are those. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct exec_ws_park {
    exec__lru_node_t node; /* first: the list's links and the owner */
    exec__parking_t *pk;
    char handle[EXEC_WS_HANDLE_MAX];
    char tag[EXEC_WS_PARK_TAG_MAX]; /* "" for none */
    uint64_t due;                   /* uv_now */
    exec_ws_park_end_cb end;
    void *user;
};

struct exec__parking {
    uv_loop_t *loop;
    uv_timer_t *timer; /* due at the earliest entry's end; stopped when none waits */
    exec__lru_t list;
    size_t n, max;
};

exec__parking_t *exec__parking_new(uv_loop_t *loop, size_t max)
{
    exec__parking_t *pk = calloc(1, sizeof *pk);
    if (pk != NULL) {
        pk->loop = loop;
        pk->max = max != 0 ? max : EXEC_WS_MAX_PARKED;
        pk->timer = exec__timer_new(loop, pk);
    }
    if (pk != NULL && pk->timer == NULL) {
        free(pk);
        pk = NULL;
    }
    return pk;
}

/* The entries from the newest; next_of walks on. */
static exec_ws_park_t *first_of(const exec__parking_t *pk)
{
    /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the list walk (see the top) */
    return (exec_ws_park_t *)pk->list.head;
}

static exec_ws_park_t *next_of(const exec_ws_park_t *p)
{
    /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the list walk (see the top) */
    return (exec_ws_park_t *)p->node.next;
}

static void unlink_entry(exec_ws_park_t *p)
{
    exec__lru_unlink(&p->pk->list, &p->node);
    p->pk->n--;
}

/* Removes p and tells its end callback, after the free (the callee may park again). */
static void end_entry(exec_ws_park_t *p, exec_ws_end_t why)
{
    char handle[EXEC_WS_HANDLE_MAX];
    exec_ws_park_end_cb end = p->end;
    void *user = p->user;
    memcpy(handle, p->handle, sizeof handle);
    unlink_entry(p);
    free(p);
    end(user, why, handle);
}

static void on_due(uv_timer_t *t);

/* Due at the earliest entry's end; stopped when none waits. */
static void arm(exec__parking_t *pk)
{
    const exec_ws_park_t *first = NULL;
    for (const exec_ws_park_t *p = first_of(pk); p != NULL; p = next_of(p))
        if (first == NULL || p->due < first->due) first = p;
    if (first == NULL) {
        uv_timer_stop(pk->timer);
        return;
    }
    uint64_t now = uv_now(pk->loop);
    uv_timer_start(pk->timer, on_due, first->due > now ? first->due - now : 0, 0);
}

static void on_due(uv_timer_t *t)
{
    exec__parking_t *pk = t->data;
    uint64_t now = uv_now(pk->loop);
    for (;;) {
        /* From the head each time: an end callback may change the list. */
        exec_ws_park_t *p = first_of(pk);
        while (p != NULL && p->due > now)
            p = next_of(p);
        if (p == NULL) break;
        end_entry(p, EXEC_WS_EXPIRED);
    }
    arm(pk);
}

void exec__parking_stop(exec__parking_t *pk)
{
    if (pk == NULL) return;
    while (first_of(pk) != NULL)
        end_entry(first_of(pk), EXEC_WS_STOPPED);
    uv_timer_stop(pk->timer);
}

void exec__parking_free(exec__parking_t *pk)
{
    if (pk == NULL) return;
    exec__parking_stop(pk);
    exec__timer_close(pk->timer);
    free(pk);
}

int exec_ws_park_add(exec_workspace_t *ws, const unsigned char *owner, const char *prefix,
                     const char *tag, uint64_t keep_ms, exec_ws_park_end_cb end, void *user,
                     exec_ws_park_t **out)
{
    exec__parking_t *pk = exec__ws_parking(ws);
    exec_ws_park_t *p = NULL;
    int rc = EXEC_OK;
    if (tag == NULL) tag = "";
    *out = NULL;
    if (end == NULL || strlen(prefix) > EXEC_WS_PARK_PREFIX_MAX ||
        strlen(tag) >= EXEC_WS_PARK_TAG_MAX)
        rc = EXEC_EINVAL;
    else if (pk->n >= pk->max)
        rc = EXEC_EBUSY;
    else if ((p = calloc(1, sizeof *p)) == NULL ||
             !exec_random_handle(prefix, p->handle, sizeof p->handle))
        rc = EXEC_ENOMEM;
    if (rc < 0) {
        free(p);
        return rc;
    }
    p->pk = pk;
    memcpy(p->node.owner, owner, sizeof p->node.owner);
    memcpy(p->tag, tag, strlen(tag) + 1);
    p->due = uv_now(pk->loop) + keep_ms;
    p->end = end;
    p->user = user;
    exec__lru_push_front(&pk->list, &p->node);
    pk->n++;
    arm(pk);
    *out = p;
    return EXEC_OK;
}

exec_ws_park_t *exec_ws_park_find(const exec_workspace_t *ws, const char *handle,
                                  const unsigned char *owner)
{
    exec_ws_park_t *p = first_of(exec__ws_parking(ws));
    while (p != NULL && (!exec__lru_owned_by(&p->node, owner) || strcmp(p->handle, handle) != 0))
        p = next_of(p);
    return p;
}

exec_ws_park_t *exec_ws_park_find_tag(const exec_workspace_t *ws, const char *tag,
                                      const unsigned char *owner)
{
    exec_ws_park_t *p = tag[0] != '\0' ? first_of(exec__ws_parking(ws)) : NULL; /* "": none */
    while (p != NULL && (!exec__lru_owned_by(&p->node, owner) || strcmp(p->tag, tag) != 0))
        p = next_of(p);
    return p;
}

void *exec_ws_park_user(const exec_ws_park_t *p)
{
    return p->user;
}

const char *exec_ws_park_handle(const exec_ws_park_t *p)
{
    return p->handle;
}

void exec_ws_park_remove(exec_ws_park_t *p)
{
    if (p == NULL) return;
    exec__parking_t *pk = p->pk;
    unlink_entry(p);
    free(p);
    /* The timer may be due for p: it then finds nothing and re-arms; no need to move it. */
    if (pk->n == 0) uv_timer_stop(pk->timer);
}

size_t exec_ws_parked(const exec_workspace_t *ws)
{
    return exec__ws_parking(ws)->n;
}
