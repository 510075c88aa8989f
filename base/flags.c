/*
 * flags.c - a table of flags drives the command line, a config file's object of the same flags
 * and the --help text, so that a flag is declared once and every way of setting it refuses the
 * same values with the same words. The table points into the caller's struct by offsets; this
 * file knows nothing of what the flags mean.
 */
#include "base.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const ptc_flag_t *ptc_flags_find(const ptc_flags_t *fl, const char *name, size_t len)
{
    for (size_t i = 0; i < fl->n; i++)
        if (strlen(fl->table[i].name) == len && strncmp(fl->table[i].name, name, len) == 0)
            return &fl->table[i];
    return NULL;
}

bool ptc_flags_given(const ptc_flags_t *fl, const ptc_flag_t *f)
{
    return fl->given[f - fl->table] != 0;
}

/* Accepts 123, 64K/KiB, 16M/MiB, 1G/GiB. */
static int parse_size(const char *s, size_t *out)
{
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno != 0 || s[0] == '-') return PTC_EINVAL;
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10;
    if (*end == 'M' || *end == 'm') mul = 1ull << 20;
    if (*end == 'G' || *end == 'g') mul = 1ull << 30;
    if (mul != 1) {
        end++;
        if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0) end += strlen(end);
    }
    if (*end != '\0' || v == 0 || v > SIZE_MAX / mul) return PTC_EINVAL;
    *out = (size_t)(v * mul);
    return 0;
}

int ptc_flags_set(const ptc_flags_t *fl, const ptc_flag_t *f, const char *val, const char *origin,
                  FILE *err)
{
    char *base = fl->opts;
    fl->given[f - fl->table] = 1;
    switch (f->kind) {
    case PTC_FLAG_BOOL:
        *(bool *)(base + f->offset) = true;
        return 0;
    case PTC_FLAG_STR:
        *(const char **)(base + f->offset) = val;
        return 0;
    case PTC_FLAG_SIZE:
        if (parse_size(val, (size_t *)(base + f->offset)) == 0) return 0;
        break;
    case PTC_FLAG_NUM:
    case PTC_FLAG_NUM0: {
        char *end;
        double d = strtod(val, &end);
        if (end != val && *end == '\0' && isfinite(d) &&
            (d > 0 || (f->kind == PTC_FLAG_NUM0 && d == 0))) {
            /* memcpy: the offset need not be aligned for a double in the caller's eyes */
            memcpy(base + f->offset, &d, sizeof d);
            return 0;
        }
        break;
    }
    case PTC_FLAG_LONG: {
        char *end;
        errno = 0;
        long v = strtol(val, &end, 10);
        if (end != val && *end == '\0' && errno == 0 && v >= 0) {
            *(long *)(base + f->offset) = v;
            return 0;
        }
        break;
    }
    case PTC_FLAG_LIST: {
        size_t *n = (size_t *)(base + f->count_offset);
        if (*n >= fl->list_max) {
            fprintf(err, "%s: --%s given more than %zu times\n", fl->prog, f->name, fl->list_max);
            return PTC_ETOOBIG;
        }
        ((const char **)(base + f->offset))[(*n)++] = val;
        return 0;
    }
    }
    fprintf(err, "%s: --%s%s: invalid value \"%s\" (expected %s)\n", fl->prog, f->name, origin, val,
            f->arg);
    return PTC_EINVAL;
}

int ptc_flags_parse_argv(const ptc_flags_t *fl, int argc, char **argv, FILE *err)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            fprintf(err, "%s: unexpected argument \"%s\" (see --help)\n", fl->prog, a);
            return PTC_EINVAL;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const ptc_flag_t *f = ptc_flags_find(fl, name, len);
        if (f == NULL) {
            fprintf(err, "%s: unknown flag \"%s\" (see --help)\n", fl->prog, a);
            return PTC_EINVAL;
        }
        const char *val = NULL;
        if (f->kind == PTC_FLAG_BOOL) {
            if (eq) {
                fprintf(err, "%s: --%s takes no value\n", fl->prog, f->name);
                return PTC_EINVAL;
            }
        } else if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            fprintf(err, "%s: --%s needs a value (%s)\n", fl->prog, f->name, f->arg);
            return PTC_EINVAL;
        }
        int rc = ptc_flags_set(fl, f, val, "", err);
        if (rc < 0) return rc;
    }
    return 0;
}

static bool cli_only(const ptc_flags_t *fl, const char *name)
{
    for (const char *const *p = fl->cli_only; p != NULL && *p != NULL; p++)
        if (strcmp(*p, name) == 0) return true;
    return false;
}

/* One member of the object; "wrong type" is the caller's message, so it returns 1 for it. */
static int set_member(const ptc_flags_t *fl, const ptc_flag_t *f, const cJSON *item, FILE *err)
{
    static const char origin[] = " (in the config file)";
    if (f->kind == PTC_FLAG_BOOL) {
        if (!cJSON_IsBool(item)) return 1;
        return cJSON_IsTrue(item) ? ptc_flags_set(fl, f, NULL, origin, err) : 0;
    }
    if (cJSON_IsArray(item)) {
        if (f->kind != PTC_FLAG_LIST) return 1;
        const cJSON *v;
        cJSON_ArrayForEach(v, item)
        {
            if (!cJSON_IsString(v)) return 1;
            int rc = ptc_flags_set(fl, f, v->valuestring, origin, err);
            if (rc < 0) return rc;
        }
        return 0;
    }
    /* A number is formatted and read by the flag's own parser, which keeps nothing of the
     * text; text flags keep their pointer into the object, so they take strings only. */
    if (cJSON_IsString(item)) return ptc_flags_set(fl, f, item->valuestring, origin, err);
    if (cJSON_IsNumber(item) && f->kind != PTC_FLAG_STR && f->kind != PTC_FLAG_LIST) {
        char num[64];
        snprintf(num, sizeof num, "%.17g", item->valuedouble);
        return ptc_flags_set(fl, f, num, origin, err);
    }
    return 1;
}

int ptc_flags_parse_object(const ptc_flags_t *fl, const cJSON *obj, const char *where, FILE *err)
{
    if (!cJSON_IsObject(obj)) return PTC_EINVAL;
    const cJSON *item;
    cJSON_ArrayForEach(item, obj)
    {
        const ptc_flag_t *f = ptc_flags_find(fl, item->string, strlen(item->string));
        if (f == NULL) {
            fprintf(err, "%s: %s.%s is not a flag (see --help)\n", fl->prog, where, item->string);
            return PTC_EINVAL;
        }
        /* A flag switch given a non-boolean is the wrong type even when only the command
         * line may set it. */
        bool wrong = f->kind == PTC_FLAG_BOOL && !cJSON_IsBool(item);
        if (!wrong && cli_only(fl, f->name)) {
            fprintf(err, "%s: %s.%s is only a command-line flag\n", fl->prog, where, item->string);
            return PTC_EINVAL;
        }
        if (!wrong && ptc_flags_given(fl, f)) continue; /* the command line wins */
        int rc = wrong ? 1 : set_member(fl, f, item, err);
        if (rc < 0) return rc;
        if (rc > 0) {
            fprintf(err, "%s: %s.%s has the wrong type\n", fl->prog, where, item->string);
            return PTC_EINVAL;
        }
    }
    return 0;
}

void ptc_flags_usage(const ptc_flag_t *table, size_t n, FILE *out)
{
    for (size_t i = 0; i < n; i++) {
        const ptc_flag_t *f = &table[i];
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", f->name, f->arg ? " " : "", f->arg ? f->arg : "");
        fprintf(out, "  %-32s %s", left, f->help);
        if (f->dflt) fprintf(out, " [default: %s]", f->dflt);
        fputc('\n', out);
    }
}
