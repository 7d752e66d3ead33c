"""How the probe times things: GPU work with a pair of CUDA events on one stream, host work with
``time.perf_counter``; one warm-up, then one sample per repeat, reported as the median.

A copy or kernel is handed in as a launch function (``cuda.copy_launch``), so only the launch sits
between the two events.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from ..model import ProbeMeasurement
from ..model.kinds import Direction, MeasurementKind, ProbeMemory
from . import cuda
from .cupy_types import CudaStream, CuPy


class EventTimer:
    """Times GPU work on one stream with a pair of CUDA events: warm-up, then one sample per repeat."""

    def __init__(self, cp: CuPy, stream: CudaStream):
        self.cp = cp
        self.stream = stream
        self.start = cp.cuda.Event()
        self.end = cp.cuda.Event()

    def samples(self, launch: Callable[[], None], repeats: int) -> list[float]:
        """Seconds of each of ``repeats`` runs of ``launch``, after one run to warm up."""
        launch()
        self.stream.synchronize()
        out = []
        for _ in range(repeats):
            self.start.record(self.stream)
            launch()
            self.end.record(self.stream)
            self.end.synchronize()
            out.append(self.cp.cuda.get_elapsed_time(self.start, self.end) / 1e3)
        return out


def wall_samples(fn: Callable[[], None], repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn`` on the host clock, after one call to warm up."""
    fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def copy_samples(timer: EventTimer, host_ptr: int, device_ptr: int, size_bytes: int,
                 direction: str, repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` copies of ``size_bytes`` in ``direction`` ("h2d", "d2h")."""
    launch = cuda.copy_launch(timer.cp, host_ptr, device_ptr, size_bytes, direction, timer.stream)
    return timer.samples(launch, repeats)


def rate_row(kind: MeasurementKind, memory: ProbeMemory, size_bytes: int, samples: Sequence[float],
             direction: Direction | None = None, note: str | None = None) -> ProbeMeasurement:
    """One measurement of ``size_bytes`` moved in each sample: the median seconds and its rate."""
    median_s = statistics.median(samples)
    return ProbeMeasurement(kind=kind, memory=memory, size_bytes=size_bytes, direction=direction,
                            bytes_per_s=(size_bytes / median_s) if median_s > 0 else None,
                            seconds=median_s, repeats=len(samples), note=note)


def cost_rows(kind: MeasurementKind, memory: ProbeMemory, size_bytes: int,
              samples: Sequence[float]) -> list[ProbeMeasurement]:
    """The first call and the median of the rest: notes "first" and "steady"."""
    rows = [ProbeMeasurement(kind=kind, memory=memory, size_bytes=size_bytes, seconds=samples[0],
                             repeats=1, note="first")]
    if len(samples) > 1:
        rows.append(ProbeMeasurement(kind=kind, memory=memory, size_bytes=size_bytes,
                                     seconds=statistics.median(samples[1:]),
                                     repeats=len(samples) - 1, note="steady"))
    return rows


def median_row(kind: MeasurementKind, memory: ProbeMemory, size_bytes: int, samples: Sequence[float],
               note: str | None = None) -> ProbeMeasurement:
    """The median seconds of ``samples`` as one measurement (no rate: nothing is moved)."""
    return ProbeMeasurement(kind=kind, memory=memory, size_bytes=size_bytes,
                            seconds=statistics.median(samples), repeats=len(samples), note=note)
