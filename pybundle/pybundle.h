/*
 * pybundle.h - the `tools` Python package that sandboxed code imports to call registry tools.
 *
 * ptc_pybundle_build() turns a registry catalog into a static package directory:
 *
 *   <cache>/pybundle-<sha256 hex>/tools/__init__.py    public names: call, acall, search,
 *                                                       asearch, emit, aemit, help, ToolError
 *                                      /_runtime.py    the bridge client (see bridge_proto.h)
 *                                      /_catalog.json  modules, functions, signatures
 *                                      /<module>.py    one per server, one function per tool
 *
 * Put <cache>/pybundle-<hex> on the interpreter's sys.path (PYTHONPATH) and mount it read-only;
 * the runtime finds the bridge through the inherited descriptor named by PTC_BRIDGE_FD.
 *
 * The key is the SHA-256 of a canonical description of the catalog (ids, servers, names,
 * titles, descriptions, schemas, annotations, in catalog order), of PTC_PYBUNDLE_VERSION and
 * of the runtime's text,
 * so an unchanged catalog reuses the folder and a changed one gets a new folder. The folder is
 * written under a temporary name and renamed into place: a reader never sees half a bundle, and
 * two processes building the same key at once both end with the same complete folder.
 *
 * Names: every server becomes a module and every tool a function whose names are Python
 * identifiers made of [A-Za-z0-9_]: other bytes become '_', a leading digit gets a leading '_',
 * keywords, dunder names and names the package or module needs itself get a trailing '_',
 * identifiers are cut to PTC_PYBUNDLE_IDENT_MAX bytes, and collisions get "_2", "_3", ... in
 * catalog order. Parameter names are sanitised the same way; the original server, tool and
 * parameter names are what goes on the wire. Every text from the catalog is written as an
 * ASCII Python string literal with escapes, so no description or name can inject code.
 */
#ifndef PTC_PYBUNDLE_H
#define PTC_PYBUNDLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <uv.h>

#include "base.h"
#include "registry.h"

/* Bumped whenever the generated text changes: it is part of the cache key. */
#define PTC_PYBUNDLE_VERSION "ptc-pybundle-2"

#define PTC_PYBUNDLE_IDENT_MAX   64    /* bytes of a module, function or parameter name */
#define PTC_PYBUNDLE_TOOLS_MAX   10000 /* tools turned into functions; the rest only via call() */
#define PTC_PYBUNDLE_PARAMS_MAX  128   /* keyword parameters per function */
#define PTC_PYBUNDLE_DOC_MAX     8192  /* docstring bytes per function (cut on a character) */
#define PTC_PYBUNDLE_FILE_MAX    (64u << 20) /* bytes of one generated file */
#define PTC_PYBUNDLE_MODULE_SOFT (32u << 20) /* past this, a module's further tools are skipped */
#define PTC_PYBUNDLE_PATH_MAX    4096
#define PTC_PYBUNDLE_SIGS_MAX    20 /* tools in one ptc_pybundle_signatures text */

/* The codes of the tools-package generator (base.h's error space): errno values, and extras
 * from PTC_ERR_PYBUNDLE down. X(NAME, VALUE, TEXT) */
#define PTC_PYBUNDLE_ERRORS(X)                                                                     \
    X(PTC_PYBUNDLE_OK, 0, "success")                                                               \
    X(PTC_PYBUNDLE_ENOMEM, -ENOMEM, "out of memory")                                               \
    /* bad argument (NULL catalog, empty or too long cache path) */                                \
    X(PTC_PYBUNDLE_EINVAL, -EINVAL, "invalid argument")                                            \
    /* the cache folder could not be created or written */                                         \
    X(PTC_PYBUNDLE_EIO, -EIO, "the tools package could not be written")                            \
    /* a generated file passed PTC_PYBUNDLE_FILE_MAX */                                            \
    X(PTC_PYBUNDLE_ETOOBIG, -E2BIG, "a generated file is over its size cap")                       \
    X(PTC_PYBUNDLE_ECRYPTO, PTC_ERR_PYBUNDLE, "SHA-256 failed")

enum { PTC_PYBUNDLE_ERRORS(PTC_ERR_ENUM) };

/** What a build produced (all by value; nothing to free). */
typedef struct ptc_pybundle_info {
    char root[PTC_PYBUNDLE_PATH_MAX]; /* <cache>/pybundle-<hex>: the sys.path entry to mount */
    char key[65];                     /* the SHA-256 in lowercase hex */
    bool generated;                   /* true when this call wrote the folder, false on a hit */
    size_t modules;                   /* modules written (0 on a cache hit) */
    size_t functions;                 /* functions written (0 on a cache hit) */
    size_t skipped; /* tools without a function: past TOOLS_MAX or MODULE_SOFT (0 on a hit) */
} ptc_pybundle_info_t;

/** A static English description of any code (never NULL): the generator's own, else
 *  reg_strerror's. */
const char *ptc_pybundle_strerror(int err);

/**
 * True when code names the package: the word "tools" not inside another name (an import of
 * it, tools.call, ...). A mere mention counts too, which costs a run at most the wait for the
 * package at start-up.
 */
bool ptc_pybundle_code_uses(const char *code);

/**
 * Computes the cache key of a catalog into key (65 bytes: 64 hex digits and a NUL).
 * Borrows cat. Returns 0 or a negative PTC_PYBUNDLE_* code.
 */
int ptc_pybundle_key(const reg_catalog_t *cat, char key[65]);

/**
 * Makes sure <cache_dir>/pybundle-<key>/tools exists for this catalog, generating it when it
 * does not (cache_dir itself is created with mode 0700 if missing; its parent must exist).
 * Borrows cat and cache_dir; fills *info (required). msg (may be NULL) receives what went wrong
 * and what to do. Blocking file I/O: call it off the event loop thread (or at start-up).
 */
int ptc_pybundle_build(const reg_catalog_t *cat, const char *cache_dir, ptc_pybundle_info_t *info,
                       char *msg, size_t msg_size);

/**
 * Removes from cache_dir the packages (pybundle-<key>, and .pybundle-* leftovers of builds
 * that died) last used more than max_age_s seconds before now (seconds since the epoch): a
 * build touches the folder it returns, so a folder's mtime is its last use. keep_root (the
 * package in use, as in ptc_pybundle_info_t.root; may be NULL) is never removed, whatever its
 * age. Borrows both paths. Blocking file I/O: call it off the event loop thread. Returns the
 * number of folders removed, or PTC_PYBUNDLE_EINVAL.
 */
long ptc_pybundle_prune(const char *cache_dir, const char *keep_root, int64_t now, long max_age_s);

/**
 * Writes the Python identifier for `name` into out (out_size >= PTC_PYBUNDLE_IDENT_MAX + 1),
 * before reserved-name and collision handling: bytes outside [A-Za-z0-9_] become '_' (a
 * multi-byte UTF-8 character becomes one '_'), a leading digit gets a leading '_', an empty
 * name becomes "_", keywords and dunder names get a trailing '_'. Returns the length.
 * Exposed for tests.
 */
size_t ptc_pybundle_identifier(const char *name, char *out, size_t out_size);

/**
 * The tools a program uses, as the generated package's Python signatures, one a line
 * ("- tools.MOD.FN(a: str, b: int = None)  # first line of the description"), for a repair
 * request: first the tools whose ids are in used (an array of strings, may be NULL), then
 * those the code names (`tools.<module>` and the function's name), and for a module whose named
 * functions match no tool (a wrong import is the usual mistake) that module's functions, so the
 * repairer sees what exists; at most PTC_PYBUNDLE_SIGS_MAX. Borrows everything. Caller frees;
 * NULL when no tool fits or on ENOMEM.
 */
char *ptc_pybundle_signatures(const reg_catalog_t *cat, const char *code, const cJSON *used);

/* ---- the package in use, kept in step with a registry (cache.c) ------------------------ */

enum {
    PTC_PYBUNDLE_LOG_DEBUG = 0,
    PTC_PYBUNDLE_LOG_INFO = 1,
    PTC_PYBUNDLE_LOG_WARNING = 2,
    PTC_PYBUNDLE_LOG_ERROR = 3,
};

/** Where the cache's lines go (one sentence, borrowed for the call; loop thread). */
typedef void (*ptc_pybundle_log_fn)(void *data, int level, const char *line);

typedef struct ptc_pybundle_cache ptc_pybundle_cache_t;

/** Creates the manager for reg (borrowed; log may be NULL); packages go under
 *  $XDG_CACHE_HOME/ptc-mcp (or ~/.cache/ptc-mcp). PTC_PYBUNDLE_ENOMEM. */
int ptc_pybundle_cache_new(uv_loop_t *loop, reg_registry_t *reg, ptc_pybundle_log_fn log,
                           void *log_data, ptc_pybundle_cache_t **out);
/** The registry changed: builds a package for it on the thread pool (coalescing changes). */
void ptc_pybundle_cache_refresh(ptc_pybundle_cache_t *b);
/** The newest finished package's folder (mount it read-only), or NULL before the first. */
const char *ptc_pybundle_cache_root(const ptc_pybundle_cache_t *b);
/** Its modules: [{"module", "server"}] (borrowed; NULL before the first build). */
const cJSON *ptc_pybundle_cache_modules(const ptc_pybundle_cache_t *b);
/** cb runs on the loop after every finished build (to describe the new modules). */
void ptc_pybundle_cache_on_built(ptc_pybundle_cache_t *b, void (*cb)(void *data), void *data);
/** Packages actually generated (not reused from the cache) since start. */
unsigned long ptc_pybundle_cache_generated(const ptc_pybundle_cache_t *b);
/** No more builds (the loop can end); free once it has. */
void ptc_pybundle_cache_stop(ptc_pybundle_cache_t *b);
void ptc_pybundle_cache_free(ptc_pybundle_cache_t *b);

#endif
