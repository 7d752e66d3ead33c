"""``http.render``: one request head in, the whole response out, with no socket: the WSGI environment a
worker builds from an IPv4 or an IPv6 client's address, HEAD answered as GET without a body, and the
errors the handler writes itself."""
from wsgiref.simple_server import WSGIServer

import pytest

from pinmon.export.http import MAX_REQUEST_LINE_BYTES, RequestHandler, render, serve_head


def echo_remote_addr(environ, start_response):
    body = f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']} from {environ['REMOTE_ADDR']}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


@pytest.fixture
def server():
    srv = WSGIServer(("127.0.0.1", 0), RequestHandler)
    srv.set_app(serve_head(echo_remote_addr))
    yield srv
    srv.server_close()


def split(response):
    head, _, body = response.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    return status, dict(line.split(": ", 1) for line in lines), body


@pytest.mark.parametrize("address, host", [(("10.1.2.3", 40000), "10.1.2.3"),
                                           (("fe80::1%eth0", 40000, 0, 2), "fe80::1%eth0")])
def test_the_environment_takes_the_clients_host_from_its_address(server, address, host):
    status, headers, body = split(render(b"GET /metrics HTTP/1.0\r\n\r\n", address, server))
    assert status.startswith("HTTP/1.0 200") and headers["Server"] == "pinmon"
    assert body == f"GET /metrics from {host}".encode()


def test_head_is_answered_as_get_without_the_body(server):
    _, get_headers, get_body = split(render(b"GET / HTTP/1.0\r\n\r\n", ("127.0.0.1", 1), server))
    status, headers, body = split(render(b"HEAD / HTTP/1.0\r\n\r\n", ("127.0.0.1", 1), server))
    assert status.startswith("HTTP/1.0 200") and body == b""
    assert int(headers["Content-Length"]) == len(get_body) == int(get_headers["Content-Length"])


def test_errors_are_written_by_the_handler(server):
    status, headers, _ = split(render(b"GET / with spaces HTTP/1.0\r\n\r\n", ("127.0.0.1", 1), server))
    assert status.startswith("HTTP/1.0 400") and headers["Server"] == "pinmon"
    long_line = b"GET /" + b"x" * MAX_REQUEST_LINE_BYTES + b" HTTP/1.0\r\n\r\n"
    status, _, _ = split(render(long_line, ("127.0.0.1", 1), server))
    assert status.startswith("HTTP/1.0 414")
