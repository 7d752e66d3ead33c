"""What each trace engine sees of a process's host<->device copies, against the GPU's own link bytes.

For the GPU box. One workload process (``--child``) mixes what a training job does: a PyTorch
``DataLoader(pin_memory=True)`` feeding batches to the GPU, a pageable copy loop, a ``torch.compile``d
function that moves data host->device and back, results copied back into a pinned buffer, and a JAX
``device_put`` loop. It runs under
``pinmon trace --engine cupti`` and then ``--engine hooks``, while this process counts the GPU's link
bytes with pinmon's own collector (GPM on Hopper: every link byte of each interval). The link carries
~7.8% of protocol overhead on top of the payload (FACTS.md), so link bytes / 1.078 estimate the payload.

Per engine: the copy bytes its final report counts (both directions, every host memory kind), over
the payload-corrected link bytes of the run's window: the share of the traffic the engine sees.
Goal: at least 0.95 for CUPTI. Then ``pinmon probe`` runs on the same GPU, and the CUPTI run's
achieved rates per host memory kind and direction are set beside the probe's.

Usage: python3 bench/trace_coverage.py OUT.json [--seconds 8]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance

LINK_OVERHEAD = 1.078
MIB = 1 << 20


# --- the workload ------------------------------------------------------------------------------------

def workload(seconds: float) -> dict:
    """Each part runs for a share of ``seconds``; returns the payload bytes each part asked to move."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import torch

    moved = {}
    part_s = seconds / 5
    dev = torch.device("cuda")

    # 1. DataLoader with pinned batches, copied non_blocking.
    class Synthetic(torch.utils.data.Dataset):
        def __len__(self):
            return 10**6

        def __getitem__(self, i):
            return torch.full((256, 1024), float(i % 7))  # 1 MiB of float32 per sample

    loader = torch.utils.data.DataLoader(Synthetic(), batch_size=8, pin_memory=True, num_workers=2)
    n = 0
    end = time.monotonic() + part_s
    for batch in loader:
        batch.to(dev, non_blocking=True)
        n += batch.numel() * batch.element_size()
        if time.monotonic() > end:
            break
    torch.cuda.synchronize()
    moved["dataloader_h2d"] = n

    # 2. Pageable copies both ways.
    host = torch.ones(16 * MIB // 4)
    n = 0
    end = time.monotonic() + part_s
    while time.monotonic() < end:
        d = host.to(dev)
        d.cpu()
        n += 2 * host.numel() * 4
    torch.cuda.synchronize()
    moved["pageable_both"] = n

    # 3. A compiled function that moves data host->device and back.
    @torch.compile
    def roundtrip(x):
        y = x.to(dev) * 2
        return y.to("cpu")

    x = torch.ones(4 * MIB // 4).pin_memory()
    roundtrip(x)  # compiled here, so that the part's time goes to its copies
    n = 0
    end = time.monotonic() + part_s
    while time.monotonic() < end:
        roundtrip(x)
        n += 2 * x.numel() * 4
    torch.cuda.synchronize()
    moved["compiled_roundtrip"] = n

    # 4. Results copied back into a pinned host buffer (device->host from pinned memory).
    result = torch.ones(16 * MIB // 4, device=dev)
    out = torch.empty(result.numel(), pin_memory=True)
    n = 0
    end = time.monotonic() + part_s
    while time.monotonic() < end:
        out.copy_(result, non_blocking=True)
        torch.cuda.synchronize()
        n += out.numel() * 4
    moved["pinned_d2h"] = n

    # 5. JAX device_put of a NumPy array.
    try:
        import jax
        import numpy as np

        a = np.ones(8 * MIB // 4, np.float32)
        gpu = jax.devices("gpu")[0]
        n = 0
        end = time.monotonic() + part_s
        while time.monotonic() < end:
            jax.device_put(a, gpu).block_until_ready()
            n += a.nbytes
        moved["jax_device_put"] = n
    except Exception as e:
        moved["jax_error"] = f"{type(e).__name__}: {e}"[:200]
    return moved


# --- the measurement ---------------------------------------------------------------------------------

class LinkCounter:
    """pinmon's collector, one snapshot a second: the exact link bytes of every interval."""

    def __init__(self):
        sys.path.insert(0, ROOT)
        from pinmon.collect.live import LiveCollector

        self.col = LiveCollector(interval_s=0.5)
        self.rows = []
        self._stop = threading.Event()
        self.col.snapshot()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(0.5):
            s = self.col.snapshot()
            g = s.gpus[0] if s.gpus else None
            if g is not None:
                self.rows.append((s.time, g.pcie.method, g.pcie.rx_bytes, g.pcie.tx_bytes, g.pcie.interval_s))

    def bytes_between(self, t0: float, t1: float) -> dict:
        """Link bytes of the intervals that end inside [t0, t1 + one interval]."""
        rx = tx = 0
        methods = set()
        for t, method, r, x, _ in self.rows:
            if t0 < t <= t1 + 1.0:
                methods.add(method)
                rx += r or 0
                tx += x or 0
        return {"rx_bytes": rx, "tx_bytes": tx, "methods": sorted(m for m in methods if m)}

    def close(self):
        self._stop.set()
        self._t.join(5)
        self.col.close()


def report_copy_bytes(report: dict) -> dict:
    copies = report.get("copies") or {}
    out = {}
    for d in ("h2d", "d2h"):
        for mem, row in (copies.get(d) or {}).items():
            if isinstance(row, dict) and row.get("bytes"):
                out[f"{d}.{mem}"] = row["bytes"]
    return out


def run_engine(engine: str, seconds: float, link: LinkCounter) -> dict:
    with tempfile.TemporaryDirectory() as d:
        trace_dir = os.path.join(d, "trace")
        os.mkdir(trace_dir, 0o700)
        out_path = os.path.join(d, "moved.json")
        time.sleep(1.5)  # a quiet interval before
        t0 = time.time()
        p = subprocess.run([sys.executable, "-m", "pinmon", "trace", "--dir", trace_dir, "--engine", engine, "--",
                            sys.executable, os.path.abspath(__file__), out_path, "--child", "--seconds", str(seconds)],
                           capture_output=True, text=True, timeout=seconds * 6 + 120,
                           env=dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])))
        t1 = time.time()
        time.sleep(1.5)  # the last interval lands
        reports = []
        for name in os.listdir(trace_dir):
            if name.endswith(".json"):
                with open(os.path.join(trace_dir, name)) as f:
                    reports.append(json.load(f))
        try:
            with open(out_path) as f:
                moved = json.load(f)
        except (OSError, ValueError):
            moved = {}
    main = max(reports, key=lambda r: sum(report_copy_bytes(r).values()), default={})
    seen = report_copy_bytes(main)
    lb = link.bytes_between(t0, t1)
    payload = (lb["rx_bytes"] + lb["tx_bytes"]) / LINK_OVERHEAD
    row = {"engine": engine, "rc": p.returncode, "stderr_tail": p.stderr[-1500:], "window_s": t1 - t0,
           "engine_in_report": main.get("engine"), "engine_notice": main.get("engine_notice"),
           "reports": len(reports), "moved_asked": moved, "seen_bytes": seen, "seen_total": sum(seen.values()),
           "link": lb, "link_payload_est": payload,
           "coverage": sum(seen.values()) / payload if payload else None}
    if engine == "cupti":
        cupti = main.get("cupti") or {}
        row["achieved"] = {f"{d}.{m}": {k: ((cupti.get("copies") or {}).get(d) or {}).get(m, {}).get(k)
                                        for k in ("achieved_bytes_per_s", "rate_p50", "rate_p10", "bytes")}
                           for d in ("h2d", "d2h") for m in ("pinned", "pageable")}
        row["record_path"] = cupti.get("record_path")
        row["dropped_records"] = cupti.get("dropped_records")
    return row


def probe_rates() -> dict:
    p = subprocess.run([sys.executable, "-m", "pinmon", "probe", "--json"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])))
    try:
        return probe_rates_of(json.loads(p.stdout))
    except (ValueError, KeyError, IndexError, TypeError):
        return {"error": (p.stderr or p.stdout)[-500:]}


def probe_rates_of(doc: dict) -> dict:
    """The probe's rate per direction and host memory kind ("h2d.pinned"...), at its largest size,
    from ``pinmon probe --json`` (one entry per GPU, its probe result under ``result``)."""
    res = doc["results"][0]["result"]
    out: dict = {"status": res.get("status"), "reason": res.get("reason"), "kind": res.get("kind")}
    for m in res.get("measurements", []):
        if m.get("kind") == "copy" and m.get("memory") in ("pinned", "pageable"):
            key = f"{m['direction']}.{m['memory']}"
            if m.get("size_bytes", 0) >= out.get(key, {}).get("size_bytes", 0):
                out[key] = {"size_bytes": m["size_bytes"], "bytes_per_s": m.get("bytes_per_s")}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        moved = workload(args.seconds)
        with open(args.out, "w") as f:
            json.dump(moved, f)
        return 0
    link = LinkCounter()
    try:
        rows = [run_engine(e, args.seconds, link) for e in ("cupti", "hooks")]
    finally:
        link.close()
    probe = probe_rates()
    doc = {"schema": "pinmon.bench.trace_coverage/1", "time": time.time(), "provenance": provenance(),
           "link_overhead": LINK_OVERHEAD, "goal_coverage": 0.95,
           "engines": rows, "probe": probe}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    for r in rows:
        cov = r["coverage"]
        print(f"{r['engine']}: rc {r['rc']}, report engine {r['engine_in_report']}, seen {r['seen_total'] / 1e9:.2f} GB"
              f" of ~{r['link_payload_est'] / 1e9:.2f} GB payload on the link ({r['link']['methods']}):"
              f" coverage {cov if cov is None else round(cov, 3)}")
    for k, v in (rows[0].get("achieved") or {}).items():
        pr = (probe.get(k) or {}).get("bytes_per_s") if isinstance(probe.get(k), dict) else None
        print(f"  {k}: traced achieved {v.get('achieved_bytes_per_s')}, probe {pr}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
