# Network: TCP to the driver's listener on the host's 127.0.0.1, to a non-loopback address
# (TEST-NET-1, never routed), IPv6, raw, packet and netlink sockets. seccomp refuses every
# non-AF_UNIX socket with EPERM.
import socket

for fam, typ, name in [
    (socket.AF_INET, socket.SOCK_STREAM, "AF_INET stream"),
    (socket.AF_INET, socket.SOCK_DGRAM, "AF_INET dgram"),
    (socket.AF_INET6, socket.SOCK_STREAM, "AF_INET6 stream"),
    (socket.AF_INET, socket.SOCK_RAW, "AF_INET raw"),
    (socket.AF_PACKET, socket.SOCK_RAW, "AF_PACKET"),
    (socket.AF_NETLINK, socket.SOCK_RAW, "AF_NETLINK"),
]:
    try:
        s = socket.socket(fam, typ)
    except OSError as e:
        expect_errno("socket(%s)" % name, e.errno, {errno.EPERM})
        continue
    escaped("socket(%s) created" % name)
    if fam == socket.AF_INET and typ == socket.SOCK_STREAM:
        for addr in [("127.0.0.1", LISTEN_PORT), ("192.0.2.1", 80)]:
            s2 = socket.socket(fam, typ)
            s2.settimeout(2)
            try:
                s2.connect(addr)
                escaped("connected to %s:%d" % addr)
            except OSError as e:
                blocked("connect %s" % (addr,), ename(e.errno or 0))
    s.close()
# AF_UNIX stays usable (multiprocessing needs it)
a, b = socket.socketpair()
a.send(b"x")
if b.recv(1) != b"x":
    escaped("AF_UNIX socketpair broken")
finish()
