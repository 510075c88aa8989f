/* Internal header of ptc-sandbox-launch (not part of the executor's public API). */
#ifndef PTC_LAUNCH_H
#define PTC_LAUNCH_H

#include "../executor.h"

#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define LAUNCH_REPORT_FD 3 /* status lines to the pool */
#define LAUNCH_CODE_FD   3 /* the interpreter reads the run (and the bridge) from here */
#define LAUNCH_NETNS_FD  4 /* a zygote child's launcher: the zygote's net namespace sink */
/* RLIMIT_CPU of an interpreter still waiting for its code: above any run's (init lowers it to
   the run's allowance plus the start-up's use when the code comes) */
#define LAUNCH_WARM_CPU_SECONDS (EXEC_MAX_TIMEOUT_MS / 1000 + 60)
#define LAUNCH_MAX_PREFIXES     4
#define LAUNCH_MAX_MOUNTS       EXEC_MAX_MOUNTS
#define LAUNCH_INNER_UID        1000  /* the sandbox user inside a user namespace */
#define LAUNCH_NOBODY           65534 /* the outer uid runs get when root starts them */
#define LAUNCH_ROOT_TMPFS       "mode=0755,size=2m"
#define LAUNCH_DEV_TMPFS        "mode=0755,size=64k"
#define LAUNCH_PATH_MAX         4096
/* the launcher's stop request that keeps the files (a run's timeout): forwarded to init, which
   kills the code, sends back what it left in the output folder, and reports (the pool's
   EXEC__STOP_SIGNAL, executor/internal.h, must be the same) */
#define LAUNCH_STOP_SIGNAL   SIGUSR1
#define LAUNCH_BRIDGE_FD_STR "3" /* EXEC_BRIDGE_FD, spelt for the Python sources */
_Static_assert(EXEC_BRIDGE_FD == 3, "LAUNCH_BRIDGE_FD_STR must follow EXEC_BRIDGE_FD");
#define LAUNCH_OUTPUT_DIR_NAME EXEC_OUTPUT_DIR_NAME

/* Python source (indented for a function body that has imported os and sys): figures that
   matplotlib.pyplot holds open are saved as PNGs to $PTC_OUTPUT_DIR by _ptc_plots_end() and
   by plt.show(), which an import hook replaces once the code itself imports pyplot (matplotlib
   is never imported here: it costs half a second). */
#define LAUNCH_PLOT_HOOK                                                                           \
    "    figs = [0]\n"                                                                             \
    "    odir = os.environ.get('PTC_OUTPUT_DIR') or '/tmp/outputs'\n"                              \
    "    def _ptc_save(plt):\n"                                                                    \
    "        for num in plt.get_fignums():\n"                                                      \
    "            figs[0] += 1\n"                                                                   \
    "            try:\n"                                                                           \
    "                plt.figure(num).savefig(os.path.join(odir, 'figure-%d.png' % figs[0]))\n"     \
    "            except Exception as e:\n"                                                         \
    "                sys.stderr.write('[ptc: figure %s not saved: %s]\\n' % (num, e))\n"           \
    "        plt.close('all')\n"                                                                   \
    "    def _ptc_plots_end():\n"                                                                  \
    "        plt = sys.modules.get('matplotlib.pyplot')\n"                                         \
    "        if plt is not None:\n"                                                                \
    "            try:\n"                                                                           \
    "                _ptc_save(plt)\n"                                                             \
    "            except BaseException as e:\n"                                                     \
    "                sys.stderr.write('[ptc: figures not saved: %s]\\n' % (e,))\n"                 \
    "    class _PtcPlotHook:\n"                                                                    \
    "        @staticmethod\n"                                                                      \
    "        def find_spec(name, path=None, target=None):\n"                                       \
    "            if name != 'matplotlib.pyplot':\n"                                                \
    "                return None\n"                                                                \
    "            for f in sys.meta_path:\n"                                                        \
    "                fs = getattr(f, 'find_spec', None)\n"                                         \
    "                if f is _PtcPlotHook or fs is None:\n"                                        \
    "                    continue\n"                                                               \
    "                spec = fs(name, path, target)\n"                                              \
    "                if spec is None:\n"                                                           \
    "                    continue\n"                                                               \
    "                run = getattr(spec.loader, 'exec_module', None)\n"                            \
    "                if run is not None:\n"                                                        \
    "                    def exec_module(m, run=run):\n"                                           \
    "                        run(m)\n"                                                             \
    "                        def show(*a, **k):\n"                                                 \
    "                            _ptc_save(m)\n"                                                   \
    "                        show.__doc__ = getattr(m.show, '__doc__', None)\n"                    \
    "                        m.show = show\n"                                                      \
    "                    spec.loader.exec_module = exec_module\n"                                  \
    "                return spec\n"                                                                \
    "            return None\n"                                                                    \
    "    sys.meta_path.insert(0, _PtcPlotHook)\n"

/* The interpreter's first code in a one-shot run (launch_child.c says what it does), also what a
   zygote's child runs once it is in its sandbox (executor/zygote.c), up to the program's end:
   LAUNCH_BOOTSTRAP_END or LAUNCH_BOOTSTRAP_ZYGOTE_END follows. Indented code that needs
   LAUNCH_PLOT_HOOK above. */
#define LAUNCH_BOOTSTRAP_RUN                                                                       \
    "def _ptc_boot():\n"                                                                           \
    "    import os, sys, _socket\n"                                                                \
    "    del globals()['_ptc_boot']\n"                                                             \
    "    i = os.fstat(0)\n"                                                                        \
    "    i = (i.st_dev, i.st_ino)\n" LAUNCH_PLOT_HOOK "    s = _socket.socket(fileno=3)\n"         \
    "    h, anc, _f, _a = s.recvmsg(1, _socket.CMSG_SPACE(4), _socket.MSG_CMSG_CLOEXEC)\n"         \
    "    parts = []\n"                                                                             \
    "    while True:\n"                                                                            \
    "        b = s.recv(65536)\n"                                                                  \
    "        if not b:\n"                                                                          \
    "            break\n"                                                                          \
    "        parts.append(b)\n"                                                                    \
    "    s.close()\n"                                                                              \
    "    fds = [int.from_bytes(d[:4], sys.byteorder) for l, t, d in anc\n"                         \
    "           if l == _socket.SOL_SOCKET and t == _socket.SCM_RIGHTS]\n"                         \
    "    if h not in (b'B', b'-') or len(fds) != (h == b'B'):\n"                                   \
    "        os._exit(125)\n"                                                                      \
    "    if fds:\n"                                                                                \
    "        os.dup2(fds[0], 3)\n"                                                                 \
    "        os.close(fds[0])\n"                                                                   \
    "        os.environ['" EXEC_BRIDGE_ENV "'] = '3'\n"                                            \
    "    src = b''.join(parts).decode('utf-8', 'surrogateescape')\n"                               \
    "    del s, h, anc, parts, b, fds\n"                                                           \
    "    d = sys.modules['__main__'].__dict__\n"                                                   \
    "    x = None\n"                                                                               \
    "    try:\n"                                                                                   \
    "        exec(src, d)\n"                                                                       \
    "    except SystemExit as e:\n"                                                                \
    "        x = e\n"                                                                              \
    "    except BaseException as e:\n"                                                             \
    "        t = e.__traceback__.tb_next if e.__traceback__ else None\n"                           \
    "        e.__traceback__ = t\n"                                                                \
    "        sys.last_type, sys.last_value, sys.last_traceback = type(e), e, t\n"                  \
    "        sys.excepthook(type(e), e, t)\n"                                                      \
    "        x = SystemExit(1)\n"                                                                  \
    "    finally:\n"                                                                               \
    "        _ptc_plots_end()\n"                                                                   \
    "    n = 0 if x is None or x.code is None else x.code\n"                                       \
    "    if isinstance(n, int) and -2**31 <= n < 2**31:\n"                                         \
    "        th = sys.modules.get('threading')\n"                                                  \
    "        if th is not None:\n"                                                                 \
    "            th._shutdown()\n"                                                                 \
    "        import atexit\n"                                                                      \
    "        atexit._run_exitfuncs()\n"                                                            \
    "        for f in (sys.stdout, sys.stderr):\n"                                                 \
    "            try:\n"                                                                           \
    "                f.flush()\n"                                                                  \
    "            except BaseException:\n"                                                          \
    "                pass\n"                                                                       \
    "        try:\n"                                                                               \
    "            e = os.fstat(0)\n"                                                                \
    "            if (e.st_dev, e.st_ino) == i:\n"                                                  \
    "                os.write(0, b'E %d\\n' % (n & 255))\n"                                        \
    "        except OSError:\n"                                                                    \
    "            pass\n"

/* The exec'd interpreter's end: Python's own (Py_FinalizeEx, with SystemExit's status). */
#define LAUNCH_BOOTSTRAP_END                                                                       \
    "    if x is not None:\n"                                                                      \
    "        raise x\n"                                                                            \
    "_ptc_boot()\n"

/* A zygote child's end (docs/sandbox.md, "A fork server (zygote)"): Py_FinalizeEx in a forked
   interpreter frees every object of the zygote's heap too, which writes to nearly every page of
   it and so copies them all (about 3 ms and 600 page faults of a 14 ms run here). After the
   answer, what a run can still see of the finalization is done instead: its __main__ (a module
   of its own, executor/zygote.c) leaves sys.modules and is freed as at Python's end (its
   functions make a cycle with its globals: the collection below frees them, running their
   __del__ methods), with the file objects the run opened held until after that collection and
   then flushed (the collection finalizes a cycle's objects in no set order, so it could close
   a file's descriptor before its buffer is written: python3 -c can lose that data, this end
   does not); files held by a module the zygote had imported are flushed the same way, as the
   clearing of that module would have closed them. Then stdout and stderr, and the process ends
   with the program's status; the zygote's objects are frozen, so nothing here walks them. The
   file objects are found by their C base class (_io._IOBase, which every io class and every
   subclass of io.IOBase has), not by the io.IOBase ABC, whose isinstance costs about 1 us an
   object (and a weak reference a type) where the C check costs a tenth of that. A
   SystemExit whose code is not an int (Python prints it) still takes Python's own end. */
#define LAUNCH_BOOTSTRAP_ZYGOTE_END                                                                \
    "    import gc\n"                                                                              \
    "    if isinstance(n, int) and -2**31 <= n < 2**31:\n"                                         \
    "        import _io, builtins as B\n"                                                          \
    "        x = src = None\n"                                                                     \
    "        for a in ('last_type', 'last_value', 'last_traceback'):\n"                            \
    "            sys.__dict__.pop(a, None)\n"                                                      \
    "        k = (_io.FileIO, _io.BufferedWriter, _io.BufferedRandom, _io.TextIOWrapper)\n"        \
    "        k = [o for o in gc.get_objects() if B.isinstance(o, k)]\n"                            \
    "        sys.modules.pop('__main__', None)\n"                                                  \
    "        d = None\n"                                                                           \
    "        gc.collect()\n"                                                                       \
    "        for o in gc.get_objects():\n"                                                         \
    "            if B.isinstance(o, _io._IOBase):\n"                                               \
    "                try:\n"                                                                       \
    "                    if not o.closed:\n"                                                       \
    "                        o.flush()\n"                                                          \
    "                except B.BaseException:\n"                                                    \
    "                    pass\n"                                                                   \
    "        for f in (sys.stdout, sys.stderr):\n"                                                 \
    "            try:\n"                                                                           \
    "                f.flush()\n"                                                                  \
    "            except B.BaseException:\n"                                                        \
    "                pass\n"                                                                       \
    "        os._exit(n & 255)\n"                                                                  \
    "    gc.unfreeze()\n" LAUNCH_BOOTSTRAP_END

#define LAUNCH_BOOTSTRAP LAUNCH_BOOTSTRAP_RUN LAUNCH_BOOTSTRAP_END

struct launch_mount {
    const char *src;
    const char *dst;
    bool rw;
    /* set by launch_idmap_mounts: the detached idmapped copy of src to attach (-1: a plain
       bind), whose files are stored as uid owner; why says why a rw one has none */
    int tree_fd;
    uid_t owner;
    char why[64];
};

/* Where the i-th --ro-lib folder appears in the sandbox ("/opt/ptc/lib", "/opt/ptc/lib1"...). */
void launch_ro_lib_path(size_t i, char *buf, size_t len);

struct launch_cfg {
    char *python; /* argv strings */
    const char *prefixes[LAUNCH_MAX_PREFIXES];
    size_t n_prefixes;
    struct launch_mount mounts[LAUNCH_MAX_MOUNTS];
    size_t n_mounts;
    uint64_t memory_bytes;
    uint64_t tmp_bytes;
    uint64_t fsize_bytes;
    unsigned pids;
    unsigned cpu_millis; /* cpu.max: thousandths of a core */
    unsigned cpu_seconds;
    unsigned nofile;
    int disabled;  /* a layer id turned off by the test switch, or -1 */
    int bridge_fd; /* the bridge that came with the code (SCM_RIGHTS), else -1 */
    bool session;  /* --session: cells, not one run (launch_session.c) */
    bool files;    /* the request asked for the output files back, within: */
    uint64_t files_file_cap, files_call_cap;
    unsigned files_count_cap;
    const char *ro_lib; /* --ro-lib DIR[:DIR...] was given (split into ro_libs) */
    /* ro_lib split: the first bound read-only at EXEC_RO_LIB_PATH, the next at
       EXEC_RO_LIB_PATH "1", "2", ... (launch_ro_lib_path) */
    char *ro_libs[EXEC_MAX_PATH_DIRS + 1];
    size_t n_ro_libs;
    char *code;
    /* set in a zygote's child (launch_zygote.c): the interpreter's process returns here, into the
       zygote's pre-started interpreter, where the launcher would exec one */
    jmp_buf *resume;
    /* set in a zygote's child too: where the launcher hands the zygote its run's net namespace
       (a descriptor of it, SCM_RIGHTS), so that the zygote releases the namespaces of ended runs
       in batches; -1 without one. Closed in init and once handed. */
    int netns_sink;
};

/* The launcher's program (launch_main.c): the executable's main, and a zygote child's entry with
   resume set and netns_sink its batch socket, or -1 (launch_zygote.c). Returns the launcher's
   exit status; with resume, the interpreter's process comes back through longjmp(*resume, 1)
   instead. */
int launch_main(int argc, char **argv, jmp_buf *resume, int netns_sink);

/* What the parent decided before the child runs its part. */
struct launch_plan {
    bool userns;      /* the child lives in a new user namespace */
    bool root_mapped; /* inside 0 maps to outer 0 (root started us), 1000 to nobody */
    int ns_flags;     /* CLONE_NEW* the child got (without CLONE_NEWUSER) */
    bool memory_cgroup;
    bool run_cgroup; /* the launcher made a cgroup for the run (moves the child into it) */
    /* an ordinary user without user namespaces: no namespaces, Landlock confines the files,
       a per-run directory replaces /tmp, the launcher (a subreaper) kills every descendant */
    bool landlock_only;
    char run_dir[64];
    unsigned nproc; /* RLIMIT_NPROC: per uid, so without a user namespace it adds to the count */
};

/* Report one line of text (newlines flattened) on the report fd. */
void launch_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Report one line "layer NAME STATE REASON" on the report fd. */
void launch_layer(exec_layer_id_t id, exec_layer_state_t state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Report "error STAGE: MESSAGE" and exit the calling process (the run is refused). */
_Noreturn void launch_fatal(const char *stage, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool launch_disabled(const struct launch_cfg *cfg, exec_layer_id_t id);

/* As root: an idmapped detached tree for each rw mount owned by an ordinary user, so that what
   the sandbox writes there is stored as that user's (idmap.c). Sets every mount's tree_fd. */
void launch_idmap_mounts(struct launch_cfg *cfg, bool root);

/* The child's filesystem view (rootfs.c): a read-only root of binds, pivoted into; the layers it
 * reports (rootfs, private tmp, memfd_noexec, proc masks). *memfd_ok: vm.memfd_noexec is set. */
bool launch_setup_rootfs(const struct launch_cfg *cfg, const struct launch_plan *plan,
                         bool *memfd_ok);
/* launch_fatal with errno's text (and, for a refused mount, the AppArmor hint). */
_Noreturn void launch_die_errno(const char *stage, const char *what);
/* a + b into buf; a path too long is fatal (stage rootfs). */
void launch_fmt_path(char *buf, size_t len, const char *a, const char *b);
/* The child: sandbox setup, then the interpreter. Never returns. */
_Noreturn void launch_child(const struct launch_cfg *cfg, const struct launch_plan *plan,
                            int sync_fd, int life_fd);

/* A session's init after the interpreter started (launch_session.c). Never returns. */
_Noreturn void launch_session_init(const struct launch_cfg *cfg, const struct launch_plan *plan,
                                   pid_t py, int chan);
/* After a one-shot run: the files in the output folder, on stdin, in the session's format
   (a failed send only stops them). */
void launch_outputs_send(const struct launch_plan *plan, uint64_t file_cap, uint64_t call_cap,
                         unsigned count_cap);
/* the interpreter's first code in a session */
extern const char launch_session_driver[];

/* seccomp: both filters; err gets a reason on failure. */
int launch_seccomp_apply(char *err, size_t errlen);
/* Landlock: 1 applied, 0 unavailable (reason in err), -1 failed. */
int launch_landlock_apply(const struct launch_cfg *cfg, const struct launch_plan *plan, char *err,
                          size_t errlen);

/* cgroups, driven by the parent. */
struct launch_cgroup;
struct launch_cgroup *launch_cgroup_create(const struct launch_cfg *cfg);
int launch_cgroup_attach(struct launch_cgroup *cg, pid_t pid);
bool launch_cgroup_oom(struct launch_cgroup *cg);
bool launch_cgroup_has_memory(const struct launch_cgroup *cg);
void launch_cgroup_destroy(struct launch_cgroup *cg);

#endif
