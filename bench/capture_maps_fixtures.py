"""Capture real /proc/PID/maps fixtures of known pinned allocations on a GPU machine.

Each scenario runs in its own child process, makes allocations of known sizes, writes its
/proc/self/maps and a manifest of what it allocated, then exits. The fixtures under
tests/fixtures/maps/ are the ground truth the pinned-memory estimator is tested against.

Usage (on the GPU machine): python bench/capture_maps_fixtures.py OUTDIR
"""
import json
import mmap
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance

MIB = 1 << 20

SCENARIOS = ["non_cuda_shared_anon", "context_only", "default_256m", "mapped_portable",
             "write_combined_128m", "small_4k_x1000", "pinned_pool", "host_register_64m",
             "torch_pin_memory", "mixed"]


def dump(outdir, name, manifest):
    with open("/proc/self/maps") as f:
        maps = f.read()
    with open(os.path.join(outdir, f"{name}.maps"), "w") as f:
        f.write(maps)
    with open("/proc/self/status") as f:
        status = f.read()
    manifest["vmlck_line"] = [l for l in status.splitlines() if l.startswith(("VmLck", "VmPin"))]
    with open(os.path.join(outdir, f"{name}.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def run(name, outdir):
    m = {"scenario": name, "pinned_bytes": 0, "write_combined_bytes": 0, "registered_bytes": 0,
         "cuda": True, "notes": ""}
    if name == "non_cuda_shared_anon":
        buf = mmap.mmap(-1, 64 * MIB)  # shared anonymous: reads /dev/zero (deleted)
        buf[:] = b"\0" * len(buf)
        m["cuda"] = False
        m["notes"] = "plain shared anonymous mmap of 64 MiB, no CUDA"
        dump(outdir, name, m)
        return
    import cupy as cp
    rt = cp.cuda.runtime
    cp.cuda.Device(0).use()
    cp.zeros(1)  # create the context
    keep = []
    def halloc(n, flags=0):
        p = rt.hostAlloc(n, flags)
        keep.append(p)
        return p
    if name == "context_only":
        m["notes"] = "CUDA context only, no host allocation"
    elif name == "default_256m":
        halloc(256 * MIB, 0)
        m["pinned_bytes"] = 256 * MIB
    elif name == "mapped_portable":
        halloc(64 * MIB, rt.hostAllocMapped)
        halloc(32 * MIB, rt.hostAllocPortable)
        m["pinned_bytes"] = 96 * MIB
        m["notes"] = "64 MiB mapped + 32 MiB portable"
    elif name == "write_combined_128m":
        halloc(128 * MIB, rt.hostAllocWriteCombined)
        m["write_combined_bytes"] = 128 * MIB
    elif name == "small_4k_x1000":
        for _ in range(1000):
            halloc(4096, 0)
        m["pinned_bytes"] = 1000 * 4096
        m["notes"] = "1000 x 4 KiB: carved from 2 MiB chunks"
    elif name == "pinned_pool":
        mem = cp.cuda.alloc_pinned_memory(100 * MIB)
        keep.append(mem)
        m["pinned_bytes"] = 100 * MIB
        m["notes"] = "cupy.cuda.alloc_pinned_memory(100 MiB) through the default pinned pool"
    elif name == "host_register_64m":
        import numpy as np
        a = np.ones(64 * MIB, dtype=np.uint8)
        rt.hostRegister(a.ctypes.data, a.nbytes, 0)
        keep.append(a)
        m["registered_bytes"] = 64 * MIB
        m["notes"] = "cudaHostRegister of a 64 MiB numpy buffer: invisible in maps"
    elif name == "torch_pin_memory":
        import torch
        t = torch.empty(200 * MIB, dtype=torch.uint8).pin_memory()
        keep.append(t)
        m["pinned_bytes"] = 200 * MIB
        m["notes"] = "torch.empty(200 MiB).pin_memory() (torch may round the block up)"
    elif name == "mixed":
        halloc(512 * MIB, 0)
        halloc(16 * MIB, rt.hostAllocMapped)
        halloc(64 * MIB, rt.hostAllocWriteCombined)
        for _ in range(100):
            halloc(64 * 1024, 0)
        m["pinned_bytes"] = 512 * MIB + 16 * MIB + 100 * 64 * 1024
        m["write_combined_bytes"] = 64 * MIB
    dump(outdir, name, m)


def main():
    if len(sys.argv) == 3:
        run(sys.argv[2], sys.argv[1])
        return
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    # Read here, not in the children: NVML would map /dev/nvidia* into the non-CUDA scenario's maps.
    prov = provenance()
    for name in SCENARIOS:
        t0 = time.time()
        r = subprocess.run([sys.executable, __file__, outdir, name], capture_output=True, text=True)
        print(name, r.returncode, f"{time.time()-t0:.1f}s", r.stderr[-500:])
        path = os.path.join(outdir, f"{name}.json")
        if r.returncode == 0 and os.path.exists(path):
            with open(path) as f:
                manifest = json.load(f)
            with open(path, "w") as f:
                json.dump({**manifest, "provenance": prov}, f, indent=1)


if __name__ == "__main__":
    main()
