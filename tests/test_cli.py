"""The command line as a user meets it: exit codes, one-line errors, JSON contracts, no GPU needed."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from pinmon.cli import main
from pinmon.model import Gpu, HostMemory, Link, Pcie, ProcessPinned, Snapshot

GIB = 1 << 30
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "maps")


def snapshot_file(tmp_path, pinned_fraction=0.0, name="snap.json"):
    eff = 96 * GIB
    s = Snapshot(time=1764700000.0,
                 host=HostMemory(hostname="box", mem_total_bytes=eff, mem_available_bytes=eff // 2,
                                 effective_mem_limit_bytes=eff, pinned_bytes_est=int(eff * pinned_fraction)),
                 gpus=(Gpu(index=0, name="NVIDIA H200", link=Link(gen=5, gen_max=5, width=16, width_max=16,
                                                                   theoretical_bytes_per_s=63.0e9),
                           pcie=Pcie(rx_bytes_per_s=1e6, tx_bytes_per_s=1e6, method="counters")),),
                 processes=(ProcessPinned(pid=1, name="train", pinned_bytes=int(eff * pinned_fraction)),))
    p = tmp_path / name
    p.write_text(json.dumps(s.to_dict()))
    return str(p)


@pytest.mark.parametrize("fraction, code, status", [(0.0, 0, "ok"), (0.35, 1, "warning"), (0.64, 2, "critical")])
def test_check_exit_codes_follow_severity(tmp_path, capsys, fraction, code, status):
    path = snapshot_file(tmp_path, fraction)
    assert main(["check", "--snapshot", path, "--json"]) == code
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == "pinmon.check/1" and out["status"] == status
    assert out["snapshot"]["schema"] == "pinmon.snapshot/1"
    if code:
        assert out["findings"][0]["rule"] == "pinned-ram-share"


def test_check_text_report_has_numbers(tmp_path, capsys):
    assert main(["check", "--snapshot", snapshot_file(tmp_path, 0.64)]) == 2
    out = capsys.readouterr().out
    assert "CRITICAL" in out and "pinned-ram-share" in out and "61.4 GiB" in out and "(est.)" in out


@pytest.mark.parametrize("argv", [
    ["check", "--snapshot", "/nonexistent/file.json"],
    ["check", "--config", "/nonexistent/c.toml"],
])
def test_check_bad_input_is_unknown_3_one_line(capsys, argv):
    assert main(argv) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "error" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["check", "--bogus"], ["check", "--window", "-1"]])
def test_check_bad_arguments_exit_3(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 3
    assert capsys.readouterr().err.strip().count("\n") == 0


def run_cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "pinmon", *args], capture_output=True, text=True, timeout=120, **kw)


@pytest.mark.parametrize("args, code", [
    (["check", "--bogus"], 3),
    (["check", "--window", "abc"], 3),
    (["record"], 2),
    (["record", "-o", "x.jsonl", "--interval", "0"], 2),
    (["pinned", "--pid", "-4"], 2),
    (["replay"], 2),
    (["replay", "/nonexistent.jsonl"], 2),
    (["nosuchcommand"], 2),
    (["--max-pinned", "lots"], 2),
])
def test_bad_arguments_one_line_exit_code(args, code, tmp_path):
    r = run_cli(*args, cwd=tmp_path)
    assert r.returncode == code, r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert not os.listdir(tmp_path)  # nothing was written


def test_record_refuses_existing_file(tmp_path):
    p = tmp_path / "keep.jsonl"
    p.write_text("mine")
    r = run_cli("record", "-o", str(p), "--duration", "1")
    assert r.returncode == 2 and "already exists" in r.stderr
    assert p.read_text() == "mine"


def test_record_then_replay_json_then_check(tmp_path):
    out = tmp_path / "rec.jsonl.gz"
    r = run_cli("record", "-o", str(out), "--interval", "0.2", "--duration", "1")
    assert r.returncode == 0, r.stderr
    r = run_cli("replay", str(out), "--json")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    assert len(lines) >= 3
    assert all(l["snapshot"]["source"] == "replay" for l in lines)
    r = run_cli("check", "--snapshot", str(out), "--json")
    assert r.returncode in (0, 1, 2)
    assert json.loads(r.stdout)["snapshot"]["source"] == "snapshot"


def test_live_check_without_gpu_works(tmp_path):
    r = run_cli("check", "--json", "--window", "0.2")
    assert r.returncode in (0, 1, 2), r.stderr
    d = json.loads(r.stdout)
    assert d["snapshot"]["host"]["mem_total_bytes"] > 0
    if not d["snapshot"]["gpus"]:
        assert any("NVML" in n or "GPU" in n for n in d["snapshot"]["notices"])


def test_pinned_maps_file(tmp_path, capsys):
    assert main(["pinned", "--maps-file", os.path.join(FIXTURES, "write_combined_128m.maps"),
                 "--maps-file", os.path.join(FIXTURES, "non_cuda_shared_anon.maps"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["processes"][0]["write_combined_bytes"] == 128 << 20
    assert d["processes"][1]["pinned_bytes"] == 0
    assert any("not a CUDA process" in n for n in d["notices"])


def test_pinned_maps_file_wrong_format(tmp_path, capsys):
    bad = tmp_path / "notmaps.txt"
    bad.write_text("hello world\nthis is not maps\n")
    assert main(["pinned", "--maps-file", str(bad)]) == 2
    assert "not a /proc/PID/maps file" in capsys.readouterr().err


def test_pinned_self_pid(capsys):
    assert main(["pinned", "--pid", str(os.getpid()), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["processes"] == []  # pytest is not a CUDA process
    assert any("not a CUDA process" in n for n in d["notices"])


def test_python_dash_m_and_console_script_agree():
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("pinmon ")
    exe = shutil.which("pinmon", path=os.path.dirname(sys.executable))
    if exe:
        r2 = subprocess.run([exe, "--version"], capture_output=True, text=True)
        assert r2.stdout == r.stdout


def test_default_without_terminal_prints_check_report():
    r = run_cli()  # stdout is a pipe here: no terminal app
    assert r.returncode in (0, 1, 2), r.stderr
    assert "pinmon check:" in r.stdout
