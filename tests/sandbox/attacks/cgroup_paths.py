# The host's cgroup paths: with a cgroup namespace rooted at the run's cgroup, every line of
# /proc/self/cgroup ends in "/", so the run learns neither the server's cgroup nor its own
# run's name. Without it, the host's paths show (v1 hierarchies and v2 alike).
with open("/proc/self/cgroup") as f:
    lines = [l.strip() for l in f if l.strip()]
host = [l for l in lines if l.split(":", 2)[2] != "/"]
if not lines:
    escaped("/proc/self/cgroup is empty: the test cannot tell")
elif host:
    escaped("sees host cgroup paths: %s" % host[:4])
else:
    blocked("cgroup paths", "%d hierarchies, all /" % len(lines))
# The namespace is the interpreter's own, not the host's.
try:
    mine = os.readlink("/proc/self/ns/cgroup")
    blocked("cgroup namespace", mine)
except OSError as e:
    escaped("no cgroup namespace link: %s" % ename(e.errno))
finish()
