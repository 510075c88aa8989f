/* What the files of the package build share (not part of the module's API): the env_t state
 * and the steps one file calls in another. build.c holds the life cycle and the end states,
 * build_child.c the child process of a stage and the reading of its output, build_pip.c the
 * pip stage, the marker file and the look-up of a published folder. */
#ifndef PTC_ENVIRONMENT_BUILD_INTERNAL_H
#define PTC_ENVIRONMENT_BUILD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define VERSION_TIMEOUT_MS 10000u
#define LINE_MAX_KEEP      400u /* longer pip lines are cut in the tail and the log */
#define MAX_ENV_VARS       4096u
#define PATH_LEN           4096u

typedef enum { STAGE_NONE, STAGE_VERSION, STAGE_PIP, STAGE_REMOVE } stage_t;

struct env_t {
    uv_loop_t *loop;
    /* copies of the options */
    char *python, *cache_dir, *req_file, *index_url, *find_links;
    char **specs;
    size_t n_specs;
    bool no_index;
    unsigned timeout_s;
    env_options_t cb; /* only the callbacks and their user pointers are used */
    char *req_content;
    char pip_cfg[32], pip_nouser[32]; /* the variables pip_environment adds */

    env_state_t state;
    env_key_t key;
    bool have_key;
    char final_dir[PATH_LEN], site_dir[PATH_LEN], tmp_dir[PATH_LEN];
    bool tmp_made;

    /* the child of the current stage */
    stage_t stage;
    uv_process_t proc;
    uv_pipe_t out;
    uv_timer_t timer;
    bool proc_open, out_open, timer_open;
    /* a stage ends when both handles are closed (a next stage reuses them) */
    bool exited, out_eof, timed_out;
    int spawn_failed; /* uv_spawn's error for this stage, or 0 */
    bool proc_alive;  /* spawned and not yet reaped: kill() may target its pid */
    int64_t exit_status;
    int term_signal;
    uint64_t started_ms;
    char line[LINE_MAX_KEEP + 1]; /* the partial line being read */
    size_t line_len;
    bool line_cut;
    char *version; /* VERSION: what the interpreter printed */
    size_t version_len;
    char tail[ENV_TAIL_LINES][LINE_MAX_KEEP + 1]; /* ring of pip's last lines */
    size_t tail_next, tail_count;
    char collecting[ENV_MAX_SPEC_LEN + 1]; /* the last "Collecting X" pip printed */
    char named[ENV_MAX_SPEC_LEN + 1];      /* the requirement an error line named */

    uv_work_t work; /* STAGE_REMOVE */
    bool work_pending;
    env_state_t pending_state;
    char readbuf[16384];

    bool reused, pip_ran;
    uint64_t install_ms;
    char message[ENV_MESSAGE_MAX];
    char tail_text[ENV_TAIL_BYTES];
    char *installed;
    bool closing;
    int handles; /* open libuv handles; freed when 0 and no work pending */

    uint64_t begun_ms; /* uv_now at env_start */
    /* runs waiting for the build (build_wait.c): one timer checks their deadlines */
    struct env_waiter *waiters;
    uv_timer_t tick;
    bool tick_open, tick_on;
};

/* build.c */
/* A line for the log callback (none once closing). */
void env__logf(env_t *env, env_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* uv_now after updating the loop's time. */
uint64_t env__now_ms(env_t *env);
/* The build ended in state: the folder touched when READY, the log, on_done. */
void env__finish(env_t *env, env_state_t state);
/* Removes the temporary folder on the thread pool, then finishes with state. */
void env__remove_tmp_then(env_t *env, env_state_t state);
/* FAILED with the message fmt, once the temporary folder is gone. */
void env__fail(env_t *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The current stage's child exited and its output closed: the next step. */
void env__stage_maybe_done(env_t *env);

/* build_child.c */
/* Kills the current child's process group (pip runs in its own session). */
void env__kill_group(env_t *env);
/* Spawns argv with stdout and stderr on one pipe, the timer armed for timeout_ms. */
int env__spawn_stage(env_t *env, stage_t stage, char **argv, char **envp, uint64_t timeout_ms);

/* build_wait.c */
/* Calls the waiters: all of them, or those whose deadline passed. */
void env__release_waiters(env_t *env, bool all);
/* env_free's part: lets the waiters go without calling them, closes the timer. */
void env__drop_waiters(env_t *env);

/* build_pip.c */
/* Starts pip into the temporary folder; 0 or a libuv error. */
int env__start_pip(env_t *env);
/* Whether final_dir is published with a marker naming the key; takes its installed list. */
bool env__read_published(env_t *env);
/* pip ended: publish the folder (or use a concurrent builder's), or fail saying why. */
void env__pip_done(env_t *env);

#endif
