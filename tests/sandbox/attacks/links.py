# Symlink and hardlink tricks from /tmp towards host files.
os.symlink("/etc/shadow", "/tmp/s")
try_os("open symlink to /etc/shadow", lambda: open("/tmp/s"), {errno.ENOENT})
os.symlink(SECRET_FILE, "/tmp/c")
try_os("open symlink to the config", lambda: open("/tmp/c"), {errno.ENOENT})
try_os("hardlink python into /tmp", lambda: os.link("/usr/bin/python3", "/tmp/h"), {errno.EXDEV})
try_os("hardlink /etc/passwd into /tmp", lambda: os.link("/etc/passwd", "/tmp/p"), {errno.EXDEV})
try_os("follow /proc/1/root", lambda: os.stat("/proc/1/root/etc/shadow"), {errno.EACCES})
finish()
