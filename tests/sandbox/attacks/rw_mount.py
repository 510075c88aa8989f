# With a --mount ...:rw folder at /rw (the driver's: an ordinary user's folder, and as root one
# with a root-owned file in it): the code can write there, but nothing it makes is root's on the
# host and nothing of root's can be changed (the driver checks both from the host after the run).
d = "/rw"
try:
    open(d + "/made.txt", "w").write("x")
except OSError as e:
    escaped("the rw folder is not writable (%s): the test cannot see the wall" % ename(e.errno))
else:
    os.mkdir(d + "/sub")
    open(d + "/sub/deep.txt", "w").write("y")
    # allowed (the file is the code's), but the driver checks it is not a setuid-root program
    os.chmod(d + "/made.txt", 0o6755)
    not_mine = {errno.EPERM, errno.EINVAL, errno.EOVERFLOW}
    try_os("chown a made file to root", lambda: os.chown(d + "/made.txt", 0, 0), not_mine)
    try_os("chown a made file to another uid", lambda: os.chown(d + "/made.txt", 1, -1), not_mine)
    try_os("chgrp a made file to root", lambda: os.chown(d + "/made.txt", -1, 0), not_mine)
root_file = d + "/root-file"
if os.path.exists(root_file):
    try_os("write a root-owned file", lambda: open(root_file, "a"), {errno.EACCES})
    try_os("truncate a root-owned file", lambda: os.truncate(root_file, 0), {errno.EACCES})
    try_os("chmod a root-owned file", lambda: os.chmod(root_file, 0o4777), {errno.EPERM, errno.EOVERFLOW})
    try_os("chown a root-owned file", lambda: os.chown(root_file, os.getuid(), -1), {errno.EPERM, errno.EOVERFLOW})
    try_os("set a time on a root-owned file", lambda: os.utime(root_file, (0, 0)), {errno.EPERM, errno.EOVERFLOW})
finish()
