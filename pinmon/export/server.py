"""The HTTP side: parse ``--listen``, bind, serve ``/metrics`` with bounded resources, shut down cleanly.

prometheus_client's WSGI app renders each response; this module only moves bytes, and does it so
that no client can make the exporter refuse a scrape. One loop thread (a selector) owns every
connection while it waits for its request head and while its response is written; a fixed pool
of ``WORKERS`` threads only renders, from a complete head to the whole response in memory
(``http.render``). So an idle, slow or non-reading client costs a file descriptor and a bounded
buffer, never a thread:

- A connection waits for its request head at most ``REQUEST_TIMEOUT_S``, and at most
  ``MAX_WAITING`` wait at once; a head over ``MAX_HEAD_BYTES`` is refused.
- The loop reads a connection as soon as it accepts it: a scraper sends its request with the
  handshake, so its head is usually complete before the connection ever waits.
- When the waiting room is full, the longest-waiting connection makes room; it is read once more
  before it is closed, so a request whose bytes have arrived in the meantime is served, not
  dropped. A flood of connections, idle or sending half a request, thus turns over the waiting
  room without closing a scrape whose request has arrived; a scrape has ``MAX_WAITING`` newer
  connections' time to send it.
- A response is written without blocking, with one deadline for the whole response
  (``RESPONSE_TIMEOUT_S``), not one per send: a client that reads a byte now and then cannot stretch
  it. Responses not yet taken hold at most ``MAX_PENDING_BYTES`` together; beyond that the oldest
  is dropped.
- Complete requests wait for a worker in one queue per peer (``request_queue``; a peer is the
  client's user on this machine, else its address: ``peers``), taken in turn, newest first within a
  peer: at most ``MAX_QUEUED_PER_PEER`` a peer (its oldest dropped beyond) and ``MAX_QUEUED`` in
  all (the busiest peer's oldest dropped). A flood of requests from one user or address delays
  another's scrape by at most one request per worker, and never pushes it out.
- A request whose client has already closed its socket (it sent the request and left without
  reading: the kernel holds the socket orphaned) is not rendered.
- Out of file descriptors (EMFILE and kin), the loop closes a waiting connection (as above) to make
  room, and when there is none it stops accepting for ``ACCEPT_BACKOFF_S``: the listening socket
  stays readable, so retrying at once would spin a core.
- With TLS (``tls.server_context``), the handshake is the loop's too, done without blocking under the
  request deadline, before the request is read: a client that never finishes it holds a place in
  the waiting room until its deadline, never a worker. A failed handshake closes the connection; a
  plain HTTP request to the TLS port gets a plain ``400`` saying to use https.
- Nothing is logged per connection, and nothing a client does makes a traceback. ``counts()``
  says what the server has done so far (connections accepted, requests queued, served, dropped and
  why): what the tests wait on, instead of sleeping.

Binding happens in the constructor, so "address already in use" is reported before any collection
starts. IPv6 addresses are written in brackets (``[::1]:9477``), as in URLs.
"""
from __future__ import annotations

import collections
import errno
import ipaddress
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app

from .http import INTERNAL_ERROR, RequestHandler, render, serve_head
from .peers import Address, client_socket, peer_key
from .request_queue import FairQueue
from .sockets import (
    HANDSHAKE_DONE,
    HANDSHAKE_PLAIN_HTTP,
    NOT_NOW,
    PLAIN_TO_TLS,
    abort,
    answer_plain,
    close_quietly,
    finish,
    gone_or_unknown,
    handshake_step,
)

WORKERS = 4
MAX_WAITING = 256
# A burst of complete requests (forty clients that send one and never read the answer) waits here
# rather than pushing out the scrape that comes after it; a worker renders one in a few ms.
MAX_QUEUED = 128
# One peer's share: far more than a Prometheus (or a few behind one proxy) ever has waiting.
MAX_QUEUED_PER_PEER = 16
REQUEST_TIMEOUT_S = 5.0
# Prometheus gives up on a scrape after its scrape_timeout, 10 s by default.
RESPONSE_TIMEOUT_S = 10.0
MAX_PENDING_BYTES = 64 << 20
ACCEPT_BACKOFF_S = 0.25
MAX_HEAD_BYTES = 16 * 1024
# The kernel's queue of connections not yet accepted: a burst waits there instead of being refused
# (the kernel caps it at net.core.somaxconn).
LISTEN_BACKLOG = 1024
# Accepts per wake-up of the loop, so a flood of connections cannot starve reads of waiting ones.
ACCEPT_BATCH = 64
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def _family(host: str) -> socket.AddressFamily:
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:  # a host name: take the family it resolves to first
        try:
            return socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][0]
        except OSError:
            return socket.AF_INET


def _head_complete(buf: bytearray) -> bool:
    return b"\r\n\r\n" in buf or b"\n\n" in buf


class _Held:
    """A connection the loop holds until a deadline (monotonic seconds)."""
    __slots__ = ("deadline",)

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline


class _Waiting(_Held):
    """A connection whose request head has not all arrived (with TLS: or whose handshake has not ended)."""
    __slots__ = ("address", "handshaking", "head")

    def __init__(self, deadline: float, address: Address, handshaking: bool = False) -> None:
        super().__init__(deadline)
        self.head = bytearray()
        self.address = address
        self.handshaking = handshaking


class _Writing(_Held):
    """A connection whose response is being written: what is left of it, and by when."""
    __slots__ = ("data",)

    def __init__(self, deadline: float, data: memoryview) -> None:
        super().__init__(deadline)
        self.data = data


# A complete request waiting for a worker: its connection, its head, its client's address.
Request = tuple[socket.socket, bytes, Address]


COUNTS = ("accepted", "queued", "served", "gone_unrendered", "dropped_queue_full", "dropped_for_room",
          "dropped_unsent", "expired", "accept_pauses", "tls_failed", "plain_to_tls")


class MetricsServer:
    """Serves ``registry`` at /metrics (and /) on (host, port) from a loop thread and ``workers`` threads;
    over TLS with ``tls`` (a server context, ``tls.server_context``)."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int, *, workers: int = WORKERS,
                 max_waiting: int = MAX_WAITING, timeout_s: float = REQUEST_TIMEOUT_S,
                 response_timeout_s: float = RESPONSE_TIMEOUT_S, max_pending_bytes: int = MAX_PENDING_BYTES,
                 tls: ssl.SSLContext | None = None) -> None:
        class Server(WSGIServer):
            address_family = _family(host)
            request_queue_size = LISTEN_BACKLOG

        # The WSGIServer binds and keeps the WSGI environment; its own serving loop is not used.
        self.httpd = Server((host, port), RequestHandler)
        self.httpd.set_app(serve_head(make_wsgi_app(registry)))
        self.host, self.port = host, self.httpd.server_address[1]
        self.workers = max(1, workers)
        self.max_waiting = max(1, max_waiting)
        self.timeout_s = timeout_s
        self.response_timeout_s = response_timeout_s
        self.max_pending_bytes = max_pending_bytes
        self.tls = tls
        self._counts = dict.fromkeys(COUNTS, 0)
        self._counts_lock = threading.Lock()
        self.pending_bytes_peak = 0  # the most bytes of responses not yet taken, at once
        self._queue: FairQueue[Request] = FairQueue(MAX_QUEUED, MAX_QUEUED_PER_PEER)
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._waiting: dict[socket.socket, _Waiting] = {}  # oldest first
        self._writing: dict[socket.socket, _Writing] = {}  # oldest first
        self._pending_bytes = 0
        # (conn, rest of response) from workers
        self._done: collections.deque[tuple[socket.socket, memoryview]] = collections.deque()

    def _count(self, what: str, n: int = 1) -> None:
        with self._counts_lock:
            self._counts[what] += n

    def counts(self) -> dict[str, int]:
        """What the server has done so far, and what it holds now (``waiting``, ``queued_now``,
        ``writing``, ``pending_bytes``): ``accepted`` connections; requests ``queued`` for a worker and
        ``served``; requests not rendered because their client had closed (``gone_unrendered``);
        requests dropped from a full queue (``dropped_queue_full``), waiting connections closed to make
        room (``dropped_for_room``), responses dropped to bound memory (``dropped_unsent``);
        connections dropped at their deadline (``expired``: a handshake or request not sent, a reply
        not read in time); times accepting stopped for lack of descriptors (``accept_pauses``); TLS
        handshakes that failed (``tls_failed``), plain HTTP requests to the TLS port among them
        (``plain_to_tls``)."""
        with self._counts_lock:
            out = dict(self._counts)
        out.update(waiting=len(self._waiting), queued_now=len(self._queue), writing=len(self._writing),
                   pending_bytes=self._pending_bytes)
        return out

    @property
    def expired(self) -> int:
        return self._counts["expired"]

    @property
    def accept_pauses(self) -> int:
        return self._counts["accept_pauses"]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/metrics"

    def start(self) -> MetricsServer:
        self.httpd.socket.setblocking(False)
        self._threads = [threading.Thread(target=self._loop, name="pinmon-export-http", daemon=True)]
        self._threads += [threading.Thread(target=self._work, name=f"pinmon-export-http-{i}", daemon=True)
                          for i in range(self.workers)]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._wake()
        for item in self._queue.close():
            close_quietly(item[0])
        for t in self._threads:
            t.join(5.0)
        self._threads = []
        for conn in [*self._waiting, *self._writing]:
            close_quietly(conn)
        self._waiting.clear()
        self._writing.clear()
        while self._done:
            close_quietly(self._done.popleft()[0])
        self.httpd.server_close()
        close_quietly(self._wake_r)
        close_quietly(self._wake_w)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:  # the pipe is full: the loop has a wake-up pending anyway
            pass

    # --- the loop --------------------------------------------------------------------------------

    def _accept_one(self) -> tuple[socket.socket, Address]:
        return self.httpd.socket.accept()

    def _loop(self) -> None:
        sel = selectors.DefaultSelector()
        listening = self.httpd.socket
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        sel.register(listening, selectors.EVENT_READ, "listen")
        paused_until: float | None = None
        try:
            while not self._stopping.is_set():
                try:
                    now = time.monotonic()
                    if paused_until is not None and now >= paused_until:
                        sel.register(listening, selectors.EVENT_READ, "listen")
                        paused_until = None
                    events = sel.select(max(0.0, self._next_deadline(now, paused_until) - now))
                    for key, mask in events:
                        self._event(sel, key, mask)
                        if key.data == "listen" and not self._accept(sel):
                            sel.unregister(listening)
                            paused_until = time.monotonic() + ACCEPT_BACKOFF_S
                            self._count("accept_pauses")
                    self._take_done(sel)
                    self._expire(sel, time.monotonic())
                except Exception:  # a defect here must not end serving: the next turn goes on
                    time.sleep(0.01)
        finally:
            sel.close()

    def _next_deadline(self, now: float, paused_until: float | None) -> float:
        at = [now + 1.0]
        for held in self._held():
            if held:
                at.append(next(iter(held.values())).deadline)
        if paused_until is not None:
            at.append(paused_until)
        return min(at)

    def _held(self) -> tuple[Mapping[socket.socket, _Held], ...]:
        """The connections held until a deadline, each mapping oldest first."""
        return (self._waiting, self._writing)

    def _event(self, sel: selectors.BaseSelector, key: selectors.SelectorKey, mask: int) -> None:
        if key.data == "wake":
            try:
                while self._wake_r.recv(4096):
                    pass
            except (BlockingIOError, InterruptedError):
                pass
            return
        conn = key.fileobj
        if not isinstance(conn, socket.socket):  # never: the loop registers sockets only
            return
        if key.data == "client":
            try:
                self._read(sel, conn)
            except Exception:
                self._drop(sel, conn)
        elif key.data == "write":
            try:
                self._write(sel, conn)
            except Exception:
                self._drop(sel, conn)

    def _accept(self, sel: selectors.BaseSelector) -> bool:
        """Accept what is pending; False when out of descriptors with nothing left to free."""
        for _ in range(ACCEPT_BATCH):
            try:
                conn, address = self._accept_one()
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as e:
                if e.errno not in _OUT_OF_RESOURCES:
                    return True  # the client went away before the accept (ECONNABORTED, ...)
                if not self._make_room(sel):
                    return False
                continue  # a descriptor is free for the next try
            self._count("accepted")
            try:
                conn.setblocking(False)
                if self.tls is not None:  # no I/O yet: the handshake is the loop's, step by step
                    conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
                if len(self._waiting) >= self.max_waiting:
                    self._make_room(sel)
                self._waiting[conn] = _Waiting(time.monotonic() + self.timeout_s, address, self.tls is not None)
                sel.register(conn, selectors.EVENT_READ, "client")
                self._read(sel, conn)  # a scraper's request has usually arrived with the handshake
            except Exception:
                self._drop(sel, conn)
        return True

    def _make_room(self, sel: selectors.BaseSelector) -> bool:
        """Free the place of the longest-waiting connection: read once more, it is served if its
        request has all arrived, else closed. False when no connection waits."""
        if not self._waiting:
            return False
        conn = next(iter(self._waiting))
        try:
            self._read(sel, conn)
        except Exception:
            pass
        if conn in self._waiting:
            self._count("dropped_for_room")
            self._drop(sel, conn)
        return True

    def _read(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        """Read what ``conn`` has sent (after its TLS handshake); a complete head goes to the workers."""
        w = self._waiting.get(conn)
        if w is None:
            return
        if w.handshaking and isinstance(conn, ssl.SSLSocket) and not self._handshake(sel, conn, w):
            return
        while True:
            try:
                data = conn.recv(4096)
            except NOT_NOW:
                return
            except OSError:
                data = b""
            if not data:  # closed by the client, or broken
                self._drop(sel, conn)
                return
            w.head += data
            if _head_complete(w.head):
                sel.unregister(conn)
                del self._waiting[conn]
                self._enqueue(conn, bytes(w.head), w.address)
                return
            if len(w.head) > MAX_HEAD_BYTES:
                self._drop(sel, conn)
                return
            # TLS may hold decrypted bytes the socket no longer signals: read them now.
            if not (isinstance(conn, ssl.SSLSocket) and conn.pending()):
                return

    def _handshake(self, sel: selectors.BaseSelector, conn: ssl.SSLSocket, w: _Waiting) -> bool:
        """One step of the TLS handshake; True once it is done. Waits for what OpenSSL asks for (the
        socket readable or, rarely, writable); a failure closes the connection."""
        step = handshake_step(conn)
        if step in (selectors.EVENT_READ, selectors.EVENT_WRITE):
            self._wait_for(sel, conn, step)
            return False
        if step != HANDSHAKE_DONE:
            self._count("tls_failed")
            if step == HANDSHAKE_PLAIN_HTTP:
                self._count("plain_to_tls")
                self._forget(sel, conn)
                answer_plain(conn, PLAIN_TO_TLS)
            else:
                self._drop(sel, conn)
            return False
        w.handshaking = False
        self._wait_for(sel, conn, selectors.EVENT_READ)
        return True

    @staticmethod
    def _wait_for(sel: selectors.BaseSelector, conn: socket.socket, events: int) -> None:
        key = sel.get_key(conn)
        if key.events != events:
            sel.modify(conn, events, key.data)

    def _enqueue(self, conn: socket.socket, head: bytes, address: Address) -> None:
        """A complete request into its peer's queue, unless its client has already left."""
        if gone_or_unknown(conn, address):
            self._count("gone_unrendered")
            close_quietly(conn)
            return
        self._count("queued")
        for item in self._queue.put(peer_key(address, client_socket(conn, address)), (conn, head, address)):
            self._count("dropped_queue_full")
            close_quietly(item[0])

    def _take_done(self, sel: selectors.BaseSelector) -> None:
        """Responses the workers could not write at once: written from here on, with one deadline."""
        while self._done:
            conn, rest = self._done.popleft()
            if self._stopping.is_set():
                close_quietly(conn)
                continue
            while self._writing and self._pending_bytes + len(rest) > self.max_pending_bytes:
                self._count("dropped_unsent")
                self._drop(sel, next(iter(self._writing)))  # the oldest has had the most time
            try:
                sel.register(conn, selectors.EVENT_WRITE, "write")
            except Exception:
                close_quietly(conn)
                continue
            self._writing[conn] = _Writing(time.monotonic() + self.response_timeout_s, rest)
            self._pending_bytes += len(rest)
            self.pending_bytes_peak = max(self.pending_bytes_peak, self._pending_bytes)

    def _write(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        w = self._writing.get(conn)
        if w is None:
            return
        try:
            sent = conn.send(w.data)  # with TLS: the same bytes again until OpenSSL has taken them all
        except ssl.SSLWantReadError:  # OpenSSL must read first (a TLS 1.3 key update)
            self._wait_for(sel, conn, selectors.EVENT_READ)
            return
        except NOT_NOW:
            self._wait_for(sel, conn, selectors.EVENT_WRITE)
            return
        except OSError:  # the client went away
            self._drop(sel, conn)
            return
        w.data = w.data[sent:]
        self._pending_bytes -= sent
        if not w.data:
            self._forget(sel, conn)
            finish(conn)
        else:
            self._wait_for(sel, conn, selectors.EVENT_WRITE)

    def _expire(self, sel: selectors.BaseSelector, now: float) -> None:
        for held in self._held():
            while held:
                conn, w = next(iter(held.items()))
                if w.deadline > now:
                    break
                self._count("expired")
                self._drop(sel, conn)

    def _forget(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        self._waiting.pop(conn, None)
        w = self._writing.pop(conn, None)
        if w is not None:
            self._pending_bytes -= len(w.data)
        try:
            sel.unregister(conn)
        except (KeyError, ValueError):
            pass

    def _drop(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        writing = conn in self._writing
        self._forget(sel, conn)
        if writing:
            abort(conn)
        else:
            close_quietly(conn)

    # --- the workers -----------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None or self._stopping.is_set():
                if item is not None:
                    close_quietly(item[0])
                return
            conn, head, address = item
            if gone_or_unknown(conn, address):  # left while its request waited: rendering would be for nobody
                self._count("gone_unrendered")
                close_quietly(conn)
                continue
            try:
                response = render(head, address, self.httpd)
            except Exception:  # the handler answers errors itself; this is for its own defects
                response = INTERNAL_ERROR
            self._count("served")
            self._send(conn, response)

    def _send(self, conn: socket.socket, response: bytes) -> None:
        """Write what the socket takes now (a scrape's response usually fits its buffer); the loop
        writes the rest."""
        try:
            sent = conn.send(response)
        except NOT_NOW:  # with TLS, the loop sends the same bytes again: OpenSSL goes on where it was
            sent = 0
        except OSError:  # the client went away
            close_quietly(conn)
            return
        if sent == len(response):
            finish(conn)
            return
        if self._stopping.is_set():
            close_quietly(conn)
            return
        self._done.append((conn, memoryview(response)[sent:]))
        self._wake()
