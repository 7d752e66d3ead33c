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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING
from wsgiref.handlers import SimpleHandler
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

if TYPE_CHECKING:  # typeshed's names for WSGI's types (wsgiref.types is Python 3.11+)
    from _typeshed import OptExcInfo
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    from .peers import Address

SERVER_SOFTWARE = "pinmon"
MAX_REQUEST_LINE_BYTES = 65536
# What a worker answers when rendering failed in a way the handler could not (never expected).
INTERNAL_ERROR = (b"HTTP/1.0 500 Internal Server Error\r\nServer: pinmon\r\nContent-Type: text/plain\r\n"
                  b"Content-Length: 22\r\nConnection: close\r\n\r\ninternal server error\n")


class _ResponseWriter(SimpleHandler):
    server_software = SERVER_SOFTWARE

    def log_exception(self, exc_info: OptExcInfo) -> None:  # the 500 is the answer; no traceback on stderr
        pass


class RequestHandler(WSGIRequestHandler):
    """``head`` is the request head (bytes); ``server`` a bound WSGIServer with an app. After
    construction ``response`` holds the whole response."""

    server_version = SERVER_SOFTWARE
    server: WSGIServer

    def __init__(self, head: bytes, client_address: Address, server: WSGIServer) -> None:
        # What socketserver.BaseRequestHandler's constructor does (its signature names a socket): the
        # three attributes, then setup(), handle() and finish(), here on bytes in memory.
        self.head = self.request = head
        self.client_address = client_address[:2]  # (host, port): the environment takes REMOTE_ADDR from it
        self.server = server
        self.setup()
        try:
            self.handle()
        finally:
            self.finish()

    def version_string(self) -> str:  # the Server header of error pages: no Python version
        return SERVER_SOFTWARE

    def setup(self) -> None:
        self._request_in = io.BytesIO(self.head)
        self._response_out = io.BytesIO()
        self.rfile, self.wfile = self._request_in, self._response_out
        self.response = b""

    def handle(self) -> None:
        self.raw_requestline = self.rfile.readline(MAX_REQUEST_LINE_BYTES + 1)
        if len(self.raw_requestline) > MAX_REQUEST_LINE_BYTES:
            # What http.server sets before its own 414: send_error logs and answers with them.
            self.requestline, self.request_version, self.command = "", "", ""
            self.send_error(414)
            return
        if not self.parse_request():  # it has written the error response
            return
        app = self.server.get_app()
        if app is None:  # never: MetricsServer sets its app before it serves
            raise RuntimeError("the WSGI server has no app")
        writer = _ResponseWriter(self._request_in, self._response_out, io.StringIO(), self.get_environ(),
                                 multithread=True)
        writer.run(app)

    def finish(self) -> None:
        self.response = self._response_out.getvalue()
        super().finish()

    def get_stderr(self) -> io.StringIO:  # wsgi.errors: nothing an app writes there reaches the exporter's stderr
        return io.StringIO()

    def log_message(self, format: str, *args: object) -> None:  # one line per scrape would drown stderr
        pass


def render(head: bytes, address: Address, server: WSGIServer) -> bytes:
    """The whole response to the request ``head`` from ``address``, answered by ``server``'s app."""
    return RequestHandler(head, address, server).response


def serve_head(app: WSGIApplication) -> WSGIApplication:
    """A WSGI app that answers HEAD as ``app`` answers GET, with its Content-Length and no body."""

    def wrapped(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "HEAD":
            return app(environ, start_response)
        started: list[tuple[str, list[tuple[str, str]]]] = []  # (status, headers): the last call counts

        def capture(status: str, headers: list[tuple[str, str]],
                    exc_info: OptExcInfo | None = None) -> Callable[[bytes], object]:
            started.append((status, headers))
            return lambda data: None

        result = app(dict(environ, REQUEST_METHOD="GET"), capture)
        try:
            length = sum(len(chunk) for chunk in result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        status, got_headers = started[-1]
        headers = [(k, v) for k, v in got_headers if k.lower() != "content-length"]
        start_response(status, headers + [("Content-Length", str(length))])
        return []

    return wrapped
