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

import pytest

from pinmon import cli
from pinmon.commands import MODULES
from tests.tui.fakes import make_snapshot

GOOD_LINE = json.dumps(make_snapshot(0).to_dict())


def code_of(cmd: str) -> int:
    return 3 if cmd == "check" else 2


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
    (["nosuchcommand"],),
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
    one_line(err)


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
}
CONFIG_COMMANDS = {
    "check": lambda cfg: ["check", "--config", cfg],
    "record": lambda cfg: ["--config", cfg, "record", "-o", "out.jsonl", "--duration", "0.1"],
    "replay": lambda cfg: ["--config", cfg, "replay", "rec.jsonl"],
    "demo": lambda cfg: ["--config", cfg, "demo"],
    "pinmon": lambda cfg: ["--config", cfg],
}
if "export" in MODULES:
    CONFIG_COMMANDS["export"] = lambda cfg: ["--config", cfg, "export", "--once", "--replay", "rec.jsonl"]


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
@pytest.mark.parametrize("what", ["missing", "directory"])
def test_unreadable_paths(cmd, what, tmp_path, capsys):
    path = tmp_path / "rec.jsonl"
    if what == "directory":
        path.mkdir()
    code, _out, err = run_main(FILE_COMMANDS[cmd](str(path)), capsys)
    assert code == code_of(cmd.split()[0])
    assert "rec.jsonl" in one_line(err)


@pytest.mark.parametrize("content", [
    GOOD_LINE.encode(), b"MemTotal: 5 kB\n", bytes(range(256)), b"hello world\nthis is not maps\n",
])
def test_maps_file_of_the_wrong_format(content, tmp_path, capsys):
    path = tmp_path / "maps.txt"
    path.write_bytes(content)
    before = frozen(path)
    code, _out, err = run_main(["pinned", "--maps-file", str(path)], capsys)
    assert code == 2 and "maps.txt" in one_line(err)
    assert frozen(path) == before


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
]


@pytest.mark.parametrize("argv, code, names", SUBPROCESS_ROWS, ids=lambda v: str(v))
def test_in_a_real_process(argv, code, names, tmp_path):
    for name in ("corrupt.jsonl.gz", "binary.jsonl"):
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
