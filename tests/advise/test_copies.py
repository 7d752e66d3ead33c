"""slow-pinned-copies: a traced process's CUPTI-timed pinned copies of 1 MiB+ against the probe of the
same GPU and direction, the causes it names with the snapshot's numbers, and silence without inputs;
pageable-bulk-copies and pinned-small-allocs label CUPTI figures."""
import dataclasses

import pytest

from pinmon.advise import RULE_DOCS, RULES, Thresholds, advise
from pinmon.advise.copies import copy_gpu, slow_pinned_copies
from pinmon.model import Pcie
from tests import factories as make

T = Thresholds()


def cupti_proc(**over):
    fields = dict(pid=77, name="train", source="traced", trace_engine="cupti",
                  h2d_pinned_bulk_bytes_per_s=20e9, h2d_pinned_bulk_busy_s=2.5,
                  h2d_copy_bytes_per_s=10e9, pinned_bulk_default_stream_share=0.8,
                  copy_gpu_pci_bus_id="0000:41:00.0")
    fields.update(over)
    return make.process(**fields)


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
    p = cupti_proc(h2d_pinned_bulk_bytes_per_s=None, h2d_pinned_bulk_busy_s=None, d2h_pinned_bulk_bytes_per_s=10e9,
                   d2h_pinned_bulk_busy_s=2.0, d2h_copy_bytes_per_s=5e9)
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
    p = cupti_proc(h2d_pinned_bulk_bytes_per_s=rate, h2d_pinned_bulk_busy_s=busy)
    assert len(slow_pinned_copies([snap_with(p)], T)) == int(fires)


def test_thresholds_are_configurable():
    p = cupti_proc(h2d_pinned_bulk_bytes_per_s=40e9)
    assert slow_pinned_copies([snap_with(p)], T) == []
    t = dataclasses.replace(T, slow_copy_fraction=0.8)
    assert len(slow_pinned_copies([snap_with(p)], t)) == 1


def test_each_direction_against_its_own_probe_rate():
    p = cupti_proc(h2d_pinned_bulk_bytes_per_s=None, d2h_pinned_bulk_bytes_per_s=5e9, d2h_pinned_bulk_busy_s=3.0)
    (f,) = slow_pinned_copies([snap_with(p, probe=make.probe(d2h_pinned=50e9))], T)
    assert f.message.startswith("D2H copies") and f.values["probe_pinned_bytes_per_s"] == 50e9


@pytest.mark.parametrize("change", [
    dict(h2d_pinned_bulk_bytes_per_s=None),
    dict(h2d_pinned_bulk_busy_s=None),
    dict(copy_gpu_pci_bus_id="0000:99:00.0"),  # a GPU this snapshot does not have
])
def test_silent_without_its_inputs(change):
    assert slow_pinned_copies([snap_with(cupti_proc(**change))], T) == []


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
    assert copy_gpu(snap, cupti_proc(copy_gpu_pci_bus_id="0000:42:00.0")).index == 1
    assert copy_gpu(snap, cupti_proc(copy_gpu_pci_bus_id="00000000:42:00.0")).index == 1
    assert copy_gpu(snap, cupti_proc(copy_gpu_pci_bus_id=None)) is None  # two GPUs: unknown
    assert copy_gpu(snap, cupti_proc(copy_gpu_pci_bus_id=None, gpu_indices=(1,))).index == 1
    assert copy_gpu(make.snapshot(gpus=gpus[:1]), cupti_proc(copy_gpu_pci_bus_id=None)).index == 0


@pytest.mark.parametrize("probe_time, duration, fires", [(985.0, 4.0, True), (988.0, 3.0, False), (995.0, None, False)])
def test_silent_while_the_probe_itself_may_have_slowed_the_copies(probe_time, duration, fires):
    probe = dataclasses.replace(make.probe(time=probe_time), duration_s=duration)
    snap = snap_with(cupti_proc(), probe=probe)  # the snapshot is at t=1000
    assert len(slow_pinned_copies([snap], T)) == int(fires)


def test_causes_without_link_numa_or_stream_figures_are_named_plainly():
    gpu = make.gpu(0, pcie=Pcie())
    p = cupti_proc(pinned_bulk_default_stream_share=None)
    (f,) = slow_pinned_copies([snap_with(p, [gpu])], T)
    assert "link bytes" not in f.advice and "nvidia-smi topo -m" in f.advice
    assert "copies on the default stream, serialised with its kernels" in f.advice
    assert "other_link_bytes_per_s" not in f.values and "default_stream_share" not in f.values


def test_registered_and_documented():
    assert RULES["slow-pinned-copies"] is slow_pinned_copies
    assert "50%" in RULE_DOCS["slow-pinned-copies"] and "1 MiB" in RULE_DOCS["slow-pinned-copies"]
    assert [f.rule for f in advise([snap_with(cupti_proc())], T)] == ["slow-pinned-copies"]


@pytest.mark.parametrize("rule, fields", [
    ("pinned-small-allocs", dict(pinned_allocs_per_s=200.0, median_alloc_bytes=4096)),
    ("pageable-bulk-copies", dict(pageable_copy_bytes_per_s=2e9)),
])
def test_figures_from_cupti_are_labelled(rule, fields):
    p = make.process(source="traced", trace_engine="cupti", **fields)
    (f,) = [f for f in advise([make.snapshot(processes=[p])], T) if f.rule == rule]
    assert "(traced, CUPTI)" in f.message
    p = make.process(source="traced", trace_engine="hooks", **fields)
    (f,) = [f for f in advise([make.snapshot(processes=[p])], T) if f.rule == rule]
    assert "(traced)" in f.message and "CUPTI" not in f.message
