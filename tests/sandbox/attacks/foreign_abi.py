# x32 syscall numbers and the ia32 `int 0x80` path: the filter kills the process (SIGSYS). A kernel
# without ia32 emulation turns int 0x80 into SIGSEGV before seccomp sees it.
import mmap
import signal


def x32():
    sys_call(0x40000000 | 39)  # getpid through the x32 ABI
    os._exit(0)


def ia32():
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")  # mov eax, 20 (getpid); int 0x80; ret
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
    os._exit(0)


for name, fn, ok in [("x32 syscall", x32, {signal.SIGSYS}),
                     ("int 0x80", ia32, {signal.SIGSYS, signal.SIGSEGV})]:
    st = in_child(fn)
    if os.WIFSIGNALED(st) and os.WTERMSIG(st) in ok:
        blocked(name, signal.Signals(os.WTERMSIG(st)).name)
    else:
        escaped("%s returned (status %#x)" % (name, st))
finish()
