"""A CUDA process whose pinned memory sits on the NUMA node far from its GPU: what `pinmon check`'s
`pinned-numa-remote` rule is there to catch, made on purpose on a multi-socket box.

Usage: python3 bench/numa_remote_pinned.py --gpu N --node FAR --ready READY.json [--size-mib 1024]
       [--hold-s 60] [--stop STOPFILE]

It runs on node FAR's CPUs (sched_setaffinity) with its memory bound to FAR (set_mempolicy
MPOL_BIND through libc's syscall, the way pinmon's NUMA probe binds its buffers with mbind; where
the syscall number is unknown the CPU binding alone places the pages, by first touch), allocates the
pinned buffer with cudaHostAlloc (CuPy's ``alloc_pinned_memory``) in a context on GPU N, touches it,
copies it once to the GPU, and writes READY.json: its pid, the GPU, the node, and where the
buffer's pages are (``/proc/self/numa_maps`` through pinmon's reader). It holds the buffer until
STOPFILE exists or ``--hold-s`` passes. Exit 0 held, 1 could not set up (READY.json says why).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance

MIB = 1 << 20
MPOL_BIND = 2
SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237}


def node_cpus(node: int, root: str = "/") -> set[int]:
    from pinmon.collect.host.numa import parse_node_list

    with open(os.path.join(root, "sys/devices/system/node", f"node{node}", "cpulist")) as f:
        cpus = parse_node_list(f.read())
    if not cpus:
        raise OSError(f"node {node} has no CPUs")
    return set(cpus)


def bind_memory(node: int) -> str:
    """Bind this thread's future allocations to ``node``; says how (or why not)."""
    from pinmon.probe.numa import node_mask

    number = SET_MEMPOLICY.get(platform.machine())
    if number is None:
        return f"set_mempolicy: syscall number unknown on {platform.machine()}; CPU binding only"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    mask, maxnode = node_mask(node)
    rc = libc.syscall(ctypes.c_long(number), ctypes.c_int(MPOL_BIND), mask, ctypes.c_ulong(maxnode))
    if rc != 0:
        e = ctypes.get_errno()
        return f"set_mempolicy: {os.strerror(e)}; CPU binding only"
    return "set_mempolicy MPOL_BIND"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", type=int, required=True)
    ap.add_argument("--node", type=int, required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--hold-s", type=float, default=60.0)
    ap.add_argument("--stop")
    a = ap.parse_args(argv)
    if a.gpu < 0 or a.node < 0 or a.size_mib < 1 or not a.hold_s > 0:
        ap.error("--gpu and --node must not be negative, --size-mib and --hold-s positive")
    out = {"provenance": provenance(), "pid": os.getpid(), "gpu": a.gpu, "node": a.node,
           "size_bytes": a.size_mib * MIB}
    try:
        os.sched_setaffinity(0, node_cpus(a.node))
        out["memory_binding"] = bind_memory(a.node)
        import cupy as cp
        import numpy as np

        from pinmon.collect.host.numa import read_pinned_placement

        with cp.cuda.Device(a.gpu):
            out["pci_bus_id"] = cp.cuda.Device(a.gpu).pci_bus_id
            n = out["size_bytes"]
            host = cp.cuda.alloc_pinned_memory(n)
            np.frombuffer(host, dtype=np.uint8, count=n)[:] = 1
            dev = cp.cuda.alloc(64 * MIB)
            cp.cuda.runtime.memcpy(dev.ptr, host.ptr, 64 * MIB, cp.cuda.runtime.memcpyHostToDevice)
            out["pinned_bytes_by_node"] = read_pinned_placement(os.getpid())
            out["ready_at"] = time.time()
            with open(a.ready, "w") as f:
                json.dump(out, f)
            end = time.monotonic() + a.hold_s
            while time.monotonic() < end and not (a.stop and os.path.exists(a.stop)):
                time.sleep(0.2)
            del host, dev
    except Exception as e:  # the batch reads why next to the check it ran
        out["error"] = f"{type(e).__name__}: {e}"
        with open(a.ready, "w") as f:
            json.dump(out, f)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
