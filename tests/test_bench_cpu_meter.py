"""bench/cpu_meter.py: a program's CPU to the microsecond from a cgroup of its own, ticks where it cannot."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.bench_scripts import load_bench

BURN = ("import threading, time\n"
        "def burn():\n"
        "    t = time.thread_time()\n"
        "    while time.thread_time() - t < 0.3: pass\n"
        "th = threading.Thread(target=burn); th.start(); th.join()\n"  # a thread that ends
        "print('done', flush=True)\n"
        "time.sleep(30)\n")


def _spawn():
    # -I and cwd "/": nothing of a writable working directory is imported by the child.
    return subprocess.Popen([sys.executable, "-I", "-c", BURN], stdout=subprocess.PIPE, text=True, cwd="/")


@pytest.mark.skipif(os.geteuid() != 0, reason="a cgroup of its own needs root")
def test_a_cgroup_counts_the_tree_to_the_microsecond_and_goes_with_it():
    meter_mod = load_bench("cpu_meter")
    p = _spawn()
    meter = meter_mod.CpuMeter(p.pid)
    try:
        if meter.kind == "ticks":
            pytest.skip("no cgroup hierarchy root may write here")
        start = meter.read()
        assert p.stdout.readline().strip() == "done"
        used = meter.read() - start
        assert 0.25 <= used < 2.0, used  # the ended thread's 0.3 s, counted
        assert os.path.isdir(meter.path)
    finally:
        p.kill()
        p.wait()
        path = meter.path
        meter.close()
    assert path is None or not os.path.exists(path)


def test_without_root_it_sums_the_trees_ticks(monkeypatch):
    meter_mod = load_bench("cpu_meter")
    monkeypatch.setattr(meter_mod.os, "geteuid", lambda: 1000)
    p = _spawn()
    try:
        meter = meter_mod.CpuMeter(p.pid)
        assert meter.kind == "ticks" and meter.path is None
        assert p.stdout.readline().strip() == "done"
        assert meter.read() >= 0.25
        meter.close()
    finally:
        p.kill()
        p.wait()
