"""NVML fault matrix: every NVML function pinmon calls x eight NVML errors x (always, from mid-run).

The functions come from a recorded healthy run (``nvml_matrix.recorded_functions``), so the matrix
follows the code. For each cell the collector must keep running, show the value as unknown (None)
with a notice naming the error, and leave GPU 0 (which the fault does not touch) exact.
GPU_IS_LOST must end as a lost GPU and a ``gpu-lost`` finding. Where ``pinmon.export`` exists,
every collector cell is also scraped: the scrape must work, a lost GPU reads ``pinmon_gpu_up 0``
with an active ``gpu-lost`` finding metric. A fault injected mid-run into a call made only at start
has nothing to break: that cell checks the run stays healthy.

The same matrix runs through ``pinmon check`` (tests/cli/test_nvml_faults.py), and a few
representative cells through the terminal app (tests/tui/test_nvml_faults.py) and ``pinmon export
--once`` (tests/export/test_nvml_faults.py).
"""
from __future__ import annotations

import json
import re

import pytest

from pinmon.advise import advise
from pinmon.collect.nvml import NVML_FUNCTIONS, NvmlCollector
from pinmon.model import HostMemory, Snapshot
from pinmon.outputs.text import format_check
from tests.fakes.fake_pynvml import _ERROR_TEXT, ERRORS

from .nvml_matrix import (
    AT_CLOSE,
    EVERY_READ,
    FUNCTIONS,
    MATRIX,
    MATRIX_ERRORS,
    drive,
    inject_of,
    make_fake,
    target_of,
)

pytestmark = pytest.mark.hardening

# Exact GPU 0 link bytes per drive(): 80 ticks of 1/64 s at 1e9 B/s.
GPU0_RX_PER_READ = 1_250_000_000

# What each per-GPU function provides, to check it reads as unknown when the call fails.
VALUE_OF = {
    "nvmlDeviceGetName": lambda g: g.name,
    "nvmlDeviceGetUUID": lambda g: g.uuid,
    "nvmlDeviceGetPciInfo": lambda g: g.pci_bus_id,
    "nvmlDeviceGetCpuAffinity": lambda g: g.cpu_affinity,
    "nvmlDeviceGetNumaNodeId": lambda g: g.numa_node,
    "nvmlDeviceGetCurrPcieLinkGeneration": lambda g: g.link.gen,
    "nvmlDeviceGetMaxPcieLinkGeneration": lambda g: g.link.gen_max,
    "nvmlDeviceGetCurrPcieLinkWidth": lambda g: g.link.width,
    "nvmlDeviceGetMaxPcieLinkWidth": lambda g: g.link.width_max,
    "nvmlDeviceGetMemoryInfo": lambda g: g.memory_total_bytes,
    "nvmlDeviceGetComputeRunningProcesses": lambda g: g.processes or None,
    "nvmlDeviceGetPcieThroughput": lambda g: g.pcie.rx_bytes_per_s,
    "nvmlDeviceGetHandleByIndex": lambda g: g.name,
}
# GPM calls made only while detecting: failing from the start, the GPU uses its byte counters.
GPM_AT_START = frozenset({"nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleGet"})


def test_the_matrix_covers_every_listed_function_and_error():
    # The recording must find every function the collector declares, and nothing undeclared.
    assert set(FUNCTIONS) == set(NVML_FUNCTIONS)
    assert set(MATRIX_ERRORS) == set(ERRORS)
    assert len(MATRIX) == len(FUNCTIONS) * 8 * 2 == 352


def snapshot_of(gpus, notices) -> Snapshot:
    return Snapshot(time=1.0, host=HostMemory(hostname="box"), gpus=gpus, notices=notices)


def exported(reads):
    """The exporter's scrape after these reads (None without pinmon.export): it must not fail."""
    try:
        from pinmon.export import ExportState, build_registry, metrics_text
    except ImportError:
        return None
    state = ExportState()
    for gpus, notices in reads:
        snap = snapshot_of(gpus, notices)
        state.add_snapshot(snap)
        state.set_findings(advise([snap]))
    return metrics_text(build_registry(state))


# --- the collector -------------------------------------------------------------------------------

@pytest.mark.parametrize("function, error, mode", MATRIX)
def test_collector(function, error, mode, tmp_path):
    fake = make_fake()
    gpu, target = inject_of(function), target_of(function)
    if mode == "always":
        fake.fail(function, error, gpu=gpu)
    c = NvmlCollector(fake, background=False, clock=fake.clock, sysfs_root=str(tmp_path / "sys"))
    c.start()
    reads = [drive(fake, c)]
    injected_at = 0
    if mode == "mid-run":
        injected_at = fake.called(function, gpu)
        fake.fail(function, error, gpu=gpu)
    reads += [drive(fake, c) for _ in range(3)]
    c.close()
    c.close()
    hit = fake.called(function, gpu) > injected_at

    for gpus, notices in reads:
        assert isinstance(gpus, tuple) and isinstance(notices, tuple)
        assert all(isinstance(n, str) and "\n" not in n for n in notices)
        snap = snapshot_of(gpus, notices)
        assert Snapshot.from_dict(json.loads(json.dumps(snap.to_dict()))) == snap
        format_check(snap, advise([snap]))  # the report prints whatever is unknown as n/a
    gpus, notices = reads[-1]
    findings = advise([snapshot_of(gpus, notices)])
    text = _ERROR_TEXT[ERRORS[error]]
    metrics = exported(reads)

    if not hit or function in AT_CLOSE:
        # Nothing failed that the run needed (a start-only call faulted after start, or a call
        # made on close).
        assert [g.lost for g in gpus] == [False, False, False] and notices == ()
        return
    if function in ("nvmlInit", "nvmlDeviceGetCount"):
        assert gpus == () and len(notices) == 1
        assert notices[0].startswith("no NVIDIA GPU monitoring: ")
        assert fake.init_count == 0  # shut down again, or never started
        return

    g0, g1 = gpus[0], gpus[target]
    # GPU 0 is untouched: exact bytes, no notice, not lost; so is the third GPU.
    assert not g0.lost and g0.notices == () and g0.name == "NVIDIA H200"
    assert g0.pcie.method == "counters" and g0.pcie.rx_bytes == GPU0_RX_PER_READ
    assert all(not g.lost and g.notices == () for g in gpus if g.index not in (0, target))
    if error == "gpu_lost":
        assert g1.lost
        assert any(n.startswith(f"GPU {target}") and "fell off the bus" in n for n in notices)
        assert [f.subject for f in findings if f.rule == "gpu-lost"] == [f"gpu{target}"]
        if metrics is not None:
            assert re.search(rf'^pinmon_gpu_up\{{gpu="{target}",.*\}} 0\.0$', metrics, re.M)
            assert f'pinmon_finding{{rule="gpu-lost",severity="critical",subject="gpu{target}"}} 1.0' in metrics
        return
    assert not g1.lost and not any(f.rule == "gpu-lost" for f in findings)
    if metrics is not None:
        assert 'pinmon_finding{rule="gpu-lost"' not in metrics
        assert re.search(rf'^pinmon_gpu_up\{{gpu="{target}",.*\}} 1\.0$', metrics, re.M)
    if function in VALUE_OF and (mode == "always" or function in EVERY_READ):
        assert VALUE_OF[function](g1) is None
    if function == "nvmlDeviceGetFieldValues" and mode == "always":
        assert g1.pcie.replay_delta is None and g1.pcie.error_delta is None
    if function.startswith("nvmlGpm"):
        if mode == "always" and function in GPM_AT_START:
            assert g1.pcie.method == "counters" and g1.pcie.rx_bytes == 3 * GPU0_RX_PER_READ
        else:  # failing mid-run (or every metrics call): no reading rather than a wrong one
            assert g1.pcie.method == "gpm" and g1.pcie.rx_bytes is None
    if error == "not_supported":
        if function == "nvmlDeviceGetHandleByIndex":  # a GPU that cannot be opened is worth a word
            assert notices == (f"GPU 1: NVML cannot open the device ({text})",)
        else:
            assert notices == ()  # unsupported is normal on many boards: silent
        return
    mine = [n for n in notices if n.startswith(f"GPU {target}")]
    assert mine and all(f"({text}" in n for n in mine), notices
    assert g1.notices == tuple(mine)
