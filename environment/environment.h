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
 *    script (env_custom_scan_script) that lists their public functions by parsing them with `ast`,
 *    whose output env_scan_parse turns into tool entries (name, description, input schema) for
 *    whatever catalog the caller keeps.
 *
 * Around them: runs waiting for a build (env_wait), the last failure recorded for `--check`
 * (env_record_outcome, env_last_failure, env_report), the text a tool description and a run's
 * result say about what can be imported (env_describe, env_result_note), and the pruning of
 * folders no server used for a month (env_prune_dir, env_prune_start on the thread pool).
 *
 * Errors: functions return 0 or a negative ENV_E* code; env_strerror() names it, and the
 * functions that can fail for a reason the user must read fill a message buffer.
 *
 * Threads: env_t functions (env_wait included) must be called on the loop's thread, and so
 * must env_prune_start. env_key_compute, env_custom_publish, env_report, env_prune_dir and the
 * spec helpers touch no loop and BLOCK on the file system (and, for env_key_compute and
 * env_report, one interpreter start): call them before the loop runs, from `--check`, or on
 * the thread pool. env_record_outcome and env_last_failure do one small write or read.
 */
#ifndef PTC_ENVIRONMENT_H
#define PTC_ENVIRONMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- limits and defaults --------------------------------------------------------------------- */
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
#define ENV_WAIT_TICK_MS              200u /* how often env_wait's deadlines are checked */
#define ENV_PRUNE_AGE_S               (30L * 24 * 60 * 60) /* env-*, custom-* unused this long */
#define ENV_PRUNE_TMP_AGE_S           (24L * 60 * 60)      /* a dead builder's temporary folder */
#define ENV_TEXT_MAX                  (1u << 20)  /* env_describe's and env_result_note's text */
#define ENV_SCAN_OUTPUT_MAX           (16u << 20) /* the scan output env_scan_parse reads */
#define ENV_MAX_INSTALL_TIMEOUT_S     86400u      /* a day: far from the unsigned's range */
#define ENV_SCAN_TIMEOUT_MS           10000u      /* the helpers' sandboxed scan */
#define ENV_CUSTOM_SERVER             "custom"    /* the catalog's server of the helpers */

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

/* ---- requirement specifiers ------------------------------------------------------------------ */
/**
 * Normalises one pip requirement specifier into out (size len): surrounding white space
 * trimmed, the project name lower-cased with runs of "-", "_" and "." made one "-" (PEP 503);
 * what follows the name (extras, version, markers) is kept with its outer spaces trimmed.
 * Returns 0, ENV_EINVAL for an empty spec or one that does not start with a name (an option
 * such as "-e" or a path belongs in a requirements file), ENV_ETOOBIG when out is too small.
 */
int env_spec_normalise(const char *spec, char *out, size_t len);

/* ---- the key --------------------------------------------------------------------------------- */
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

/* ---- declared packages: the build ------------------------------------------------------------ */
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
    uint64_t elapsed_ms;        /* loop time since env_start (how long a build has run) */
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

/* ---- declared packages: waiting for the build ------------------------------------------------ */
typedef struct env_waiter env_waiter_t;

/**
 * Calls cb(data) once, on the loop's thread, when the build of env ends (READY or FAILED: after
 * on_done returns) or max_ms have passed, whichever comes first; deadlines are checked every
 * ENV_WAIT_TICK_MS, and a waiter added while env is not BUILDING is released at the next check.
 * cb may add or cancel other waiters. Returns the waiter (owned by env until its callback runs
 * or env_wait_cancel), NULL on ENOMEM or when env is closing.
 */
env_waiter_t *env_wait(env_t *env, uint64_t max_ms, void (*cb)(void *data), void *data);

/**
 * No callback afterwards; frees w. Safe after env_free, which lets its waiters go without calling
 * them: an owner that still holds one cancels it then. w may be NULL; never after its callback.
 */
void env_wait_cancel(env_waiter_t *w);

/* ---- declared packages: the last failure, for a later `--check` ------------------------------ */
/**
 * Records a FAILED build of env as <cache>/env-<hex>.failed (one line: the package and the
 * message), or removes that record in any other state, so that env_last_failure can say why
 * the last start failed. Nothing before the key is known. One small write: BLOCKS briefly.
 * Returns 0, or ENV_EIO when the record could not be written.
 */
int env_record_outcome(const env_t *env);

/**
 * The recorded last failure of the set key_hex under cache_dir into line (NUL-terminated, no
 * newline): 1 when there is one, 0 when none, ENV_EINVAL for bad arguments. BLOCKS (one read).
 */
int env_last_failure(const char *cache_dir, const char *key_hex, char *line, size_t len);

/* ---- the user's own helpers ------------------------------------------------------------------ */
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

/* ---- the helpers' scan: its output as tool entries ------------------------------------------- */
typedef struct env_helper_fn {
    char *name;         /* "<module>.<function>" */
    char *signature;    /* "f(a: int) -> str" as the scan gives it, or NULL */
    char *description;  /* the signature, the docstring, and that it runs inside the sandbox */
    char *input_schema; /* a JSON object, as text */
} env_helper_fn_t;

typedef struct env_helper_error {
    char *file; /* the host path of the file the scan could not read */
    int line;   /* 0 when the scan gave none */
    char *error;
} env_helper_error_t;

typedef struct env_scan {
    env_helper_fn_t *fns; /* owned, n_fns of them */
    size_t n_fns;
    env_helper_error_t *errors; /* owned, n_errors of them */
    size_t n_errors;
} env_scan_t;

/**
 * Turns the output of env_custom_scan_script (len bytes, at most ENV_SCAN_OUTPUT_MAX) into tool
 * entries and errors. sandbox_dir is where the run mounted c->dir (file paths under it are
 * mapped back to the helper paths c was published from). Entries without a module, a function
 * or an object schema are left out. On success *scan owns its lists: free them with
 * env_scan_free. Returns 0, ENV_EINVAL when out is not the scan's JSON, ENV_ETOOBIG, ENV_ENOMEM.
 */
int env_scan_parse(const env_custom_t *c, const char *sandbox_dir, const char *out, size_t len,
                   env_scan_t *scan);

/** Frees what *scan owns and zeroes it; scan may be NULL. */
void env_scan_free(env_scan_t *scan);

/* ---- the text for tools and results ---------------------------------------------------------- */
/**
 * What a run's code can import, for a tool's description: the standard library, the requested
 * packages with their installed versions (every installed one for a requirements file), those
 * being installed, or "standard library only (installing X failed)"; then `import <module>` for
 * each helper of custom. env NULL: nothing declared; custom NULL: no helpers. Returns malloc'd
 * text of at most ENV_TEXT_MAX bytes (caller frees), NULL on ENOMEM.
 */
char *env_describe(const env_t *env, const env_custom_t *custom);

/**
 * The note a run's result carries while env is BUILDING (how long so far, what pip installs)
 * or after it FAILED (the package, the message, pip's last lines, and whether runs go on without
 * them: optional). NULL in any other state, for env NULL, or on ENOMEM; else malloc'd text of at
 * most ENV_TEXT_MAX bytes (caller frees).
 */
char *env_result_note(const env_t *env, bool optional);

/* ---- `--check` ------------------------------------------------------------------------------- */
/**
 * Prints to out what a start with opts would find, without building: the normalised set, the
 * interpreter and its version, the key's first 12 hex digits, the folder, and ready (with what
 * is installed) or not built yet (with the last recorded failure); or that none is declared.
 * BLOCKS for one interpreter start. Returns 0, or 1 after printing an error.
 */
int env_report(FILE *out, const env_options_t *opts);

/**
 * `--check`'s lines for the helpers: their folder, then each module with the path it came from.
 */
void env_custom_report(FILE *out, const env_custom_t *c);

/**
 * `--check`'s lines for a scan: each error with its file and line, then each function as
 * id_prefix, its name and its signature ("  custom__textutils.shout: shout(s: str) -> str").
 */
void env_scan_report(FILE *out, const env_scan_t *scan, const char *id_prefix);

/* ---- what a run mounts ----------------------------------------------------------------------- */
/**
 * The folders a run puts on sys.path, in this order: the packages' site folder once env is
 * READY, then the helpers' folder of custom (env and custom may be NULL). Returns how many went
 * into dirs (at most max); borrowed, valid until env changes state or is freed.
 */
size_t env_path_dirs(const env_t *env, const env_custom_t *custom, const char **dirs, size_t max);

/* ---- pruning the cache ----------------------------------------------------------------------- */
/**
 * Removes from cache_dir what no server uses any more: env-<hex>/ and custom-<hex>/ folders and
 * env-<hex>.failed records untouched for ENV_PRUNE_AGE_S, and builders' temporary folders
 * (.env-*.tmp-*, .custom-*.tmp-*) older than ENV_PRUNE_TMP_AGE_S, as seen at time now; never
 * env-<keep_env> nor custom-<keep_custom> (each a key's hex, or NULL), never following a
 * symbolic link, and nothing else (pybundle-* folders are not this module's). Returns how many
 * entries went. BLOCKS on the file system: call it on the thread pool (env_prune_start does).
 */
long env_prune_dir(const char *cache_dir, const char *keep_env, const char *keep_custom,
                   time_t now);

typedef struct env_prune env_prune_t;

/**
 * Runs env_prune_dir(cache_dir, keep_env, keep_custom, time(NULL)) on loop's thread pool (the
 * arguments are copied), then calls cb(removed, user) once on the loop's thread unless
 * env_prune_cancel came first; the job frees itself then (*out is not valid after cb). Returns 0
 * with *out set, ENV_EINVAL, ENV_ENOMEM, or ENV_EIO when the work could not be queued. Keep
 * running the loop until uv_run returns: the job holds it until the removal ends.
 */
int env_prune_start(uv_loop_t *loop, const char *cache_dir, const char *keep_env,
                    const char *keep_custom, void (*cb)(long removed, void *user), void *user,
                    env_prune_t **out);

/** No callback afterwards (a removal begun still ends); p may be NULL, never after its cb. */
void env_prune_cancel(env_prune_t *p);

/* ---- the environment of one server process: env_host_t --------------------------------------- */
/*
 * What a server keeps of the above for its life: the packages' build (its lines and its outcome
 * in the host's log), the helpers published, the pruning started once the folders in use are
 * known, what runs and results see, the helpers' scan as a sandboxed run of the executor whose
 * functions become tool entries, and `--check`'s report of both. On the loop's thread, but
 * env_host_new and env_host_check, which BLOCK on the file system (call them before the loop
 * runs).
 */
struct exec_pool;
struct exec_options;

typedef struct env_host_options {
    /* The packages (build.n_specs 0 and no requirements_file: none declared) and the cache
       folder (needed when packages or helpers are declared). build.log, build.on_done and their
       user pointers are the host's own: whatever is set there is ignored. */
    env_options_t build;
    bool optional;                   /* a failed build lets runs go on without the packages */
    const char *const *custom_paths; /* the user's helpers (env_custom_publish) */
    size_t n_custom;
    /* Optional: every line for the host's log (the build's prefixed "packages: "), valid only
       during the call; called on the loop's thread (env_host_new's from the caller's). */
    void (*log)(env_log_level_t level, const char *line, void *user);
    void *log_user;
} env_host_options_t;

typedef struct env_host env_host_t;

/**
 * Starts the packages' build (env_start: the state is BUILDING until it ends) and publishes the
 * helpers (env_custom_publish: BLOCKS on the file system). Options are copied. A failed build is
 * a state, never an error here. Returns 0 with *out owned by the caller (env_host_free), or
 * ENV_EINVAL (also for no cache folder while something is declared, an install timeout over
 * ENV_MAX_INSTALL_TIMEOUT_S, a bad spec or helper path: a line in the log says which),
 * ENV_ETOOBIG, ENV_EIO, ENV_ENOMEM; *out is NULL then.
 */
int env_host_new(uv_loop_t *loop, const env_host_options_t *opts, env_host_t **out);

/** cb(data) runs when the packages become ready or fail (after their log lines). h may be NULL. */
void env_host_on_change(env_host_t *h, void (*cb)(void *data), void *data);

/** Stops a build, the scan and the pruning's callback; the build's handles close as the loop runs
 *  on (keep running it). Waiters are let go without a call: their owners cancel them as before.
 *  h may be NULL. */
void env_host_free(env_host_t *h);

typedef enum env_run {
    ENV_RUN_NOW,    /* ready, none declared, or failed while optional */
    ENV_RUN_WAIT,   /* the packages are being built */
    ENV_RUN_REFUSE, /* the build failed and the packages are not optional */
} env_run_t;

/** What a run should do now; *building_ms (may be NULL) gets how long the build has run. h may be
 *  NULL (nothing declared). */
env_run_t env_host_for_run(const env_host_t *h, uint64_t *building_ms);

/** env_wait on h's build: cb(data) once it ends or max_ms passed. NULL without a build, on ENOMEM
 *  or while closing. Cancel with env_wait_cancel. */
env_waiter_t *env_host_wait(env_host_t *h, uint64_t max_ms, void (*cb)(void *data), void *data);

/** env_path_dirs of h's packages and helpers (h may be NULL: none). */
size_t env_host_path_dirs(const env_host_t *h, const char **dirs, size_t max);

/** env_describe of h's packages and helpers (malloc'd; NULL on ENOMEM). h may be NULL. */
char *env_host_describe(const env_host_t *h);

/** env_result_note of h's packages with h's optional (malloc'd, or NULL). h may be NULL. */
char *env_host_result_note(const env_host_t *h);

/**
 * The packages' state for a run's result while BUILDING or after FAILED: {"state", "packages":
 * [specs as given], and once failed "failed_package" (or null), "message", "pip_tail",
 * "optional"}; NULL in any other state, for h NULL, or on ENOMEM. The caller deletes it.
 */
cJSON *env_host_result_json(const env_host_t *h);

/** True for the catalog's server of the user's helpers (ENV_CUSTOM_SERVER). */
bool env_is_custom_server(const char *server);

/** The scan's functions as catalog tool entries [{"name", "description", "inputSchema"}] (the
 *  caller deletes them); NULL on ENOMEM. */
cJSON *env_scan_tools_json(const env_scan_t *scan);

/** Hands the helpers' tool entries (env_scan_tools_json, borrowed) to the host's catalog: 0, or
 *  < 0 with a sentence in msg (size len). */
typedef int (*env_host_publish_fn)(const cJSON *tools, char *msg, size_t len, void *user);

/**
 * Starts the sandboxed scan of the helpers' functions as a run of pool (the helpers' folder its
 * read-only folder, ENV_SCAN_TIMEOUT_MS): once it ends, its errors are logged and its functions
 * go to publish(tools, ..., user), and a line says how many were listed. Nothing without
 * helpers. Returns 0, ENV_EINVAL (NULL arguments, a scan already started), or the executor's
 * code when the run could not start (logged too). env_host_free cancels the run.
 */
int env_host_scan_start(env_host_t *h, struct exec_pool *pool, env_host_publish_fn publish,
                        void *user);

/**
 * `--check`'s report of opts to out: the packages (env_report), then the helpers published and
 * scanned in one sandboxed run of a private loop with the sandbox options given (warm sandboxes
 * off), or "custom helpers: none". BLOCKS. Returns 0, or 1 when something is wrong.
 */
int env_host_check(FILE *out, const env_host_options_t *opts, const struct exec_options *sandbox);

#ifdef __cplusplus
}
#endif
#endif
