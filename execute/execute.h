/*
 * execute.h - the execute_code request engine (docs/architecture.md): an MCP call becoming
 * executor runs inside the repair loop, with sessions, runs that outlive their wait, MRTR rounds
 * of a 2026-07-28 client, files and images out, and the bridge that lets the code call tools.
 * The one public header of execute/.
 *
 * It knows MCP (a request is an mcp_call_t), the executor, the bridge, the repair loop, the
 * sandbox's environment and the tools package; it calls nothing of the registry (a tool is the
 * catalog's read-only view, reg_tool_t, as bridge/ checks calls against it), the downstream
 * servers' set or the start-up gate: the wiring hands those in as ptc_execute_peers_t, as
 * bridge/ takes its MCP part through ptc_bridge_routes_t.
 */
#ifndef PTC_EXECUTE_H
#define PTC_EXECUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "environment.h"
#include "executor.h"
#include "mcp.h"
#include "pybundle.h"
#include "registry.h"

/* A file's bytes as resources/read returns them (base64 for binary types) must fit a client's
 * bounded message buffer (the official SDK's stdio client: 10 MiB): the default per-file bound
 * (--max-file-bytes) is this, under the executor's own. */
#define PTC_EXECUTE_FILE_MAX_BYTES (7u << 20)
/* One deadline covers a request's runs and repairs; a day at most keeps the milliseconds far
 * from overflow. */
#define PTC_EXECUTE_DEADLINE_MAX_S 86400

/* What every run of the engine gets. ptc_execute_new refuses a value out of its bounds
 * (exec_options_check's, max_repairs 0..PTC_REPAIR_MAX, a deadline up to
 * PTC_EXECUTE_DEADLINE_MAX_S, page_chars, max_code_bytes and max_timeout_s above 0) with one
 * log line; a host that wants to name its own setting checks first. Borrowed strings must
 * outlive the engine. */
typedef struct ptc_execute_config {
    exec_options_t sandbox;               /* the pool's: interpreter, mounts, limits, unsafe mode */
    exec_files_limits_t files;            /* files out: per file, per call, how many */
    size_t file_store_bytes;              /* files kept for ptc://files/ URIs; 0: 128 MiB */
    size_t image_max_bytes;               /* images up to this become image blocks; 0: 5 MiB */
    size_t max_code_bytes;                /* at most EXEC_MAX_CODE_BYTES */
    size_t page_chars;                    /* characters of output per page */
    double max_timeout_s;                 /* the largest timeout_seconds a request may ask */
    double tool_timeout_s;                /* one tool call from the code */
    const char *allow_tools, *deny_tools; /* the bridge's patterns (bridge.h) */
    bool confirm_writes;                  /* a call to a tool not read-only asks the user first */
    long max_repairs;                     /* the default self-healing budget */
    double request_deadline_s;            /* a request's runs and repairs, all in */
    size_t max_sessions;                  /* live sessions at once */
    double session_idle_s;                /* a session idle this long ends */
    double wait_s;                        /* how long a call waits for its run by default */
    const char *audit_log; /* a JSON line per tool call from code, appended; or NULL */
    /* The fallback repairer (an OpenAI-compatible endpoint), or NULL. */
    const char *repair_url, *repair_model, *repair_key_env, *ca_file;
} ptc_execute_config_t;

/** Called once with search_tools' structuredContent (borrowed) or err < 0 and a message. */
typedef void (*ptc_execute_search_done_cb)(void *data, int err, const cJSON *sc,
                                           const char *message);

/* What the engine asks the wiring: the start-up gate, the registry, the downstream servers.
 * Every operation is set; data is their first argument and outlives the engine. */
typedef struct ptc_execute_peers {
    /** At the start of a run's request: true when the call is parked (args copied) until the
     *  servers have listed their tools (and with needs_package until the tools package has
     *  their modules); then fn(call, args, fn_data) runs from the loop. false: go on now. */
    bool (*hold)(void *data, mcp_call_t *call, const cJSON *args, bool needs_package,
                 mcp_tool_fn fn, void *fn_data);
    /** A sentence naming the servers still starting (for a failed run's note), or 0 and "". */
    size_t (*still_starting)(void *data, char *buf, size_t size);
    /** The catalog's tool (server, tool) or NULL (borrowed until the loop runs again). */
    const reg_tool_t *(*find_tool)(void *data, const char *server, const char *tool);
    /** The client of a configured server, or NULL; the relay of their requests. */
    mcp_client_t *(*client)(void *data, const char *server);
    mcp_relay_t *(*relay)(void *data);
    /** A search for the code (tools.search), as search_tools ranks: done may run before this
     *  returns (*handle NULL then); < 0 without done on bad input. */
    int (*search)(void *data, const char *query, size_t top_k, const char *server,
                  const char *category, ptc_execute_search_done_cb done, void *done_data,
                  void **handle);
    /** done is not called after this returns. */
    void (*search_cancel)(void *data, void *handle);
    /** The signatures of the tools code uses (a repair prompt's), malloc'd, or NULL. */
    char *(*signatures)(void *data, const char *code, const cJSON *used);
    void *data;
} ptc_execute_peers_t;

typedef struct ptc_execute ptc_execute_t;

/**
 * Creates the executor pool from c (probing the sandbox: blocks for one interpreter start), the
 * page and file stores, the workspace, the audit log and the fallback repairer; runs use env
 * (mounts, waiting, description, results; may be NULL). Borrows loop, lg and env; copies c.
 * MCP_EINVAL with a logged reason when it cannot be set up at all (a setting out of bounds,
 * no launcher, an audit log that cannot be opened, a repairer URL it cannot use); a host that lacks
 * a mandatory layer still succeeds, and execute_code then answers every run with status "refused"
 * and why.
 */
int ptc_execute_new(uv_loop_t *loop, const ptc_execute_config_t *c, const mcp_logger_t *lg,
                    env_host_t *env, ptc_execute_t **out);
/** Adds execute_code to srv and its session-end hook. ex must outlive srv's sessions. */
int ptc_execute_register(ptc_execute_t *ex, mcp_server_t *srv);
/** Adds the resource templates ptc://output/{cursor} (the output page behind that cursor) and
 *  ptc://files/{id}/{name} (a file a run returned) (resources.c). */
int ptc_execute_resources_register(ptc_execute_t *ex, mcp_server_t *srv);
/** Lets runs call tools: each run then gets a bridge to peers (copied) and the bundle's `tools`
 *  package (borrowed) once built. */
void ptc_execute_attach(ptc_execute_t *ex, const ptc_execute_peers_t *peers,
                        ptc_pybundle_cache_t *bundle);
/** Re-registers execute_code on srv with a description naming the package's modules (one
 *  notifications/tools/list_changed), and warms sandboxes with the folders runs will bind. */
void ptc_execute_describe(ptc_execute_t *ex, mcp_server_t *srv, const cJSON *modules);
/** The server stops serving: every workspace session ends (its sandbox would keep the loop
 *  alive otherwise). Runs still answering a request are left to finish. */
void ptc_execute_stop(ptc_execute_t *ex);
/** Kills runs in flight and frees; keep running the loop until it ends afterwards. */
void ptc_execute_free(ptc_execute_t *ex);

/** The executor pool (borrowed), for other sandboxed work (the helpers' scan). */
exec_pool_t *ptc_execute_pool(const ptc_execute_t *ex);

#endif
