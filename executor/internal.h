/* Internal to the executor library: the launcher command line shared by the pool and the probe. */
#ifndef PTC_EXECUTOR_INTERNAL_H
#define PTC_EXECUTOR_INTERNAL_H

#include "executor.h"

#include <signal.h>

#define EXEC_MAX_ARGS        (24 + 2 * EXEC_MAX_MOUNTS)
#define EXEC_MAX_ENV         (16 + EXEC_MAX_PASS_ENV)
#define EXEC_REPORT_LINE     1024 /* longest status line read from the launcher */
#define EXEC_PROBE_WAIT_MS   10000
#define EXEC_WARM_MAX_DEATHS 3 /* see warm_deaths */
#define EXEC_READ_CHUNK      (64u << 10)
#define EXEC_EOF_WAIT_MS     2000u  /* after exit, how long pipes may stay open before we stop */
#define EXEC_WARM_IDLE_MS    30000u /* without a run for this long, half the warm sandboxes go */
#define EXEC_WARM_START      2u     /* warm sandboxes made at first (at most warm_target) */

/* What every run hands to the launcher; built once from the options. All strings owned. */
struct exec__cmd {
    char *launcher;            /* NULL when not found */
    char *python;              /* the path run inside the sandbox */
    char *args[EXEC_MAX_ARGS]; /* launcher options up to, not including, "--" (NULL-ended) */
    size_t n_args;
    char *env[EXEC_MAX_ENV]; /* NAME=VALUE, NULL-ended */
    size_t n_env;
    char error[512]; /* why building failed, for the user */
};

/* Returns 0 or an EXEC_E* code with cmd->error filled. cmd must be zeroed; free with _free. */
int exec__cmd_build(const exec_options_t *opts, struct exec__cmd *cmd);
void exec__cmd_free(struct exec__cmd *cmd);

/* strlcpy: copies what fits, always terminates (len > 0) */
static inline void exec__copy(char *dst, size_t len, const char *src)
{
    size_t n = 0;
    while (src[n] && n + 1 < len)
        n++;
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
    dst[n] = '\0';
}

/* Output retained from one stream: the first bytes, up to the buffer's cap (the bytes to keep),
   and a count of all. */
typedef struct {
    ptc_buf_t kept; /* after ENOMEM it holds what it had, and the rest only counts */
    uint64_t total;
} exec__outbuf_t;

/* An empty stream that keeps its first keep bytes. Allocates nothing. */
void exec__buf_init(exec__outbuf_t *b, size_t keep);
void exec__buf_free(exec__outbuf_t *b);
void exec__buf_append(exec__outbuf_t *b, const char *data, size_t n);
/* a view of b for a result: data never NULL */
exec_output_t exec__buf_output(const exec__outbuf_t *b);
/* "SIGKILL", or "SIG<n>" written into buf */
const char *exec__signal_name(int sig, char *buf, size_t len);

/* One sendmsg of data with fd attached (SCM_RIGHTS) on a fresh socket, where nothing is queued
   before it, so it does not block; 0, or -1 with errno (EAGAIN for a partial write). */
int exec__send_fd(int sock, const void *data, size_t len, int fd);

/* What the launcher and init said on the status pipe (docs/sandbox.md, "Status lines"). */
struct exec__report {
    exec_layer_state_t layers[EXEC_LAYER_COUNT];
    bool exit, sig, oom;
    int code; /* the exit status or signal number */
    /* "answer STATUS": the program ended (threads joined, atexit run, output flushed) and
       nothing is left to hand back; the interpreter's finalization and the tear-down follow */
    bool answer;
    int answer_code;
    char error[400]; /* "STAGE: MESSAGE" of the first error line */
    char line[EXEC_REPORT_LINE];
    size_t len;
};
/* feeds bytes of the status pipe; complete lines update *r */
void exec__report_feed(struct exec__report *r, const char *data, size_t n);

/* A most-recently-used-first list (lru.c): an entry embeds the node as its first member. The
 * node also says whom the entry was kept for (EXEC_OWNER_BYTES): only that owner finds it. */
typedef struct exec__lru_node {
    struct exec__lru_node *prev, *next;
    unsigned char owner[EXEC_OWNER_BYTES];
} exec__lru_node_t;
typedef struct exec__lru {
    exec__lru_node_t *head, *tail;
} exec__lru_t;
void exec__lru_unlink(exec__lru_t *l, exec__lru_node_t *n);
void exec__lru_push_front(exec__lru_t *l, exec__lru_node_t *n);
bool exec__lru_owned_by(const exec__lru_node_t *n, const unsigned char *owner);
/* Calls drop(store, node) for every entry kept for owner (drop unlinks and frees it); returns
 * how many. */
size_t exec__lru_drop_owner(exec__lru_t *l, const unsigned char *owner,
                            void (*drop)(void *store, exec__lru_node_t *n), void *store);

/* Files out as they come from init (files.c): the records of one run or cell. */
struct exec__owned {
    char *name;
    unsigned char *data;
};
struct exec__files_rx {
    bool active; /* a run or cell is on: records may come */
    exec_files_limits_t lim;
    exec_file_t *files; /* n_files, for the result */
    struct exec__owned *owned;
    size_t n_files, cap_files;
    uint64_t file_bytes; /* handed back so far */
    unsigned n_sent;     /* records with bytes */
    enum { EXEC__RX_LINE, EXEC__RX_NAME, EXEC__RX_DATA } state;
    char line[128];
    size_t clen;
    exec_file_t cur; /* the record being read */
    char *cur_name;
    unsigned char *cur_data;
    size_t need, got, name_len;
};
/* forgets the records (their memory too) and expects new ones within *lim */
void exec__files_rx_start(struct exec__files_rx *rx, const exec_files_limits_t *lim);
void exec__files_rx_clear(struct exec__files_rx *rx);
void exec__files_rx_free(struct exec__files_rx *rx);
/* Parses bytes from init. Returns 0 when all were taken, 1 when a "D EXIT" line came (*code;
   *used bytes taken up to it), EXEC_EINVAL when the sandbox broke the format or a bound,
   EXEC_ENOMEM. */
int exec__files_rx_feed(struct exec__files_rx *rx, const char *p, size_t n, size_t *used,
                        int *code);

/* A run (pool.c), also what a warm sandbox (warm.c) is until a run takes it. */
#define N_PIPES 3

enum { P_OUT, P_ERR, P_REP };
enum run_state { RUN_QUEUED, RUN_WARM, RUN_RUNNING, RUN_FINISHED };
/* asks the launcher to stop the code but keep its files (a timeout); the launcher's
   LAUNCH_STOP_SIGNAL (launcher/launch.h), which must be the same */
#define EXEC__STOP_SIGNAL SIGUSR1

enum timer_phase { T_IDLE, T_TIMEOUT, T_FILES, T_GRACE, T_EOF, T_DEFERRED };

struct exec_run {
    exec_pool_t *pool;
    exec_run_t *prev, *next; /* queue or active list */
    enum run_state state;
    char *code;
    uint64_t timeout_ms;
    int bridge_fd; /* owned until the launcher has it; -1 after */
    char *ro_dir;  /* canonical host paths joined by ':' (ro_dir, then path_dirs), or NULL */
    exec_callbacks_t cb;
    bool detached;  /* cancelled or pool freed: no more callbacks */
    bool discarded; /* a warm sandbox the pool let go unused (its key changed) */
    bool took_warm; /* the run got a sandbox set up ahead */
    /* A queued run that a warm sandbox took over: the caller's handle (owner) forwards to the
       sandbox's run (taker), which calls back with the owner's pointer and frees it. */
    exec_run_t *owner, *taker;

    uv_process_t proc;
    uv_pipe_t pipes[N_PIPES];
    /* the launcher's stdin, a socket: "CPU_SECONDS FILE_CAP CALL_CAP COUNT_CAP[ B]\nCODE"
       (+ bridge), then shut for writing and read for the output files init sends at the end */
    uv_pipe_t in;
    uv_shutdown_t shut;
    bool in_reading, in_eof;
    struct exec__files_rx rx;
    uv_write_t wreq;
    char header[96];
    bool in_closed, in_counted;
    uv_timer_t timer;
    uv_timer_t tick;
    enum timer_phase phase;
    int open_handles;
    bool proc_init; /* uv_spawn was called: the handle must be closed */
    bool spawned, exited;
    /* forked by the zygote (zygote.c), not spawned: proc is unused, the launcher is watched
       through its pidfd (pidpoll), which comes with the zygote's answer (znext: waiting for it;
       a signal asked before it is pending_sig) */
    bool zygote;
    int pidfd;
    uv_poll_t pidpoll;
    bool pidpoll_init;
    int pending_sig;
    exec_run_t *znext;
    bool eof[N_PIPES];
    int64_t exit_status;
    int term_signal;
    uint64_t start_ns, end_ns;
    bool timed_out;
    bool answered;  /* on_done went out at "answer"; the slot is held until the sandbox is gone */
    bool rep_later; /* warm: the report pipe is read when a run takes it or it exits */

    exec__outbuf_t out, err;
    struct exec__report rep;
    char message[700];
    char signame[16];
};

/* pool.c, for warm.c */
exec_run_t *exec__run_alloc(exec_pool_t *pool);
void exec__run_free(exec_run_t *run);
void exec__run_handles_init(exec_run_t *run);
int exec__run_spawn(exec_run_t *run);
/* A warm sandbox's report: what the launcher wrote so far is read now and the loop reads the
   rest (taken, or exited). Nothing when it is read already. */
void exec__report_resume(exec_run_t *run);
void exec__on_in_closed(uv_handle_t *h);

/* warm.c */
void exec__warm_ref(exec_run_t *run, bool ref);
void exec__warm_remove(exec_pool_t *pool, exec_run_t *run);
void exec__warm_up(exec_pool_t *pool);
void exec__warm_drop_zygote(exec_pool_t *pool);
/* starts the demand timer (exec_pool_new) and closes it (exec_pool_free) */
void exec__warm_sizing_init(exec_pool_t *pool);
void exec__warm_sizing_close(exec_pool_t *pool);
exec_run_t *exec__warm_take(exec_pool_t *pool, const char *ro_dir);
void exec__warm_adopt(exec_run_t *w, exec_run_t *req);
bool exec__same_dir(const char *a, const char *b);

/* The zygote (zygote.c): sandboxes forked from one pre-started interpreter instead of spawned. */
#define EXEC_ZYGOTE_LIBRARY "libptc-sandbox-zygote.so" /* next to the launcher */
struct exec__zygote;
/* the zygote's library next to launcher into buf; 0 when it is there, else -1 */
int exec__zygote_library(const char *launcher, char *buf, size_t len);
/* starts the pool's zygote (pool->zygote); an EXEC_E* code with probe.zygote_reason set */
int exec__zygote_start(exec_pool_t *pool);
/* no more forks: the zygote exits, its runs end the ordinary way (exec_pool_free) */
void exec__zygote_close(exec_pool_t *pool);
/* Instead of uv_spawn: the pipes are made here and opened on the run's handles, and the zygote
   forks the launcher with argv. 0, or -1 when the zygote cannot take it (then spawn). */
int exec__zygote_spawn(exec_run_t *run, char *const *argv);
/* kill() for a forked launcher (through its pidfd, or once it comes); 0 or -errno */
int exec__zygote_signal(exec_run_t *run, int sig);
/* pool.c: the launcher of run ended (from uv_spawn's exit callback or the zygote's pidfd) */
void exec__run_exited(exec_run_t *run, int64_t status, int sig);
/* run_result.c: the result of a run that has ended (or answered before its end); res's strings
   point into run, valid while it lives */
void exec__build_result(exec_run_t *run, exec_result_t *res);

/* The pool (pool.c); sessions (session.c) share its command, probe and lifetime. */
struct exec_pool {
    uv_loop_t *loop;
    struct exec__cmd cmd;
    unsigned max_concurrent, max_queue;
    size_t keep_out, keep_err;
    unsigned progress_ms;
    bool unsafe;
    bool test_switch;
    exec_probe_t probe;
    bool refusing;
    char refusal[700];
    unsigned warm_target; /* at most this many kept set up ahead (0: keep_warm off) */
    /* Sized by demand (warm.c): a run that finds none doubles warm_want, one that takes the
       last adds one, up to warm_target; EXEC_WARM_IDLE_MS without a run halves it, down to 1,
       and lets the extra ones go. The timer is unreferenced and counts in n_alive. */
    unsigned warm_want;
    uv_timer_t warm_idle;
    unsigned warm_idle_ms;
    bool warm_idle_init;
    /* Warm sandboxes that died unused in a row (a stray kill, the OOM killer): at
     * EXEC_WARM_MAX_DEATHS none are made any more, since something kills them all. A warm
     * run that ends starts the count again. */
    unsigned warm_deaths;
    bool warm_failed;
    exec_run_t *warm[EXEC_MAX_WARM]; /* set up, interpreter waiting for code; oldest first */
    unsigned n_warm;
    char *warm_dir; /* the ro_dir the warm sandboxes were made with; NULL: none */
    exec_run_t *q_head, *q_tail;
    unsigned n_queued;
    exec_run_t *active; /* spawned, not yet freed */
    unsigned n_running; /* holding a slot */
    unsigned n_alive;   /* allocated runs */
    bool closing;
    exec_session_t *sessions;    /* not yet freed (session.c) */
    struct exec__zygote *zygote; /* forks the sandboxes when probe.zygote; NULL: none */
    exec_files_limits_t files;   /* bounds for files out, defaults filled in */
    /* Every run's reads land here: libuv hands each read to on_read, which copies it out,
     * before the next alloc, and the loop is one thread. Per run it cost a 64 KiB calloc (two
     * a run with the pool: the request's and the next warm sandbox's). */
    char readbuf[EXEC_READ_CHUNK];
};

/* the canonical form of a run's ro_dir, malloc'd; NULL when it is not a usable directory */
char *exec__canonical_dir(const char *dir);
/* The run's folders (ro_dir, then path_dirs) canonical and joined by ':' into *out (malloc'd;
   NULL when there are none): the warm sandboxes' key, the launcher's --ro-lib and, unsafe,
   PYTHONPATH. 0, EXEC_EINVAL (a folder missing), EXEC_ENOMEM. */
int exec__canonical_dirs(const exec_run_opts_t *ro, char **out);
/* frees the pool once it is closing and nothing it allocated is left */
void exec__pool_maybe_free(exec_pool_t *pool);
/* kills every session (exec_pool_free): no callbacks afterwards */
void exec__sessions_kill(exec_pool_t *pool);

/* Status line parsing shared with the pool: updates the probe-like layer table. */
void exec__parse_layer(const char *rest, exec_layer_state_t *state,
                       char (*reason)[EXEC_REASON_MAX]);
exec_sandbox_level_t exec__level(const exec_layer_state_t *state);

/* The workspace's parked requests (workspace_park.c), owned by the workspace (workspace.c). */
typedef struct exec__parking exec__parking_t;
/* NULL on ENOMEM; max 0 counts as EXEC_WS_MAX_PARKED. */
exec__parking_t *exec__parking_new(uv_loop_t *loop, size_t max);
/* Ends every parked entry (its end callback, EXEC_WS_STOPPED); more may be parked later. */
void exec__parking_stop(exec__parking_t *pk);
/* exec__parking_stop, then frees pk (its timer closes at the loop's next turn). NULL allowed. */
void exec__parking_free(exec__parking_t *pk);
/* The workspace's parking (never NULL for a workspace exec_workspace_new made). */
exec__parking_t *exec__ws_parking(const exec_workspace_t *ws);
/* A zeroed timer on loop with data, or NULL on ENOMEM; exec__timer_close frees it. */
uv_timer_t *exec__timer_new(uv_loop_t *loop, void *data);
/* Closes t and frees it at the loop's next turn. NULL allowed. */
void exec__timer_close(uv_timer_t *t);

#endif
