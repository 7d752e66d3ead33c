"""The command line as a user meets it: exit codes, one-line errors, JSON contracts, no GPU needed."""
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys

import pytest

from pinmon.cli import main
from pinmon.model import Gpu, HostMemory, Link, Pcie, ProbeResult, Snapshot
from tests import factories as make
from tests.waiting import wait_until

GIB = 1 << 30
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(TESTS, "fixtures", "maps")


def snapshot_file(tmp_path, pinned_fraction=0.0, name="snap.json"):
    eff = 96 * GIB
    s = Snapshot(time=1764700000.0,
                 host=HostMemory(hostname="box", mem_total_bytes=eff, mem_available_bytes=eff // 2,
                                 effective_mem_limit_bytes=eff, pinned_bytes_est=int(eff * pinned_fraction)),
                 gpus=(Gpu(index=0, name="NVIDIA H200", link=Link(gen=5, gen_max=5, width=16, width_max=16,
                                                                   theoretical_bytes_per_s=63.0e9),
                           pcie=Pcie(rx_bytes_per_s=1e6, tx_bytes_per_s=1e6, method="counters")),),
                 processes=(make.process(1, "train", pinned_bytes=int(eff * pinned_fraction)),))
    p = tmp_path / name
    p.write_text(json.dumps(s.to_dict()))
    return str(p)


@pytest.mark.parametrize("fraction, code, status", [(0.0, 0, "ok"), (0.35, 1, "warning"), (0.64, 2, "critical")])
def test_check_exit_codes_follow_severity(tmp_path, capsys, fraction, code, status):
    path = snapshot_file(tmp_path, fraction)
    assert main(["check", "--snapshot", path, "--json"]) == code
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == "pinmon.check/1" and out["status"] == status
    assert out["snapshot"]["schema"] == "pinmon.snapshot/2"
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
    # No OOM kills from the kernel's log (another test's, on this box) in the recording: replay exits 0.
    r = run_cli("--oom-lookback", "0", "record", "-o", str(out), "--interval", "0.2", "--duration", "1")
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
    assert d["processes"][0]["held"]["write_combined_bytes"] == 128 << 20
    assert d["processes"][1]["held"]["pinned_bytes"] == 0
    assert any("not a CUDA process" in n for n in d["notices"])


def test_pinned_total_is_capped_at_ram_as_in_the_live_collector(capsys, monkeypatch):
    # Two copies of one process's maps count its 256 MiB twice: together more than a 300 MiB machine.
    monkeypatch.setattr("pinmon.collect.host.memory.read_host_memory",
                        lambda root="/": ({"mem_total_bytes": 300 << 20}, []))
    path = os.path.join(FIXTURES, "default_256m.maps")
    assert main(["pinned", "--maps-file", path, "--maps-file", path, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = [p["held"]["pinned_bytes"] for p in d["processes"]]
    assert all(200 << 20 < r <= 300 << 20 for r in rows)  # each row fits: only the sum is over
    assert d["total_pinned_bytes"] == 300 << 20 and d["total_write_combined_bytes"] == 0
    assert any("total is capped at RAM" in n for n in d["notices"])
    assert main(["pinned", "--maps-file", path, "--maps-file", path]) == 0
    assert "note: the per-process pinned figures add up to more than RAM" in capsys.readouterr().out


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


# --- exit codes and messages for bad arguments ------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["--interval", "-1", "check"], ["--interval", "0", "check"], ["--interval", "abc", "check"],
    ["--interval", "1e9", "check"], ["--max-pinned", "-5M", "check"], ["--bogus", "check"],
    ["check", "--window", "1e9"], ["check", "--window", "-1"],
], ids=" ".join)
def test_check_bad_arguments_exit_3_wherever_they_sit(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 3
    assert capsys.readouterr().err.strip().count("\n") == 0


@pytest.mark.parametrize("argv, words", [
    (["--max-pinned", "-5M"], "not a size: '-5M'"),
    (["check", "--max-pinned", "-5M"], "not a size: '-5M'"),
    (["probe", "--max-pinned", "-1G"], "not a size: '-1G'"),
    (["--max-pinned", "1e300T"], "size too large: '1e300T'"),
    (["replay", "r.jsonl", "--speed", "0"], "speed is a factor"),
    (["demo", "--speed", "-2"], "speed is a factor"),
    (["check", "--window", "1e9"], "0.01 to 3600"),
    (["export", "--once", "--interval", "1e9"], "0.01 to 3600"),
    (["--interval", "1e308", "record", "-o", "x.jsonl"], "0.01 to 3600"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_bad_values_say_what_is_wrong(capsys, tmp_path, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err
    assert words in err and "expected one argument" not in err and err.count("\n") == 1
    assert not os.listdir(tmp_path)  # nothing written, not even an empty recording


def test_speed_is_a_factor_not_seconds(capsys):
    with pytest.raises(SystemExit):
        main(["replay", "r.jsonl", "--speed", "0"])
    err = capsys.readouterr().err
    assert "factor" in err and "seconds" not in err


@pytest.mark.parametrize("command", ["check", "pinned", "record", "replay", "export", "probe"])
def test_bad_option_after_a_command_points_to_its_help(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--bogus"])
    assert f"see pinmon {command} --help" in capsys.readouterr().err


def test_the_console_script_entry_point_is_the_main_function(capsys):
    # pyproject's "pinmon = pinmon.cli:main" resolves to the function even once the module of the
    # same name is loaded.
    import importlib
    import re

    import pinmon.cli.main  # noqa: F401

    with open(os.path.join(os.path.dirname(TESTS), "pyproject.toml")) as f:
        target = re.search(r'^pinmon = "([\w.]+):(\w+)"$', f.read(), re.M)
    entry = getattr(importlib.import_module(target.group(1)), target.group(2))
    with pytest.raises(SystemExit) as e:
        entry(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("pinmon ")


TRACED = [
    (["trace", "python", "x.py", "--interval", "-5", "--dir", "-1", "--json", "--", "-h"],
     ["python", "x.py", "--interval", "-5", "--dir", "-1", "--json", "--", "-h"]),
    (["--max-pinned", "8M", "trace", "--dir", "d", "--", "python", "--engine", "x", "--max-pinned", "-5M"],
     ["python", "--engine", "x", "--max-pinned", "-5M"]),
    (["trace", "--engine", "hooks", "--", "--", "-x"], ["--", "-x"]),
    (["trace", "--dir=-d", "sh", "-c", "exit 3", "--help"], ["sh", "-c", "exit 3", "--help"]),
]


@pytest.mark.parametrize("argv, cmd", TRACED, ids=[" ".join(a) for a, _ in TRACED])
def test_the_traced_commands_arguments_are_its_own(argv, cmd):
    from pinmon.cli.main import build_parser

    args, extra = build_parser().parse_known_args(argv)
    assert args.command == "trace" and args.cmd == cmd and extra == []


def _all_parsers():
    from pinmon.cli.main import build_parser

    parser = build_parser()
    return [parser, *parser.subcommands.values()]


def test_every_argument_has_help_text():
    missing = [f"{p.prog} {a.option_strings or a.dest}" for p in _all_parsers() for a in p.arguments
               if not a.help]
    assert not missing


def test_help_texts_show_a_single_percent_sign():
    for p in _all_parsers():
        text = p.format_help()
        assert "%%" not in text, p.prog
    from pinmon.cli.main import build_parser

    assert "5% of available RAM" in build_parser().subcommands["probe"].format_help()


# --- config: every command validates it -------------------------------------------------------------

@pytest.mark.parametrize("argv, code", [
    (["--config", "{cfg}", "pinned"], 2), (["--config", "{cfg}", "probe"], 2),
    (["--config", "{cfg}", "check", "--snapshot", "{snap}"], 3), (["check", "--config", "{cfg}"], 3),
])
def test_bad_config_fails_every_command(tmp_path, capsys, argv, code):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("interval = = 1\n")
    snap = snapshot_file(tmp_path)
    assert main([a.format(cfg=cfg, snap=snap) for a in argv]) == code
    err = capsys.readouterr().err
    assert "bad.toml" in err and err.count("\n") == 1


# --- --json errors are JSON too ----------------------------------------------------------------------

@pytest.mark.parametrize("argv, schema, status", [
    (["check", "--json", "--snapshot", "/nonexistent/snap.json"], "pinmon.check/1", "unknown"),
    (["check", "--json", "--window", "abc"], "pinmon.check/1", "unknown"),
    (["pinned", "--json", "--maps-file", "/nonexistent/maps"], "pinmon.pinned/2", "error"),
    (["replay", "/nonexistent/rec.jsonl", "--json"], None, "error"),
])
def test_json_errors_print_a_json_object(capsys, argv, schema, status):
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    assert code == (3 if argv[0] == "check" else 2)
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc.get("schema") == schema and doc["status"] == status
    assert doc["reason"] and doc["reason"] in captured.err  # the same words as the line on stderr
    assert captured.err.count("\n") == 1


# --- pinned -----------------------------------------------------------------------------------------

def _absent_pid() -> int:
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    return pid_max  # pids are below pid_max


def test_pinned_unknown_pid_is_an_error(capsys):
    assert main(["pinned", "--pid", str(_absent_pid())]) == 2
    err = capsys.readouterr().err
    assert "no such process" in err and err.count("\n") == 1


def test_pinned_empty_maps_file_is_refused(tmp_path, capsys):
    empty = tmp_path / "empty.maps"
    empty.write_bytes(b"")
    assert main(["pinned", "--maps-file", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "empty.maps: empty file" in err and err.count("\n") == 1


def test_pinned_maps_file_rows_carry_the_file_not_a_pid(capsys):
    path = os.path.join(FIXTURES, "write_combined_128m.maps")
    assert main(["pinned", "--maps-file", path, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["processes"][0]
    assert row["pid"] is None and row["maps_file"] == path and row["identity"]["name"] == "write_combined_128m.maps"
    assert main(["pinned", "--maps-file", path]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if "write_combined_128m" in l)
    assert line.split()[0] == "-"  # no pid column value


def test_pinned_maps_address_of_5000_digits_is_not_a_maps_line(tmp_path, capsys):
    p = tmp_path / "huge.maps"
    p.write_text(f"{'f' * 5000}-{'f' * 5001} rw-s 00000000 00:01 1 /dev/zero (deleted)\n"
                 "7f0000000000-7f0000001000 rw-s 00000000 00:05 77 /dev/nvidiactl\n")
    assert main(["pinned", "--maps-file", str(p), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["processes"][0]["held"]["pinned_bytes"] == 0


def test_pinned_names_are_printed_as_data(tmp_path, capsys):
    p = tmp_path / "evil\x1b[2J\nname.maps"
    with open(os.path.join(FIXTURES, "write_combined_128m.maps"), "rb") as f:
        p.write_bytes(f.read())
    assert main(["pinned", "--maps-file", str(p)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[2J name.maps" in out


# --- check text: untrusted strings --------------------------------------------------------------------

def test_check_prints_names_as_one_safe_line(tmp_path, capsys):
    d = json.loads(open(snapshot_file(tmp_path)).read())
    d["host"]["hostname"] = 'box\x1b]0;owned\x07\n"quoted"'
    d["processes"][0]["identity"]["name"] = "tr\x1b[31main\nfake row"
    d["processes"][0]["identity"]["user"] = "\x1b[1mroot"
    d["gpus"][0]["name"] = "H200\r\nGPU 9 FAKE"
    d["notices"] = ["line one\nline two \x1b[0m"]
    p = tmp_path / "evil.json"
    p.write_text(json.dumps(d))
    main(["check", "--snapshot", str(p)])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert 'host box\\x1b]0;owned\\x07 "quoted"' in out
    row = next(l for l in out.splitlines() if l.strip().startswith("1 "))
    assert "tr\\x1b[31main fake row" in row
    assert not any(l.strip().startswith("GPU 9") for l in out.splitlines())


# --- record ---------------------------------------------------------------------------------------

class _FakeLiveCollector:
    """Stands in for the live collector: a snapshot per call, no machine reading."""

    def __init__(self, interval_s=1.0, **kw):
        self.n = 0

    def snapshot(self):
        self.n += 1
        return make.box_snapshot(self.n)

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _FakeClock:
    """Stands in for the time module of pinmon record: sleeping advances the clock at once."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


@pytest.mark.parametrize("interval, duration, count", [
    ("3600", "2", 1),      # --duration shorter than --interval: one snapshot at the end
    ("1", "2.5", 3),       # at 1 s, 2 s and the end
    ("1", "3", 3),
])
def test_record_duration_bounds_the_run(tmp_path, capsys, monkeypatch, interval, duration, count):
    from pinmon.cli.commands import record

    clock = _FakeClock()
    monkeypatch.setattr(record, "time", clock)
    monkeypatch.setattr(record, "wait_for_stop", lambda stop, seconds: clock.sleep(seconds))
    monkeypatch.setattr("pinmon.collect.live.LiveCollector", _FakeLiveCollector)
    out = tmp_path / "r.jsonl"
    assert main(["record", "-o", str(out), "--interval", interval, "--duration", duration]) == 0
    assert clock.now - 1000.0 == pytest.approx(float(duration))  # ran exactly --duration
    assert len(out.read_text().splitlines()) == count
    noun = "snapshot" if count == 1 else "snapshots"
    assert f"recorded {count} {noun} to" in capsys.readouterr().err


def test_record_gives_the_signals_back_when_it_ends(tmp_path, monkeypatch):
    """Its handlers serve the recording only: once it is closed, SIGTERM, SIGHUP and Ctrl-C do what
    they did before (for a program that runs ``main`` and goes on)."""
    import signal

    from pinmon.cli.commands import record

    clock = _FakeClock()
    monkeypatch.setattr(record, "time", clock)
    monkeypatch.setattr(record, "wait_for_stop", lambda stop, seconds: clock.sleep(seconds))
    monkeypatch.setattr("pinmon.collect.live.LiveCollector", _FakeLiveCollector)
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in sigs}
    assert main(["record", "-o", str(tmp_path / "r.jsonl"), "--duration", "2"]) == 0
    assert {s: signal.getsignal(s) for s in sigs} == before


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (its SigCgt mask in /proc)."""
    with open(f"/proc/{pid}/status") as f:
        mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    return bool(mask >> (sig - 1) & 1)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_record_takes_a_last_snapshot_when_stopped(tmp_path, sig):
    out = tmp_path / "r.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "pinmon", "record", "-o", str(out), "--interval", "3600"],
                         stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        # Sent once record has its own handlers (it installs SIGINT, SIGTERM, then SIGHUP's): before
        # that SIGTERM and SIGHUP would kill it and SIGINT raise KeyboardInterrupt.
        wait_until(lambda: catches(p.pid, signal.SIGHUP), what="record's signal handlers")
        p.send_signal(sig)
        err = p.communicate(timeout=30)[1]
    finally:
        p.kill()
    assert p.returncode == 0, err
    assert len(out.read_text().splitlines()) == 1 and "recorded 1 snapshot to" in err
    assert "Traceback" not in err


def test_record_to_standard_output(tmp_path):
    r = run_cli("record", "-o", "-", "--interval", "0.2", "--duration", "0.5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert lines and all(d["schema"] == "pinmon.snapshot/2" for d in lines)
    assert os.listdir(tmp_path) == [] and "to standard output" in r.stderr


@pytest.mark.parametrize("name", ["r.jsonl", "r.jsonl.gz"])
def test_a_recording_is_readable_by_its_owner_only(tmp_path, name):
    from pinmon.recording import Recorder, RecordingError

    with Recorder(str(tmp_path / name)) as rec:
        rec.write(make.snapshot())
    assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RecordingError, match="already exists"):
        Recorder(str(tmp_path / "link"))
    assert not (tmp_path / "elsewhere").exists()


# --- check --probe -----------------------------------------------------------------------------------

@pytest.mark.parametrize("status", ["ok", "unavailable"])
def test_check_probe_result_joins_the_snapshot(monkeypatch, capsys, status):
    # The probe's result is in the assessed snapshot whatever it says: nothing measured before it.
    import pinmon.probe
    result = make.box_probe() if status == "ok" else ProbeResult(time=1.0, status=status, reason="no CuPy")
    calls = []
    monkeypatch.setattr("pinmon.collect.live.LiveCollector", _FakeLiveCollector)
    monkeypatch.setattr(pinmon.probe, "run_probe", lambda kind, **kw: calls.append((kind, kw)) or result)
    main(["check", "--probe", "--json", "--window", "0.01", "--max-pinned", "8M"])
    out = json.loads(capsys.readouterr().out)
    assert ProbeResult.from_dict(out["snapshot"]["probe"]) == result
    kind, kw = calls[0]
    assert kind == "quick" and kw["max_pinned_bytes"] == 8 << 20 and kw["link_theoretical_bytes_per_s"] == 63.0e9


# --- replay and demo without a terminal ---------------------------------------------------------------

@pytest.mark.parametrize("argv", [["demo"], ["replay", "{rec}"]])
def test_replay_without_a_terminal_prints_the_last_snapshots_report(tmp_path, capsys, argv):
    from pinmon.recording import Recorder
    rec = tmp_path / "rec.jsonl"
    with Recorder(str(rec)) as r:
        for i in range(3):
            r.write(make.box_snapshot(i))
    code = main([a.format(rec=rec) for a in argv])  # capsys: stdout is not a terminal
    captured = capsys.readouterr()
    assert captured.out.startswith("pinmon check: ") and "Findings (" in captured.out
    # The exit code is the report's, as check gives it.
    status = captured.out.split()[2]
    assert code == {"OK": 0, "WARNING": 1, "CRITICAL": 2}[status]
    assert "\x1b" not in captured.out
    assert "not a terminal" in captured.err


class _Terminal(io.StringIO):
    """stdout as a terminal says it is one."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("term", ["dumb", None])
def test_on_a_dumb_terminal_the_demo_prints_the_report_and_says_why(monkeypatch, capsys, term):
    """TERM=dumb (or no TERM) cannot draw the full-screen app: the report instead, and one line on
    stderr that says why."""
    if term is None:
        monkeypatch.delenv("TERM", raising=False)
    else:
        monkeypatch.setenv("TERM", term)
    out = _Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    code = main(["demo"])
    err = capsys.readouterr().err
    assert out.getvalue().startswith("pinmon check: ") and code in (0, 1, 2)
    (line,) = [ln for ln in err.splitlines() if "TERM" in ln]
    assert line.startswith(f"pinmon: TERM is {term or 'unset'}, so no full-screen app: the report of the last of")


def test_no_app_here_says_why_only_where_the_app_cannot_draw():
    from pinmon.cli.common import no_app_here

    tty = _Terminal()
    assert no_app_here({"TERM": "xterm-256color"}, tty) is None
    assert no_app_here({"TERM": "dumb"}, tty) == "TERM is dumb, so no full-screen app"
    assert no_app_here({}, tty) == "TERM is unset, so no full-screen app"
    assert no_app_here({"TERM": "xterm"}, io.StringIO()) == "stdout is not a terminal"


def test_demo_into_a_file_has_no_terminal_escapes(tmp_path):
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        r = subprocess.run([sys.executable, "-m", "pinmon", "demo"], stdout=f, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    text = out.read_text()
    assert text.startswith("pinmon check: ") and "\x1b" not in text
    assert r.returncode == {"OK": 0, "WARNING": 1, "CRITICAL": 2}[text.split()[2]], r.stderr


# --- recordings cut short: every reader warns ---------------------------------------------------------

def _truncated_gzip(tmp_path):
    import gzip

    data = gzip.compress("".join(json.dumps(make.box_snapshot(i).to_dict()) + "\n" for i in range(5)).encode())
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(data[: len(data) - 40])
    return str(p)


@pytest.mark.parametrize("argv", [["replay", "{f}", "--json"], ["export", "--once", "--replay", "{f}"]])
def test_truncated_gzip_warns_in_replay_and_export(tmp_path, capsys, argv):
    f = _truncated_gzip(tmp_path)
    code = main([a.format(f=f) for a in argv])
    captured = capsys.readouterr()
    err = captured.err
    if argv[0] == "replay":  # the last snapshot's findings give the exit code, as check's do
        last = json.loads(captured.out.splitlines()[-1])
        ranks = {"info": 0, "warning": 1, "critical": 2}
        assert code == max((ranks[x["severity"]] for x in last["findings"]), default=0)
    else:
        assert code == 0
    assert "recording ends early" in err and "cut.jsonl.gz" in err and err.count("\n") == 1


# --- an option on the wrong side of the command word ----------------------------------------------------

@pytest.mark.parametrize("argv, code, words", [
    (["--json", "check"], 3, "--json is an option of pinmon check: put it after the command"),
    (["check", "--interval", "2"], 3, "--interval is an option of pinmon itself: put it before the command"),
    (["--json", "pinned"], 2, "--json is an option of pinmon pinned: put it after the command"),
    (["check", "--bogus"], 3, "unrecognized arguments: --bogus"),
])
def test_a_misplaced_option_is_told_where_it_belongs(capsys, argv, code, words):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == code
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_ctrl_c_in_checks_window_reports_what_was_counted(monkeypatch, capsys):
    from pinmon.cli.commands import check

    monkeypatch.setattr("pinmon.collect.live.LiveCollector", _FakeLiveCollector)

    def interrupted(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(check.time, "sleep", interrupted)
    code = main(["check", "--json", "--window", "30"])
    doc = json.loads(capsys.readouterr().out)
    assert code in (0, 1, 2) and doc["status"] in ("ok", "warning", "critical")
    assert any("cut to" in n and "Ctrl-C" in n for n in doc["snapshot"]["notices"])


def test_ctrl_c_elsewhere_says_so(monkeypatch, capsys):
    from pinmon.cli.commands import pinned

    def interrupted(pids):
        raise KeyboardInterrupt

    monkeypatch.setattr(pinned, "_live_snapshot", interrupted)
    assert main(["pinned", "--json"]) == 130
    out = capsys.readouterr()
    assert "interrupted" in out.err and json.loads(out.out)["reason"] == "interrupted (Ctrl-C)"


def test_a_bound_in_seconds_is_written_as_a_user_types_it(capsys):
    with pytest.raises(SystemExit):
        main(["record", "-o", "x.jsonl", "--duration", "1e9"])
    err = capsys.readouterr().err
    assert "to 31622400 (366 days)" in err and "e+07" not in err
