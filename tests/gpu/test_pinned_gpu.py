"""On a real GPU: known pinned allocations of each kind are seen by `pinmon pinned --pid` within 10 MiB."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu
MIB = 1 << 20


def pinned_of_self():
    out = subprocess.run([sys.executable, "-m", "pinmon", "pinned", "--pid", str(os.getpid()), "--json"],
                         capture_output=True, text=True, check=True).stdout
    rows = json.loads(out)["processes"]
    assert len(rows) == 1
    return rows[0]["held"]["pinned_bytes"], rows[0]["held"]["write_combined_bytes"]


def test_known_allocations_within_10_mib():
    import cupy as cp

    rt = cp.cuda.runtime
    cp.zeros(1)  # context
    base_pinned, base_wc = pinned_of_self()
    ptrs = []
    try:
        ptrs.append(rt.hostAlloc(256 * MIB, 0))
        ptrs.append(rt.hostAlloc(64 * MIB, rt.hostAllocMapped))
        ptrs.append(rt.hostAlloc(32 * MIB, rt.hostAllocPortable))
        ptrs.append(rt.hostAlloc(128 * MIB, rt.hostAllocWriteCombined))
        for _ in range(500):
            ptrs.append(rt.hostAlloc(4096, 0))
        pinned, wc = pinned_of_self()
        expect_pinned = 256 * MIB + 64 * MIB + 32 * MIB + 500 * 4096
        assert abs((pinned - base_pinned) - expect_pinned) <= 10 * MIB
        assert abs((wc - base_wc) - 128 * MIB) <= 10 * MIB
    finally:
        for p in ptrs:
            rt.freeHost(p)
    pinned, wc = pinned_of_self()
    assert abs(pinned - base_pinned) <= 10 * MIB and wc == base_wc
