"""The probe engine: runs a ``plan.Plan`` on one CUDA device and returns a ``ProbeResult``.

``run_probe`` checks the cap and the device, creates the context, then walks the plan's groups:
each group's buffers (``buffers``) are opened for its steps and freed before the next group; each
step is timed (``timing``) and becomes measurement rows; rows that compare with each other get
their notes (``analysis``) at the end. It never raises for CUDA or CuPy errors or a missing CuPy: it
returns status "unavailable" and the reason, with the rows measured so far. ``KeyboardInterrupt``
propagates, but only after every buffer is freed.

Bounds: the ``PinnedLedger`` refuses any pinned or registered buffer that would cross the cap before
CUDA is called; the cancel event and the time budget are checked between measurements; one probe
runs at a time per process (``safety.PROBE_LOCK``).
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..model import ProbeMeasurement, ProbeResult
from ..model.kinds import Direction, ProbeStatus
from ..units import fmt_bytes, fmt_seconds
from . import analysis, cuda
from . import plan as P
from .buffers import DeviceBuffer, HostBuffer, PageableBuffer, PinnedBuffer, Registered, sync_quietly
from .cupy_types import CuPy
from .safety import PROBE_LOCK, PinnedLedger, TimeBudget, pinned_cap
from .timing import EventTimer, copy_samples, cost_rows, median_row, rate_row, wall_samples

Progress = Callable[[int, int, str], None]


class _Stop(Exception):
    pass


@dataclass
class _Buffers:
    """What one group of steps holds: host memory by its memory kind ("pinned", "pageable", ...,
    and "scratch", ordinary memory the CPU steps copy to and from) and device memory ("main", and
    "out" for the read kernel's result)."""

    host: dict[str, HostBuffer] = field(default_factory=dict)
    device: dict[str, DeviceBuffer] = field(default_factory=dict)


def _group_of(step: P.Step) -> P.Group:
    return step.group


class _Run:
    """One walk of a plan: the buffers of each group, the steps, the checks between them."""

    def __init__(self, cp: CuPy, plan: P.Plan, gpu_index: int, budget: TimeBudget,
                 progress: Progress | None, cancel: threading.Event | None, ledger: PinnedLedger):
        self.cp = cp
        self.plan = plan
        self.gpu_index = gpu_index
        self.budget = budget
        self.progress = progress
        self.cancel = cancel
        self.ledger = ledger
        self.measurements: list[ProbeMeasurement] = []
        self.stop_reason: str | None = None
        self.done = 0

    # checks between measurements
    def _check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            self.stop_reason = "cancelled"
            raise _Stop()
        if self.budget.expired():
            self.stop_reason = (f"time budget of {self.budget.seconds:g} s spent after"
                                f" {self.done} of {self.plan.total} measurements")
            raise _Stop()

    def _report(self, label: str) -> None:
        if self.progress is not None:
            self.progress(self.done, self.plan.total, label)

    def run(self, init_row: ProbeMeasurement) -> None:
        cp = self.cp
        self.measurements.append(init_row)
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.timer = EventTimer(cp, self.stream)
        self._report("CUDA ready")
        try:
            for group, steps in itertools.groupby(self.plan.steps, key=_group_of):
                self._check()
                with contextlib.ExitStack() as stack:
                    res = self._open_group(stack, group)
                    for step in steps:
                        self._check()
                        self.measurements += self._run_step(step, res)
                        self.done += 1
                        self._report(step.label)
        except _Stop:
            pass
        finally:
            sync_quietly(self.stream)
        self._annotate()

    # buffers of a group
    def _open_group(self, stack: contextlib.ExitStack, group: P.Group) -> _Buffers:
        res = _Buffers()
        resource, size, *memory_of_group = group
        if resource == P.G_NONE:
            return res

        def pinned(memory: str) -> PinnedBuffer:
            return PinnedBuffer(size, P.HOST_ALLOC_FLAGS[memory], ledger=self.ledger, stream=self.stream)

        res.device["main"] = stack.enter_context(DeviceBuffer(size, stream=self.stream))
        if resource == P.G_COPY:
            res.host["pinned"] = stack.enter_context(pinned("pinned"))
            res.host["pageable"] = stack.enter_context(PageableBuffer(size))
        elif resource == P.G_PINNED:
            memory = memory_of_group[0]
            res.host[memory] = stack.enter_context(pinned(memory))
            if memory in ("pinned", "write_combined"):
                res.host["scratch"] = stack.enter_context(PageableBuffer(min(P.MODES_CPU_SIZE_BYTES, size)))
            if memory == "mapped":
                res.device["out"] = stack.enter_context(DeviceBuffer(256, stream=self.stream))
        elif resource == P.G_REGISTERED:
            res.host["registered"] = stack.enter_context(PageableBuffer(size))
        else:  # pragma: no cover - plan bug
            raise ValueError(f"unknown group resource {resource!r}")
        return res

    def _run_step(self, step: P.Step, res: _Buffers) -> list[ProbeMeasurement]:
        op = step.op
        if op == "copy":
            return [self._copy(step, res)]
        if op == "alloc":
            return self._alloc(step)
        if op in ("cpu_read", "cpu_write"):
            return [self._cpu(step, res)]
        if op == "kernel_read":
            return [self._kernel_read(step, res)]
        if op == "register":
            return self._register(step, res)
        raise ValueError(f"unknown step {op!r}")  # pragma: no cover - plan bug

    def _copy(self, step: P.Step, res: _Buffers) -> ProbeMeasurement:
        host = res.host[step.memory]
        device_ptr = res.device["main"].ptr
        direction = step.direction
        if direction is None:  # pragma: no cover - plan bug
            raise ValueError(f"copy step without a direction: {step.label}")
        note = None
        if self.plan.kind == "quick" and step.size_bytes < P.QUICK_SIZE_BYTES:
            note = f"capped to {fmt_bytes(step.size_bytes)} by the pinned cap"
        if step.memory == "registered":
            with Registered(host.ptr, step.size_bytes, ledger=self.ledger, stream=self.stream) as reg:
                samples = copy_samples(self.timer, reg.ptr, device_ptr, step.size_bytes,
                                       direction, step.repeats)
        else:
            samples = copy_samples(self.timer, host.ptr, device_ptr, step.size_bytes,
                                   direction, step.repeats)
        return rate_row("copy", step.memory, step.size_bytes, samples, direction, note)

    def _alloc(self, step: P.Step) -> list[ProbeMeasurement]:
        import numpy as np

        size = step.size_bytes
        alloc_s: list[float] = []
        free_s: list[float] = []
        for _ in range(step.repeats + 1):
            if step.memory == "pinned":
                with PinnedBuffer(size, 0, ledger=self.ledger) as buf:
                    pass
                a, f = buf.call_seconds()
                alloc_s.append(a)
                free_s.append(f)
            else:
                # What a pageable buffer costs before its first copy: the allocation and the page
                # faults of first touch (pinned memory arrives already faulted in).
                t0 = time.perf_counter()
                arr = np.empty(size, dtype=np.uint8)
                arr[::P.PAGE_BYTES] = 1
                t1 = time.perf_counter()
                del arr
                t2 = time.perf_counter()
                alloc_s.append(t1 - t0)
                free_s.append(t2 - t1)
        return cost_rows("alloc", step.memory, size, alloc_s) + cost_rows("free", step.memory, size, free_s)

    def _cpu(self, step: P.Step, res: _Buffers) -> ProbeMeasurement:
        import numpy as np

        buf = res.host[step.memory]
        n = step.size_bytes
        scratch = res.host["scratch"].view(n)
        view = buf.view(n)
        try:
            if step.op == "cpu_read":
                samples = wall_samples(functools.partial(np.copyto, scratch, view), step.repeats)
                note = "numpy copy out of the buffer into ordinary memory"
            else:
                samples = wall_samples(functools.partial(np.copyto, view, scratch), step.repeats)
                note = "numpy copy from ordinary memory into the buffer"
        finally:
            del view  # never outlives the buffer
        return rate_row(step.op, step.memory, n, samples, note=note)

    def _kernel_read(self, step: P.Step, res: _Buffers) -> ProbeMeasurement:
        cp = self.cp
        try:
            cuda.read_kernel(cp, self.gpu_index)
        except Exception as e:  # NVRTC missing or broken: the other modes still mean something
            return ProbeMeasurement(kind="kernel_read", memory=step.memory, size_bytes=step.size_bytes,
                                    note=f"not measured: kernel unavailable ({cuda.describe_error(e)})")
        if step.memory == "mapped":
            src = cuda.mapped_device_pointer(cp, res.host["mapped"].ptr)
            note = "GPU kernel reading mapped host memory over PCIe (zero-copy)"
        else:
            src = res.device["main"].ptr
            note = "the same kernel reading device memory"
        launch = cuda.read_kernel_launch(cp, self.gpu_index, src, step.size_bytes, res.device["out"].ptr,
                                         self.stream)
        samples = self.timer.samples(launch, step.repeats)
        return rate_row("kernel_read", step.memory, step.size_bytes, samples, note=note)

    def _register(self, step: P.Step, res: _Buffers) -> list[ProbeMeasurement]:
        host = res.host["registered"]
        reg_s: list[float] = []
        unreg_s: list[float] = []
        for _ in range(step.repeats):
            with Registered(host.ptr, step.size_bytes, ledger=self.ledger, stream=self.stream) as reg:
                pass
            r, u = reg.call_seconds()
            reg_s.append(r)
            unreg_s.append(u)
        size = step.size_bytes
        return [median_row("register", "registered", size, reg_s,
                           note=f"cudaHostRegister of an existing numpy buffer; first {fmt_seconds(reg_s[0])}"),
                median_row("free", "registered", size, unreg_s, note="cudaHostUnregister")]

    # notes that compare rows
    def _annotate(self) -> None:
        if self.plan.kind == "alloc":
            self.measurements = analysis.annotate_break_even(self.measurements)
        elif self.plan.kind == "modes":
            self.measurements = analysis.annotate_modes(self.measurements)


def run_probe(kind: str = "quick", gpu_index: int = 0, max_pinned_bytes: int | None = None,
              time_budget_s: float | None = None, progress: Progress | None = None,
              cancel: threading.Event | None = None,
              link_theoretical_bytes_per_s: float | None = None,
              effective_mem_limit_bytes: int | None = None) -> ProbeResult:
    """Run probe ``kind`` ("quick", "sweep", "alloc", "modes") on CUDA device ``gpu_index``.

    ``max_pinned_bytes``: the user's cap (None: 256 MiB; never over 5% of available memory, nor of
    ``effective_mem_limit_bytes`` when given). ``time_budget_s``: None for the kind's default
    (plan.DEFAULT_TIME_BUDGET_S). ``progress(done, total, label)`` is called once CUDA is ready and
    after every measurement; ``cancel`` is checked between measurements. A cancelled or
    out-of-budget probe returns what it measured with status "ok" and the reason ("cancelled").
    ``link_theoretical_bytes_per_s`` is only copied into the result (the probe never calls NVML).

    Never raises for CUDA/CuPy trouble (status "unavailable", reason set); raises ValueError for an
    unknown ``kind``; KeyboardInterrupt propagates after every buffer is freed.
    """
    if kind not in P.KINDS:
        raise ValueError(f"unknown probe kind {kind!r} (one of {', '.join(P.KINDS)})")
    wall_start = time.time()
    t0 = time.perf_counter()

    def result(status: ProbeStatus, reason: str | None, rows: Sequence[ProbeMeasurement] = (),
               cap: int | None = None) -> ProbeResult:
        return ProbeResult(time=wall_start, gpu_index=gpu_index, status=status, reason=reason, kind=kind,
                           link_theoretical_bytes_per_s=link_theoretical_bytes_per_s,
                           duration_s=time.perf_counter() - t0, max_pinned_bytes=cap,
                           measurements=tuple(rows))

    cap = pinned_cap(max_pinned_bytes, effective_limit_bytes=effective_mem_limit_bytes)
    if cap.refused:
        return result("unavailable", cap.reason, cap=cap.cap_bytes)
    cp, reason = cuda.import_cupy()
    if cp is None:
        return result("unavailable", reason, cap=cap.cap_bytes)
    if not PROBE_LOCK.acquire(blocking=False):
        return result("unavailable", "another probe is already running in this process", cap=cap.cap_bytes)
    run: _Run | None = None
    try:
        reason = cuda.device_problem(cp, gpu_index)
        if reason:
            return result("unavailable", reason, cap=cap.cap_bytes)
        plan = P.build_plan(kind, cap.cap_bytes)
        budget_s = P.DEFAULT_TIME_BUDGET_S[kind] if time_budget_s is None else time_budget_s
        budget = TimeBudget(budget_s)
        ledger = PinnedLedger(cap.cap_bytes)
        run = _Run(cp, plan, gpu_index, budget, progress, cancel, ledger)
        with cp.cuda.Device(gpu_index):
            init_s, init_note = cuda.init_context(cp, gpu_index)
            notes = [init_note, *cap.notes, *plan.notes]
            init_row = ProbeMeasurement(kind="init", memory="device", size_bytes=0, seconds=init_s,
                                        repeats=1, note="; ".join(notes))
            run.run(init_row)
        return result("ok", run.stop_reason, run.measurements, cap.cap_bytes)
    except Exception as e:
        text = cuda.describe_error(e)
        rows = run.measurements if run is not None else ()
        return result("unavailable", f"CUDA error during the {kind} probe: {text}{cuda.driver_hint(cp, text)}",
                      rows, cap.cap_bytes)
    finally:
        PROBE_LOCK.release()


def measure_copies(sizes_bytes: Sequence[int], *, memory: Literal["pinned", "pageable"] = "pinned",
                   directions: Sequence[Direction] = ("h2d", "d2h"), repeats: int | None = None,
                   gpu_index: int = 0, max_pinned_bytes: int | None = None) -> list[ProbeMeasurement]:
    """Copy bandwidth exactly as ``run_probe`` times it, for benchmarks: one host buffer of the
    largest size (``memory`` "pinned" or "pageable"), each size in each direction, ``repeats``
    (None: plan.copy_repeats) after one warm-up. Raises on errors, unlike run_probe."""
    if memory not in ("pinned", "pageable"):
        raise ValueError("memory must be 'pinned' or 'pageable'")
    cp, reason = cuda.import_cupy()
    if cp is None:
        raise RuntimeError(reason)
    biggest = max(sizes_bytes)
    cap = pinned_cap(max_pinned_bytes)
    if memory == "pinned" and (cap.refused or biggest > cap.cap_bytes):
        raise RuntimeError(cap.reason or f"{fmt_bytes(biggest)} is over the pinned cap of"
                                          f" {fmt_bytes(cap.cap_bytes)} (pass max_pinned_bytes)")
    with PROBE_LOCK, cp.cuda.Device(gpu_index):
        stream = cp.cuda.Stream(non_blocking=True)
        timer = EventTimer(cp, stream)
        rows = []
        with contextlib.ExitStack() as stack:
            device = stack.enter_context(DeviceBuffer(biggest, stream=stream))
            if memory == "pinned":
                host_ptr = stack.enter_context(
                    PinnedBuffer(biggest, 0, ledger=PinnedLedger(cap.cap_bytes), stream=stream)).ptr
            else:
                host_ptr = stack.enter_context(PageableBuffer(biggest)).ptr
            for size in sizes_bytes:
                for d in directions:
                    n = P.copy_repeats(size) if repeats is None else repeats
                    samples = copy_samples(timer, host_ptr, device.ptr, size, d, n)
                    rows.append(rate_row("copy", memory, size, samples, d))
        return rows
