"""`pinmon probe` end to end against the CuPy stand-in: text and JSON output, device choice, the
NVML link rate matched by bus id, exit codes (0 measured, 3 could not, 2 bad arguments)."""
import json
import sys

import pytest

from pinmon.cli import main
from pinmon.cli.commands import probe as cmd
from pinmon.collect.nvml import sysfs_pci_address
from pinmon.probe import engine as E
from tests.fakes.fake_cupy import assert_all_freed, make_fake_cupy

GEN5_X16 = 63.015e9


@pytest.fixture
def fake(monkeypatch):
    cp = make_fake_cupy()
    cp.cuda.Device.pci_bus_id = property(lambda self: f"0000:{0x1b + self.id:02X}:00.0")
    monkeypatch.setitem(sys.modules, "cupy", cp)
    # NVML spells the bus id with an 8-digit domain and upper case; only GPU 0's entry is known.
    monkeypatch.setattr(cmd, "nvml_links", lambda nvml=None: {
        sysfs_pci_address("00000000:1B:00.0"): ("NVIDIA H200", GEN5_X16)})
    yield cp.cuda.runtime
    assert_all_freed(cp.cuda.runtime)


def test_quick_probe_text(fake, capsys):
    assert main(["probe", "--max-pinned", "2M"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("== GPU 0 NVIDIA H200 (0000:1B:00.0)\nProbe quick, CUDA device 0")
    assert "cap 2.0 MiB" in out and "of Gen5 x16" in out


def test_json_has_every_kind_for_every_device(fake, capsys):
    fake.device_count = 2
    assert main(["probe", "--json", "--sweep", "--modes", "--gpu", "all", "--max-pinned", "2M"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "pinmon.probe/1"
    got = [(r["cuda_index"], r["result"]["kind"]) for r in doc["results"]]
    assert got == [(g, k) for g in (0, 1) for k in ("quick", "sweep", "alloc", "modes")]
    first, other = doc["results"][0], doc["results"][-1]
    assert first["name"] == "NVIDIA H200" and first["result"]["link_theoretical_bytes_per_s"] == GEN5_X16
    # GPU 1 has no NVML entry: its link rate is unknown, not borrowed from GPU 0.
    assert other["pci_bus_id"] == "0000:1C:00.0" and other["result"]["link_theoretical_bytes_per_s"] is None
    assert all(r["result"]["status"] == "ok" and r["result"]["measurements"] for r in doc["results"])


def test_unknown_device_is_bad_input(fake, capsys):
    assert main(["probe", "--gpu", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA device 3: CuPy sees 1" in err


def test_a_device_index_past_any_box_is_a_bad_argument_before_cupy_is_asked(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", None)  # without CuPy the probe would exit 3 (unavailable)
    with pytest.raises(SystemExit) as e:
        main(["probe", "--gpu", "256"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a CUDA device index or 'all': '256'" in err


def test_no_cupy_exits_3_with_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert main(["probe", "--json"]) == 3
    captured = capsys.readouterr()
    out = json.loads(captured.out)  # with --json the reason is on stdout too
    assert out["schema"] == "pinmon.probe/1" and out["status"] == "unavailable" and out["results"] == []
    assert "CuPy is not installed" in out["reason"]
    assert captured.err.count("\n") == 1 and captured.err.startswith("pinmon: probe unavailable: CuPy is not installed")


def test_refused_probe_exits_3(fake, capsys, monkeypatch):
    from pinmon.probe.safety import PinnedCap

    monkeypatch.setattr(E, "pinned_cap", lambda *a, **k: PinnedCap(
        cap_bytes=0, refused=True, reason="probe refused: only 1.0 GiB of memory available"))
    assert main(["probe"]) == 3
    captured = capsys.readouterr()
    assert "probe refused: only 1.0 GiB" in captured.out
    assert captured.err.strip() == "pinmon: GPU 0 quick: probe refused: only 1.0 GiB of memory available"


@pytest.mark.parametrize("argv", [["probe", "--gpu", "-1"], ["probe", "--gpu", "x"],
                                  ["probe", "--max-pinned", "lots"], ["probe", "--bogus"]])
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_progress_bar_draws_and_clears():
    import io

    s = io.StringIO()
    bar = cmd.ProgressBar(s, "GPU 0 sweep", width=10)
    bar(5, 10, "h2d pinned 1M")
    assert "[#####.....] 5/10 h2d pinned 1M" in s.getvalue()
    bar.clear()
    assert s.getvalue().endswith("\r") and not bar.shown


def test_bus_ids_match_across_spellings():
    assert sysfs_pci_address("00000000:1B:00.0") == sysfs_pci_address("0000:1B:00.0") == "0000:1b:00.0"
    assert sysfs_pci_address(None) is None and sysfs_pci_address("junk") is None
