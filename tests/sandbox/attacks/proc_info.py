# Host information in /proc: what Docker masks reads as nothing (a masked file is /dev/null, a
# masked folder an empty tmpfs), and what it keeps read-only refuses writes. Without the masks,
# /proc/interrupts names the host's devices and /proc/keys lists the keyrings of the server's
# user; a path this kernel lacks is fine either way.
for path in ["/proc/interrupts", "/proc/keys", "/proc/kcore", "/proc/timer_list",
             "/proc/latency_stats", "/proc/sched_debug", "/proc/timer_stats"]:
    try:
        with open(path, "rb") as f:
            data = f.read(4096)
    except OSError as e:
        expect_errno("read " + path, e.errno, {errno.ENOENT, errno.EACCES, errno.EPERM})
        continue
    if data:
        escaped("read %d bytes of %s: %r" % (len(data), path, data[:60]))
    else:
        blocked("read " + path, "empty")
for path in ["/proc/acpi", "/proc/scsi", "/proc/asound"]:
    try:
        names = os.listdir(path)
    except OSError as e:
        expect_errno("list " + path, e.errno, {errno.ENOENT})
        continue
    if names:
        escaped("listed %s: %s" % (path, names[:5]))
    else:
        blocked("list " + path, "empty")
# Writes: the sandbox user may not write sysctls anyway (EACCES), so what is checked is the
# wall itself: each of Docker's read-only paths that exists is a read-only mount of its own.
ro_mounts = {}
with open("/proc/self/mountinfo") as f:
    for line in f:
        fields = line.split()
        ro_mounts[fields[4]] = "ro" in fields[5].split(",")
for path in ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]:
    if not os.path.exists(path):
        continue
    if not ro_mounts.get(path):
        escaped("%s is no read-only mount" % path)
    else:
        blocked("write " + path, "read-only mount")
for path, data in [("/proc/sys/kernel/hostname", b"x"), ("/proc/sysrq-trigger", b"h")]:
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        expect_errno("open %s for writing" % path, e.errno, {errno.EROFS, errno.EACCES, errno.ENOENT})
        continue
    try:
        os.write(fd, data)
        escaped("wrote " + path)
    except OSError as e:
        escaped("opened %s for writing (the write failed: %s)" % (path, ename(e.errno)))
    finally:
        os.close(fd)
finish()
