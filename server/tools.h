/* tools.h - the tools the binary registers on the MCP server, wired onto the libraries. */
#ifndef PTC_SERVER_TOOLS_H
#define PTC_SERVER_TOOLS_H

#include "environment.h"
#include "execute.h"
#include "mcp.h"
#include "options.h"
#include "pybundle.h"
#include "registry.h"

typedef struct ptc_search ptc_search_t;

/* Downstream MCP servers from --config (downstream.c). */
typedef struct ptc_downstream ptc_downstream_t;

/**
 * Starts one client per mcpServers entry of the parsed --config (none without one); their tools
 * go into search's registry as they arrive. A broken entry is logged and skipped: it never
 * blocks the others. MCP_EINVAL when the config's mcpServers is malformed.
 */
int ptc_downstream_new(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg,
                       ptc_search_t *search, ptc_downstream_t **out);
/** Where sampling and elicitation requests of downstream servers go when no call of ours waits
 *  on that server: srv's only session (mcp_relay_set_server). */
void ptc_downstream_set_server(ptc_downstream_t *d, mcp_server_t *srv);
/** The relay of the servers' clients (borrowed; NULL for a NULL d): for mcp_relay_own. */
mcp_relay_t *ptc_downstream_relay(const ptc_downstream_t *d);
/** --expose-tools: list every downstream tool on srv under its registry id and proxy calls. */
void ptc_downstream_expose(ptc_downstream_t *d, mcp_server_t *srv);
/** One line per server ("NAME: ready, 12 tools" / "NAME: failed, 0 tools; why") into buf, like
 *  snprintf; returns the length needed. */
size_t ptc_downstream_status(const ptc_downstream_t *d, char *buf, size_t size);
/** The same as a JSON array [{"name", "state", "tools", "reason"?}] (caller deletes); NULL on
 *  ENOMEM. */
cJSON *ptc_downstream_status_json(const ptc_downstream_t *d);
size_t ptc_downstream_count(const ptc_downstream_t *d);
/** Servers that gave up (state failed), for --check's exit status. */
size_t ptc_downstream_failed(const ptc_downstream_t *d);
/** The client of a configured server, or NULL (borrowed). */
mcp_client_t *ptc_downstream_client(const ptc_downstream_t *d, const char *server);
/** True when every server is ready or failed (for --check). */
bool ptc_downstream_settled(const ptc_downstream_t *d);
/** The servers still starting (no first listing yet, or restarting), their names joined by
 *  ", " into buf; returns how many. */
size_t ptc_downstream_starting(const ptc_downstream_t *d, char *buf, size_t size);
/** True when every ready server with tools has a module in modules (the tools package's
 *  [{"module", "server"}]; NULL: none yet). */
bool ptc_downstream_packaged(const ptc_downstream_t *d, const cJSON *modules);
/** Stops every server (asynchronously; the loop ends once they are gone). */
void ptc_downstream_stop(ptc_downstream_t *d);
/** Frees; live children are stopped in the background: run the loop afterwards. */
void ptc_downstream_free(ptc_downstream_t *d);

/* Ready at first contact: --startup-wait (startup.c, on mcp/'s call gate). */
typedef struct ptc_startup ptc_startup_t;

/** The gate, its wait counted from now (wait_s <= 0: none). Borrows loop. MCP_ENOMEM. */
int ptc_startup_new(uv_loop_t *loop, double wait_s, ptc_startup_t **out);
/** What it waits for (each may be NULL). */
void ptc_startup_attach(ptc_startup_t *st, ptc_downstream_t *d, ptc_search_t *search,
                        ptc_pybundle_cache_t *bundle);
/** Something a gate waits for may have changed (a server's state or listing, an indexing
 *  batch, the package): the parked calls look again from the next loop turn. st may be NULL. */
void ptc_startup_poke(ptc_startup_t *st);
/** The downstream servers poke st (borrowed, may be NULL) when one changes state. */
void ptc_downstream_set_startup(ptc_downstream_t *d, ptc_startup_t *st);
/**
 * At the start of a tool handler: true when the call is parked (args copied) until every
 * configured server has its first listing (or failed) and the known tools are indexed, and with
 * needs_package until the tools package has every ready server's module; then fn(call, args,
 * data) runs from the loop. false: go on now (the gate is open for good, the wait is over, or
 * st is NULL). A parked call cancelled by the shutdown is answered.
 */
bool ptc_startup_hold(ptc_startup_t *st, mcp_call_t *call, const cJSON *args, bool needs_package,
                      mcp_tool_fn fn, void *data);
/* --expose-tools: tools/list of srv waits like search_tools, for the servers' first listing. */
void ptc_startup_gate_lists(ptc_startup_t *st, mcp_server_t *srv);
/** A sentence naming the servers still starting (for results after the wait), or 0 and "". */
size_t ptc_startup_still_starting(const ptc_startup_t *st, char *buf, size_t size);
/** Answers calls still parked; frees (the timer on the loop's next turn). */
void ptc_startup_free(ptc_startup_t *st);

/* search_tools: the registry ranks the tools of downstream servers and --tools-file
 * (tool_search.c, on registry/'s search service). */

/** Opens the embedder the flags ask for (--embedder, --embed-*); note gets the line to log
 *  when "auto" fell back. Used by --check (ptc_search_new opens its own through the
 *  service, from the same flags). */
int ptc_search_open_embedder(const ptc_options_t *o, reg_embedder_t **out, char *note,
                             size_t note_size, char *msg, size_t msg_size);
/**
 * Creates the search service (reg_service_new) with the chosen embedder (loading a model: call
 * before the loop runs), the on-disk embedding cache, and --tools-file; indexing starts on the
 * thread pool. MCP_EINVAL with a logged reason when the embedder or the tools file cannot be
 * used.
 */
int ptc_search_new(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg,
                   ptc_search_t **out);
/** The first searches wait at st (borrowed, may be NULL) for the servers and the index. */
void ptc_search_set_startup(ptc_search_t *s, ptc_startup_t *st);
/** Adds search_tools to srv. */
int ptc_search_register(ptc_search_t *s, mcp_server_t *srv);
/** The registry, for feeding it downstream servers' tools (borrowed). */
reg_registry_t *ptc_search_registry(ptc_search_t *s);
/** Call after changing the registry's tools: indexes the new ones. */
void ptc_search_changed(ptc_search_t *s);
/** cb runs after every ptc_search_changed (the tools package follows the registry). */
void ptc_search_on_change(ptc_search_t *s, void (*cb)(void *data), void *data);
/** Servers' states for search results: status(data, buf, size) like ptc_downstream_status
 *  for the text, status_json(data) like ptc_downstream_status_json for structuredContent. */
void ptc_search_set_status(ptc_search_t *s,
                           size_t (*status)(const void *data, char *buf, size_t size),
                           cJSON *(*status_json)(const void *data), const void *data);
/** Called once with search_tools' structuredContent (borrowed) or err < 0 and a message. */
typedef ptc_execute_search_done_cb ptc_search_done_cb;
/**
 * A search for code in the sandbox (tools.search): embeds the query on the thread pool when the
 * embedder blocks, then ranks. server and category (borrowed, copied; NULL: no filter) filter
 * as search_tools' arguments do. done may run before this returns. *handle (for
 * ptc_search_query_cancel) is NULL when it did. A blank query is answered through done with
 * an error, as search_tools refuses it. Returns < 0 without calling done on bad input.
 */
int ptc_search_query(ptc_search_t *s, const char *query, size_t top_k, const char *server,
                     const char *category, ptc_search_done_cb done, void *data, void **handle);
/** done is not called after this returns. */
void ptc_search_query_cancel(void *handle);
/* search_tools' definition and results (search_results.c). */
extern const char ptc_search_input_schema[];
extern const char ptc_search_output_schema[];
extern const char ptc_search_description[];
/**
 * Builds search_tools' structuredContent: {"embedder": NAME, "tools": [{"id", "server",
 * "name", "description", "inputSchema", "score"}]}, scores rounded to 4 decimals. Borrows
 * res; the caller owns (and cJSON_Deletes) the result. NULL on ENOMEM.
 */
cJSON *ptc_search_results_json(const reg_registry_t *reg, const reg_result_t *res, size_t n);

/**
 * Renders results as the compact text the model reads: one line per tool with its id, score,
 * description (cut to desc_max bytes on a UTF-8 boundary; 0 means 200) and parameters
 * (required ones marked *). Returns a malloc'd string the caller frees, or NULL on ENOMEM.
 */
char *ptc_search_results_text(const reg_result_t *res, size_t n, size_t desc_max);

/**
 * Finishes a search_tools call with the service's answer (reg_query_done_fn's arguments, err
 * 0): the text for the model (the hits, what the index covered, then the servers' state lines
 * and the sentence naming those still starting, each "" when none) and structuredContent (the
 * hits, "index", and "servers": servers_json, taken, may be NULL). Everything else borrowed.
 */
void ptc_search_results_finish(mcp_call_t *call, const reg_registry_t *reg, const reg_result_t *res,
                               size_t n, const reg_search_info_t *info, const reg_filter_t *f,
                               const char *servers, const char *starting, cJSON *servers_json);
/** Hands a tools.search its answer: done(data, 0, structuredContent, NULL), or MCP_EINVAL
 *  with msg for a failed search (err < 0), or MCP_ENOMEM. */
void ptc_search_results_done(ptc_search_done_cb done, void *data, const reg_registry_t *reg,
                             int err, const reg_result_t *res, size_t n, const char *msg);

/** Stops starting new indexing batches, so the loop can end. */
void ptc_search_stop(ptc_search_t *s);
/** Frees; call when the loop has ended (no batch or query in flight). */
void ptc_search_free(ptc_search_t *s);

/* execute_code: the request engine (execute/) on the flags (execute_setup.c) and wired to the
 * registry, the servers and the start-up gate (execute_peers.c). */

/**
 * ptc_execute_new with the flags' configuration, each bound checked first and a bad one logged
 * naming its flag (MCP_EINVAL). Borrows loop, o, lg and env.
 */
int ptc_execute_open(uv_loop_t *loop, const ptc_options_t *o, const mcp_logger_t *lg,
                     env_host_t *env, ptc_execute_t **out);
/** Copies the flags that shape every sandbox (interpreter, mounts, memory, /tmp, CPU share,
 *  unsafe mode) into eo, so that --check probes the sandbox runs will get. Borrows o. */
void ptc_execute_sandbox_options(const ptc_options_t *o, exec_options_t *eo);
/* The engine's peers: the binary's parts it asks (each may be NULL where not configured). */
typedef struct ptc_execute_wiring {
    ptc_search_t *search;
    ptc_downstream_t *downstream;
    ptc_startup_t *startup; /* the first runs that use the tools package wait there */
} ptc_execute_wiring_t;
/** Lets runs call tools through w (borrowed: it outlives ex) and the bundle's `tools` package
 *  (ptc_execute_attach). */
void ptc_execute_wire(ptc_execute_t *ex, ptc_execute_wiring_t *w, ptc_pybundle_cache_t *bundle);

/* The sandbox's environment: --packages/--requirements and --custom-tools (environment.c over
 * environment/'s env_host_t, which runs and results use directly). */

/**
 * env_host_new from the flags, its lines in lg (borrowed): the packages' build starts on loop
 * and the helpers are published into the cache (BLOCKS on the file system: call before the loop
 * runs). MCP_EINVAL (logged, naming the flag, spec or path) for a start-up error; *out is NULL
 * then. Free with env_host_free.
 */
int ptc_env_new(uv_loop_t *loop, const ptc_options_t *o, mcp_logger_t *lg, env_host_t **out);
/** Starts the sandboxed scan of the helpers' functions on ex's pool; they become registry
 *  entries of server "custom" in search's registry. Nothing without --custom-tools. */
void ptc_env_scan_custom(env_host_t *e, ptc_execute_t *ex, ptc_search_t *search);
/** --check's report of the packages and helpers; returns 1 when something is wrong. */
int ptc_env_check(const ptc_options_t *o);

/* The prompts the binary offers (prompts.c): execute_code_guide. */
int ptc_prompts_register(mcp_server_t *srv);

#endif
