# Prepended to every attack (after the driver's constants). Never run these files on the host:
# the driver runs them only through the sandbox.
import ctypes
import errno
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
_failures = []


def sys_call(nr, *args):
    """Raw syscall; returns (result, errno)."""
    conv = [a if not isinstance(a, int) else ctypes.c_long(a) for a in args]
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *conv)
    return r, ctypes.get_errno()


def escaped(msg):
    _failures.append(msg)
    print("ESCAPED:", msg, flush=True)


def blocked(what, detail=""):
    print("blocked:", what, detail, flush=True)


def ename(e):
    return errno.errorcode.get(e, str(e))


def expect_errno(what, got, allowed):
    """got is an errno (0 = the call worked); allowed is the exact set the walls produce."""
    if got == 0:
        escaped(what + " succeeded")
    elif got not in allowed:
        escaped("%s failed with %s, expected %s" % (what, ename(got), "/".join(ename(a) for a in allowed)))
    else:
        blocked(what, ename(got))


def try_os(what, fn, allowed):
    try:
        fn()
    except OSError as e:
        expect_errno(what, e.errno, allowed)
    else:
        expect_errno(what, 0, allowed)


def in_child(fn):
    """Runs fn in a forked child; returns the wait status."""
    pid = os.fork()
    if pid == 0:
        try:
            fn()
        finally:
            os._exit(0)
    return os.waitpid(pid, 0)[1]


def finish():
    if _failures:
        sys.exit(3)
    print("CONTAINED", flush=True)
