# A descriptor the server left open (the driver opened a secret file without O_CLOEXEC).
open_fds = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
if open_fds:
    escaped("inherited descriptors %s (the leaked one was %d)" % (open_fds, LEAKED_FD))
listed = sorted(int(x) for x in os.listdir("/proc/self/fd"))
if listed[:3] != [0, 1, 2] or len(listed) > 4:
    escaped("/proc/self/fd shows %s" % listed)
try:
    os.read(LEAKED_FD, 10)
    escaped("read the leaked descriptor")
except OSError as e:
    expect_errno("read leaked fd", e.errno, {errno.EBADF})
finish()
