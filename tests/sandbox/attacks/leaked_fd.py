# A descriptor the server left open (the driver opened a secret file without O_CLOEXEC).
open_fds = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
if IN_SESSION:
    # A session's interpreter keeps its cell channel (a socket to the sandbox's own init): that
    # one descriptor is expected; anything else, or a file, is a leak.
    import stat
    chan = [fd for fd in open_fds if fd > 3 and stat.S_ISSOCK(os.fstat(fd).st_mode)]
    if len(chan) == 1:
        CHANNEL_FD = chan[0]
        blocked("the session's cell channel", "fd %d, a socket" % chan[0])
        open_fds.remove(chan[0])
if open_fds:
    escaped("inherited descriptors %s (the leaked one was %d)" % (open_fds, LEAKED_FD))
listed = sorted(int(x) for x in os.listdir("/proc/self/fd"))
if listed[:3] != [0, 1, 2] or len(listed) > (5 if IN_SESSION else 4):
    escaped("/proc/self/fd shows %s" % listed)
if IN_SESSION and LEAKED_FD == globals().get("CHANNEL_FD"):
    # the host's leaked number happens to be the channel's here: that socket is not the secret
    # file (a file would not pass S_ISSOCK above), so there is nothing more to read
    blocked("read leaked fd", "its number is the session's own channel socket")
else:
    try:
        # non-blocking first: a descriptor that is open here (whatever it is) must be reported,
        # never waited on until the run's timeout
        os.set_blocking(LEAKED_FD, False)
        os.read(LEAKED_FD, 10)
        escaped("read the leaked descriptor")
    except BlockingIOError:
        escaped("descriptor %d is open (%s)" % (LEAKED_FD, os.readlink("/proc/self/fd/%d" % LEAKED_FD)))
    except OSError as e:
        expect_errno("read leaked fd", e.errno, {errno.EBADF})
finish()
