# The zygote (the pre-started interpreter that forked this sandbox's launcher; ZYGOTE_PID, 0 when
# the run did not come from one) and every other process outside the run cannot be seen or
# reached: no such pid in /proc, and kill, pidfd_open, PTRACE_SEIZE and process_vm_readv on it
# fail. Every pid up to past the highest of them answers kill(pid, 0) with ESRCH unless it is one
# of the run's own.
ours = set(int(p) for p in os.listdir("/proc") if p.isdigit())
targets = [p for p in (ZYGOTE_PID, SERVER_PID, SENTINEL_PID) if p > 0]


class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


buf = ctypes.create_string_buffer(64)
local = Iovec(ctypes.addressof(buf), 64)
remote = Iovec(0x400000, 64)
for pid in targets:
    if pid in ours:
        escaped("pid %d (outside the run) is in /proc" % pid)
    try_os("kill(%d, 0)" % pid, lambda: os.kill(pid, 0), {errno.ESRCH})
    r, e = sys_call(434, pid, 0)  # pidfd_open
    expect_errno("pidfd_open(%d)" % pid, e if r < 0 else 0, {errno.ESRCH, errno.EPERM, errno.ENOSYS})
    r, e = sys_call(101, 0x4206, pid, 0, 0)  # ptrace(PTRACE_SEIZE)
    expect_errno("ptrace(SEIZE, %d)" % pid, e if r < 0 else 0, {errno.ESRCH, errno.EPERM, errno.ENOSYS})
    r, e = sys_call(310, pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)  # process_vm_readv
    expect_errno("process_vm_readv(%d)" % pid, e if r < 0 else 0, {errno.ESRCH, errno.EPERM, errno.ENOSYS})
hi = max(targets + list(ours)) + 4096
alive = []
for pid in range(1, hi):
    if pid in ours:
        continue
    try:
        os.kill(pid, 0)
        alive.append(pid)
    except ProcessLookupError:
        pass
    except OSError:
        alive.append(pid)
if alive:
    escaped("%d pids outside the run answer kill(pid, 0): %s" % (len(alive), alive[:10]))
else:
    blocked("pids outside the run", "none of 1..%d but our %d" % (hi - 1, len(ours)))
finish()
