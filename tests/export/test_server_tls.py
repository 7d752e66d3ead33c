"""The exporter over TLS: certificates made at test time (trustme), scrapes with and without a client
certificate, a plain HTTP request to the TLS port, clients that never finish the handshake or never
read a large response (they hold no worker), and the command line's one-line errors for bad files."""
from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from pinmon.export import ExportState, MetricsServer, build_registry
from pinmon.export.tls import TlsError, server_context
from tests import factories as make
from tests.waiting import wait_until

from .test_server import GET, _Large, close_all

trustme = pytest.importorskip("trustme", reason="trustme (the test extra) is not installed")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Pki:
    """A server CA and certificate for 127.0.0.1, and a client CA with one client certificate, as files."""

    def __init__(self, d):
        self.dir = d
        self.ca = trustme.CA()
        server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.cert, self.key, self.ca_file = str(d / "tls.crt"), str(d / "tls.key"), str(d / "ca.crt")
        server.cert_chain_pems[0].write_to_path(self.cert)
        server.private_key_pem.write_to_path(self.key)
        self.ca.cert_pem.write_to_path(self.ca_file)
        self.both = str(d / "both.pem")
        server.private_key_and_cert_chain_pem.write_to_path(self.both)
        self.client_ca = trustme.CA()
        self.client = self.client_ca.issue_cert("prometheus")
        self.client_ca_file = str(d / "client-ca.crt")
        self.client_ca.cert_pem.write_to_path(self.client_ca_file)

    def client_context(self, with_cert=False) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if with_cert:
            self.client.configure_cert(ctx)
        return ctx


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


def tls_server(pki, client_ca=False, registry=None, **kw):
    if registry is None:
        state = ExportState()
        state.add_snapshot(make.full_snapshot())
        registry = build_registry(state)
    ctx = server_context(pki.cert, pki.key, pki.client_ca_file if client_ca else None)
    return MetricsServer(registry, "127.0.0.1", 0, tls=ctx, **kw).start()


def scrape(url, ctx, timeout=10.0):
    with urllib.request.urlopen(url, context=ctx, timeout=timeout) as r:
        assert r.status == 200
        return r.read()


def test_a_scrape_over_tls(pki):
    srv = tls_server(pki)
    try:
        assert srv.url.startswith("https://127.0.0.1:")
        assert b"pinmon_host_memory_total_bytes" in scrape(srv.url, pki.client_context())
        assert srv.counts()["served"] == 1 and srv.counts()["tls_failed"] == 0
    finally:
        srv.stop()


def test_a_client_certificate_is_required_when_a_client_ca_is_given(pki):
    srv = tls_server(pki, client_ca=True)
    try:
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            scrape(srv.url, pki.client_context())
        other = trustme.CA().issue_cert("intruder")  # a certificate of another CA
        ctx = pki.client_context()
        other.configure_cert(ctx)
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            scrape(srv.url, ctx)
        assert b"pinmon_status" in scrape(srv.url, pki.client_context(with_cert=True))
        wait_until(lambda: srv.counts()["tls_failed"] == 2, what="two refused handshakes")
        assert srv.counts()["served"] == 1
    finally:
        srv.stop()


def test_plain_http_to_the_tls_port_gets_a_plain_400(pki):
    srv = tls_server(pki)
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(srv.url.replace("https://", "http://"), timeout=10)
        assert e.value.code == 400 and e.value.read() == b"this exporter speaks TLS: use https://\n"
        assert srv.counts()["plain_to_tls"] == 1 and srv.counts()["served"] == 0
        assert b"pinmon_status" in scrape(srv.url, pki.client_context())  # and goes on serving TLS
    finally:
        srv.stop()


def test_clients_that_never_finish_the_handshake_hold_no_worker(pki):
    srv = tls_server(pki, timeout_s=60.0)
    socks = []
    try:
        for i in range(srv.workers * 4):
            s = socket.create_connection(("127.0.0.1", srv.port))
            if i % 2:
                s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # the start of a ClientHello
            socks.append(s)
        wait_until(lambda: srv.counts()["waiting"] == len(socks), what="every connection waiting")
        assert b"pinmon_status" in scrape(srv.url, pki.client_context())
        assert srv.counts()["expired"] == 0  # served beside them, none had to time out first
    finally:
        close_all(socks)
        srv.stop()


def test_an_unfinished_handshake_ends_at_the_request_deadline(pki):
    srv = tls_server(pki, timeout_s=0.3)
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
            assert s.recv(10) == b""  # closed by the server
        assert srv.expired == 1
    finally:
        srv.stop()


def test_tls_clients_that_never_read_a_large_response_hold_no_worker(pki):
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Large(8 << 20))
    srv = tls_server(pki, registry=registry, timeout_s=30.0, response_timeout_s=30.0)
    socks = []
    try:
        for _ in range(srv.workers * 2):
            raw = socket.socket()
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            raw.settimeout(10)
            raw.connect(("127.0.0.1", srv.port))
            s = pki.client_context().wrap_socket(raw, server_hostname="127.0.0.1")
            s.sendall(GET)
            socks.append(s)
        wait_until(lambda: srv.counts()["served"] == len(socks), what="the responses rendered")
        for _ in range(2):
            assert len(scrape(srv.url, pki.client_context(), timeout=30.0)) > 8 << 20
    finally:
        close_all(socks)
        srv.stop()


def test_tls_is_applied_to_each_connection_from_the_loop_thread_only(pki):
    # The handshake runs on the loop: the worker threads are the same few before and after.
    before = threading.active_count()
    srv = tls_server(pki)
    try:
        for _ in range(3):
            scrape(srv.url, pki.client_context())
        assert threading.active_count() <= before + 1 + srv.workers  # the loop and the workers, no more
    finally:
        srv.stop()


# --- the settings' files ---------------------------------------------------------------------------

def test_the_key_may_be_in_the_certificate_file(pki):
    assert isinstance(server_context(pki.both), ssl.SSLContext)


@pytest.mark.parametrize("case, needle", [
    ("missing-cert", "--tls-cert {d}/none.pem: no such file"),
    ("missing-key", "--tls-key {d}/none.pem: no such file"),
    ("cert-is-a-key", "--tls-cert {key}: no PEM certificate in it"),
    ("key-of-another", "--tls-key {d}/other.key: not the key of the certificate in {cert}"),
    ("encrypted-key", "--tls-key {d}/enc.key: the key is encrypted"),
    ("fifo", "--tls-cert {d}/fifo: is a FIFO, not a regular file"),
    ("directory", "--tls-key {d}: is a directory, not a regular file"),
    ("ca-is-garbage", "--tls-client-ca {d}/garbage: no PEM CA certificate in it"),
])
def test_bad_files_are_one_line(pki, tmp_path, case, needle):
    d = tmp_path
    cert, key, ca = pki.cert, pki.key, None
    if case == "missing-cert":
        cert = str(d / "none.pem")
    elif case == "missing-key":
        key = str(d / "none.pem")
    elif case == "cert-is-a-key":
        cert = pki.key
    elif case == "key-of-another":
        pki.ca.issue_cert("other").private_key_pem.write_to_path(str(d / "other.key"))
        key = str(d / "other.key")
    elif case == "encrypted-key":
        from cryptography.hazmat.primitives import serialization

        plain = serialization.load_pem_private_key(open(pki.key, "rb").read(), None)
        (d / "enc.key").write_bytes(plain.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.BestAvailableEncryption(b"secret")))
        key = str(d / "enc.key")
    elif case == "fifo":
        os.mkfifo(d / "fifo")
        cert = str(d / "fifo")
    elif case == "directory":
        key = str(d)
    elif case == "ca-is-garbage":
        (d / "garbage").write_text("not a certificate\n")
        ca = str(d / "garbage")
    with pytest.raises(TlsError) as e:
        server_context(cert, key, ca)
    assert str(e.value).startswith(needle.format(d=d, key=pki.key, cert=pki.cert)), str(e.value)
    assert "\n" not in str(e.value)


def pinmon(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "pinmon", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("args, needle", [
    (["--tls-cert", "/nonexistent/tls.crt", "--tls-key", "/nonexistent/tls.key"], "--tls-cert /nonexistent/tls.crt: no such file"),
    (["--tls-key", "{key}"], "--tls-key and --tls-client-ca need --tls-cert"),
    (["--tls-client-ca", "{ca}"], "--tls-key and --tls-client-ca need --tls-cert"),
    (["--tls-cert", "{cert}", "--tls-key", "{cert}"], "--tls-key {cert}: no PEM private key in it"),
    (["--tls-cert", "{cert}", "--tls-key", "{key}", "--once"], "--tls-cert serves https; --once prints"),
])
def test_the_command_refuses_bad_tls_settings_in_one_line(pki, args, needle):
    args = [a.format(cert=pki.cert, key=pki.key, ca=pki.ca_file) for a in args]
    r = pinmon("export", "--listen", "127.0.0.1:0", *args)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.count("\n") == 1 and needle.format(cert=pki.cert) in r.stderr and "Traceback" not in r.stderr


def test_pinmon_export_serves_https_with_a_client_certificate(pki):
    demo = os.path.join(ROOT, "pinmon", "data", "demo.jsonl.gz")
    p = subprocess.Popen([sys.executable, "-m", "pinmon", "export", "--replay", demo, "--listen", "127.0.0.1:0",
                          "--tls-cert", pki.cert, "--tls-key", pki.key, "--tls-client-ca", pki.client_ca_file],
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        assert "serving https://127.0.0.1:" in line, line
        url = line.split("serving ", 1)[1].split()[0]
        assert b"pinmon_status" in scrape(url, pki.client_context(with_cert=True))
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            scrape(url, pki.client_context())
    finally:
        p.terminate()
        p.wait(timeout=20)
    assert p.returncode == 0
