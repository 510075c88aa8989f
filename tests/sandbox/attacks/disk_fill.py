# Filling /tmp: the private tmpfs is 32 MiB.
written = 0
chunk = b"\0" * (1 << 20)
try:
    with open("/tmp/fill", "wb") as f:
        for i in range(200):
            f.write(chunk)
            f.flush()
            written += len(chunk)
    escaped("wrote %d MiB" % (written >> 20))
except OSError as e:
    if written > (32 << 20):
        escaped("wrote %d MiB" % (written >> 20))
    expect_errno("fill /tmp after %d MiB" % (written >> 20), e.errno, {errno.ENOSPC})
finish()
