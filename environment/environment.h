/*
 * environment: what the sandbox's interpreter can import beyond its standard library.
 *
 * Two things, both kept in a cache folder and mounted read-only into runs by the caller:
 *
 *  - Declared packages (env_t): one folder per set of pip requirement specifiers and
 *    interpreter, keyed by a SHA-256 of the interpreter's own version report and the normalised
 *    spec list (plus the requirements file's bytes). It is a `pip install --target` folder, not a
 *    venv: a flat folder of importable packages that works from the sandbox's interpreter once it
 *    is on sys.path, with no interpreter symlinks, activation scripts or absolute prefixes that a
 *    read-only bind at another path would break (docs/environment.md says more). It is built in a
 *    temporary sibling folder and published by rename(2), so concurrent builders of one key end
 *    with one complete folder and a later start reuses it without running pip.
 *
 *  - The user's own helpers (env_custom_publish): .py files and package folders copied into a
 *    content-addressed folder, whose entries are then importable by module name; and a Python
 *    script (env_custom_scan_script) that lists their public functions by parsing them with `ast`.
 *
 * Errors: functions return 0 or a negative ENV_E* code; env_strerror() names it, and the
 * functions that can fail for a reason the user must read fill a message buffer.
 *
 * Threads: env_t functions must be called on the loop's thread. env_key_compute,
 * env_custom_publish and the spec helpers touch no loop and BLOCK on the file system (and, for
 * env_key_compute, one interpreter start): call them before the loop runs, from `--check`, or
 * on the thread pool.
 */
#ifndef PTC_ENVIRONMENT_H
#define PTC_ENVIRONMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- limits and defaults ----------------------------------------------------------------- */
#define ENV_DEFAULT_INSTALL_TIMEOUT_S 600u
#define ENV_MAX_SPECS                 256u
#define ENV_MAX_SPEC_LEN              512u
#define ENV_MAX_REQUIREMENTS_BYTES    (256u << 10)
#define ENV_KEY_HEX_LEN               64u /* SHA-256 in lower-case hex */
#define ENV_TAIL_LINES                20u /* pip's last lines kept for a failure report */
#define ENV_TAIL_BYTES                (8u << 10)
#define ENV_MESSAGE_MAX               1024u
#define ENV_MAX_CUSTOM_PATHS          64u
#define ENV_MAX_CUSTOM_FILES          4096u          /* files in all the helpers together */
#define ENV_MAX_CUSTOM_BYTES          (64ull << 20)  /* bytes in all the helpers together */
#define ENV_SITE_DIR                  "site"         /* the folder to mount and put on sys.path */
#define ENV_MARKER_FILE               "ptc-env.json" /* beside site/: what was installed */

/* ---- errors ------------------------------------------------------------------------------ */
/* The codes of the environment builder (base.h's error space): errno values, and extras from
 * PTC_ERR_ENV down. X(NAME, VALUE, TEXT) */
#define ENV_ERRORS(X)                                                                              \
    X(ENV_OK, 0, "ok")                                                                             \
    /* a bad argument: empty spec, bad module name, too many paths */                              \
    X(ENV_EINVAL, -EINVAL, "bad argument")                                                         \
    X(ENV_ENOMEM, -ENOMEM, "out of memory")                                                        \
    /* a file or folder could not be read, written or renamed */                                   \
    X(ENV_EIO, -EIO, "file system error")                                                          \
    X(ENV_ETOOBIG, -E2BIG, "too big")      /* over one of the ENV_MAX_* limits */                  \
    X(ENV_ECLOSING, -ESHUTDOWN, "closing") /* env_free was called */                               \
    /* the interpreter could not be run or gave no version */                                      \
    X(ENV_EPYTHON, PTC_ERR_ENV, "interpreter failed")                                              \
    X(ENV_ESPAWN, PTC_ERR_ENV - 1, "pip could not be started")

enum { ENV_ERRORS(PTC_ERR_ENUM) };

/** Short name of any code ("bad argument"); never NULL, static storage: the builder's own,
 *  else ptc_strerror's. */
const char *env_strerror(int err);

/* ---- requirement specifiers --------------------------------------------------------------- */
/**
 * Normalises one pip requirement specifier into out (size len): surrounding white space
 * trimmed, the project name lower-cased with runs of "-", "_" and "." made one "-" (PEP 503);
 * what follows the name (extras, version, markers) is kept with its outer spaces trimmed.
 * Returns 0, ENV_EINVAL for an empty spec or one that does not start with a name (an option
 * such as "-e" or a path belongs in a requirements file), ENV_ETOOBIG when out is too small.
 */
int env_spec_normalise(const char *spec, char *out, size_t len);

/* ---- the key ------------------------------------------------------------------------------ */
typedef struct env_key {
    char hex[ENV_KEY_HEX_LEN + 1];
    char *python_version; /* what the interpreter reported (several lines); owned */
    char **specs;         /* normalised, sorted, without duplicates; owned */
    size_t n_specs;
    char *requirements; /* the requirements file's bytes, or NULL; owned */
} env_key_t;

/**
 * Computes the key of a set: asks python for its version (sys.version, the implementation's
 * cache tag, the platform; BLOCKS for one interpreter start, bounded to a few seconds),
 * normalises specs (n at most ENV_MAX_SPECS) and reads requirements_file (may be NULL, at most
 * ENV_MAX_REQUIREMENTS_BYTES). Either specs or the file must give something. On success *key
 * holds owned copies: free them with env_key_free. On failure msg (may be NULL) says why.
 */
int env_key_compute(const char *python, const char *const *specs, size_t n,
                    const char *requirements_file, env_key_t *key, char *msg, size_t msg_len);

/** Frees what *key owns and zeroes it; key may be NULL. */
void env_key_free(env_key_t *key);

/**
 * The key from its parts without running anything (env_key_compute calls it after asking the
 * interpreter): specs are normalised, sorted and deduplicated here. Same ownership as above.
 */
int env_key_from_parts(const char *python_version, const char *const *specs, size_t n,
                       const char *requirements, env_key_t *key, char *msg, size_t msg_len);

/**
 * Whether the folder of key is published under cache_dir, without building anything (for
 * `--check`): returns 1 and fills site (the folder to mount; may be NULL) and *installed (may be
 * NULL; malloc'd "name version, ..." the caller frees) when it is, 0 when it is not, ENV_EINVAL
 * for bad arguments. BLOCKS on the file system (two small reads).
 */
int env_lookup(const char *cache_dir, const env_key_t *key, char *site, size_t site_len,
               char **installed);

/* ---- declared packages: the build -------------------------------------------------------- */
typedef enum {
    ENV_STATE_ABSENT,   /* nothing declared, or not started */
    ENV_STATE_BUILDING, /* asking the interpreter, or pip is running */
    ENV_STATE_READY,    /* the published folder is there: env_site_dir() */
    ENV_STATE_FAILED,   /* see env_status_t.message, failed_package, tail */
} env_state_t;

/** "absent", "building", "ready", "failed". */
const char *env_state_name(env_state_t state);

typedef enum {
    ENV_LOG_INFO,
    ENV_LOG_PROGRESS, /* one line of pip's output */
    ENV_LOG_ERROR,
} env_log_level_t;

typedef struct env_options {
    const char *python;       /* the interpreter the runs use (and whose pip installs) */
    const char *cache_dir;    /* base folder, created if missing; env-<hex>/ goes under it */
    const char *const *specs; /* pip requirement specifiers */
    size_t n_specs;
    const char *requirements_file; /* or NULL */
    unsigned install_timeout_s;    /* 0: ENV_DEFAULT_INSTALL_TIMEOUT_S */
    const char *pip_index_url;     /* NULL: pip's own default index */
    const char *pip_find_links;    /* a folder or URL of wheels, or NULL */
    bool pip_no_index;             /* only find_links: an offline build */
    /* Optional: each line of progress (pip's output included) and the outcome. line is valid
       only during the call. Called on the loop's thread. */
    void (*log)(env_log_level_t level, const char *line, void *user);
    void *log_user;
    /* Optional: called once when the state becomes READY or FAILED (not when env_start
       returns with the state already FAILED: it could not even make a pipe). */
    void (*on_done)(env_state_t state, void *user);
    void *done_user;
} env_options_t;

/** Fills *opts with the defaults (python EXEC_DEFAULT_PYTHON's "/usr/bin/python3", 600 s). */
void env_options_init(env_options_t *opts);

typedef struct env_t env_t;

typedef struct env_status {
    env_state_t state;
    const char *key_hex;        /* "" until the interpreter answered */
    const char *site_dir;       /* the folder to mount, once READY; NULL otherwise */
    bool reused;                /* READY without running pip: the folder was there */
    bool pip_ran;               /* this env_t started pip */
    uint64_t install_ms;        /* pip's wall time when it ran */
    const char *message;        /* FAILED: one line saying what happened and what to do */
    const char *failed_package; /* FAILED: the requirement pip named, or NULL */
    const char *tail;           /* FAILED: pip's last lines, or "" */
    const char *installed;      /* READY: "name version, name version, ..." of the folder */
} env_status_t;

/**
 * Starts getting the environment for opts on loop: everything is copied. Returns at once; the
 * work runs through uv_spawn (the interpreter's version, then pip with a timer) and the state is
 * BUILDING until on_done. A failure of the build is a state (FAILED), never an error of this
 * call; nothing is published then, so the next start tries again. Returns ENV_EINVAL for bad
 * options (no specs and no file, a spec that does not normalise: msg says which), ENV_EIO when
 * cache_dir cannot be made or requirements_file not read, ENV_ENOMEM. On success *out owns the
 * environment: free it with env_free.
 */
int env_start(uv_loop_t *loop, const env_options_t *opts, env_t **out, char *msg, size_t len);

/**
 * Fills *st; every pointer in it is borrowed and valid until the next call on env or env_free.
 */
void env_status(const env_t *env, env_status_t *st);

/**
 * Stops a running build (pip's process group is killed, its temporary folder removed) and
 * frees env once its handles are closed: keep running the loop until uv_run returns. No
 * callback fires afterwards. env may be NULL.
 */
void env_free(env_t *env);

/* ---- the user's own helpers -------------------------------------------------------------- */
typedef struct env_custom {
    char dir[4096]; /* <cache>/custom-<hex>: one entry per helper, mount it read-only */
    char hex[ENV_KEY_HEX_LEN + 1];
    size_t n_modules;
    char **modules; /* module names, in the order given; owned */
    char **sources; /* the path each came from (as given); owned */
} env_custom_t;

/**
 * Copies the helpers (each a .py file or a package folder; n at most ENV_MAX_CUSTOM_PATHS) into
 * <cache_dir>/custom-<hex>, hex being a SHA-256 of every module name, relative file path and
 * file content (regular files only; __pycache__ folders, *.pyc and symbolic links are skipped).
 * An existing folder of that hash is reused; a new one is written beside it and renamed into
 * place. Module names are the file name without .py, or the folder name; each must be a Python
 * identifier and occur once. BLOCKS on the file system. On failure msg says which path and why.
 * On success *out owns its lists: free them with env_custom_free.
 */
int env_custom_publish(const char *cache_dir, const char *const *paths, size_t n, env_custom_t *out,
                       char *msg, size_t msg_len);

/** Frees what *c owns; c may be NULL. */
void env_custom_free(env_custom_t *c);

/**
 * The helper-scanning script (environment/custom_tools_scan.py, compiled in): Python code that
 * reads the .py files of the folder given as its arguments (or, with none, the first entry of
 * PYTHONPATH, which is the run's read-only folder), never importing them, and prints one JSON
 * object: {"tools": [{module, function, signature, docstring, inputSchema, file, line}],
 * "errors": [{module, file, line, error}]}. Run it as the code of a sandboxed run with the
 * env_custom_t folder as the run's read-only folder. Static storage, NUL-terminated; *len (may
 * be NULL) gets its length.
 */
const char *env_custom_scan_script(size_t *len);

#ifdef __cplusplus
}
#endif
#endif
