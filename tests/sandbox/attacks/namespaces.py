# New namespaces (a user namespace would bring capabilities back), mounts, setns, clone3.
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET = 0x10000000, 0x00020000, 0x40000000
for flags, name in [(CLONE_NEWUSER, "user"), (CLONE_NEWNS, "mount"), (CLONE_NEWNET, "net")]:
    r, err = sys_call(272, flags)  # unshare
    expect_errno("unshare(%s)" % name, 0 if r == 0 else err, {errno.EPERM})
r, err = sys_call(56, CLONE_NEWUSER | 17, 0, 0, 0, 0)  # clone(CLONE_NEWUSER|SIGCHLD)
if r == 0:
    os._exit(0)  # the child of a successful clone
expect_errno("clone(CLONE_NEWUSER)", 0 if r > 0 else err, {errno.EPERM})
r, err = sys_call(435, 0, 0)  # clone3
expect_errno("clone3", 0 if r >= 0 else err, {errno.ENOSYS})
r, err = sys_call(165, b"none", b"/tmp", b"tmpfs", 0, 0)  # mount tmpfs over /tmp
expect_errno("mount", 0 if r == 0 else err, {errno.EPERM})
fd = os.open("/proc/self/ns/user", os.O_RDONLY)
r, err = sys_call(308, fd, 0)  # setns
expect_errno("setns", 0 if r == 0 else err, {errno.EPERM})
r, err = sys_call(161, b"/tmp")  # chroot
expect_errno("chroot", 0 if r == 0 else err, {errno.EPERM})
finish()
