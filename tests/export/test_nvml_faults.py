"""A few representative cells of the NVML fault matrix (tests/collect/nvml/nvml_matrix.py) through
``pinmon export --once``: the scrape works, a lost GPU reads ``pinmon_gpu_up 0`` with an active
``gpu-lost`` finding, an unreachable driver a ``gpu-driver-unavailable`` one.
"""
from __future__ import annotations

import re

import pytest

from tests.collect.nvml.nvml_matrix import GLOBAL_FUNCTIONS, inject_of, install_fake, target_of

pytestmark = pytest.mark.hardening


@pytest.fixture
def injected(monkeypatch):
    return install_fake(monkeypatch)


EXPORT_CELLS = [
    ("nvmlDeviceGetMemoryInfo", "gpu_lost", "always"),
    ("nvmlDeviceGetHandleByIndex", "gpu_lost", "always"),
    ("nvmlDeviceGetFieldValues", "timeout", "always"),
    ("nvmlInit", "driver_not_loaded", "always"),
    ("nvmlDeviceGetCount", "uninitialized", "always"),
    ("nvmlDeviceGetCurrPcieLinkWidth", "no_permission", "always"),
    ("nvmlGpmSampleGet", "gpu_lost", "always"),
]


@pytest.mark.parametrize("function, error, mode", EXPORT_CELLS)
def test_export_once(function, error, mode, injected, capsys):
    pytest.importorskip("pinmon.export")
    from pinmon import cli

    injected.fail(function, error, gpu=inject_of(function))
    code = cli.main(["export", "--once", "--interval", "0.05"])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err
    assert "pinmon_status " in out
    target = target_of(function)
    if error == "gpu_lost":
        assert re.search(rf'^pinmon_gpu_up\{{gpu="{target}",.*\}} 0\.0$', out, re.M)
        assert 'pinmon_finding{rule="gpu-lost"' in out
    elif function in GLOBAL_FUNCTIONS:
        assert "pinmon_gpu_up{" not in out
        assert 'pinmon_finding{rule="gpu-driver-unavailable",severity="critical",subject="host"} 1.0' in out
    else:
        assert re.search(r'^pinmon_gpu_up\{gpu="1",.*\} 1\.0$', out, re.M)
        assert 'pinmon_finding{rule="gpu-lost"' not in out
