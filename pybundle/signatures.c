/* signatures.c - tools as the Python functions of the generated package, one line each, for
 * the repair request (ptc_pybundle_signatures), and the module's buffers (base's, capped). */
#include "internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------- */
/* The module's buffers                                                                      */

void ptc__pybundle_buf_init(ptc_buf_t *b)
{
    ptc_buf_init(b, PTC_PYBUNDLE_FILE_MAX);
}

static void signature_line(ptc_buf_t *s, const reg_tool_t *t)
{
    char mod[PTC_PYBUNDLE_IDENT_MAX + 1], fn[PTC_PYBUNDLE_IDENT_MAX + 1];
    ptc_pybundle_identifier(t->server, mod, sizeof mod);
    ptc_pybundle_identifier(t->name, fn, sizeof fn);
    ptc_buf_printf(s, "- tools.%s.%s(", mod, fn);
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(t->input_schema, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(t->input_schema, "required");
    const cJSON *p;
    int k = 0;
    cJSON_ArrayForEach(p, props)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        static const char *const map[][2] = {{"string", "str"},   {"integer", "int"},
                                             {"number", "float"}, {"boolean", "bool"},
                                             {"array", "list"},   {"object", "dict"}};
        const char *py = "Any";
        for (size_t i = 0; cJSON_IsString(type) && i < sizeof map / sizeof map[0]; i++)
            if (strcmp(type->valuestring, map[i][0]) == 0) py = map[i][1];
        bool required = false;
        const cJSON *r;
        cJSON_ArrayForEach(r, req)
        {
            if (cJSON_IsString(r) && strcmp(r->valuestring, p->string) == 0) required = true;
        }
        ptc_buf_printf(s, "%s%.100s: %s%s", k++ ? ", " : "", p->string, py,
                       required ? "" : " = None");
    }
    ptc_buf_str(s, ")");
    if (t->description != NULL && t->description[0] != '\0') {
        size_t dl = strcspn(t->description, "\n");
        ptc_buf_printf(s, "  # %.*s", (int)(dl > 160 ? 160 : dl), t->description);
    }
    ptc_buf_str(s, "\n");
}

/* True if `word` stands in code as a whole Python identifier. */
static bool has_identifier(const char *code, const char *word)
{
    size_t wl = strlen(word);
    if (wl == 0) return false;
    for (const char *p = strstr(code, word); p != NULL; p = strstr(p + 1, word)) {
        bool before = p == code || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        bool after = !(isalnum((unsigned char)p[wl]) || p[wl] == '_');
        if (before && after) return true;
    }
    return false;
}

#define SIG_MODULES_MAX 16 /* `tools.<module>` names read from one program */

typedef struct sig_set {
    const reg_tool_t *t[PTC_PYBUNDLE_SIGS_MAX];
    size_t n;
} sig_set_t;

static void sig_add(sig_set_t *set, const reg_tool_t *t)
{
    if (set->n >= PTC_PYBUNDLE_SIGS_MAX) return;
    for (size_t i = 0; i < set->n; i++)
        if (set->t[i] == t) return;
    set->t[set->n++] = t;
}

char *ptc_pybundle_signatures(const reg_catalog_t *cat, const char *code, const cJSON *used)
{
    if (cat == NULL || code == NULL) return NULL;
    sig_set_t set = {.n = 0};
    const cJSON *u;
    cJSON_ArrayForEach(u, used)
    {
        const reg_tool_t *t = cJSON_IsString(u) ? reg_catalog_find(cat, u->valuestring) : NULL;
        if (t != NULL) sig_add(&set, t);
    }
    /* The modules the code names, read once from the code. */
    char mods[SIG_MODULES_MAX][PTC_PYBUNDLE_IDENT_MAX + 1];
    bool named[SIG_MODULES_MAX] = {false};
    size_t n_mods = 0;
    for (const char *p = strstr(code, "tools."); p != NULL && n_mods < SIG_MODULES_MAX;
         p = strstr(p + 1, "tools.")) {
        if (p > code && (isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.')) continue;
        const char *q = p + 6;
        size_t len = 0;
        while (len < PTC_PYBUNDLE_IDENT_MAX && (isalnum((unsigned char)q[len]) || q[len] == '_'))
            len++;
        if (len == 0) continue;
        bool seen = false;
        for (size_t m = 0; m < n_mods && !seen; m++)
            seen = strlen(mods[m]) == len && memcmp(mods[m], q, len) == 0;
        if (seen) continue;
        memcpy(mods[n_mods], q, len);
        mods[n_mods++][len] = '\0';
    }
    for (int pass = 0; pass < 2 && n_mods > 0; pass++) {
        for (size_t i = 0; i < reg_catalog_count(cat) && set.n < PTC_PYBUNDLE_SIGS_MAX; i++) {
            const reg_tool_t *t = reg_catalog_at(cat, i);
            char mod[PTC_PYBUNDLE_IDENT_MAX + 1], fn[PTC_PYBUNDLE_IDENT_MAX + 1];
            ptc_pybundle_identifier(t->server, mod, sizeof mod);
            size_t m = 0;
            while (m < n_mods && strcmp(mods[m], mod) != 0)
                m++;
            if (m == n_mods) continue;
            if (pass == 0) {
                ptc_pybundle_identifier(t->name, fn, sizeof fn);
                if (has_identifier(code, fn)) {
                    sig_add(&set, t);
                    named[m] = true;
                }
            } else if (!named[m]) {
                sig_add(&set, t);
            }
        }
    }
    ptc_buf_t s;
    ptc__pybundle_buf_init(&s);
    for (size_t i = 0; i < set.n; i++)
        signature_line(&s, set.t[i]);
    if (ptc_buf_error(&s)) {
        ptc_buf_free(&s);
        return NULL;
    }
    return s.p;
}
