"""The NVML fault matrix (tests/collect/nvml/nvml_matrix.py) through ``pinmon check``, by
``cli.main`` with the fake module injected as ``pynvml``: every cell keeps running, names what NVML
said next to the unknown value, and gives the exit code a lost GPU or an unreachable driver calls for.
"""
from __future__ import annotations

import json

import pytest

from tests.collect.nvml.nvml_matrix import (
    EVERY_READ,
    GLOBAL_FUNCTIONS,
    MATRIX,
    inject_of,
    install_fake,
    target_of,
)
from tests.fakes.fake_pynvml import _ERROR_TEXT, ERRORS

pytestmark = pytest.mark.hardening


@pytest.fixture
def injected(monkeypatch):
    return install_fake(monkeypatch)


@pytest.mark.parametrize("function, error, mode", MATRIX)
def test_check(function, error, mode, injected, monkeypatch, capsys):
    from pinmon import cli
    from pinmon.cli.commands import check

    fake = injected
    gpu, target = inject_of(function), target_of(function)
    seen = {}

    def live_snapshot(col, window_s):
        col.snapshot()
        if mode == "mid-run":
            seen["injected_at"] = fake.called(function, gpu)
            fake.fail(function, error, gpu=gpu)
        nvml = col._nvml
        if nvml is not None and nvml.sampler is not None:
            nvml.sampler.request_sampled()
            nvml.sampler.wait_idle(5.0)  # the fallback sample lands before the snapshot
        seen["before_final"] = fake.called(function, gpu)
        return col.snapshot()

    if mode == "always":
        fake.fail(function, error, gpu=gpu)
    monkeypatch.setattr(check, "live_snapshot", live_snapshot)
    as_json = mode == "mid-run"
    code = cli.main(["check", "--window", "0.01"] + (["--json"] if as_json else []))
    out, err = capsys.readouterr()
    assert err == "" and code in (0, 1, 2)
    # Calls made on the snapshot's own thread count up to its end; the sampler's up to its start.
    calls = fake.called(function, gpu) if function in EVERY_READ else seen["before_final"]
    hit = calls > seen.get("injected_at", 0)
    if as_json:
        doc = json.loads(out)
        rules = [f["rule"] for f in doc["findings"]]
        gpus = doc["snapshot"]["gpus"]
        notices = doc["snapshot"]["notices"]
    else:
        assert "Traceback" not in out
        rules = [r for r in ("gpu-lost", "gpu-driver-unavailable") if r in out]
        gpus, notices = None, [out]
    if hit and error == "gpu_lost" and function not in GLOBAL_FUNCTIONS:
        assert code == 2 and "gpu-lost" in rules
        if gpus is not None:
            assert [g["lost"] for g in gpus] == [i == target for i in range(3)]
    elif function in ("nvmlInit", "nvmlDeviceGetCount") and hit:
        # Three GPUs on the bus that NVML cannot reach: critical, not "no GPU".
        assert any("no NVIDIA GPU monitoring: 3 NVIDIA GPUs on the PCI bus" in n for n in notices)
        assert code == 2 and "gpu-driver-unavailable" in rules
    else:
        assert "gpu-lost" not in rules
    if hit and error not in ("not_supported", "gpu_lost") and function not in GLOBAL_FUNCTIONS:
        # The report names what NVML said, so the unknown value has its reason next to it.
        assert f"({_ERROR_TEXT[ERRORS[error]]}" in out
