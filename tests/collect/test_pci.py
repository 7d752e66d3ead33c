"""NVIDIA GPUs on the PCI bus without NVML, and what a snapshot says when NVML cannot reach them."""
import json
import sys

import pytest

from pinmon.advise import advise
from pinmon.collect.host.pci import count_nvidia_gpus
from pinmon.collect.live import LiveCollector
from pinmon.model import Snapshot, worst_severity
from pinmon.outputs.text import format_check
from tests import factories as make
from tests.export.helpers import render
from tests.fakes.fake_pynvml import FakeNvml
from tests.fakes.fake_sysfs import AUDIO, GPU_3D, GPU_VGA, NVIDIA, NVSWITCH, fake_pci, nvidia_gpus


def test_only_nvidia_display_controllers_count(tmp_path):
    root = fake_pci(str(tmp_path), [(NVIDIA, GPU_3D), (NVIDIA, GPU_VGA), (NVIDIA, AUDIO), (NVIDIA, NVSWITCH),
                                    (0x1002, GPU_3D), (0x8086, 0x060000)])
    assert count_nvidia_gpus(root) == 2


def test_unknown_and_odd_trees(tmp_path):
    assert count_nvidia_gpus(str(tmp_path / "none")) is None  # no PCI sysfs: unknown, not zero
    assert count_nvidia_gpus(fake_pci(str(tmp_path / "empty"), [])) == 0
    # A class that cannot be read still counts: a missed GPU would read as "no GPU".
    root = fake_pci(str(tmp_path / "noclass"), [(NVIDIA, None)])
    assert count_nvidia_gpus(root) == 1
    junk = fake_pci(str(tmp_path / "junk"), [(NVIDIA, GPU_3D)])
    (tmp_path / "junk/bus/pci/devices/0000:10:00.0/vendor").write_text("garbage\n")
    assert count_nvidia_gpus(junk) == 0


def _collector(tmp_path, sysfs, nvml):
    host = tmp_path / "host"
    (host / "proc").mkdir(parents=True, exist_ok=True)
    (host / "proc/meminfo").write_text("MemTotal: 134217728 kB\nMemAvailable: 120000000 kB\n")
    (tmp_path / "proc").mkdir(exist_ok=True)
    return LiveCollector(nvml=nvml, host_root=str(host), proc_root=str(tmp_path / "proc"), sysfs_root=sysfs)


def _failing_nvml(error="driver_not_loaded"):
    fake = FakeNvml(2)
    fake.fail("nvmlInit", error)
    return fake


def test_gpus_on_the_bus_without_nvml_are_critical(tmp_path):
    with _collector(tmp_path, nvidia_gpus(str(tmp_path / "sys"), 2), _failing_nvml()) as col:
        snap = col.snapshot()
    assert snap.gpus == () and snap.nvidia_pci_gpus == 2
    assert snap.nvml_error == "the NVIDIA kernel driver is not loaded"
    assert ("no NVIDIA GPU monitoring: 2 NVIDIA GPUs on the PCI bus but NVML could not start:"
            " the NVIDIA kernel driver is not loaded") in snap.notices
    findings = advise([snap])
    (f,) = [f for f in findings if f.rule == "gpu-driver-unavailable"]
    assert (f.severity, f.subject) == ("critical", "host")
    assert f.message == ("2 NVIDIA GPUs on the PCI bus but NVML could not start: the NVIDIA kernel"
                         " driver is not loaded")
    assert f.values == {"nvidia_pci_gpus": 2}
    assert worst_severity(findings) == "critical"
    assert "GPUs: none monitored (2 on the PCI bus; NVML could not start)" in format_check(snap, findings)
    # The fields travel through --json, recordings and replay.
    assert Snapshot.from_dict(json.loads(json.dumps(snap.to_dict()))) == snap


def test_no_gpu_on_the_bus_is_ok_with_a_notice(tmp_path):
    sysfs = fake_pci(str(tmp_path / "sys"), [(0x8086, 0x060000)])
    with _collector(tmp_path, sysfs, _failing_nvml("library_not_found")) as col:
        snap = col.snapshot()
    assert snap.nvidia_pci_gpus == 0 and snap.nvml_error
    assert [n for n in snap.notices if "NVIDIA" in n] == [
        "no NVIDIA GPU found: none on the PCI bus (NVML: NVML library not found (is the NVIDIA driver"
        " installed?))"]
    findings = advise([snap])
    assert not any(f.rule == "gpu-driver-unavailable" for f in findings)
    assert worst_severity(findings) == "ok"
    assert "GPUs: none found" in format_check(snap, findings)


def test_a_working_nvml_is_no_finding(tmp_path):
    with _collector(tmp_path, nvidia_gpus(str(tmp_path / "sys"), 2), FakeNvml(2)) as col:
        snap = col.snapshot()
    assert len(snap.gpus) == 2 and snap.nvidia_pci_gpus == 2 and snap.nvml_error is None
    assert not any(f.rule == "gpu-driver-unavailable" for f in advise([snap]))


def test_older_snapshots_without_the_fields_stay_silent():
    d = make.full_snapshot(gpus=()).to_dict()
    d.pop("nvidia_pci_gpus")
    d.pop("nvml_error")
    snap = Snapshot.from_dict(d)
    assert snap.nvidia_pci_gpus is None and snap.nvml_error is None
    assert not any(f.rule == "gpu-driver-unavailable" for f in advise([snap]))


def test_the_exporter_serves_the_finding_and_the_count(tmp_path):
    with _collector(tmp_path, nvidia_gpus(str(tmp_path / "sys"), 2), _failing_nvml()) as col:
        snap = col.snapshot()
    text = render([snap], advise([snap]))
    assert 'pinmon_finding{rule="gpu-driver-unavailable",severity="critical",subject="host"} 1.0' in text
    assert "\npinmon_status 2.0\n" in text
    assert "\npinmon_host_nvidia_pci_gpus 2.0\n" in text
    assert "pinmon_gpu_up{" not in text


@pytest.mark.parametrize("pci_gpus", [3, 0])
def test_check_exit_code(pci_gpus, monkeypatch, capsys):
    from pinmon import cli
    from pinmon.cli.commands import check
    from pinmon.collect import live as collector

    monkeypatch.setitem(sys.modules, "pynvml", _failing_nvml("library_not_found"))
    monkeypatch.setattr(collector, "count_nvidia_gpus", lambda root="/sys": pci_gpus)
    monkeypatch.setattr(check, "live_snapshot", lambda col, window: col.snapshot())
    code = cli.main(["check", "--json", "--window", "0.01"])
    doc = json.loads(capsys.readouterr().out)
    rules = [f["rule"] for f in doc["findings"]]
    if pci_gpus:
        assert code == 2 and doc["status"] == "critical" and "gpu-driver-unavailable" in rules
    else:
        assert "gpu-driver-unavailable" not in rules
        assert any(n.startswith("no NVIDIA GPU found") for n in doc["snapshot"]["notices"])
