/*
 * executor: runs Python code strings in a sandbox, driven by a libuv loop.
 *
 * The library knows nothing of JSON-RPC or MCP. A pool (exec_pool_t) owns the settings, a queue
 * and the running children; each run (exec_run_t) ends in exactly one on_done callback unless it
 * is cancelled. The sandbox itself is applied by a small helper program, ptc-sandbox-launch
 * (docs/sandbox.md says why a helper and not clone() inside the server), which the pool spawns
 * with uv_spawn and which reports the layers it applied on a status pipe.
 *
 * Errors: functions return 0 or a negative EXEC_E* code; exec_strerror() names it and
 * exec_error_hint() says what to do about it.
 *
 * Threads: every function must be called on the loop's thread, except exec_probe() and the
 * exec_options_* helpers, which touch no loop.
 */
#ifndef PTC_EXECUTOR_H
#define PTC_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- limits and defaults (named so that flags can override them) ------------------------ */
#define EXEC_DEFAULT_PYTHON       "/usr/bin/python3"
#define EXEC_LAUNCHER_NAME        "ptc-sandbox-launch"
#define EXEC_DEFAULT_MAX_QUEUE    64u
#define EXEC_DEFAULT_MEMORY_BYTES (256ull << 20)
/* a run's CPU share (cgroup cpu.max), in thousandths of a core: one core by default */
#define EXEC_DEFAULT_CPU_MILLIS  1000u
#define EXEC_MIN_CPU_MILLIS      10u     /* the kernel's quota floor is 1 ms per 100 ms period */
#define EXEC_MAX_CPU_MILLIS      256000u /* 256 cores */
#define EXEC_DEFAULT_TMP_BYTES   (32ull << 20)
#define EXEC_DEFAULT_PIDS        32u
#define EXEC_DEFAULT_KEEP_BYTES  (4u << 20) /* retained per stream; the rest is counted */
#define EXEC_DEFAULT_PROGRESS_MS 1000u
#define EXEC_DEFAULT_FSIZE_BYTES (64ull << 20)
#define EXEC_DEFAULT_NOFILE      256u
#define EXEC_MAX_CODE_BYTES      (120u << 10) /* code travels as one argv string */
#define EXEC_MAX_MOUNTS          16u
#define EXEC_MAX_PASS_ENV        32u
#define EXEC_MAX_KEEP_BYTES      (256u << 20)
#define EXEC_MAX_CONCURRENT      256u
#define EXEC_MAX_TIMEOUT_MS      (24ull * 3600 * 1000)
#define EXEC_KILL_GRACE_MS       2000u /* launcher gets this long to tear down, then SIGKILL */
/* after a timeout, init gets this long to kill the code and send back the files it wrote
   (then the ordinary kill, which sends none) */
#define EXEC_TIMEOUT_FILES_MS 1000u
#define EXEC_BRIDGE_FD        3 /* the bridge's descriptor number inside a run */
#define EXEC_BRIDGE_ENV       "PTC_BRIDGE_FD"
#define EXEC_ZYGOTE_ENV       "PTC_ZYGOTE"   /* "0" turns the zygote off (on by default) */
#define EXEC_RO_LIB_PATH      "/opt/ptc/lib" /* where exec_run_opts_t.ro_dir appears */
#define EXEC_MAX_PATH_DIRS    4u /* exec_run_opts_t.path_dirs: at /opt/ptc/lib1 ... lib4 */
#define EXEC_DEFAULT_WARM     4u /* sandboxes kept set up ahead with keep_warm */
#define EXEC_MAX_WARM         8u

/* ---- errors ------------------------------------------------------------------------------- */
/* The codes of the executor, its page store and its file store (base.h's error space): errno
 * values, and extras from PTC_ERR_EXEC down. X(NAME, VALUE, TEXT) */
#define EXEC_ERRORS(X)                                                                             \
    X(EXEC_OK, 0, "ok")                                                                            \
    X(EXEC_EINVAL, -EINVAL, "invalid argument") /* a bad argument or option */                     \
    X(EXEC_ENOMEM, -ENOMEM, "out of memory")                                                       \
    /* EAGAIN: max_concurrent runs are busy and max_queue runs wait already */                     \
    X(EXEC_EQUEUEFULL, -EAGAIN, "run queue full")                                                  \
    /* E2BIG: code longer than EXEC_MAX_CODE_BYTES, a file larger than the whole store */          \
    X(EXEC_ETOOBIG, -E2BIG, "code too large")                                                      \
    X(EXEC_ECLOSING, -ESHUTDOWN, "executor shutting down") /* the pool is being freed */           \
    X(EXEC_EBUSY, -EBUSY, "a cell is still running in this session")                               \
    /* ENOTSUP: sessions need the sandbox launcher (not --unsafe-no-sandbox) */                    \
    X(EXEC_EUNSUPPORTED, -ENOTSUP, "sessions need the sandbox")                                    \
    X(EXEC_ESPAWN, PTC_ERR_EXEC, "cannot start the sandbox launcher")                              \
    /* not ENOENT: that names any missing file, this one the launcher binary */                    \
    X(EXEC_ENOLAUNCHER, PTC_ERR_EXEC - 1, "sandbox launcher not found")                            \
    /* the interpreter is missing or is a script (a pyenv shim) */                                 \
    X(EXEC_EPYTHON, PTC_ERR_EXEC - 2, "unusable python interpreter")                               \
    X(EXEC_EPROBE, PTC_ERR_EXEC - 3, "sandbox probe failed") /* the probe run did not finish */    \
    /* the session has ended: exec_session_end_reason() says why */                                \
    X(EXEC_ESESSIONENDED, PTC_ERR_EXEC - 4, "the session has ended")                               \
    /* the pool refuses runs (a mandatory layer is missing) */                                     \
    X(EXEC_EREFUSED, PTC_ERR_EXEC - 5, "runs are refused")                                         \
    /* exec_pages_next, exec_filestore_get: an unknown, expired or evicted cursor or key */        \
    X(EXEC_EEXPIRED, PTC_ERR_EXEC - 6, "unknown or expired cursor or key")

enum { EXEC_ERRORS(PTC_ERR_ENUM) };

/** Short name of an EXEC_E* code ("queue full"); never NULL, static storage. */
const char *exec_strerror(int err);
/** A sentence telling the user what to do about err; never NULL, static storage. */
const char *exec_error_hint(int err);

/* ---- sandbox layers ----------------------------------------------------------------------- */
typedef enum {
    EXEC_LAYER_USER_NS,
    EXEC_LAYER_PID_NS,
    EXEC_LAYER_NET_NS,
    EXEC_LAYER_MOUNT_NS,
    EXEC_LAYER_IPC_NS,
    EXEC_LAYER_UTS_NS,
    EXEC_LAYER_ROOTFS,      /* read-only tmpfs root with binds, pivot_root */
    EXEC_LAYER_PRIVATE_TMP, /* per-run tmpfs /tmp, nosuid,nodev,noexec */
    EXEC_LAYER_UID_DROP,
    EXEC_LAYER_CAPS_DROP,
    EXEC_LAYER_NO_NEW_PRIVS,
    EXEC_LAYER_SECCOMP,
    EXEC_LAYER_LANDLOCK,
    EXEC_LAYER_CGROUP_MEMORY,
    EXEC_LAYER_CGROUP_PIDS,
    EXEC_LAYER_CGROUP_CPU,
    EXEC_LAYER_RLIMITS,
    EXEC_LAYER_MEMFD_NOEXEC,
    EXEC_LAYER_PROCESS_TREE, /* every descendant dies with the run (PID ns, or a subreaper) */
    EXEC_LAYER_CGROUP_NS,    /* /proc/self/cgroup shows the run's cgroup as "/" */
    EXEC_LAYER_PROC_MASK,    /* Docker's masked and read-only /proc paths */
    EXEC_LAYER_COUNT
} exec_layer_id_t;

typedef enum {
    EXEC_LAYER_UNKNOWN = 0, /* the launcher never said (it failed before) */
    EXEC_LAYER_ACTIVE,
    EXEC_LAYER_UNAVAILABLE,
    EXEC_LAYER_DISABLED, /* turned off by the test-only switch */
} exec_layer_state_t;

typedef enum {
    EXEC_SANDBOX_FULL,     /* every layer active */
    EXEC_SANDBOX_DEGRADED, /* the mandatory layers active, some others unavailable */
    EXEC_SANDBOX_NONE,     /* unsafe_no_sandbox */
} exec_sandbox_level_t;

/** Stable lower-case name ("seccomp", "pid-ns"); NULL for an id out of range. */
const char *exec_layer_name(exec_layer_id_t id);
/** Layer id for a name, or -1. */
int exec_layer_from_name(const char *name);
/** "full", "degraded" or "none". */
const char *exec_sandbox_level_name(exec_sandbox_level_t level);

#define EXEC_REASON_MAX 160
typedef struct exec_probe {
    exec_layer_state_t state[EXEC_LAYER_COUNT];
    char reason[EXEC_LAYER_COUNT][EXEC_REASON_MAX]; /* why unavailable, or what is active */
    bool mandatory_ok; /* process tree, rlimits, no_new_privs, seccomp, fs confinement */
    exec_sandbox_level_t level;
    bool python_ok;    /* the interpreter ran `pass` inside the sandbox */
    char message[512]; /* empty when mandatory_ok; else what is missing and how to fix it */
    /* Runs take sandboxes set up ahead with the interpreter already started (keep_warm on and
       the sandbox usable; the probe's own run went through that same hand-over). */
    bool warm_start;
    char warm_reason[EXEC_REASON_MAX];
    /* The sandboxes are forked from a pre-started interpreter, the zygote (exec_options_t.zygote
       on, warm start active, user namespaces available, the library next to the launcher, and
       an interpreter that can be the zygote; docs/sandbox.md, "A fork server"). A pool turns it
       off when the zygote cannot start or ends; the reason says so. */
    bool zygote;
    char zygote_reason[EXEC_REASON_MAX];
} exec_probe_t;

/* ---- options ------------------------------------------------------------------------------ */
typedef struct exec_options {
    const char *python;      /* interpreter path (the real binary, not a shim) */
    const char *launcher;    /* ptc-sandbox-launch; NULL: next to the running program, then the
                                build tree */
    unsigned max_concurrent; /* 0: number of cores */
    unsigned max_queue;      /* runs waiting beyond max_concurrent; 0 means none may wait */
    uint64_t memory_bytes;
    uint64_t tmp_bytes;
    unsigned pids_max;
    unsigned cpu_millis; /* CPU share of a run or session, thousandths of a core (cpu.max) */
    size_t stdout_keep;  /* bytes retained per stream; more is counted and dropped */
    size_t stderr_keep;
    unsigned progress_ms;      /* on_progress period */
    const char *const *mounts; /* "HOST:PATH[:ro|rw]" each; read-only by default */
    size_t n_mounts;
    const char *const *pass_env; /* names of the server's variables copied into runs */
    size_t n_pass_env;
    bool unsafe_no_sandbox;
    /* Keep sandboxes set up ahead of the next runs, each with its interpreter started and
       waiting for the code (docs/sandbox.md, "Warm start"): a run then pays only for its own
       code. Each costs an idle launcher, init, interpreter (~10 MB) and cgroup. On by
       exec_options_init, with warm_sandboxes 0 meaning EXEC_DEFAULT_WARM (at most
       EXEC_MAX_WARM). Every run still gets a sandbox and an interpreter of its own.
       warm_sandboxes is the most kept under load: the pool starts with 2, grows when runs find
       none or take the last, and halves after warm_idle_ms without a run (0: 30 s), down to 1. */
    bool keep_warm;
    unsigned warm_sandboxes;
    unsigned warm_idle_ms;
    /* TEST ONLY: a layer name to turn off while the others stay on, so that a wall's test can be
       seen to fail. Runs are never refused while it is set. NULL in production. */
    const char *test_disable_layer;
    /* docs/sandbox.md, "A fork server (zygote)": one-shot runs' sandboxes are forked from a
       pre-started interpreter instead of each starting one; sessions are not. exec_options_init
       sets it unless the environment has EXEC_ZYGOTE_ENV=0 ("0", "off", "no", "false", any case;
       unset, empty or any other value leaves it on). Used only where the probe finds it can work
       (warm start, user namespaces, the library, an interpreter that can be the zygote); else the
       launcher starts each sandbox, as it does with it off. */
    bool zygote;
} exec_options_t;

/** Fills *opts with the defaults above (python, queue, limits). Pointers inside stay borrowed. */
void exec_options_init(exec_options_t *opts);

/* ---- probe -------------------------------------------------------------------------------- */
/**
 * Runs the launcher once with `pass` and records which layers it could apply. BLOCKS for one
 * sandboxed interpreter start (tens of milliseconds; at most a few seconds): call it before the
 * loop runs or from `--check`. opts is borrowed. Returns 0 (even when layers are missing: read
 * out->mandatory_ok) or a negative EXEC_E* code when the probe could not run at all.
 */
int exec_probe(const exec_options_t *opts, exec_probe_t *out);

/**
 * Writes a human report of *probe (one line per layer, then the verdict) into buf, always
 * NUL-terminated. Returns the length it needed, like snprintf.
 */
size_t exec_probe_report(const exec_probe_t *probe, char *buf, size_t len);

/* ---- pool --------------------------------------------------------------------------------- */
typedef struct exec_pool exec_pool_t;
typedef struct exec_run exec_run_t;

/**
 * Creates a pool on loop. opts and every string in it are copied; the values of the pass_env
 * variables are read now. Runs exec_probe() (blocking, see there) unless unsafe_no_sandbox is
 * set; when a mandatory layer is missing the pool is still created but every run ends with
 * status EXEC_STATUS_REFUSED and a message saying how to fix the host. On success *out owns the
 * pool; free it with exec_pool_free(). The process must ignore SIGPIPE (libuv's writes to a
 * sandbox that has died would raise it), as ptc-mcp does.
 */
int exec_pool_new(uv_loop_t *loop, const exec_options_t *opts, exec_pool_t **out);

/**
 * Cancels every queued and running run (no callbacks fire) and frees the pool once its children
 * are reaped; keep running the loop until uv_run returns. pool may be NULL.
 */
void exec_pool_free(exec_pool_t *pool);

/** The probe taken by exec_pool_new; borrowed, valid until exec_pool_free. */
const exec_probe_t *exec_pool_probe(const exec_pool_t *pool);
/** True when runs are refused (a mandatory layer missing, unsafe mode off). */
bool exec_pool_refusing(const exec_pool_t *pool);
/**
 * Makes the warm sandboxes for runs with this ro_dir (exec_run_opts_t; NULL: none) from now on,
 * letting the current ones go if they were made for another: a caller that knows the folder
 * its next runs will use (it changes only with the tools catalog) keeps even the first of them
 * warm. ro_dir is copied (canonical). Returns 0, EXEC_EINVAL for a folder that is not an
 * existing directory, EXEC_ECLOSING. Without keep_warm it only records the folder.
 */
int exec_pool_warm_for(exec_pool_t *pool, const char *ro_dir);

/** Runs started but not finished / waiting for a slot. */
unsigned exec_pool_running(const exec_pool_t *pool);
unsigned exec_pool_queued(const exec_pool_t *pool);

/* ---- runs --------------------------------------------------------------------------------- */
typedef enum {
    EXEC_STATUS_OK,      /* exit code 0 */
    EXEC_STATUS_ERROR,   /* non-zero exit (an uncaught exception exits 1) */
    EXEC_STATUS_TIMEOUT, /* the wall-clock timeout killed the tree */
    EXEC_STATUS_KILLED,  /* a signal ended the interpreter (see signal/signal_name) */
    EXEC_STATUS_OOM,     /* the memory limit was hit */
    EXEC_STATUS_REFUSED, /* the sandbox could not be set up; message says why */
} exec_status_t;

/** "ok", "error", "timeout", "killed", "oom", "refused". */
const char *exec_status_name(exec_status_t status);

typedef struct exec_output {
    const unsigned char *data; /* the first len bytes the stream produced, binary-safe; never
                                  NULL */
    size_t len;
    uint64_t total; /* bytes the stream produced in all */
    bool truncated; /* total > len */
} exec_output_t;

typedef struct exec_result {
    exec_status_t status;
    int exit_code;           /* -1 when a signal ended it or it never ran */
    int signal;              /* 0 when none */
    const char *signal_name; /* "SIGKILL", or NULL */
    exec_output_t out;
    exec_output_t err;
    uint64_t duration_ms; /* from start (not queueing) to the answer (docs/sandbox.md) */
    exec_sandbox_level_t sandbox;
    const char *message; /* human text for refused or internal failures; NULL otherwise */
    bool warm_start;     /* the run took a sandbox set up ahead (keep_warm), not a new one */
    bool zygote;         /* its sandbox was forked from the zygote (exec_options_t.zygote) */
    /* workspace: files out (see exec_file_t) and the state of a session after its cell */
    const struct exec_file *files; /* n_files entries, name order; NULL when none */
    size_t n_files;
    bool interrupted;   /* the timeout or a cancel raised KeyboardInterrupt in the cell, which
                           ended; the session lives on (status is EXEC_STATUS_TIMEOUT) */
    bool cancelled;     /* exec_session_cancel ended the cell (interrupted, or killed) */
    bool session_ended; /* the session is gone: a later cell gets EXEC_ESESSIONENDED */
} exec_result_t;

typedef struct exec_callbacks {
    /* Called once when the run ends. result and all its pointers are owned by the pool and valid
       only during the call: copy what you keep. The run handle is freed after it returns. */
    void (*on_done)(exec_run_t *run, const exec_result_t *result, void *user);
    /* Optional; about every progress_ms while running: elapsed time, stdout+stderr bytes. */
    void (*on_progress)(exec_run_t *run, uint64_t elapsed_ms, uint64_t output_bytes, void *user);
    void *user;
} exec_callbacks_t;

/**
 * Queues or starts a run of code (copied; at most EXEC_MAX_CODE_BYTES, any bytes but NUL) with a
 * wall-clock timeout that starts when the run starts, not when it is queued. cb is copied. On
 * success *out (may be NULL) is a handle valid until on_done returns or exec_run_cancel is called.
 * Returns EXEC_EQUEUEFULL when max_concurrent runs are busy and max_queue wait already.
 */
int exec_run_start(exec_pool_t *pool, const char *code, uint64_t timeout_ms,
                   const exec_callbacks_t *cb, exec_run_t **out);

/* Per-run extras; zero-initialise with exec_run_opts_init() (bridge_fd -1). */
typedef struct exec_run_opts {
    /* One end of a connected socket (or pipe) the caller made, or -1. Ownership passes to the
       executor on EVERY call of exec_run_start_ex, success or failure: it is closed once the
       launcher has it (the run's tree then holds the only copies), or when the run fails,
       is refused, cancelled or dropped from the queue. Inside the run it is descriptor
       EXEC_BRIDGE_FD, the only one past stdin/stdout/stderr, and EXEC_BRIDGE_ENV=3 is set. */
    int bridge_fd;
    /* A host directory (copied) bound read-only at EXEC_RO_LIB_PATH and put on the module path
       (PYTHONPATH, see docs/sandbox.md), or NULL. In the Landlock-only mode it is not moved:
       the run reads it at its host path, with read-only Landlock rights. */
    const char *ro_dir;
    /* More host directories for the module path (each copied, made canonical and checked like
       ro_dir), at most EXEC_MAX_PATH_DIRS: bound read-only, nosuid, nodev at EXEC_RO_LIB_PATH
       "1", "2", ... and put on PYTHONPATH after ro_dir, in this order (the declared packages'
       folder and the user's helpers, docs/environment.md). Landlock-only mode: read-only
       rules on the host paths, which go on the module path. NULL / 0: none. */
    const char *const *path_dirs;
    size_t n_path_dirs;
} exec_run_opts_t;

/** Fills *ro with "no bridge, no directory". */
void exec_run_opts_init(exec_run_opts_t *ro);

/**
 * exec_pool_warm_for for the folders of ro (ro_dir and path_dirs; its bridge_fd is ignored and
 * not taken). ro may be NULL: no folder. Same returns, EXEC_EINVAL also for too many folders.
 */
int exec_pool_warm_for_ex(exec_pool_t *pool, const exec_run_opts_t *ro);

/**
 * exec_run_start with per-run extras (ro may be NULL: same as exec_run_start). The bridge comes
 * with the code, so it does not keep a run from a warm sandbox; the warm sandboxes are made for
 * one ro_dir (that of the last run that did not find one), so a run with another ro_dir (or
 * none, after runs with one) starts cold and the next ones are made for its ro_dir.
 * ro->bridge_fd is taken over even when this returns an error (see exec_run_opts_t).
 * EXEC_EINVAL also for an ro_dir or path_dirs entry that is not an existing absolute directory
 * or contains ':', and for more than EXEC_MAX_PATH_DIRS path_dirs. Warm sandboxes are made for
 * the whole list of folders (ro_dir, then path_dirs).
 */
int exec_run_start_ex(exec_pool_t *pool, const char *code, uint64_t timeout_ms,
                      const exec_run_opts_t *ro, const exec_callbacks_t *cb, exec_run_t **out);

/**
 * Kills the run's whole process tree now (or drops it from the queue) and frees it: no callback
 * fires for it afterwards. Must not be called after on_done began. run may be NULL.
 */
void exec_run_cancel(exec_run_t *run);

/* ==== workspace: sessions, files out, output so far (issue 12) ============================ */

/* ---- files out ---------------------------------------------------------------------------
 * Every run and cell has a writable EXEC_OUTPUT_DIR (also $PTC_OUTPUT_DIR; in the Landlock-only
 * mode it is the per-run directory's "outputs"). Entries that appear or change there during a
 * session's cell come back in exec_result_t.files: init, inside the sandbox, reads them with
 * O_NOFOLLOW|O_NONBLOCK (a symlink, FIFO or folder is listed as omitted, never followed) and
 * the pool checks every bound below; past one a file is listed truncated or omitted with a
 * reason, never dropped. Only the top level of the folder is looked at. */
#define EXEC_OUTPUT_DIR_NAME      "outputs"
#define EXEC_OUTPUT_DIR           "/tmp/" EXEC_OUTPUT_DIR_NAME
#define EXEC_FILES_MAX_FILE_BYTES (8u << 20)   /* per file; more is cut (truncated) */
#define EXEC_FILES_MAX_CALL_BYTES (32u << 20)  /* per run or cell; past it files are omitted */
#define EXEC_FILES_MAX_COUNT      32u          /* files per run or cell; past it: omitted */
#define EXEC_FILES_LIMIT_BYTES    (256u << 20) /* the highest any of the byte bounds may be */
#define EXEC_FILES_LIMIT_COUNT    1024u
#define EXEC_FILE_NAME_MAX        255u

typedef struct exec_file {
    const char *name;          /* the entry's name in the output folder (any bytes but '/' and
                                  NUL: escape it for a URI) */
    const unsigned char *data; /* len bytes handed back; never NULL (empty when omitted) */
    size_t len;
    uint64_t size;      /* the file's size in the sandbox */
    bool truncated;     /* len < size: the first len bytes only */
    bool omitted;       /* no bytes: see reason */
    const char *reason; /* why truncated or omitted (static text); NULL when whole */
} exec_file_t;

typedef struct exec_files_limits {
    uint64_t file_bytes; /* 0: EXEC_FILES_MAX_FILE_BYTES */
    uint64_t call_bytes; /* 0: EXEC_FILES_MAX_CALL_BYTES */
    unsigned count;      /* 0: EXEC_FILES_MAX_COUNT */
} exec_files_limits_t;

/** Sets the bounds for files out (lim copied; NULL: the defaults). EXEC_EINVAL past the
    EXEC_FILES_LIMIT_* ceilings. Applies to cells started afterwards. */
int exec_pool_set_files_limits(exec_pool_t *pool, const exec_files_limits_t *lim);

/* Which bound exec_options_check found passed (the first, in this order). */
typedef enum exec_bound {
    EXEC_BOUND_NONE = 0,
    EXEC_BOUND_CONCURRENT, /* max_concurrent past EXEC_MAX_CONCURRENT */
    EXEC_BOUND_KEEP_BYTES, /* stdout_keep or stderr_keep past EXEC_MAX_KEEP_BYTES */
    EXEC_BOUND_WARM,       /* warm_sandboxes past EXEC_MAX_WARM */
    EXEC_BOUND_CODE_BYTES, /* a host's bound on code past EXEC_MAX_CODE_BYTES */
    EXEC_BOUND_FILE_BYTES, /* file_bytes or call_bytes past EXEC_FILES_LIMIT_BYTES */
    EXEC_BOUND_FILE_COUNT, /* count past EXEC_FILES_LIMIT_COUNT */
} exec_bound_t;

/**
 * Checks settings before a pool is made (exec_pool_new and exec_pool_set_files_limits check the
 * same): opts (may be NULL), files (may be NULL; zeros are the defaults) and code_bytes, the
 * most code a host lets a run have (0: EXEC_MAX_CODE_BYTES). Returns 0, or EXEC_EINVAL with *bad
 * (may be NULL) naming the first bound passed, so that a host can name its own flag.
 */
int exec_options_check(const exec_options_t *opts, const exec_files_limits_t *files,
                       size_t code_bytes, exec_bound_t *bad);

/* ---- output so far -------------------------------------------------------------------------
 * For an answer of `status: "running"`: the stdout and stderr bytes a run or cell still going
 * has produced so far (the same retention as the final result). The pointers are borrowed and
 * valid until control returns to the loop. EXEC_EINVAL for NULL. */
int exec_run_output(const exec_run_t *run, exec_output_t *out, exec_output_t *err);

/* ---- sessions ------------------------------------------------------------------------------
 * A session is a sandbox of its own (the same launcher, walls and limits as a run; its cgroup,
 * memory, pids and /tmp hold for its whole life) whose interpreter runs a driver waiting for
 * cells: each cell runs in the same __main__ globals, so imports, variables, open files, /tmp
 * and the working directory persist. A cell ends when its code returns (or raises); the driver
 * flushes stdout and stderr first, so the result holds exactly what the cell printed. Output
 * of a background thread or process after that is dropped while no cell runs, and counts as
 * the running cell's while one does.
 *
 * The bridge: one per session, given to exec_session_new (like a run's, it is descriptor
 * EXEC_BRIDGE_FD inside with EXEC_BRIDGE_ENV set) and kept for the session's life: the tools
 * package caches its connection, so a per-cell descriptor would leave it talking to a closed
 * one. The caller routes what arrives on it to the cell running then.
 *
 * Timeout and cancel: SIGINT to the interpreter (KeyboardInterrupt in the cell); if the cell
 * has not ended EXEC_SESSION_INTERRUPT_GRACE_MS later, the whole session is killed. The result
 * says which (interrupted / session_ended). A crash, exit or OOM of the interpreter ends the
 * session; the cell running then reports it, later cells get EXEC_ESESSIONENDED.
 * Sessions do not take run slots (max_concurrent): bound them in the caller (--max-sessions).
 * RLIMIT_CPU is the session's whole life ceiling; the wall clock bounds each cell. */
#define EXEC_SESSION_INTERRUPT_GRACE_MS 2000u

typedef struct exec_session exec_session_t;

typedef struct exec_session_opts {
    int bridge_fd;                /* like exec_run_opts_t's, for the session's life; -1: none. Taken
                                     over on every call, success or failure */
    const char *ro_dir;           /* like exec_run_opts_t's; NULL: none */
    const char *const *path_dirs; /* like exec_run_opts_t's (at most EXEC_MAX_PATH_DIRS) */
    size_t n_path_dirs;
} exec_session_opts_t;

/** Fills *so with "no bridge, no directory". */
void exec_session_opts_init(exec_session_opts_t *so);

typedef struct exec_session_callbacks {
    /* Once per cell, when it ends. result's pointers are valid only during the call. */
    void (*on_done)(exec_session_t *s, const exec_result_t *result, void *user);
    /* Optional; about every progress_ms while the cell runs. */
    void (*on_progress)(exec_session_t *s, uint64_t elapsed_ms, uint64_t output_bytes, void *user);
    void *user;
} exec_session_callbacks_t;

/**
 * Starts a session's sandbox (it sets itself up while the first cell is on its way). so may be
 * NULL. Returns EXEC_EREFUSED when the pool refuses runs, EXEC_EUNSUPPORTED in unsafe mode,
 * EXEC_ECLOSING, EXEC_EINVAL (a bad ro_dir), EXEC_ENOMEM. *out is the caller's until
 * exec_session_close.
 */
int exec_session_new(exec_pool_t *pool, const exec_session_opts_t *so, exec_session_t **out);

/**
 * Runs code (copied; at most EXEC_MAX_CODE_BYTES) as the session's next cell, with a wall-clock
 * timeout (then interrupt, grace, kill as above). cb is copied. EXEC_EBUSY while a cell runs,
 * EXEC_ESESSIONENDED once the session has ended.
 */
int exec_session_run(exec_session_t *s, const char *code, uint64_t timeout_ms,
                     const exec_session_callbacks_t *cb);

/** Ends the running cell as a timeout would (on_done still fires, with cancelled set).
    EXEC_EINVAL when no cell runs. */
int exec_session_cancel(exec_session_t *s);

/** The running cell's output so far (see exec_run_output). EXEC_EINVAL when none runs. */
int exec_session_output(const exec_session_t *s, exec_output_t *out, exec_output_t *err);

/** True while a cell runs. */
bool exec_session_busy(const exec_session_t *s);
/** NULL while the session lives; else why it ended ("the code exited", "out of memory", ...). */
const char *exec_session_end_reason(const exec_session_t *s);
/** uv_now() (ms) of the session's start or last cell's end, whichever is later; a cell
    running counts as in use. For the caller's idle expiry. */
uint64_t exec_session_last_used(const exec_session_t *s);

/**
 * Ends the session: its sandbox and everything in it die; a running cell's on_done does not
 * fire. Frees the handle (later, once its children are reaped). s may be NULL.
 */
void exec_session_close(exec_session_t *s);

/* ==== end of workspace ===================================================================== */

/* ---- who kept it ------------------------------------------------------------------------- */
/* The pages and the file store keep each entry for an owner: opaque bytes the caller gives
 * (the MCP layer's client identity; this module only compares them). A cursor or key presented
 * by any other owner is answered exactly as an unknown one, so holding another client's
 * cursor reveals nothing, not even that it exists. */
#define EXEC_OWNER_BYTES 32

/* ---- output pages ------------------------------------------------------------------------ */
/* execute_code output kept server-side and handed out in pages behind opaque cursors (pages.c).
 * Bounded: total bytes, number of entries, and an idle TTL; least recently used goes first. */
typedef struct exec_pages exec_pages_t;

typedef struct exec_page {
    char *out;    /* the page's part of stdout (UTF-8, NUL-terminated), owned */
    char *err;    /* the page's part of stderr, owned */
    char *cursor; /* opaque cursor of the next page, or NULL when this was the last; owned */
    char *meta;   /* copy of the meta text stored with the run (NULL if none); owned */
} exec_page_t;

/** max_bytes: all stored output together; max_entries: runs kept; ttl_ms: idle lifetime. */
int exec_pages_new(size_t max_bytes, size_t max_entries, uint64_t ttl_ms, exec_pages_t **out);
void exec_pages_free(exec_pages_t *p);

/**
 * Cuts the first page (page_chars Unicode characters: stdout first, then stderr) of a run's
 * output and, when more is left, keeps the whole output and returns a cursor for the rest.
 * meta (borrowed, may be NULL) is text kept with the run and returned with every page of it.
 * out/err are borrowed and must be valid UTF-8 (see exec_pages_utf8_sanitize). Output larger than
 * the store's byte budget is still paged for what fits: the rest is counted as dropped. The
 * output is kept for owner (EXEC_OWNER_BYTES, copied).
 */
int exec_pages_first(exec_pages_t *p, const unsigned char *owner, const char *meta, const char *out,
                     size_t out_len, const char *err, size_t err_len, size_t page_chars,
                     uint64_t now_ms, exec_page_t *page);
/** The page behind a cursor (repeatable until it expires). EXEC_EEXPIRED when unknown,
 *  and alike when it was kept for another owner. */
int exec_pages_next(exec_pages_t *p, const unsigned char *owner, const char *cursor,
                    uint64_t now_ms, exec_page_t *page);
/** Forgets every output kept for owner (its client has gone); returns how many. */
size_t exec_pages_drop_owner(exec_pages_t *p, const unsigned char *owner);
/** Frees a page's strings. */
void exec_page_clear(exec_page_t *page);
/** Entries and bytes currently kept (for tests and --check). */
size_t exec_pages_entries(const exec_pages_t *p);
size_t exec_pages_bytes(const exec_pages_t *p);

/* ---- a page as a model reads it (page_text.c) -------------------------------------------- */
#define EXEC_TRACEBACK_LINES 6    /* a failed run's last stderr lines put first */
#define EXEC_INLINE_OUTPUT   1000 /* past this much stdout on a failed page, they go first too */
/* One page's text: both streams' parts of a page (each at most what was kept) and the notes. */
#define EXEC_PAGE_TEXT_MAX (2u * EXEC_MAX_KEEP_BYTES + (1u << 20))

/** What the text of a page says around its output (every pointer borrowed, may be NULL but
 *  status). */
typedef struct exec_page_info {
    const char *status;            /* exec_status_name's, "refused" or "running": not "ok" failed */
    int exit_code;                 /* < 0: none */
    const char *signal_name;       /* "SIGKILL", or NULL */
    bool unsandboxed;              /* the run had no sandbox: a warning goes first */
    bool truncated;                /* the run's output was cut at the keep bound ... */
    uint64_t out_total, err_total; /* ... of this many bytes produced */
    const char *note;              /* sentences for the top (timeouts, warnings, the environment) */
    const char *err_tail;   /* the run's whole stderr, whose end goes first on a failed page */
    const char *heal;       /* what self-healing did, before the output it explains */
    const char *files_text; /* the lines naming the files the run left (first page only) */
} exec_page_info_t;

/**
 * The text a model reads for page (first: the run's first page): the warning and the note; on
 * a failed first page the status line (exit code, signal) and, unless the page shows all of it
 * anyway, the last EXEC_TRACEBACK_LINES lines of err_tail; heal; stdout (under "--- stdout ---"
 * when it is not alone) and stderr; "(no output)" for a silent success; the files' lines; the
 * truncation note (first and last page); the cursor line. No trailing newline. Returns 0 with
 * *text malloc'd (caller frees), EXEC_EINVAL (no page, no status), EXEC_ENOMEM, EXEC_ETOOBIG
 * past EXEC_PAGE_TEXT_MAX; *text is NULL then.
 */
int exec_page_text(const exec_page_t *page, bool first, const exec_page_info_t *info, char **text);

/** A run still going when its request stops waiting (status "running"). */
typedef struct exec_running_info {
    uint64_t elapsed_ms; /* since the run started */
    uint64_t timeout_ms; /* the run's own limit */
    const char *out;     /* stdout new since the last answer (UTF-8, may be "") */
    const char *err;     /* stderr new since the last answer */
    const char *cursor;  /* the run's cursor, to wait again or cancel */
} exec_running_info_t;

/**
 * The text a model reads for a run still going: how long it has run against its limit, the
 * output new since the last answer (stderr under "--- stderr ---") or that there is none, and
 * the cursor line saying how to wait for more or cancel. Returns 0 with *text malloc'd (caller
 * frees), EXEC_EINVAL, EXEC_ENOMEM or EXEC_ETOOBIG (past EXEC_PAGE_TEXT_MAX); *text NULL then.
 */
int exec_running_text(const exec_running_info_t *r, char **text);

/** How a run ended, for the first sentence of its result's text. */
typedef struct exec_run_end {
    exec_status_t status;
    bool cancelled;       /* a cancel ended it */
    bool in_session;      /* a session's cell: exec_cell_end_note says how it ended */
    double timeout_s;     /* the run's timeout */
    bool deadline_cut;    /* that timeout was cut to the request's overall deadline */
    double max_timeout_s; /* the most a request may ask for */
} exec_run_end_t;

/**
 * Appends to note the sentence saying why a run was killed (its timeout, and how to get more
 * time; a cancel; its memory limit); nothing for a run that ended by itself. Returns ptc_buf's
 * code.
 */
int exec_run_end_note(ptc_buf_t *note, const exec_run_end_t *r);

/** Appends prefix (may be NULL) and s to note, on a new line when note is not empty; nothing
 *  when s is NULL. */
void exec_note_line(ptc_buf_t *note, const char *prefix, const char *s);

/** What a cell's end means for its session, for the text of its result. */
typedef struct exec_cell_end {
    const char *handle;     /* the session's handle */
    bool fresh;             /* the request made the session (its first cell) */
    unsigned long cells;    /* cells run in the session so far */
    bool timed_out;         /* the cell hit its timeout */
    bool cancelled;         /* the cell was cancelled */
    bool interrupted;       /* KeyboardInterrupt ended the cell; the session lives */
    bool session_ended;     /* the session is gone */
    const char *end_reason; /* why it ended, or NULL: its interpreter stopped */
    double timeout_s;       /* the cell's timeout */
    double max_timeout_s;   /* the most a request may ask for */
} exec_cell_end_t;

/**
 * Appends to note the sentences a model reads about a session after one of its cells: how a
 * cancel or a timeout ended it (interrupted and alive, or killed with its state gone) or why the
 * session ended; then, for a session that lives, how to use it again (a new one: its handle and
 * how to close it; else its cell count), on a line of its own. Returns ptc_buf's code.
 */
int exec_cell_end_note(ptc_buf_t *note, const exec_cell_end_t *c);

/* ---- file store -------------------------------------------------------------------------- */
/* The files runs left in their output folder, kept server-side for resources/read under keys
 * "<32 hex digits>/<escaped name>" (filestore.c): 128 random bits each, so a key is a capability
 * like a cursor. Bounded like the pages: total bytes, entries, idle TTL, least recently used
 * first. */
typedef struct exec_filestore exec_filestore_t;

typedef struct exec_stored_file {
    const char *name;      /* as the run named it */
    const char *mime_type; /* static */
    const unsigned char *data;
    size_t len;
} exec_stored_file_t; /* borrowed: valid until the store's next put or get */

/** max_bytes: all kept files together; max_entries: files kept; ttl_ms: idle lifetime. */
int exec_filestore_new(size_t max_bytes, size_t max_entries, uint64_t ttl_ms,
                       exec_filestore_t **out);
void exec_filestore_free(exec_filestore_t *s);
/** Keeps a copy of data (name: no '/', not empty; mime static) for owner (EXEC_OWNER_BYTES,
 *  copied) and sets *key (malloc'd). Evicts the least recently used files to make room;
 *  EXEC_ETOOBIG past max_bytes. */
int exec_filestore_put(exec_filestore_t *s, const unsigned char *owner, const char *name,
                       const unsigned char *data, size_t len, const char *mime, uint64_t now_ms,
                       char **key);
/** The file behind key (its use refreshes its TTL). EXEC_EEXPIRED when unknown, and
 *  alike when it was kept for another owner. */
int exec_filestore_get(exec_filestore_t *s, const unsigned char *owner, const char *key,
                       uint64_t now_ms, exec_stored_file_t *f);
/** Forgets every file kept for owner (its client has gone); returns how many. */
size_t exec_filestore_drop_owner(exec_filestore_t *s, const unsigned char *owner);
size_t exec_filestore_entries(const exec_filestore_t *s);
size_t exec_filestore_bytes(const exec_filestore_t *s);

/* A file a run left, as a result lists it (filestore_keep.c). */
typedef struct exec_kept_file {
    char *name;         /* the file's name as valid UTF-8 (U+FFFD for bad bytes); owned */
    const char *mime;   /* static */
    char *key;          /* its key in the store, or NULL when omitted; owned */
    uint64_t size;      /* the file's size in the sandbox */
    bool truncated;     /* only its first bytes were kept */
    bool omitted;       /* none of its bytes are kept */
    bool picture;       /* show it as an image (kept whole, an image type, within the bounds) */
    bool noted;         /* reason is the note why an image is not shown */
    const char *reason; /* why it was cut or left out, or the image's note, or NULL; static */
} exec_kept_file_t;

/* The bounds on images shown in one result. */
typedef struct exec_keep_bounds {
    size_t image_max;  /* one image's bytes */
    size_t images_max; /* all the images' bytes in one result */
} exec_keep_bounds_t;

/**
 * Keeps f for owner in s (unless the run omitted it; a file larger than the whole store is
 * omitted so, saying why) and fills *k: its name, type, key, and whether it is shown as an image,
 * with *shown (the image bytes of the result so far) counted on. Returns 0, EXEC_EINVAL,
 * EXEC_ENOMEM (then *k holds nothing). Clear *k with exec_kept_file_clear.
 */
int exec_filestore_keep(exec_filestore_t *s, const unsigned char *owner, const exec_file_t *f,
                        uint64_t now_ms, const exec_keep_bounds_t *b, size_t *shown,
                        exec_kept_file_t *k);
void exec_kept_file_clear(exec_kept_file_t *k);
/** The file's line in a result's text: "- NAME (TYPE, N bytes[; omitted|truncated|note: WHY])
 *  [URI][ [shown as an image]]\n" (uri may be NULL). Returns ptc_buf's code. */
int exec_kept_file_line(ptc_buf_t *text, const exec_kept_file_t *k, const char *uri);
/** name percent-encoded as one URI path segment (RFC 3986 unreserved kept); malloc'd. */
char *exec_filestore_escape(const char *name);
/** A file's MIME type (static): png, jpeg, gif and webp only when the bytes' magic number and the
 *  name's extension agree; text types by extension when the bytes are UTF-8; else text/plain
 *  for UTF-8 and application/octet-stream. */
const char *exec_file_mime_type(const char *name, const unsigned char *data, size_t len);
/** One of the four image types that become image content blocks. */
bool exec_mime_is_image(const char *mime);
/** Served as text by resources/read (text/..., JSON, XML, SVG); else as a base64 blob. */
bool exec_mime_is_text(const char *mime);

/**
 * Returns a NUL-terminated copy of bytes with every invalid UTF-8 sequence (and NUL byte)
 * replaced by U+FFFD; *out_len gets its length. NULL on allocation failure.
 */
char *exec_pages_utf8_sanitize(const char *bytes, size_t len, size_t *out_len);

#include "executor_workspace.h" /* the workspace: what a client keeps between its requests */

#ifdef __cplusplus
}
#endif
#endif
