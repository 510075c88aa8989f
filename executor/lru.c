/* lru.c - the most-recently-used-first list that the page store and the file store keep their
 * entries in (the least recently used, at the tail, goes first), and whom each was kept for. */
#include "internal.h"

#include <string.h>

bool exec__lru_owned_by(const exec__lru_node_t *n, const unsigned char *owner)
{
    return memcmp(n->owner, owner, sizeof n->owner) == 0;
}

size_t exec__lru_drop_owner(exec__lru_t *l, const unsigned char *owner,
                            void (*drop)(void *store, exec__lru_node_t *n), void *store)
{
    size_t count = 0;
    exec__lru_node_t *next;
    for (exec__lru_node_t *n = l->head; n != NULL; n = next) {
        next = n->next;
        if (!exec__lru_owned_by(n, owner)) continue;
        drop(store, n);
        count++;
    }
    return count;
}

void exec__lru_unlink(exec__lru_t *l, exec__lru_node_t *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    n->prev = n->next = NULL;
}

void exec__lru_push_front(exec__lru_t *l, exec__lru_node_t *n)
{
    n->next = l->head;
    n->prev = NULL;
    if (l->head) l->head->prev = n;
    l->head = n;
    if (l->tail == NULL) l->tail = n;
}
