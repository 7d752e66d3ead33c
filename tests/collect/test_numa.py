"""NUMA placement: node lists, numa_maps parsing, when numa_maps is read, and pinned-numa-remote end to end.

``tests/fixtures/numa/default_256m_two_nodes.numa_maps`` is the numa_maps of the process captured in
``tests/fixtures/maps/default_256m.maps`` (a 256 MiB cudaHostAlloc on an H200), one line per mapping
in the kernel's format (``show_numa_map``), as it reads on a two-node host where 192 MiB of the pinned
buffer landed on node 1: ``7f126a000000 default file=/dev/zero\\040(deleted) dirty=65536 active=0
N0=16384 N1=49152 kernelpagesize_kB=4``. Its private anonymous mappings also have pages on node 1;
they are not pinned and must not count.
"""
import os
import shutil

import pytest

from pinmon.advise import Thresholds, advise
from pinmon.collect.host.numa import PinnedPlacement, list_nodes, parse_node_list, parse_numa_maps
from pinmon.collect.live import LiveCollector
from tests import factories as make
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
NUMA_MAPS = os.path.join(FIXTURES, "numa", "default_256m_two_nodes.numa_maps")
MAPS = os.path.join(FIXTURES, "maps", "default_256m.maps")
MIB = 1 << 20
GIB = 1 << 30
PID = 3999999  # above any pid this box hands out: psutil knows nothing of it


def fixture_bytes(path=NUMA_MAPS) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("text, nodes", [("0\n", (0,)), ("0-1\n", (0, 1)), ("0-1,3\n", (0, 1, 3)),
                                         ("2,0\n", (0, 2)), ("\n", None), ("0-x\n", None), ("3-1\n", None)])
def test_parse_node_list(text, nodes):
    assert parse_node_list(text) == nodes


def test_list_nodes_online_has_memory_and_fallbacks(tmp_path):
    base = tmp_path / "sys/devices/system/node"
    assert list_nodes(str(tmp_path)) is None  # a kernel without NUMA sysfs
    for n in (0, 1):
        (base / f"node{n}").mkdir(parents=True)
    assert list_nodes(str(tmp_path)) == (0, 1)  # no "online" file: the node directories
    (base / "online").write_text("0-1\n")
    (base / "has_memory").write_text("0\n")
    assert list_nodes(str(tmp_path)) == (0, 1)
    assert list_nodes(str(tmp_path), which="has_memory") == (0,)


def test_parse_numa_maps_counts_only_pinned_mappings():
    by_node = parse_numa_maps(fixture_bytes())
    # 256 MiB buffer: 64 MiB on node 0, 192 MiB on node 1; four 2 MiB chunks on node 0.
    assert by_node == {"0": 64 * MIB + 4 * 2 * MIB, "1": 192 * MIB}
    everything = parse_numa_maps(fixture_bytes(), token=None)
    assert everything["1"] > by_node["1"]  # the private anonymous pages on node 1 are not pinned


def test_parse_numa_maps_huge_pages_and_junk():
    data = (b"7f0000000000 bind:1 file=/dev/zero\\040(deleted) huge dirty=2 N1=2 kernelpagesize_kB=2048\n"
            b"7f1000000000 default file=/dev/zero\\040(deleted) dirty=x N0=oops N1=4\n"
            b"garbage\n\n"
            b"7f2000000000 default file=/dev/zero\\040(deleted) N0=-3 kernelpagesize_kB=4\n")
    assert parse_numa_maps(data, page_size=4096) == {"1": 4 * MIB + 4 * 4096}


class CountingReader:
    def __init__(self, placement):
        self.placement = placement
        self.calls = []

    def __call__(self, pid, proc_root, page_size):
        self.calls.append(pid)
        return self.placement


def test_placement_read_only_when_it_can_have_changed():
    clock = [0.0]
    reader = CountingReader({"0": GIB, "1": GIB})
    placement = PinnedPlacement(clock=lambda: clock[0], page_size=4096, reader=reader)
    row = make.process(7, "python", pinned_bytes=2 * GIB, mappings=3, mappings_churn=None)
    idle = make.process(8, "idle", pinned_bytes=0)

    assert placement.annotate([row, idle], (0,)) == [row, idle]  # one node: nothing read
    assert reader.calls == []

    out = placement.annotate([row, idle], (0, 1))
    assert out[0].placement.pinned_bytes_by_node == {"0": GIB, "1": GIB} and out[1] == idle
    assert reader.calls == [7]  # the process without pinned memory is not read

    steady = make.process(7, "python", pinned_bytes=2 * GIB, mappings=3, mappings_churn=0)
    assert placement.annotate([steady], (0, 1))[0].placement.pinned_bytes_by_node == {"0": GIB, "1": GIB}
    assert reader.calls == [7]  # unchanged mappings: the cached placement

    churned = make.process(7, "python", pinned_bytes=2 * GIB, mappings=3, mappings_churn=2)
    placement.annotate([churned], (0, 1))
    grown = make.process(7, "python", pinned_bytes=3 * GIB, mappings=4, mappings_churn=0)
    placement.annotate([grown], (0, 1))
    assert reader.calls == [7, 7, 7]
    clock[0] = 61.0
    placement.annotate([grown], (0, 1))
    assert reader.calls == [7, 7, 7, 7]  # the periodic re-read

    placement.annotate([], (0, 1))  # gone: forgotten
    placement.annotate([grown], (0, 1))
    assert reader.calls == [7, 7, 7, 7, 7]


def test_placement_unreadable_leaves_the_row_alone():
    placement = PinnedPlacement(page_size=4096, reader=lambda *a: None)
    row = make.process(7, None, pinned_bytes=GIB)
    assert placement.annotate([row], (0, 1)) == [row]


def two_node_host(tmp_path, numa_maps=NUMA_MAPS, vmlck_kb=0, gpu_node="0"):
    """A host root with two nodes (FOLL_PIN counters per node), the GPU's PCI device on ``gpu_node``,
    and a proc root with one CUDA process (maps and numa_maps of the default_256m capture)."""
    host = tmp_path / "host"
    (host / "proc").mkdir(parents=True)
    (host / "proc" / "vmstat").write_bytes(b"nr_foll_pin_acquired 70000\nnr_foll_pin_released 2000\n")
    base = host / "sys/devices/system/node"
    for n, (acq, rel) in enumerate(((20000, 1000), (50000, 1000))):
        (base / f"node{n}").mkdir(parents=True)
        (base / f"node{n}" / "vmstat").write_bytes(
            b"nr_inactive_anon 1\nnr_foll_pin_acquired %d\nnr_foll_pin_released %d\n" % (acq, rel))
    (base / "online").write_text("0-1\n")
    (base / "has_memory").write_text("0-1\n")
    dev = host / "sys/bus/pci/devices/0000:17:00.0"
    dev.mkdir(parents=True)
    (dev / "numa_node").write_text(gpu_node + "\n")
    proc = tmp_path / "proc" / str(PID)
    proc.mkdir(parents=True)
    shutil.copy(MAPS, proc / "maps")
    shutil.copy(numa_maps, proc / "numa_maps")
    (proc / "statm").write_text("2000000 60000 3000 1 0 50000 0\n")
    (proc / "status").write_text(f"Name:\tpython3\nVmPeak:\t 9000000 kB\nVmLck:\t{vmlck_kb:>8} kB\n"
                                 "VmPin:\t       0 kB\nVmHWM:\t  240000 kB\n")
    return str(host), str(tmp_path / "proc")


def collect(host, proc, gpus):
    fake = FakeNvml(gpus)
    with LiveCollector(nvml=fake, host_root=host, proc_root=proc, pids=[PID]) as c:
        return c.snapshot()


def test_collector_fills_nodes_placement_and_gpu_node(tmp_path):
    host, proc = two_node_host(tmp_path)
    snap = collect(host, proc, [FakeGpu(processes=[(PID, GIB)])])
    assert snap.host.numa_nodes == (0, 1)
    assert snap.host.kernel_pinned_bytes == 68000 * 4096
    assert snap.host.kernel_pinned_bytes_by_node == {"0": 19000 * 4096, "1": 49000 * 4096}
    assert snap.gpus[0].numa_node == 0  # from sysfs: NVML says NotSupported
    (p,) = snap.processes
    assert p.placement.gpu_indices == (0,)
    assert p.placement.pinned_bytes_by_node == {"0": 72 * MIB, "1": 192 * MIB}
    assert p.held.vm_locked_bytes == 0
    assert snap.host.unattributed_pinned_bytes == 68000 * 4096 - p.held.pinned_bytes


def test_pinned_numa_remote_from_fixtures(tmp_path):
    host, proc = two_node_host(tmp_path)
    snap = collect(host, proc, [FakeGpu(processes=[(PID, GIB)])])
    # 192 MiB remote: under the default 256 MiB, over a lowered 128 MiB.
    assert not [f for f in advise([snap]) if f.rule == "pinned-numa-remote"]
    (f,) = [f for f in advise([snap], Thresholds(numa_remote_min_bytes=128 * MIB)) if f.rule == "pinned-numa-remote"]
    assert f.severity == "warning" and f.subject == f"pid {PID}"
    assert f.values["remote_pinned_bytes"] == 192 * MIB and f.values["gpu_node"] == 0
    assert f.values["node0_pinned_bytes"] == 72 * MIB and f.values["node1_pinned_bytes"] == 192 * MIB
    assert "192.0 MiB (73%)" in f.message and "node1" in f.message and "gpu0 (node0)" in f.message
    assert "numactl --cpunodebind=0 --membind=0" in f.advice


def test_pinned_numa_remote_silent_when_the_pages_are_local(tmp_path):
    host, proc = two_node_host(tmp_path, gpu_node="1")
    snap = collect(host, proc, [FakeGpu(processes=[(PID, GIB)])])
    # 72 MiB on node 0 is remote now: 27% but under a 128 MiB floor.
    assert not [f for f in advise([snap], Thresholds(numa_remote_min_bytes=128 * MIB))
                if f.rule == "pinned-numa-remote"]


def test_pinned_numa_remote_silent_when_the_gpu_node_is_unknown(tmp_path):
    host, proc = two_node_host(tmp_path, gpu_node="-1")
    snap = collect(host, proc, [FakeGpu(processes=[(PID, GIB)])])
    assert snap.gpus[0].numa_node is None
    assert not [f for f in advise([snap], Thresholds(numa_remote_min_bytes=0)) if f.rule == "pinned-numa-remote"]


def test_mlock_not_pinned_from_proc_status(tmp_path):
    host, proc = two_node_host(tmp_path, vmlck_kb=2 * 1024 * 1024)
    snap = collect(host, proc, [FakeGpu(processes=[(PID, GIB)])])
    assert snap.processes[0].held.vm_locked_bytes == 2 * GIB
    (f,) = [f for f in advise([snap]) if f.rule == "mlock-not-pinned"]
    assert f.values["vm_locked_bytes"] == 2 * GIB and "cudaHostRegister" in f.advice
