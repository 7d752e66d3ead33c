"""`pinmon probe` on a real GPU, as a user runs it: exit 0, one JSON document, pinned beats pageable,
and the link rate comes from NVML."""
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu


def test_probe_command_json():
    out = subprocess.run([sys.executable, "-m", "pinmon", "probe", "--json", "--max-pinned", "128M"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "pinmon.probe/1"
    [entry] = doc["results"]
    r = entry["result"]
    assert r["status"] == "ok" and r["kind"] == "quick"
    assert entry["pci_bus_id"] and r["link_theoretical_bytes_per_s"] > 0
    rates = {(m["memory"], m["direction"]): m["bytes_per_s"] for m in r["measurements"] if m["kind"] == "copy"}
    assert rates[("pinned", "h2d")] > rates[("pageable", "h2d")]
    assert rates[("pinned", "h2d")] <= r["link_theoretical_bytes_per_s"]


def test_probe_command_text():
    out = subprocess.run([sys.executable, "-m", "pinmon", "probe", "--max-pinned", "128M"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "== GPU 0" in out.stdout and "pinned H2D" in out.stdout and "GB/s" in out.stdout
