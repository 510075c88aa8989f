# Other processes: the PID namespace shows init (1) and this interpreter (2), nothing else.
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
if pids != [1, os.getpid()] or os.getpid() != 2:
    escaped("sees %d processes: %s" % (len(pids), pids[:10]))
else:
    blocked("process list", str(pids))
finish()
