/*
 * model_tokenizer.c - BERT's WordPiece tokenizer: text cleaning, CJK splitting, lower-casing and
 * accent stripping, punctuation splitting, then greedy longest-match WordPiece with "##".
 *
 * It follows Hugging Face's fast BertNormalizer + BertPreTokenizer + WordPiece, which is what
 * sentence-transformers runs, so the ids equal the reference ids (tests/unit/model).
 */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

#define HANGUL_FIRST 0xAC00u
#define HANGUL_LAST  0xD7A3u
#define HANGUL_L     0x1100u
#define HANGUL_V     0x1161u
#define HANGUL_T     0x11A7u
#define HANGUL_NV    21u
#define HANGUL_NT    28u

/* ---- Unicode ---------------------------------------------------------------------------- */

static int uclass(uint32_t cp)
{
    size_t lo = 0, hi = model_class_run_count;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (model_class_runs[mid].start <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return model_class_runs[lo].cls;
}

/* Returns the replacement of cp in a map table, or NULL when cp maps to itself. */
static const uint32_t *umap(const model_umap_row_t *rows, size_t count, const uint32_t *seq,
                            uint32_t cp, size_t *len)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rows[mid].cp == cp) {
            *len = rows[mid].len;
            return seq + rows[mid].off;
        }
        if (rows[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Decodes one UTF-8 sequence (base's decoder); malformed input yields U+FFFD (which cleaning
 * drops) and consumes one byte, so decoding always advances. */
static uint32_t utf8_next(const unsigned char *s, size_t len, size_t *pos)
{
    unsigned cp;
    size_t n = ptc_utf8_decode((const char *)s + *pos, len - *pos, &cp);
    if (n == 0) {
        cp = 0xFFFD;
        n = 1;
    }
    *pos += n;
    return cp;
}

static size_t utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- vocabulary --------------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static int32_t vocab_find(const model_tokenizer_t *tok, const char *s, size_t n)
{
    size_t mask = tok->n_slots - 1;
    for (size_t i = (size_t)hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
        uint32_t slot = tok->slots[i];
        if (slot == 0) return -1;
        const model_vocab_entry_t *e = &tok->entries[slot - 1];
        if (e->len == n && memcmp(tok->strings + e->off, s, n) == 0) return e->id;
    }
}

/* Builds the hash over tok->entries; a token listed twice keeps its last id, as Python's
 * dict-based vocabulary loading does. */
static int vocab_index(model_tokenizer_t *tok)
{
    size_t slots = 16;
    while (slots < tok->n_entries * 2)
        slots *= 2;
    tok->slots = calloc(slots, sizeof *tok->slots);
    if (tok->slots == NULL) return REG_MODEL_ENOMEM;
    tok->n_slots = slots;
    for (size_t k = 0; k < tok->n_entries; k++) {
        const model_vocab_entry_t *e = &tok->entries[k];
        const char *s = tok->strings + e->off;
        size_t i = (size_t)hash_bytes(s, e->len) & (slots - 1);
        for (;; i = (i + 1) & (slots - 1)) {
            uint32_t slot = tok->slots[i];
            if (slot == 0) {
                tok->slots[i] = (uint32_t)k + 1;
                break;
            }
            const model_vocab_entry_t *o = &tok->entries[slot - 1];
            if (o->len == e->len && memcmp(tok->strings + o->off, s, e->len) == 0) {
                tok->slots[i] = (uint32_t)k + 1;
                break;
            }
        }
        if (e->len > tok->longest) tok->longest = e->len;
        if ((size_t)e->id + 1 > tok->vocab_size) tok->vocab_size = (size_t)e->id + 1;
    }
    return REG_MODEL_OK;
}

/* vocab.txt: one token a line, the id is the line number. Takes text. */
static int vocab_from_txt(model_tokenizer_t *tok, char *text, size_t len, const char *path,
                          char *errmsg, size_t size)
{
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    lines += len > 0 && text[len - 1] != '\n';
    if (lines == 0 || lines > REG_MODEL_MAX_VOCAB) {
        free(text);
        return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                          "%s has %zu lines; a WordPiece vocabulary has 1..%u", path, lines,
                          REG_MODEL_MAX_VOCAB);
    }
    tok->entries = calloc(lines, sizeof *tok->entries);
    if (tok->entries == NULL) {
        free(text);
        return REG_MODEL_ENOMEM;
    }
    tok->strings = text;
    size_t start = 0;
    for (size_t i = 0; i <= len && tok->n_entries < lines; i++) {
        if (i < len && text[i] != '\n') continue;
        size_t end = i;
        if (end > start && text[end - 1] == '\r') end--;
        model_vocab_entry_t *e = &tok->entries[tok->n_entries];
        e->off = (uint32_t)start;
        e->len = (uint32_t)(end - start);
        e->id = (int32_t)tok->n_entries;
        tok->n_entries++;
        start = i + 1;
    }
    return REG_MODEL_OK;
}

/* tokenizer.json's model.vocab: {"token": id, ...}. */
static int vocab_from_json(model_tokenizer_t *tok, const cJSON *vocab, const char *path,
                           char *errmsg, size_t size)
{
    int count = cJSON_GetArraySize(vocab);
    if (!cJSON_IsObject(vocab) || count <= 0 || (unsigned)count > REG_MODEL_MAX_VOCAB)
        return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                          "%s: model.vocab must be an object of 1..%u tokens", path,
                          REG_MODEL_MAX_VOCAB);
    size_t bytes = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab)
    {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 ||
            it->valuedouble >= (double)REG_MODEL_MAX_VOCAB || it->string == NULL)
            return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                              "%s: model.vocab holds a bad id for token \"%.40s\"", path,
                              it->string ? it->string : "?");
        bytes += strlen(it->string) + 1;
    }
    tok->strings = malloc(bytes);
    tok->entries = calloc((size_t)count, sizeof *tok->entries);
    if (tok->strings == NULL || tok->entries == NULL) return REG_MODEL_ENOMEM;
    size_t off = 0;
    cJSON_ArrayForEach(it, vocab)
    {
        size_t n = strlen(it->string);
        memcpy(tok->strings + off, it->string, n + 1);
        model_vocab_entry_t *e = &tok->entries[tok->n_entries++];
        e->off = (uint32_t)off;
        e->len = (uint32_t)n;
        e->id = (int32_t)it->valueint;
        off += n + 1;
    }
    return REG_MODEL_OK;
}

static bool json_flag(const cJSON *obj, const char *key, bool dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return dflt;
}

static const char *json_str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Reads the normaliser and WordPiece settings of tokenizer.json; refuses pipelines this
 * tokenizer does not implement rather than producing different ids silently. */
static int settings_from_tokenizer_json(model_tokenizer_t *tok, const cJSON *root, const char *path,
                                        char *errmsg, size_t size)
{
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (cJSON_IsObject(norm)) {
        const char *type = json_str(norm, "type");
        if (type == NULL || strcmp(type, "BertNormalizer") != 0)
            return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                              "%s: normalizer \"%s\" is not supported (only BertNormalizer)", path,
                              type ? type : "?");
        tok->clean_text = json_flag(norm, "clean_text", true);
        tok->split_cjk = json_flag(norm, "handle_chinese_chars", true);
        tok->lowercase = json_flag(norm, "lowercase", true);
        tok->strip_accents = json_flag(norm, "strip_accents", tok->lowercase);
    }
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (cJSON_IsObject(pre)) {
        const char *type = json_str(pre, "type");
        if (type == NULL || strcmp(type, "BertPreTokenizer") != 0)
            return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                              "%s: pre_tokenizer \"%s\" is not supported (only BertPreTokenizer)",
                              path, type ? type : "?");
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (cJSON_IsObject(model)) {
        const char *type = json_str(model, "type");
        if (type != NULL && strcmp(type, "WordPiece") != 0)
            return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                              "%s: model type \"%s\" is not supported (only WordPiece)", path,
                              type);
        const char *prefix = json_str(model, "continuing_subword_prefix");
        if (prefix != NULL) {
            if (strlen(prefix) >= sizeof tok->prefix)
                return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                                  "%s: continuing_subword_prefix is too long", path);
            memcpy(tok->prefix, prefix, strlen(prefix) + 1);
            tok->prefix_len = strlen(prefix);
        }
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(model, "max_input_chars_per_word");
        if (cJSON_IsNumber(mx) && mx->valuedouble >= 1 && mx->valuedouble <= MODEL_MAX_WORD_CHARS)
            tok->max_word_chars = (size_t)mx->valueint;
    }
    return REG_MODEL_OK;
}

static int special_id(const model_tokenizer_t *tok, const char *name, int32_t *id, const char *dir,
                      char *errmsg, size_t size)
{
    *id = vocab_find(tok, name, strlen(name));
    if (*id < 0)
        return model_fail(errmsg, size, REG_MODEL_EFORMAT,
                          "the vocabulary in %s has no %s token; is it a BERT WordPiece model?",
                          dir, name);
    return REG_MODEL_OK;
}

void model_tokenizer_free(model_tokenizer_t *tok)
{
    if (tok == NULL) return;
    free(tok->strings);
    free(tok->entries);
    free(tok->slots);
    memset(tok, 0, sizeof *tok);
}

int model_tokenizer_load(model_tokenizer_t *tok, const char *dir, char *errmsg, size_t size)
{
    char path[4096];
    char *text = NULL;
    size_t len = 0;
    cJSON *tj = NULL;
    cJSON *tc = NULL;
    int rc;

    memset(tok, 0, sizeof *tok);
    tok->lowercase = tok->strip_accents = tok->split_cjk = tok->clean_text = true;
    memcpy(tok->prefix, "##", 3);
    tok->prefix_len = 2;
    tok->max_word_chars = 100;

    /* tokenizer_config.json is the slow tokenizer's view; tokenizer.json (read after it) is
     * what sentence-transformers actually runs, so it wins where both speak. */
    if (model_path(path, sizeof path, dir, "tokenizer_config.json") != REG_MODEL_OK)
        return model_fail(errmsg, size, REG_MODEL_EINVAL, "model folder path is too long");
    rc = model_read_json(path, &tc, errmsg, size);
    if (rc == REG_MODEL_OK) {
        tok->lowercase = json_flag(tc, "do_lower_case", true);
        tok->strip_accents = json_flag(tc, "strip_accents", tok->lowercase);
        tok->split_cjk = json_flag(tc, "tokenize_chinese_chars", true);
        cJSON_Delete(tc);
    } else if (rc != REG_MODEL_ENOENT) {
        return rc;
    }

    if (model_path(path, sizeof path, dir, "tokenizer.json") != REG_MODEL_OK)
        return model_fail(errmsg, size, REG_MODEL_EINVAL, "model folder path is too long");
    rc = model_read_json(path, &tj, errmsg, size);
    if (rc != REG_MODEL_OK && rc != REG_MODEL_ENOENT) return rc;
    if (tj != NULL) {
        rc = settings_from_tokenizer_json(tok, tj, path, errmsg, size);
        if (rc != REG_MODEL_OK) goto out;
    }

    if (model_path(path, sizeof path, dir, "vocab.txt") != REG_MODEL_OK) {
        rc = model_fail(errmsg, size, REG_MODEL_EINVAL, "model folder path is too long");
        goto out;
    }
    rc = model_read_file(path, REG_MODEL_MAX_JSON_BYTES, &text, &len);
    if (rc == REG_MODEL_OK) {
        rc = vocab_from_txt(tok, text, len, path, errmsg, size); /* takes text */
    } else if (rc == REG_MODEL_ENOENT && tj != NULL) {
        const cJSON *model = cJSON_GetObjectItemCaseSensitive(tj, "model");
        rc = vocab_from_json(tok, cJSON_GetObjectItemCaseSensitive(model, "vocab"),
                             "tokenizer.json", errmsg, size);
    } else if (rc == REG_MODEL_ENOENT) {
        rc = model_fail(errmsg, size, REG_MODEL_ENOENT,
                        "%s has neither vocab.txt nor tokenizer.json: it is not a BERT model "
                        "folder (point --embed-model-dir at one)",
                        dir);
    } else {
        rc = model_fail(errmsg, size, rc, "cannot read %s: %s", path, reg_strerror(rc));
    }
    if (rc != REG_MODEL_OK) goto out;
    rc = vocab_index(tok);
    if (rc != REG_MODEL_OK) {
        rc = model_fail(errmsg, size, rc, "out of memory indexing the vocabulary");
        goto out;
    }
    tok->longest += tok->prefix_len;
    rc = special_id(tok, "[CLS]", &tok->cls_id, dir, errmsg, size);
    if (rc == REG_MODEL_OK) rc = special_id(tok, "[SEP]", &tok->sep_id, dir, errmsg, size);
    if (rc == REG_MODEL_OK) rc = special_id(tok, "[UNK]", &tok->unk_id, dir, errmsg, size);

out:
    cJSON_Delete(tj);
    if (rc != REG_MODEL_OK) model_tokenizer_free(tok);
    return rc;
}

/* ---- encoding ------------------------------------------------------------------------------ */

/* The word being collected: UTF-8 bytes and the byte offset of each character. A word longer
 * than max_word_chars becomes [UNK] whatever it holds, so only its length is tracked past that. */
typedef struct word {
    char bytes[(MODEL_MAX_WORD_CHARS + 1) * 4];
    uint16_t starts[MODEL_MAX_WORD_CHARS + 2];
    size_t nbytes;
    size_t nchars;
} word_t;

typedef struct enc {
    const model_tokenizer_t *tok;
    int32_t *ids;
    size_t n;
    size_t limit; /* word pieces stop here (room for [SEP] is kept) */
    word_t w;
    char key[(MODEL_MAX_WORD_CHARS + 1) * 4 + 8];
} enc_t;

static void word_add(enc_t *e, uint32_t cp)
{
    word_t *w = &e->w;
    if (w->nchars < e->tok->max_word_chars + 1) {
        w->starts[w->nchars] = (uint16_t)w->nbytes;
        w->nbytes += utf8_put(cp, w->bytes + w->nbytes);
    }
    w->nchars++;
}

/* Greedy longest-match WordPiece of the current word; returns false once the sequence is full. */
static bool word_flush(enc_t *e)
{
    word_t *w = &e->w;
    const model_tokenizer_t *tok = e->tok;
    if (w->nchars == 0) return e->n < e->limit;
    size_t nchars = w->nchars;
    size_t first = e->n;
    w->nchars = 0;
    if (nchars > tok->max_word_chars) {
        w->nbytes = 0;
        if (e->n < e->limit) e->ids[e->n++] = tok->unk_id;
        return e->n < e->limit;
    }
    w->starts[nchars] = (uint16_t)w->nbytes;
    size_t start = 0;
    while (start < nchars) {
        size_t pre = start > 0 ? tok->prefix_len : 0;
        memcpy(e->key, tok->prefix, pre);
        int32_t found = -1;
        size_t end = nchars;
        for (; end > start; end--) {
            size_t len = (size_t)(w->starts[end] - w->starts[start]);
            if (pre + len > tok->longest) continue;
            memcpy(e->key + pre, w->bytes + w->starts[start], len);
            found = vocab_find(tok, e->key, pre + len);
            if (found >= 0) break;
        }
        if (found < 0) {
            /* One unknown piece makes the whole word [UNK], as in BERT. */
            e->n = first;
            break;
        }
        if (e->n < e->limit) e->ids[e->n++] = found;
        start = end;
    }
    if (start < nchars && e->n < e->limit) e->ids[e->n++] = tok->unk_id;
    w->nbytes = 0;
    return e->n < e->limit;
}

/* Feeds one normalised character: punctuation stands alone, anything else extends the word. */
static bool feed(enc_t *e, uint32_t cp)
{
    if (uclass(cp) == MODEL_U_PUNCT) {
        if (!word_flush(e)) return false;
        word_add(e, cp);
        return word_flush(e);
    }
    word_add(e, cp);
    return true;
}

/* Lower-cases and strips accents from one character as the tokenizer's settings ask, then
 * feeds the result. */
static bool normalise_and_feed(enc_t *e, uint32_t cp)
{
    const model_tokenizer_t *tok = e->tok;
    if (tok->strip_accents && cp >= HANGUL_FIRST && cp <= HANGUL_LAST) {
        /* NFD of a Hangul syllable is arithmetic: leading consonant, vowel, optional final. */
        uint32_t s = cp - HANGUL_FIRST;
        uint32_t t = s % HANGUL_NT;
        if (!feed(e, HANGUL_L + s / (HANGUL_NV * HANGUL_NT)) ||
            !feed(e, HANGUL_V + (s % (HANGUL_NV * HANGUL_NT)) / HANGUL_NT))
            return false;
        return t == 0 || feed(e, HANGUL_T + t);
    }
    size_t len = 0;
    const uint32_t *seq = NULL;
    if (tok->lowercase && tok->strip_accents)
        seq = umap(model_map_strip_lower_rows, model_map_strip_lower_count,
                   model_map_strip_lower_seq, cp, &len);
    else if (tok->lowercase)
        seq = umap(model_map_lower_rows, model_map_lower_count, model_map_lower_seq, cp, &len);
    else if (tok->strip_accents)
        seq = umap(model_map_strip_rows, model_map_strip_count, model_map_strip_seq, cp, &len);
    if (seq == NULL) return feed(e, cp);
    for (size_t i = 0; i < len; i++)
        if (!feed(e, seq[i])) return false;
    return true;
}

int model_tokenizer_encode(const model_tokenizer_t *tok, const char *text, size_t text_len,
                           int32_t *ids, size_t cap, size_t *n)
{
    if (tok == NULL || text == NULL || ids == NULL || cap < 2 || n == NULL) return REG_MODEL_EINVAL;
    enc_t *e = malloc(sizeof *e);
    if (e == NULL) return REG_MODEL_ENOMEM;
    e->tok = tok;
    e->ids = ids;
    e->limit = cap - 1;
    e->w.nbytes = e->w.nchars = 0;
    e->ids[0] = tok->cls_id;
    e->n = 1;

    const unsigned char *s = (const unsigned char *)text;
    if (text_len > REG_MODEL_MAX_TEXT_BYTES) text_len = REG_MODEL_MAX_TEXT_BYTES;
    size_t pos = 0;
    bool room = e->n < e->limit;
    while (room && pos < text_len) {
        uint32_t cp = utf8_next(s, text_len, &pos);
        int cls = uclass(cp);
        if (tok->clean_text && cls == MODEL_U_DROP) continue;
        if (cls == MODEL_U_SPACE) {
            room = word_flush(e);
        } else if (tok->split_cjk && cls == MODEL_U_CJK) {
            room = word_flush(e) && normalise_and_feed(e, cp) && word_flush(e);
        } else if (tok->strip_accents && cls == MODEL_U_MARK) {
            continue;
        } else {
            room = normalise_and_feed(e, cp);
        }
    }
    if (room) word_flush(e);
    e->ids[e->n++] = tok->sep_id;
    *n = e->n;
    free(e);
    return REG_MODEL_OK;
}
