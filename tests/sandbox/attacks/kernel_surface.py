# Kernel interfaces with a record of bugs: all refused by seccomp with EPERM.
buf = ctypes.create_string_buffer(256)
calls = [
    ("bpf", 321, (5, buf, 128)),                      # BPF_PROG_LOAD
    ("io_uring_setup", 425, (8, buf)),
    ("userfaultfd", 323, (1,)),                       # UFFD_USER_MODE_ONLY
    ("keyctl", 250, (0, -3, 1)),                      # KEYCTL_GET_KEYRING_ID session, create
    ("add_key", 248, (b"user", b"ptc", b"x", 1, -3)),
    ("request_key", 249, (b"user", b"ptc", 0, -3)),
    ("perf_event_open", 298, (buf, 0, -1, -1, 0)),
    ("personality(ADDR_NO_RANDOMIZE)", 135, (0x0040000,)),
    ("personality(READ_IMPLIES_EXEC)", 135, (0x0400000,)),
    ("kexec_load", 246, (0, 0, 0, 0)),
    ("init_module", 175, (0, 0, b"")),
    ("finit_module", 313, (0, b"", 0)),
    ("delete_module", 176, (b"x", 0)),
    ("open_by_handle_at", 304, (0, buf, 0)),
    ("ioctl(TIOCSTI)", 16, (0, 0x5412, b"x")),
]
for name, nr, args in calls:
    r, err = sys_call(nr, *args)
    expect_errno(name, 0 if r >= 0 else err, {errno.EPERM})
r, err = sys_call(135, 0xffffffff)  # the personality query stays allowed
if r < 0:
    escaped("personality query refused (%s): the filter is too broad" % ename(err))
finish()
