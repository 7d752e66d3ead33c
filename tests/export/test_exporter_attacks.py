"""The attacks on ``pinmon export`` that an ordinary user can make while root runs it, run against the
real command: a process named with a 128 KiB argv[0] and terminal escapes, clients that send a
request and never read the answer, and a flood of idle connections, all at once. Prometheus's scrapes
must all be answered, with no escape in them, and the exporter must write no traceback.

Deadlines are pass/fail limits on whole scrapes, many times what a scrape takes, so a loaded
machine does not fail them.
"""
from __future__ import annotations

import collections
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request

import pytest

from pinmon.units import GIB
from tests import factories as make
from tests.export.helpers import write_recording
from tests.waiting import wait_until

pytestmark = pytest.mark.hardening

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ESCAPES = "\x1b]0;PWNED\x07\x1b[2J"
HOSTILE = "A" * (128 * 1024) + ESCAPES


@pytest.fixture(scope="module")
def hostile_recording(tmp_path_factory):
    """Ten traced processes named ``HOSTILE`` (plus a number): each one fires pageable-bulk-copies,
    so the name reaches the process series and the findings' subjects."""
    procs = tuple(make.process(100 + i, f"{HOSTILE}{i}", user="mallory\x1b[31m", pinned_bytes=(i + 1) * GIB,
                               source="traced", pageable_bytes_per_s=2e9) for i in range(10))
    snaps = [make.full_snapshot(time=2000.0 + i, processes=procs) for i in range(2)]
    return write_recording(tmp_path_factory.mktemp("rec") / "hostile.jsonl", snaps)


def terminal_controls(data: bytes) -> set[int]:
    """Bytes a terminal acts on, other than the line feed: C0 controls, DEL and UTF-8's C1 controls."""
    text = data.decode("utf-8")
    return {ord(ch) for ch in text if ch != "\n" and not ch.isprintable()}


def test_export_once_writes_no_escape_and_a_bounded_scrape(hostile_recording):
    r = subprocess.run([sys.executable, "-m", "pinmon", "export", "--replay", hostile_recording, "--once"],
                       cwd=ROOT, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert terminal_controls(r.stdout) == set() and terminal_controls(r.stderr) == set()
    assert b"pid 100 (AAAA" in r.stdout  # the finding on the hostile process is there, cut
    assert len(r.stdout) < 64 * 1024  # 10 processes with 128 KiB names: 1.3 MB unbounded


def _scrape(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        return resp.read()


def _never_reading(port: int) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    return s


def _idle_flood(port: int, stop: threading.Event, opened: list) -> None:
    held: collections.deque = collections.deque()
    while not stop.is_set():
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=1))
            opened[0] += 1
        except OSError:
            pass
        while len(held) > 600:
            held.popleft().close()
    for s in held:
        s.close()


def test_scrapes_are_served_through_long_names_non_readers_and_an_idle_flood(hostile_recording):
    p = subprocess.Popen([sys.executable, "-m", "pinmon", "export", "--replay", hostile_recording,
                          "--listen", "127.0.0.1:0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    readers, stop, opened = [], threading.Event(), [0]
    flood = threading.Thread(target=_idle_flood, args=(0, stop, opened))
    try:
        line = p.stderr.readline().decode()
        assert "serving" in line, line + p.stderr.read().decode()
        url = line.split("serving ", 1)[1].split()[0]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        wait_until(lambda: b"pinmon_finding{" in _scrape(url), interval_s=0.1, what="the first findings")
        readers = [_never_reading(port) for _ in range(40)]
        flood = threading.Thread(target=_idle_flood, args=(port, stop, opened))
        flood.start()
        wait_until(lambda: opened[0] >= 100, what="the flood to get going")
        for _ in range(8):
            body = _scrape(url)
            assert terminal_controls(body) == set() and b"pinmon_finding{" in body
            assert len(body) < 64 * 1024
        assert opened[0] > 0
    finally:
        stop.set()
        if flood.is_alive():
            flood.join()
        for s in readers:
            s.close()
        p.terminate()
        try:
            _, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
    assert b"Traceback" not in err, err.decode(errors="replace")[-2000:]
    assert p.returncode in (0, -15)


# --- the exporter's own lines on stderr ---------------------------------------------------------------

def test_an_error_quoting_a_hostile_text_is_printed_printable(capsys):
    from pinmon.cli.commands import export as export_cmd

    export_cmd._report("snapshot", OSError(f"cannot read /tmp/pinmon-1000/{ESCAPES}.json"))
    err = capsys.readouterr().err
    assert terminal_controls(err.encode()) == set() and "\\x1b]0;PWNED" in err


def test_a_notice_quoting_a_hostile_file_name_is_printed_printable(tmp_path):
    from tests.export.helpers import recording_snapshots

    path = write_recording(tmp_path / f"r{ESCAPES}.jsonl", recording_snapshots())
    with open(path, "a") as f:
        f.write("not json\n")  # the replay ends early, with a notice naming the file
    p = subprocess.Popen([sys.executable, "-m", "pinmon", "export", "--replay", path, "--speed", "100",
                          "--listen", "127.0.0.1:0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = [p.stderr.readline(), p.stderr.readline()]
    finally:
        p.terminate()
        p.communicate(timeout=10)
    assert b"recording ends early" in lines[1], lines
    assert terminal_controls(b"".join(lines)) == set()


def test_a_recording_whose_keys_hold_escapes_is_refused_in_one_printable_line(tmp_path):
    line = {"schema": "pinmon.snapshot/1", "time": 1.0, "host": {"hostname": "h"},
            "gpus": [{"index": 0, "pcie": {"counter_deltas": {f"x{ESCAPES}": "not a number"}}}]}
    path = tmp_path / "evil.jsonl"
    path.write_text(json.dumps(line) + "\n")
    r = subprocess.run([sys.executable, "-m", "pinmon", "export", "--replay", str(path), "--once"],
                       cwd=ROOT, capture_output=True, timeout=60)
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.count(b"\n") == 1 and b"expected an integer" in r.stderr
    assert terminal_controls(r.stderr) == set()
