"""``pinmon probe --numa``: pinned copies with the host buffer on each NUMA node, local vs remote.

For each node with memory, one anonymous mapping is bound to that node (``mbind`` with MPOL_BIND
before its first touch), touched, checked page by page (``move_pages`` asked for the node of a sample
of pages), then ``cudaHostRegister``ed and copied H2D and D2H exactly as the quick probe copies
(CUDA events on a non-blocking stream, one warm-up, the median of the repeats). One node's buffer is
held at a time, under the same pinned cap as every probe. The GPU's own node comes from sysfs.

``mbind`` and ``move_pages`` are called through libc's ``syscall`` (no libnuma needed); their
numbers are known for x86-64 and aarch64, elsewhere the probe says it cannot bind memory.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from ..model import ProbeMeasurement, ProbeResult
from ..model.kinds import ProbeStatus
from ..units import MIB, fmt_bytes, fmt_pct
from . import cuda
from . import plan as P
from .buffers import DeviceBuffer, HostBuffer, Registered, sync_quietly
from .safety import PROBE_LOCK, PinnedLedger, TimeBudget, pinned_cap
from .timing import EventTimer, copy_samples, rate_row

NUMA_SIZE_BYTES = 64 * MIB
NUMA_TIME_BUDGET_S = 60.0
MPOL_BIND = 2
# Nodes a mask can name; the kernel reads one bit fewer than ``maxnode`` (hence the + 1 below).
_MASK_BITS = 1024
_MASK_WORDS = _MASK_BITS // (8 * ctypes.sizeof(ctypes.c_ulong))
# Pages whose node is asked for when checking a buffer's placement.
_PLACEMENT_SAMPLES = 256
SYSCALLS = {"x86_64": {"mbind": 237, "move_pages": 279},
            "aarch64": {"mbind": 235, "move_pages": 239}}
PROT_READ, PROT_WRITE = 0x1, 0x2
MAP_PRIVATE, MAP_ANONYMOUS = 0x02, 0x20


def syscall_numbers(machine: str | None = None) -> dict[str, int] | None:
    return SYSCALLS.get(machine or platform.machine())


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                          ctypes.c_long)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    return libc


def node_mask(node: int) -> tuple[ctypes.Array[ctypes.c_ulong], int]:
    """(mask words, maxnode) naming one node, as mbind takes them."""
    if not 0 <= node < _MASK_BITS:
        raise ValueError(f"NUMA node {node} is outside the {_MASK_BITS} nodes a mask names")
    mask = (ctypes.c_ulong * _MASK_WORDS)()
    bits = 8 * ctypes.sizeof(ctypes.c_ulong)
    mask[node // bits] = 1 << (node % bits)
    return mask, _MASK_BITS + 1


class NodeBuffer(HostBuffer):
    """``nbytes`` of anonymous memory whose pages are all on NUMA node ``node``; unmapped on close."""

    def __init__(self, nbytes: int, node: int, page_size: int = P.PAGE_BYTES):
        self.nbytes = int(nbytes)
        self.node = int(node)
        self.page_size = page_size
        self.ptr = 0
        self._libc: ctypes.CDLL | None = None

    def open(self) -> NodeBuffer:
        numbers = syscall_numbers()
        if numbers is None:
            raise OSError(errno.ENOSYS, f"binding memory to a NUMA node is not supported on {platform.machine()}")
        libc = self._libc = _libc()
        # ctypes answers as its restype says: c_void_p is an int or None, c_long an int.
        ptr: int | None = libc.mmap(None, self.nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        if ptr is None or ptr == ctypes.c_void_p(-1).value:
            e = ctypes.get_errno()
            raise OSError(e, f"mmap of {fmt_bytes(self.nbytes)}: {os.strerror(e)}")
        self.ptr = ptr
        mask, maxnode = node_mask(self.node)
        rc: int = libc.syscall(ctypes.c_long(numbers["mbind"]), ctypes.c_void_p(ptr), ctypes.c_ulong(self.nbytes),
                          ctypes.c_int(MPOL_BIND), mask, ctypes.c_ulong(maxnode), ctypes.c_uint(0))
        if rc != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"mbind to node {self.node}: {os.strerror(e)}")
        ctypes.memset(ptr, 1, self.nbytes)  # first touch: every page is allocated under the binding
        return self

    def placement(self) -> dict[int, int]:
        """{node: pages} over a sample of the buffer's pages (``move_pages`` with no target nodes
        only reports where each page is); a page the kernel could not report is left out."""
        numbers = syscall_numbers()
        if not self.ptr or numbers is None or self._libc is None:
            return {}
        pages = max(1, self.nbytes // self.page_size)
        step = max(1, pages // _PLACEMENT_SAMPLES)
        offsets = range(0, pages, step)
        count = len(offsets)
        addrs = (ctypes.c_void_p * count)(*(self.ptr + i * self.page_size for i in offsets))
        status = (ctypes.c_int * count)()
        rc: int = self._libc.syscall(ctypes.c_long(numbers["move_pages"]), ctypes.c_int(0), ctypes.c_ulong(count),
                                addrs, None, status, ctypes.c_int(0))
        if rc < 0:
            return {}
        out: dict[int, int] = {}
        for s in status:
            if s >= 0:
                out[s] = out.get(s, 0) + 1
        return out

    def close(self) -> None:
        ptr, self.ptr = self.ptr, 0
        if ptr and self._libc is not None:
            self._libc.munmap(ctypes.c_void_p(ptr), self.nbytes)


def node_role(node: int, gpu_node: int | None) -> str:
    """"local" (the GPU's node), "remote", or "GPU node unknown"."""
    if gpu_node is None:
        return "GPU node unknown"
    return "local" if node == gpu_node else "remote"


def placement_note(node: int, placement: dict[int, int]) -> str:
    sampled = sum(placement.values())
    if not sampled:
        return "placement not checked (move_pages gave no answer)"
    share = placement.get(node, 0) / sampled
    text = f"{fmt_pct(share)} of {sampled} sampled pages on node {node}"
    others = {n: c for n, c in placement.items() if n != node}
    if others:
        text += " (others: " + ", ".join(f"node {n} {c}" for n, c in sorted(others.items())) + ")"
    return text


def run_numa_probe(gpu_index: int = 0, nodes: Sequence[int] = (), gpu_node: int | None = None,
                   max_pinned_bytes: int | None = None,
                   link_theoretical_bytes_per_s: float | None = None,
                   progress: Callable[[int, int, str], None] | None = None, time_budget_s: float | None = None,
                   size_bytes: int = NUMA_SIZE_BYTES) -> ProbeResult:
    """H2D and D2H copies of a registered buffer placed on each of ``nodes`` in turn (kind "numa").

    Every copy row has ``memory`` "registered", ``host_numa_node`` and a note saying local/remote and
    how many sampled pages really sat on the node. Never raises for CUDA trouble, a missing CuPy or a
    refused ``mbind`` (status "unavailable" with the reason, and the rows measured so far)."""
    wall_start = time.time()
    t0 = time.perf_counter()

    def result(status: ProbeStatus, reason: str | None, rows: Sequence[ProbeMeasurement] = (),
               cap: int | None = None) -> ProbeResult:
        return ProbeResult(time=wall_start, gpu_index=gpu_index, status=status, reason=reason, kind="numa",
                           link_theoretical_bytes_per_s=link_theoretical_bytes_per_s,
                           duration_s=time.perf_counter() - t0, max_pinned_bytes=cap,
                           measurements=tuple(rows))

    nodes = list(nodes)
    if len(nodes) < 2:
        return result("unavailable", "one NUMA node: no remote memory to compare with")
    if syscall_numbers() is None:
        return result("unavailable", f"binding memory to a NUMA node is not supported on {platform.machine()}")
    cap = pinned_cap(max_pinned_bytes)
    if cap.refused:
        return result("unavailable", cap.reason, cap=cap.cap_bytes)
    size = P.capped_size(size_bytes, cap.cap_bytes)
    cp, reason = cuda.import_cupy()
    if cp is None:
        return result("unavailable", reason, cap=cap.cap_bytes)
    if not PROBE_LOCK.acquire(blocking=False):
        return result("unavailable", "another probe is already running in this process", cap=cap.cap_bytes)
    rows: list[ProbeMeasurement] = []
    budget = TimeBudget(NUMA_TIME_BUDGET_S if time_budget_s is None else time_budget_s)
    stop: str | None = None
    try:
        reason = cuda.device_problem(cp, gpu_index)
        if reason:
            return result("unavailable", reason, cap=cap.cap_bytes)
        ledger = PinnedLedger(cap.cap_bytes)
        total = 2 * len(nodes)
        with cp.cuda.Device(gpu_index):
            init_s, init_note = cuda.init_context(cp, gpu_index)
            notes = [init_note, *cap.notes,
                     f"GPU's NUMA node: {gpu_node if gpu_node is not None else 'unknown (sysfs reads -1)'}"]
            if size < size_bytes:
                notes.append(f"buffers of {fmt_bytes(size)} instead of {fmt_bytes(size_bytes)}: pinned cap is"
                             f" {fmt_bytes(cap.cap_bytes)}")
            rows.append(ProbeMeasurement(kind="init", memory="device", size_bytes=0, seconds=init_s, repeats=1,
                                         note="; ".join(notes)))
            stream = cp.cuda.Stream(non_blocking=True)
            timer = EventTimer(cp, stream)
            done = 0
            if progress is not None:
                progress(done, total, "CUDA ready")
            try:
                with DeviceBuffer(size, stream=stream) as device:
                    for node in nodes:
                        if budget.expired():
                            stop = f"time budget of {budget.seconds:g} s spent after {done} of {total} measurements"
                            break
                        with NodeBuffer(size, node) as buf:
                            note = f"{node_role(node, gpu_node)}; {placement_note(node, buf.placement())}"
                            with Registered(buf.ptr, size, ledger=ledger, stream=stream) as reg:
                                for direction in ("h2d", "d2h"):
                                    samples = copy_samples(timer, reg.ptr, device.ptr, size, direction,
                                                           P.copy_repeats(size))
                                    row = rate_row("copy", "registered", size, samples, direction, note)
                                    rows.append(replace(row, host_numa_node=node))
                                    done += 1
                                    if progress is not None:
                                        progress(done, total, f"node {node} {direction}")
            finally:
                sync_quietly(stream)
        return result("ok", stop, rows, cap.cap_bytes)
    except Exception as e:
        text = cuda.describe_error(e)
        return result("unavailable", f"error during the NUMA probe: {text}", rows, cap.cap_bytes)
    finally:
        PROBE_LOCK.release()

