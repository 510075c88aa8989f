# Running a file written to /tmp (noexec + Landlock), and memfd_create + execveat around noexec.
import shutil
shutil.copy("/usr/bin/true", "/tmp/t")
os.chmod("/tmp/t", 0o755)


def run_tmp():
    try:
        os.execv("/tmp/t", ["t"])
    except OSError as e:
        os._exit(100 + e.errno)


st = in_child(run_tmp)
code = os.waitstatus_to_exitcode(st)
if code == 0:
    escaped("executed /tmp/t")
else:
    expect_errno("exec /tmp/t", code - 100, {errno.EACCES})


def run_memfd():
    fd, err = sys_call(319, b"x", 1)  # memfd_create(name, MFD_CLOEXEC)
    if fd < 0:
        os._exit(100 + err)
    with open("/usr/bin/true", "rb") as f:
        os.write(fd, f.read())
    argv = (ctypes.c_char_p * 2)(b"x", None)
    envp = (ctypes.c_char_p * 1)(None)
    r, err = sys_call(322, fd, b"", argv, envp, 0x1000)  # execveat(fd, "", .., AT_EMPTY_PATH)
    os._exit(100 + err)


code = os.waitstatus_to_exitcode(in_child(run_memfd))
if code == 0:
    escaped("executed a memfd")
else:
    # root: memfds are never executable (vm.memfd_noexec=2); user: memfd_create is refused
    # (EINVAL: kernels 6.3-6.6 refuse memfds without MFD_NOEXEC_SEAL under that setting)
    expect_errno("memfd exec", code - 100, {errno.EACCES, errno.EPERM, errno.EINVAL})
finish()
