"""The goals of the 8-GPU run, pass or fail, from the raw files bench/multi_gpu_batch.sh wrote. Pure:
reads files, no GPU, no NVML; tests/test_bench_multi_gpu.py feeds it synthetic results.

    python3 bench/multi_gpu_summary.py OUTDIR      writes OUTDIR/summary.json, one line per goal

Goals:
- ``accuracy``: per GPU, pinmon's RX link bytes over the intervals that lie inside the window where
  every load ran (``watch.json``) against the payload the load counted over the same intervals
  (``load.json``), divided by the link's protocol overhead (``LINK_OVERHEAD``, 1.078 measured on an
  H200): within ``ACCURACY_TOLERANCE`` (2%) on every GPU. Loads and pinmon's GPUs are matched by PCI
  bus id, never by index. ``mixed_up`` lists loads whose payload rate is nearer another GPU's
  reading than their own GPU's.
- ``screenshots``: the 80x24 live screenshots together show every GPU, each GPU's RX figure on
  them is nearest its own load's link rate (no GPU shows another's traffic).
- ``overhead``: the live app's CPU share at most nvitop's, in both orders.
- ``scale``: a snapshot with every GPU at most 2x the CPU of one with one GPU (real NVML).
- ``probe``: ``pinmon probe --gpu all``: pinned H2D and D2H of every GPU at least 85% of its link
  at its rated generation and width; its wall time.
- ``numa``: ``probe --numa`` local vs remote per GPU (figures only), and ``pinned-numa-remote``
  among ``pinmon check``'s findings for the process holding pinned memory on the far node.
A goal whose files are missing reads ``"pass": null`` with what is missing.
"""
from __future__ import annotations

import bisect
import glob
import html
import json
import os
import re
import statistics
import sys
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

LINK_OVERHEAD = 1.078
ACCURACY_TOLERANCE = 0.02
SETTLE_S = 1.0  # after the last load starts: each load's first copies and pacing settle
PROBE_MIN_SHARE = 0.85
SCALE_MAX_RATIO = 2.0


def bus_key(pci_bus_id: str | None) -> str | None:
    """One spelling of a PCI address for NVML's "00000000:17:00.0" and CUDA's "0000:17:00.0"."""
    from pinmon.collect.nvml import sysfs_pci_address

    return sysfs_pci_address(pci_bus_id)


# --- accuracy ------------------------------------------------------------------------------------

def payload_at(timeline: Sequence[Sequence[float]], t: float) -> float:
    """Payload bytes counted by time ``t``, linear between the timeline's points."""
    if not timeline:
        return 0.0
    times = [p[0] for p in timeline]
    k = bisect.bisect_right(times, t)
    if k == 0:
        return float(timeline[0][1])
    if k == len(timeline):
        return float(timeline[-1][1])
    (t0, b0), (t1, b1) = timeline[k - 1], timeline[k]
    return b0 + (b1 - b0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)


def payload_between(timeline: Sequence[Sequence[float]], t0: float, t1: float) -> float:
    return payload_at(timeline, t1) - payload_at(timeline, t0)


def accuracy(load: dict, watch: dict, *, link_overhead: float = LINK_OVERHEAD,
             tolerance: float = ACCURACY_TOLERANCE, settle_s: float = SETTLE_S) -> dict:
    loads = {bus_key(g.get("pci_bus_id")): g for g in load.get("gpus", ()) if "error" not in g}
    errors = [g for g in load.get("gpus", ()) if "error" in g]
    if not loads:
        return {"pass": None if "error" in load else False, "reason": load.get("error") or "no load ran",
                "load_errors": errors}
    start = max(g["start"] for g in loads.values()) + settle_s
    end = min(g["end"] for g in loads.values())
    # Each interval a snapshot closes: [time - interval_s, time], kept where inside [start, end].
    per_gpu: dict[str | None, list[dict]] = {}
    for snap in watch.get("snapshots", ()):
        for row in snap.get("gpus", ()):
            if row.get("interval_s") is None:
                continue
            t1 = snap["time"]
            t0 = t1 - row["interval_s"]
            if t0 >= start and t1 <= end:
                per_gpu.setdefault(bus_key(row.get("pci_bus_id")), []).append({**row, "t0": t0, "t1": t1})
    gpus = []
    readings: dict[str | None, float | None] = {}  # pinmon's payload-corrected rate per GPU
    for bus, rows in per_gpu.items():
        exact = [r for r in rows if r.get("rx_bytes") is not None]
        span = sum(r["t1"] - r["t0"] for r in exact)
        readings[bus] = (sum(r["rx_bytes"] for r in exact) / span / link_overhead) if span > 0 else None
    for bus, g in sorted(loads.items(), key=lambda kv: kv[1]["cuda_index"]):
        rows = per_gpu.get(bus, [])
        exact = [r for r in rows if r.get("rx_bytes") is not None]
        out: dict[str, Any] = {"cuda_index": g["cuda_index"], "pci_bus_id": bus, "intervals": len(exact),
                               "methods": sorted({str(r.get("method")) for r in rows}),
                               "target_bytes_per_s": g.get("target_bytes_per_s"), "copy_bytes": g.get("copy_bytes"),
                               "nvml_index": rows[0]["index"] if rows else None,
                               "links_seen": sorted({f"Gen{r.get('gen')} x{r.get('width')}" for r in rows})}
        if not exact:
            out.update({"pass": False, "reason": "no exact link bytes from pinmon for this GPU in the window"})
            gpus.append(out)
            continue
        link = sum(r["rx_bytes"] for r in exact)
        payload = sum(payload_between(g["timeline"], r["t0"], r["t1"]) for r in exact)
        span = sum(r["t1"] - r["t0"] for r in exact)
        per = [r["rx_bytes"] / p / link_overhead for r in exact
               if (p := payload_between(g["timeline"], r["t0"], r["t1"])) > 0]
        ratio = link / payload / link_overhead if payload > 0 else None
        own_rate = payload / span if span > 0 else None
        nearest = min((b for b in readings if readings[b] is not None),
                      key=lambda b: abs(readings[b] - own_rate), default=None) if own_rate else None
        out.update({"payload_bytes": payload, "link_rx_bytes": link, "seconds": span,
                    "payload_bytes_per_s": own_rate, "ratio_over_payload": link / payload if payload else None,
                    "ratio_corrected": ratio,
                    "interval_ratio_min": min(per) if per else None, "interval_ratio_max": max(per) if per else None,
                    "interval_ratio_median": statistics.median(per) if per else None,
                    "nearest_reading_gpu": nearest,
                    "pass": ratio is not None and abs(ratio - 1.0) <= tolerance})
        gpus.append(out)
    mixed = [g["pci_bus_id"] for g in gpus if g.get("nearest_reading_gpu") not in (None, g["pci_bus_id"])]
    return {"pass": bool(gpus) and all(g["pass"] for g in gpus) and not errors and not mixed,
            "tolerance": tolerance, "link_overhead": link_overhead, "window": [start, end],
            "window_s": end - start, "gpus": gpus, "mixed_up": mixed, "load_errors": errors}


# --- screenshots ---------------------------------------------------------------------------------

# Textual's SVG: one <text> per run of cells, its row in the clip path's "-line-N", its column x / cell width.
_SVG_TEXT = re.compile(r'<text[^>]*?\bx="([\d.]+)"[^>]*?\btextLength="([\d.]+)"[^>]*?'
                       r'clip-path="url\(#[\w-]*?-line-(\d+)\)"[^>]*>(.*?)</text>', re.S)
_ROW_HEAD = re.compile(r"GPU (\d+) \S")
# A GPU row's RX line ("RX in", earlier screens "RX H2D"), and the overview's one-line summaries
# ("▶ GPU 0 Gen5 x16  RX ...", earlier "▶0 Gen5 x16  RX ...").
_ROW_RX = re.compile(r"RX (?:in|H2D)\s+([\d.]+) (GB/s|MB/s|kB/s|B/s)")
_SUMMARY = re.compile(r"^.{0,2}(?:GPU )?(\d+) Gen\S* x\S+.*?RX ([\d.]+) (GB/s|MB/s|kB/s|B/s)")
_UNITS = {"GB/s": 1e9, "MB/s": 1e6, "kB/s": 1e3, "B/s": 1.0}


def svg_lines(svg: str) -> list[str]:
    """The text of a Textual SVG screenshot, one string per screen row, each run at its column."""
    runs = [(int(m.group(3)), float(m.group(1)), float(m.group(2)), html.unescape(m.group(4)).replace("\xa0", " ").replace("\n", ""))
            for m in _SVG_TEXT.finditer(svg)]
    widths = [length / len(text) for _, _, length, text in runs if text and length > 0]
    if not widths:
        return []
    cell = statistics.median(widths)
    rows: dict[int, str] = {}
    for row, x, _, text in sorted(runs, key=lambda r: (r[0], r[1])):
        col = round(x / cell)
        line = rows.get(row, "")
        rows[row] = line.ljust(col)[:col] + text
    return [rows.get(k, "") for k in range(max(rows) + 1)] if rows else []


def screen_rx(lines: Sequence[str]) -> dict[int, float]:
    """{GPU index: RX bytes/s} shown on a screen: GPU rows (head, then their RX line) and the
    overview's one-line summaries."""
    found: dict[int, float] = {}
    for k, line in enumerate(lines):
        head = _ROW_HEAD.search(line)
        if head and "detail" not in line and k + 1 < len(lines):
            rx = _ROW_RX.search(lines[k + 1])
            if rx:
                found[int(head.group(1))] = float(rx.group(1)) * _UNITS[rx.group(2)]
                continue
        summary = _SUMMARY.search(line)
        if summary:
            found[int(summary.group(1))] = float(summary.group(2)) * _UNITS[summary.group(3)]
    return found


def screenshots(paths: Sequence[str], load: dict | None, watch: dict | None,
                link_overhead: float = LINK_OVERHEAD) -> dict:
    """Which GPUs the 80x24 shots show, and whether each shown figure is nearest its own load's
    link rate. The index on screen is NVML's; ``watch.json`` maps it to a bus id, the load to it."""
    seen: dict[int, list[float]] = {}
    shots = {}
    for p in paths:
        with open(p, encoding="utf-8") as f:
            rx = screen_rx(svg_lines(f.read()))
        shots[os.path.basename(p)] = {str(k): v for k, v in sorted(rx.items())}
        for k, v in rx.items():
            seen.setdefault(k, []).append(v)
    out: dict[str, Any] = {"shots": shots, "gpus_seen": sorted(seen)}
    bus_of: dict[int, str | None] = {}
    for snap in (watch or {}).get("snapshots", ())[:1]:
        bus_of = {r["index"]: bus_key(r.get("pci_bus_id")) for r in snap.get("gpus", ())}
    expected = {bus_key(g.get("pci_bus_id")): g["payload_bytes"] / (g["end"] - g["start"]) * link_overhead
                for g in (load or {}).get("gpus", ()) if "error" not in g and g.get("end", 0) > g.get("start", 0)}
    gpu_count = len(bus_of) or len(expected)
    out["gpu_count"] = gpu_count
    mixed = []
    if expected and bus_of:
        by_index = {k: expected.get(b) for k, b in bus_of.items()}
        for k, values in seen.items():
            own = by_index.get(k)
            if own is None:
                continue
            for v in values:
                nearest = min((i for i in by_index if by_index[i] is not None), key=lambda i: abs(by_index[i] - v))
                if nearest != k:
                    mixed.append({"gpu": k, "shown_bytes_per_s": v, "nearest_load_gpu": nearest})
        out["expected_link_bytes_per_s"] = {str(k): v for k, v in sorted(by_index.items())}
    out["mixed_up"] = mixed
    if not paths:
        out.update({"pass": None, "reason": "no 80x24 screenshots"})
    elif not gpu_count:
        out.update({"pass": None, "reason": "no GPU known from the load or pinmon's readings"})
    else:
        out["pass"] = bool(gpu_count) and set(seen) >= set(range(gpu_count)) and not mixed
    return out


# --- overhead, scale, probe, NUMA ----------------------------------------------------------------

def overhead(runs: dict[str, dict | None]) -> dict:
    """``runs``: {"tui_first": overhead.json, "nvitop_first": overhead.json}."""
    out: dict[str, Any] = {}
    verdicts = []
    for name, res in runs.items():
        if res is None:
            out[name] = {"missing": True}
            verdicts.append(None)
            continue
        tui, nv = res.get("tui", {}).get("cpu_share"), res.get("nvitop", {}).get("cpu_share")
        ok = None if tui is None or nv is None else tui <= nv
        out[name] = {"tui_cpu_share": tui, "nvitop_cpu_share": nv, "tui_over_nvitop": tui / nv if ok is not None and nv else None,
                     "tui_peak_rss_mib": res.get("tui", {}).get("peak_rss_mib"),
                     "nvitop_peak_rss_mib": res.get("nvitop", {}).get("peak_rss_mib"), "pass": ok}
        verdicts.append(ok)
    out["pass"] = None if None in verdicts else all(verdicts)
    return out


def scale(real: dict | None, fake: dict | None) -> dict:
    out: dict[str, Any] = {"max_ratio": SCALE_MAX_RATIO}
    if fake and "scale" in fake:
        out["fake_nvml_8_over_1_cpu"] = fake["scale"].get("ratio_8_over_1_cpu")
    if not real or real.get("ratio_all_over_one_cpu") is None:
        out.update({"pass": None, "reason": "no real-NVML scale result"})
        return out
    out.update({"gpus": real["all_gpus"]["gpus"], "one_gpu_cpu_ms": real["one_gpu"]["snapshot_cpu_ms"],
                "all_gpus_cpu_ms": real["all_gpus"]["snapshot_cpu_ms"], "ratio": real["ratio_all_over_one_cpu"],
                "pass": real["ratio_all_over_one_cpu"] <= SCALE_MAX_RATIO})
    return out


def rated_links(box: dict | None) -> dict[str | None, float | None]:
    """{bus: payload rate of the link at its rated generation and width} from ``box.json``."""
    from pinmon.model.link import theoretical_bytes_per_s

    out = {}
    for g in (box or {}).get("gpus", ()):
        gen, width = g.get("pcie.link.gen.max"), g.get("pcie.link.width.max")
        out[bus_key(g.get("pci.bus_id"))] = theoretical_bytes_per_s(gen if isinstance(gen, int) else None,
                                                                    width if isinstance(width, int) else None)
    return out


def _largest(measurements: Sequence[dict], direction: str, memory: str = "pinned",
             node: int | None = None) -> float | None:
    rows = [m for m in measurements if m.get("kind") == "copy" and m.get("direction") == direction
            and m.get("memory") == memory and m.get("bytes_per_s") is not None
            and (node is None or m.get("host_numa_node") == node)]
    return max(rows, key=lambda m: m["size_bytes"])["bytes_per_s"] if rows else None


def probe(doc: dict | None, wall_s: float | None, box: dict | None,
          min_share: float = PROBE_MIN_SHARE) -> dict:
    if not doc or not doc.get("results"):
        why = (doc or {}).get("reason") or "no probe --gpu all result"
        return {"pass": None, "reason": why, "wall_s": wall_s}
    rated = rated_links(box)
    gpus = []
    for entry in doc.get("results", ()):
        r = entry.get("result", {})
        bus = bus_key(entry.get("pci_bus_id"))
        link = rated.get(bus) or r.get("link_theoretical_bytes_per_s")
        h2d, d2h = _largest(r.get("measurements", ()), "h2d"), _largest(r.get("measurements", ()), "d2h")
        shares = [None if v is None or not link else v / link for v in (h2d, d2h)]
        gpus.append({"cuda_index": entry.get("cuda_index"), "pci_bus_id": bus, "status": r.get("status"),
                     "link_bytes_per_s": link, "link_now_bytes_per_s": r.get("link_theoretical_bytes_per_s"),
                     "h2d_pinned_bytes_per_s": h2d, "d2h_pinned_bytes_per_s": d2h,
                     "h2d_share": shares[0], "d2h_share": shares[1], "duration_s": r.get("duration_s"),
                     "pass": r.get("status") == "ok" and all(s is not None and s >= min_share for s in shares)})
    return {"pass": bool(gpus) and all(g["pass"] for g in gpus), "min_share": min_share, "wall_s": wall_s,
            "gpu_count": len(gpus), "gpus": gpus}


def numa_probe(docs: Sequence[dict]) -> list[dict]:
    out = []
    for doc in docs:
        for entry in doc.get("results", ()):
            r = entry.get("result", {})
            ms = r.get("measurements", ())
            nodes = sorted({m["host_numa_node"] for m in ms if m.get("host_numa_node") is not None})
            out.append({"cuda_index": entry.get("cuda_index"), "pci_bus_id": bus_key(entry.get("pci_bus_id")),
                        "status": r.get("status"), "reason": r.get("reason"),
                        "nodes": {str(n): {"h2d_pinned_bytes_per_s": _largest(ms, "h2d", node=n),
                                           "d2h_pinned_bytes_per_s": _largest(ms, "d2h", node=n),
                                           "note": next((m.get("note") for m in ms if m.get("host_numa_node") == n
                                                         and m.get("note")), None)} for n in nodes}})
    return out


def numa_remote(holder: dict | None, check: dict | None, box: dict | None = None) -> dict:
    if not holder:
        host = (box or {}).get("host", {})
        nodes = host.get("memory_nodes") or host.get("nodes") or []
        known = [g for g in (box or {}).get("gpus", ()) if isinstance(g.get("pinmon_numa_node"), int)]
        if box and len(nodes) < 2:
            why = f"one NUMA node with memory ({nodes})"
        elif box and not known:
            why = "no GPU's NUMA node is known (sysfs numa_node -1, NVML NotSupported): no far node to pick"
        else:
            why = "the far-node process did not run"
        return {"pass": None, "reason": why}
    if "error" in holder:
        return {"pass": False, "reason": f"far-node process: {holder['error']}", "holder": holder}
    if not check:
        return {"pass": False, "reason": "no pinmon check result", "holder": holder}
    fired = [f for f in check.get("findings", ()) if f.get("rule") == "pinned-numa-remote"]
    own = [f for f in fired if f.get("values", {}).get("pid") == holder.get("pid")]
    return {"pass": bool(own), "holder": holder, "check_status": check.get("status"),
            "finding": own[0] if own else None, "other_numa_findings": len(fired) - len(own)}


# --- the whole run -------------------------------------------------------------------------------

def _load(path: str) -> Any | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _wall(path: str) -> float | None:
    try:
        with open(path) as f:
            m = re.search(r"wall ([\d.]+) s", f.read())
        return float(m.group(1)) if m else None
    except OSError:
        return None


def summarise(outdir: str) -> dict:
    j = lambda *p: _load(os.path.join(outdir, *p))
    box, load, watch = j("box.json"), j("load.json"), j("watch.json")
    res: dict[str, Any] = {"outdir_files": sorted(os.listdir(outdir)) if os.path.isdir(outdir) else []}
    if box:
        res["box"] = {"gpu_count": box.get("gpu_count"), "cpu_count": box.get("cpu_count"),
                      "numa_nodes": box.get("host", {}).get("nodes"),
                      "gpus": [{k: g.get(k) for k in ("index", "pci.bus_id", "pcie.link.gen.current", "pcie.link.gen.max",
                                                       "pcie.link.width.current", "pcie.link.width.max",
                                                       "sysfs_numa_node", "nvml_numa_node", "pinmon_numa_node")}
                               for g in box.get("gpus", ())]}
    goals: dict[str, Any] = {}
    goals["accuracy"] = (accuracy(load, watch) if load and watch
                         else {"pass": None, "reason": "missing " + ", ".join(
                             n for n, d in (("load.json", load), ("watch.json", watch)) if not d)})
    shots = sorted(glob.glob(os.path.join(outdir, "screens", "*80x24*.svg")))
    goals["screenshots"] = screenshots(shots, load, watch)
    goals["screenshots"]["files"] = sorted(os.path.relpath(p, outdir) for p in glob.glob(os.path.join(outdir, "screens", "*")))
    goals["overhead"] = overhead({"tui_first": j("overhead_tui_first", "overhead.json"),
                                  "nvitop_first": j("overhead_nvitop_first", "overhead.json")})
    goals["scale"] = scale(j("scale.json"), j("scale_fake", "overhead.json"))
    goals["probe"] = probe(j("probe_all.json"), _wall(os.path.join(outdir, "probe_all_time.txt")), box)
    numa_docs = [d for p in sorted(glob.glob(os.path.join(outdir, "numa_probe_gpu*.json"))) if (d := _load(p))]
    goals["numa"] = {"probe": numa_probe(numa_docs),
                     "remote": numa_remote(j("numa_holder.json"), j("numa_check.json"), box)}
    goals["numa"]["pass"] = goals["numa"]["remote"]["pass"]
    goals["numa"]["reason"] = goals["numa"]["remote"].get("reason", "")
    res["goals"] = goals
    return res


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print("usage: python3 bench/multi_gpu_summary.py OUTDIR (a directory bench/multi_gpu_batch.sh wrote)",
              file=sys.stderr)
        return 2
    from provenance import provenance  # the summariser's own tree; the run's is in each raw file

    res = {"provenance": provenance(), **summarise(argv[0])}
    with open(os.path.join(argv[0], "summary.json"), "w") as f:
        json.dump(res, f, indent=1)
    for name, goal in res["goals"].items():
        verdict = {True: "PASS", False: "FAIL", None: "n/a"}[goal.get("pass")]
        print(f"{name:12} {verdict}  {goal.get('reason', '')}")
    acc = res["goals"]["accuracy"]
    for g in acc.get("gpus", ()):
        print(f"  accuracy GPU {g['cuda_index']} {g['pci_bus_id']}: corrected {g.get('ratio_corrected')}"
              f" over {g['intervals']} intervals")
    return 0


if __name__ == "__main__":
    sys.exit(main())
