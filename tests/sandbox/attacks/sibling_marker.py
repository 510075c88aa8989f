# Run twice at once (the driver starts both in one pool; with the zygote, two sandboxes forked
# from the same interpreter): each leaves a random marker in a global, in builtins, in a ctypes
# buffer and in /tmp, waits until the other has done the same, then scans its whole memory
# (every readable mapping of /proc/self/mem) and /tmp for a marker that is not its own. A fork
# server must keep what one child writes out of its siblings (copy-on-write, a /tmp per run),
# and the zygote holds nothing of any run, so nothing of one reaches the other.
import builtins
import time

TAG = b"PTC-SIBLING-MARKER:"
HEX = set(b"0123456789abcdef")
mine = os.urandom(16).hex().encode()
me = TAG + mine
ptc_marker = me
builtins.ptc_marker = me
keep = ctypes.create_string_buffer(me)
with open("/tmp/ptc_marker", "wb") as f:
    f.write(me)
time.sleep(PAIR_WAIT_S)


def others(data):
    """markers in data that are not ours"""
    out = []
    i = data.find(TAG)
    while i >= 0:
        m = data[i + len(TAG):i + len(TAG) + 32]
        if len(m) == 32 and m != mine and set(m) <= HEX:
            out.append(m)
        i = data.find(TAG, i + 1)
    return out


found, scanned = [], 0
with open("/proc/self/maps") as f:
    maps = f.read().splitlines()
with open("/proc/self/mem", "rb", 0) as mem:
    for line in maps:
        fields = line.split()
        if fields[1][0] != "r" or line.endswith(("[vvar]", "[vsyscall]")):
            continue
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        try:
            mem.seek(lo)
            data = mem.read(hi - lo)
        except (OSError, OverflowError, ValueError):
            continue
        scanned += len(data)
        found += others(data)
        del data
for name in os.listdir("/tmp"):
    p = os.path.join("/tmp", name)
    if os.path.isfile(p):
        with open(p, "rb") as f:
            found += others(f.read())
if found:
    escaped("a sibling's marker is here: %s" % found[0].decode())
elif scanned < (1 << 20):
    escaped("scanned only %d bytes of memory: the scan proves nothing" % scanned)
else:
    blocked("sibling's marker", "not in %d MiB of memory or /tmp" % (scanned >> 20))
finish()
