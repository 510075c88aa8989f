# Memory bomb: 2 GiB of touched pages. With a memory cgroup the kernel kills the run (status oom);
# without one RLIMIT_AS makes the allocation fail first.
chunks = []
try:
    for i in range(64):
        chunks.append(b"\x01" * (32 << 20))
    escaped("allocated %d MiB" % (len(chunks) * 32))
except MemoryError:
    if len(chunks) * 32 > 1024 + 32:
        escaped("allocated %d MiB before MemoryError" % (len(chunks) * 32))
    else:
        blocked("MemoryError after", "%d MiB" % (len(chunks) * 32))
finish()
