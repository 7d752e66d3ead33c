"""One HTTP request answered by the WSGI app, in memory: what a worker of ``server.MetricsServer`` runs.

The server's accept loop reads the request head before a worker sees the connection, and writes
the response after the worker is done with it, so ``render`` never touches a socket: it turns the
request head into the whole response, bytes in memory. A client that stops reading can therefore
never hold a worker. HEAD is answered as GET without the body (prometheus_client's app knows only GET
and OPTIONS), and the ``Server`` header names pinmon, not the Python version.

Nothing is logged: a request is not worth a line on the exporter's stderr, and a failing app gets a
500 without a traceback (wsgiref's default prints one to stderr per failed request).
"""
from __future__ import annotations

import io
from typing import Callable, Iterable
from wsgiref.handlers import SimpleHandler
from wsgiref.simple_server import WSGIRequestHandler

SERVER_SOFTWARE = "pinmon"
MAX_REQUEST_LINE_BYTES = 65536
# What a worker answers when rendering failed in a way the handler could not (never expected).
INTERNAL_ERROR = (b"HTTP/1.0 500 Internal Server Error\r\nServer: pinmon\r\nContent-Type: text/plain\r\n"
                  b"Content-Length: 22\r\nConnection: close\r\n\r\ninternal server error\n")


class _ResponseWriter(SimpleHandler):
    server_software = SERVER_SOFTWARE

    def log_exception(self, exc_info) -> None:  # the 500 is the answer; no traceback on stderr
        pass


class RequestHandler(WSGIRequestHandler):
    """``request`` is the request head (bytes); ``server`` a bound WSGIServer with an app. After
    construction ``response`` holds the whole response."""

    server_version = SERVER_SOFTWARE

    def version_string(self) -> str:  # the Server header of error pages: no Python version
        return SERVER_SOFTWARE

    def setup(self) -> None:
        self.rfile = io.BytesIO(self.request)
        self.wfile = io.BytesIO()
        self.response = b""

    def handle(self) -> None:
        self.raw_requestline = self.rfile.readline(MAX_REQUEST_LINE_BYTES + 1)
        if len(self.raw_requestline) > MAX_REQUEST_LINE_BYTES:
            self.send_error(414)
            return
        if not self.parse_request():  # it has written the error response
            return
        writer = _ResponseWriter(self.rfile, self.wfile, io.StringIO(), self.get_environ(), multithread=True)
        writer.run(self.server.get_app())

    def finish(self) -> None:
        self.response = self.wfile.getvalue()
        super().finish()

    def get_stderr(self):  # wsgi.errors: nothing an app writes there reaches the exporter's stderr
        return io.StringIO()

    def log_message(self, format, *args):  # one line per scrape would drown stderr
        pass


def render(head: bytes, address, server) -> bytes:
    """The whole response to the request ``head`` from ``address``, answered by ``server``'s app."""
    return RequestHandler(head, address, server).response


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
