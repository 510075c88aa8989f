# AF_VSOCK can leave an empty network namespace (to the hypervisor); only seccomp stops it.
import socket

try:
    s = socket.socket(40, socket.SOCK_STREAM)  # AF_VSOCK
    escaped("AF_VSOCK socket created")
    s.close()
except OSError as e:
    expect_errno("socket(AF_VSOCK)", e.errno, {errno.EPERM})
finish()
