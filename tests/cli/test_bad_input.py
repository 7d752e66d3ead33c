"""Bad input, every command: one line on stderr naming the problem, the documented exit code (2; 3 for
``check``), no traceback, and the user's file left exactly as it was (content and mtime).

Most rows run in-process through ``cli.main`` (fast); a representative subset runs as a real
``python -m pinmon`` subprocess, where a traceback would really reach the terminal.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading

import pytest

from pinmon import cli
from pinmon.cli.commands import MODULES
from tests import factories as make

pytestmark = pytest.mark.hardening

GOOD = make.box_snapshot(0).to_dict()
GOOD_LINE = json.dumps(GOOD)


def _with(**changes) -> bytes:
    return (json.dumps({**GOOD, **changes}) + "\n").encode()


def code_of(cmd: str) -> int:
    return 3 if cmd in ("check", "attach") else 2


# --- bad arguments ---------------------------------------------------------------------------------

BAD_ARGS = [
    ([], "--bogus"), ([], "--interval", "0"), ([], "--interval", "nan"), ([], "--max-pinned", "lots"),
    ([], "--probe-every", "-1"),
    (["check"], "--window", "abc"), (["check"], "--max-pinned", "-3G"), (["check"], "extra"),
    (["pinned"], "--pid", "0"), (["pinned"], "--pid", "x"),
    (["record"],), (["record"], "-o", "x.jsonl", "--duration", "-2"),
    (["replay"],), (["replay"], "f.jsonl", "--speed", "0"),
    (["demo"], "--speed", "fast"),
    (["probe"], "--gpu", "minus-one"), (["probe"], "--max-pinned", "1Q"),
    (["export"], "--listen", "nohost:notaport"), (["export"], "--top-processes", "-1"),
    (["export"], "--speed", "2"),
    (["trace"],),
    (["attach"], "0"), (["attach"], "x"), (["attach"], "--seconds", "0"), (["attach"], "--seconds", "1e9"),
    (["nosuchcommand"],),
    # out of range: the same caps as the config file's (pinmon.limits)
    ([], "--interval", "1e308"), ([], "--interval", "0.001"), ([], "--probe-every", "1e308"),
    ([], "--max-pinned", "1e300T"), ([], "--max-pinned", "-5M"),
    (["check"], "--window", "1e9"), (["check"], "--window", "nan"), (["check"], "--max-pinned", "-5M"),
    (["check"], "--max-pinned", "1e300T"),
    (["pinned"], "--pid", str(1 << 40)),
    (["record"], "-o", "x.jsonl", "--interval", "1e308"), (["record"], "-o", "x.jsonl", "--duration", "1e12"),
    (["replay"], "f.jsonl", "--speed", "1e9"), (["demo"], "--speed", "0"),
    (["export"], "--interval", "1e9"), (["export"], "--listen", "a" * 300 + ":9477"),
    (["export"], "--listen", "bad\x00host:9477"), (["export"], "--max-pinned", "-5M"),
    (["probe"], "--max-pinned", "-5M"),
]

# A bad global option before the command word: the command's exit code all the same.
BAD_BEFORE_THE_COMMAND = [
    ["--interval", "-1", "check"], ["--interval", "0", "check"], ["--interval", "abc", "check"],
    ["--interval", "1e9", "check"], ["--max-pinned", "-5M", "check"], ["--bogus", "check"],
    ["--interval", "-1", "pinned"], ["--max-pinned", "1e300T", "record", "-o", "x.jsonl"],
]


def run_main(argv, capsys):
    try:
        code = cli.main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("row", BAD_ARGS, ids=lambda r: " ".join(r[0] + list(r[1:])) or "pinmon")
def test_bad_arguments(row, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prefix, *rest = row
    cmd = prefix[0] if prefix else ""
    if cmd and cmd not in ("check", "pinned", "record", "replay", "demo", "nosuchcommand") \
            and cmd not in MODULES:
        pytest.skip(f"{cmd} is not a command here")
    argv = (prefix + rest) if cmd else rest
    code, _out, err = run_main(argv, capsys)
    assert code == code_of(cmd), (argv, code, err)
    assert "expected one argument" not in one_line(err)
    assert not os.listdir(tmp_path)  # not even an empty recording


@pytest.mark.parametrize("argv", BAD_BEFORE_THE_COMMAND, ids=" ".join)
def test_bad_global_option_before_the_command(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _out, err = run_main(argv, capsys)
    command = next(a for a in argv if a in ("check", "pinned", "record"))
    assert code == code_of(command), (argv, code, err)
    one_line(err)
    assert not os.listdir(tmp_path)


def test_pinned_pid_of_no_process(capsys):
    with open("/proc/sys/kernel/pid_max") as f:
        absent = int(f.read())  # every pid is below pid_max
    code, _out, err = run_main(["pinned", "--pid", str(absent)], capsys)
    assert code == 2 and "no such process" in one_line(err)


def test_every_command_is_in_the_table():
    tabled = {r[0][0] for r in BAD_ARGS if r[0]}
    assert set(MODULES) | {"check", "pinned", "record", "replay", "demo"} <= tabled


# --- bad config files ------------------------------------------------------------------------------

BAD_CONFIGS = {
    "syntax": b"interval = = 1\n",
    "wrong type": b'interval = "fast"\n',
    "unknown key": b"intervall = 1.0\n",
    "unknown threshold": b"[thresholds]\npinned_ram_warn = 0.3\n",
    "bad rule": b'disabled_rules = ["no-such-rule"]\n',
    "out of range": b"[thresholds]\npinned_ram_warning_fraction = 1.5\n",
    "binary": b"\x00\xff\xfe\x89PNG",
    "empty table type": b"thresholds = 3\n",
    "nested arrays": b"interval = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "nested tables": b"x = " + b"{a = " * 5_000 + b"1" + b"}" * 5_000 + b"\n",
    "size 1e300T": b'[thresholds]\ngrowth_min_bytes = "1e300T"\n',
    "interval 1e308": b"interval = 1e308\n",
    "interval too short": b"interval = 0.0001\n",
    "too large": b"# " + b"x" * (2 << 20) + b"\n",
}
CONFIG_COMMANDS = {
    "check": lambda cfg: ["check", "--config", cfg],
    "record": lambda cfg: ["--config", cfg, "record", "-o", "out.jsonl", "--duration", "0.1"],
    "replay": lambda cfg: ["--config", cfg, "replay", "rec.jsonl"],
    "demo": lambda cfg: ["--config", cfg, "demo"],
    "pinmon": lambda cfg: ["--config", cfg],
    "pinned": lambda cfg: ["--config", cfg, "pinned"],
}
if "export" in MODULES:
    CONFIG_COMMANDS["export"] = lambda cfg: ["--config", cfg, "export", "--once", "--replay", "rec.jsonl"]
if "probe" in MODULES:
    CONFIG_COMMANDS["probe"] = lambda cfg: ["--config", cfg, "probe"]
if "attach" in MODULES:
    CONFIG_COMMANDS["attach"] = lambda cfg: ["attach", "--config", cfg]


def frozen(path):
    st = os.stat(path)
    with open(path, "rb") as f:
        return f.read(), st.st_mtime_ns


@pytest.mark.parametrize("cmd", sorted(CONFIG_COMMANDS))
@pytest.mark.parametrize("kind", sorted(BAD_CONFIGS))
def test_bad_config(cmd, kind, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rec.jsonl").write_text(GOOD_LINE + "\n")
    cfg = tmp_path / "config.toml"
    cfg.write_bytes(BAD_CONFIGS[kind])
    before = frozen(cfg)
    code, _out, err = run_main(CONFIG_COMMANDS[cmd](str(cfg)), capsys)
    assert code == code_of(cmd), err
    assert str(cfg) in one_line(err)
    assert frozen(cfg) == before
    assert not (tmp_path / "out.jsonl").exists()


@pytest.fixture
def unblock_fifo_later():
    """Open each FIFO given for writing after a few seconds and close it again, so a reader that
    blocked on it wakes up and the test fails instead of hanging."""
    done = threading.Event()
    fifos = []

    def worker():
        if not done.wait(5):
            for f in fifos:
                os.close(os.open(f, os.O_RDWR | os.O_NONBLOCK))

    t = threading.Thread(target=worker, daemon=True)
    t.start()
    yield fifos.append
    done.set()
    t.join()


def special_file(tmp_path, name: str, kind: str, unblock) -> str:
    """``name`` in ``tmp_path`` as a FIFO, a link to /dev/zero, or a directory."""
    path = tmp_path / name
    if kind == "fifo":
        os.mkfifo(path)
        unblock(str(path))
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    return str(path)


@pytest.mark.parametrize("cmd", sorted(CONFIG_COMMANDS))
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_config_that_is_not_a_regular_file(cmd, kind, tmp_path, monkeypatch, capsys, unblock_fifo_later):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rec.jsonl").write_text(GOOD_LINE + "\n")
    cfg = special_file(tmp_path, "config.toml", kind, unblock_fifo_later)
    code, _out, err = run_main(CONFIG_COMMANDS[cmd](cfg), capsys)
    assert code == code_of(cmd), err
    assert "config.toml: is a" in one_line(err) and "not a regular file" in err


# --- bad recordings, snapshots and maps files ------------------------------------------------------

def _gzip_corrupt() -> bytes:
    data = bytearray(gzip.compress((GOOD_LINE + "\n").encode() * 3))
    data[len(data) // 2] ^= 0xFF
    return bytes(data)


BAD_FILES = {
    "empty.jsonl": b"",
    "blank.jsonl": b"\n\n  \n",
    "binary.jsonl": bytes(range(256)) * 4,
    "truncated.jsonl": GOOD_LINE[: len(GOOD_LINE) // 2].encode(),
    "not-a-snapshot.jsonl": b'{"schema": "something/else", "time": 1}\n',
    "wrong-types.jsonl": GOOD_LINE.replace('"time": ', '"time": "yesterday", "x": ').encode(),
    "list.json": b"[1, 2, 3]\n",
    "corrupt.jsonl.gz": _gzip_corrupt(),
    "not-gzip.jsonl.gz": (GOOD_LINE + "\n").encode(),
    "cut.jsonl.gz": gzip.compress((GOOD_LINE + "\n").encode())[:20],
    "latin1.jsonl": "caf\xe9 \xff".encode("latin-1"),
    "nested.json": b"[" * 200_000,
    "nested-object.jsonl": b'{"a": ' * 100_000 + b"1" + b"}" * 100_000 + b"\n",
    "time-1e300.json": _with(time=1e300),
    "time-1e308.json": _with(time=1e308),
    "time-nan.json": GOOD_LINE.replace('"time": ', '"time": NaN, "x": ', 1).encode(),
    "time-inf.jsonl": GOOD_LINE.replace('"time": ', '"time": Infinity, "x": ', 1).encode(),
    "negative-ram.json": _with(host={**GOOD["host"], "mem_total_bytes": -5}),
    "huge-size.json": _with(host={**GOOD["host"], "pinned_bytes_est": 10 ** 30}),
    "gpus-10000.jsonl": _with(gpus=[{"index": 0}] * 10_000),
    "processes-70000.jsonl": _with(processes=[{"pid": 1}] * 70_000),
    # 2 MiB of gzip: one 2 GiB line, and 2 Gi blank lines (gzip members read as one stream).
    "bomb-one-line.jsonl.gz": gzip.compress(b"x" * (1 << 20), 9) * 2048,
    "bomb-blank-lines.jsonl.gz": gzip.compress(b"\n" * (1 << 20), 9) * 2048,
}
FILE_COMMANDS = {
    "replay": lambda f: ["replay", f],
    "replay --json": lambda f: ["replay", f, "--json"],
    "check --snapshot": lambda f: ["check", "--snapshot", f],
}
if "export" in MODULES:
    FILE_COMMANDS["export --replay"] = lambda f: ["export", "--once", "--replay", f]


@pytest.mark.parametrize("cmd", sorted(FILE_COMMANDS))
@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_recording_or_snapshot(cmd, name, tmp_path, capsys):
    path = tmp_path / name
    path.write_bytes(BAD_FILES[name])
    before = frozen(path)
    code, _out, err = run_main(FILE_COMMANDS[cmd](str(path)), capsys)
    assert code == code_of(cmd.split()[0]), err
    assert name in one_line(err)
    assert frozen(path) == before


@pytest.mark.parametrize("cmd", sorted(FILE_COMMANDS))
@pytest.mark.parametrize("what", ["missing", "directory", "fifo", "dev-zero"])
def test_unreadable_paths(cmd, what, tmp_path, capsys, unblock_fifo_later):
    path = str(tmp_path / "rec.jsonl")
    if what != "missing":
        path = special_file(tmp_path, "rec.jsonl", what, unblock_fifo_later)
    code, _out, err = run_main(FILE_COMMANDS[cmd](path), capsys)
    assert code == code_of(cmd.split()[0])
    line = one_line(err)
    assert "rec.jsonl" in line
    if what in ("fifo", "dev-zero"):
        assert "not a regular file" in line


@pytest.mark.parametrize("cmd", sorted(FILE_COMMANDS))
def test_json_output_of_a_bad_file_is_json(cmd, tmp_path, capsys):
    if "json" not in cmd and not cmd.startswith("check"):
        pytest.skip("no --json")
    path = tmp_path / "time-nan.json"
    path.write_bytes(BAD_FILES["time-nan.json"])
    _code, out, err = run_main(FILE_COMMANDS[cmd](str(path)) + (["--json"] if cmd.startswith("check") else []),
                              capsys)
    doc = json.loads(out)
    assert doc["status"] in ("unknown", "error") and doc["reason"] in one_line(err)
    assert "NaN" not in out


MAPS_OF_THE_WRONG_FORMAT = {
    "snapshot": lambda: GOOD_LINE.encode(), "meminfo": lambda: b"MemTotal: 5 kB\n",
    "binary": lambda: bytes(range(256)), "prose": lambda: b"hello world\nthis is not maps\n",
    "empty": lambda: b"", "blank": lambda: b"\n\n",
    "5000-digit address": lambda: b"f" * 5000 + b"-" + b"f" * 5001 + b" rw-s 0 00:01 1 /dev/zero (deleted)\n",
    "over 64 MiB": lambda: b"7f00-7f01 rw-s 0 0:0 1 /dev/zero (deleted)\n" * 1_600_000,
}


@pytest.mark.parametrize("kind", sorted(MAPS_OF_THE_WRONG_FORMAT))
def test_maps_file_of_the_wrong_format(kind, tmp_path, capsys):
    path = tmp_path / "maps.txt"
    path.write_bytes(MAPS_OF_THE_WRONG_FORMAT[kind]())
    before = frozen(path)
    code, _out, err = run_main(["pinned", "--maps-file", str(path)], capsys)
    assert code == 2 and "maps.txt" in one_line(err)
    assert frozen(path) == before


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_maps_file_that_is_not_a_regular_file(kind, tmp_path, capsys, unblock_fifo_later):
    path = special_file(tmp_path, "maps.txt", kind, unblock_fifo_later)
    code, _out, err = run_main(["pinned", "--maps-file", path], capsys)
    assert code == 2 and "maps.txt: is a" in one_line(err)


def test_record_never_overwrites(tmp_path, capsys):
    path = tmp_path / "mine.jsonl"
    path.write_text("precious\n")
    before = frozen(path)
    code, _out, err = run_main(["record", "-o", str(path), "--duration", "0.1"], capsys)
    assert code == 2 and "mine.jsonl" in one_line(err) and frozen(path) == before


# --- the same through a real process ----------------------------------------------------------------

SUBPROCESS_ROWS = [
    (["check", "--window", "abc"], 3, None),
    (["replay", "{dir}/corrupt.jsonl.gz"], 2, "corrupt.jsonl.gz"),
    (["check", "--snapshot", "{dir}/binary.jsonl"], 3, "binary.jsonl"),
    (["--config", "{dir}/bad.toml", "demo"], 2, "bad.toml"),
    (["pinned", "--maps-file", "{dir}/binary.jsonl"], 2, "binary.jsonl"),
    (["record", "-o", "{dir}/binary.jsonl", "--duration", "0.1"], 2, "binary.jsonl"),
    (["--config", "{dir}/bad.toml", "trace", "--", sys.executable, "-c", "pass"], 2, "bad.toml"),
    (["--config", "{dir}/bad.toml", "pinned"], 2, "bad.toml"),
    (["--interval", "-1", "check"], 3, None),
    (["check", "--snapshot", "{dir}/time-1e300.json"], 3, "time-1e300.json"),
    (["replay", "{dir}/time-1e300.json"], 2, "time-1e300.json"),
    (["replay", "{dir}/nested.json"], 2, "nested.json"),
    (["export", "--once", "--replay", "{dir}/nested.json"], 2, "nested.json"),
]


@pytest.mark.parametrize("argv, code, names", SUBPROCESS_ROWS, ids=lambda v: str(v))
def test_in_a_real_process(argv, code, names, tmp_path):
    for name in ("corrupt.jsonl.gz", "binary.jsonl", "time-1e300.json", "nested.json"):
        (tmp_path / name).write_bytes(BAD_FILES[name])
    (tmp_path / "bad.toml").write_bytes(BAD_CONFIGS["syntax"])
    before = {p: frozen(tmp_path / p) for p in os.listdir(tmp_path)}
    argv = [a.replace("{dir}", str(tmp_path)) for a in argv]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "pinmon", *argv], capture_output=True, text=True,
                       timeout=60, env=env, cwd=str(tmp_path))
    assert r.returncode == code, r.stderr
    line = one_line(r.stderr)
    if names:
        assert names in line
    assert {p: frozen(tmp_path / p) for p in before} == before
