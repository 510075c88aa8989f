/* journal.c - the replay journal: kept results of side-effecting calls, by key and occurrence. */
#include "repair.h"

#include <stdlib.h>
#include <string.h>

typedef struct kept {
    char *key;
    unsigned occ;
    cJSON *result;
} kept_t;

typedef struct counter {
    char *key;
    unsigned n;
} counter_t;

struct ptc_journal {
    kept_t *kept;
    size_t n_kept, cap_kept;
    size_t bytes;
    counter_t *counters; /* the current attempt's occurrence counts */
    size_t n_counters, cap_counters;
    cJSON *replayed; /* the current attempt's */
    cJSON *used;
    bool lost;
};

/* Sorts every object's members by key, recursively, so equal arguments print equally. cJSON
 * keeps a list whose head's prev points at the tail; the relinking keeps that. Depth is
 * bounded by cJSON's parse nesting limit. */
static int canon_sort(cJSON *j)
{
    if (!cJSON_IsObject(j) && !cJSON_IsArray(j)) return 0;
    size_t n = 0;
    for (cJSON *c = j->child; c != NULL; c = c->next) {
        if (canon_sort(c) < 0) return -1;
        n++;
    }
    if (!cJSON_IsObject(j) || n < 2) return 0;
    cJSON **v = malloc(n * sizeof *v);
    if (v == NULL) return -1;
    size_t i = 0;
    for (cJSON *c = j->child; c != NULL; c = c->next)
        v[i++] = c;
    /* Insertion sort keeps duplicate keys in their order and is stable; arguments are small. */
    for (i = 1; i < n; i++) {
        cJSON *x = v[i];
        size_t k = i;
        while (k > 0 && strcmp(v[k - 1]->string, x->string) > 0) {
            v[k] = v[k - 1];
            k--;
        }
        v[k] = x;
    }
    for (i = 0; i < n; i++) {
        v[i]->next = i + 1 < n ? v[i + 1] : NULL;
        v[i]->prev = i > 0 ? v[i - 1] : v[n - 1];
    }
    j->child = v[0];
    free(v);
    return 0;
}

char *ptc_json_canonical(const cJSON *v)
{
    if (v == NULL) return NULL;
    cJSON *c = cJSON_Duplicate(v, true);
    if (c == NULL || canon_sort(c) < 0) {
        cJSON_Delete(c);
        return NULL;
    }
    char *s = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return s; /* cJSON's default allocator is malloc, so free() releases it */
}

char *ptc_journal_key(const char *tool_id, const cJSON *args)
{
    cJSON *empty = NULL;
    if (args == NULL) {
        empty = cJSON_CreateObject();
        if (empty == NULL) return NULL;
        args = empty;
    }
    char *canon = ptc_json_canonical(args);
    cJSON_Delete(empty);
    if (canon == NULL) return NULL;
    size_t a = strlen(tool_id), b = strlen(canon);
    char *key = malloc(a + 1 + b + 1);
    if (key != NULL) {
        memcpy(key, tool_id, a);
        key[a] = '\n';
        memcpy(key + a + 1, canon, b + 1);
    }
    free(canon);
    return key;
}

int ptc_journal_new(ptc_journal_t **out)
{
    *out = NULL;
    ptc_journal_t *j = calloc(1, sizeof *j);
    if (j == NULL) return PTC_REPAIR_ENOMEM;
    j->replayed = cJSON_CreateArray();
    j->used = cJSON_CreateArray();
    if (j->replayed == NULL || j->used == NULL) {
        ptc_journal_free(j);
        return PTC_REPAIR_ENOMEM;
    }
    *out = j;
    return 0;
}

static void counters_clear(ptc_journal_t *j)
{
    for (size_t i = 0; i < j->n_counters; i++)
        free(j->counters[i].key);
    j->n_counters = 0;
}

void ptc_journal_free(ptc_journal_t *j)
{
    if (j == NULL) return;
    for (size_t i = 0; i < j->n_kept; i++) {
        free(j->kept[i].key);
        cJSON_Delete(j->kept[i].result);
    }
    free(j->kept);
    counters_clear(j);
    free(j->counters);
    cJSON_Delete(j->replayed);
    cJSON_Delete(j->used);
    free(j);
}

static void empty_array(cJSON *a)
{
    while (a->child != NULL)
        cJSON_DeleteItemFromArray(a, 0);
}

void ptc_journal_begin_attempt(ptc_journal_t *j)
{
    counters_clear(j);
    empty_array(j->replayed);
    empty_array(j->used);
}

unsigned ptc_journal_occurrence(ptc_journal_t *j, const char *key)
{
    for (size_t i = 0; i < j->n_counters; i++)
        if (strcmp(j->counters[i].key, key) == 0) return ++j->counters[i].n;
    if (j->n_counters >= PTC_JOURNAL_KEYS_MAX) {
        j->lost = true;
        return 0;
    }
    if (ptc_array_reserve(&j->counters, &j->cap_counters, j->n_counters + 1, sizeof *j->counters,
                          PTC_JOURNAL_KEYS_MAX) < 0) {
        j->lost = true;
        return 0;
    }
    char *k = strdup(key);
    if (k == NULL) {
        j->lost = true;
        return 0;
    }
    j->counters[j->n_counters++] = (counter_t){k, 1};
    return 1;
}

const cJSON *ptc_journal_lookup(const ptc_journal_t *j, const char *key, unsigned occ)
{
    if (occ == 0) return NULL;
    for (size_t i = 0; i < j->n_kept; i++)
        if (j->kept[i].occ == occ && strcmp(j->kept[i].key, key) == 0) return j->kept[i].result;
    return NULL;
}

int ptc_journal_record(ptc_journal_t *j, const char *key, unsigned occ, const cJSON *result)
{
    if (occ == 0 || !cJSON_IsObject(result) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(result, "isError")))
        return 0;
    if (ptc_journal_lookup(j, key, occ) != NULL) return 0;
    char *text = cJSON_PrintUnformatted(result);
    size_t size = text ? strlen(text) + strlen(key) : 0;
    free(text);
    if (size == 0) {
        j->lost = true;
        return PTC_REPAIR_ENOMEM;
    }
    if (j->n_kept >= PTC_JOURNAL_ENTRIES_MAX || j->bytes + size > PTC_JOURNAL_BYTES_MAX) {
        j->lost = true;
        return PTC_REPAIR_EFULL;
    }
    if (ptc_array_reserve(&j->kept, &j->cap_kept, j->n_kept + 1, sizeof *j->kept,
                          PTC_JOURNAL_ENTRIES_MAX) < 0) {
        j->lost = true;
        return PTC_REPAIR_ENOMEM; /* n_kept < PTC_JOURNAL_ENTRIES_MAX: only ENOMEM is left */
    }
    kept_t k = {strdup(key), occ, cJSON_Duplicate(result, true)};
    if (k.key == NULL || k.result == NULL) {
        free(k.key);
        cJSON_Delete(k.result);
        j->lost = true;
        return PTC_REPAIR_ENOMEM;
    }
    j->kept[j->n_kept++] = k;
    j->bytes += size;
    return 0;
}

void ptc_journal_note_replay(ptc_journal_t *j, const char *tool_id, unsigned occ)
{
    if ((unsigned)cJSON_GetArraySize(j->replayed) >= PTC_JOURNAL_REPLAYED_MAX) return;
    cJSON *r = cJSON_CreateObject();
    if (r == NULL || !cJSON_AddStringToObject(r, "tool", tool_id) ||
        !cJSON_AddNumberToObject(r, "occurrence", occ) || !cJSON_AddItemToArray(j->replayed, r))
        cJSON_Delete(r);
}

cJSON *ptc_journal_take_replayed(ptc_journal_t *j)
{
    cJSON *fresh = cJSON_CreateArray();
    if (fresh == NULL) return NULL;
    cJSON *old = j->replayed;
    j->replayed = fresh;
    return old;
}

void ptc_journal_note_used(ptc_journal_t *j, const char *tool_id)
{
    const cJSON *u;
    cJSON_ArrayForEach(u, j->used)
    {
        if (strcmp(u->valuestring, tool_id) == 0) return;
    }
    if ((unsigned)cJSON_GetArraySize(j->used) >= PTC_JOURNAL_REPLAYED_MAX) return;
    cJSON *s = cJSON_CreateString(tool_id);
    if (s != NULL && !cJSON_AddItemToArray(j->used, s)) cJSON_Delete(s);
}

const cJSON *ptc_journal_used(const ptc_journal_t *j)
{
    return j->used;
}

bool ptc_journal_lost(const ptc_journal_t *j)
{
    return j->lost;
}

size_t ptc_journal_count(const ptc_journal_t *j)
{
    return j->n_kept;
}
