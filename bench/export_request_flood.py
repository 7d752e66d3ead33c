"""The exporter under a flood of complete requests that nobody reads: does Prometheus still get its scrapes?

Usage: python3 bench/export_request_flood.py OUT.json [--floods 4] [--connections 100] [--scrapes 20]
       [--timeout 10] [--every 0.25]

``pinmon export --replay pinmon/data/demo.jsonl.gz`` serves on a free loopback port. ``--floods``
processes each open ``--connections`` connections, send ``GET /metrics`` on each, close them all
without reading a byte, and start over, as fast as they can. Meanwhile a scraper asks for /metrics
``--scrapes`` times, one every ``--every`` seconds (or right after the last one ends), each with
``--timeout`` (Prometheus's default scrape timeout is 10 s). Two cells, each on a fresh exporter: ``other_user``, the floods running as uid 65534 (a
local user without privileges; needs root, else left out), and ``same_user``, the floods running as
the scraper's own user (the exporter cannot tell them apart: only its newest-first order and its
skipping of abandoned requests help). Each records the scrapes answered, each one's time, the
requests the flood sent, and the exporter's CPU time. CPU only; no GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import portable_argv, provenance

FLOOD_UID = 65534  # nobody
REQUEST = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def flood(port: int, connections: int, uid: int | None) -> None:
    """One flooding process: prints its requests sent so far, once a round, until killed."""
    if uid is not None:
        os.setgid(uid)
        os.setuid(uid)
    sent = 0
    while True:
        held = []
        for _ in range(connections):
            try:
                s = socket.socket()
                s.connect(("127.0.0.1", port))
                s.sendall(REQUEST)
                held.append(s)
                sent += 1
            except OSError:
                pass
        for s in held:
            s.close()
        print(sent, flush=True)


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(floods: int, connections: int, scrapes: int, timeout_s: float, every_s: float, same_user: bool) -> dict:
    demo = os.path.join(ROOT, "pinmon", "data", "demo.jsonl.gz")
    server = subprocess.Popen([sys.executable, "-m", "pinmon", "export", "--replay", demo, "--listen",
                               "127.0.0.1:0"], cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    flooders: list[subprocess.Popen] = []
    try:
        line = server.stderr.readline()
        if "serving " not in line:
            raise SystemExit(f"the exporter did not start: {line}{server.stderr.read()}")
        url = line.split("serving ", 1)[1].split()[0]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        uid = None if same_user or os.geteuid() != 0 else FLOOD_UID
        flooders = [subprocess.Popen([sys.executable, __file__, "--flood", str(port), "--connections", str(connections)]
                                     + (["--uid", str(uid)] if uid is not None else []),
                                     stdout=subprocess.PIPE, text=True) for _ in range(floods)]
        for p in flooders:  # every flood has finished a first round before the first scrape
            p.stdout.readline()
        cpu0, t0 = _cpu_s(server.pid), time.monotonic()
        times: list[float | None] = []
        for i in range(scrapes):
            time.sleep(max(0.0, t0 + i * every_s - time.monotonic()))
            start = time.monotonic()
            try:
                with urllib.request.urlopen(url, timeout=timeout_s) as r:
                    ok = r.status == 200 and b"pinmon_status" in r.read()
            except Exception:
                ok = False
            times.append(round(time.monotonic() - start, 4) if ok else None)
        elapsed, cpu = time.monotonic() - t0, _cpu_s(server.pid) - cpu0
    finally:
        for p in flooders:
            p.kill()
        sent = 0
        for p in flooders:
            out, _ = p.communicate()
            counts = [int(x) for x in out.split() if x.isdigit()]
            sent += counts[-1] if counts else 0
        server.terminate()
        server.wait(timeout=10)
    answered = [t for t in times if t is not None]
    return {"floods": floods, "connections_each": connections, "flood_uid": uid if uid is not None else os.geteuid(),
            "scraper_uid": os.geteuid(), "scrapes": scrapes, "answered": len(answered),
            "scrape_timeout_s": timeout_s, "scrape_every_s": every_s, "scrape_s": times, "slowest_s": max(answered, default=None),
            "flood_requests_sent": sent, "seconds": round(elapsed, 2),
            "exporter_cpu_share_of_a_core": round(cpu / elapsed, 3) if elapsed else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--floods", type=int, default=4)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--every", type=float, default=0.25)
    ap.add_argument("--flood", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--uid", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.flood:
        flood(args.flood, args.connections, args.uid)
        return 0
    if not args.out:
        ap.error("OUT.json is needed")
    cells = (["other_user"] if os.geteuid() == 0 else []) + ["same_user"]
    results = {}
    for cell in cells:
        r = results[cell] = run(args.floods, args.connections, args.scrapes, args.timeout, args.every,
                                 cell == "same_user")
        print(f"{cell}: {r['answered']}/{r['scrapes']} scrapes answered, slowest {r['slowest_s']} s, "
              f"{r['flood_requests_sent']} flood requests in {r['seconds']} s")
    doc = {"argv": portable_argv(sys.argv), "results": results, "provenance": provenance()}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
