"""The HTTP side: parse ``--listen``, bind, serve ``/metrics`` with bounded resources, shut down cleanly.

prometheus_client's WSGI app, answered by a fixed pool of ``WORKERS`` threads. One accept loop (a
thread with a selector) takes every connection and holds it, without a thread, until its request
head has arrived; only then does a worker get it. So idle or slow clients cost a file descriptor,
never a thread, and cannot keep a scrape waiting:

- at most ``MAX_WAITING`` connections wait for their request head; one more closes the oldest;
- a connection whose head has not arrived within ``REQUEST_TIMEOUT_S`` is closed, and a worker's
  socket reads and writes time out after as long;
- out of file descriptors (EMFILE and kin), the loop closes the oldest waiting connection to make
  room, and when there is none it stops accepting for ``ACCEPT_BACKOFF_S``: the listening socket
  stays readable, so retrying at once would spin a core;
- at most ``MAX_QUEUED`` complete requests wait for a worker; beyond that a connection is closed.

Binding happens in the constructor, so "address already in use" is reported before any collection
starts. IPv6 addresses are written in brackets (``[::1]:9477``), as in URLs.
"""
from __future__ import annotations

import errno
import ipaddress
import queue
import selectors
import socket
import threading
import time
from typing import Optional
from wsgiref.simple_server import WSGIServer

from prometheus_client import make_wsgi_app

from .http import RequestHandler, serve_head

DEFAULT_LISTEN = "127.0.0.1:9477"
WORKERS = 4
MAX_WAITING = 64
MAX_QUEUED = 32
REQUEST_TIMEOUT_S = 5.0
ACCEPT_BACKOFF_S = 0.25
MAX_HEAD_BYTES = 16 * 1024
# Accepts per wake-up of the loop, so a flood of connections cannot starve reads of waiting ones.
ACCEPT_BATCH = 64
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def parse_listen(text: str) -> tuple[str, int]:
    """'HOST:PORT' or '[V6]:PORT' -> (host, port); ValueError with a one-line reason."""
    text = text.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"expected [IPV6]:PORT, got {text!r}")
        port_text = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"not an IPv6 address: {host!r}") from None
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or not host:
            raise ValueError(f"expected HOST:PORT (e.g. 127.0.0.1:9477), got {text!r}")
        if ":" in host:
            raise ValueError(f"write an IPv6 address in brackets, e.g. [::1]:9477, got {text!r}")
    # Port 0 asks the kernel for a free port (the chosen one is printed): handy for tests.
    if not port_text.isdigit() or not (0 <= int(port_text) < 65536):
        raise ValueError(f"port must be 0-65535, got {port_text!r}")
    return host, int(port_text)


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


def _close(conn: socket.socket) -> None:
    try:
        conn.close()
    except OSError:
        pass


class _Waiting:
    __slots__ = ("deadline", "head", "address")

    def __init__(self, deadline: float, address):
        self.deadline = deadline
        self.head = bytearray()
        self.address = address


class MetricsServer:
    """Serves ``registry`` at /metrics (and /) on (host, port) from a loop thread and ``workers`` threads."""

    def __init__(self, registry, host: str, port: int, *, workers: int = WORKERS,
                 max_waiting: int = MAX_WAITING, timeout_s: float = REQUEST_TIMEOUT_S):
        class Server(WSGIServer):
            address_family = _family(host)
            request_queue_size = 128  # the kernel's backlog: a burst waits there, not refused

        # The WSGIServer binds and keeps the WSGI environment; its own serving loop is not used.
        self.httpd = Server((host, port), RequestHandler)
        self.httpd.set_app(serve_head(make_wsgi_app(registry)))
        self.host, self.port = host, self.httpd.server_address[1]
        self.workers = max(1, workers)
        self.max_waiting = max(1, max_waiting)
        self.timeout_s = timeout_s
        self.accept_pauses = 0  # times accepting stopped for lack of descriptors (for tests and stats)
        self._queue: queue.Queue = queue.Queue(maxsize=MAX_QUEUED)
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._waiting: dict[socket.socket, _Waiting] = {}  # oldest first

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> "MetricsServer":
        self.httpd.socket.setblocking(False)
        self._threads = [threading.Thread(target=self._loop, name="pinmon-export-http", daemon=True)]
        self._threads += [threading.Thread(target=self._work, name=f"pinmon-export-http-{i}", daemon=True)
                          for i in range(self.workers)]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        for _ in range(self.workers):
            try:
                self._queue.put(None, timeout=1.0)
            except queue.Full:
                break
        for t in self._threads:
            t.join(5.0)
        self._threads = []
        for conn in list(self._waiting):
            _close(conn)
        self._waiting.clear()
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                _close(item[0])
        self.httpd.server_close()
        _close(self._wake_r)
        _close(self._wake_w)

    # --- the accept loop -------------------------------------------------------------------------

    def _accept_one(self):
        return self.httpd.socket.accept()

    def _loop(self) -> None:
        sel = selectors.DefaultSelector()
        listening = self.httpd.socket
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        sel.register(listening, selectors.EVENT_READ, "listen")
        paused_until: Optional[float] = None
        try:
            while not self._stopping.is_set():
                now = time.monotonic()
                if paused_until is not None and now >= paused_until:
                    sel.register(listening, selectors.EVENT_READ, "listen")
                    paused_until = None
                wake_at = [now + 1.0]
                if self._waiting:
                    wake_at.append(next(iter(self._waiting.values())).deadline)
                if paused_until is not None:
                    wake_at.append(paused_until)
                for key, _ in sel.select(max(0.0, min(wake_at) - now)):
                    if key.data == "wake":
                        return
                    if key.data == "listen":
                        if not self._accept(sel):
                            sel.unregister(listening)
                            paused_until = time.monotonic() + ACCEPT_BACKOFF_S
                            self.accept_pauses += 1
                    else:
                        self._read(sel, key.fileobj)
                self._expire(sel, time.monotonic())
        finally:
            sel.close()

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
                if not self._waiting:
                    return False
                self._drop(sel, next(iter(self._waiting)))  # frees a descriptor for the next try
                continue
            conn.setblocking(False)
            if len(self._waiting) >= self.max_waiting:
                self._drop(sel, next(iter(self._waiting)))
            self._waiting[conn] = _Waiting(time.monotonic() + self.timeout_s, address)
            sel.register(conn, selectors.EVENT_READ, "client")
        return True

    def _read(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        w = self._waiting.get(conn)
        if w is None:
            return
        try:
            data = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
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
            try:
                self._queue.put_nowait((conn, bytes(w.head), w.address))
            except queue.Full:
                _close(conn)
        elif len(w.head) > MAX_HEAD_BYTES:
            self._drop(sel, conn)

    def _expire(self, sel: selectors.BaseSelector, now: float) -> None:
        while self._waiting:
            conn, w = next(iter(self._waiting.items()))
            if w.deadline > now:
                return
            self._drop(sel, conn)

    def _drop(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        self._waiting.pop(conn, None)
        try:
            sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        _close(conn)

    # --- the workers -----------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None or self._stopping.is_set():
                if item is not None:
                    _close(item[0])
                return
            conn, head, address = item
            try:
                conn.setblocking(True)
                conn.settimeout(self.timeout_s)
                RequestHandler((conn, head), address, self.httpd)
            except Exception:  # a client that timed out or went away: nothing to answer
                pass
            finally:
                try:
                    conn.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                _close(conn)
