/*
 * base.h - the small pieces every library of ptc-mcp needs once: a growable byte buffer and a
 * growable array, each with a hard cap, a file reader with a size cap, UTF-8 checks (validate,
 * sanitise, count, cut at a character boundary), strict decimal numbers and a flag table (command
 * line, config object and --help from one table). No I/O but the file reader and the flags'
 * messages; no global state; thread-safe per object.
 *
 * Functions return 0 or a negative errno value (PTC_ENOMEM is -ENOMEM ...); ptc_strerror()
 * names it. The error space of all the libraries is set out here too (section errors). Every cap a
 * library gives a buffer is a named constant below, so the limits of the whole program can be read
 * in one place.
 */
#ifndef PTC_BASE_H
#define PTC_BASE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- errors ------------------------------------------------------------------------------ */
/*
 * One error space for the whole program, the libuv way: every library returns 0 or a negative
 * code, and a value means one thing whichever library returns it, so a caller passes a code on
 * instead of translating it. A code with a POSIX meaning IS the negative errno value (PTC_ENOMEM,
 * MCP_ENOMEM, EXEC_ENOMEM ... are all -ENOMEM). The extras of a library, which have no errno
 * meaning, live in a block of PTC_ERR_BLOCK values of its own below PTC_ERR_ERRNO_MIN, where no
 * errno value reaches (libuv's UV__EOF does the same); the blocks are named here, in one place,
 * so that no two libraries collide.
 *
 * Each library lists its codes once, in an X-macro table in its header, X(NAME, VALUE, TEXT):
 * PTC_ERR_ENUM makes the enum of it and PTC_ERR_CASE the cases of its one *_strerror, which
 * names any other code through the strerror of the library it is built on, and at the end of
 * that chain ptc_strerror, which names the errno values below (tests/unit/errors checks it all).
 */
#define PTC_ERR_ERRNO_MIN (-4095) /* errno values are -1 ... -4095 */
#define PTC_ERR_BLOCK     100     /* values in a library's block: base ... base - 99 */
#define PTC_ERR_MCP       (-5000) /* mcp/ */
#define PTC_ERR_EXEC      (-5100) /* executor/ */
#define PTC_ERR_REG       (-5200) /* registry/ */
#define PTC_ERR_BRIDGE    (-5300) /* bridge/ (all its codes are errno values so far) */
#define PTC_ERR_HTTP      (-5400) /* httpc/ */
#define PTC_ERR_ENV       (-5500) /* environment/ */
#define PTC_ERR_PYBUNDLE  (-5600) /* pybundle/ */
#define PTC_ERR_REPAIR    (-5700) /* repair/ */

/* Whether err is one of the extras of the library whose block starts at base. */
#define PTC_ERR_IN_BLOCK(err, base) ((err) <= (base) && (err) > (base)-PTC_ERR_BLOCK)

#define PTC_ERR_ENUM(name, value, text) name = (value),
#define PTC_ERR_CASE(name, value, text)                                                            \
    case (value):                                                                                  \
        return (text);

/* The errno values the libraries use, with the text that names them anywhere. */
#define PTC_ERRORS(X)                                                                              \
    X(PTC_OK, 0, "success")                                                                        \
    X(PTC_ENOMEM, -ENOMEM, "out of memory")                                                        \
    X(PTC_EINVAL, -EINVAL, "invalid argument")                                                     \
    X(PTC_ETOOBIG, -E2BIG, "size limit exceeded") /* E2BIG: "argument list too long" */            \
    X(PTC_ERANGE, -ERANGE, "number out of range")                                                  \
    X(PTC_ENOENT, -ENOENT, "no such file or directory")                                            \
    X(PTC_EEXIST, -EEXIST, "already exists")                                                       \
    X(PTC_EACCES, -EACCES, "permission denied")                                                    \
    X(PTC_EPERM, -EPERM, "operation not permitted")                                                \
    X(PTC_EISDIR, -EISDIR, "is a directory")                                                       \
    X(PTC_EIO, -EIO, "input/output error")                                                         \
    X(PTC_ENOSPC, -ENOSPC, "no space left")                                                        \
    X(PTC_ETIMEDOUT, -ETIMEDOUT, "timed out")                                                      \
    X(PTC_ECANCELED, -ECANCELED, "cancelled")                                                      \
    X(PTC_EBUSY, -EBUSY, "resource busy")                                                          \
    X(PTC_EAGAIN, -EAGAIN, "resource temporarily unavailable")                                     \
    X(PTC_ENOTSUP, -ENOTSUP, "not supported")                                                      \
    X(PTC_EPROTO, -EPROTO, "protocol error")                                                       \
    X(PTC_EPIPE, -EPIPE, "connection or object closed")                                            \
    X(PTC_ECONNREFUSED, -ECONNREFUSED, "connection refused")                                       \
    X(PTC_ECONNRESET, -ECONNRESET, "connection reset by peer")                                     \
    X(PTC_ESHUTDOWN, -ESHUTDOWN, "shutting down")

typedef enum ptc_err { PTC_ERRORS(PTC_ERR_ENUM) } ptc_err_t;

/** A static sentence for err (0, a PTC_E* value or any negative errno value; "system error"
 *  for an errno value not in the table, "unknown error" below PTC_ERR_ERRNO_MIN). */
const char *ptc_strerror(int err);

/* ---- caps -------------------------------------------------------------------------------- */
/* The most bytes a buffer may grow to (the terminating NUL not counted). Caps that are part of */
/* a library's own interface stay named in its header (REG_TEXT_MAX, REG_EMBED_TEXT_MAX and    */
/* REG_FILE_MAX in registry.h, PTC_PYBUNDLE_FILE_MAX in pybundle.h, the HTTP client's options */
/* in httpc.h); these are the rest.                                                          */

#define PTC_CAP_SEARCH_TEXT     (1u << 20)  /* server: search_tools' text for the model */
#define PTC_CAP_RESOURCE_TEXT   (64u << 20) /* server: one ptc://output page as text */
#define PTC_CAP_EXECUTE_TEXT    (64u << 20) /* server: execute_code's notes, files, description */
#define PTC_CAP_REPAIR_TEXT     (1u << 20)  /* repair: a failure's tail, the self-healing text */
#define PTC_CAP_REPAIR_CONTENT  (16u << 20) /* repair: a model message's text blocks joined */
#define PTC_CAP_CLIENT_EXPANDED (64u << 10) /* mcp: ${VAR} expansion, a PATH (NUL counted) */
#define PTC_CAP_PACKAGE_SPEC    (64u << 10) /* server: a --packages spec, its clauses joined */
#define PTC_CAP_CONFIG_FILE     (64u << 20) /* server: a --config file */
#define PTC_CAP_STATE_KEY_FILE  4096u       /* server: a --state-key-file (a secret) */
/* mcp: an HTTP connection's unparsed input (pipelined requests while a response is pending):
 * past it the server stops reading, so its buffer holds at most one read more. */
#define PTC_CAP_HTTP_PENDING_INPUT (256u << 10)
/* mcp: a response's status line and headers, all of them made by the server (a few hundred
 * bytes): past it the connection is closed rather than a cut head sent. */
#define PTC_CAP_HTTP_HEAD (16u << 10)
/* registry: a sentence model's config.json and config_sentence_transformers.json (a few KB) */
#define PTC_CAP_MODEL_JSON_FILE (1u << 20)
/* registry: a remote embedder's answer to one batch (vectors as JSON numbers) */
#define PTC_CAP_REMOTE_EMBED_RESPONSE (64u << 20)
/* mcp: stdio output the client has not read yet: past it the client is not reading, and the
 * server stops taking its input until half is written, so a client that never reads cannot make
 * it buffer without bound (the output sits in two flat buffers: this is what the queue costs) */
#define PTC_CAP_STDIO_QUEUED_OUTPUT (64u << 20)
/* mcp: each of stdio's two output buffers (the one being written and the one gathering the next
 * write). Back-pressure bounds them: past PTC_CAP_STDIO_QUEUED_OUTPUT no more input is read, so
 * only the answers of requests already read can still come, each at most tens of MiB (64 MiB of
 * execute_code text, a resource page). Past this cap a message is dropped with a log line, and
 * an answer is replaced by a JSON-RPC error that says so. */
#define PTC_CAP_STDIO_OUTPUT_BUFFER ((size_t)4 * PTC_CAP_STDIO_QUEUED_OUTPUT)
/* repair: the fallback repairer's answer (one chat completion) */
#define PTC_CAP_REPAIR_RESPONSE (4u << 20)
/* executor: one request to the zygote (R and the launcher's argv, a few KB): the buffer it is
 * built in and the zygote script's receive buffer, which is spelt from it (so a plain number) */
#define PTC_CAP_ZYGOTE_REQUEST 65536
/* server: a prompt's "task" argument, the guide's last part (a longer one is cut on a character
 * boundary, with a note saying so) */
#define PTC_CAP_PROMPT_TASK 8192u

/* The most entries a growable array may hold (ptc_array_reserve's max), where no cap of a
 * library's interface bounds it already. Each is the bound the count has today, with room. */

/* executor: MCP sessions whose end waits for the workspace's next loop turn: at most the MCP
 * sessions alive at once (stdio's one, the HTTP transport's MCP_HTTP_DEFAULT_MAX_SESSIONS,
 * 1000); past it an ended session's runs, sessions, pages and files go by their own idle
 * timeouts and TTLs, as on ENOMEM (the wiring logs it) */
#define PTC_CAP_ENDED_OWNERS 65536u
/* registry: the embedding cache's entries one eviction pass lists and sorts by age: a file is
 * at least 84 bytes (header, one float, digest), so a cache at its default 256 MiB holds at
 * most 3.2 million; past it the pass evicts the oldest of those it listed */
#define PTC_CAP_CACHE_EVICT_SCAN (4u << 20)
/* registry: the features of one text in one group of the lexical embedder (n-grams, words or
 * word pairs): the tokenizer reads at most REG_TEXT_MAX * 4 bytes (256 KiB) and a word of n
 * bytes gives at most WORD_MAX * (n + 2) <= 3 * WORD_MAX * n n-grams (lexical.c checks it) */
#define PTC_CAP_TEXT_FEATURES (48u << 20)
/* registry: the F32 copies a loaded model owns: at most 17 per layer (MODEL_MAX_LAYERS, 64)
 * and 5 for the embeddings (model_bert_load.c checks it) */
#define PTC_CAP_MODEL_OWNED 2048u
/* environment: the distributions listed after a pip install (its target's *.dist-info folders):
 * what the --packages spec (PTC_CAP_PACKAGE_SPEC) pulls in with its dependencies, a few hundred
 * in practice; past it the list is left out, as when the folder cannot be read */
#define PTC_CAP_INSTALLED_PACKAGES 100000u
/* executor: the entries of a run's output folder the launcher looks at to send what the run
 * made (a one-shot run's at its end, a workspace session's before and after each cell): the
 * first this many names in byte order; the entries past them are neither compared nor sent */
#define PTC_CAP_SESSION_SNAPSHOT 1024u

/* ---- the capped buffer ------------------------------------------------------------------- */

/*
 * Bytes with a NUL kept after them. The first failure (PTC_ENOMEM, or PTC_ETOOBIG when an
 * append would pass max) sticks: later appends do nothing and return it, so a run of appends
 * can be checked once, with ptc_buf_error(). The fields are read-only outside buf.c.
 */
typedef struct ptc_buf {
    char *p;    /* NULL until the first byte; then NUL-terminated */
    size_t len; /* bytes held */
    size_t cap; /* bytes allocated */
    size_t max; /* most bytes the buffer may hold */
    int err;    /* the first failure, or 0 */
} ptc_buf_t;

/** An empty buffer that may grow to max bytes (plus its NUL). Allocates nothing. */
void ptc_buf_init(ptc_buf_t *b, size_t max);
/** Frees the bytes; the buffer is empty (and its error cleared) with the same max. */
void ptc_buf_free(ptc_buf_t *b);
/** Appends n bytes (data may be NULL when n is 0); 0, PTC_ETOOBIG or PTC_ENOMEM. */
int ptc_buf_append(ptc_buf_t *b, const void *data, size_t n);
/** Appends a NUL-terminated string. */
int ptc_buf_str(ptc_buf_t *b, const char *s);
/** Appends printf-formatted text, however long (within max). */
int ptc_buf_printf(ptc_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** The first failure, or 0. */
int ptc_buf_error(const ptc_buf_t *b);
/** Bytes held. */
size_t ptc_buf_len(const ptc_buf_t *b);
/** Keeps the first len bytes (len at most the length) and the memory, and clears a failure:
 *  what undoes a run of appends that failed, or empties a buffer for reuse. */
void ptc_buf_truncate(ptc_buf_t *b, size_t len);
/** Removes the first n bytes (all of them when n is at least the length), keeping the memory
 *  and a failure: what a reader does with the bytes it has handled. */
void ptc_buf_consume(ptc_buf_t *b, size_t n);
/** The text held ("" when empty; borrowed, valid until the next change). */
const char *ptc_buf_cstr(const ptc_buf_t *b);
/** Hands the bytes over (caller frees; "" allocated when empty) and empties the buffer; NULL
 *  after a failure (the bytes are freed) or on ENOMEM. *len (may be NULL) gets the length. */
char *ptc_buf_take(ptc_buf_t *b, size_t *len);

/* ---- the capped growable array ---------------------------------------------------------- */

/**
 * Makes room for need elements of elem bytes in the array whose pointer is at pv (a T **, the
 * pointer NULL while *cap is 0) and whose capacity, in elements, is *cap: it grows by doubling
 * from 16, never past max elements. 0 (room already, or grown); PTC_ETOOBIG when need > max or
 * need * elem overflows; PTC_ENOMEM; PTC_EINVAL for a NULL pv or cap or a zero elem. On failure
 * the array and *cap are unchanged.
 */
int ptc_array_reserve(void *pv, size_t *cap, size_t need, size_t elem, size_t max);

/* ---- files ------------------------------------------------------------------------------- */

/**
 * Reads a whole regular file into *out (caller frees; a NUL is added after the bytes, which may
 * hold NULs themselves) and its length into *len (may be NULL). PTC_ETOOBIG when it holds more
 * than max bytes, -errno when it cannot be opened or read, PTC_EINVAL for a directory or
 * another non-regular file. Blocking: not on the event loop's thread.
 */
int ptc_file_read(const char *path, size_t max, char **out, size_t *len);

/* ---- UTF-8 ------------------------------------------------------------------------------- */
/*
 * Valid means RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF. One rule for
 * NUL everywhere: a NUL byte is valid UTF-8 (ptc_utf8_valid accepts it), but text handed to a
 * model, a JSON parser or a C string API is sanitised, and sanitising replaces each NUL with
 * U+FFFD, and each maximal ill-formed subpart with one U+FFFD (Unicode's "substitution of
 * maximal subparts", as Python's errors="replace" does: a sequence cut short is one U+FFFD,
 * a byte that can start or continue nothing is one each).
 */

/** Whether the n bytes at s are valid UTF-8 (NUL bytes included). */
bool ptc_utf8_valid(const char *s, size_t n);
/** The length of the longest valid prefix of s[0..n); *cut_at_end (may be NULL) is true when
 *  what follows it is the start of a well-formed sequence that the end of the data cut short
 *  (data that is only the first bytes of something longer). */
size_t ptc_utf8_valid_len(const char *s, size_t n, bool *cut_at_end);
/** A NUL-terminated copy of the n bytes at s, sanitised (above); *out_len (may be NULL) gets
 *  its length. Caller frees; NULL on ENOMEM. */
char *ptc_utf8_sanitize(const char *s, size_t n, size_t *out_len);
/** The same without a copy when s needs nothing: returns how many replacements were made (0:
 *  *out is NULL, *out_len n) or PTC_ENOMEM; otherwise *out (caller frees) holds the sanitised
 *  text, NUL-terminated, and *out_len (may be NULL) its length. */
int ptc_utf8_clean(const char *s, size_t n, char **out, size_t *out_len);
/** The largest length <= max (and <= n) that does not split a multi-byte sequence of s:
 *  s[0..result) is valid when s[0..n) is. */
size_t ptc_utf8_cut(const char *s, size_t n, size_t max);
/** The length of the valid sequence at s[0..n) (1..4), or 0 when none starts there; *cp (may
 *  be NULL) gets its code point. */
size_t ptc_utf8_decode(const char *s, size_t n, unsigned *cp);
/** The characters of the valid UTF-8 at s[0..n): the bytes that are no continuation byte (a
 *  page's length in characters, JSON Schema's string length). */
size_t ptc_utf8_count(const char *s, size_t n);
/** The start of the last n lines of s (inside s; trailing newlines ignored, and kept): a
 *  traceback's end for a repair request or a failed run's result. */
const char *ptc_text_last_lines(const char *s, unsigned n);

/* ---- strict decimal numbers -------------------------------------------------------------- */
/* Digits only: no sign (but ptc_parse_int's '-'), no blanks, no overflow (PTC_ERANGE). With end */
/* NULL the number must end the string; else *end gets the first byte after it.               */

int ptc_parse_u64(const char *s, const char **end, uint64_t *out);
int ptc_parse_int(const char *s, const char **end, int *out);
/** n numbers, each after exactly one space: " 12 0 7" (the fields of a protocol line after its
 *  tag). 0, PTC_EINVAL or PTC_ERANGE; out[] may be partly written on failure. */
int ptc_parse_u64s(const char *s, uint64_t *out, size_t n, const char **end);

/* ---- the flag table ---------------------------------------------------------------------- */
/*
 * One table of flags drives the command line (--name VALUE, --name=VALUE), a config file's
 * object of the same flags by long name, and the --help lines. Each entry points into the
 * caller's options struct by offset; the kinds say what a value must be, and a value that is
 * not is refused with "PROG: --NAME: invalid value "V" (expected ARG)" on err. Text values
 * are borrowed (from argv or the object): they must outlive the options struct.
 */

struct cJSON;

typedef enum ptc_flag_kind {
    PTC_FLAG_BOOL, /* takes no value on the command line, a JSON boolean in an object: bool */
    PTC_FLAG_STR,  /* text: const char * */
    PTC_FLAG_SIZE, /* a size above 0, K/M/G (KiB/KB ...) suffixes allowed: size_t */
    PTC_FLAG_NUM,  /* a finite number above 0: double */
    PTC_FLAG_NUM0, /* a finite number, 0 or above (a wait that can be off): double */
    PTC_FLAG_LONG, /* a decimal integer, 0 or above: long */
    PTC_FLAG_LIST, /* repeatable text: const char *[list_max], its size_t count at count_offset */
} ptc_flag_kind_t;

typedef struct ptc_flag {
    const char *name; /* without the leading dashes */
    ptc_flag_kind_t kind;
    size_t offset;       /* of the value in the options struct */
    size_t count_offset; /* PTC_FLAG_LIST: of its size_t count */
    const char *arg;     /* the value's placeholder in --help and in refusals; NULL for BOOL */
    const char *help;
    const char *dflt; /* the default as --help says it, or NULL */
} ptc_flag_t;

/** One table applied to one options struct. Borrows everything it points to. */
typedef struct ptc_flags {
    const char *prog;        /* the first word of every message ("ptc-mcp") */
    const ptc_flag_t *table; /* n entries */
    size_t n;
    void *opts;                  /* the struct the offsets point into */
    unsigned char *given;        /* n bytes, zeroed by the caller: which flags were set */
    size_t list_max;             /* entries of every PTC_FLAG_LIST array */
    const char *const *cli_only; /* NULL-terminated names an object may not set (or NULL) */
} ptc_flags_t;

/** The entry named by the len bytes at name, or NULL. */
const ptc_flag_t *ptc_flags_find(const ptc_flags_t *fl, const char *name, size_t len);
/** Whether f (an entry of fl's table) was set by any ptc_flags_* call so far. */
bool ptc_flags_given(const ptc_flags_t *fl, const ptc_flag_t *f);
/**
 * Sets f from val (borrowed; NULL for a BOOL) and marks it given. origin follows the flag's
 * name in a refusal ("" or " (in the config file)"). 0, PTC_EINVAL for a value of the wrong
 * kind or PTC_ETOOBIG for a list given more than list_max times, each with a line on err.
 */
int ptc_flags_set(const ptc_flags_t *fl, const ptc_flag_t *f, const char *val, const char *origin,
                  FILE *err);
/** Sets the flags of argv[1..argc) (borrowed). The first fault (not a flag, unknown, a value
 *  missing or given to a BOOL, a bad value) is said on err and returned (PTC_EINVAL ...). */
int ptc_flags_parse_argv(const ptc_flags_t *fl, int argc, char **argv, FILE *err);
/**
 * Sets the flags an object names ({"name": value}: a boolean for BOOL, a string or a number
 * for the number kinds, a string for STR, a string or an array of strings for LIST), except
 * those already given (the command line wins). where names the object in messages
 * ("--config FILE: \"ptc\"" gives "PROG: --config FILE: "ptc".NAME is not a flag"). Values are
 * borrowed from obj. The first fault is said on err and returned (PTC_EINVAL ...): a member
 * that is no flag, a flag in cli_only, a value of the wrong type or kind.
 */
int ptc_flags_parse_object(const ptc_flags_t *fl, const struct cJSON *obj, const char *where,
                           FILE *err);
/** Writes one --help line per entry: "  --NAME ARG   HELP [default: DFLT]". */
void ptc_flags_usage(const ptc_flag_t *table, size_t n, FILE *out);

#endif /* PTC_BASE_H */
