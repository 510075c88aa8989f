# 100 MiB of output: retained up to the cap, counted in full, the server stays bounded.
chunk = b"y" * (1 << 20)
for i in range(100):
    sys.stdout.buffer.write(chunk)
sys.stdout.flush()
sys.stderr.write("CONTAINED\n")
