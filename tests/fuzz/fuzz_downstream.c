/* fuzz_downstream.c - libFuzzer target for the client side of downstream servers: the first
 * byte picks the config parser (users' files) or the client's handling of what a server writes
 * (lines through the framer into a READY client with no transport: answers are dropped, so
 * every request, notification and stray response takes its full path). */
#include "client_internal.h"

#include <stdlib.h>
#include <string.h>

static void fuzz_config(const uint8_t *data, size_t size)
{
    mcp_downstream_config_t cfg;
    char msg[256];
    if (mcp_downstream_config_parse((const char *)data, size, &cfg, msg, sizeof msg) == MCP_OK) {
        for (size_t i = 0; i < cfg.n_servers; i++)
            if (cfg.servers[i].name == NULL) abort();
        mcp_downstream_config_close(&cfg);
    } else if (msg[0] == '\0') {
        abort(); /* every refusal says why */
    }
}

static void on_line(void *data, const char *line, size_t len, bool too_big)
{
    mcp__client_on_line(data, line, len, too_big);
}

static void fuzz_client(const uint8_t *data, size_t size)
{
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) return;
    mcp_logger_t lg = {NULL, MCP_LOG_ERROR};
    char name[] = "fuzz", command[] = "true";
    mcp_downstream_server_t entry = {.name = name, .command = command};
    mcp_client_opts_t opts;
    mcp_client_opts_default(&opts);
    opts.can_sample = true;
    opts.has_roots = true;
    char *env[] = {NULL};
    opts.environ = env;
    mcp_client_t *c = NULL;
    if (mcp_client_new(&loop, &entry, &opts, NULL, &lg, &c) == MCP_OK) {
        c->state = MCP_CLIENT_READY; /* as after a handshake */
        mcp_framer_t f;
        mcp_framer_init(&f, 4096, on_line, c);
        mcp_framer_feed(&f, (const char *)data, size);
        mcp_framer_finish(&f);
        mcp_framer_close(&f);
        mcp_client_free(c);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    if (data[0] & 1)
        fuzz_config(data + 1, size - 1);
    else
        fuzz_client(data + 1, size - 1);
    return 0;
}
