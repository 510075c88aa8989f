# The server: PTRACE_SEIZE it (ATTACH would stop the test runner), signal it, and everything.
import signal
r, err = sys_call(101, 0x4206, SERVER_PID, 0, 0)  # ptrace(PTRACE_SEIZE)
expect_errno("ptrace SEIZE server", 0 if r == 0 else err, {errno.EPERM})
r, err = sys_call(101, 0x4206, 1, 0, 0)
expect_errno("ptrace SEIZE init", 0 if r == 0 else err, {errno.EPERM})
# ESRCH: not in our PID namespace; EPERM: Landlock's signal scope (no user namespace)
try_os("kill server", lambda: os.kill(SERVER_PID, signal.SIGKILL), {errno.ESRCH, errno.EPERM})
try_os("kill sentinel", lambda: os.kill(SENTINEL_PID, signal.SIGKILL), {errno.ESRCH, errno.EPERM})
if NO_USERNS:  # init is not PID 1 there: kill(-1) would only end this run
    finish()
    sys.exit(0)
try:
    os.kill(-1, signal.SIGKILL)  # every process this one may signal: none outside the sandbox
except ProcessLookupError:
    pass
blocked("kill(-1)", "the driver checks that the server and the sentinel survived")
finish()
