/* main.c - the ptc-mcp binary: flags, the MCP server and its transport. */
#include "options.h"

#include "mcp.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct app {
    uv_loop_t loop;
    mcp_logger_t log;
    mcp_server_t *srv;
    mcp_stdio_t *io;
} app_t;

static const char instructions[] =
    "ptc-mcp serves tools over MCP. Call tools/list to see them; this version registers no "
    "tools yet (execute_code and search_tools arrive in later versions).";

static void on_stdio_done(mcp_stdio_t *io, void *data)
{
    app_t *app = data;
    mcp_stdio_free(io);
    app->io = NULL;
}

static int check_report(const ptc_options_t *o)
{
    printf("ptc-mcp %s\n", PTC_VERSION);
    printf("transport: %s\n", o->transport);
    printf("sandbox: unavailable: the sandboxed executor is not in this version yet; "
           "execute_code is not offered\n");
    printf("embedder: unavailable: the tool registry is not in this version yet; search_tools "
           "is not offered\n");
    printf("downstream servers: none (not supported in this version)\n");
    return 0;
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
    if ((rc = mcp_stdio_start(app.srv, STDIN_FILENO, STDOUT_FILENO, o->max_message_bytes,
                              on_stdio_done, &app, &app.io)) < 0) {
        mcp_log(&app.log, MCP_LOG_ERROR, "cannot serve on stdio: %s", mcp_strerror(rc));
        goto out;
    }
    mcp_log(&app.log, MCP_LOG_INFO, "ptc-mcp %s serving MCP on stdio", PTC_VERSION);
    uv_run(&app.loop, UV_RUN_DEFAULT);
    status = 0;
out:
    if (app.io != NULL) mcp_stdio_free(app.io);
    /* Let the close callbacks of every handle run before the loop goes away. */
    uv_run(&app.loop, UV_RUN_DEFAULT);
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
