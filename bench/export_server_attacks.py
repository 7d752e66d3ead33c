"""The exporter's HTTP server against the library's and the standard library's, under the attacks a
local user can make: which ones keep answering Prometheus, and at what cost in threads.

Usage: python3 bench/export_server_attacks.py OUT.json [--scrapes 4] [--timeout 5]

Three servers, each in a process of its own, serving the same prometheus_client registry:

- ``pinmon``: ``pinmon.export.MetricsServer`` (a selector loop owns every connection; four workers
  only render);
- ``library``: ``prometheus_client.start_wsgi_server``, what ``start_http_server`` runs (a thread
  per connection, no timeouts);
- ``bounded``: wsgiref's ``WSGIServer`` with a pool of four threads, each connection read and
  written with a 5 s socket timeout (a bounded stdlib server with timeouts).

Three attacks, each on a fresh server: ``non_readers`` (40 clients send a request for a 4 MB
scrape and never read it: the scrape a 128 KiB process name once made), ``half_requests`` (200
clients send half a request head and wait) and ``idle_flood`` (a thread opens connections as fast as
it can, holding the newest 600). During each, ``--scrapes`` scrapes with a ``--timeout`` each;
per cell the result records the scrapes answered, their slowest time, the connections the attack
opened, the server's most threads seen and its RSS at the end. CPU only; no GPU.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import portable_argv, provenance

SERVERS = ("pinmon", "library", "bounded")
ATTACKS = ("non_readers", "half_requests", "idle_flood")
RESPONSE_BYTES = 4 << 20


# --- the server side (run as: export_server_attacks.py --serve KIND) -----------------------------

def _registry():
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily

    class Large:
        def collect(self):
            family = GaugeMetricFamily("large", "x" * RESPONSE_BYTES)
            family.add_metric([], 1)
            yield family

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Large())
    return registry


def _bounded_server(registry):
    """wsgiref's server, each connection handed to a pool of 4 threads, sockets with a 5 s timeout."""
    from concurrent.futures import ThreadPoolExecutor
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

    from prometheus_client import make_wsgi_app

    class Quiet(WSGIRequestHandler):
        timeout = 5.0

        def log_message(self, *args):
            pass

    class Pooled(WSGIServer):
        request_queue_size = 1024
        pool = ThreadPoolExecutor(4)

        def process_request(self, request, client_address):
            self.pool.submit(self._handle, request, client_address)

        def _handle(self, request, client_address):
            try:
                self.finish_request(request, client_address)
            except Exception:
                pass
            finally:
                self.shutdown_request(request)

    httpd = Pooled(("127.0.0.1", 0), Quiet)
    httpd.set_app(make_wsgi_app(registry))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd.server_address[1]


def serve(kind: str) -> None:
    registry = _registry()
    if kind == "pinmon":
        sys.path.insert(0, ROOT)
        from pinmon.export import MetricsServer

        port = MetricsServer(registry, "127.0.0.1", 0).start().port
    elif kind == "library":
        from prometheus_client import start_wsgi_server

        server, _thread = start_wsgi_server(0, "127.0.0.1", registry)
        port = server.server_address[1]
    else:
        port = _bounded_server(registry)
    print(port, flush=True)
    sys.stdin.read()  # until the parent closes it


# --- the attacks ---------------------------------------------------------------------------------

def _connect(port: int, send: bytes = b"", rcvbuf: int = 0) -> socket.socket:
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    if send:
        s.sendall(send)
    return s


def _flood(port: int, stop: threading.Event, held: collections.deque, opened: list) -> None:
    while not stop.is_set():
        try:
            held.append(_connect(port))
            opened[0] += 1
        except OSError:
            pass
        while len(held) > 600:
            held.popleft().close()


def _proc_status(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Threads", "VmRSS"):
                out[key] = int(value.split()[0])
    return {"threads": out.get("Threads"), "rss_kib": out.get("VmRSS")}


def attack(kind: str, name: str, scrapes: int, timeout_s: float) -> dict:
    p = subprocess.Popen([sys.executable, __file__, "--serve", kind], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    socks: list = []
    held: collections.deque = collections.deque()
    stop = threading.Event()
    flood = None
    opened = [0]
    try:
        port = int(p.stdout.readline())
        url = f"http://127.0.0.1:{port}/metrics"
        if name == "non_readers":
            socks = [_connect(port, b"GET /metrics HTTP/1.0\r\n\r\n", rcvbuf=4096) for _ in range(40)]
        elif name == "half_requests":
            socks = [_connect(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n") for _ in range(200)]
        else:
            flood = threading.Thread(target=_flood, args=(port, stop, held, opened))
            flood.start()
            time.sleep(0.5)
        answered, slowest, threads = 0, 0.0, 0
        for _ in range(scrapes):
            threads = max(threads, _proc_status(p.pid)["threads"] or 0)
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(url, timeout=timeout_s) as r:
                    r.read()
                answered += 1
            except Exception:
                pass
            slowest = max(slowest, time.monotonic() - t0)
        status = _proc_status(p.pid)
        return {"scrapes": scrapes, "answered": answered, "slowest_s": round(slowest, 3),
                "connections_opened": len(socks) + opened[0], "threads_most": max(threads, status["threads"] or 0),
                "rss_kib": status["rss_kib"]}
    finally:
        stop.set()
        if flood is not None:
            flood.join()
        for s in list(socks) + list(held):
            s.close()
        p.kill()
        err = p.stderr.read()
        p.wait()
        p.stdin.close()
        # Tracebacks the server wrote while attacked: each is a line of its stderr for an operator.
        if "Traceback" in err:
            print(f"{kind}/{name}: {err.count('Traceback')} tracebacks on stderr", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--scrapes", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--serve", choices=SERVERS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    if not args.out:
        ap.error("OUT.json is needed")
    results = {kind: {name: attack(kind, name, args.scrapes, args.timeout) for name in ATTACKS} for kind in SERVERS}
    for kind, cells in results.items():
        print(kind, {name: f"{c['answered']}/{c['scrapes']} ({c['threads_most']} threads)" for name, c in cells.items()})
    doc = {"argv": portable_argv(sys.argv), "response_bytes": RESPONSE_BYTES, "scrape_timeout_s": args.timeout,
           "results": results, "provenance": provenance()}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
