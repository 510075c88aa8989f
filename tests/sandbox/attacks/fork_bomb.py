# Fork bomb: the pids cgroup (root) or RLIMIT_NPROC in the user namespace stops it below 32.
import time
n, err = 0, None
for i in range(300):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
if err is None or n >= 32:
    escaped("%d forks succeeded" % n)
else:
    expect_errno("fork #%d" % (n + 1), err, {errno.EAGAIN})
finish()  # the children are still sleeping: the run's end must take them down
