/* util.c - error names, the stderr logger and syslog level names. */
#include "internal.h"

#include <stdlib.h>

#include <string.h>
#include <time.h>

const char *mcp_strerror(int err)
{
    switch (err) {
        MCP_ERRORS(PTC_ERR_CASE)
    }
    return ptc_http_strerror(err);
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
