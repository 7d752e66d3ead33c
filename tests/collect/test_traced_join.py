"""A tracer's report joined to its process's row: taken only for a CUDA process, never below what the
kernel shows (issue 30, A3), its rates within the host's GPU links and a driver's allocation rate
(A5). Each attack runs through the live collector on a fake /proc and cgroup tree, then the advisor."""
from __future__ import annotations

import json
import os

import pytest

from pinmon.advise import advise
from pinmon.collect.live import LiveCollector
from pinmon.collect.traced.bounds import UNDERSTATED_SLACK_BYTES, Backing, bound_reports
from pinmon.collect.traced.rates import MAX_ALLOCS_PER_S, RateCeilings, bound_rates, ceilings_of
from pinmon.model import Allocations, Copies, CopyStats, Gpu, HeldMemory, Link, ProcessPinned
from pinmon.model.link import theoretical_bytes_per_s
from tests.collect.cgroups.fakecg import fake_root, v2_group, write
from tests.trace.fakeproc import fake_proc

ME = os.getuid()
MIB, GIB = 1 << 20, 1 << 30
CID = "a42d519714d616e9411dbceec4b52808bd6b1ee53e6f6497a281d655357d8b71"
DOCKER = f"/system.slice/docker-{CID}.scope"
CUDA = "7f3a00000000-7f3a00200000 rw-s 00000000 00:06 140 /dev/nvidia0\n"
GEN5_X16 = theoretical_bytes_per_s(5, 16)


def zero_mapping(size: int, inode: int = 77) -> str:
    return f"7f5000000000-{0x7f5000000000 + size:x} rw-s 00000000 00:01 {inode} /dev/zero (deleted)\n"


def host_with_docker_group(tmp_path, limit: int) -> str:
    root = fake_root(tmp_path, "v2", {DOCKER: v2_group(max_=limit, current=limit - 8 * MIB)})
    write(os.path.join(root, "proc", "meminfo"), f"MemTotal: {64 * GIB // 1024} kB\nMemAvailable: {32 * GIB // 1024} kB\n")
    return root


def process(root: str, pid: int, maps: str, shmem: int, cgroup: str = DOCKER, ticks: int = 777) -> None:
    proc = os.path.join(root, "proc")
    fake_proc(proc, pid, ME, ticks=ticks, rss_kb=4 * GIB // 1024)
    with open(os.path.join(proc, str(pid), "status"), "a") as f:
        f.write(f"RssFile:\t0 kB\nRssShmem:\t{shmem // 1024} kB\n")
    write(os.path.join(proc, str(pid), "maps"), maps)
    write(os.path.join(proc, str(pid), "cgroup"), f"0::{cgroup}\n")


def report(tmp_path, monkeypatch, pid: int, **body) -> None:
    d = tmp_path / "reports"
    d.mkdir(mode=0o700, exist_ok=True)
    path = d / f"{pid}.json"
    path.write_text(json.dumps({"schema": "pinmon.trace/1", "pid": pid, "start_ticks": 777, **body}))
    os.chmod(path, 0o600)
    monkeypatch.setenv("PINMON_TRACE_DIR", str(d))


def snapshot(root: str):
    with LiveCollector(use_nvml=False, host_root=root, proc_root=os.path.join(root, "proc"),
                       kernel_read_every_s=0, oom_lookback_s=0) as col:
        return col.snapshot()


# --- A3: a report never hides what the mappings show -----------------------------------------------

@pytest.mark.hardening
def test_a_report_of_zero_bytes_cannot_hide_a_containers_critical(tmp_path, monkeypatch):
    root = host_with_docker_group(tmp_path, limit=256 * MIB)
    process(root, 4242, CUDA + zero_mapping(200 * MIB), shmem=200 * MIB)
    before = snapshot(root)
    (crit,) = [f for f in advise([before]) if f.rule == "pinned-cgroup-share"]
    assert crit.severity == "critical"
    report(tmp_path, monkeypatch, 4242, pinned={"bytes": 0, "write_combined_bytes": 0})
    snap = snapshot(root)
    (row,) = snap.processes
    assert row.source == "traced" and row.held.pinned_bytes == 200 * MIB and row.held.report_understated
    (group,) = snap.cgroups
    assert group.held.pinned_bytes == 200 * MIB
    (f,) = [f for f in advise([snap]) if f.rule == "pinned-cgroup-share"]
    assert f.severity == "critical" and f.subject == crit.subject
    assert ("trace reports: the report of pid 4242 counts less pinned memory than its mappings show (blocks"
            " a pinned pool keeps cached, or a report that understates): the mappings' larger figure is shown"
            ) in snap.notices


@pytest.mark.hardening
def test_a_report_without_a_pinned_figure_keeps_the_mappings():
    row = ProcessPinned(pid=7, source="traced", held=HeldMemory(pinned_bytes=None, write_combined_bytes=None,
                                                                vm_pinned_bytes=64 * MIB))
    out = bound_reports([row], {7: Backing(300 * MIB, 128 * MIB, 96 * MIB)}, None)
    (r,) = out.rows
    assert (r.held.pinned_bytes, r.held.write_combined_bytes, r.held.vm_pinned_bytes) == (300 * MIB, 96 * MIB, 64 * MIB)
    assert r.held.report_understated and out.understated == [7]


def test_a_truthful_report_adds_registered_memory_and_keeps_its_precision():
    # The maps show 264 MiB (256 MiB allocated + a context's 8 MiB of staging); the report 256 MiB
    # allocated and 1 GiB registered (which maps never show): 1.25 GiB + 8 MiB, not flagged.
    row = ProcessPinned(pid=7, source="traced", held=HeldMemory(pinned_bytes=GIB + 256 * MIB, registered_bytes=GIB,
                                                                requested_bytes=GIB + 250 * MIB))
    out = bound_reports([row], {7: Backing(264 * MIB, 0)}, None)
    (r,) = out.rows
    assert r.held.pinned_bytes == GIB + 264 * MIB and r.held.registered_bytes == GIB
    assert not r.held.report_understated and out.understated == [] and out.lowered == []
    # Within the slack of what the maps count and a report does not, the report is not flagged.
    small = ProcessPinned(pid=8, source="traced", held=HeldMemory(pinned_bytes=100 * MIB))
    (s,) = bound_reports([small], {8: Backing(100 * MIB + UNDERSTATED_SLACK_BYTES, 0)}, None).rows
    assert s.held.pinned_bytes == 100 * MIB + UNDERSTATED_SLACK_BYTES and not s.held.report_understated


# --- A5: a report of a process that maps no NVIDIA device, and impossible rates -------------------

FORGED_RATES = {
    "window_s": 1.0,
    "pinned": {"bytes": 0},
    "copies": {"h2d": {"pageable": {"bytes": 9_200_000_000_000_000_000, "count": 5, "bytes_per_s": 9.2e18},
                       "pinned": {"bytes": 10**12, "count": 5, "bytes_per_s": 9e11}}},
    "allocs": {"count": 100, "per_s": 9.2e18, "frees_per_s": 9.2e18, "median_bytes": 4096},
}


@pytest.mark.hardening
def test_a_report_of_a_process_that_maps_no_nvidia_device_is_not_taken(tmp_path, monkeypatch):
    root = host_with_docker_group(tmp_path, limit=256 * MIB)
    process(root, 4242, zero_mapping(64 * MIB), shmem=64 * MIB)  # a sleeper with shared memory
    report(tmp_path, monkeypatch, 4242, **FORGED_RATES)
    snap = snapshot(root)
    assert snap.processes == ()
    assert not [f for f in advise([snap]) if f.rule in ("pinned-small-allocs", "pageable-bulk-copies")]


@pytest.mark.hardening
def test_rates_past_the_gpus_links_and_a_drivers_allocation_rate_are_unknown(tmp_path, monkeypatch):
    root = host_with_docker_group(tmp_path, limit=GIB)
    process(root, 4242, CUDA, shmem=0)
    report(tmp_path, monkeypatch, 4242, **FORGED_RATES)
    snap = snapshot(root)  # no NVML: no GPU known, the physical ceilings
    (row,) = snap.processes
    assert row.copies.get("h2d", "pageable").bytes_per_s is None
    assert row.copies.get("h2d", "pinned").bytes_per_s is None  # its direction's other rate went with it
    assert row.allocations.per_s is None and row.allocations.frees_per_s is None
    assert row.allocations.median_bytes == 4096 and row.allocations.count == 100
    assert any(n.startswith("trace reports: pid 4242 reported copy rates past") for n in snap.notices)
    assert not [f for f in advise([snap]) if f.rule in ("pinned-small-allocs", "pageable-bulk-copies")]


def _gpu(index: int, gen: int = 5, width: int = 16, name: str = "NVIDIA H100") -> Gpu:
    rate = theoretical_bytes_per_s(gen, width)
    return Gpu(index=index, name=name, link=Link(gen=1, gen_max=gen, width=width, width_max=width,
                                                 theoretical_bytes_per_s=theoretical_bytes_per_s(1, width),
                                                 max_theoretical_bytes_per_s=rate))


def test_the_ceilings_are_the_gpus_rated_links():
    assert ceilings_of([]) == RateCeilings()
    one = ceilings_of([_gpu(0)])  # idle at Gen1: the rated Gen5 link bounds it
    assert one.window_bytes_per_s == pytest.approx(GEN5_X16) and one.copy_bytes_per_s == pytest.approx(GEN5_X16)
    eight = ceilings_of([_gpu(i) for i in range(8)])
    assert eight.window_bytes_per_s == pytest.approx(8 * GEN5_X16) and eight.copy_bytes_per_s == pytest.approx(GEN5_X16)
    assert ceilings_of([Gpu(index=0)]) == RateCeilings()  # a link unknown: the physical ceiling
    assert ceilings_of([_gpu(0, name="NVIDIA GH200 480GB")]).copy_bytes_per_s == RateCeilings().copy_bytes_per_s


@pytest.mark.hardening
def test_a_copy_rate_past_one_gpus_link_is_unknown_and_a_real_one_stays():
    ceil = ceilings_of([_gpu(0)])
    real = Copies(instrument="cupti", window_s=5.0, stats=(
        CopyStats(direction="h2d", memory="pinned", bytes_per_s=50e9, achieved_bytes_per_s=55e9),
        CopyStats(direction="d2h", memory="pageable", bytes_per_s=3e9, achieved_bytes_per_s=11e9)))
    forged = Copies(instrument="hooks", window_s=1.0, stats=(
        CopyStats(direction="h2d", memory="pageable", bytes_per_s=40e9),
        CopyStats(direction="h2d", memory="pinned", bytes_per_s=40e9),        # 80 GB/s on a 63 GB/s link
        CopyStats(direction="d2h", memory="pinned", bytes_per_s=1e9, achieved_bytes_per_s=500e9)))
    rows = [ProcessPinned(pid=1, source="traced", copies=real),
            ProcessPinned(pid=2, source="traced", copies=forged,
                          allocations=Allocations(instrument="hooks", per_s=MAX_ALLOCS_PER_S * 2)),
            ProcessPinned(pid=3, source="attached", copies=forged)]  # not a report's: left to the attach
    out, pids = bound_rates(rows, ceil)
    assert out[0] is rows[0] and out[2] is rows[2] and pids == [2]
    c = out[1].copies
    assert c.bytes_per_s("h2d") is None and c.bytes_per_s("d2h") == 1e9
    assert c.get("d2h", "pinned").achieved_bytes_per_s is None and c.notes
    assert out[1].allocations.per_s is None
