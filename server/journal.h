/*
 * journal.h - the replay journal of one execute_code request (docs/self-healing.md).
 *
 * Within one request, every call that sandboxed code makes to a tool not annotated
 * readOnlyHint: true is keyed by the tool id, the canonical JSON of its arguments (object keys
 * sorted, no spaces) and its occurrence number (the n-th identical call of the attempt). A
 * successful result (no transport error, no isError) is kept; in a later attempt of the same
 * request the n-th identical call gets the n-th kept result instead of running again, so a
 * repaired program never repeats a side effect that already happened. Errors and timeouts are
 * never kept: such a call runs again.
 *
 * Bounded: PTC_JOURNAL_ENTRIES_MAX keys and PTC_JOURNAL_BYTES_MAX bytes of results. A result
 * that does not fit marks the journal lost: a repair could then repeat a side effect, so the
 * repair loop must not run the code again. Loop-thread only; no I/O.
 */
#ifndef PTC_SERVER_JOURNAL_H
#define PTC_SERVER_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#define PTC_JOURNAL_ENTRIES_MAX  1024u       /* kept results per request */
#define PTC_JOURNAL_BYTES_MAX    (16u << 20) /* their serialised size */
#define PTC_JOURNAL_KEYS_MAX     4096u       /* distinct call keys counted per attempt */
#define PTC_JOURNAL_REPLAYED_MAX 256u        /* replayed calls listed per attempt */

enum {
    PTC_JOURNAL_ENOMEM = -1,
    PTC_JOURNAL_EFULL = -2, /* a bound was reached: the journal is now lost */
};

typedef struct ptc_journal ptc_journal_t;

/**
 * The canonical JSON text of v: objects' members sorted by key (byte order, stable for
 * duplicate keys), printed without white space. Borrows v. Returns a string the caller frees
 * with free(), or NULL on ENOMEM (or NULL v).
 */
char *ptc_json_canonical(const cJSON *v);

/** The journal key of a call: "TOOL_ID\n" followed by the canonical arguments (NULL args are
 *  {}). Caller frees; NULL on ENOMEM. */
char *ptc_journal_key(const char *tool_id, const cJSON *args);

/** A new, empty journal whose first attempt has begun. *out set on 0. */
int ptc_journal_new(ptc_journal_t **out);
void ptc_journal_free(ptc_journal_t *j);

/** Starts the next attempt: occurrence numbers count from 1 again, the replayed list and the
 *  used tools empty. Kept results stay. */
void ptc_journal_begin_attempt(ptc_journal_t *j);

/** Counts one more call with this key in the current attempt and returns its occurrence
 *  number (1 for the first). Past PTC_JOURNAL_KEYS_MAX keys it returns 0 and marks the
 *  journal lost. Borrows key. */
unsigned ptc_journal_occurrence(ptc_journal_t *j, const char *key);

/** The kept result of occurrence occ of key (borrowed, valid until the journal is freed), or
 *  NULL when none was kept. */
const cJSON *ptc_journal_lookup(const ptc_journal_t *j, const char *key, unsigned occ);

/**
 * Keeps a copy of result for (key, occ) when the call succeeded: result is a CallToolResult
 * whose isError is not true. An error result is ignored (returns 0). An entry already kept for
 * (key, occ) stays. PTC_JOURNAL_EFULL / ENOMEM mark the journal lost.
 */
int ptc_journal_record(ptc_journal_t *j, const char *key, unsigned occ, const cJSON *result);

/** Notes that the current attempt got (tool_id, occ) from the journal. */
void ptc_journal_note_replay(ptc_journal_t *j, const char *tool_id, unsigned occ);
/** The current attempt's replayed calls, [{"tool", "occurrence"}] (caller frees; NULL on
 *  ENOMEM). The list starts empty again. */
cJSON *ptc_journal_take_replayed(ptc_journal_t *j);

/** Notes a tool the code called (any outcome), for the repair request's signatures. */
void ptc_journal_note_used(ptc_journal_t *j, const char *tool_id);
/** Tool ids the current attempt called, each once, in first-call order (borrowed array of
 *  strings). */
const cJSON *ptc_journal_used(const ptc_journal_t *j);

/** True once something could not be journaled (then a rerun could repeat a side effect). */
bool ptc_journal_lost(const ptc_journal_t *j);
/** Results kept. */
size_t ptc_journal_count(const ptc_journal_t *j);

#endif
