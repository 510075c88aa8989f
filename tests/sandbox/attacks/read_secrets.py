# Host secrets: /etc/shadow, the server's config file, the server's environment, /root, /home.
for path in ["/etc/shadow", SECRET_FILE, "/proc/%d/environ" % SERVER_PID, "/root/.bashrc",
             "/home", "/proc/%d/root/etc/shadow" % SERVER_PID, "/sys/kernel"]:
    try:
        with open(path, "rb") as f:
            f.read(1)
        escaped("read " + path)
    except OSError as e:
        expect_errno("read " + path, e.errno, {errno.ENOENT})
try:
    os.listdir("/proc/1/root")
    escaped("listed /proc/1/root")
except OSError as e:
    expect_errno("list /proc/1/root", e.errno, {errno.EACCES})
finish()
