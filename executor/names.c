/* Names shared by the library and the launcher: the launcher reports layers by these names. */
#include "executor.h"

#include <string.h>

static const char *const layer_names[EXEC_LAYER_COUNT] = {
    [EXEC_LAYER_USER_NS] = "user-ns",
    [EXEC_LAYER_PID_NS] = "pid-ns",
    [EXEC_LAYER_NET_NS] = "net-ns",
    [EXEC_LAYER_MOUNT_NS] = "mount-ns",
    [EXEC_LAYER_IPC_NS] = "ipc-ns",
    [EXEC_LAYER_UTS_NS] = "uts-ns",
    [EXEC_LAYER_ROOTFS] = "rootfs",
    [EXEC_LAYER_PRIVATE_TMP] = "private-tmp",
    [EXEC_LAYER_UID_DROP] = "uid-drop",
    [EXEC_LAYER_CAPS_DROP] = "caps-drop",
    [EXEC_LAYER_NO_NEW_PRIVS] = "no-new-privs",
    [EXEC_LAYER_SECCOMP] = "seccomp",
    [EXEC_LAYER_LANDLOCK] = "landlock",
    [EXEC_LAYER_CGROUP_MEMORY] = "cgroup-memory",
    [EXEC_LAYER_CGROUP_PIDS] = "cgroup-pids",
    [EXEC_LAYER_CGROUP_CPU] = "cgroup-cpu",
    [EXEC_LAYER_RLIMITS] = "rlimits",
    [EXEC_LAYER_MEMFD_NOEXEC] = "memfd-noexec",
    [EXEC_LAYER_PROCESS_TREE] = "process-tree",
    [EXEC_LAYER_CGROUP_NS] = "cgroup-ns",
    [EXEC_LAYER_PROC_MASK] = "proc-mask",
};

const char *exec_layer_name(exec_layer_id_t id)
{
    if ((int)id < 0 || id >= EXEC_LAYER_COUNT) return NULL;
    return layer_names[id];
}

int exec_layer_from_name(const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < EXEC_LAYER_COUNT; i++)
        if (strcmp(layer_names[i], name) == 0) return i;
    return -1;
}

const char *exec_sandbox_level_name(exec_sandbox_level_t level)
{
    switch (level) {
    case EXEC_SANDBOX_FULL:
        return "full";
    case EXEC_SANDBOX_DEGRADED:
        return "degraded";
    case EXEC_SANDBOX_NONE:
        return "none";
    }
    return "none";
}

const char *exec_status_name(exec_status_t status)
{
    switch (status) {
    case EXEC_STATUS_OK:
        return "ok";
    case EXEC_STATUS_ERROR:
        return "error";
    case EXEC_STATUS_TIMEOUT:
        return "timeout";
    case EXEC_STATUS_KILLED:
        return "killed";
    case EXEC_STATUS_OOM:
        return "oom";
    case EXEC_STATUS_REFUSED:
        return "refused";
    }
    return "error";
}

const char *exec_strerror(int err)
{
    switch (err) {
        EXEC_ERRORS(PTC_ERR_CASE)
    }
    return ptc_strerror(err);
}

const char *exec_error_hint(int err)
{
    switch (err) {
    case EXEC_OK:
        return "";
    case EXEC_EINVAL:
        return "Check the option values (mount syntax HOST:PATH[:ro|rw], absolute paths, "
               "environment variable names).";
    case EXEC_ENOMEM:
        return "The server is out of memory; lower --max-concurrent or retry later.";
    case EXEC_EQUEUEFULL:
        return "Too many runs at once: wait for earlier runs to finish, or raise --max-queue / "
               "--max-concurrent.";
    case EXEC_ESPAWN:
    case EXEC_ENOLAUNCHER:
        return "Install ptc-sandbox-launch next to the ptc-mcp binary (it is built and installed "
               "with it), and check that it is executable.";
    case EXEC_ETOOBIG:
        return "Send less code per run (at most 120 KiB); split it into steps.";
    case EXEC_ECLOSING:
        return "The server is shutting down; retry against a running server.";
    case EXEC_EPYTHON:
        return "Pass --python the real interpreter binary (e.g. /usr/bin/python3 or "
               "~/.pyenv/versions/X/bin/python3), not a shim script.";
    case EXEC_EPROBE:
        return "Run `ptc-mcp --check` to see which sandbox layer fails; docs/sandbox.md explains "
               "how to enable each.";
    case EXEC_EBUSY:
        return "Wait for the running cell to finish (or cancel it) before sending the next.";
    case EXEC_ESESSIONENDED:
        return "Start a new session; the state of the old one is gone.";
    case EXEC_EUNSUPPORTED:
        return "Sessions run only in the sandbox: drop --unsafe-no-sandbox to use them.";
    case EXEC_EREFUSED:
        return "A mandatory sandbox layer is missing: run `ptc-mcp --check` and fix the host.";
    }
    return "See docs/sandbox.md.";
}
