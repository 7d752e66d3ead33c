"""The kernel's count of pinned pages against known allocations, on a GPU box; and what reading it costs.

Usage: python3 bench/kernel_pins_h200.py OUT.json        (about a minute on the H200 box)

1. Known allocations, each in a child process that steps when told (context, allocate, free): a CUDA
   context alone; cudaHostAlloc default (1 GiB), mapped (512 MiB) and write-combined (256 MiB);
   cudaHostRegister of a 1 GiB numpy buffer; torch ``pin_memory()`` of 512 MiB; and, as a control that
   needs no GPU, a 256 MiB io_uring registered buffer. At each step the kernel's figure is read the way
   pinmon reads it (``KernelPinsReader``) once it has settled (per-CPU deltas folded with
   /proc/sys/vm/stat_refresh where this runs as root, else after a second of stillness). With the
   allocation held: pinmon's /proc/PID/maps estimate of the child and a whole live snapshot's
   ``pinned_bytes_total``, its source and the unattributed bytes.
2. Another process holds a 2 GiB cudaHostRegister buffer while ``pinmon check --json`` runs: the
   unattributed figure and the ``pinned-unattributed`` finding.
3. CPU per snapshot of the new reads: whole live snapshots with and without them, interleaved (goal:
   under 5% added); and each read alone (/proc/vmstat, per-node vmstat, VmLck of the CUDA rows, and
   numa_maps of one pinned process, which pinmon reads only on multi-node hosts and only when a
   process's pinned mappings changed).

A scenario that cannot run (no CuPy, no torch, no GPU) is recorded with its error; the rest still runs.
The JSON holds ``provenance`` (bench/provenance.py): the commit, versions, the driver and the GPU.
"""
from __future__ import annotations

import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance

MIB = 1 << 20
GIB = 1 << 30
SCHEMA = "pinmon.bench.kernel_pins/1"
STEP_TIMEOUT_S = 60.0
SNAPSHOTS = 400  # per arm of the with/without comparison, and per part

# name -> (truth bytes, what it allocates)
SCENARIOS = {
    "io_uring_256m": (256 * MIB, "io_uring registered buffer (no GPU): the CPU-only control"),
    "context_only": (0, "a CUDA context alone (cupy), no host allocation"),
    "hostalloc_default_1g": (GIB, "cudaHostAlloc(1 GiB, cudaHostAllocDefault)"),
    "hostalloc_mapped_512m": (512 * MIB, "cudaHostAlloc(512 MiB, cudaHostAllocMapped)"),
    "hostalloc_wc_256m": (256 * MIB, "cudaHostAlloc(256 MiB, cudaHostAllocWriteCombined): driver pages"),
    "host_register_1g": (GIB, "cudaHostRegister of a 1 GiB numpy buffer"),
    "torch_pin_memory_512m": (512 * MIB, "torch.empty(512 MiB, uint8).pin_memory()"),
}
REGISTER_CHECK_BYTES = 2 * GIB


# --- the child: one allocation, stepped by the parent -----------------------------------------------

def _say(**msg) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _wait() -> None:
    if not sys.stdin.readline():
        raise SystemExit(0)  # the parent went away


def child(name: str) -> int:
    """Context, then the allocation, then the free, each step announced on stdout and started by a
    line on stdin."""
    try:
        free = _child_steps(name)
    except SystemExit:
        raise
    except BaseException as e:  # report any failure to the parent as one line
        _say(step="error", error=f"{type(e).__name__}: {e}")
        return 1
    _wait()
    try:
        free()
    except BaseException as e:
        _say(step="error", error=f"free: {type(e).__name__}: {e}")
        return 1
    _say(step="freed")
    _wait()
    return 0


def _child_steps(name: str):
    keep: list = []
    if name.startswith("io_uring"):
        from tests.iouring import PinnedBuffer

        _say(step="ctx", pid=os.getpid())
        _wait()
        buf = PinnedBuffer(SCENARIOS[name][0])
        buf.open()
        _say(step="alloc", bytes=buf.nbytes)
        return buf.close
    if name.startswith("torch"):
        import torch

        torch.zeros(1, device="cuda")  # the context
        _say(step="ctx", pid=os.getpid())
        _wait()
        t = torch.empty(SCENARIOS[name][0], dtype=torch.uint8).pin_memory()
        keep.append(t)
        _say(step="alloc", bytes=t.numel())

        def free():
            keep.clear()
            empty = getattr(torch._C, "_host_emptyCache", None)  # the caching host allocator keeps blocks
            if empty is not None:
                empty()
        return free
    import cupy as cp

    rt = cp.cuda.runtime
    rt.setDevice(int(os.environ.get("PINMON_BENCH_GPU", "0")))
    rt.free(0)  # cudaFree(NULL): creates the context
    _say(step="ctx", pid=os.getpid())
    _wait()
    size = SCENARIOS[name][0] if name in SCENARIOS else REGISTER_CHECK_BYTES
    if name == "context_only":
        _say(step="alloc", bytes=0)
        return lambda: None
    if name.startswith("hostalloc"):
        flags = {"default": 0, "mapped": 2, "wc": 4}[name.split("_")[1]]
        ptr = rt.hostAlloc(size, flags)
        _say(step="alloc", bytes=size)
        return lambda: rt.freeHost(ptr)
    if name.startswith("host_register"):
        import numpy as np

        raw = np.ones(size + 4096, dtype=np.uint8)  # touched: every page exists before it is pinned
        offset = (-raw.ctypes.data) % 4096
        arr = raw[offset:offset + size]
        rt.hostRegister(arr.ctypes.data, size, 0)
        keep.append(raw)
        _say(step="alloc", bytes=size)
        return lambda: rt.hostUnregister(arr.ctypes.data)
    raise ValueError(f"unknown scenario {name!r}")


# --- the parent --------------------------------------------------------------------------------------

class Child:
    """A child process running one scenario; ``expect(step)`` reads its next announcement."""

    def __init__(self, name: str):
        self.name = name
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", name],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     text=True, bufsize=1, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)

    def expect(self, step: str, timeout_s: float = STEP_TIMEOUT_S) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                raise RuntimeError(f"{self.name}: no {step!r} within {timeout_s:g} s{self._stderr()}")
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.name}: exited (code {self.proc.wait()}) before {step!r}{self._stderr()}")
            msg = parse_message(line)
            if msg is None:
                continue  # a library printing to stdout
            if msg.get("step") == "error":
                raise RuntimeError(f"{self.name}: {msg.get('error')}")
            if msg.get("step") == step:
                return msg

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def _stderr(self) -> str:
        self.err.seek(0)
        tail = self.err.read()[-600:].strip()
        return f"; stderr: {tail}" if tail else ""

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            self.sel.close()
            self.err.close()


def parse_message(line: str):
    """One child announcement (a JSON object with a "step"), or None for any other line."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) and isinstance(msg.get("step"), str) else None


def fold() -> bool:
    """Fold the per-CPU vmstat deltas now (root only); whether it could."""
    try:
        with open("/proc/sys/vm/stat_refresh", "w") as f:
            f.write("1")
        return True
    except OSError:
        return False


def settled(read, timeout_s: float = 5.0):
    """A reading that holds still: twice the same right after folds, or for 1.2 s without them."""
    folded = fold()
    value, since = read(), time.monotonic()
    deadline = since + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.1 if folded else 0.2)
        folded = fold()
        now = read()
        if now != value:
            value, since = now, time.monotonic()
        elif folded or time.monotonic() - since >= 1.2:
            return value
    return value


def delta(a, b):
    return None if a is None or b is None else a - b


def resident_kib(pid: int) -> dict:
    """RssAnon/RssFile/RssShmem of the child (KiB), what pinmon caps its estimate by (collect/processes/resident.py)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("RssAnon", "RssFile", "RssShmem", "VmLck", "VmPin"):
                    out[key] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


def allocation_row(name: str, truth: int, readings: dict, est, snap_host, row, resident=None) -> dict:
    """One table row: truth, the kernel figure's changes, pinmon's estimate and best figure."""
    return {
        "scenario": name, "what": SCENARIOS.get(name, (None, name))[1], "truth_bytes": truth,
        "kernel_context_delta_bytes": delta(readings.get("ctx"), readings.get("base")),
        "kernel_alloc_delta_bytes": delta(readings.get("alloc"), readings.get("ctx")),
        "kernel_free_delta_bytes": delta(readings.get("alloc"), readings.get("freed")),
        "kernel_readings_bytes": readings,
        "maps_pinned_bytes": None if est is None else est.pinned_bytes,
        "maps_write_combined_bytes": None if est is None else est.write_combined_bytes,
        "row_pinned_bytes": None if row is None else row.held.pinned_bytes,
        "row_write_combined_bytes": None if row is None else row.held.write_combined_bytes,
        "row_estimate_capped": None if row is None else row.held.capped,
        "row_vm_pinned_bytes": None if row is None else row.held.vm_pinned_bytes,
        "resident_kib": resident,
        "pinned_bytes_total": None if snap_host is None else snap_host.pinned_bytes_total,
        "pinned_bytes_source": None if snap_host is None else snap_host.pinned_bytes_source,
        "kernel_pinned_bytes": None if snap_host is None else snap_host.kernel_pinned_bytes,
        "unattributed_pinned_bytes": None if snap_host is None else snap_host.unattributed_pinned_bytes,
        "pinned_bytes_est": None if snap_host is None else snap_host.pinned_bytes_est,
    }


def run_allocation(name: str, kernel) -> dict:
    from pinmon.collect.live import LiveCollector
    from pinmon.collect.processes.procmaps import estimate_pinned

    truth = SCENARIOS[name][0]
    readings: dict = {"base": settled(kernel)}
    t0 = time.perf_counter()
    c = Child(name)
    try:
        pid = c.expect("ctx")["pid"]
        readings["ctx"] = settled(kernel)
        c.go()
        truth = c.expect("alloc").get("bytes", truth)
        readings["alloc"] = settled(kernel)
        with open(f"/proc/{pid}/maps") as f:
            est = estimate_pinned(f.read())
        resident = resident_kib(pid)
        with LiveCollector(use_nvml=False) as col:
            snap = col.snapshot()
        row = next((p for p in snap.processes if p.pid == pid), None)
        c.go()
        c.expect("freed")
        readings["freed"] = settled(kernel)
        out = allocation_row(name, truth, readings, est, snap.host, row, resident)
    except Exception as e:
        out = allocation_row(name, truth, readings, None, None, None)
        out["error"] = str(e)
    finally:
        c.close()
    out["seconds"] = time.perf_counter() - t0
    return out


def run_register_check(kernel) -> dict:
    """``pinmon check --json`` while a child holds a 2 GiB cudaHostRegister buffer."""
    out: dict = {"registered_bytes": REGISTER_CHECK_BYTES}
    c = Child("host_register_check")
    try:
        c.expect("ctx")
        base = settled(kernel)
        c.go()
        c.expect("alloc")
        held = settled(kernel)
        out["kernel_delta_bytes"] = delta(held, base)
        p = subprocess.run([sys.executable, "-m", "pinmon", "check", "--json"], capture_output=True, text=True,
                           timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
        out["exit_code"] = p.returncode
        out.update(summarize_check(p.stdout))
        if p.returncode not in (0, 1, 2):
            out["stderr"] = p.stderr[-800:]
        c.go()
        c.expect("freed")
    except Exception as e:
        out["error"] = str(e)
    finally:
        c.close()
    return out


def summarize_check(stdout: str) -> dict:
    """The host's pinned figures and the pinned findings of a ``pinmon check --json`` document."""
    try:
        doc = json.loads(stdout)
        host = doc["snapshot"]["host"]
        findings = doc["findings"]
    except (ValueError, KeyError, TypeError) as e:
        return {"parse_error": f"{type(e).__name__}: {e}", "stdout_tail": stdout[-400:]}
    keys = ("kernel_pinned_bytes", "kernel_pinned_bytes_by_node", "pinned_bytes_total", "pinned_bytes_source",
            "unattributed_pinned_bytes", "pinned_bytes_est", "write_combined_bytes_est", "numa_nodes")
    return {"status": doc.get("status"), "host": {k: host.get(k) for k in keys},
            "findings": [f for f in findings if f.get("rule") in
                         ("pinned-unattributed", "pinned-ram-share", "mlock-not-pinned", "pinned-numa-remote")],
            "rules": sorted({f.get("rule") for f in findings})}


def cpu_per_call(fn, n: int) -> float:
    """Median CPU of one call (this thread's time around the call only), calls 20 ms apart as a
    1 Hz loop spreads them, so caches are as cold as they are in use."""
    fn()
    samples = []
    for _ in range(n):
        time.sleep(0.02)
        t = time.thread_time()
        fn()
        samples.append(time.thread_time() - t)
    return statistics.median(samples)


class Ticks:
    """A clock that moves one interval per tick: the new reads' caches behave as at 1 Hz even though
    the snapshots here are taken 20 ms apart."""

    def __init__(self, step_s: float = 1.0):
        self.now, self.step_s = 0.0, step_s

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        self.now += self.step_s


def snapshot_ab(col, n: int) -> dict:
    """A whole snapshot with and without the new reads, interleaved so drift hits both alike. The
    new reads run on a clock that moves 1 s per snapshot that has them, as in a 1 Hz loop: the
    kernel's count is read every other one (``MIN_READ_INTERVAL_S``), VmLck every 10th (its time to
    live). Besides the medians and means of each arm, ``added_share_paired`` is the median of the
    differences of neighbouring pairs (with minus without) over the median without: a pair is 40 ms
    apart, so the box's drift cancels in it."""
    from pinmon.collect.host.pinned_total import PinnedTotals

    ticks = Ticks()
    real = PinnedTotals(clock=ticks)

    class Without:
        def annotate(self, rows):
            return list(rows)

        def host_fields(self, *a):
            return {}, []

        def close(self):
            pass

    saved = col.pinned
    runs: dict = {"with": [], "without": []}
    try:
        for i in range(2 * n):
            arm = "with" if i % 2 == 0 else "without"
            col.pinned = real if arm == "with" else Without()
            if arm == "with":
                ticks.tick()
            time.sleep(0.02)
            t = time.thread_time()
            col.snapshot()
            runs[arm].append(time.thread_time() - t)
    finally:
        col.pinned = saved
        real.close()
    out = {f"snapshot_{arm}_new_reads_{stat}_cpu_s": fn(v) for arm, v in runs.items()
           for stat, fn in (("median", statistics.median), ("mean", statistics.mean))}
    for stat in ("median", "mean"):
        a, b = out[f"snapshot_with_new_reads_{stat}_cpu_s"], out[f"snapshot_without_new_reads_{stat}_cpu_s"]
        out[f"added_share_{stat}"] = (a - b) / b if b else None
    paired = statistics.median(w - o for w, o in zip(runs["with"], runs["without"]))
    base = out["snapshot_without_new_reads_median_cpu_s"]
    out["added_paired_median_cpu_s"] = paired
    out["added_share_paired"] = paired / base if base else None
    return out


def run_cpu(n: int = SNAPSHOTS) -> dict:
    """CPU per snapshot of the new reads against a whole snapshot, with a CUDA process holding
    pinned memory (when CUDA works), so the VmLck and numa_maps reads have a real row to read."""
    from pinmon.collect.host.kernel_pins import KernelPinsReader, read_pinned_bytes
    from pinmon.collect.host.numa import NODE_DIR, read_pinned_placement
    from pinmon.collect.live import LiveCollector
    from pinmon.collect.processes.locked import read_vm_locked

    out: dict = {"snapshots_per_arm": n}
    c = None
    try:
        c = Child("hostalloc_default_1g")
        c.expect("ctx")
        c.go()
        c.expect("alloc")
    except Exception as e:
        out["pinned_process_error"] = str(e)
    try:
        with LiveCollector(interval_s=1.0) as col:
            time.sleep(1.0)
            snap = col.snapshot()
            rows = list(snap.processes)
            page = col.pinned.kernel.page_size
            nodes = col.pinned.kernel.nodes() or ()
            pinned = [p for p in rows if p.held.pinned_bytes]
            out.update(snapshot_ab(col, n))
            kernel_ticks = Ticks()
            kernel = KernelPinsReader("/", clock=kernel_ticks)
            parts = {
                "noop": lambda: None,
                "proc_vmstat_open_read": lambda: read_pinned_bytes("/proc/vmstat", page),
                "node_vmstat_open_read": lambda: [read_pinned_bytes(os.path.join("/", NODE_DIR, f"node{i}", "vmstat"),
                                                                    page) for i in nodes],
                "kernel_pins_read_kept_open": lambda: (kernel_ticks.tick(), kernel.read()),
                "vm_locked_all_rows": lambda: [read_vm_locked(p.pid) for p in rows],
            }
            if pinned:
                parts["numa_maps_one_process"] = lambda: read_pinned_placement(pinned[0].pid)
            for name, fn in parts.items():
                out[name + "_cpu_s"] = cpu_per_call(fn, n)
            out["numa_nodes"] = list(nodes)
            out["cuda_processes"] = len(rows)
            out["pinned_processes"] = len(pinned)
            kernel.close()
    finally:
        if c is not None:
            c.close()
    whole = out.get("snapshot_without_new_reads_median_cpu_s")
    out["goal_share"] = 0.05
    # Both estimates must be under the goal: the arms' medians and the pairs' median.
    shares = [out.get("added_share_median"), out.get("added_share_paired")]
    out["within_goal"] = all(s is not None and s < 0.05 for s in shares)
    if whole and out.get("numa_maps_one_process_cpu_s") is not None:
        # Were numa_maps read at every snapshot (it is not: multi-node hosts only, on change only).
        out["numa_maps_every_snapshot_share"] = out["numa_maps_one_process_cpu_s"] / whole
    return out


def meta() -> dict:
    return {"schema": SCHEMA, "time": time.time(), "provenance": provenance(),
            "page_size": os.sysconf("SC_PAGE_SIZE"),
            "fold": "stat_refresh" if fold() else "one second of stillness"}


def write_json(path: str, doc: dict) -> None:
    """Write ``doc`` whole (a temporary file renamed into place: never half a file)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, default=str)
        f.write("\n")
    os.replace(tmp, path)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--child":
        return child(argv[1])
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python3 bench/kernel_pins_h200.py OUT.json", file=sys.stderr)
        return 2
    from pinmon.collect.host.kernel_pins import KernelPinsReader
    from pinmon.collect.host.numa import list_nodes

    t0 = time.perf_counter()
    reader = KernelPinsReader("/", min_interval_s=0.0)  # every reading fresh

    def kernel():
        return reader.read().pinned_bytes

    doc = meta()
    doc["numa_nodes"] = list(list_nodes() or ())
    if kernel() is None:
        doc["error"] = "this kernel has no nr_foll_pin_* counters in /proc/vmstat"
        write_json(argv[0], doc)
        return 1
    doc["allocations"] = []
    for name in SCENARIOS:
        row = run_allocation(name, kernel)
        doc["allocations"].append(row)
        print(f"{name}: truth {row['truth_bytes']}, kernel +{row['kernel_alloc_delta_bytes']}"
              f" (context +{row['kernel_context_delta_bytes']}), maps {row['maps_pinned_bytes']},"
              f" total {row['pinned_bytes_total']} ({row['pinned_bytes_source']})"
              + (f"  ERROR {row['error']}" if "error" in row else ""), flush=True)
    doc["register_2g_check"] = run_register_check(kernel)
    print("register 2 GiB + check:", json.dumps({k: v for k, v in doc["register_2g_check"].items()
                                                  if k != "findings"}), flush=True)
    doc["cpu"] = run_cpu()
    print("cpu:", json.dumps(doc["cpu"]), flush=True)
    doc["duration_s"] = time.perf_counter() - t0
    write_json(argv[0], doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
