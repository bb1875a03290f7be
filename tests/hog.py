#!/usr/bin/env python3
"""Memory hog for case 055 and tests/swap-study: MB of anonymous memory in
16 MiB chunks, each filled with its own byte value; then, until STOPFILE
exists (or SECONDS passed), passes that read every chunk back in full and
check its bytes, so the pages swapped out are swapped in again (and others
out). The stop file is looked at after every chunk, so the hog answers it
within one chunk's read rather than a whole pass's; it then reads every
chunk once more (the final pass: each page checked after whatever came
before the stop, a case's link flaps among it) and exits. Prints one line
per stage, with the pass times; exits 1 on a chunk whose bytes changed."""
import os
import sys
import time

CHUNK = 16 << 20


def verify(chunks, i, what):
    if chunks[i].count(i % 251 + 1) != CHUNK:
        print(f"hog: chunk {i} changed ({what})", flush=True)
        return False
    return True


def main():
    mb, stopfile, limit = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    t0 = time.time()
    chunks = []
    for i in range(mb // 16):
        chunks.append(bytearray(bytes([i % 251 + 1])) * CHUNK)
    print(f"hog: {len(chunks) * 16} MiB allocated in {time.time() - t0:.0f} s", flush=True)
    passes, partial = 0, 0
    stopped = False
    while not stopped:
        t1 = time.time()
        for i in range(len(chunks)):
            if not verify(chunks, i, f"pass {passes + 1}"):
                return 1
            if os.path.exists(stopfile) or time.time() - t0 >= limit:
                stopped = True
                partial = i + 1 if i + 1 < len(chunks) else 0
                break
        if not partial:
            passes += 1
            print(f"hog: pass {passes} in {time.time() - t1:.0f} s", flush=True)
    t1 = time.time()
    for i in range(len(chunks)):
        if not verify(chunks, i, "final pass"):
            return 1
    print(
        f"hog: {passes} verify passes (and {partial} chunks of another) until the stop, "
        f"then a final pass over {len(chunks) * 16} MiB in {time.time() - t1:.0f} s; "
        f"{time.time() - t0:.0f} s in all",
        flush=True,
    )
    return 0


sys.exit(main())
