/* options.c - one table of flags drives parsing, the config file's "ptc" object and --help. */
#include "options.h"

#include "base.h"
#include "executor.h"
#include "mcp.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Short names for base's kinds keep each entry of the table on a line or two. ARG_NUM is a
 * positive number; ARG_NUM0 one that may also be 0 (a wait that can be off). */
#define ARG_NONE PTC_FLAG_BOOL
#define ARG_STR  PTC_FLAG_STR
#define ARG_SIZE PTC_FLAG_SIZE
#define ARG_NUM  PTC_FLAG_NUM
#define ARG_NUM0 PTC_FLAG_NUM0
#define ARG_LONG PTC_FLAG_LONG
#define ARG_LIST PTC_FLAG_LIST

#define OFF(f) offsetof(ptc_options_t, f)

static const ptc_flag_t flags[] = {
    {"transport", ARG_STR, OFF(transport), 0, "stdio|http", "how clients connect", "stdio"},
    {"listen", ARG_STR, OFF(listen), 0, "HOST:PORT", "HTTP address", "127.0.0.1:8765"},
    {"config", ARG_STR, OFF(config_file), 0, "FILE",
     "downstream servers, Claude Desktop format {\"mcpServers\": {...}}, plus an optional \"ptc\" "
     "object holding any of these flags by long name",
     "none"},
    {"tools-file", ARG_STR, OFF(tools_file), 0, "FILE",
     "static catalog: JSON array of MCP Tool objects with optional \"server\"", "none"},
    {"check", ARG_NONE, OFF(check), 0, NULL,
     "print the active sandbox layers, embedder, packages and helpers, downstream servers, then "
     "exit",
     NULL},
    {"log-level", ARG_STR, OFF(log_level), 0, "LEVEL",
     "stderr log level (debug, info, notice, warning, error, critical, alert, emergency)", "info"},
    {"max-message-bytes", ARG_SIZE, OFF(max_message_bytes), 0, "N",
     "largest JSON-RPC message accepted", "16 MiB"},
    {"list-page-size", ARG_SIZE, OFF(list_page_size), 0, "N", "tools/list page size", "50"},
    {"output-page-chars", ARG_SIZE, OFF(output_page_chars), 0, "N", "execute_code output page size",
     "20000"},
    {"max-output-bytes", ARG_SIZE, OFF(max_output_bytes), 0, "N",
     "stdout and stderr kept per run, each (K/M/G suffixes; the rest is counted, and the first "
     "page says so)",
     "4 MiB"},
    {"memory-limit", ARG_SIZE, OFF(memory_limit), 0, "SIZE", "memory of one run (cgroup)",
     "256 MiB"},
    {"tmp-size", ARG_SIZE, OFF(tmp_size), 0, "SIZE", "a run's private /tmp (tmpfs)", "32 MiB"},
    {"cpu-limit", ARG_NUM, OFF(cpu_limit), 0, "CORES",
     "CPU share of one run or session (cgroup cpu.max; 0.5 = half a core, 2 = two cores; 0.01 to "
     "256)",
     "1"},
    {"max-code-bytes", ARG_SIZE, OFF(max_code_bytes), 0, "N",
     "longest code accepted; at most 120 KiB, as the code travels to the sandbox as one argument",
     "120 KiB"},
    {"max-file-bytes", ARG_SIZE, OFF(max_file_bytes), 0, "SIZE",
     "one file returned from /tmp/outputs (more is cut; past 7 MiB its base64 outgrows the "
     "official SDK client's 10 MiB message buffer)",
     "7 MiB"},
    {"max-call-files-bytes", ARG_SIZE, OFF(max_call_files_bytes), 0, "SIZE",
     "all files returned by one run (past it files are listed as omitted)", "32 MiB"},
    {"max-files", ARG_SIZE, OFF(max_files), 0, "N", "files returned by one run", "32"},
    {"file-store-bytes", ARG_SIZE, OFF(file_store_bytes), 0, "SIZE",
     "files kept for ptc://files/ URIs, all runs together (least recently used go first)",
     "128 MiB"},
    {"max-image-bytes", ARG_SIZE, OFF(max_image_bytes), 0, "SIZE",
     "largest image (png, jpeg, gif, webp) returned as an image content block", "5 MiB"},
    {"python", ARG_STR, OFF(python), 0, "PATH", "interpreter inside the sandbox", "system python3"},
    {"max-concurrent", ARG_SIZE, OFF(max_concurrent), 0, "N", "parallel runs", "cores"},
    {"max-queue", ARG_SIZE, OFF(max_queue), 0, "N",
     "waiting runs (queue time does not count against a run's timeout)", "64"},
    {"max-timeout", ARG_NUM, OFF(max_timeout), 0, "S", "largest timeout_seconds a caller may ask",
     "300"},
    {"mount", ARG_LIST, OFF(mounts), OFF(n_mounts), "HOST:PATH[:ro|rw]",
     "expose a host folder inside the sandbox (repeatable); an rw one's new files belong to the "
     "server's user (as root: to the folder's owner, 65534 for a root-owned folder)",
     "none"},
    {"pass-env", ARG_LIST, OFF(pass_env), OFF(n_pass_env), "NAME",
     "pass one variable of the server's environment into runs (repeatable)", "none"},
    {"unsafe-no-sandbox", ARG_NONE, OFF(unsafe_no_sandbox), 0, NULL,
     "run code without isolation (loud warnings)", "off"},
    {"embedder", ARG_STR, OFF(embedder), 0, "auto|model|lexical|remote",
     "search back end; auto = model if installed, else lexical, and says so", "auto"},
    {"embed-model-dir", ARG_STR, OFF(embed_model_dir), 0, "DIR", "sentence-embedding model files",
     "the installed one"},
    {"embed-url", ARG_STR, OFF(embed_url), 0, "URL",
     "remote embeddings (OpenAI-compatible or Ollama)", "none"},
    {"embed-remote-model", ARG_STR, OFF(embed_remote_model), 0, "NAME", "remote embedding model",
     "none"},
    {"embed-key-env", ARG_STR, OFF(embed_key_env), 0, "NAME",
     "environment variable holding the remote embedding API key", "none"},
    {"expose-tools", ARG_NONE, OFF(expose_tools), 0, NULL,
     "also list every registry tool and proxy calls to it", "off"},
    {"allow-tools", ARG_STR, OFF(allow_tools), 0, "PATTERNS",
     "which registry tools code may call (glob on ids)", "all"},
    {"deny-tools", ARG_STR, OFF(deny_tools), 0, "PATTERNS",
     "which registry tools code may not call (glob on ids)", "none"},
    {"tool-timeout", ARG_NUM, OFF(tool_timeout), 0, "S", "one downstream call from code", "60"},
    {"startup-wait", ARG_NUM0, OFF(startup_wait), 0, "S",
     "the first tools/list, search_tools and tools-package run wait this long for the "
     "downstream servers' first listing and indexing (0: they do not wait)",
     "10"},
    {"audit-log", ARG_STR, OFF(audit_log), 0, "FILE",
     "JSONL record of every tool call made from code", "stderr at info"},
    {"confirm-writes", ARG_NONE, OFF(confirm_writes), 0, NULL,
     "calls from code to tools not annotated read-only need the user's confirmation (MCP "
     "elicitation), else are refused",
     "off"},
    {"max-repairs", ARG_LONG, OFF(max_repairs), 0, "N", "self-healing budget (0 = off, at most 10)",
     "2"},
    {"request-deadline", ARG_NUM, OFF(request_deadline), 0, "S",
     "one execute_code request, runs and repairs together (a longer timeout_seconds wins)", "50"},
    {"max-sessions", ARG_SIZE, OFF(max_sessions), 0, "N",
     "live execute_code sessions (session: \"new\"); they take no --max-concurrent slot", "8"},
    {"session-idle-timeout", ARG_NUM, OFF(session_idle_timeout), 0, "S",
     "a session unused this long is closed (a later use says it expired)", "900"},
    {"wait-seconds", ARG_NUM, OFF(wait_seconds), 0, "S",
     "how long a call waits for its run before answering status \"running\" with a cursor "
     "(the caller's wait_seconds wins)",
     "45"},
    {"repair-url", ARG_STR, OFF(repair_url), 0, "URL", "fallback repairer (OpenAI-compatible chat)",
     "none"},
    {"repair-model", ARG_STR, OFF(repair_model), 0, "NAME", "fallback repairer model", "none"},
    {"repair-key-env", ARG_STR, OFF(repair_key_env), 0, "NAME",
     "environment variable holding the fallback repairer's API key", "none"},
    {"auth-token-env", ARG_STR, OFF(auth_token_env), 0, "NAME",
     "HTTP bearer token; required for a non-loopback --listen", "none"},
    {"state-key-file", ARG_STR, OFF(state_key_file), 0, "FILE",
     "a secret of at least 32 bytes (readable by its owner only) that signs MRTR requestStates, "
     "so instances behind a load balancer that share it honour each other's states",
     "a random key per process"},
    {"tls-cert", ARG_STR, OFF(tls_cert), 0, "FILE", "HTTPS certificate", "none"},
    {"tls-key", ARG_STR, OFF(tls_key), 0, "FILE", "HTTPS private key", "none"},
    {"ca-file", ARG_STR, OFF(ca_file), 0, "FILE", "CA bundle for every outbound HTTPS call",
     "system bundle"},
    {"packages", ARG_LIST, OFF(packages), OFF(n_packages), "SPEC,SPEC",
     "pip requirement specifiers installed once (cached) and importable in every run", "none"},
    {"requirements", ARG_STR, OFF(requirements), 0, "FILE",
     "a pip requirements file, installed like --packages", "none"},
    {"package-install-timeout", ARG_NUM, OFF(package_install_timeout), 0, "S",
     "limit for installing the packages", "600"},
    {"pip-index-url", ARG_STR, OFF(pip_index_url), 0, "URL", "pip's package index", "pip's own"},
    {"pip-find-links", ARG_STR, OFF(pip_find_links), 0, "DIR",
     "a folder of wheels for pip; without --pip-index-url the install is offline (no index)",
     "none"},
    {"packages-optional", ARG_NONE, OFF(packages_optional), 0, NULL,
     "when installing fails, runs go on without the packages (else they are refused)", "off"},
    {"custom-tools", ARG_LIST, OFF(custom_tools), OFF(n_custom_tools), "PATH",
     "your own Python helper (.py file or package folder), importable in runs by its module "
     "name (repeatable)",
     "none"},
    {"help", ARG_NONE, OFF(help), 0, NULL, "print this help and exit", NULL},
    {"version", ARG_NONE, OFF(version), 0, NULL, "print the version and exit", NULL},
};
#define N_FLAGS (sizeof flags / sizeof flags[0])
_Static_assert(N_FLAGS <= sizeof(((ptc_options_t *)0)->given), "ptc_options_t.given is too small");

void ptc_options_init(ptc_options_t *o)
{
    memset(o, 0, sizeof *o);
    o->transport = "stdio";
    o->listen = "127.0.0.1:8765";
    o->log_level = "info";
    o->max_message_bytes = 16u << 20;
    o->list_page_size = 50;
    o->output_page_chars = 20000;
    o->max_queue = 64;
    o->max_timeout = 300;
    o->embedder = "auto";
    o->tool_timeout = 60;
    o->startup_wait = 10;
    o->request_deadline = 50;
    o->max_repairs = 2;
    o->max_sessions = 8;
    o->session_idle_timeout = 900;
    o->wait_seconds = 45;
    o->package_install_timeout = 600;
}

void ptc_options_close(ptc_options_t *o)
{
    cJSON_Delete(o->config_json);
    o->config_json = NULL;
}

void ptc_options_usage(FILE *out)
{
    fprintf(out, "Usage: ptc-mcp [FLAGS]\n\n"
                 "An MCP server that runs model-written Python in a sandbox and finds tools.\n"
                 "With no flags it serves one MCP session on stdin/stdout.\n\nFlags:\n");
    ptc_flags_usage(flags, N_FLAGS, out);
}

void ptc_options_packages_free(char **specs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(specs[i]);
}

int ptc_options_packages(const ptc_options_t *o, char **specs, size_t max, FILE *err)
{
    size_t n = 0;
    for (size_t v = 0; v < o->n_packages; v++) {
        const char *p = o->packages[v];
        while (*p) {
            const char *end = strchr(p, ',');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            const char *q = p;
            while (q < p + len && (*q == ' ' || *q == '\t'))
                q++;
            bool starts_name =
                q < p + len &&
                ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9'));
            if (!starts_name && n > 0 && q < p + len) {
                /* "<2" of "numpy>=1,<2": a version clause of the spec before the comma */
                ptc_buf_t joined;
                ptc_buf_init(&joined, PTC_CAP_PACKAGE_SPEC);
                ptc_buf_str(&joined, specs[n - 1]);
                ptc_buf_append(&joined, ",", 1);
                ptc_buf_append(&joined, p, len);
                if (ptc_buf_error(&joined) == PTC_ETOOBIG) {
                    ptc_buf_free(&joined);
                    fprintf(err, "ptc-mcp: --packages: a specifier longer than %u bytes\n",
                            PTC_CAP_PACKAGE_SPEC);
                    ptc_options_packages_free(specs, n);
                    return -1;
                }
                char *grown = ptc_buf_take(&joined, NULL);
                if (grown == NULL) goto nomem;
                free(specs[n - 1]);
                specs[n - 1] = grown;
            } else if (q < p + len) {
                if (n >= max) {
                    fprintf(err, "ptc-mcp: --packages: more than %zu specifiers\n", max);
                    ptc_options_packages_free(specs, n);
                    return -1;
                }
                specs[n] = strndup(p, len);
                if (specs[n] == NULL) goto nomem;
                n++;
            }
            p += len;
            if (*p == ',') p++;
        }
    }
    return (int)n;
nomem:
    fprintf(err, "ptc-mcp: out of memory reading --packages\n");
    ptc_options_packages_free(specs, n);
    return -1;
}

/* The engine's view of o; the config file may not name these (they say where it is, or end
 * the program before it is read). */
static ptc_flags_t flags_of(ptc_options_t *o)
{
    static const char *const cli_only[] = {"config", "help", "version", "check", NULL};
    return (ptc_flags_t){.prog = "ptc-mcp",
                         .table = flags,
                         .n = N_FLAGS,
                         .opts = o,
                         .given = o->given,
                         .list_max = PTC_MAX_REPEAT,
                         .cli_only = cli_only};
}

/* Reads the config file's "ptc" object; command-line flags win over it. */
static int load_config(ptc_options_t *o, FILE *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = ptc_file_read(o->config_file, PTC_CAP_CONFIG_FILE, &text, &len);
    if (rc == PTC_ETOOBIG) {
        fprintf(err, "ptc-mcp: --config %s: larger than %u MiB\n", o->config_file,
                PTC_CAP_CONFIG_FILE >> 20);
        return -1;
    }
    if (rc < 0) {
        fprintf(err, "ptc-mcp: --config %s: %s\n", o->config_file, ptc_strerror(rc));
        return -1;
    }
    char where[300];
    cJSON *root = mcp_json_parse_located(text, len, where, sizeof where);
    free(text);
    if (root == NULL) {
        fprintf(err, "ptc-mcp: --config %s: not valid JSON: %s\n", o->config_file, where);
        return -1;
    }
    if (!cJSON_IsObject(root)) {
        fprintf(err, "ptc-mcp: --config %s: not a JSON object (expected {\"mcpServers\": {...}})\n",
                o->config_file);
        cJSON_Delete(root);
        return -1;
    }
    o->config_json = root;
    const cJSON *servers = cJSON_GetObjectItemCaseSensitive(root, "mcpServers");
    if (servers != NULL && !cJSON_IsObject(servers)) {
        fprintf(err, "ptc-mcp: --config %s: \"mcpServers\" must be an object\n", o->config_file);
        return -1;
    }
    const cJSON *ptc = cJSON_GetObjectItemCaseSensitive(root, "ptc");
    if (ptc == NULL) return 0;
    if (!cJSON_IsObject(ptc)) {
        fprintf(err, "ptc-mcp: --config %s: \"ptc\" must be an object of flags\n", o->config_file);
        return -1;
    }
    char object[PATH_MAX + 32];
    snprintf(object, sizeof object, "--config %s: \"ptc\"", o->config_file);
    ptc_flags_t fl = flags_of(o);
    return ptc_flags_parse_object(&fl, ptc, object, err) < 0 ? -1 : 0;
}

int ptc_options_parse(ptc_options_t *o, int argc, char **argv, FILE *err)
{
    ptc_flags_t fl = flags_of(o);
    if (ptc_flags_parse_argv(&fl, argc, argv, err) < 0) return -1;
    if (o->help || o->version) return 0;
    if (o->config_file && load_config(o, err) < 0) return -1;
    if (strcmp(o->transport, "stdio") != 0 && strcmp(o->transport, "http") != 0) {
        fprintf(err, "ptc-mcp: --transport must be stdio or http, not \"%s\"\n", o->transport);
        return -1;
    }
    /* the executor takes thousandths of a core: 0.01 is the kernel's smallest useful quota */
    if (o->cpu_limit != 0 && (o->cpu_limit * 1000.0 < EXEC_MIN_CPU_MILLIS - 0.5 ||
                              o->cpu_limit * 1000.0 > EXEC_MAX_CPU_MILLIS + 0.5)) {
        fprintf(err, "ptc-mcp: --cpu-limit must be between %g and %g cores, not %g\n",
                EXEC_MIN_CPU_MILLIS / 1000.0, EXEC_MAX_CPU_MILLIS / 1000.0, o->cpu_limit);
        return -1;
    }
    return 0;
}
