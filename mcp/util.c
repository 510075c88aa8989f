/* util.c - error names, the stderr logger and syslog level names. */
#include "internal.h"

#include <stdlib.h>

#include <string.h>
#include <time.h>

const char *mcp_strerror(int err)
{
    switch ((mcp_err_t)err) {
    case MCP_OK:
        return "success";
    case MCP_ENOMEM:
        return "out of memory";
    case MCP_EINVAL:
        return "invalid argument or malformed input";
    case MCP_ETOOBIG:
        return "size limit exceeded";
    case MCP_EIO:
        return "input/output error";
    case MCP_ETIMEDOUT:
        return "timed out";
    case MCP_ECANCELED:
        return "cancelled";
    case MCP_ECLOSED:
        return "connection or object closed";
    case MCP_ENOTSUP:
        return "not supported by the peer or not built in";
    case MCP_EPROTO:
        return "protocol error from the peer";
    case MCP_ETLS:
        return "TLS handshake or certificate verification failed";
    case MCP_ERESOLVE:
        return "host name lookup failed";
    case MCP_ECONNECT:
        return "connection failed";
    case MCP_EREDIRECT:
        return "redirect refused";
    case MCP_EREMOTE:
        return "the peer answered with an error";
    case MCP_EBUSY:
        return "too much work in flight";
    case MCP_ESTATE:
        return "not valid in the current state";
    case MCP_EDENIED:
        return "refused by the user or a policy";
    }
    return "unknown error";
}

static const char *const level_names[] = {
    "emergency", "alert", "critical", "error", "warning", "notice", "info", "debug",
};

int mcp_level_parse(const char *name, mcp_level_t *out)
{
    if (name == NULL) return MCP_EINVAL;
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (mcp_level_t)i;
            return MCP_OK;
        }
    }
    return MCP_EINVAL;
}

const char *mcp_level_name(mcp_level_t level)
{
    if ((unsigned)level >= sizeof level_names / sizeof level_names[0]) return "debug";
    return level_names[level];
}

void mcp_vlog(const mcp_logger_t *lg, mcp_level_t level, const char *fmt, va_list ap)
{
    if (lg == NULL || lg->out == NULL || level > lg->level) return;
    /* One fprintf per line keeps lines whole when several processes share stderr. */
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(lg->out, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ptc-mcp %s: %s\n", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
            mcp_level_name(level), msg);
    fflush(lg->out);
}

void mcp_log(const mcp_logger_t *lg, mcp_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mcp_vlog(lg, level, fmt, ap);
    va_end(ap);
}

uint64_t mcp__now_ms(void)
{
    return uv_hrtime() / 1000000u;
}

uint64_t mcp__wall_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

void mcp__close_free(uv_handle_t *h)
{
    if (h != NULL && !uv_is_closing(h)) uv_close(h, free_handle);
}

char *mcp__strdup(const char *s)
{
    if (s == NULL) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL) memcpy(d, s, n);
    return d;
}
