#!/usr/bin/env python3
"""CUPTI facts on a GPU box: what cupti-python's MEMCPY and MEMORY2 activity records hold for each
library's copies and pinned allocations, what the activities cost per copy, and how CUPTI gets on
with torch.profiler.

    python3 bench/research/cupti_facts.py OUTDIR [--rounds 3] [--only NAME,NAME] [--skip NAME,NAME]
    python3 bench/research/cupti_facts.py --selftest     (no GPU: records built with from_data run through the dump)

Every workload runs in a child process of its own that enables the activities before any CUDA work,
so a crash, a hang (timeout) or a missing library loses that workload only. Each child dumps every
record it receives (all fields, enums as int and name) and the ground truth of what it did (bytes
copied per direction and host memory kind, bytes pinned, registered), and sums all its records.

OUTDIR gets three files: cupti_facts.json (versions, per-workload summaries with truth vs CUPTI,
overhead, coexistence), records.jsonl (raw records, one JSON object a line, a "workload" key, at most
RECORD_CAP per workload) and children.log (the tail of each child's output).

Overhead: pinned H2D copy loops of 1, 4, 16 and 64 MiB in fresh child processes, CUPTI off / on in
ABBA order per round. "on" runs as the tracer would: MEMCPY+MEMORY2 enabled, a thread flushing every
0.5 s, a completion callback that sums bytes and durations per kind. The "on" children also toggle
MEMCPY off and on inside the process (ABBA blocks), which cancels drift between processes.

Wheels to carry (Python 3.12, x86_64; Requires-Dist checked):
  cupti-python==13.0.1   needs cuda-bindings~=13.0, numpy>=1.23, nvidia-cuda-cupti~=13.0
  cuda-bindings==13.0.3  needs cuda-pathfinder~=1.1
  pyelftools (harmless; required by cupti-python>=13.3 only)
  nvidia-cuda-cupti (13.0.85), cuda-pathfinder and numpy are already on the H200 box.
  bash bench/wheels.sh cupti-python==13.0.1 cuda-bindings==13.0.3 pyelftools
Optional pairing test: a folder .whl134/ holding cupti_python-13.4.0 (cp312), nvidia_cuda_cupti-13.4.92
and cuda_pathfinder>=1.4.1 wheels makes the script also try cupti-python 13.4 with its own libcupti
on this driver (children "pair134_*").
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict

HERE = os.path.abspath(__file__)
BENCH = os.path.dirname(os.path.dirname(HERE))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
from provenance import portable_text, provenance

KIB, MIB = 1 << 10, 1 << 20
RECORD_CAP = 900          # raw records kept per workload (all are summed)
RECORD_CAP_MEMCPY = 500   # of which MEMCPY at most, so allocations are not crowded out
RECORDS_FILE_MAX = 15 * MIB
BUF_SIZE = 4 * MIB
OVERHEAD_SIZES = (1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB)
OVERHEAD_BLOCK_S = 0.3
TIME_BUDGET_S = 165.0
PACKAGES = ("cupti-python", "cuda-bindings", "cuda-pathfinder", "nvidia-cuda-cupti", "cuda-python",
            "torch", "cupy-cuda13x", "cupy", "jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt",
            "numpy", "pyelftools", "triton", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13")


# ----------------------------------------------------------------------------------------------
# Helpers shared by parent and children
# ----------------------------------------------------------------------------------------------

def now_s() -> float:
    return time.perf_counter()


def read_text(path: str, limit: int = 1 << 20) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def foll_pin_pages() -> int | None:
    """Pages pinned system-wide right now (FOLL_PIN acquired - released), or None."""
    text = read_text("/proc/vmstat")
    if not text:
        return None
    vals = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k in ("nr_foll_pin_acquired", "nr_foll_pin_released"):
            vals[k] = int(v)
    if len(vals) != 2:
        return None
    return vals["nr_foll_pin_acquired"] - vals["nr_foll_pin_released"]


def maps_summary() -> dict:
    """This process's pinned-looking mappings and the libcupti files it has mapped."""
    text = read_text("/proc/self/maps", 16 << 20) or ""
    zero = nvctl = 0
    cupti_libs = set()
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        lo, _, hi = parts[0].partition("-")
        try:
            size = int(hi, 16) - int(lo, 16)
        except ValueError:
            continue
        path = parts[5] if len(parts) > 5 else ""
        if "/dev/zero" in path and parts[1].endswith("s"):
            zero += size
        elif path.strip() == "/dev/nvidiactl":
            nvctl += size
        if "libcupti" in path:
            cupti_libs.add(path.strip())
    return {"dev_zero_shared_bytes": zero, "nvidiactl_bytes": nvctl, "libcupti": sorted(cupti_libs)}


def jdump(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), default=repr)


def tail(text, n: int = 6000) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text[-n:]


# ----------------------------------------------------------------------------------------------
# Records: raw dump and sums (children)
# ----------------------------------------------------------------------------------------------

SKIP_FIELDS = {"ptr", "pad", "pad1", "pad2", "reserved0"}


class Recorder:
    """The completion callback's target: keeps the first records as dicts, sums every record."""

    def __init__(self, cupti, keep: bool = True):
        self.cupti = cupti
        self.keep = keep
        self.lock = threading.Lock()
        self.records: list = []
        self.kept_memcpy = 0
        self.kinds = Counter()
        self.buffers_requested = 0
        self.buffers_completed = 0
        self.callback_s = 0.0
        self.n_records = 0
        self.errors: list = []
        self._fields: dict = {}
        self._enums = self._enum_table()
        self._cbid_names: dict = {}
        self.memcpy = defaultdict(lambda: {"count": 0, "copy_count": 0, "bytes": 0, "dur_ns": 0})
        self.memcpy_by_size = defaultdict(lambda: {"count": 0, "bytes": 0, "dur_ns": 0, "rates": []})
        self.memory = defaultdict(lambda: {"count": 0, "bytes": 0})
        self.pinned_sizes = Counter()
        self.sources = Counter()
        self.pinned_held = 0
        self.api = Counter()
        self.corr_api: dict = {}
        self.memory_corr: list = []
        self.null_streams: dict = {}
        self.stream_bytes = Counter()
        self.limit_buffers = None  # (buffer size, outstanding limit) for the bounded-buffer test
        self.refused_buffers = 0

    def _enum_table(self):
        c = self.cupti
        t = {}
        for field, name in (("kind", "ActivityKind"), ("copy_kind", "ActivityMemcpyKind"),
                            ("src_kind", "ActivityMemoryKind"), ("dst_kind", "ActivityMemoryKind"),
                            ("memory_kind", "ActivityMemoryKind"),
                            ("memory_operation_type", "ActivityMemoryOperationType"),
                            ("channel_type", "ChannelType"), ("memory_pool_type", "ActivityMemoryPoolType")):
            e = getattr(c, name, None)
            if e is not None:
                t[field] = e
        return t

    def enum_name(self, field: str, value):
        e = self._enums.get(field)
        if e is None or not isinstance(value, int):
            return None
        try:
            return e(value).name
        except Exception:
            return None

    # CUPTI's callbacks -------------------------------------------------------------------
    def buffer_requested(self):
        with self.lock:
            if self.limit_buffers is not None:
                size, limit = self.limit_buffers
                if self.buffers_requested - self.buffers_completed >= limit:
                    self.refused_buffers += 1
                    return 0, 0
                self.buffers_requested += 1
                return size, 0
            self.buffers_requested += 1
        return BUF_SIZE, 0

    def buffer_completed(self, activities):
        t0 = now_s()
        try:
            with self.lock:
                self.buffers_completed += 1
                for a in activities:
                    try:
                        self._one(a)
                    except Exception as e:  # one odd record must not lose the rest
                        if len(self.errors) < 20:
                            self.errors.append(f"{type(e).__name__}: {e}")
        except Exception as e:
            self.errors.append(f"callback: {type(e).__name__}: {e}")
        self.callback_s += now_s() - t0

    # one record ----------------------------------------------------------------------------
    def _one(self, a):
        c = self.cupti
        kind = int(a.kind)
        self.n_records += 1
        kname = self.enum_name("kind", kind) or str(kind)
        self.kinds[kname] += 1
        d = None
        if self.keep and len(self.records) < RECORD_CAP and (
                kname != "MEMCPY" or self.kept_memcpy < RECORD_CAP_MEMCPY):
            d = self.to_dict(a)
            self.records.append(d)
            if kname == "MEMCPY":
                self.kept_memcpy += 1
        if kind == int(c.ActivityKind.MEMCPY):
            ck = self.enum_name("copy_kind", int(a.copy_kind))
            sk = self.enum_name("src_kind", int(a.src_kind))
            dk = self.enum_name("dst_kind", int(a.dst_kind))
            nbytes, dur = int(a.bytes), int(a.end) - int(a.start)
            s = self.memcpy[f"{ck}/{sk}->{dk}"]
            s["count"] += 1
            s["copy_count"] += int(getattr(a, "copy_count", 1) or 1)
            s["bytes"] += nbytes
            s["dur_ns"] += dur
            host = sk if ck == "HTOD" else dk if ck == "DTOH" else None
            self.stream_bytes[(int(a.context_id), int(a.stream_id))] += nbytes
            bs = self.memcpy_by_size[f"{ck}/{host}/{nbytes}"]
            bs["count"] += 1
            bs["bytes"] += nbytes
            bs["dur_ns"] += dur
            if dur > 0 and len(bs["rates"]) < 2000:
                bs["rates"].append(nbytes / (dur * 1e-9))
        elif kind == int(c.ActivityKind.MEMORY2):
            op = self.enum_name("memory_operation_type", int(a.memory_operation_type))
            mk = self.enum_name("memory_kind", int(a.memory_kind))
            nbytes = int(a.bytes)
            s = self.memory[f"{op}/{mk}"]
            s["count"] += 1
            s["bytes"] += nbytes
            if mk == "PINNED":
                if op == "ALLOCATION":
                    self.pinned_held += nbytes
                    self.pinned_sizes[nbytes] += 1
                elif op == "RELEASE":
                    self.pinned_held -= nbytes
            try:
                src = a.source
                if src:
                    self.sources[str(src)] += 1
            except Exception:
                pass
            if len(self.memory_corr) < 400:
                self.memory_corr.append((int(a.correlation_id), op, mk, nbytes))
        elif kind == int(c.ActivityKind.CONTEXT):
            self.null_streams[int(a.context_id)] = int(a.null_stream_id)
        elif kind in (int(c.ActivityKind.DRIVER), int(c.ActivityKind.RUNTIME)):
            name = self.cbid_name(kind, int(a.cbid))
            self.api[f"{kname}:{name}"] += 1
            if len(self.corr_api) < 100000:
                self.corr_api[int(a.correlation_id)] = name

    def cbid_name(self, kind: int, cbid: int) -> str:
        key = (kind, cbid)
        name = self._cbid_names.get(key)
        if name is None:
            c = self.cupti
            domain = c.CallbackDomain.DRIVER_API if kind == int(c.ActivityKind.DRIVER) else c.CallbackDomain.RUNTIME_API
            try:
                name = str(c.get_callback_name(domain, cbid))
            except Exception:
                name = f"cbid{cbid}"
            self._cbid_names[key] = name
        return name

    def to_dict(self, a) -> dict:
        cls = type(a)
        names = self._fields.get(cls)
        if names is None:
            names = sorted(n for n in dir(cls) if not n.startswith("_") and n not in SKIP_FIELDS
                           and not callable(getattr(cls, n, None)))
            self._fields[cls] = names
        d = {"class": cls.__name__}
        for n in names:
            try:
                v = getattr(a, n)
            except Exception as e:
                d[n] = f"<{type(e).__name__}>"
                continue
            d[n] = self.plain(v)
            nm = self.enum_name(n, d[n]) if isinstance(d[n], int) else None
            if nm is not None:
                d[n + "_name"] = nm
        if isinstance(d.get("flags_"), int):
            flags = d["flags_"]
            d["flags_names"] = ["MEMCPY_ASYNC"] if flags & 1 and d.get("kind_name") == "MEMCPY" else []
        if "cbid" in d and isinstance(d["cbid"], int):
            d["cbid_name"] = self.cbid_name(int(d["kind"]), d["cbid"])
        if isinstance(d.get("start"), int) and isinstance(d.get("end"), int):
            d["duration_ns"] = d["end"] - d["start"]
        return d

    def plain(self, v, depth: int = 0):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, bytes):
            return v.hex()
        if depth >= 3:
            return repr(v)[:80]
        try:
            import numpy
            if isinstance(v, numpy.ndarray):
                return v.tolist() if v.size <= 16 else f"<array {v.shape}>"
            if isinstance(v, numpy.generic):
                return v.item()
        except Exception:
            pass
        out = {}
        for n in dir(type(v)):
            if n.startswith("_") or n in SKIP_FIELDS or callable(getattr(type(v), n, None)):
                continue
            try:
                out[n] = self.plain(getattr(v, n), depth + 1)
            except Exception as e:
                out[n] = f"<{type(e).__name__}>"
            nm = self.enum_name(n, out[n]) if isinstance(out[n], int) else None
            if nm is not None:
                out[n + "_name"] = nm
        return out

    # summary -------------------------------------------------------------------------------
    def summary(self) -> dict:
        with self.lock:
            by_size = {}
            for k, v in self.memcpy_by_size.items():
                rates = sorted(v["rates"])
                by_size[k] = {"count": v["count"], "bytes": v["bytes"], "dur_ns": v["dur_ns"],
                              "bytes_per_s": v["bytes"] / (v["dur_ns"] * 1e-9) if v["dur_ns"] > 0 else None,
                              "rate_median": rates[len(rates) // 2] if rates else None,
                              "rate_p10": rates[len(rates) // 10] if rates else None}
            memcpy = {k: dict(v, bytes_per_s=(v["bytes"] / (v["dur_ns"] * 1e-9) if v["dur_ns"] > 0 else None))
                      for k, v in self.memcpy.items()}
            mem_api = [{"correlation_id": cid, "op": op, "memory_kind": mk, "bytes": n,
                        "api": self.corr_api.get(cid)} for cid, op, mk, n in self.memory_corr] if self.corr_api else None
            streams = [{"context_id": cid, "stream_id": sid, "bytes": n,
                        "null_stream": self.null_streams.get(cid) == sid if cid in self.null_streams else None}
                       for (cid, sid), n in self.stream_bytes.most_common(20)]
            return {"n_records": self.n_records, "copy_streams": streams, "null_streams": self.null_streams, "kinds": dict(self.kinds), "memcpy": memcpy,
                    "memcpy_by_size": by_size, "memory2": {k: dict(v) for k, v in self.memory.items()},
                    "pinned_alloc_sizes": {str(k): v for k, v in sorted(self.pinned_sizes.items())[:60]},
                    "pinned_held_bytes": self.pinned_held, "sources": dict(self.sources.most_common(20)),
                    "api": dict(self.api.most_common(60)), "memory2_with_api": mem_api,
                    "buffers_requested": self.buffers_requested, "buffers_completed": self.buffers_completed,
                    "refused_buffers": self.refused_buffers,
                    "callback_s": self.callback_s, "callback_us_per_record":
                        (self.callback_s / self.n_records * 1e6) if self.n_records else None,
                    "errors": list(self.errors)}

    def observed(self) -> dict:
        """Bytes by direction and host memory kind, from every MEMCPY record."""
        out = {"h2d": Counter(), "d2h": Counter(), "other": Counter()}
        with self.lock:
            for key, v in self.memcpy.items():
                ck, _, kinds = key.partition("/")
                sk, _, dk = kinds.partition("->")
                if ck == "HTOD":
                    out["h2d"][str(sk).lower()] += v["bytes"]
                elif ck == "DTOH":
                    out["d2h"][str(dk).lower()] += v["bytes"]
                else:
                    out["other"][ck] += v["bytes"]
        return {k: dict(v) for k, v in out.items()}


def cupti_attr(cupti, name: str, value: int | None = None) -> dict:
    """Read (and first write, when ``value`` is given) one activity attribute."""
    out = {}
    attr = getattr(cupti.ActivityAttribute, name)
    try:
        if value is not None:
            v = ctypes.c_uint64(value) if "SIZE" in name or "LIMIT" in name or "VALUE" in name else ctypes.c_uint8(value)
            sz = ctypes.c_size_t(ctypes.sizeof(v))
            cupti.activity_set_attribute(attr, ctypes.addressof(sz), ctypes.addressof(v))
            out["set"] = value
        v = ctypes.c_uint64(0)
        sz = ctypes.c_size_t(8)
        cupti.activity_get_attribute(attr, ctypes.addressof(sz), ctypes.addressof(v))
        out.update(value=int(v.value), value_size=int(sz.value))
    except Exception as e:
        out["error"] = err_text(cupti, e)
    return out


def err_text(cupti, e) -> str:
    status = getattr(e, "status", None)
    name = None
    if isinstance(status, int):
        try:
            name = cupti.Result(status).name
        except Exception:
            name = None
    return f"{type(e).__name__}: {e}" + (f" [status {status} {name}]" if status is not None else "")


def dropped_records(cupti) -> int | str:
    try:
        n = ctypes.c_size_t(0)
        cupti.activity_get_num_dropped_records(0, 0, ctypes.addressof(n))
        return int(n.value)
    except Exception as e:
        return err_text(cupti, e)


# ----------------------------------------------------------------------------------------------
# Ground truth (children)
# ----------------------------------------------------------------------------------------------

class Truth:
    def __init__(self):
        self.copies = {"h2d": Counter(), "d2h": Counter()}
        self.api_copies = []     # copies made through a library call whose path CUDA-side is its own
        self.allocs = Counter()  # label -> bytes
        self.alloc_list = []
        self.registered = 0
        self.notes = []

    def copy(self, direction: str, host: str, n: int, times: int = 1):
        self.copies[direction][host] += n * times

    def alloc(self, label: str, n: int):
        self.allocs[label] += n
        self.alloc_list.append((label, n))

    def register(self, n: int):
        self.registered += n
        self.alloc_list.append(("registered", n))

    def note(self, text: str):
        self.notes.append(text)

    def as_dict(self) -> dict:
        return {"copies": {k: dict(v) for k, v in self.copies.items()}, "api_copies": self.api_copies,
                "allocs": dict(self.allocs), "alloc_list": self.alloc_list[:100],
                "registered_bytes": self.registered, "notes": self.notes}


def guarded(truth: Truth, label: str, fn, *a, **k):
    """Run one part of a workload; an exception is noted and the workload goes on."""
    try:
        return fn(*a, **k)
    except Exception as e:
        truth.note(f"{label}: {type(e).__name__}: {e}"[:400])
        return None


# ----------------------------------------------------------------------------------------------
# Workloads (children). Each gets (ctx) and fills ctx.truth.
# ----------------------------------------------------------------------------------------------

H2D, D2H = 1, 2
SIZES = (4 * KIB, 1 * MIB, 64 * MIB)


class Ctx:
    def __init__(self, cupti, rec, truth, args):
        self.cupti, self.rec, self.truth, self.args = cupti, rec, truth, args
        self.extra: dict = {}


def _cupy():
    import cupy
    cupy.cuda.Device(0).use()
    cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(1))  # a context before the measured work
    return cupy


def w_cupy_hostalloc(ctx):
    """cudaHostAlloc default / mapped / write-combined; sizes differ per flag so records tell them apart."""
    cupy = _cupy()
    rt, t = cupy.cuda.runtime, ctx.truth
    dev = cupy.cuda.alloc(64 * MIB + 16 * KIB)

    def one(flag, extra, label):
        for s in SIZES:
            n = s + extra
            p = rt.hostAlloc(n, flag)
            t.alloc(label, n)
            for _ in range(2):
                rt.memcpy(dev.ptr, p, n, H2D)
                t.copy("h2d", "pinned", n)
                rt.memcpy(p, dev.ptr, n, D2H)
                t.copy("d2h", "pinned", n)
            rt.freeHost(p)

    for flag, extra, label in ((0, 0, "default"), (2, 4 * KIB, "mapped"), (4, 8 * KIB, "write_combined")):
        guarded(t, f"hostAlloc flag {flag}", one, flag, extra, label)

    def async_copies():
        n = 1 * MIB + 12 * KIB
        p = rt.hostAlloc(n, 0)
        t.alloc("default", n)
        s = cupy.cuda.Stream(non_blocking=True)
        for _ in range(2):
            rt.memcpyAsync(dev.ptr, p, n, H2D, s.ptr)
            t.copy("h2d", "pinned", n)
            rt.memcpyAsync(p, dev.ptr, n, D2H, s.ptr)
            t.copy("d2h", "pinned", n)
        s.synchronize()
        rt.freeHost(p)

    guarded(t, "memcpyAsync", async_copies)
    t.note("sizes: default 4K/1M/64M, mapped +4 KiB, write-combined +8 KiB, async 1M+12K (default flag)")
    rt.deviceSynchronize()


def w_cupy_pageable(ctx):
    import numpy as np
    cupy = _cupy()
    rt, t = cupy.cuda.runtime, ctx.truth
    dev = cupy.cuda.alloc(64 * MIB)
    for s in SIZES:
        a = np.ones(s, dtype=np.uint8)
        for _ in range(2):
            rt.memcpy(dev.ptr, a.ctypes.data, s, H2D)
            t.copy("h2d", "pageable", s)
            rt.memcpy(a.ctypes.data, dev.ptr, s, D2H)
            t.copy("d2h", "pageable", s)

    def api():
        a = np.ones(3 * MIB, dtype=np.uint8)
        x = cupy.asarray(a)
        t.api_copies.append(("cupy.asarray(numpy pageable)", "h2d", a.nbytes))
        b = cupy.asnumpy(x)
        t.api_copies.append(("cupy.asnumpy -> new numpy", "d2h", b.nbytes))

    guarded(t, "cupy api copies", api)
    rt.deviceSynchronize()


def _aligned(np, n: int):
    buf = np.empty(n + 4096, dtype=np.uint8)
    off = (-buf.ctypes.data) % 4096
    view = buf[off:off + n]
    view[:] = 1
    return buf, view


def w_cupy_register(ctx):
    import numpy as np
    cupy = _cupy()
    rt, t = cupy.cuda.runtime, ctx.truth
    dev = cupy.cuda.alloc(16 * MIB)
    keep = []
    for n in (64 * KIB, 16 * MIB):
        buf, view = _aligned(np, n)
        keep.append(buf)
        ptr = view.ctypes.data
        rt.hostRegister(ptr, n, 0)
        t.register(n)
        for _ in range(2):
            rt.memcpy(dev.ptr, ptr, n, H2D)
            t.copy("h2d", "pinned", n)
            rt.memcpy(ptr, dev.ptr, n, D2H)
            t.copy("d2h", "pinned", n)
        rt.hostUnregister(ptr)
        rt.memcpy(dev.ptr, ptr, n, H2D)  # after unregister: pageable again
        t.copy("h2d", "pageable", n)
    rt.deviceSynchronize()


def w_api_correlation(ctx):
    """DRIVER and RUNTIME records too: which API call made each MEMORY2 record (by correlation id)."""
    import numpy as np
    cupy = _cupy()
    rt, t = cupy.cuda.runtime, ctx.truth
    dev = cupy.cuda.alloc(2 * MIB)
    n = 1 * MIB
    for flag, extra, label in ((0, 0, "default"), (4, 8 * KIB, "write_combined"), (2, 4 * KIB, "mapped")):
        p = rt.hostAlloc(n + extra, flag)
        t.alloc(label, n + extra)
        rt.memcpy(dev.ptr, p, n + extra, H2D)
        t.copy("h2d", "pinned", n + extra)
        rt.freeHost(p)
    _buf, view = _aligned(np, 2 * MIB)
    rt.hostRegister(view.ctypes.data, 2 * MIB, 0)
    t.register(2 * MIB)
    rt.memcpy(dev.ptr, view.ctypes.data, 2 * MIB, H2D)
    t.copy("h2d", "pinned", 2 * MIB)
    rt.hostUnregister(view.ctypes.data)
    rt.deviceSynchronize()


HOST_MEMORY_APIS = ("cuMemHostAlloc", "cuMemAllocHost", "cuMemHostRegister", "cuMemHostUnregister",
                    "cuMemFreeHost", "cudaHostAlloc", "cudaMallocHost", "cudaHostRegister",
                    "cudaHostUnregister", "cudaFreeHost")


def select_api_records(cupti) -> dict:
    """Leave DRIVER/RUNTIME records on only for the host-memory calls; returns what was done."""
    done = {"disabled": 0, "kept": [], "errors": []}
    for enum, fn in ((cupti.driver_api_trace_cbid, cupti.activity_enable_driver_api),
                     (cupti.runtime_api_trace_cbid, cupti.activity_enable_runtime_api)):
        for m in enum:
            keep = m.name.startswith(HOST_MEMORY_APIS)
            if m.name.startswith(("INVALID", "SIZE", "FORCE_INT")):
                continue
            try:
                fn(int(m), 1 if keep else 0)
                if keep:
                    done["kept"].append(m.name)
                else:
                    done["disabled"] += 1
            except Exception as e:
                if len(done["errors"]) < 5:
                    done["errors"].append(f"{m.name}: {err_text(cupti, e)}")
    return done


def w_api_selective(ctx):
    """DRIVER/RUNTIME enabled for host-memory calls only: do copies still make API records?"""
    import numpy as np
    cupy = _cupy()
    rt, t = cupy.cuda.runtime, ctx.truth
    dev = cupy.cuda.alloc(1 * MIB)
    p = rt.hostAlloc(1 * MIB, 0)
    t.alloc("default", 1 * MIB)
    for _ in range(200):
        rt.memcpy(dev.ptr, p, 64 * KIB, H2D)
    t.copy("h2d", "pinned", 64 * KIB, 200)
    q = rt.hostAlloc(1 * MIB + 8 * KIB, 4)
    t.alloc("write_combined", 1 * MIB + 8 * KIB)
    _buf, view = _aligned(np, 1 * MIB)
    rt.hostRegister(view.ctypes.data, 1 * MIB, 0)
    t.register(1 * MIB)
    rt.hostUnregister(view.ctypes.data)
    rt.freeHost(q)
    rt.freeHost(p)
    rt.deviceSynchronize()
    t.note("expected with a working filter: API records only for hostAlloc/hostRegister/unregister/freeHost, none per copy")


def w_callback_flags(ctx):
    """The callback API (one subscriber per process) reads cudaHostAlloc's flags: WC is visible there."""
    c, t = ctx.cupti, ctx.truth
    seen = []

    def cb(userdata, domain, cbid, cbdata):
        try:
            if cbdata.callback_site != c.ApiCallbackSite.API_EXIT:
                return
            params = ctypes.c_void_p.from_address(int(cbdata.ptr) + 16).value  # CUpti_CallbackData.functionParams
            if not params:
                return
            # cudaHostAlloc_v3020_params and cuMemHostAlloc_params: {void **p; size_t size; unsigned flags}
            size = ctypes.c_size_t.from_address(params + 8).value
            flags = ctypes.c_uint.from_address(params + 16).value
            seen.append({"function": cbdata.function_name, "domain": int(domain), "size": int(size), "flags": int(flags)})
        except Exception as e:
            seen.append({"error": f"{type(e).__name__}: {e}"})

    sub = None
    try:
        try:
            sub = c.subscribe(cb, None)
        except TypeError:  # a binding that wants an integer user-data pointer
            sub = c.subscribe(cb, 0)
        for enum, domain in ((c.driver_api_trace_cbid, c.CallbackDomain.DRIVER_API),
                             (c.runtime_api_trace_cbid, c.CallbackDomain.RUNTIME_API)):
            for m in enum:
                if m.name.startswith(("cuMemHostAlloc", "cudaHostAlloc")):
                    c.enable_callback(1, sub, domain, int(m))
    except Exception as e:
        t.note(f"subscribe: {err_text(c, e)}")
    cupy = _cupy()
    rt = cupy.cuda.runtime
    for flag, extra, label in ((0, 0, "default"), (4, 8 * KIB, "write_combined")):
        p = rt.hostAlloc(1 * MIB + extra, flag)
        t.alloc(label, 1 * MIB + extra)
        rt.freeHost(p)
    if sub is not None:
        try:
            c.unsubscribe(sub)
        except Exception as e:
            t.note(f"unsubscribe: {err_text(c, e)}")
    ctx.extra["callback_seen"] = seen


def w_buffer_bound(ctx):
    """CUPTI buffers bounded: 32 KiB buffers, 2 outstanding at most, then size 0; 5000 copies unflushed."""
    cupy = _cupy()
    rt, t = cupy.cuda.runtime, ctx.truth
    dev = cupy.cuda.alloc(4 * KIB)
    p = rt.hostAlloc(4 * KIB, 0)
    t.alloc("default", 4 * KIB)
    for _ in range(5000):
        rt.memcpy(dev.ptr, p, 4 * KIB, H2D)
    t.copy("h2d", "pinned", 4 * KIB, 5000)
    rt.freeHost(p)
    rt.deviceSynchronize()
    ctx.extra["dropped_before_flush"] = dropped_records(ctx.cupti)


def _torch():
    import torch
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    return torch


def w_torch_pinned(ctx):
    torch = _torch()
    t = ctx.truth
    for s in SIZES:
        n = s // 4
        for _ in range(2):
            h = torch.ones(n, dtype=torch.float32).pin_memory()
            t.alloc("torch_pin_memory_requested", s)
            d = h.to("cuda", non_blocking=True)
            t.copy("h2d", "pinned", s)
            h2 = torch.empty(n, dtype=torch.float32, pin_memory=True)
            t.alloc("torch_empty_pinned_requested", s)
            h2.copy_(d, non_blocking=True)
            t.copy("d2h", "pinned", s)
            torch.cuda.synchronize()
    try:
        ctx.extra["host_memory_stats"] = {k: v for k, v in torch.cuda.host_memory_stats().items()
                                          if "bytes" in k or "alloc" in k}
    except Exception as e:
        t.note(f"host_memory_stats: {e}")
    t.note("torch's caching host allocator rounds blocks up and keeps them: MEMORY2 sees its cudaHostAlloc calls")


def w_torch_pageable(ctx):
    torch = _torch()
    t = ctx.truth
    for s in SIZES:
        n = s // 4
        h = torch.ones(n, dtype=torch.float32)
        for _ in range(2):
            d = h.to("cuda")
            t.copy("h2d", "pageable", s)
            d.cpu()
            t.copy("d2h", "pageable", s)
            h.copy_(d)
            t.copy("d2h", "pageable", s)
    torch.cuda.synchronize()


def w_torch_dataloader(ctx):
    torch = _torch()
    from torch.utils.data import DataLoader, TensorDataset
    t = ctx.truth
    sample = 256 * KIB // 4
    ds = TensorDataset(torch.randn(64, sample))
    loader = DataLoader(ds, batch_size=8, pin_memory=True, num_workers=2)
    batches = 0
    for (x,) in loader:
        x.to("cuda", non_blocking=True)
        t.copy("h2d", "pinned", x.numel() * x.element_size())
        batches += 1
    torch.cuda.synchronize()
    ctx.extra["batches"] = batches
    t.note("DataLoader(pin_memory=True, num_workers=2): 8 batches of 2 MiB")


def w_torch_compile(ctx):
    torch = _torch()
    t = ctx.truth
    n = 1 * MIB
    w = torch.ones(n, device="cuda")
    pinned = torch.randn(n).pin_memory()
    pageable = torch.randn(n)

    def move(x, w):
        return x.to("cuda", non_blocking=True) * w

    for backend in ("inductor", "aot_eager"):
        try:
            f = torch.compile(move, backend=backend)
            for _ in range(5):
                f(pinned, w)
                t.copy("h2d", "pinned", 4 * n)
            for _ in range(5):
                f(pageable, w)
                t.copy("h2d", "pageable", 4 * n)
            torch.cuda.synchronize()
            ctx.extra["backend"] = backend
            break
        except Exception as e:
            t.note(f"torch.compile backend {backend}: {type(e).__name__}: {str(e)[:300]}")


def w_jax_device_put(ctx):
    import jax
    import numpy as np
    t = ctx.truth
    dev = jax.devices()[0]
    ctx.extra["jax_device"] = str(dev)
    for s, reps in ((1 * MIB, 20), (64 * MIB, 3)):
        x = np.ones(s // 4, dtype=np.float32)
        for _ in range(reps):
            y = jax.device_put(x, dev)
            y.block_until_ready()
            t.copy("h2d", "pageable", s)
            z = np.asarray(y)
            t.copy("d2h", "pageable", z.nbytes)
    t.note("user buffers are numpy (pageable); XLA may stage them through its own pinned buffers")


def w_env(ctx):
    """Versions from inside a CUDA process, CUPTI attributes, the libcupti files mapped."""
    out = ctx.extra
    c = ctx.cupti
    for name in ("ATTR_DEVICE_BUFFER_SIZE", "ATTR_DEVICE_BUFFER_POOL_LIMIT", "ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE",
                 "ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED", "ATTR_PER_THREAD_BUFFER", "ATTR_ZEROED_OUT_BUFFER",
                 "ATTR_PROFILING_SEMAPHORE_POOL_SIZE", "ATTR_PROFILING_SEMAPHORE_POOL_LIMIT",
                 "ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE"):
        out.setdefault("attributes", {})[name] = cupti_attr(c, name)
    try:
        cupy = _cupy()
        rt = cupy.cuda.runtime
        out["cuda_runtime_version"] = rt.runtimeGetVersion()
        out["cuda_driver_version"] = rt.driverGetVersion()
        props = rt.getDeviceProperties(0)
        out["device_name"] = props.get("name", b"").decode() if isinstance(props.get("name"), bytes) else props.get("name")
    except Exception as e:
        out["cupy_error"] = f"{type(e).__name__}: {e}"
    try:
        import torch
        out["torch_cuda"] = torch.version.cuda
        out["torch_device"] = torch.cuda.get_device_name(0)
    except Exception as e:
        out["torch_error"] = f"{type(e).__name__}: {e}"
    try:
        out["device_supported"] = int(c.device_supported(0))
    except Exception as e:
        out["device_supported"] = err_text(c, e)
    try:
        out["cupti_timestamp"] = int(c.get_timestamp())
    except Exception as e:
        out["cupti_timestamp"] = err_text(c, e)


def _phase_copies(torch, host, dev, nbytes: int, count: int = 10):
    n = nbytes // 4
    for _ in range(count):
        dev[:n].copy_(host[:n], non_blocking=True)
    torch.cuda.synchronize()


def _profiler_memcpy_events(prof) -> dict:
    out = Counter()
    try:
        for e in prof.events():
            name = getattr(e, "name", "") or ""
            if "emcpy" in name:
                out[name] += 1
    except Exception as ex:
        out[f"<events error {type(ex).__name__}: {ex}>"] += 1
    return dict(out)


def _count_sizes(rec: Recorder) -> dict:
    with rec.lock:
        return {k: v["count"] for k, v in rec.memcpy_by_size.items()}


def w_coexist_ours_first(ctx):
    """Ours enabled first, then torch.profiler, then re-armed. Phases copy 1/2/3/4 MiB."""
    c, rec, t = ctx.cupti, ctx.rec, ctx.truth
    torch = _torch()
    host = torch.ones(4 * MIB // 4).pin_memory()
    dev = torch.empty(4 * MIB // 4, device="cuda")
    phases = {}
    _phase_copies(torch, host, dev, 1 * MIB)
    flush(c, forced=True)
    phases["A_ours_only"] = _count_sizes(rec)
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            _phase_copies(torch, host, dev, 2 * MIB)
            flush(c, forced=False)
        ctx.extra["profiler_memcpy_events"] = _profiler_memcpy_events(prof)
    except Exception as e:
        t.note(f"torch.profiler: {type(e).__name__}: {e}")
    flush(c, forced=True)
    phases["B_profiler_active"] = _count_sizes(rec)
    _after_profiler_and_rearmed(ctx, torch, host, dev, phases)
    t.note("phase sizes: A 1 MiB (ours), B 2 MiB (profiler on), C 3 MiB (after), D 4 MiB (ours re-armed)")


def _after_profiler_and_rearmed(ctx, torch, host, dev, phases: dict) -> None:
    """The two phases both profiler scenarios end with: C (3 MiB copies once the profiler is done),
    D (4 MiB copies after arming ours again); the truth of all four phases' copies."""
    c, rec = ctx.cupti, ctx.rec
    _phase_copies(torch, host, dev, 3 * MIB)
    flush(c, forced=True)
    phases["C_after_profiler"] = _count_sizes(rec)
    ctx.extra["rearm"] = arm(c, rec, ("MEMCPY", "MEMORY2"))
    _phase_copies(torch, host, dev, 4 * MIB)
    flush(c, forced=True)
    phases["D_rearmed"] = _count_sizes(rec)
    ctx.extra["phases"] = phases
    ctx.truth.copy("h2d", "pinned", 10 * (1 + 2 + 3 + 4) * MIB)


def w_coexist_profiler_first(ctx):
    """torch.profiler first, ours enabled while it runs, then after it and re-armed."""
    c, rec, t = ctx.cupti, ctx.rec, ctx.truth
    torch = _torch()
    host = torch.ones(4 * MIB // 4).pin_memory()
    dev = torch.empty(4 * MIB // 4, device="cuda")
    phases = {}
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            _phase_copies(torch, host, dev, 1 * MIB)
            ctx.extra["arm_during_profiler"] = arm(c, rec, ("MEMCPY", "MEMORY2"))
            _phase_copies(torch, host, dev, 2 * MIB)
            flush(c, forced=False)
        ctx.extra["profiler_memcpy_events"] = _profiler_memcpy_events(prof)
    except Exception as e:
        t.note(f"torch.profiler: {type(e).__name__}: {e}")
    flush(c, forced=True)
    phases["AB_profiler_active"] = _count_sizes(rec)
    _after_profiler_and_rearmed(ctx, torch, host, dev, phases)
    t.note("phase sizes: A 1 MiB (profiler only), B 2 MiB (ours armed inside), C 3 MiB (after), D 4 MiB (re-armed)")


def w_pair134(ctx):
    """cupti-python 13.4 on this driver: a few copies (run with the 13.4 wheels first on sys.path)."""
    cupy = _cupy()
    rt, t = cupy.cuda.runtime, ctx.truth
    dev = cupy.cuda.alloc(1 * MIB)
    p = rt.hostAlloc(1 * MIB, 0)
    t.alloc("default", 1 * MIB)
    for _ in range(10):
        rt.memcpy(dev.ptr, p, 1 * MIB, H2D)
    t.copy("h2d", "pinned", 1 * MIB, 10)
    rt.freeHost(p)
    rt.deviceSynchronize()


WORKLOADS = {
    "env": (w_env, 60, ("MEMCPY", "MEMORY2", "CONTEXT")),
    "cupy_hostalloc": (w_cupy_hostalloc, 60, ("MEMCPY", "MEMORY2", "CONTEXT")),
    "cupy_pageable": (w_cupy_pageable, 60, ("MEMCPY", "MEMORY2", "CONTEXT")),
    "cupy_register": (w_cupy_register, 60, ("MEMCPY", "MEMORY2", "CONTEXT")),
    "api_correlation": (w_api_correlation, 60, ("MEMCPY", "MEMORY2", "CONTEXT", "DRIVER", "RUNTIME")),
    "api_selective": (w_api_selective, 60, ("MEMCPY", "MEMORY2", "DRIVER", "RUNTIME")),
    "callback_flags": (w_callback_flags, 60, ("MEMORY2",)),
    "buffer_bound": (w_buffer_bound, 60, ("MEMCPY", "MEMORY2", "CONTEXT")),
    "torch_pinned": (w_torch_pinned, 90, ("MEMCPY", "MEMORY2", "CONTEXT")),
    "torch_pageable": (w_torch_pageable, 90, ("MEMCPY", "MEMORY2", "CONTEXT")),
    "torch_dataloader": (w_torch_dataloader, 90, ("MEMCPY", "MEMORY2", "CONTEXT")),
    "torch_compile": (w_torch_compile, 170, ("MEMCPY", "MEMORY2", "CONTEXT")),
    "jax_device_put": (w_jax_device_put, 120, ("MEMCPY", "MEMORY2", "CONTEXT")),
    "coexist_ours_first": (w_coexist_ours_first, 90, ("MEMCPY", "MEMORY2", "CONTEXT")),
    "coexist_profiler_first": (w_coexist_profiler_first, 90, ()),
    "pair134": (w_pair134, 60, ("MEMCPY", "MEMORY2", "CONTEXT")),
}
PARALLEL = ("torch_compile", "jax_device_put")  # slow starters run beside the sequential ones


# ----------------------------------------------------------------------------------------------
# CUPTI setup (children)
# ----------------------------------------------------------------------------------------------

def flush(cupti, forced: bool) -> str | None:
    try:
        cupti.activity_flush_all(1 if forced else 0)
        return None
    except Exception as e:
        return err_text(cupti, e)


def arm(cupti, rec: Recorder, kinds) -> dict:
    """Register the buffer callbacks, then enable each kind; every step's outcome is returned."""
    out = {}
    try:
        cupti.activity_register_callbacks(rec.buffer_requested, rec.buffer_completed)
        out["register_callbacks"] = "ok"
    except Exception as e:
        out["register_callbacks"] = err_text(cupti, e)
    for k in kinds:
        try:
            cupti.activity_enable(getattr(cupti.ActivityKind, k))
            out[k] = "ok"
        except Exception as e:
            out[k] = err_text(cupti, e)
    return out


def child_main(name: str, tmpdir: str, mode: str | None) -> int:
    if name.startswith("overhead"):
        return overhead_child(tmpdir, mode or "off", name)
    fn, _, kinds = WORKLOADS[name]
    out = {"workload": name, "status": "started", "pid": os.getpid(), "foll_pin_start": foll_pin_pages()}
    t0 = now_s()
    truth = Truth()
    rec = None
    cupti = None
    try:
        preload = os.environ.get("CUPTI_FACTS_PRELOAD")
        if preload:  # the pairing test: this libcupti first, whatever cupti-python would have found
            try:
                ctypes.CDLL(preload, mode=ctypes.RTLD_GLOBAL)
                out["preloaded"] = preload
            except OSError as e:
                out["preload_error"] = str(e)
        from cupti import cupti as _c
        cupti = _c
        out["cupti_module"] = getattr(sys.modules.get("cupti"), "__file__", None)
        rec = Recorder(cupti)
        if name == "buffer_bound":
            rec.limit_buffers = (32 * KIB, 2)
        if name in ("api_correlation", "api_selective", "callback_flags"):
            try:
                cupti.activity_enable_allocation_source(1)
                out["allocation_source"] = "ok"
            except Exception as e:
                out["allocation_source"] = err_text(cupti, e)
        out["arm"] = arm(cupti, rec, kinds) if kinds else {}
        if name == "api_selective":
            out["selection"] = select_api_records(cupti)
        ctx = Ctx(cupti, rec, truth, None)
        try:
            fn(ctx)
            out["status"] = "ok"
        except Exception:
            out["status"] = "error"
            out["error"] = traceback.format_exc()[-3000:]
        out["extra"] = ctx.extra
        out["flush_error"] = flush(cupti, forced=True)
        out["dropped"] = dropped_records(cupti)
    except Exception:
        out["status"] = "error"
        out["error"] = traceback.format_exc()[-3000:]
    out["seconds"] = now_s() - t0
    out["truth"] = truth.as_dict()
    out["maps"] = maps_summary()
    out["foll_pin_end"] = foll_pin_pages()
    if rec is not None:
        out["cupti"] = rec.summary()
        out["observed"] = rec.observed()
        out["check"] = check(truth, out["observed"])
        with open(os.path.join(tmpdir, name + ".jsonl"), "w") as f:
            for d in rec.records:
                d["workload"] = name
                f.write(jdump(d) + "\n")
    with open(os.path.join(tmpdir, name + ".json"), "w") as f:
        f.write(jdump(out))
    return 0


def check(truth: Truth, observed: dict) -> dict:
    """CUPTI's bytes over the truth's, per direction and host kind, and per direction in all."""
    out = {}
    for d in ("h2d", "d2h"):
        want = truth.copies[d]
        got = observed.get(d, {})
        for kind in sorted(set(want) | set(got)):
            w, g = want.get(kind, 0), got.get(kind, 0)
            out[f"{d}.{kind}"] = {"truth": w, "cupti": g, "ratio": (g / w) if w else None}
        tw, tg = sum(want.values()), sum(got.values())
        out[f"{d}.all"] = {"truth": tw, "cupti": tg, "ratio": (tg / tw) if tw else None}
    return out


# ----------------------------------------------------------------------------------------------
# Overhead children
# ----------------------------------------------------------------------------------------------

class Aggregator:
    """What the tracer's completion callback does per record: sums, no objects kept."""

    def __init__(self, memcpy_kind: int):
        self.memcpy_kind = memcpy_kind
        self.sums: dict = {}
        self.n = 0
        self.callback_s = 0.0
        self.lock = threading.Lock()

    def requested(self):
        return BUF_SIZE, 0

    def completed(self, activities):
        t0 = now_s()
        with self.lock:
            sums = self.sums
            mk = self.memcpy_kind
            for a in activities:
                self.n += 1
                if a.kind == mk:
                    key = (a.copy_kind, a.src_kind, a.dst_kind)
                    s = sums.get(key)
                    if s is None:
                        s = sums[key] = [0, 0, 0]
                    s[0] += 1
                    s[1] += a.bytes
                    s[2] += a.end - a.start
        self.callback_s += now_s() - t0


def overhead_child(tmpdir: str, mode: str, name: str) -> int:
    out = {"mode": mode, "pid": os.getpid(), "status": "started", "foll_pin_start": foll_pin_pages()}
    try:
        cupti = agg = figures = None
        stop = threading.Event()
        if mode == "on":
            from cupti import cupti as _c
            cupti = _c
            agg = Aggregator(int(cupti.ActivityKind.MEMCPY))
            consume = agg.completed
            try:
                # The tracer's own completion callback when this tree is importable: its real cost.
                sys.path.insert(0, ROOT)
                from pinmon.trace.cupti_figures import CuptiFigures
                figures = CuptiFigures(started_ns=int(cupti.get_timestamp()))

                def pinmon_consume(activities, _f=figures, _a=agg):
                    t0 = now_s()
                    _f.consume(activities)
                    _a.n += len(activities)
                    _a.callback_s += now_s() - t0
                consume = pinmon_consume
                out["callback"] = "pinmon.trace.cupti_figures"
            except Exception as e:
                figures = None
                out["callback"] = f"facts Aggregator ({type(e).__name__}: {e})"
            cupti.activity_register_callbacks(agg.requested, consume)
            cupti.activity_enable(cupti.ActivityKind.MEMCPY)
            cupti.activity_enable(cupti.ActivityKind.MEMORY2)
            cupti.activity_enable(cupti.ActivityKind.CONTEXT)

            def flusher():
                while not stop.wait(0.5):
                    try:
                        cupti.activity_flush_all(0)
                    except Exception:
                        pass
            threading.Thread(target=flusher, daemon=True).start()
        cupy = _cupy()
        rt = cupy.cuda.runtime
        top = max(OVERHEAD_SIZES)
        host = rt.hostAlloc(top, 0)
        dev = cupy.cuda.alloc(top)
        for s in OVERHEAD_SIZES:  # warm up every size
            for _ in range(5):
                rt.memcpy(dev.ptr, host, s, H2D)
        blocks = {}
        for s in OVERHEAD_SIZES:
            n = max(8, int(OVERHEAD_BLOCK_S * 50e9 / s))
            c0, t0 = time.process_time(), now_s()
            for _ in range(n):
                rt.memcpy(dev.ptr, host, s, H2D)
            if cupti is not None:
                cupti.activity_flush_all(0)  # the block's records are processed within its time
            t1, c1 = now_s(), time.process_time()
            blocks[str(s)] = {"copies": n, "seconds": t1 - t0, "per_copy_us": (t1 - t0) / n * 1e6,
                              "cpu_us_per_copy": (c1 - c0) / n * 1e6}
        out["blocks"] = blocks
        if cupti is not None:
            # In-process ABBA: MEMCPY disabled (B) and enabled (A) in turn, same process and clocks.
            toggle = {}
            for s in OVERHEAD_SIZES:
                n = max(8, int(OVERHEAD_BLOCK_S / 2 * 50e9 / s))
                times = {"on": [], "off": []}
                for state in ("on", "off", "off", "on"):
                    if state == "off":
                        cupti.activity_disable(cupti.ActivityKind.MEMCPY)
                    else:
                        cupti.activity_enable(cupti.ActivityKind.MEMCPY)
                    t0 = now_s()
                    for _ in range(n):
                        rt.memcpy(dev.ptr, host, s, H2D)
                    if state == "on":
                        cupti.activity_flush_all(0)
                    times[state].append((now_s() - t0) / n * 1e6)
                cupti.activity_enable(cupti.ActivityKind.MEMCPY)
                on, off = sum(times["on"]), sum(times["off"])
                toggle[str(s)] = {"on_us": on / 2, "off_us": off / 2, "slowdown_pct": (on / off - 1) * 100}
            out["toggle"] = toggle
            stop.set()
            cupti.activity_flush_all(1)
            out["records"] = agg.n
            out["callback_s"] = agg.callback_s
            out["callback_us_per_record"] = agg.callback_s / agg.n * 1e6 if agg.n else None
            out["gpu"] = {f"{k[0]}/{k[1]}->{k[2]}": {"count": v[0], "bytes": v[1], "dur_ns": v[2],
                                                    "bytes_per_s": v[1] / (v[2] * 1e-9) if v[2] else None}
                          for k, v in agg.sums.items()}
            if figures is not None:
                out["figures"] = figures.report()["copies"]["h2d"]["pinned"]
            out["dropped"] = dropped_records(cupti)
            out["attributes"] = {n: cupti_attr(cupti, n) for n in (
                "ATTR_DEVICE_BUFFER_SIZE", "ATTR_DEVICE_BUFFER_POOL_LIMIT", "ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED")}
        rt.freeHost(host)
        out["status"] = "ok"
    except Exception:
        out["status"] = "error"
        out["error"] = traceback.format_exc()[-3000:]
    out["maps"] = maps_summary()
    out["foll_pin_end"] = foll_pin_pages()
    with open(os.path.join(tmpdir, name + ".json"), "w") as f:
        f.write(jdump(out))
    return 0


# ----------------------------------------------------------------------------------------------
# Parent
# ----------------------------------------------------------------------------------------------

def versions() -> dict:
    from importlib import metadata
    out = {"python": sys.version.split()[0], "platform": platform.platform(), "packages": {}}
    for p in PACKAGES:
        try:
            out["packages"][p] = metadata.version(p)
        except Exception:
            pass
    text = read_text("/proc/driver/nvidia/version")
    if text:
        out["driver_proc"] = text.splitlines()[0][:200]
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name,pcie.link.gen.max,pcie.link.width.max",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        out["nvidia_smi"] = r.stdout.strip()[:400]
    except Exception as e:
        out["nvidia_smi"] = f"{type(e).__name__}: {e}"
    try:
        r = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        out["commit"] = r.stdout.strip()
    except Exception:
        pass
    return out


class Runner:
    def __init__(self, outdir: str, tmpdir: str):
        self.outdir, self.tmpdir = outdir, tmpdir
        self.log = open(os.path.join(outdir, "children.log"), "w")
        self.records = open(os.path.join(outdir, "records.jsonl"), "w")
        self.records_bytes = 0
        self.records_truncated = []
        self.t_start = now_s()

    def env(self, extra: dict | None = None) -> dict:
        env = dict(os.environ)
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        if extra:
            env.update(extra)
        return env

    def start(self, name: str, mode: str | None = None, env_extra: dict | None = None, label: str | None = None):
        label = label or name
        cmd = [sys.executable, HERE, "--child", name, self.tmpdir] + ([mode] if mode else [])
        if label != name:
            cmd += ["--label", label]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env(env_extra),
                             cwd=ROOT)
        return (label, name, p, now_s())

    def finish(self, handle, timeout: float) -> dict:
        label, _name, p, t0 = handle
        left = max(1.0, timeout - (now_s() - t0))
        status = None
        try:
            output, _ = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            p.kill()
            output, _ = p.communicate()
            status = "timeout"
        wall = now_s() - t0
        self.log.write(portable_text(f"===== {label} rc={p.returncode} wall={wall:.1f}s\n{tail(output, 8000)}\n"))
        self.log.flush()
        path = os.path.join(self.tmpdir, label + ".json")
        result = None
        try:
            with open(path) as f:
                result = json.load(f)
        except (OSError, ValueError):
            result = {"status": status or "crashed", "rc": p.returncode, "output_tail": tail(output, 2000)}
        if status == "timeout":
            result["status"] = "timeout"
        result["rc"] = p.returncode
        result["wall_s"] = wall
        self._records(label)
        print(f"  {label:28s} {result.get('status'):8s} rc={p.returncode} {wall:5.1f}s", flush=True)
        return result

    def run(self, name: str, timeout: float, mode: str | None = None, env_extra: dict | None = None,
            label: str | None = None) -> dict:
        return self.finish(self.start(name, mode, env_extra, label), timeout)

    def _records(self, label: str):
        path = os.path.join(self.tmpdir, label + ".jsonl")
        try:
            with open(path) as f:
                for line in f:
                    line = line if line.endswith("\n") else line + "\n"
                    if self.records_bytes + len(line) > RECORDS_FILE_MAX:
                        self.records_truncated.append(label)
                        break
                    if label != json.loads(line).get("workload"):
                        d = json.loads(line)
                        d["workload"] = label
                        line = jdump(d) + "\n"
                    line = portable_text(line)  # a MEMORY2 record's source: the library's path
                    self.records.write(line)
                    self.records_bytes += len(line)
        except OSError:
            pass

    def elapsed(self) -> float:
        return now_s() - self.t_start

    def close(self):
        self.log.close()
        self.records.close()


def overhead_summary(children: list) -> dict:
    by = {"off": defaultdict(list), "on": defaultdict(list)}
    cpu = {"off": defaultdict(list), "on": defaultdict(list)}
    rounds = defaultdict(lambda: {"off": defaultdict(list), "on": defaultdict(list)})
    toggle = defaultdict(list)
    per_record = []
    for c in children:
        if c.get("status") != "ok":
            continue
        mode = c["mode"]
        for s, b in c.get("blocks", {}).items():
            by[mode][s].append(b["per_copy_us"])
            cpu[mode][s].append(b["cpu_us_per_copy"])
            rounds[c["round"]][mode][s].append(b["per_copy_us"])
        for s, tg in (c.get("toggle") or {}).items():
            toggle[s].append(tg["slowdown_pct"])
        if c.get("callback_us_per_record") is not None:
            per_record.append(c["callback_us_per_record"])
    out = {}
    for s in sorted(set(by["off"]) | set(by["on"]), key=int):
        off, on = by["off"].get(s, []), by["on"].get(s, [])
        row = {"size_bytes": int(s), "off_us": off, "on_us": on}
        if off and on:
            mo, mn = statistics.median(off), statistics.median(on)
            row.update(off_median_us=mo, on_median_us=mn, cost_us_per_copy=mn - mo, slowdown_pct=(mn / mo - 1) * 100)
            ratios = []
            for r in rounds.values():
                if r["off"].get(s) and r["on"].get(s):
                    ratios.append(statistics.mean(r["on"][s]) / statistics.mean(r["off"][s]))
            if ratios:
                row["round_slowdown_pct"] = [(x - 1) * 100 for x in ratios]
                row["round_slowdown_median_pct"] = (statistics.median(ratios) - 1) * 100
        co, cn = cpu["off"].get(s, []), cpu["on"].get(s, [])
        if co and cn:
            row["cpu_cost_us_per_copy"] = statistics.median(cn) - statistics.median(co)
        if toggle.get(s):
            row["in_process_toggle_slowdown_pct"] = toggle[s]
            row["in_process_toggle_median_pct"] = statistics.median(toggle[s])
        out[s] = row
    foot = {}
    for mode in ("off", "on"):
        vals = [(c["maps"]["dev_zero_shared_bytes"], c["maps"]["nvidiactl_bytes"],
                 (c["foll_pin_end"] - c["foll_pin_start"]) if c.get("foll_pin_end") is not None
                 and c.get("foll_pin_start") is not None else None)
                for c in children if c.get("mode") == mode and c.get("maps")]
        if vals:
            foot[mode] = {"dev_zero_shared_bytes": [v[0] for v in vals], "nvidiactl_bytes": [v[1] for v in vals],
                          "foll_pin_pages_delta": [v[2] for v in vals]}
    return {"sizes": out, "callback_us_per_record": per_record, "pinned_footprint": foot,
            "note": "per_copy_us: wall time per synchronous cudaMemcpy H2D from cudaHostAlloc memory; "
                    "'on' flushes every 0.5 s and at the end of each block (inside its time)"}


def coexist_summary(res: dict) -> dict:
    out = {}
    for name in ("coexist_ours_first", "coexist_profiler_first"):
        r = res.get(name)
        if not r:
            continue
        ex = r.get("extra", {})
        phases = ex.get("phases", {})
        # Cumulative counts per copy size after each phase: the increments say who got which copies.
        rows = {}
        prev: Counter = Counter()
        for ph, counts in phases.items():
            cur = Counter({k: v for k, v in counts.items() if k.startswith("HTOD/")})
            rows[ph] = {k: cur[k] - prev.get(k, 0) for k in cur if cur[k] - prev.get(k, 0)}
            prev = cur
        out[name] = {"status": r.get("status"), "arm": r.get("arm"), "arm_during_profiler": ex.get("arm_during_profiler"),
                     "rearm": ex.get("rearm"), "new_records_per_phase": rows,
                     "profiler_memcpy_events": ex.get("profiler_memcpy_events"),
                     "notes": r.get("truth", {}).get("notes")}
    return out


def wc_summary(res: dict) -> dict:
    """Do MEMORY2 records of write-combined allocations differ from default ones (other than size)?"""
    r = res.get("cupy_hostalloc")
    if not r:
        return {}
    out = {"default": [], "write_combined": [], "mapped": []}
    records = []
    try:
        with open(os.path.join(r["_tmpdir"], "cupy_hostalloc.jsonl")) as f:
            records = [json.loads(x) for x in f]
    except (OSError, KeyError, ValueError):
        pass
    label_by_size = {}
    for s in SIZES:
        label_by_size[s] = "default"
        label_by_size[s + 4 * KIB] = "mapped"
        label_by_size[s + 8 * KIB] = "write_combined"
    ignore = {"address", "timestamp", "correlation_id", "bytes", "workload", "pc"}
    for d in records:
        if d.get("kind_name") != "MEMORY2" or d.get("memory_operation_type_name") != "ALLOCATION":
            continue
        label = label_by_size.get(d.get("bytes"))
        if label:
            out[label].append({k: v for k, v in d.items() if k not in ignore})
    diff = set()
    for a in out["default"]:
        for b in out["write_combined"]:
            for k in set(a) | set(b):
                if a.get(k) != b.get(k):
                    diff.add(k)
    return {"fields_differing_default_vs_wc": sorted(diff),
            "pc_values": sorted({str(d.get("pc")) for d in records if d.get("kind_name") == "MEMORY2"})[:20],
            "n": {k: len(v) for k, v in out.items()},
            "wc_distinguishable_by_record": bool(diff - {"pc"}) if out["write_combined"] else None}


def pair134(runner: Runner, results: dict):
    wdir = os.path.join(ROOT, ".whl134")
    wheels = sorted(glob.glob(os.path.join(wdir, "*.whl")))
    if not wheels:
        return None
    target = os.path.join(tempfile.gettempdir(), "cupti134")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--upgrade", "--target", target] + wheels, capture_output=True, text=True, timeout=120)
    out = {"wheels": [os.path.basename(w) for w in wheels], "pip_rc": r.returncode, "pip_tail": tail(r.stderr, 1500)}
    if r.returncode != 0:
        return out
    pp = os.pathsep.join([target, os.environ.get("PYTHONPATH", "")])
    libs = glob.glob(os.path.join(target, "nvidia", "*", "lib", "libcupti.so*"))
    out["found"] = runner.run("pair134", 60, env_extra={"PYTHONPATH": pp}, label="pair134_default")
    if libs:
        out["preloaded"] = runner.run("pair134", 60, env_extra={"PYTHONPATH": pp, "CUPTI_FACTS_PRELOAD": libs[0]},
                                      label="pair134_preload")
    return out


def parent_main(args) -> int:
    outdir = os.path.abspath(args.outdir)
    os.makedirs(outdir, exist_ok=True)
    tmpdir = tempfile.mkdtemp(prefix="cupti_facts_")
    runner = Runner(outdir, tmpdir)
    facts: dict = {"schema": "pinmon.bench.cupti_facts/1", "started": time.time(), "provenance": provenance(),
                   "versions": versions()}
    print(f"cupti_facts: {facts['versions'].get('packages')}", flush=True)
    only = set(filter(None, (args.only or "").split(",")))
    skip = set(filter(None, (args.skip or "").split(",")))

    def wanted(n):
        return (not only or n in only) and n not in skip

    results: dict = {}
    try:
        background = [runner.start(n) for n in PARALLEL if wanted(n)]
        for name, (_, timeout, _) in WORKLOADS.items():
            if name in PARALLEL or name == "pair134" or not wanted(name):
                continue
            results[name] = runner.run(name, timeout)
        for h in background:
            results[h[0]] = runner.finish(h, WORKLOADS[h[1]][1])
        for r in results.values():
            r["_tmpdir"] = tmpdir
        facts["wc"] = wc_summary(results)
        facts["coexistence"] = coexist_summary(results)

        children = []
        if wanted("overhead"):
            for rnd in range(args.rounds):
                if rnd > 0 and runner.elapsed() > TIME_BUDGET_S - 45:
                    facts["overhead_rounds_skipped"] = args.rounds - rnd
                    break
                for i, mode in enumerate(("off", "on", "on", "off")):
                    c = runner.run("overhead", 60, mode=mode, label=f"overhead_r{rnd}_{i}_{mode}")
                    c["round"] = rnd
                    c.setdefault("mode", mode)
                    children.append(c)
            facts["overhead"] = overhead_summary(children)
            facts["overhead_children"] = children
        if wanted("pair134"):
            facts["pair134"] = pair134(runner, results)
    finally:
        for r in results.values():
            r.pop("_tmpdir", None)
        facts["workloads"] = results
        facts["records_truncated"] = runner.records_truncated
        facts["elapsed_s"] = runner.elapsed()
        runner.close()
        with open(os.path.join(outdir, "cupti_facts.json"), "w") as f:
            # Paths (the libcupti and cupti module a child loaded) relative to site-packages or the
            # temporary directory, never the machine's own.
            f.write(portable_text(json.dumps(facts, indent=1, default=repr)))
    print_summary(facts)
    return 0


def print_summary(facts: dict):
    print(f"\nelapsed {facts.get('elapsed_s', 0):.0f} s")
    for name, r in facts.get("workloads", {}).items():
        chk = r.get("check") or {}
        parts = [f"{k}={v['ratio']:.3f}" for k, v in chk.items() if v.get("ratio") is not None]
        print(f"{name:26s} {r.get('status'):8s} records={r.get('cupti', {}).get('n_records')} "
              f"pinned_held={r.get('cupti', {}).get('pinned_held_bytes')} {' '.join(parts)}")
    ov = facts.get("overhead", {}).get("sizes", {})
    for s, row in ov.items():
        print(f"overhead {int(s) >> 20:3d} MiB: off {row.get('off_median_us', float('nan')):.2f} us, "
              f"on {row.get('on_median_us', float('nan')):.2f} us, {row.get('slowdown_pct', float('nan')):+.2f}% "
              f"(in-process {row.get('in_process_toggle_median_pct', float('nan')):+.2f}%)")
    print(f"wc: {facts.get('wc')}")
    for k, v in (facts.get("coexistence") or {}).items():
        print(f"{k}: {v.get('new_records_per_phase')} profiler={v.get('profiler_memcpy_events')}")


# ----------------------------------------------------------------------------------------------
# Self test (no GPU): records made with from_data run through the dump and the sums
# ----------------------------------------------------------------------------------------------

def selftest() -> int:
    import numpy as np
    from cupti import cupti
    rec = Recorder(cupti)
    acts = []
    a = np.zeros(1, dtype=cupti.activity_memcpy6_dtype)
    a["kind"], a["copy_kind"], a["src_kind"], a["dst_kind"] = 1, 1, 2, 3
    a["bytes"], a["start"], a["end"], a["copy_count"], a["flags_"] = MIB, 1000, 21000, 1, 1
    acts.append(cupti.ActivityMemcpy6.from_data(a))
    b = np.zeros(1, dtype=cupti.activity_memory4_dtype)
    b["kind"], b["memory_operation_type"], b["memory_kind"], b["bytes"], b["address"] = 49, 1, 2, 4 * MIB, 0x7f00
    acts.append(cupti.ActivityMemory4.from_data(b))
    rec.buffer_completed(acts)
    summary = rec.summary()
    assert summary["n_records"] == 2, summary
    assert summary["memcpy"]["HTOD/PINNED->DEVICE"]["bytes"] == MIB, summary
    assert summary["pinned_held_bytes"] == 4 * MIB, summary
    assert rec.records[0]["copy_kind_name"] == "HTOD" and rec.records[0]["flags_names"] == ["MEMCPY_ASYNC"]
    assert rec.records[1]["memory_pool_config"]["memory_pool_type"] == 0
    t = Truth()
    t.copy("h2d", "pinned", MIB)
    chk = check(t, rec.observed())
    assert chk["h2d.pinned"]["ratio"] == 1.0, chk
    print(jdump(rec.records))
    print(jdump(summary))
    print("selftest ok")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        name, tmpdir = argv[1], argv[2]
        rest = argv[3:]
        label = name
        if "--label" in rest:
            i = rest.index("--label")
            label = rest[i + 1]
            rest = rest[:i] + rest[i + 2:]
        mode = rest[0] if rest else None
        if label != name and not name.startswith("overhead"):
            # the same workload under another label (the pairing test): results under the label
            WORKLOADS[label] = WORKLOADS[name]
            name = label
        return child_main(name, tmpdir, mode) if not name.startswith("overhead") else overhead_child(tmpdir, mode or "off", label)
    if argv and argv[0] == "--selftest":
        return selftest()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("outdir")
    p.add_argument("--rounds", type=int, default=3, help="ABBA overhead rounds (4 children each)")
    p.add_argument("--only", default="", help="comma-separated workloads (and 'overhead', 'pair134')")
    p.add_argument("--skip", default="", help="comma-separated workloads to leave out")
    return parent_main(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
