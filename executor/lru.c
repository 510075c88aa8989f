/* lru.c - the most-recently-used-first list that the page store and the file store keep their
 * entries in (the least recently used, at the tail, goes first). */
#include "internal.h"

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
