"""VmPin from /proc/PID/status text, and owners read per pid with a cache."""
from __future__ import annotations

import os

import pytest

from pinmon.collect.cgroups.ownership import KIND_DOCKER, KIND_SYSTEMD
from pinmon.collect.cgroups.proc_owner import OwnerCache, read_owner
from pinmon.collect.cgroups.vmpin import parse_vmpin

C = "a42d519714d616e9411dbceec4b52808bd6b1ee53e6f6497a281d655357d8b71"
STATUS = ("Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t  512000 kB\nVmSize:\t  500000 kB\n"
          "VmLck:\t       0 kB\nVmPin:\t  307200 kB\nVmHWM:\t  400000 kB\nVmRSS:\t  390000 kB\n")


def test_vmpin():
    assert parse_vmpin(STATUS) == 307200 * 1024
    assert parse_vmpin(STATUS.encode()) == 307200 * 1024
    assert parse_vmpin("VmPin:\t 4 kB") == 4096
    assert parse_vmpin(STATUS.replace("VmPin:\t  307200 kB\n", "")) is None  # kernel thread
    for bad in ("VmPin:\t  -1 kB\n", "VmPin:\t 12 MB\n", "VmPin:\t x kB\n", "VmPin:\n",
                "VmPin:\t 99999999999999999 kB\n", "VmPin:\t ١٢ kB\n"):
        assert parse_vmpin("Name:\tx\n" + bad) is None, bad


def test_vmpin_key_must_start_a_line():
    # "XVmPin:" is not the key; the kernel escapes a line break in a process name, so the Name line
    # cannot hold one.
    assert parse_vmpin("Name:\tXVmPin: 99 kB\nVmPin:\t 1 kB\n") == 1024
    assert parse_vmpin("Name:\tXVmPin: 99 kB\n") is None


def test_vmpin_of_this_process_reads():
    with open("/proc/self/status") as f:
        text = f.read()
    if "VmPin:" not in text:
        pytest.skip("this kernel writes no VmPin")
    assert parse_vmpin(text) is not None


def _proc(tmp_path, pid, text):
    d = tmp_path / str(pid)
    d.mkdir(exist_ok=True)
    (d / "cgroup").write_text(text)


class Clock:
    t = 0.0

    def __call__(self):
        return self.t


def test_owner_cache_reads_each_pid_once_per_recheck_or_new_token(tmp_path):
    _proc(tmp_path, 10, f"0::/system.slice/docker-{C}.scope\n")
    clock = Clock()
    cache = OwnerCache(str(tmp_path), recheck_s=30, clock=clock)
    assert cache.owner(10, token=1).kind == KIND_DOCKER
    _proc(tmp_path, 10, "0::/system.slice/nginx.service\n")
    assert cache.owner(10, token=1).kind == KIND_DOCKER and cache.reads == 1
    assert cache.owner(10, token=2).kind == KIND_SYSTEMD and cache.reads == 2  # pid reused
    clock.t += 30
    cache.owner(10, token=2)
    assert cache.reads == 3
    cache.prune([11])
    cache.owner(10, token=2)
    assert cache.reads == 4


def test_a_gone_process_has_no_owner(tmp_path):
    assert read_owner(999, str(tmp_path)) is None
    assert OwnerCache(str(tmp_path)).owner(999) is None


def test_this_process_has_an_owner():
    assert read_owner(os.getpid()) is not None


def test_each_distinct_cgroup_text_is_parsed_once(tmp_path, monkeypatch):
    from pinmon.collect.cgroups import proc_owner

    calls = []
    real = proc_owner.owner_of
    monkeypatch.setattr(proc_owner, "owner_of", lambda text: calls.append(text) or real(text))
    for pid in range(10, 20):
        _proc(tmp_path, pid, f"0::/system.slice/docker-{C}.scope\n")
    _proc(tmp_path, 20, "0::/system.slice/nginx.service\n")
    got = OwnerCache(str(tmp_path)).owners(range(10, 21))
    assert len(calls) == 2
    assert {o.kind for o in got.values()} == {KIND_DOCKER, KIND_SYSTEMD}
    assert got[10] is got[19]
