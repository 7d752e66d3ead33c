"""`pinmon check` text and the exporter show the kernel's pinned count, what processes explain, the
rest, the per-node split, and fall back to the estimate where the kernel has no count."""
from pinmon.collect.processes.locked import parse_vm_locked
from pinmon.model import Gpu, ProcessPinned, Snapshot
from pinmon.outputs.text import format_check, process_table
from pinmon.units import GIB, MIB
from tests import factories as make
from tests.export.helpers import render


def host(**kw):
    """4 GiB pinned and 256 MiB write-combined (estimates) on a 128 GiB host; its memlock limit unknown."""
    return make.host(**{**dict(hostname="box", mem_available_bytes=64 * GIB, pinned_bytes_est=4 * GIB,
                               write_combined_bytes_est=256 * MIB, memlock_unlimited=None), **kw})


def kernel_host(**kw):
    return host(kernel_pinned_bytes=12 * GIB, kernel_pinned_bytes_by_node={"0": 5 * GIB, "1": 7 * GIB},
                pinned_bytes_total=12 * GIB + 256 * MIB, pinned_bytes_source="kernel",
                unattributed_pinned_bytes=8 * GIB, numa_nodes=(0, 1), **kw)


def test_check_text_with_the_kernel_count():
    snap = Snapshot(time=1.0, host=kernel_host(), gpus=(Gpu(index=0, name="NVIDIA H200", numa_node=1),),
                    processes=(make.process(7, "python", pinned_bytes=4 * GIB, pinned_bytes_by_node={"0": GIB, "1": 3 * GIB}),))
    text = format_check(snap, [])
    assert "pinned   12.0 GiB (kernel's count) + write-combined 256.0 MiB (est.) = 10% of effective RAM" in text
    assert "processes' mappings and VmPin explain 4.0 GiB, unattributed 8.0 GiB; by node: node0 5.0 GiB, node1 7.0 GiB" in text
    assert "GPU 0  NVIDIA H200  n/a  NUMA node 1" in text
    assert "NODE" in text and "1 (75%)" in text  # a node column on a two-node host


def test_check_text_without_the_kernel_count():
    snap = Snapshot(time=1.0, host=host(), processes=(make.process(7, None, pinned_bytes=4 * GIB),))
    text = format_check(snap, [])
    assert "pinned   4.0 GiB (est.) = 3% of effective RAM; write-combined 256.0 MiB (est.)" in text
    assert "kernel's count n/a" in text
    assert "NODE" not in text


def test_process_table_node_column_n_a_without_placement():
    lines = process_table([make.process(1, None, pinned_bytes=GIB)], nodes=True)
    assert "NODE" in lines[0] and " n/a " in lines[1]


def value(text, name, **labels):
    want = "".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(name + ("{" if labels else " ")) and want in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_exporter_serves_the_kernel_count_per_node_and_unattributed():
    text = render([make.full_snapshot()])
    assert value(text, "pinmon_host_kernel_pinned_bytes") == 12 * GIB
    assert value(text, "pinmon_host_kernel_pinned_node_bytes", node="0") == 5 * GIB
    assert value(text, "pinmon_host_kernel_pinned_node_bytes", node="1") == 7 * GIB
    assert value(text, "pinmon_host_unattributed_pinned_bytes") == 2 * GIB
    assert value(text, "pinmon_host_pinned_bytes", source="kernel") == 12 * GIB + MIB


def test_exporter_leaves_unknown_kernel_figures_out():
    snap = make.full_snapshot(kernel_pinned_bytes=None, kernel_pinned_bytes_by_node=None,
                              unattributed_pinned_bytes=None, pinned_bytes_total=10 * GIB + MIB,
                              pinned_bytes_source="est.")
    text = render([snap])
    for name in ("pinmon_host_kernel_pinned_bytes", "pinmon_host_kernel_pinned_node_bytes",
                 "pinmon_host_unattributed_pinned_bytes"):
        assert name not in text
    assert value(text, "pinmon_host_pinned_bytes", source="est.") == 10 * GIB + MIB


def test_vm_locked_parse():
    assert parse_vm_locked(b"Name:\tx\nVmLck:\t    2048 kB\nVmPin:\t 0 kB\n") == 2 * MIB
    assert parse_vm_locked(b"Name:\tx\nVmPin:\t 0 kB\n") is None
    assert parse_vm_locked(b"Name:\tx\nVmLck:\t junk kB\n") is None
    assert parse_vm_locked(b"Name:\tx\nVmLck:") is None


def test_vm_locked_read_again_only_after_its_ttl(tmp_path):
    from pinmon.collect.processes.locked import LOCKED_TTL_S, LockedReader

    (tmp_path / "7").mkdir()
    status = tmp_path / "7" / "status"
    status.write_text("Name:\tpython\nVmLck:\t 1024 kB\n")
    clock = [0.0]
    reader = LockedReader(str(tmp_path), clock=lambda: clock[0])
    row = make.process(7, "python")
    assert reader.annotate([row])[0].held.vm_locked_bytes == MIB
    status.write_text("Name:\tpython\nVmLck:\t 2048 kB\n")
    assert reader.annotate([row])[0].held.vm_locked_bytes == MIB  # cached
    assert reader.annotate([make.process(7, "other")])[0].held.vm_locked_bytes == 2 * MIB  # pid reused
    clock[0] = LOCKED_TTL_S
    assert reader.annotate([row])[0].held.vm_locked_bytes == 2 * MIB
    assert reader.annotate([ProcessPinned(pid=8)]) == [ProcessPinned(pid=8)]  # no such process: left alone
