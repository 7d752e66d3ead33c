"""The exporter's queue of complete requests under a flood: shared between peers (the client's user on
this machine, else its address), newest first within a peer, its oldest dropped; requests whose
client already left are not rendered. The flood comes from another user (a child that drops root's
privileges), as from a local user without them."""
import os
import select
import socket
import time

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from pinmon.export import ExportState, MetricsServer, build_registry, peers
from pinmon.export.request_queue import FairQueue
from tests.waiting import wait_until

from .test_server import GET, close_all, scrape

OTHER_UID = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a second user needs root to become it")


# --- the queue ---------------------------------------------------------------------------------------

def test_within_a_peer_the_newest_goes_first_and_its_oldest_is_dropped():
    q = FairQueue(max_total=100, max_per_peer=3)
    dropped = [d for i in range(5) for d in q.put("flood", i)]
    assert dropped == [0, 1] and len(q) == 3
    assert [q.get(0) for _ in range(3)] == [4, 3, 2] and q.get(0) is None


def test_peers_take_turns():
    q = FairQueue(max_total=100, max_per_peer=50)
    for i in range(10):
        q.put("flood", i)
    q.put("prometheus", "scrape")
    assert q.get(0) == 9 and q.get(0) == "scrape"  # one of the flood's, then the other peer's


def test_a_full_queue_drops_the_busiest_peers_oldest():
    q = FairQueue(max_total=4, max_per_peer=10)
    q.put("quiet", "scrape")
    assert [d for i in range(3) for d in q.put("flood", i)] == []
    assert q.put("flood", 3) == [0]  # not the quiet peer's only request
    assert q.put("other", "x") == [1]
    assert sorted(map(str, (q.get(0) for _ in range(4)))) == ["2", "3", "scrape", "x"]


def test_close_hands_back_what_waited_and_wakes_the_workers():
    import threading

    q = FairQueue(max_total=10, max_per_peer=10)
    got = []
    worker = threading.Thread(target=lambda: got.append(q.get()))
    worker.start()  # waiting in get(), or about to: either way close() ends it
    assert q.close() == [] and q.put("late", 1) == [1]
    worker.join(30)
    assert got == [None]


# --- who the peer is -------------------------------------------------------------------------------

def pair(listener_family=socket.AF_INET, host="127.0.0.1", client_host="127.0.0.1"):
    listener = socket.socket(listener_family)
    listener.bind((host, 0))
    listener.listen()
    client = socket.socket(socket.AF_INET6 if ":" in client_host else socket.AF_INET)
    client.connect((client_host, listener.getsockname()[1]))
    conn, address = listener.accept()
    listener.close()
    return client, conn, address


def test_a_local_client_is_its_user_and_its_close_is_seen():
    client, conn, address = pair()
    try:
        local = peers.client_socket(conn, address)
        assert local == peers.PeerSocket(uid=os.geteuid(), closed=False)
        assert peers.peer_key(address, local) == ("uid", os.geteuid())
        assert not peers.gone(conn, address)
        client.shutdown(socket.SHUT_WR)  # nc -N: done sending, still reading
        assert select.select([conn], [], [], 5)[0]
        assert peers.client_socket(conn, address).closed is False and not peers.gone(conn, address)
        client.close()  # left without reading
        wait_until(lambda: peers.gone(conn, address), what="the closed client seen as gone")
    finally:
        client.close()
        conn.close()


def test_an_ipv4_client_of_a_dual_stack_listener_is_found_as_ipv4():
    try:
        client, conn, address = pair(socket.AF_INET6, "::", "127.0.0.1")
    except OSError:
        pytest.skip("no IPv6 here")
    try:
        assert address[0] == "::ffff:127.0.0.1"
        assert peers.client_socket(conn, address).uid == os.geteuid()
        assert peers.peer_key(address, None) == ("address", "127.0.0.1")
    finally:
        client.close()
        conn.close()


def test_a_client_the_kernel_does_not_hold_is_its_address():
    _, conn, address = pair()
    try:
        # A made-up client port: no such socket here, as for a client on another machine.
        fake = (address[0], 1 if address[1] != 1 else 2)
        assert peers.client_socket(conn, fake) is None
        assert peers.peer_key(("10.1.2.3", 5000), None) == ("address", "10.1.2.3")
    finally:
        conn.close()


def as_other_user(work):
    """Fork a child that becomes ``OTHER_UID`` and runs ``work(ready_fd, stop_fd)``; returns
    (pid, ready read end, stop write end). The child uses only what is imported already."""
    ready_r, ready_w = os.pipe()
    stop_r, stop_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.close(ready_r)
            os.close(stop_w)
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            work(ready_w, stop_r)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(ready_w)
    os.close(stop_r)
    return pid, ready_r, stop_w


def finish(pid, ready_r, stop_w):
    os.close(stop_w)
    os.close(ready_r)
    os.waitpid(pid, 0)


@needs_root
def test_another_users_client_is_that_user():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def connect(ready, stop):
        s = socket.socket()
        s.connect(("127.0.0.1", port))
        os.write(ready, b"x")
        os.read(stop, 1)

    child = as_other_user(connect)
    try:
        assert os.read(child[1], 1) == b"x"
        conn, address = listener.accept()
        assert peers.peer_key(address, peers.client_socket(conn, address)) == ("uid", OTHER_UID)
        conn.close()
    finally:
        finish(*child)
        listener.close()


# --- the server under a flood ------------------------------------------------------------------------

class _Slow:
    """A scrape that takes 10 ms to render, as a box with many GPUs can: a flood keeps the workers busy."""

    def collect(self):
        time.sleep(0.01)  # not a wait: the render's own cost
        family = GaugeMetricFamily("slow", "rendered slowly")
        family.add_metric([], 1)
        yield family


def flood_of_requests(port, hold):
    """The flood: complete requests as fast as it can, holding the newest ``hold`` connections open
    without reading (so their requests wait for a worker) and closing the older ones unread."""
    def work(ready, stop):
        held, told = [], False
        while not select.select([stop], [], [], 0)[0]:
            try:
                s = socket.socket()
                s.connect(("127.0.0.1", port))
                s.sendall(GET)
                held.append(s)
            except OSError:
                continue
            while len(held) > hold:
                held.pop(0).close()
            if not told and len(held) == hold:
                os.write(ready, b"x")
                told = True
        close_all(held)
    return work


@needs_root
def test_another_users_flood_of_requests_does_not_push_out_a_scrape():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Slow())
    srv = MetricsServer(registry, "127.0.0.1", 0)  # bound: the child connects once it runs
    child = as_other_user(flood_of_requests(srv.port, hold=300))
    srv.start()
    try:
        assert os.read(child[1], 1) == b"x"  # the flood is going
        wait_until(lambda: srv.counts()["queued"] + srv.counts()["gone_unrendered"] >= 300,
                   what="the flood's first 300 requests read")
        for _ in range(5):
            _, body = scrape(srv.url, timeout=10.0)
            assert b"slow 1.0" in body
    finally:
        finish(*child)
        srv.stop()


def test_requests_of_clients_that_left_are_not_rendered():
    srv = MetricsServer(build_registry(ExportState()), "127.0.0.1", 0)
    try:
        socks = []
        for _ in range(20):  # before the server runs: each sends its request and leaves unread
            s = socket.socket()
            s.connect(("127.0.0.1", srv.port))
            s.sendall(GET)
            socks.append(s)
        close_all(socks)
        srv.start()
        wait_until(lambda: srv.counts()["gone_unrendered"] == 20, what="the twenty requests found abandoned")
        scrape(srv.url, timeout=10.0)
        assert srv.counts()["served"] == 1 and srv.counts()["queued"] == 1
    finally:
        srv.stop()
