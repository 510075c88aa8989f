/* host_internal.h - what the files of the bridge host share (host.c: the run's bridge, its
 * calls, answers and emit; host_policy.c: the tool patterns and the audit record). Not part
 * of the API (bridge.h). */
#ifndef PTC_BRIDGE_HOST_INTERNAL_H
#define PTC_BRIDGE_HOST_INTERNAL_H

#include "bridge.h"

#include <stdbool.h>
#include <stdint.h>

#define READ_CHUNK  (64u << 10)
#define MESSAGE_MAX 1024

typedef struct bh_call bh_call_t;

typedef struct bh_patterns {
    char **pat;
    size_t n, cap;
} bh_patterns_t;

struct ptc_bridge_host {
    uv_loop_t *loop;
    uv_pipe_t pipe;
    uv_timer_t timer;
    int handles_open; /* freed when both handles are closed */
    const mcp_logger_t *lg;
    const ptc_bridge_ops_t *ops;
    void *ops_data;
    ptc_bridge_router_t *router; /* ptc_bridge_host_open's (the ops_data): freed with the host */

    ptc_bridge_limits_t lim; /* strings below, not the caller's */
    char *run_id;
    bh_patterns_t allow, deny;

    mcp_framer_t framer;
    char *rbuf; /* READ_CHUNK bytes, malloc'd: a calloc'd array made every run zero 64 KiB */
    bool reading, peer_closed, closing;

    bh_call_t *calls; /* in flight, doubly linked */
    cJSON *outputs, *warnings;
    uint64_t warnings_dropped;
    size_t emit_total;
    ptc_bridge_counters_t n;
};

struct bh_call {
    bh_call_t *prev, *next;
    ptc_bridge_host_t *h;
    int64_t id;
    ptc_bridge_method_t method;
    char *tool_id, *server, *name; /* for the audit record (call) */
    char digest[65];
    char *jkey;   /* the journal key, or NULL when the call is not journaled */
    unsigned occ; /* its occurrence number in this attempt */
    uint64_t start_ns, deadline_ms;
    unsigned timeout_ms; /* what the call was given, for the timeout message */
    void *cancel_handle;
    bool starting;  /* inside ops->call / ops->search */
    bool done;      /* answered (or given up): ignore callbacks, free once starting ends */
    bool abandoned; /* given up by the host (timeout, close) rather than answered by ops */
};

typedef struct bh_write {
    uv_write_t req;
    char *line;
} bh_write_t;

/* host_policy.c */
/* Formats into msg (nothing when msg is NULL or size 0). */
void ptc__bh_msg(char *msg, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ptc__bh_patterns_free(bh_patterns_t *p);
/* Splits "a*, b__c" into trimmed, non-empty patterns; flag names the list in messages. */
int ptc__bh_patterns_parse(const char *list, bh_patterns_t *p, const char *flag, char *msg,
                           size_t msg_size);
bool ptc__bh_patterns_match(const bh_patterns_t *p, const char *id);
/* SHA-256 of the arguments printed without spaces with keys sorted; "" when out of memory. */
void ptc__bh_args_digest(const cJSON *args, char out[65]);
/* Writes one audit record (to --audit-log, else the log) and hands it to ops->audit. */
void ptc__bh_audit(ptc_bridge_host_t *h, const char *tool_id, const char *server, const char *name,
                   const char *digest, const char *outcome, uint64_t start_ns, bool is_error,
                   const char *message);

#endif /* PTC_BRIDGE_HOST_INTERNAL_H */
