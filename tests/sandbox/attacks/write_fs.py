# Writes outside /tmp: /, /usr, /etc, the Python prefix (and its site-packages), /home, /dev.
import sysconfig
targets = ["/x", "/usr/x", "/usr/bin/x", "/etc/x", sys.prefix + "/x",
           sysconfig.get_paths()["purelib"] + "/evil.py", "/dev/x", "/proc/x"]
for path in targets:
    try_os("create " + path, lambda p=path: open(p, "w"), {errno.EROFS, errno.EACCES, errno.ENOENT})
try_os("mkdir /home", lambda: os.mkdir("/home"), {errno.EROFS})
try_os("truncate /etc/passwd", lambda: open("/etc/passwd", "w"), {errno.EROFS})
try_os("chmod /usr/bin/python3", lambda: os.chmod("/usr/bin/python3", 0o777), {errno.EROFS, errno.EPERM})
try_os("write /proc/sys/kernel/hostname",
       lambda: open("/proc/sys/kernel/hostname", "w").write("x"), {errno.EACCES, errno.EROFS, errno.EPERM})
finish()
