/* main.c - the ptc-mcp binary: flags, the MCP server and its transport. */
#include "options.h"
#include "tools.h"

#include "base.h"
#include "executor.h"
#include "mcp.h"

#include <mbedtls/platform_util.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct app {
    uv_loop_t loop;
    mcp_logger_t log;
    mcp_server_t *srv;
    mcp_stdio_t *io;
    mcp_http_server_t *http;
    uv_signal_t sig_int, sig_term;
    bool signals_on, http_stopping;
    ptc_execute_t *exec;
    ptc_search_t *search;
    ptc_downstream_t *downstream;
    ptc_pybundle_cache_t *bundle;
    ptc_startup_t *startup;
    ptc_execute_wiring_t wiring; /* the three above, as execute_code's runs reach them */
    env_host_t *env;
} app_t;

static const char instructions[] =
    "execute_code runs Python 3 in a sandbox (no network, fresh state each call) and returns "
    "stdout/stderr; prefer one script that does the whole computation and prints only what "
    "matters. Long output is paged: call execute_code again with only the cursor it gave. "
    "Inside the code, tools of the configured servers are Python functions "
    "(`from tools.SERVER import TOOL`; tools.search(query) finds them), so a script can call "
    "many tools and return only the result. "
    "search_tools finds tools of the configured servers by meaning: describe what you want to "
    "do and it returns their ids, descriptions and input schemas.";

static void on_stdio_done(mcp_stdio_t *io, void *data)
{
    app_t *app = data;
    mcp_stdio_free(io);
    app->io = NULL;
    mcp_server_cancel_tasks(app->srv); /* runs that became tasks stop with the server */
    ptc_execute_stop(app->exec);
    ptc_search_stop(app->search);
    ptc_downstream_stop(app->downstream);
    ptc_pybundle_cache_stop(app->bundle);
}

static void on_signal_closed(uv_handle_t *h)
{
    (void)h;
}

static void on_http_stopped(mcp_http_server_t *h, void *data)
{
    app_t *app = data;
    mcp_http_server_free(h);
    app->http = NULL;
    if (app->signals_on) {
        app->signals_on = false;
        uv_close((uv_handle_t *)&app->sig_int, on_signal_closed);
        uv_close((uv_handle_t *)&app->sig_term, on_signal_closed);
    }
    mcp_server_cancel_tasks(app->srv); /* runs that became tasks stop with the server */
    ptc_execute_stop(app->exec);
    ptc_search_stop(app->search);
    ptc_downstream_stop(app->downstream);
    ptc_pybundle_cache_stop(app->bundle);
}

static void on_http_signal(uv_signal_t *h, int signum)
{
    app_t *app = h->data;
    if (app->http == NULL) return;
    mcp_log(&app->log, MCP_LOG_INFO, "received %s; %s", signum == SIGINT ? "SIGINT" : "SIGTERM",
            app->http_stopping ? "cancelling work in flight" : "finishing work in flight");
    app->http_stopping = true;
    /* The signal handles stop keeping the loop alive; a second signal cancels at once. */
    uv_unref((uv_handle_t *)&app->sig_int);
    uv_unref((uv_handle_t *)&app->sig_term);
    mcp_http_server_stop(app->http, on_http_stopped, app);
}

/* Serves MCP over HTTP until SIGINT/SIGTERM. Returns < 0 (logged) when it cannot start. */
static int start_http(app_t *app, const ptc_options_t *o)
{
    mcp_http_server_opts_t ho;
    mcp_http_server_opts_default(&ho);
    char host[256];
    unsigned port;
    if (mcp_http_parse_listen(o->listen, host, sizeof host, &port) < 0) {
        mcp_log(&app->log, MCP_LOG_ERROR,
                "--listen \"%s\": expected HOST:PORT, such as 127.0.0.1:8765 or [::1]:8765 "
                "(port 0 picks a free one)",
                o->listen);
        return MCP_EINVAL;
    }
    ho.host = host;
    ho.port = port;
    ho.max_message_bytes = o->max_message_bytes;
    /* Fairness between sessions: one session may hold at most half of what the executor can
     * run and queue, so others always find room (it gets 503 with Retry-After past that). */
    size_t runs =
        (o->max_concurrent ? o->max_concurrent : uv_available_parallelism()) + o->max_queue;
    ho.max_streams_per_session = runs / 2 > 4 ? runs / 2 : 4;
    ho.tls_cert_file = o->tls_cert;
    ho.tls_key_file = o->tls_key;
    if (o->auth_token_env != NULL) {
        const char *tok = getenv(o->auth_token_env);
        if (tok == NULL || tok[0] == '\0') {
            mcp_log(&app->log, MCP_LOG_ERROR,
                    "--auth-token-env %s: that environment variable is not set or empty; set it "
                    "to the bearer token clients must send",
                    o->auth_token_env);
            return MCP_EINVAL;
        }
        ho.auth_token = tok;
    }
    int rc = mcp_http_server_start(app->srv, &ho, &app->http);
    if (rc < 0) return rc;
    if (uv_signal_init(&app->loop, &app->sig_int) == 0 &&
        uv_signal_init(&app->loop, &app->sig_term) == 0) {
        app->signals_on = true;
        app->sig_int.data = app->sig_term.data = app;
        uv_signal_start(&app->sig_int, on_http_signal, SIGINT);
        uv_signal_start(&app->sig_term, on_http_signal, SIGTERM);
    }
    /* Tests and scripts read the URL from this line: it is written at every --log-level. */
    mcp_logger_t always = app->log;
    always.level = MCP_LOG_DEBUG;
    mcp_log(&always, MCP_LOG_NOTICE, "ptc-mcp %s listening on %s", PTC_VERSION,
            mcp_http_server_url(app->http));
    return MCP_OK;
}

/* Gives the server the requestState key of --state-key-file: instances sharing the file honour
 * each other's MRTR states. Refused when others may read it (a key they know lets them forge
 * states) or when it holds fewer than MCP_STATE_KEY_MIN_BYTES bytes. */
static int set_state_key(app_t *app, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        mcp_log(&app->log, MCP_LOG_ERROR, "--state-key-file %s: %s", path, strerror(errno));
        return MCP_EINVAL;
    }
    if ((st.st_mode & (S_IRGRP | S_IROTH | S_IWGRP | S_IWOTH)) != 0) {
        mcp_log(&app->log, MCP_LOG_ERROR,
                "--state-key-file %s: readable or writable by group or others (mode %03o); it "
                "holds a secret: chmod 600 it",
                path, (unsigned)(st.st_mode & 0777));
        return MCP_EINVAL;
    }
    char *key = NULL;
    size_t len = 0;
    int rc = ptc_file_read(path, PTC_CAP_STATE_KEY_FILE, &key, &len);
    if (rc < 0) {
        if (rc == PTC_ETOOBIG)
            mcp_log(&app->log, MCP_LOG_ERROR, "--state-key-file %s: larger than %u bytes", path,
                    PTC_CAP_STATE_KEY_FILE);
        else
            mcp_log(&app->log, MCP_LOG_ERROR, "--state-key-file %s: %s", path, ptc_strerror(rc));
        return MCP_EINVAL;
    }
    rc = len < MCP_STATE_KEY_MIN_BYTES
             ? MCP_EINVAL
             : mcp_server_set_state_key(app->srv, (const unsigned char *)key, len);
    mbedtls_platform_zeroize(key, len);
    free(key);
    if (rc < 0) {
        mcp_log(&app->log, MCP_LOG_ERROR,
                "--state-key-file %s: %zu bytes; it needs at least %d (head -c 32 /dev/urandom "
                "makes one)",
                path, len, MCP_STATE_KEY_MIN_BYTES);
        return rc;
    }
    return MCP_OK;
}

static void registry_changed(void *data)
{
    app_t *app = data;
    ptc_pybundle_cache_refresh(app->bundle);
}

/* The tools package's lines, at their level, in the binary's log. */
static void bundle_log(void *data, int level, const char *line)
{
    static const mcp_level_t levels[] = {MCP_LOG_DEBUG, MCP_LOG_INFO, MCP_LOG_WARNING,
                                         MCP_LOG_ERROR};
    mcp_log(data, levels[level >= 0 && level <= 3 ? level : 3], "%s", line);
}

static void bundle_built(void *data)
{
    app_t *app = data;
    ptc_execute_describe(app->exec, app->srv, ptc_pybundle_cache_modules(app->bundle));
    ptc_startup_poke(app->startup); /* runs that use the tools package may wait for it */
}

/* The packages became ready or failed: the description says so, warm sandboxes mount them. */
static void env_changed(void *data)
{
    app_t *app = data;
    ptc_execute_describe(app->exec, app->srv, ptc_pybundle_cache_modules(app->bundle));
}

static size_t downstream_status(const void *data, char *buf, size_t size)
{
    return ptc_downstream_status(data, buf, size);
}

static cJSON *downstream_status_json(const void *data)
{
    return ptc_downstream_status_json(data);
}

#define CHECK_DOWNSTREAM_LIMIT_MS 65000 /* past the clients' 60 s start timeout */

static void check_tick(uv_timer_t *t)
{
    if (ptc_downstream_settled(t->data)) uv_stop(t->loop);
}

static void check_limit(uv_timer_t *t)
{
    uv_stop(t->loop);
}

/* Starts the configured servers on a private loop and reports how each one ends up (ready or
 * failed) within a bound; returns 1 when any failed. */
static int check_downstream(const ptc_options_t *o)
{
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) return 1;
    mcp_logger_t quiet = {stderr, MCP_LOG_CRITICAL};
    ptc_options_t lexical = *o;
    lexical.embedder = "lexical"; /* only the servers are checked here */
    lexical.tools_file = NULL;
    ptc_search_t *search = NULL;
    ptc_downstream_t *d = NULL;
    uv_timer_t tick, limit; /* closed below, and freed by the last uv_run: function scope */
    char source[600];
    snprintf(source, sizeof source, "--config %s", o->config_file ? o->config_file : "");
    int dropped =
        o->config_json != NULL ? mcp_downstream_config_check(o->config_json, source, stdout) : 0;
    int status = dropped != 0 ? 1 : 0; /* < 0: unusable, else entries left out */
    if (dropped < 0) {
        /* mcp_downstream_config_check said why */
    } else if (ptc_search_new(&loop, &lexical, &quiet, &search) < 0 ||
               ptc_downstream_new(&loop, o, &quiet, search, &d) < 0) {
        printf("downstream servers: cannot start them (out of memory?)\n");
        status = 1;
    } else if (ptc_downstream_count(d) == 0) {
        printf("downstream servers: %s\n",
               dropped > 0 ? "none left to start (every entry was left out)" : "none configured");
    } else {
        uv_timer_init(&loop, &tick);
        uv_timer_init(&loop, &limit);
        tick.data = d;
        uv_timer_start(&tick, check_tick, 100, 100);
        uv_timer_start(&limit, check_limit, CHECK_DOWNSTREAM_LIMIT_MS, 0);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_close((uv_handle_t *)&tick, NULL);
        uv_close((uv_handle_t *)&limit, NULL);
        char buf[8192];
        ptc_downstream_status(d, buf, sizeof buf);
        printf("downstream servers:\n%s", buf);
        if (ptc_downstream_failed(d) > 0) status = 1;
    }
    ptc_search_stop(search);
    ptc_downstream_stop(d);
    ptc_downstream_free(d);
    uv_run(&loop, UV_RUN_DEFAULT);
    ptc_search_free(search);
    uv_loop_close(&loop);
    return status;
}

/* Prints the sandbox layers and the rest of the set-up; exits 1 when execute_code would refuse
 * to run, so that scripts can test a host with it. */
static int check_report(const ptc_options_t *o)
{
    printf("ptc-mcp %s\n", PTC_VERSION);
    printf("transport: %s\n", o->transport);
    int http_status = 0;
    if (strcmp(o->transport, "http") == 0) {
        char host[256];
        unsigned port;
        bool ok = mcp_http_parse_listen(o->listen, host, sizeof host, &port) == 0;
        const char *tok = o->auth_token_env ? getenv(o->auth_token_env) : NULL;
        bool has_tok = tok != NULL && tok[0] != '\0';
        printf("http: %s%s, bearer token %s, %s\n", ok ? "listen " : "BAD --listen ", o->listen,
               has_tok ? "set" : (o->auth_token_env ? "MISSING (the variable is empty)" : "none"),
               o->tls_cert ? "HTTPS" : "plain HTTP");
        if (!ok || (o->auth_token_env && !has_tok)) http_status = 1;
    }
    exec_options_t eo;
    ptc_execute_sandbox_options(o, &eo);
    exec_probe_t probe;
    int rc = exec_probe(&eo, &probe);
    int status = http_status;
    if (rc < 0) {
        printf("sandbox: the probe could not run: %s. %s\n", exec_strerror(rc),
               exec_error_hint(rc));
        status = 1;
    } else {
        char report[8192];
        exec_probe_report(&probe, report, sizeof report);
        printf("%s", report);
        if (report[0] != '\0' && report[strlen(report) - 1] != '\n') putchar('\n');
        if (o->unsafe_no_sandbox) {
            printf("execute_code: runs WITHOUT a sandbox (--unsafe-no-sandbox)\n");
        } else if (!probe.mandatory_ok) {
            printf("execute_code: REFUSES to run: %s\n", probe.message);
            status = 1;
        } else {
            printf("execute_code: available (sandbox %s)\n", exec_sandbox_level_name(probe.level));
        }
    }
    reg_embedder_t *emb = NULL;
    char note[512] = "", msg[512] = "";
    if (ptc_search_open_embedder(o, &emb, note, sizeof note, msg, sizeof msg) < 0) {
        printf("embedder: UNAVAILABLE: %s\n", msg);
        status = 1;
    } else {
        printf("embedder: %s (dimension %zu)%s%s\n", reg_embedder_name(emb), reg_embedder_dim(emb),
               note[0] ? "; " : "", note);
        reg_embedder_free(emb);
    }
    if (ptc_env_check(o) != 0) status = 1;
    if (check_downstream(o) != 0) status = 1;
    return status;
}

static int run(const ptc_options_t *o)
{
    app_t app;
    memset(&app, 0, sizeof app);
    app.log.out = stderr;
    if (mcp_level_parse(o->log_level, &app.log.level) < 0) {
        fprintf(stderr, "ptc-mcp: --log-level: unknown level \"%s\"\n", o->log_level);
        return 2;
    }
    int rc = uv_loop_init(&app.loop);
    if (rc < 0) {
        fprintf(stderr, "ptc-mcp: cannot create the event loop: %s\n", uv_strerror(rc));
        return 1;
    }
    mcp_server_opts_t so;
    mcp_server_opts_default(&so);
    so.title = "ptc-mcp: sandboxed Python and tool search";
    so.instructions = instructions;
    so.list_page_size = o->list_page_size;
    int status = 1;
    if ((rc = mcp_server_new(&app.loop, &so, &app.log, &app.srv)) < 0) {
        mcp_log(&app.log, MCP_LOG_ERROR, "cannot create the server: %s", mcp_strerror(rc));
        goto out;
    }
    if (o->state_key_file != NULL && set_state_key(&app, o->state_key_file) < 0) {
        status = 2;
        goto out;
    }
    /* The packages' build starts now (in child processes) and the helpers are published. */
    if ((rc = ptc_env_new(&app.loop, o, &app.log, &app.env)) < 0) {
        mcp_log(&app.log, MCP_LOG_ERROR, "cannot set up the sandbox's environment (see above)");
        goto out;
    }
    if ((rc = ptc_execute_open(&app.loop, o, &app.log, app.env, &app.exec)) < 0 ||
        (rc = ptc_execute_register(app.exec, app.srv)) < 0 ||
        (rc = ptc_execute_resources_register(app.exec, app.srv)) < 0) {
        mcp_log(&app.log, MCP_LOG_ERROR, "cannot set up execute_code: %s", mcp_strerror(rc));
        goto out;
    }
    if ((rc = ptc_prompts_register(app.srv)) < 0) {
        mcp_log(&app.log, MCP_LOG_ERROR, "cannot register the prompts: %s", mcp_strerror(rc));
        goto out;
    }
    if ((rc = ptc_search_new(&app.loop, o, &app.log, &app.search)) < 0 ||
        (rc = ptc_search_register(app.search, app.srv)) < 0) {
        mcp_log(&app.log, MCP_LOG_ERROR, "cannot set up search_tools: %s", mcp_strerror(rc));
        goto out;
    }
    if ((rc = ptc_downstream_new(&app.loop, o, &app.log, app.search, &app.downstream)) < 0) {
        mcp_log(&app.log, MCP_LOG_ERROR, "cannot start the downstream servers: %s",
                mcp_strerror(rc));
        goto out;
    }
    ptc_search_set_status(app.search, downstream_status, downstream_status_json, app.downstream);
    /* Code in the sandbox calls the registry's tools through a generated package that follows
     * the registry. */
    if ((rc = ptc_pybundle_cache_new(&app.loop, ptc_search_registry(app.search), bundle_log,
                                     &app.log, &app.bundle)) < 0)
        goto out;
    ptc_pybundle_cache_on_built(app.bundle, bundle_built, &app);
    ptc_search_on_change(app.search, registry_changed, &app);
    /* Counted from here: the servers were started just above. */
    if ((rc = ptc_startup_new(&app.loop, o->startup_wait, &app.startup)) < 0) goto out;
    ptc_startup_attach(app.startup, app.downstream, app.search, app.bundle);
    ptc_search_set_startup(app.search, app.startup);
    ptc_downstream_set_startup(app.downstream, app.startup);
    app.wiring = (ptc_execute_wiring_t){
        .search = app.search, .downstream = app.downstream, .startup = app.startup};
    ptc_execute_wire(app.exec, &app.wiring, app.bundle);
    env_host_on_change(app.env, env_changed, &app);
    ptc_env_scan_custom(app.env, app.exec, app.search);
    ptc_execute_describe(app.exec, app.srv, NULL);
    ptc_pybundle_cache_refresh(app.bundle);
    ptc_downstream_set_server(app.downstream, app.srv);
    if (o->expose_tools) {
        ptc_downstream_expose(app.downstream, app.srv);
        ptc_startup_gate_lists(app.startup, app.srv);
    }
    if (strcmp(o->transport, "http") == 0) {
        if ((rc = start_http(&app, o)) < 0) {
            status = 2;
            goto out;
        }
    } else {
        if ((rc = mcp_stdio_start(app.srv, STDIN_FILENO, STDOUT_FILENO, o->max_message_bytes,
                                  on_stdio_done, &app, &app.io)) < 0) {
            mcp_log(&app.log, MCP_LOG_ERROR, "cannot serve on stdio: %s", mcp_strerror(rc));
            goto out;
        }
        mcp_log(&app.log, MCP_LOG_INFO, "ptc-mcp %s serving MCP on stdio", PTC_VERSION);
    }
    uv_run(&app.loop, UV_RUN_DEFAULT);
    status = 0;
out:
    if (app.io != NULL) mcp_stdio_free(app.io);
    if (app.http != NULL) mcp_http_server_free(app.http);
    if (app.signals_on) {
        uv_close((uv_handle_t *)&app.sig_int, on_signal_closed);
        uv_close((uv_handle_t *)&app.sig_term, on_signal_closed);
    }
    /* A package build and the helpers' scan stop first (the scan is a run of the pool), runs
     * still alive are killed and indexing stops; the loop then reaps the children, lets work in
     * flight finish and runs every close callback. */
    env_host_free(app.env);
    ptc_execute_free(app.exec);
    /* Indexing batches still in flight and the servers' last state changes come after this:
     * they must not poke a freed gate. */
    ptc_search_set_startup(app.search, NULL);
    ptc_downstream_set_startup(app.downstream, NULL);
    ptc_startup_free(app.startup);
    ptc_search_stop(app.search);
    ptc_downstream_free(app.downstream);
    ptc_pybundle_cache_stop(app.bundle);
    uv_run(&app.loop, UV_RUN_DEFAULT);
    ptc_pybundle_cache_free(app.bundle);
    ptc_search_free(app.search);
    mcp_server_free(app.srv);
    if (uv_loop_close(&app.loop) != 0)
        mcp_log(&app.log, MCP_LOG_WARNING, "event loop closed with handles still open");
    mcp_log(&app.log, MCP_LOG_INFO, "stopped");
    return status;
}

int main(int argc, char **argv)
{
    /* A client that goes away must show up as a write error, not kill the server. */
    signal(SIGPIPE, SIG_IGN);
    /* Embedding (model, remote) holds thread-pool workers for a while, and a remote request
     * itself needs one for its DNS lookup: a larger pool than libuv's 4 keeps them from
     * starving each other. The user's own setting wins. */
    setenv("UV_THREADPOOL_SIZE", "16", 0);
    ptc_options_t o;
    ptc_options_init(&o);
    if (ptc_options_parse(&o, argc, argv, stderr) < 0) {
        ptc_options_close(&o);
        return 2;
    }
    int status;
    if (o.help) {
        ptc_options_usage(stdout);
        status = 0;
    } else if (o.version) {
        printf("ptc-mcp %s\n", PTC_VERSION);
        status = 0;
    } else if (o.check) {
        status = check_report(&o);
    } else {
        status = run(&o);
    }
    ptc_options_close(&o);
    return status;
}
