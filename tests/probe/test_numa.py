"""`pinmon probe --numa` without a GPU: node binding (real syscalls on node 0), the run against the
CuPy stand-in, its text and JSON, and the one-node answer."""
import ctypes
import json
import sys
from typing import ClassVar

import pytest

from pinmon.cli import main
from pinmon.model import ProbeMeasurement, ProbeResult
from pinmon.outputs.probe_text import format_probe, headline
from pinmon.probe import analysis as A
from pinmon.probe import numa as N

MIB = 1 << 20


class FakeNodeBuffer:
    """Page-aligned ordinary memory that says it sits on the node asked for (this box has one node)."""
    opened: ClassVar[list] = []
    fail_on: ClassVar[set] = set()

    def __init__(self, nbytes, node, page_size=4096):
        self.nbytes, self.node = nbytes, node
        self._raw = ctypes.create_string_buffer(nbytes + 4096)
        self.ptr = 0

    def __enter__(self):
        if self.node in self.fail_on:
            raise OSError(22, f"mbind to node {self.node}: Invalid argument")
        addr = ctypes.addressof(self._raw)
        self.ptr = addr + (-addr) % 4096
        FakeNodeBuffer.opened.append(self.node)
        return self

    def __exit__(self, *exc):
        self.ptr = 0

    def placement(self):
        return {self.node: 256}


@pytest.fixture
def nodes(monkeypatch):
    FakeNodeBuffer.opened = []
    FakeNodeBuffer.fail_on = set()
    monkeypatch.setattr(N, "NodeBuffer", FakeNodeBuffer)
    return FakeNodeBuffer


# --- binding, with real syscalls --------------------------------------------------------------------

@pytest.fixture
def bindable():
    if N.syscall_numbers() is None:
        pytest.skip("mbind numbers are known for x86-64 and aarch64 only")


def test_node_buffer_pages_sit_on_node_0(bindable):
    with N.NodeBuffer(4 * MIB, 0) as buf:
        assert buf.ptr
        placement = buf.placement()
        assert placement == {0: 256}
        assert N.placement_note(0, placement) == "100% of 256 sampled pages on node 0"
    assert buf.ptr == 0


def test_node_buffer_on_an_absent_node_raises_and_unmaps(bindable):
    buf = N.NodeBuffer(MIB, 1000)
    with pytest.raises(OSError, match="mbind to node 1000"):
        with buf:
            pass
    assert buf.ptr == 0


def test_node_mask():
    mask, maxnode = N.node_mask(65)
    bits = 8 * ctypes.sizeof(ctypes.c_ulong)
    assert mask[65 // bits] == 1 << (65 % bits) and sum(1 for w in mask if w) == 1
    assert maxnode == 1025
    with pytest.raises(ValueError, match="is outside the 1024 nodes"):
        N.node_mask(1024)


def test_placement_note_names_stray_pages():
    assert N.placement_note(1, {1: 250, 0: 6}) == "98% of 256 sampled pages on node 1 (others: node 0 6)"
    assert "not checked" in N.placement_note(1, {})


# --- the run ----------------------------------------------------------------------------------------

def test_numa_probe_measures_each_node(fake, nodes):
    r = N.run_numa_probe(0, (0, 1), gpu_node=0, max_pinned_bytes=4 * MIB, link_theoretical_bytes_per_s=63e9)
    assert r.status == "ok" and r.kind == "numa" and r.reason is None
    copies = [m for m in r.measurements if m.kind == "copy"]
    assert [(m.host_numa_node, m.direction) for m in copies] == [(0, "h2d"), (0, "d2h"), (1, "h2d"), (1, "d2h")]
    assert all(m.memory == "registered" and m.size_bytes == 4 * MIB and m.bytes_per_s for m in copies)
    assert copies[0].note.startswith("local; 100% of 256 sampled pages on node 0")
    assert copies[2].note.startswith("remote; ")
    assert nodes.opened == [0, 1]
    assert fake.calls["hostRegister"] == 2 and fake.pinned_peak == 4 * MIB  # one node's buffer at a time
    ratios = A.numa_ratios(r)
    assert ratios["h2d"] is not None and ratios["d2h"] is not None
    init = r.measurements[0]
    assert init.kind == "init" and "GPU's NUMA node: 0" in init.note and "4.0 MiB instead of 64.0 MiB" in init.note


def test_numa_probe_with_the_gpu_node_unknown(fake, nodes):
    r = N.run_numa_probe(0, (0, 1), gpu_node=None, max_pinned_bytes=4 * MIB)
    notes = {m.note.split(";")[0] for m in r.measurements if m.kind == "copy"}
    assert notes == {"GPU node unknown"}
    assert A.numa_ratios(r) == {"h2d": None, "d2h": None}
    assert "GPU's NUMA node: unknown" in r.measurements[0].note


def test_numa_probe_binding_refused_mid_run_frees_everything(fake, nodes):
    nodes.fail_on = {1}
    r = N.run_numa_probe(0, (0, 1), gpu_node=0, max_pinned_bytes=4 * MIB)
    assert r.status == "unavailable" and "mbind to node 1" in r.reason
    assert [m.host_numa_node for m in r.measurements if m.kind == "copy"] == [0, 0]


def test_numa_probe_refuses_one_node_and_missing_cupy(monkeypatch):
    assert N.run_numa_probe(0, (0,)).status == "unavailable"
    monkeypatch.setitem(sys.modules, "cupy", None)
    r = N.run_numa_probe(0, (0, 1), gpu_node=0)
    assert r.status == "unavailable" and "CuPy is not installed" in r.reason


# --- text and the command ---------------------------------------------------------------------------

def numa_result(local=55e9, remote=40.7e9, gpu_node_known=True):
    rows = [ProbeMeasurement(kind="init", memory="device", size_bytes=0, seconds=0.3, note="CUDA context ready")]
    for node, role, rate in ((0, "local", local), (1, "remote", remote)):
        role = role if gpu_node_known else "GPU node unknown"
        for d in ("h2d", "d2h"):
            rows.append(ProbeMeasurement(kind="copy", memory="registered", size_bytes=64 * MIB, direction=d,
                                         bytes_per_s=rate, seconds=0.001, repeats=8, host_numa_node=node,
                                         note=f"{role}; 100% of 256 sampled pages on node {node}"))
    return ProbeResult(time=1.0, gpu_index=0, kind="numa", duration_s=1.5, max_pinned_bytes=256 * MIB,
                       measurements=tuple(rows))


def test_numa_text():
    text = format_probe(numa_result())
    assert "NUMA: H2D remote 0.74x local (40.7 GB/s vs 55.0 GB/s)" in text
    assert "  0     local              64.0 MiB  55.0 GB/s  55.0 GB/s" in text
    assert "  1     remote             64.0 MiB  40.7 GB/s  40.7 GB/s" in text
    assert "Modes" not in text and "pageable" not in text
    assert headline(numa_result(gpu_node_known=False)) == (
        "NUMA: H2D node0 55.0 GB/s, node1 40.7 GB/s; D2H node0 55.0 GB/s, node1 40.7 GB/s (the GPU's node is unknown)")


def test_command_on_one_node_says_so_and_exits_0(monkeypatch, capsys, fake):
    import pinmon.collect.host.numa as numa
    from pinmon.cli.commands import probe as cmd

    monkeypatch.setattr(numa, "list_nodes", lambda root="/", which="online": (0,))
    monkeypatch.setattr(cmd, "nvml_links", lambda nvml=None: {})
    assert main(["probe", "--numa"]) == 0
    assert "one NUMA node (node 0)" in capsys.readouterr().out
    assert main(["probe", "--numa", "--json"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["results"] == [] and doc["status"] == "skipped" and "one NUMA node" in doc["reason"]
    assert "one NUMA node" in out.err


def test_command_without_a_gpu_says_it_could_not_measure(monkeypatch, capsys):
    import pinmon.collect.host.numa as numa

    monkeypatch.setattr(numa, "list_nodes", lambda root="/", which="online": (0,))
    monkeypatch.setitem(sys.modules, "cupy", None)  # no CuPy: no GPU to compare anything for
    assert main(["probe", "--numa"]) == 3
    out = capsys.readouterr()
    assert "equally near" not in out.out + out.err
    assert main(["probe", "--numa", "--json"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "unavailable" and doc["reason"] and doc["results"] == []


def test_command_on_two_nodes(monkeypatch, capsys, fake, nodes):
    import pinmon.collect.host.numa as numa
    import pinmon.collect.nvml as nvml
    from pinmon.cli.commands import probe as cmd

    monkeypatch.setattr(numa, "list_nodes", lambda root="/", which="online": (0, 1))
    monkeypatch.setattr(nvml, "sysfs_numa_node", lambda bus, root="/sys": 1)
    monkeypatch.setattr(cmd, "nvml_links", lambda nvml=None: {})
    assert main(["probe", "--numa", "--max-pinned", "2M"]) == 0
    out = capsys.readouterr().out
    assert "Probe numa, CUDA device 0" in out and "Probe quick" not in out
    assert "  0     remote" in out and "  1     local" in out
    assert main(["probe", "--numa", "--json", "--max-pinned", "2M"]) == 0
    (res,) = json.loads(capsys.readouterr().out)["results"]
    copies = [m for m in res["result"]["measurements"] if m["kind"] == "copy"]
    assert res["result"]["kind"] == "numa" and {m["host_numa_node"] for m in copies} == {0, 1}
