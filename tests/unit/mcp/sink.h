/* sink.h - the transport the session tests use: every message a session sends, parsed and kept
 * in order, and their shared teardown. Header-only (static inline); include it after <cmocka.h> and
 * "mcp.h". */
#ifndef PTC_TEST_MCP_SINK_H
#define PTC_TEST_MCP_SINK_H

#define SINK_MAX 64

typedef struct sink {
    cJSON *msgs[SINK_MAX];
    uint64_t at_ns[SINK_MAX]; /* when each was sent (uv_hrtime) */
    size_t n;
} sink_t;

static inline int sink_send(void *tdata, const char *json, size_t len)
{
    sink_t *s = tdata;
    assert_true(s->n < SINK_MAX);
    s->msgs[s->n] = cJSON_ParseWithLength(json, len);
    assert_non_null(s->msgs[s->n]);
    s->at_ns[s->n] = uv_hrtime();
    s->n++;
    return 0;
}

static const mcp_transport_ops_t sink_ops = {.send = sink_send};

static inline void sink_clear(sink_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        cJSON_Delete(s->msgs[i]);
    s->n = 0;
}

/* The set-up the session tests share, sink_sessions_close's mirror: a loop, a server made with
 * o that logs to stderr from level on, and session a sending to sink sa (and b to sb unless b
 * is NULL). */
static inline void sink_sessions_open(uv_loop_t *loop, mcp_logger_t *log, mcp_level_t level,
                                      const mcp_server_opts_t *o, mcp_server_t **srv,
                                      mcp_session_t **a, sink_t *sa, mcp_session_t **b, sink_t *sb)
{
    assert_int_equal(uv_loop_init(loop), 0);
    log->out = stderr;
    log->level = level;
    assert_int_equal(mcp_server_new(loop, o, log, srv), 0);
    assert_int_equal(mcp_session_new(*srv, &sink_ops, sa, a), 0);
    if (b != NULL) assert_int_equal(mcp_session_new(*srv, &sink_ops, sb, b), 0);
}

/* The teardown the session tests share: frees the sessions (b and sb may be NULL), lets the
 * loop finish what they left, frees the server, closes the loop and empties the sinks. */
static inline void sink_sessions_close(uv_loop_t *loop, mcp_server_t *srv, mcp_session_t *a,
                                       sink_t *sa, mcp_session_t *b, sink_t *sb)
{
    mcp_session_free(a);
    if (b != NULL) mcp_session_free(b);
    uv_run(loop, UV_RUN_DEFAULT);
    mcp_server_free(srv);
    assert_int_equal(uv_loop_close(loop), 0);
    sink_clear(sa);
    if (sb != NULL) sink_clear(sb);
}

#ifdef PTC_MCP_INTERNAL_H
/* Makes s a client that authenticated as `name` (a bearer token of that text): two sessions
 * with different names have different identities (mcp_identity_t). */
static inline void sink_session_as(mcp_session_t *s, const char *name)
{
    unsigned char d[MCP__CRED_BYTES];
    mcp__credential_digest(name, strlen(name), d);
    mcp__session_set_credential(s, d);
}
#endif

#endif
