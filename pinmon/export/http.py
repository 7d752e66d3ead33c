"""One HTTP request, answered by the WSGI app: what a worker of ``server.MetricsServer`` runs.

The server's accept loop reads the request head before a worker sees the connection, so the
handler parses it from memory and only writes to the socket. HEAD is answered as GET without the
body (prometheus_client's app knows only GET and OPTIONS), and the ``Server`` header names pinmon,
not the Python version.
"""
from __future__ import annotations

import io
from typing import Callable, Iterable
from wsgiref.handlers import SimpleHandler
from wsgiref.simple_server import WSGIRequestHandler

SERVER_SOFTWARE = "pinmon"


class _ResponseWriter(SimpleHandler):
    server_software = SERVER_SOFTWARE


class RequestHandler(WSGIRequestHandler):
    """``request`` is ``(connection, request head bytes)``; ``server`` a bound WSGIServer with an app."""

    server_version = SERVER_SOFTWARE

    def version_string(self) -> str:  # the Server header of error pages: no Python version
        return SERVER_SOFTWARE

    def setup(self) -> None:
        self.connection, head = self.request
        self.rfile = io.BytesIO(head)
        self.wfile = self.connection.makefile("wb")

    def handle(self) -> None:
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.send_error(414)
            return
        if not self.parse_request():  # it has sent the error response
            return
        writer = _ResponseWriter(self.rfile, self.wfile, self.get_stderr(), self.get_environ(),
                                 multithread=True)
        writer.run(self.server.get_app())

    def log_message(self, format, *args):  # one line per scrape would drown stderr
        pass


def serve_head(app: Callable) -> Callable:
    """A WSGI app that answers HEAD as ``app`` answers GET, with its Content-Length and no body."""

    def wrapped(environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "HEAD":
            return app(environ, start_response)
        seen: dict = {}

        def capture(status, headers, exc_info=None):
            seen["status"], seen["headers"] = status, headers
            return lambda data: None

        result = app(dict(environ, REQUEST_METHOD="GET"), capture)
        try:
            length = sum(len(chunk) for chunk in result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        headers = [(k, v) for k, v in seen["headers"] if k.lower() != "content-length"]
        start_response(seen["status"], headers + [("Content-Length", str(length))])
        return []

    return wrapped
