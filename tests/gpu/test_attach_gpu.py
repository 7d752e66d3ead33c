"""On a real GPU, as root: ``pinmon attach`` on a running CuPy process that copies from pinned memory,
and how much of the GPU's RX its copies explain.

The process loads the machine's libcuda copied to a local directory (the GPU box keeps the driver's files
on squashfs, which refuses uprobes) and copies 64 MiB host to device from pinned memory, each copy
synchronised, so the calls issued are the copies done. The attach must count them as pinned, no finding
must fire, and the copies must explain most of the link's RX (link bytes carry ~7% of protocol overhead
over the payload: a share of 0.8 to 1.05).
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(os.geteuid() != 0, reason="attach needs root")]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import sys, time
import cupy as cp
size = 64 << 20
host = cp.cuda.alloc_pinned_memory(size)
dev = cp.cuda.alloc(size)
stream = cp.cuda.Stream(non_blocking=True)
for _ in range(5):
    cp.cuda.runtime.memcpyAsync(dev.ptr, host.ptr, size, cp.cuda.runtime.memcpyHostToDevice, stream.ptr)
stream.synchronize()
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    cp.cuda.runtime.memcpyAsync(dev.ptr, host.ptr, size, cp.cuda.runtime.memcpyHostToDevice, stream.ptr)
    stream.synchronize()
"""


def real_libcuda() -> str:
    ctypes.CDLL("libcuda.so.1")
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.basename(parts[5]).startswith("libcuda.so"):
                return parts[5]
    pytest.skip("libcuda.so.1 is not mapped here")


def start_child(tmp_path, seconds: int) -> subprocess.Popen:
    """``CHILD`` for ``seconds``, loading the machine's libcuda from a copy on a local disk."""
    lcdir = tmp_path / "lcdir"
    lcdir.mkdir()
    shutil.copy2(real_libcuda(), lcdir / "libcuda.so.1")
    env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(x for x in (str(lcdir), os.environ.get("LD_LIBRARY_PATH"))
                                                         if x))
    return subprocess.Popen([sys.executable, "-c", CHILD, str(seconds)], stdout=subprocess.PIPE, text=True, env=env,
                            cwd=ROOT)


def test_attach_counts_pinned_copies_and_explains_the_link(tmp_path, capsys):
    pytest.importorskip("cupy")
    from pinmon.cli.main import main

    p = start_child(tmp_path, 20)
    try:
        assert p.stdout.readline().strip() == "ready"
        code = main(["attach", str(p.pid), "--seconds", "4", "--json"])
    finally:
        p.kill()
        p.wait()
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["status"] == "ok" and doc["findings"] == [], doc["findings"]
    (row,) = doc["processes"]
    stats = {(s["direction"], s["memory"]): s for s in row["copies"]["stats"]}
    assert set(stats) == {("h2d", "pinned")} and stats[("h2d", "pinned")]["size_p50_bytes"] == 64 << 20
    rate = stats[("h2d", "pinned")]["bytes_per_s"]
    assert rate > 1e9
    rx = next(x for x in doc["traffic"]["links"] if x["direction"] == "h2d" and x["shares"])
    assert rx["shares"][0]["pid"] == p.pid and rx["link_bytes_per_s"]
    assert 0.8 <= rx["explained_share"] <= 1.05, rx
