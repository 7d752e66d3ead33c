"""The exporter's HTTP server under load it did not ask for: idle and slow connections, a descriptor
limit, HEAD, and what its Server header gives away."""
import errno
import http.client
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from pinmon.export import ExportState, MetricsServer, build_registry
from pinmon.export import server as server_mod

from tests import factories as make

from .helpers import recording_snapshots, write_recording

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def served():
    state = ExportState()
    state.add_snapshot(make.full_snapshot())
    srv = MetricsServer(build_registry(state), "127.0.0.1", 0, timeout_s=2.0).start()
    yield srv
    srv.stop()


def scrape(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        assert r.status == 200
        return r.headers, r.read()


def idle_sockets(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        socks.append(s)
    return socks


def close_all(socks):
    for s in socks:
        s.close()


def test_get_serves_metrics_and_hides_the_python_version(served):
    headers, body = scrape(served.url)
    assert b"pinmon_host_memory_total_bytes" in body
    assert headers["Server"] == "pinmon" and "Python" not in str(headers)


def test_head_is_get_without_a_body(served):
    _, body = scrape(served.url)
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=2)
    conn.request("HEAD", "/metrics")
    r = conn.getresponse()
    assert r.status == 200 and r.read() == b""
    assert int(r.headers["Content-Length"]) == len(body)
    assert r.headers["Content-Type"].startswith("text/plain") and r.headers["Server"] == "pinmon"
    conn.close()


def test_a_bad_request_line_gets_an_error_without_the_python_version(served):
    with socket.create_connection(("127.0.0.1", served.port), timeout=2) as s:
        s.sendall(b"GET /metrics with spaces HTTP/1.0\r\n\r\n")
        reply = s.recv(4096).decode("latin-1")
    assert reply.startswith("HTTP/1.0 400") and "Server: pinmon\r\n" in reply and "Python" not in reply


def test_scrapes_go_on_while_many_idle_connections_are_held(served):
    before = threading.active_count()
    socks = idle_sockets(served.port, server_mod.MAX_WAITING * 3)
    try:
        t0 = time.monotonic()
        _, body = scrape(served.url, timeout=3.0)
        assert b"pinmon_status" in body and time.monotonic() - t0 < 2.0
        assert threading.active_count() <= before  # the pool and the loop were already running
    finally:
        close_all(socks)


def test_half_sent_requests_hold_no_worker(served):
    socks = idle_sockets(served.port, served.workers * 3)
    try:
        for s in socks:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
        time.sleep(0.1)
        t0 = time.monotonic()
        scrape(served.url, timeout=3.0)
        assert time.monotonic() - t0 < 1.0
    finally:
        close_all(socks)


def test_an_idle_connection_is_closed_after_the_timeout():
    state = ExportState()
    srv = MetricsServer(build_registry(state), "127.0.0.1", 0, timeout_s=0.3).start()
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=3) as s:
            t0 = time.monotonic()
            assert s.recv(10) == b""  # closed by the server
            assert 0.2 < time.monotonic() - t0 < 2.0
    finally:
        srv.stop()


def test_the_oldest_waiting_connection_makes_room(served):
    first = socket.create_connection(("127.0.0.1", served.port), timeout=3)
    time.sleep(0.05)
    rest = idle_sockets(served.port, served.max_waiting)
    try:
        assert first.recv(10) == b""  # the longest-waiting one was closed to take a new one
    finally:
        first.close()
        close_all(rest)


def test_out_of_descriptors_backs_off_instead_of_spinning(served):
    calls = []

    def accept_fails():
        calls.append(time.monotonic())
        raise OSError(errno.EMFILE, "Too many open files")

    served._accept_one = accept_fails
    s = socket.create_connection(("127.0.0.1", served.port))  # keeps the listening socket readable
    try:
        time.sleep(1.0)
        assert 1 <= len(calls) <= 2 / server_mod.ACCEPT_BACKOFF_S and served.accept_pauses >= 1
        del served._accept_one  # descriptors are back: the same connection is taken and served
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        s.settimeout(3)
        assert s.recv(20).startswith(b"HTTP/1.0 200")
    finally:
        s.close()


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_under_a_low_file_limit_idle_connections_neither_block_scrapes_nor_spin(tmp_path):
    rec = write_recording(tmp_path / "rec.jsonl.gz", recording_snapshots())

    def limit_files():
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))

    p = subprocess.Popen([sys.executable, "-m", "pinmon", "export", "--replay", rec, "--listen", "127.0.0.1:0"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=limit_files)
    socks = []
    try:
        line = p.stderr.readline()
        assert "serving" in line, line + p.stderr.read()
        url = line.split("serving ", 1)[1].split()[0]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        socks = idle_sockets(port, 100)  # more than the exporter has descriptors for
        time.sleep(0.5)
        cpu0 = _cpu_seconds(p.pid)
        time.sleep(1.0)
        assert _cpu_seconds(p.pid) - cpu0 < 0.3  # not spinning on EMFILE
        t0 = time.monotonic()
        for _ in range(3):
            scrape(url, timeout=3.0)
        assert time.monotonic() - t0 < 6.0
    finally:
        close_all(socks)
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
