"""slow-pinned-copies: a traced process's CUPTI-timed pinned copies of 1 MiB+ against the probe of the
same GPU and direction, the causes it names with the snapshot's numbers, and silence without inputs;
pageable-bulk-copies and pinned-small-allocs label CUPTI figures."""
import dataclasses

import pytest

from pinmon.advise import RULE_DOCS, RULES, Thresholds, advise
from pinmon.advise.copies import slow_pinned_copies
from pinmon.model import BulkCopies, Pcie
from tests import factories as make

T = Thresholds()


def cupti_proc(h2d=(20e9, 2.5), d2h=None, own_h2d=10e9, own_d2h=None, share=0.8, bus="0000:41:00.0", **over):
    """A process traced with CUPTI: its bulk pinned copies per direction as (achieved rate, busy
    seconds), its copies' window rate per direction (``own_*``), the default stream's share."""
    bulk = [BulkCopies(d, *figures) for d, figures in (("h2d", h2d), ("d2h", d2h)) if figures is not None]
    stats = [make.stat(d, "pinned", rate) for d, rate in (("h2d", own_h2d), ("d2h", own_d2h)) if rate is not None]
    copies = make.copies("cupti", stats=stats, bulk=bulk, default_stream_share=share, gpu_pci_bus_id=bus)
    return make.process(77, "train", source="traced", copies=copies, **over)


def snap_with(proc, gpus=None, probe=None):
    gpus = gpus if gpus is not None else [make.gpu(0, rx=40e9, numa_node=1)]
    return make.snapshot(gpus=gpus, processes=[proc], probe=probe if probe is not None else make.probe())


def test_slow_copies_warn_and_name_the_causes_with_numbers():
    (f,) = slow_pinned_copies([snap_with(cupti_proc())], T)
    assert f.rule == "slow-pinned-copies" and f.severity == "warning" and f.subject == "pid 77 (train)"
    assert f.message == ("H2D copies of 1 MiB+ from pinned memory ran at 20.0 GB/s (CUPTI, 2.50 s of copying),"
                         " 36% of the 55.0 GB/s the probe measured on GPU 0")
    assert "it carried 40.0 GB/s RX (link bytes), of which this process's H2D copies 10.0 GB/s" in f.advice
    assert "about 30.0 GB/s came from elsewhere" in f.advice
    assert "NUMA node 1" in f.advice and "--membind=1" in f.advice
    assert "80% of these bytes went over the legacy default stream" in f.advice
    assert f.values["other_link_bytes_per_s"] == 30e9 and f.values["gpu_index"] == 0
    assert f.values["fraction"] == pytest.approx(20 / 55)


def test_device_to_host_copies_say_that_tx_carries_read_requests_too():
    p = cupti_proc(h2d=None, d2h=(10e9, 2.0), own_d2h=5e9)
    gpu = make.gpu(0, rx=1e9, numa_node=1)
    gpu = dataclasses.replace(gpu, pcie=dataclasses.replace(gpu.pcie, tx_bytes_per_s=30e9))
    (f,) = slow_pinned_copies([snap_with(p, gpus=[gpu])], T)
    assert "it carried 30.0 GB/s TX (link bytes; TX also carries the GPU's read requests for host-to-device" in f.advice


@pytest.mark.parametrize("rate, busy, fires", [
    (27.4e9, 1.0, True),     # under half of 55 GB/s over exactly 1 s
    (27.5e9, 5.0, False),    # exactly half
    (10e9, 0.99, False),     # not enough copying in the window
])
def test_thresholds(rate, busy, fires):
    p = cupti_proc(h2d=(rate, busy))
    assert len(slow_pinned_copies([snap_with(p)], T)) == int(fires)


def test_thresholds_are_configurable():
    p = cupti_proc(h2d=(40e9, 2.5))
    assert slow_pinned_copies([snap_with(p)], T) == []
    t = dataclasses.replace(T, slow_copy_fraction=0.8)
    assert len(slow_pinned_copies([snap_with(p)], t)) == 1


def test_each_direction_against_its_own_probe_rate():
    p = cupti_proc(h2d=(None, 2.5), d2h=(5e9, 3.0))
    (f,) = slow_pinned_copies([snap_with(p, probe=make.probe(d2h_pinned=50e9))], T)
    assert f.message.startswith("D2H copies") and f.values["probe_pinned_bytes_per_s"] == 50e9


@pytest.mark.parametrize("change", [
    dict(h2d=(None, 2.5)),
    dict(h2d=(20e9, None)),
    dict(h2d=None),
    dict(bus="0000:99:00.0"),  # a GPU this snapshot does not have
])
def test_silent_without_its_inputs(change):
    assert slow_pinned_copies([snap_with(cupti_proc(**change))], T) == []
    assert slow_pinned_copies([snap_with(make.process(77, "train", source="traced"))], T) == []


def test_silent_without_a_probe_or_with_one_of_another_gpu():
    gpus = [make.gpu(0), make.gpu(1)]
    p = cupti_proc()
    assert slow_pinned_copies([make.snapshot(gpus=gpus, processes=[p])], T) == []
    assert slow_pinned_copies([snap_with(p, gpus, make.probe(gpu_index=1))], T) == []
    assert slow_pinned_copies([snap_with(p, gpus, make.probe(status="unavailable"))], T) == []
    assert slow_pinned_copies([snap_with(p, gpus, make.probe(h2d_pinned=None))], T) == []
    assert len(slow_pinned_copies([snap_with(p, gpus, make.probe(gpu_index=0))], T)) == 1


def test_the_gpu_is_found_by_bus_id_in_either_spelling_else_the_only_one():
    gpus = [make.gpu(0), make.gpu(1)]
    snap = make.snapshot(gpus=gpus)
    assert snap.copy_gpu(cupti_proc(bus="0000:42:00.0")).index == 1
    assert snap.copy_gpu(cupti_proc(bus="00000000:42:00.0")).index == 1
    assert snap.copy_gpu(cupti_proc(bus=None)) is None  # two GPUs: unknown
    assert snap.copy_gpu(cupti_proc(bus=None, gpu_indices=(1,))).index == 1
    assert make.snapshot(gpus=gpus[:1]).copy_gpu(cupti_proc(bus=None)).index == 0


@pytest.mark.parametrize("probe_time, duration, fires", [(985.0, 4.0, True), (988.0, 3.0, False), (995.0, None, False)])
def test_silent_while_the_probe_itself_may_have_slowed_the_copies(probe_time, duration, fires):
    probe = dataclasses.replace(make.probe(time=probe_time), duration_s=duration)
    snap = snap_with(cupti_proc(), probe=probe)  # the snapshot is at t=1000
    assert len(slow_pinned_copies([snap], T)) == int(fires)


def test_causes_without_link_numa_or_stream_figures_are_named_plainly():
    gpu = make.gpu(0, pcie=Pcie())
    p = cupti_proc(share=None)
    (f,) = slow_pinned_copies([snap_with(p, [gpu])], T)
    assert "link bytes" not in f.advice and "nvidia-smi topo -m" in f.advice
    assert "copies on the default stream, serialised with its kernels" in f.advice
    assert "other_link_bytes_per_s" not in f.values and "default_stream_share" not in f.values


def test_registered_and_documented():
    assert RULES["slow-pinned-copies"] is slow_pinned_copies
    assert "50%" in RULE_DOCS["slow-pinned-copies"] and "1 MiB" in RULE_DOCS["slow-pinned-copies"]
    assert [f.rule for f in advise([snap_with(cupti_proc())], T)] == ["slow-pinned-copies"]


def _allocs(engine):
    return dict(allocations=make.allocations(engine, per_s=200.0, median_bytes=4096))


def _pageable(engine):
    return dict(copies=make.copies(engine, stats=[make.stat("h2d", "pageable", 2e9)]))


@pytest.mark.parametrize("rule, fields", [("pinned-small-allocs", _allocs), ("pageable-bulk-copies", _pageable)])
def test_figures_from_cupti_are_labelled(rule, fields):
    p = make.process(source="traced", **fields("cupti"))
    (f,) = [f for f in advise([make.snapshot(processes=[p])], T) if f.rule == rule]
    assert "(traced, CUPTI)" in f.message
    p = make.process(source="traced", **fields("hooks"))
    (f,) = [f for f in advise([make.snapshot(processes=[p])], T) if f.rule == rule]
    assert "(traced)" in f.message and "CUPTI" not in f.message
    p = make.process(source="attached", **fields("uprobes"))
    (f,) = [f for f in advise([make.snapshot(processes=[p])], T) if f.rule == rule]
    assert "(attached)" in f.message
