"""The exporter's HTTP server under load it did not ask for: idle and slow connections, clients that
never read their response, floods of connections, a descriptor limit, HEAD, a failing app, and what
its Server header gives away. No test times a scrape: where a scrape must not wait for held
connections to time out, the server's count of connections dropped at their deadline (``expired``)
says whether it did, and the client's socket timeout is only a cap that turns a hang into a failure."""
import collections
import errno
import http.client
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from pinmon.export import ExportState, MetricsServer, build_registry
from pinmon.export import server as server_mod
from tests import factories as make
from tests.waiting import wait_until

from .helpers import recording_snapshots, write_recording

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def served():
    state = ExportState()
    state.add_snapshot(make.full_snapshot())
    # A request deadline far above the clients' timeouts: a scrape that had to wait for held
    # connections to be dropped fails on its own timeout, and one that did not leaves expired at 0.
    srv = MetricsServer(build_registry(state), "127.0.0.1", 0, timeout_s=60.0).start()
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
        _, body = scrape(served.url, timeout=10.0)
        assert b"pinmon_status" in body and served.expired == 0  # served beside them, none dropped for it
        assert threading.active_count() <= before  # the pool and the loop were already running
    finally:
        close_all(socks)


def test_half_sent_requests_hold_no_worker(served):
    socks = idle_sockets(served.port, served.workers * 3)
    try:
        for s in socks:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
        scrape(served.url, timeout=10.0)
        assert served.expired == 0  # no half-sent request had to time out to free a worker
    finally:
        close_all(socks)


def test_an_idle_connection_is_closed_after_the_timeout():
    state = ExportState()
    srv = MetricsServer(build_registry(state), "127.0.0.1", 0, timeout_s=0.3).start()
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
            assert s.recv(10) == b""  # closed by the server
        assert srv.expired == 1  # at its deadline, not on accepting it
    finally:
        srv.stop()


def test_the_oldest_waiting_connection_makes_room(served):
    first = socket.create_connection(("127.0.0.1", served.port), timeout=3)
    wait_until(lambda: served.counts()["waiting"] == 1, what="the first connection accepted")
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
        wait_until(lambda: served.accept_pauses >= 3, what="three pauses")
        # Every failed accept was followed by a pause, none retried at once (a spin would make
        # thousands of calls per pause).
        assert len(calls) <= served.accept_pauses + 1
        del served._accept_one  # descriptors are back: the same connection is taken and served
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        s.settimeout(3)
        assert s.recv(20).startswith(b"HTTP/1.0 200")
    finally:
        s.close()


def _accept_queue(port):
    """Connections the kernel holds for the listening socket on loopback ``port`` until it accepts
    them (the LISTEN row's rx_queue in /proc/net/tcp); None when no such socket listens."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return int(fields[4].split(":")[1], 16)
    return None


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
        wait_until(lambda: _accept_queue(port) == 0, what="the exporter through the kernel's accept queue")
        cpu0 = _cpu_seconds(p.pid)
        time.sleep(1.0)  # not a wait: a second passes, for the CPU time the idle exporter spends in it
        assert _cpu_seconds(p.pid) - cpu0 < 0.3  # not spinning on EMFILE
        for _ in range(3):
            # Below the exporter's 5 s request deadline: a scrape queued behind the idle connections
            # until they were dropped would fail here.
            scrape(url, timeout=3.0)
    finally:
        close_all(socks)
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# --- large responses, clients that do not read them, floods of connections -----------------------

GET = b"GET /metrics HTTP/1.0\r\n\r\n"


class _Large:
    """A collector whose scrape is ``nbytes`` long (in its HELP text): far more than socket buffers hold."""

    def __init__(self, nbytes):
        self.doc = "x" * nbytes

    def collect(self):
        family = GaugeMetricFamily("large", self.doc)
        family.add_metric([], 1)
        yield family


def large_server(nbytes=8 << 20, **kw):
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Large(nbytes))
    return MetricsServer(registry, "127.0.0.1", 0, **kw).start()


def requesting_socket(port, request=GET):
    """A client that sends a request and then reads nothing: a small receive buffer, so the
    response cannot all land in it."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    s.sendall(request)
    return s


def test_clients_that_never_read_a_large_response_hold_no_worker():
    # Deadlines far longer than the scrapes may take: only writing without a worker lets them pass.
    srv = large_server(timeout_s=30.0, response_timeout_s=30.0)
    socks = []
    try:
        socks = [requesting_socket(srv.port) for _ in range(srv.workers * 4)]
        # Every request taken (served, or dropped from its peer's full queue) before the scrapes: a
        # scrape that came first would share the queue with them, which another test covers.
        wait_until(lambda: (lambda c: c["served"] + c["dropped_queue_full"] >= len(socks) and not c["queued_now"])(
            srv.counts()), what="the requests of the clients that never read taken")
        for _ in range(3):
            _, body = scrape(srv.url, timeout=10.0)
            assert len(body) > 8 << 20
    finally:
        close_all(socks)
        srv.stop()


def test_responses_not_taken_are_bounded_in_memory():
    srv = large_server(timeout_s=30.0, response_timeout_s=30.0, max_pending_bytes=20 << 20)
    socks = []
    try:
        socks = [requesting_socket(srv.port) for _ in range(8)]  # 64 MiB of responses nobody reads
        wait_until(lambda: srv.counts()["served"] == 8, what="the eight responses rendered")
        wait_until(lambda: srv.counts()["dropped_unsent"] >= 1, what="a response dropped for room")
        assert 0 < srv.pending_bytes_peak <= 20 << 20
        scrape(srv.url, timeout=10.0)
    finally:
        close_all(socks)
        srv.stop()


def test_a_client_reading_slowly_is_cut_at_one_deadline_for_the_whole_response():
    srv = large_server(4 << 20, response_timeout_s=0.5)
    s = requesting_socket(srv.port)
    got, t0 = 0, time.monotonic()
    try:
        while time.monotonic() - t0 < 20:  # at 50 KB/s the whole response would take 80 s
            try:
                chunk = s.recv(1024)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += len(chunk)
            time.sleep(0.02)  # not a wait: paces the reader at about 50 KB/s
        else:
            pytest.fail("a reader taking a KiB now and then kept its response going for 20 s")
        assert got < 4 << 20 and srv.expired == 1  # cut at its response deadline
    finally:
        s.close()
        srv.stop()


def test_a_scrape_behind_and_before_a_flood_of_idle_connections_is_served():
    # The connections queue in the kernel before the server runs: its first turns accept a flood in
    # which one request has arrived. Idle ones must make room, not it.
    srv = MetricsServer(build_registry(ExportState()), "127.0.0.1", 0, max_waiting=8)
    socks = idle_sockets(srv.port, 20)
    try:
        scraper = requesting_socket(srv.port)
        socks += [scraper] + idle_sockets(srv.port, 60)
        srv.start()
        assert scraper.recv(20).startswith(b"HTTP/1.0 200")
    finally:
        close_all(socks)
        srv.stop()


def test_a_waiting_connection_is_read_once_more_before_it_is_closed_for_room():
    # The loop's steps run by hand, so the order is the bad one for certain: a connection accepted
    # before its request arrived, then room needed before the loop looked at it again.
    import select
    import selectors

    srv = MetricsServer(build_registry(ExportState()), "127.0.0.1", 0, max_waiting=4)
    listening = srv.httpd.socket
    listening.setblocking(False)
    sel = selectors.DefaultSelector()
    first = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    rest = []
    try:
        assert select.select([listening], [], [], 5)[0]  # in the kernel's accept queue
        srv._accept(sel)  # accepted; nothing to read yet
        assert srv.counts()["waiting"] == 1 and srv.counts()["queued"] == 0
        first.sendall(GET)
        assert sel.select(5)  # delivered over loopback, not yet read
        rest = idle_sockets(srv.port, 8)
        assert select.select([listening], [], [], 5)[0]
        srv._accept(sel)  # needs room four times
        counts = srv.counts()
        # first's request was read and queued, not dropped; four idle connections made room.
        assert counts["queued"] == 1 and counts["queued_now"] == 1 and counts["dropped_for_room"] == 4
        assert counts["waiting"] == srv.max_waiting
    finally:
        first.close()
        close_all(rest)
        sel.close()
        srv.stop()


def _flood(port, stop, opened, hold=400, send=b""):
    held = collections.deque()
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
            if send:
                s.sendall(send)
            held.append(s)
            opened[0] += 1
        except OSError:
            pass
        while len(held) > hold:
            held.popleft().close()
    close_all(held)


@pytest.mark.parametrize("send", [b"", b"GET /metrics HTTP/1.0\r\n"], ids=["idle", "half-sent"])
def test_scrapes_get_through_a_flood_of_new_connections(send):
    srv = MetricsServer(build_registry(ExportState()), "127.0.0.1", 0, max_waiting=32).start()
    stop, opened = threading.Event(), [0]
    floods = [threading.Thread(target=_flood, args=(srv.port, stop, opened, 400, send)) for _ in range(2)]
    for t in floods:
        t.start()
    try:
        scrapes, give_up = 0, time.monotonic() + 30
        # Scrapes while the waiting room is turned over ten times (seconds here; time is only a cap).
        while (scrapes < 10 or opened[0] < 10 * srv.max_waiting) and time.monotonic() < give_up:
            scrape(srv.url, timeout=5.0)
            scrapes += 1
        assert opened[0] >= 10 * srv.max_waiting, "the flood did not get going"
    finally:
        stop.set()
        for t in floods:
            t.join()
        srv.stop()


class _Slow:
    """A collector that takes 10 ms, as a real scrape of a box with many GPUs can."""

    def collect(self):
        time.sleep(0.01)  # not a wait: the render's own cost
        family = GaugeMetricFamily("slow", "rendered slowly")
        family.add_metric([], 1)
        yield family


def test_a_scrape_after_a_burst_of_requests_nobody_reads_is_served():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Slow())
    srv = MetricsServer(registry, "127.0.0.1", 0).start()
    socks = []
    try:
        socks = [requesting_socket(srv.port) for _ in range(100)]  # about a second of rendering queued
        _, body = scrape(srv.url, timeout=10.0)
        assert b"slow 1.0" in body
    finally:
        close_all(socks)
        srv.stop()


class _Failing:
    def collect(self):
        raise RuntimeError("a defect")


def test_a_failing_app_answers_500_and_writes_no_traceback(capfd):
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Failing())
    srv = MetricsServer(registry, "127.0.0.1", 0).start()
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            scrape(srv.url)
        assert e.value.code == 500 and e.value.headers["Server"] == "pinmon"
    finally:
        srv.stop()
    assert capfd.readouterr().err == ""
