"""The exporter on a GPU box: scrape ``pinmon export`` live while a known pinned H2D load runs.

Usage: python bench/export_scrape.py OUTDIR [--load-seconds 8] [--probe-every 30]

Starts ``pinmon export`` (live, loopback, a free port, ``--probe-every``), scrapes /metrics before,
during and after ``bench/transfer_load.py`` (pinned 256 MiB host-to-device copies), then stops the
exporter with SIGTERM. Writes every scrape as ``OUTDIR/scrape-NN.txt``, the load's own count as
``OUTDIR/load.json``, the exporter's stderr, and ``OUTDIR/export_scrape.json``: per scrape the
scrape time and latency, RX/TX rate gauges, byte counters, link gen/width, probe figures and status;
and the RX counter's increase over the load window against the payload bytes the load moved
(expect ~1.08x: link bytes include protocol overhead).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance


def samples(text):
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def first(series, name, **labels):
    for labs, v in series.get(name, []):
        if all(labs.get(k) == w for k, w in labels.items()):
            return v
    return None


def summarize(series):
    g = {"gpu": "0"}
    return {
        "rx_bytes_per_s": first(series, "pinmon_gpu_pcie_rx_bytes_per_second", **g),
        "tx_bytes_per_s": first(series, "pinmon_gpu_pcie_tx_bytes_per_second", **g),
        "rx_bytes_total": first(series, "pinmon_gpu_pcie_rx_bytes_total", **g),
        "tx_bytes_total": first(series, "pinmon_gpu_pcie_tx_bytes_total", **g),
        "link_gen": first(series, "pinmon_gpu_pcie_link_gen", **g),
        "link_width": first(series, "pinmon_gpu_pcie_link_width", **g),
        "gpu_up": first(series, "pinmon_gpu_up", **g),
        "pinned_bytes_est": first(series, "pinmon_host_pinned_bytes_estimate"),
        "probe_pinned_h2d_bytes_per_s": first(series, "pinmon_probe_copy_bytes_per_second", memory="pinned", direction="h2d"),
        "probe_pageable_h2d_bytes_per_s": first(series, "pinmon_probe_copy_bytes_per_second", memory="pageable", direction="h2d"),
        "probe_speedup_h2d": first(series, "pinmon_probe_pinned_speedup_ratio", direction="h2d"),
        "probe_age_s": first(series, "pinmon_probe_age_seconds"),
        "status": first(series, "pinmon_status"),
        "findings": [labs for labs, v in series.get("pinmon_finding", [])],
        "process_series": len(series.get("pinmon_process_held_bytes", [])),
        "collection_errors": {labs.get("stage"): v for labs, v in series.get("pinmon_collection_errors_total", [])},
        "scrape_errors": first(series, "pinmon_scrape_errors_total"),
        "last_snapshot_time": first(series, "pinmon_last_snapshot_timestamp_seconds"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--load-seconds", type=float, default=8.0)
    ap.add_argument("--probe-every", type=float, default=30.0)
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    err_path = os.path.join(a.outdir, "export_stderr.txt")
    err = open(err_path, "w+")
    exporter = subprocess.Popen([sys.executable, "-m", "pinmon", "export", "--listen", "127.0.0.1:0",
                                 "--interval", "1", "--probe-every", str(a.probe_every)],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, text=True)
    url = None
    deadline = time.time() + 60
    while url is None and time.time() < deadline and exporter.poll() is None:
        time.sleep(0.2)
        err.seek(0)
        for line in err.read().splitlines():
            if "serving http" in line:
                url = line.split("serving ", 1)[1].split()[0]
    if url is None:
        exporter.kill()
        sys.exit(f"exporter did not start; see {err_path}")

    scrapes = []

    def scrape(phase):
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        latency = time.perf_counter() - t0
        n = len(scrapes)
        with open(os.path.join(a.outdir, f"scrape-{n:02d}.txt"), "w") as f:
            f.write(text)
        scrapes.append({"n": n, "phase": phase, "time": time.time(), "latency_s": latency,
                        **summarize(samples(text))})

    load = None
    try:
        time.sleep(3)  # two snapshots, so rates cover a full interval
        for _ in range(3):
            scrape("before")
            time.sleep(1)
        load_json = os.path.join(a.outdir, "load.json")
        proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "transfer_load.py"),
                                 str(a.load_seconds), "--json", load_json], cwd=ROOT, stdout=subprocess.DEVNULL)
        while proc.poll() is None:
            scrape("during")
            time.sleep(1)
        time.sleep(2.5)  # let the exporter's snapshot take in the load's last interval
        for _ in range(3):
            scrape("after")
            time.sleep(1)
        # Wait for a probe result if none came yet (the first probe starts ~2 s after start).
        end = time.time() + a.probe_every + 15
        while scrapes[-1]["probe_pinned_h2d_bytes_per_s"] is None and time.time() < end:
            time.sleep(2)
            scrape("probe")
        try:
            with open(load_json) as f:
                load = json.load(f)
        except (OSError, ValueError):
            load = {"error": f"transfer_load.py exited {proc.returncode} without writing load.json"}
    finally:
        exporter.send_signal(signal.SIGTERM)
        try:
            exit_code = exporter.wait(timeout=30)
        except subprocess.TimeoutExpired:
            exporter.kill()
            exit_code = "killed after 30 s"
        err.close()

    summary = {"provenance": provenance(), "url": url, "exporter_exit_code": exit_code, "load": load, "scrapes": scrapes}
    before = [s for s in scrapes if s["phase"] == "before" and s["rx_bytes_total"] is not None]
    after = [s for s in scrapes if s["phase"] == "after" and s["rx_bytes_total"] is not None]
    if load and "payload_bytes" in load and before and after:
        delta = after[-1]["rx_bytes_total"] - before[-1]["rx_bytes_total"]
        summary["rx_bytes_total_increase"] = delta
        summary["rx_link_over_payload"] = delta / load["payload_bytes"] if load["payload_bytes"] else None
    during = [s["rx_bytes_per_s"] for s in scrapes if s["phase"] == "during" and s["rx_bytes_per_s"]]
    summary["max_rx_bytes_per_s_during"] = max(during) if during else None
    summary["max_scrape_latency_s"] = max(s["latency_s"] for s in scrapes) if scrapes else None
    with open(os.path.join(a.outdir, "export_scrape.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "scrapes"}, indent=1))


if __name__ == "__main__":
    main()
