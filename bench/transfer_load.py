"""Generate known PCIe traffic: pinned 256 MiB host-to-device copies for a while, bytes counted.

Usage: python bench/transfer_load.py SECONDS [--pageable] [--d2h] [--json OUT]
Prints (and writes) the payload bytes moved and the wall window, so a monitor's reading of the
same window can be checked against ground truth.
"""
import argparse
import json
import os
import sys
import time

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance

MIB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("seconds", type=float)
    ap.add_argument("--pageable", action="store_true")
    ap.add_argument("--d2h", action="store_true")
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--json")
    a = ap.parse_args()
    n = a.size_mib * MIB
    dev = cp.empty(n, dtype=cp.uint8)
    if a.pageable:
        host = np.ones(n, dtype=np.uint8)
        ptr, mem = host.ctypes.data, None
    else:
        mem = cp.cuda.alloc_pinned_memory(n)
        ptr = mem.ptr
        np.frombuffer(mem, dtype=np.uint8, count=n)[:] = 1
    kind = cp.cuda.runtime.memcpyDeviceToHost if a.d2h else cp.cuda.runtime.memcpyHostToDevice
    stream = cp.cuda.Stream(non_blocking=True)
    moved, copies = 0, 0
    t0 = time.time()
    end = t0 + a.seconds
    while time.time() < end:
        if a.d2h:
            cp.cuda.runtime.memcpyAsync(ptr, dev.data.ptr, n, kind, stream.ptr)
        else:
            cp.cuda.runtime.memcpyAsync(dev.data.ptr, ptr, n, kind, stream.ptr)
        stream.synchronize()
        moved += n
        copies += 1
    t1 = time.time()
    out = {"payload_bytes": moved, "copies": copies, "start": t0, "end": t1,
           "bytes_per_s": moved / (t1 - t0), "direction": "d2h" if a.d2h else "h2d",
           "memory": "pageable" if a.pageable else "pinned", "size_bytes": n}
    print(json.dumps(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"provenance": provenance(), **out}, f, indent=1)


if __name__ == "__main__":
    main()
