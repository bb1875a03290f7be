#!/usr/bin/env python3
"""Memory hog for tests/swap-study: MB of anonymous memory in 16 MiB chunks, each
filled with its own byte value; then, until STOPFILE exists (or SECONDS
passed), passes that read every chunk back in full and check its bytes, so
the pages swapped out are swapped in again (and others out). Prints one
line per stage; exits 1 on a chunk whose bytes changed."""
import os
import sys
import time

CHUNK = 16 << 20


def main():
    mb, stopfile, limit = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    t0 = time.time()
    chunks = []
    for i in range(mb // 16):
        chunks.append(bytearray(bytes([i % 251 + 1])) * CHUNK)
    print(f"hog: {len(chunks) * 16} MiB allocated in {time.time() - t0:.0f} s", flush=True)
    passes = 0
    while not os.path.exists(stopfile) and time.time() - t0 < limit:
        for i, c in enumerate(chunks):
            if c.count(i % 251 + 1) != CHUNK:
                print(f"hog: chunk {i} changed (pass {passes})", flush=True)
                return 1
        passes += 1
    print(f"hog: {passes} verify passes over {len(chunks) * 16} MiB in {time.time() - t0:.0f} s", flush=True)
    return 0 if passes > 0 else 2


sys.exit(main())
