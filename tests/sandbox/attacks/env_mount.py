# With a package folder mounted (the declared packages and the user's helpers): the folder is
# there and importable, but nothing in it can be written, removed or renamed, and a setuid-root
# program in it gives no privilege (nosuid bind, no_new_privs). ENV_DIR_MARK names the module
# the driver put there.
import importlib
import subprocess
mounted = [p for p in sys.path if p.startswith("/opt/ptc/lib")]
if not mounted:
    escaped("the driver's folder is not on sys.path: the test cannot see the wall")
else:
    mod = importlib.import_module(ENV_DIR_MARK)
    if getattr(mod, "VALUE", None) != 42:
        escaped("the mounted module did not import")
    d = os.path.dirname(mod.__file__)
    ro = {errno.EROFS, errno.EACCES, errno.EPERM}
    try_os("create in the folder", lambda: open(d + "/evil.py", "w"), ro)
    try_os("write the module", lambda: open(mod.__file__, "a"), ro)
    try_os("write a world-writable file", lambda: open(d + "/writable.txt", "a"), ro)
    try_os("unlink the module", lambda: os.unlink(mod.__file__), ro)
    try_os("rename the module", lambda: os.rename(mod.__file__, d + "/x.py"), ro | {errno.EXDEV})
    try_os("chmod the module", lambda: os.chmod(mod.__file__, 0o777), ro)
    try_os("mkdir in the folder", lambda: os.mkdir(d + "/sub"), ro)
    suid = d + "/suid-id"
    if os.path.exists(suid):
        try:
            out = subprocess.run([suid, "-u"], capture_output=True, text=True, timeout=10)
            euid = out.stdout.strip()
            if euid == "0" and os.geteuid() != 0:
                escaped("a setuid-root program in the folder gave uid 0")
            else:
                blocked("setuid program", "euid " + (euid or out.stderr.strip()[:80]))
        except OSError as e:
            blocked("setuid program", ename(e.errno))
finish()
