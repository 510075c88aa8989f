/* host_policy.c - what the bridge host checks a call against and records of it: the
 * --allow-tools / --deny-tools patterns, the digest of a call's arguments and the audit
 * record. */
#include "host_internal.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mbedtls/sha256.h>

void ptc__bh_msg(char *msg, size_t size, const char *fmt, ...)
{
    if (msg == NULL || size == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, size, fmt, ap);
    va_end(ap);
}

void ptc__bh_patterns_free(bh_patterns_t *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->pat[i]);
    free(p->pat);
    p->pat = NULL;
    p->n = 0;
    p->cap = 0;
}

/* Splits "a*, b__c" into trimmed, non-empty patterns. */
int ptc__bh_patterns_parse(const char *list, bh_patterns_t *p, const char *flag, char *msg,
                           size_t msg_size)
{
    memset(p, 0, sizeof *p);
    if (list == NULL) return 0;
    const char *s = list;
    while (*s != '\0') {
        const char *e = strchr(s, ',');
        if (e == NULL) e = s + strlen(s);
        const char *a = s, *b = e;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (b > a) {
            if (p->n == PTC_BRIDGE_PATTERNS_MAX) {
                ptc__bh_msg(msg, msg_size, "%s has more than %u patterns; use fewer, wider globs",
                            flag, PTC_BRIDGE_PATTERNS_MAX);
                ptc__bh_patterns_free(p);
                return PTC_BRIDGE_EINVAL;
            }
            int grown = ptc_array_reserve(&p->pat, &p->cap, p->n + 1, sizeof *p->pat,
                                          PTC_BRIDGE_PATTERNS_MAX);
            char *one = grown == 0 ? malloc((size_t)(b - a) + 1) : NULL;
            if (one == NULL) { /* n < PTC_BRIDGE_PATTERNS_MAX: only ENOMEM is left */
                ptc__bh_patterns_free(p);
                ptc__bh_msg(msg, msg_size, "out of memory");
                return PTC_BRIDGE_ENOMEM;
            }
            memcpy(one, a, (size_t)(b - a));
            one[b - a] = '\0';
            p->pat[p->n++] = one;
        }
        s = *e == ',' ? e + 1 : e;
    }
    return 0;
}

bool ptc__bh_patterns_match(const bh_patterns_t *p, const char *id)
{
    for (size_t i = 0; i < p->n; i++)
        if (fnmatch(p->pat[i], id, 0) == 0) return true;
    return false;
}

/* SHA-256 of the arguments printed without spaces with keys sorted; "" when out of memory. */
void ptc__bh_args_digest(const cJSON *args, char out[65])
{
    out[0] = '\0';
    char *s = ptc_json_canonical(args);
    if (s == NULL) return;
    unsigned char d[32];
    if (mbedtls_sha256_ret((const unsigned char *)s, strlen(s), d, 0) == 0) {
        for (int i = 0; i < 32; i++)
            snprintf(out + 2 * i, 3, "%02x", d[i]);
    }
    free(s);
}

void ptc__bh_audit(ptc_bridge_host_t *h, const char *tool_id, const char *server, const char *name,
                   const char *digest, const char *outcome, uint64_t start_ns, bool is_error,
                   const char *message)
{
    struct timespec ts;
    struct tm tm;
    char when[40] = "";
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && gmtime_r(&ts.tv_sec, &tm) != NULL) {
        size_t k = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(when + k, sizeof when - k, ".%03ldZ", ts.tv_nsec / 1000000L);
    }
    uint64_t dur_ms = (uv_hrtime() - start_ns) / 1000000u;
    cJSON *r = cJSON_CreateObject();
    bool ok = r != NULL && cJSON_AddStringToObject(r, "time", when) != NULL &&
              cJSON_AddStringToObject(r, "run", h->run_id) != NULL &&
              (tool_id != NULL ? cJSON_AddStringToObject(r, "tool", tool_id)
                               : cJSON_AddNullToObject(r, "tool")) != NULL &&
              cJSON_AddStringToObject(r, "server", server != NULL ? server : "") != NULL &&
              cJSON_AddStringToObject(r, "name", name != NULL ? name : "") != NULL &&
              cJSON_AddStringToObject(r, "args_sha256", digest) != NULL &&
              cJSON_AddStringToObject(r, "outcome", outcome) != NULL &&
              cJSON_AddNumberToObject(r, "duration_ms", (double)dur_ms) != NULL;
    if (ok && strcmp(outcome, "ok") == 0)
        ok = cJSON_AddBoolToObject(r, "is_error", is_error) != NULL;
    else if (ok && message != NULL)
        ok = cJSON_AddStringToObject(r, "message", message) != NULL;
    char *line = ok ? cJSON_PrintUnformatted(r) : NULL;
    if (line == NULL) {
        mcp_log(h->lg, MCP_LOG_ERROR, "bridge: out of memory writing the audit record of %s: %s",
                tool_id != NULL ? tool_id : "?", outcome);
    } else if (h->lim.audit != NULL) {
        if (fprintf(h->lim.audit, "%s\n", line) < 0 || fflush(h->lim.audit) != 0)
            mcp_log(h->lg, MCP_LOG_ERROR, "bridge: cannot write the audit log; check --audit-log");
    } else {
        mcp_log(h->lg, MCP_LOG_INFO, "audit %s", line);
    }
    free(line);
    if (ok && h->ops->audit != NULL) h->ops->audit(h->ops_data, r);
    cJSON_Delete(r);
}
