"""The HTTP side: parse ``--listen``, bind, serve ``/metrics`` from a thread, shut down cleanly.

prometheus_client's WSGI app behind the standard library's threaded WSGI server. Binding happens in
the constructor, so "address already in use" is reported before any collection starts. IPv6
addresses are written in brackets (``[::1]:9477``), as in URLs.
"""
from __future__ import annotations

import ipaddress
import socket
import threading
from socketserver import ThreadingMixIn
from typing import Optional
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app

DEFAULT_LISTEN = "127.0.0.1:9477"


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


class _Quiet(WSGIRequestHandler):
    def log_message(self, format, *args):  # one line per scrape would drown stderr
        pass


class MetricsServer:
    """Serves ``registry`` at /metrics (and /) on (host, port) from a daemon thread."""

    def __init__(self, registry, host: str, port: int):
        class Server(ThreadingMixIn, WSGIServer):
            daemon_threads = True
            address_family = _family(host)

        self.httpd = make_server(host, port, make_wsgi_app(registry), server_class=Server, handler_class=_Quiet)
        self.host, self.port = host, self.httpd.server_address[1]
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> "MetricsServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="pinmon-export-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(5.0)
            self._thread = None
        self.httpd.server_close()
