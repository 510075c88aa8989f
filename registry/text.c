/* text.c - identifier splitting, light stemming, stop words and tokenising. */
#include "internal.h"

#include "base.h"

#include <stdlib.h>
#include <string.h>

static int is_lower(unsigned char c)
{
    return c >= 'a' && c <= 'z';
}
static int is_upper(unsigned char c)
{
    return c >= 'A' && c <= 'Z';
}
static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}
/* Bytes >= 0x80 are parts of UTF-8 sequences: kept inside words so that non-English names
 * still match themselves, without pretending to know their case rules. */
static int is_word(unsigned char c)
{
    return is_lower(c) || is_upper(c) || is_digit(c) || c >= 0x80;
}

int reg_text_split(const char *text, char *out, size_t out_size)
{
    if (text == NULL || out == NULL || out_size == 0) return REG_EINVAL;
    const unsigned char *s = (const unsigned char *)text;
    size_t o = 0;
    int in_word = 0;
    for (size_t i = 0; s[i] != 0; i++) {
        unsigned char c = s[i];
        if (!is_word(c)) {
            in_word = 0;
            continue;
        }
        int boundary = !in_word;
        if (in_word && is_upper(c)) {
            unsigned char p = s[i - 1];
            /* getUser: lower/digit then upper. HTTPServer: the S starts a word because the
             * next letter is lower and the previous one was upper. */
            if (is_lower(p) || is_digit(p))
                boundary = 1;
            else if (is_upper(p) && is_lower(s[i + 1]))
                boundary = 1;
        }
        if (boundary && o > 0) {
            if (o + 1 >= out_size) {
                out[o] = 0;
                return REG_ETOOBIG;
            }
            out[o++] = ' ';
        }
        if (o + 1 >= out_size) {
            out[o] = 0;
            return REG_ETOOBIG;
        }
        out[o++] = is_upper(c) ? (char)(c - 'A' + 'a') : (char)c;
        in_word = 1;
    }
    out[o] = 0;
    return (int)o;
}

static int ends(const char *w, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && memcmp(w + n - k, suf, k) == 0;
}

static int is_vowel(char c)
{
    return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || c == 'y';
}

static int has_vowel(const char *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (is_vowel(w[i])) return 1;
    return 0;
}

size_t reg_text_stem(char *w)
{
    size_t n = strlen(w);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)w[i] >= 0x80 || is_digit((unsigned char)w[i])) return n;
    if (n <= 3) return n;
    /* Plurals. */
    if (ends(w, n, "sses"))
        n -= 2;
    else if (ends(w, n, "ies") && n > 4) {
        n -= 3;
        w[n++] = 'y';
    } else if (w[n - 1] == 's' && !ends(w, n, "ss") && !ends(w, n, "us") && !ends(w, n, "is"))
        n -= 1;
    /* Verb and adverb endings, only when a plausible stem (with a vowel) remains. */
    size_t cut = 0;
    if (ends(w, n, "ing") && n >= 6 && has_vowel(w, n - 3))
        cut = 3;
    else if (ends(w, n, "ed") && !ends(w, n, "eed") && n >= 5 && has_vowel(w, n - 2))
        cut = 2;
    else if (ends(w, n, "ly") && n >= 6)
        cut = 2;
    if (cut > 0) {
        n -= cut;
        /* running -> run, stopped -> stop; but keep "ll", "ss", "zz" (install, process). */
        if (n >= 3 && w[n - 1] == w[n - 2] && !is_vowel(w[n - 1]) && w[n - 1] != 'l' &&
            w[n - 1] != 's' && w[n - 1] != 'z')
            n -= 1;
        if (ends(w, n, "i") && n > 3) w[n - 1] = 'y'; /* copied -> copy */
    }
    /* A final silent e goes, so that create/created/creating all end as "creat". */
    if (n > 4 && w[n - 1] == 'e') n -= 1;
    w[n] = 0;
    return n;
}

static const char *const stopwords[] = {
    "a",     "about", "all",   "am",   "an",     "and",   "any",    "are",  "as",    "at",
    "be",    "been",  "but",   "by",   "can",    "could", "did",    "do",   "does",  "for",
    "from",  "had",   "has",   "have", "he",     "her",   "here",   "him",  "his",   "how",
    "i",     "if",    "in",    "into", "is",     "it",    "its",    "just", "me",    "my",
    "of",    "on",    "or",    "our",  "please", "she",   "should", "so",   "some",  "than",
    "that",  "the",   "their", "them", "then",   "there", "these",  "they", "this",  "those",
    "to",    "too",   "us",    "was",  "we",     "were",  "what",   "when", "where", "which",
    "while", "who",   "whom",  "why",  "will",   "with",  "would",  "you",  "your",  "yours",
};

bool reg_text_is_stopword(const char *word)
{
    size_t lo = 0, hi = sizeof stopwords / sizeof stopwords[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(word, stopwords[mid]);
        if (c == 0) return true;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return false;
}

int reg__tokenize(const char *text, bool stem, bool drop_stopwords, reg__tokens_t *out)
{
    memset(out, 0, sizeof *out);
    size_t len = strnlen(text, REG_TEXT_MAX * 4);
    /* Splitting adds at most one space per input byte. */
    size_t cap = 2 * len + 2;
    out->buf = malloc(cap);
    if (out->buf == NULL) return REG_ENOMEM;
    char *src = malloc(len + 1);
    if (src == NULL) {
        reg__tokens_free(out);
        return REG_ENOMEM;
    }
    memcpy(src, text, len);
    src[len] = 0;
    int n = reg_text_split(src, out->buf, cap);
    free(src);
    if (n < 0) {
        reg__tokens_free(out);
        return n;
    }
    size_t words = 1;
    for (int i = 0; i < n; i++)
        words += out->buf[i] == ' ';
    out->tok = malloc(words * sizeof *out->tok);
    if (out->tok == NULL) {
        reg__tokens_free(out);
        return REG_ENOMEM;
    }
    char *save = NULL;
    for (char *w = strtok_r(out->buf, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
        if (drop_stopwords && reg_text_is_stopword(w)) continue;
        if (stem) reg_text_stem(w);
        out->tok[out->n++] = w;
    }
    return REG_OK;
}

void reg__tokens_free(reg__tokens_t *t)
{
    free(t->buf);
    free(t->tok);
    memset(t, 0, sizeof *t);
}

/* ---- a tool's parts (reg_tool_part_texts) ------------------------------------------------ */

/* Appends len bytes of s to the NUL-terminated buf of size bytes, cut where buf ends (on a
 * character boundary). */
static void part_cat(char *buf, size_t size, const char *s, size_t len)
{
    size_t n = strlen(buf);
    if (n + 1 >= size) return;
    len = ptc_utf8_cut(s, len, size - 1 - n);
    memcpy(buf + n, s, len);
    buf[n + len] = 0;
}

/* Appends an identifier split into words ("listMergeRequests" -> "list merge requests"),
 * after a blank when buf is not empty. */
static void part_cat_split(char *buf, size_t size, const char *ident)
{
    char tmp[2 * REG_NAME_MAX + 2];
    if (ident == NULL) return;
    int n = reg_text_split(ident, tmp, sizeof tmp);
    if (n <= 0 && n != REG_ETOOBIG) return;
    if (buf[0]) part_cat(buf, size, " ", 1);
    part_cat(buf, size, tmp, strlen(tmp));
}

static bool sentence_end(const char *e)
{
    return (*e == '.' || *e == '!' || *e == '?') &&
           (e[1] == 0 || e[1] == ' ' || e[1] == '\n' || e[1] == '\t');
}

/* The next sentence of at least 3 words at or after *s (leading blanks and list markers
 * skipped; a newline ends a sentence too): its start and length. Advances *s past it. */
static bool next_sentence(const char **s, const char **start, size_t *len)
{
    const char *p = *s;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '-' || *p == '*')
            p++;
        const char *e = p;
        while (*e && *e != '\n' && !sentence_end(e))
            e++;
        size_t n = (size_t)(e - p) + (*e && *e != '\n' ? 1 : 0);
        size_t words = 0;
        for (size_t i = 0; i < n; i++)
            if ((i == 0 || p[i - 1] == ' ') && p[i] != ' ') words++;
        const char *next = *e ? e + 1 : e;
        if (n > 0 && words >= 3) {
            *start = p;
            *len = n;
            *s = next;
            return true;
        }
        p = next;
    }
    *s = p;
    return false;
}

int reg_tool_part_texts(const reg_tool_t *tool, char **out, size_t max)
{
    if (tool == NULL || (max > 0 && out == NULL)) return REG_EINVAL;
    const char *s = tool->description ? tool->description : "";
    char buf[REG_EMBED_TEXT_MAX];
    size_t n = 0;
    while (n < max) {
        const char *st = NULL;
        size_t len = 0;
        bool have = next_sentence(&s, &st, &len);
        if (!have && n > 0) break;
        buf[0] = 0;
        if (n == 0) { /* the head: who and what, then the purpose */
            part_cat_split(buf, sizeof buf, tool->server);
            part_cat_split(buf, sizeof buf, tool->name);
            if (have) part_cat(buf, sizeof buf, ". ", 2);
        } else {
            part_cat_split(buf, sizeof buf, tool->name);
            part_cat(buf, sizeof buf, ": ", 2);
        }
        if (have) part_cat(buf, sizeof buf, st, len);
        out[n] = reg__strdup(buf);
        if (out[n] == NULL) {
            while (n-- > 0)
                free(out[n]);
            return REG_ENOMEM;
        }
        n++;
        if (!have) break;
    }
    return (int)n;
}
