/* repair.c - fingerprints of failures, code out of replies, the repair request and packet. */
#include "repair.h"

#include "base.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fingerprints look at this much of the end of stderr: a traceback is short. */
#define FP_SCAN_BYTES (64u << 10)
#define MSG_MAX       200 /* bytes of an exception message kept in a fingerprint */
#define FRAME_MAX     96  /* bytes of one "file:function" */
#define DIFF_LINES    20000u

const char *ptc_repair_strerror(int err)
{
    switch (err) {
        PTC_REPAIR_ERRORS(PTC_ERR_CASE)
    }
    return ptc_http_strerror(err);
}

const char ptc_repair_system_prompt[] =
    "You fix Python 3 programs that failed when run in a sandbox (no network; the tools of "
    "connected MCP servers are Python functions in the `tools` package). Change only what is "
    "needed to fix the error and keep what the program does. Reply with the complete fixed "
    "program in one ```python fenced block and nothing else.";

/* ---------------------------------------------------------------------------------------- */
/* Lines                                                                                     */

typedef struct line {
    const char *s;
    size_t n;
} line_t;

/* The next line of [*p, end): returns false at the end. */
static bool next_line(const char **p, const char *end, line_t *out)
{
    if (*p >= end) return false;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    const char *e = nl ? nl : end;
    out->s = *p;
    out->n = (size_t)(e - *p);
    if (out->n > 0 && out->s[out->n - 1] == '\r') out->n--;
    *p = nl ? nl + 1 : end;
    return true;
}

static bool starts(line_t l, const char *prefix)
{
    size_t k = strlen(prefix);
    return l.n >= k && memcmp(l.s, prefix, k) == 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Fingerprints                                                                              */

/* Appends src[0..n) to out (of size) at *len, with 0x-hex and digit runs as '#' and white space
 * collapsed, at most max bytes of it. */
static void put_normalised(char *out, size_t size, size_t *len, const char *src, size_t n,
                           size_t max)
{
    size_t start = *len;
    bool space = false;
    for (size_t i = 0; i < n && *len + 1 < size && *len - start < max; i++) {
        unsigned char ch = (unsigned char)src[i];
        if (ch == '0' && i + 1 < n && (src[i + 1] == 'x' || src[i + 1] == 'X') && i + 2 < n &&
            isxdigit((unsigned char)src[i + 2])) {
            i += 2;
            while (i + 1 < n && isxdigit((unsigned char)src[i + 1]))
                i++;
            if (*len + 3 < size) {
                memcpy(out + *len, "0x#", 3);
                *len += 3;
            }
            space = false;
            continue;
        }
        if (isdigit(ch)) {
            while (i + 1 < n && isdigit((unsigned char)src[i + 1]))
                i++;
            out[(*len)++] = '#';
            space = false;
            continue;
        }
        if (isspace(ch)) {
            if (!space && *len > start) out[(*len)++] = ' ';
            space = true;
            continue;
        }
        out[(*len)++] = (char)ch;
        space = false;
    }
    while (*len > start && out[*len - 1] == ' ')
        (*len)--;
    out[*len] = '\0';
}

static void put_raw(char *out, size_t size, size_t *len, const char *s)
{
    size_t n = strlen(s);
    if (*len + 1 >= size) return;
    if (n > size - 1 - *len) n = size - 1 - *len;
    memcpy(out + *len, s, n);
    *len += n;
    out[*len] = '\0';
}

/* A frame line: `  File "F", line N, in FN` (the ", in FN" part is absent for syntax errors). */
typedef struct frame {
    char where[FRAME_MAX];
    unsigned line;
    bool program; /* F is "<string>", the program itself */
} frame_t;

static bool parse_frame(line_t l, frame_t *f)
{
    size_t i = 0;
    while (i < l.n && l.s[i] == ' ')
        i++;
    if (i == 0 || l.n - i < 7 || memcmp(l.s + i, "File \"", 6) != 0) return false;
    i += 6;
    const char *file = l.s + i;
    const char *q = memchr(file, '"', l.n - i);
    if (q == NULL) return false;
    size_t flen = (size_t)(q - file);
    /* The base name: paths differ between hosts, the file does not. */
    const char *base = file;
    for (const char *p = file; p < q; p++)
        if (*p == '/') base = p + 1;
    const char *rest = q + 1;
    size_t rn = l.n - (size_t)(rest - l.s);
    unsigned line = 0;
    if (rn > 7 && memcmp(rest, ", line ", 7) == 0) {
        for (size_t k = 7; k < rn && isdigit((unsigned char)rest[k]); k++)
            line = line * 10 + (unsigned)(rest[k] - '0');
    }
    const char *in = NULL;
    for (size_t k = 0; k + 5 <= rn; k++)
        if (memcmp(rest + k, ", in ", 5) == 0) {
            in = rest + k + 5;
            break;
        }
    size_t inlen = in ? rn - (size_t)(in - rest) : 0;
    snprintf(f->where, sizeof f->where, "%.*s:%.*s", (int)(q - base), base, (int)inlen,
             in ? in : "");
    f->line = line;
    f->program = flen == 8 && memcmp(file, "<string>", 8) == 0;
    return true;
}

/* An exception line: at column 0, "Name" or "Name: message" where Name is a dotted
 * identifier whose last part is capitalised, as class names are (so "usage: ..." is not one).
 * Returns the length of the name (0: not one). */
static size_t exception_name(line_t l)
{
    if (l.n == 0 || !(isalpha((unsigned char)l.s[0]) || l.s[0] == '_')) return 0;
    size_t i = 0;
    size_t last = 0; /* start of the last dotted component: a class name, capitalised */
    while (i < l.n && (isalnum((unsigned char)l.s[i]) || l.s[i] == '_' || l.s[i] == '.')) {
        if (l.s[i] == '.') last = i + 1;
        i++;
    }
    if (last >= i || !isupper((unsigned char)l.s[last])) return 0;
    if (i == l.n || l.s[i] == ':') return i;
    return 0;
}

typedef struct tb {
    frame_t frames[PTC_REPAIR_FRAMES]; /* the innermost, oldest first */
    size_t n_frames;
    unsigned program_line; /* of the innermost "<string>" frame */
    line_t exc;            /* the exception line, or n == 0 */
    size_t exc_name;
    line_t last; /* the last non-empty line */
} tb_t;

static void scan_traceback(const char *text, tb_t *tb)
{
    memset(tb, 0, sizeof *tb);
    if (text == NULL) return;
    size_t n = strlen(text);
    const char *p = n > FP_SCAN_BYTES ? text + n - FP_SCAN_BYTES : text;
    const char *end = text + n;
    /* Frames since the last "Traceback" header, kept as a ring of the innermost ones. */
    frame_t ring[PTC_REPAIR_FRAMES];
    size_t count = 0;
    unsigned prog_line = 0;
    line_t l;
    while (next_line(&p, end, &l)) {
        if (l.n == 0) continue;
        tb->last = l;
        if (starts(l, "Traceback (most recent call last)")) {
            count = 0;
            prog_line = 0;
            continue;
        }
        frame_t f;
        if (parse_frame(l, &f)) {
            ring[count % PTC_REPAIR_FRAMES] = f;
            count++;
            if (f.program) prog_line = f.line;
            continue;
        }
        size_t name = exception_name(l);
        if (name > 0) {
            tb->exc = l;
            tb->exc_name = name;
            size_t k = count < PTC_REPAIR_FRAMES ? count : PTC_REPAIR_FRAMES;
            for (size_t i = 0; i < k; i++)
                tb->frames[i] = ring[(count - k + i) % PTC_REPAIR_FRAMES];
            tb->n_frames = k;
            tb->program_line = prog_line;
        }
    }
}

void ptc_repair_fingerprint(const char *status, int exit_code, const char *signal_name,
                            const char *err_text, char *out, size_t size)
{
    if (size == 0) return;
    out[0] = '\0';
    size_t len = 0;
    if (status == NULL) status = "error";
    if (strcmp(status, "timeout") == 0 || strcmp(status, "oom") == 0) {
        put_raw(out, size, &len, status);
        return;
    }
    if (strcmp(status, "killed") == 0) {
        put_raw(out, size, &len, "killed ");
        put_raw(out, size, &len, signal_name ? signal_name : "by a signal");
        return;
    }
    tb_t tb;
    scan_traceback(err_text, &tb);
    if (tb.exc.n == 0) {
        char head[32];
        snprintf(head, sizeof head, "exit %d", exit_code);
        put_raw(out, size, &len, head);
        if (tb.last.n > 0) {
            put_raw(out, size, &len, ": ");
            put_normalised(out, size, &len, tb.last.s, tb.last.n, MSG_MAX);
        }
        return;
    }
    /* The name as is, the message normalised. */
    put_normalised(out, size, &len, tb.exc.s, tb.exc_name, MSG_MAX);
    if (tb.exc.n > tb.exc_name + 1) {
        put_raw(out, size, &len, ": ");
        const char *m = tb.exc.s + tb.exc_name + 1;
        size_t mn = tb.exc.n - tb.exc_name - 1;
        put_normalised(out, size, &len, m, mn, MSG_MAX);
    }
    for (size_t i = 0; i < tb.n_frames; i++) {
        put_raw(out, size, &len, i == 0 ? " @ " : " > ");
        put_raw(out, size, &len, tb.frames[i].where);
    }
}

unsigned ptc_repair_failing_line(const char *err_text)
{
    tb_t tb;
    scan_traceback(err_text, &tb);
    return tb.exc.n > 0 ? tb.program_line : 0;
}

void ptc_repair_code_line(const char *code, unsigned n, char *out, size_t size)
{
    if (size == 0) return;
    out[0] = '\0';
    if (code == NULL || n == 0) return;
    const char *p = code, *end = code + strlen(code);
    line_t l;
    unsigned k = 0;
    while (next_line(&p, end, &l)) {
        if (++k < n) continue;
        size_t i = 0;
        while (i < l.n && (l.s[i] == ' ' || l.s[i] == '\t'))
            i++;
        snprintf(out, size, "%.*s", (int)(l.n - i), l.s + i);
        return;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Code out of a reply                                                                       */

typedef struct fence {
    const char *body, *body_end; /* the block's lines */
    bool python;
} fence_t;

/* A fence line: up to three spaces, then ``` or ~~~ (3 or more). Returns the fence length and
 * its character, 0 when not one. */
static size_t fence_of(line_t l, char *ch, size_t *indent)
{
    size_t i = 0;
    while (i < l.n && i < 3 && l.s[i] == ' ')
        i++;
    if (i >= l.n || (l.s[i] != '`' && l.s[i] != '~')) return 0;
    char c = l.s[i];
    size_t k = i;
    while (k < l.n && l.s[k] == c)
        k++;
    if (k - i < 3) return 0;
    *ch = c;
    *indent = i;
    return k - i;
}

static bool info_is_python(line_t l, size_t from)
{
    while (from < l.n && l.s[from] == ' ')
        from++;
    size_t e = from;
    while (e < l.n && !isspace((unsigned char)l.s[e]) && l.s[e] != '{')
        e++;
    size_t n = e - from;
    static const char *const names[] = {"python", "py", "python3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && strncasecmp(l.s + from, names[i], n) == 0) return true;
    return false;
}

/* Finds the first python block (or, when none, the first block). */
static bool find_block(const char *reply, fence_t *out)
{
    const char *p = reply, *end = reply + strlen(reply);
    bool have_any = false;
    fence_t any = {0};
    line_t l;
    while (next_line(&p, end, &l)) {
        char ch;
        size_t indent;
        size_t flen = fence_of(l, &ch, &indent);
        if (flen == 0) continue;
        /* A backtick fence's info string has no backticks. */
        if (ch == '`' && memchr(l.s + indent + flen, '`', l.n - indent - flen) != NULL) continue;
        fence_t f = {.body = p, .body_end = end, .python = info_is_python(l, indent + flen)};
        const char *q = p;
        bool closed = false;
        for (;;) {
            const char *line_start = q;
            line_t m;
            if (!next_line(&q, end, &m)) break;
            char ch2;
            size_t ind2;
            size_t flen2 = fence_of(m, &ch2, &ind2);
            if (flen2 < flen || ch2 != ch) continue;
            size_t k = ind2 + flen2;
            while (k < m.n && (m.s[k] == ' ' || m.s[k] == '\t'))
                k++;
            if (k == m.n) {
                f.body_end = line_start;
                closed = true;
                break;
            }
        }
        p = closed ? q : end;
        if (f.python) {
            *out = f;
            return true;
        }
        if (!have_any) {
            any = f;
            have_any = true;
        }
    }
    if (have_any) *out = any;
    return have_any;
}

/* Copies [s, e) without blank lines at either end and without the indentation all its lines
 * share (a block indented inside a list item), ending in one newline. */
static char *trimmed_copy(const char *s, const char *e)
{
    /* Leading blank lines. */
    for (;;) {
        const char *q = s;
        while (q < e && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q < e && *q == '\n') {
            s = q + 1;
            continue;
        }
        if (q == e) s = e;
        break;
    }
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    /* The shared indentation of the non-blank lines. */
    size_t common = SIZE_MAX;
    const char *p = s;
    line_t l;
    while (next_line(&p, e, &l)) {
        size_t k = 0;
        while (k < l.n && (l.s[k] == ' ' || l.s[k] == '\t'))
            k++;
        if (k < l.n && k < common) common = k;
    }
    if (common == SIZE_MAX) common = 0;
    size_t n = (size_t)(e - s);
    char *out = malloc(n + 2);
    if (out == NULL) return NULL;
    size_t len = 0;
    p = s;
    while (next_line(&p, e, &l)) {
        size_t k = l.n < common ? l.n : common;
        memcpy(out + len, l.s + k, l.n - k);
        len += l.n - k;
        out[len++] = '\n';
    }
    out[len] = '\0';
    return out;
}

char *ptc_repair_extract_code(const char *reply)
{
    if (reply == NULL) reply = "";
    fence_t f;
    if (find_block(reply, &f)) return trimmed_copy(f.body, f.body_end);
    return trimmed_copy(reply, reply + strlen(reply));
}

bool ptc_repair_same_code(const char *a, const char *b)
{
    char *x = trimmed_copy(a, a + strlen(a));
    char *y = trimmed_copy(b, b + strlen(b));
    bool same = false;
    if (x != NULL && y != NULL) {
        const char *p = x, *q = y, *pe = x + strlen(x), *qe = y + strlen(y);
        line_t l, m;
        for (;;) { /* every way out says whether the code is the same */
            bool hl = next_line(&p, pe, &l), hm = next_line(&q, qe, &m);
            if (!hl || !hm) {
                same = hl == hm;
                break;
            }
            while (l.n > 0 && isspace((unsigned char)l.s[l.n - 1]))
                l.n--;
            while (m.n > 0 && isspace((unsigned char)m.s[m.n - 1]))
                m.n--;
            if (l.n != m.n || memcmp(l.s, m.s, l.n) != 0) {
                same = false;
                break;
            }
        }
    }
    free(x);
    free(y);
    return same;
}

/* ---------------------------------------------------------------------------------------- */
/* Diff summary                                                                              */

static uint64_t line_hash(line_t l)
{
    uint64_t h = 1469598103934665603ull;
    while (l.n > 0 && isspace((unsigned char)l.s[l.n - 1]))
        l.n--;
    for (size_t i = 0; i < l.n; i++) {
        h ^= (unsigned char)l.s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t *hashes(const char *text, size_t *n)
{
    *n = 0;
    const char *p = text, *end = text + strlen(text);
    line_t l;
    size_t count = 0;
    while (count < DIFF_LINES && next_line(&p, end, &l))
        count++;
    uint64_t *h = malloc((count ? count : 1) * sizeof *h);
    if (h == NULL) return NULL;
    p = text;
    while (*n < count && next_line(&p, end, &l))
        h[(*n)++] = line_hash(l);
    qsort(h, *n, sizeof *h, cmp_u64);
    return h;
}

void ptc_repair_diff_summary(const char *before, const char *after, char *out, size_t size)
{
    size_t na, nb;
    uint64_t *a = hashes(before ? before : "", &na);
    uint64_t *b = hashes(after ? after : "", &nb);
    if (a == NULL || b == NULL) {
        snprintf(out, size, "changed");
        free(a);
        free(b);
        return;
    }
    size_t i = 0, k = 0, added = 0, removed = 0;
    while (i < na || k < nb) {
        if (k == nb || (i < na && a[i] < b[k])) {
            removed++;
            i++;
        } else if (i == na || b[k] < a[i]) {
            added++;
            k++;
        } else {
            i++;
            k++;
        }
    }
    free(a);
    free(b);
    snprintf(out, size, "+%zu -%zu lines", added, removed);
}

/* ---------------------------------------------------------------------------------------- */
/* The request and the packet                                                                */

char *ptc_repair_prompt(const char *code, unsigned attempt, const char *error_tail,
                        const char *signatures)
{
    static const char head[] = "This Python program failed when it was run (attempt %u):\n\n"
                               "```python\n";
    static const char mid[] = "```\n\nThe last lines of the error:\n\n```\n";
    static const char sigs[] = "```\n\nTools the program uses (Python signatures):\n";
    static const char tail[] =
        "\nCalls to tools that already succeeded are answered again with their first results "
        "when the fixed program repeats them (same tool, same arguments, same order), so keep "
        "them as they are.\n\nReply with the complete fixed program in one ```python block.";
    if (error_tail == NULL) error_tail = "";
    bool have_sigs = signatures != NULL && signatures[0] != '\0';
    size_t cl = strlen(code), el = strlen(error_tail), sl = have_sigs ? strlen(signatures) : 0;
    size_t cap = sizeof head + 16 + cl + 2 + sizeof mid + el + 2 + sizeof sigs + sl + sizeof tail;
    char *s = malloc(cap);
    if (s == NULL) return NULL;
    int n = snprintf(s, cap, head, attempt);
    size_t len = n > 0 ? (size_t)n : 0;
    memcpy(s + len, code, cl);
    len += cl;
    if (cl == 0 || code[cl - 1] != '\n') s[len++] = '\n';
    memcpy(s + len, mid, sizeof mid - 1);
    len += sizeof mid - 1;
    memcpy(s + len, error_tail, el);
    len += el;
    if (el == 0 || error_tail[el - 1] != '\n') s[len++] = '\n';
    if (have_sigs) {
        memcpy(s + len, sigs, sizeof sigs - 1);
        len += sizeof sigs - 1;
        memcpy(s + len, signatures, sl);
        len += sl;
    } else {
        memcpy(s + len, "```\n", 4);
        len += 4;
    }
    memcpy(s + len, tail, sizeof tail);
    return s;
}

cJSON *ptc_repair_packet(const char *fingerprint, const char *error_tail, unsigned line,
                         const char *line_text)
{
    cJSON *p = cJSON_CreateObject();
    bool ok = p != NULL && cJSON_AddStringToObject(p, "fingerprint", fingerprint) != NULL &&
              cJSON_AddStringToObject(p, "last_lines", error_tail ? error_tail : "") != NULL &&
              (line > 0 ? cJSON_AddNumberToObject(p, "line", line)
                        : cJSON_AddNullToObject(p, "line")) != NULL &&
              (line > 0 && line_text != NULL ? cJSON_AddStringToObject(p, "failing_line", line_text)
                                             : cJSON_AddNullToObject(p, "failing_line")) != NULL;
    if (!ok) {
        cJSON_Delete(p);
        return NULL;
    }
    return p;
}

char *ptc_repair_content_text(const cJSON *content)
{
    if (cJSON_IsString(content)) return strdup(content->valuestring);
    if (cJSON_IsObject(content)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(content, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(content, "text");
        if (cJSON_IsString(type) && strcmp(type->valuestring, "text") == 0 && cJSON_IsString(text))
            return strdup(text->valuestring);
        return NULL;
    }
    if (!cJSON_IsArray(content)) return NULL;
    ptc_buf_t out;
    /* Far past the reply's cap (refused as too long by the repairers) yet bounded. */
    ptc_buf_init(&out, PTC_CAP_REPAIR_CONTENT);
    bool any = false;
    const cJSON *block;
    cJSON_ArrayForEach(block, content)
    {
        char *t = ptc_repair_content_text(block);
        if (t == NULL) continue;
        if (out.len > 0) ptc_buf_str(&out, "\n");
        ptc_buf_str(&out, t);
        any = true;
        free(t);
    }
    if (!any) return NULL;
    return ptc_buf_take(&out, NULL);
}
