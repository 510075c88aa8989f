# A grandchild that leaves its session and outlives its parent, holding stdout open.
import time
pid = os.fork()
if pid == 0:
    if os.fork() == 0:
        os.setsid()
        time.sleep(120)
        os._exit(0)
    os._exit(0)
os.waitpid(pid, 0)
finish()  # the driver checks that the run ended and that nothing with our token survives
