# Landlock-only mode (an ordinary user without user namespaces): the host's tree is there, but
# only the interpreter's files and the run's own directory may be touched.
for path in ["/etc/shadow", "/etc/passwd", SECRET_FILE, "/proc/%d/environ" % SERVER_PID,
             "/proc/self/status", "/home", "/root", "/var/log"]:
    try:
        with open(path, "rb") as f:
            f.read(1)
        escaped("read " + path)
    except OSError as e:
        expect_errno("read " + path, e.errno, {errno.EACCES, errno.ENOENT, errno.EISDIR}
                     if path in ("/home", "/root", "/var/log") else {errno.EACCES})
for d in ["/", "/tmp", "/proc", "/etc"]:
    try_os("list " + d, lambda d=d: os.listdir(d), {errno.EACCES})
for path in ["/tmp/ptc-escaped", "/usr/x", "/etc/x", os.path.dirname(SECRET_FILE) + "/x"]:
    try_os("create " + path, lambda p=path: open(p, "w"), {errno.EACCES, errno.EROFS})
# its own directory works, but nothing there may run
open("t", "wb").write(open("/usr/bin/true", "rb").read())
os.chmod("t", 0o755)


def run_t():
    try:
        os.execv(os.path.abspath("t"), ["t"])
    except OSError as e:
        os._exit(100 + e.errno)


code = os.waitstatus_to_exitcode(in_child(run_t))
if code == 0:
    escaped("executed a file from the run's directory")
else:
    expect_errno("exec from the run's directory", code - 100, {errno.EACCES})
try_os("signal the server", lambda: os.kill(SERVER_PID, 0), {errno.EPERM})
try_os("signal the sentinel", lambda: os.kill(SENTINEL_PID, 0), {errno.EPERM})
finish()
