"""The background PCIe sampler of every GPU: link bytes by GPM, byte counters or sampled throughput,
and the error counters.

Where the GPU offers GPM (Hopper and newer), link bytes come from chained GPM samples taken when
the collector takes a reading (``gpm.GpmReader``): exact over each interval at a few tens of
microseconds of CPU per snapshot, with no fast thread. Elsewhere (or with ``prefer_gpm=False``),
NVML's 32-bit cumulative link byte counters (``counters``) are read for all GPUs by one daemon
thread at ``hz``: the collector picks it from the fastest link (``counters.counter_hz_for_link``,
29 Hz at Gen5 x16), so no wrap is missed. ``take(gpu)`` hands out the bytes and the exact interval
between the two counter reads that bound them. The same thread reads each GPU's PCIe error
counters once every ``error_period_s`` (``ERROR_PERIOD_S``, 10 s), spread across GPUs.

Where the byte counters are unsupported, the GPU falls back to sampled throughput (``sampled``),
which blocks ~21 ms per call on daemon workers, never on the caller's thread.

A GPU whose GPM keeps failing for ``GPM_GIVE_UP_S`` is moved to the byte counters.

The sampler never raises out of its threads: an NVML error is recorded for the collector to report,
a lost GPU is marked lost and skipped, the other GPUs keep being served.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ...model.kinds import PcieMethod
from .call import FailureLog, NvmlCall, NvmlFailure, NvmlFunction, call_nvml
from .counters import BYTE_FIELDS, ERROR_FIELDS, EventCounter, LinkBytes, byte_values, fold_errors
from .gpm import GpmReader
from .sampled import Rates, ThroughputSampler

# Error counters are deltas since start that change rarely, and a read of the twelve costs ~3 ms of
# CPU per GPU (bench/results/cpu_breakdown_h200.json: this thread's share at 1 Hz with GPM), the
# largest of pinmon's background costs: a link's errors are an alarm that a few seconds do not change.
ERROR_PERIOD_S = 10.0
# GPM failing this long in a row (every take None) moves the GPU to the byte counters.
GPM_GIVE_UP_S = 5.0


@dataclass
class _Gpu:
    index: int
    handle: object
    method: PcieMethod | None = None  # None: no reading
    lost: NvmlFailure | None = None  # the failure that said GPU_IS_LOST
    link_bytes: LinkBytes | None = None  # the byte counters, once read
    errors: dict[str, EventCounter | None] = field(default_factory=dict)
    errors_due: float = 0.0  # clock() when the error counters are next read
    gpm: GpmReader | None = None
    sampled: Rates = None  # the latest throughput sample, (rx, tx) bytes/s
    failures: FailureLog = field(default_factory=FailureLog)  # since the collector last drained them


class PcieSampler:
    """PCIe traffic and error counters of several GPUs, read in one background thread.

    ``gpus`` is a sequence of ``(gpu_index, nvml_handle)``; ``hz`` the byte counter read rate.
    ``call(nvml, name, *args)`` returns ``(value, failure)`` (``call.call_nvml``); every NVML call
    goes through it. ``clock`` gives seconds and stamps each counter read and GPM sample.
    ``prefer_gpm=False`` never uses GPM (the byte counters are then read on every GPU that has
    them). Tests call ``start(background=False)`` and then drive ``poll_once()``, ``poll_errors()``
    and ``refresh_sampled()`` themselves.
    """

    def __init__(self, nvml: object, gpus: Sequence[tuple[int, object]], hz: float, *,
                 call: NvmlCall = call_nvml,
                 clock: Callable[[], float] = time.monotonic, error_period_s: float = ERROR_PERIOD_S,
                 sample_workers: int = 8, prefer_gpm: bool = True):
        if not hz > 0:
            raise ValueError(f"counter rate must be positive, got {hz!r} Hz")
        self.nvml = nvml
        self.hz = float(hz)
        self.period_s = 1.0 / self.hz
        self.error_period_s = error_period_s
        self.prefer_gpm = prefer_gpm
        self._call = call
        self._clock = clock
        self._gpus: dict[int, _Gpu] = {i: _Gpu(i, h) for i, h in gpus}
        self._lock = threading.Lock()
        self._throughput = ThroughputSampler(
            nvml, lambda gpu, name, *a: self._nvml(self._gpus[gpu], name, self._gpus[gpu].handle, *a),
            lambda gpu: self._gpus[gpu].lost is not None, self._landed, sample_workers)
        self._stop = threading.Event()
        self._wake = threading.Event()  # set to make the thread re-plan its next tick now
        self._thread: threading.Thread | None = None
        self._cpu_s = 0.0
        self._notices: list[str] = []
        self._start_failures: dict[int, list[tuple[NvmlFailure, int]]] = {}
        self._started = False
        byte_ids = [getattr(nvml, name, None) for name in BYTE_FIELDS]  # None: not in this pynvml
        self._byte_fields: list[object] | None = None if None in byte_ids else byte_ids
        self._error_fields = [(fid, short) for (name, short) in ERROR_FIELDS
                              if (fid := getattr(nvml, name, None)) is not None]

    # --- life cycle --------------------------------------------------------------------------

    def start(self, background: bool = True) -> None:
        """Detect which GPUs have byte counters, take the first readings, start the threads."""
        if self._started:
            return
        self._started = True
        t0 = time.thread_time()
        for g in self._gpus.values():
            self._detect(g)
        now = self._clock()
        # Spread the ~4 ms error reads over the error period so no tick carries all of them.
        for n, g in enumerate(self._gpus.values()):
            self._poll_errors_of(g)
            g.errors_due = now + self.error_period_s * (1 + n / max(1, len(self._gpus)))
        with self._lock:
            self._cpu_s += time.thread_time() - t0
            # What failed while detecting decides a GPU's method for good (a failed counter read
            # means the sampled fallback), so the collector keeps it visible: noted before the
            # threads start, so no later, passing failure is mistaken for one of these.
            self._start_failures = {g.index: g.failures.items() for g in self._gpus.values() if g.failures}
        if not background:
            return
        self._throughput.start(sum(g.method == "sampled" for g in self._gpus.values()))
        self._thread = threading.Thread(target=self._run, name="pinmon-pcie-counters", daemon=True)
        self._thread.start()
        self.request_sampled()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the threads (idempotent). A worker inside a 21 ms NVML call is waited for."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)
        self._throughput.stop(timeout_s)
        for g in self._gpus.values():
            reader, g.gpm = g.gpm, None
            if reader is not None:
                reader.close()

    def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception as e:  # never let the thread die; report and keep sampling
                with self._lock:
                    note = f"PCIe counter sampler: internal error {type(e).__name__}: {e}"
                    if note not in self._notices:
                        self._notices.append(note)
            next_tick += self._tick_s()
            delay = next_tick - time.monotonic()
            if delay < 0:  # fell behind (a slow NVML call): restart the schedule, do not burst
                next_tick = time.monotonic()
                delay = 0.0
            if self._wake.wait(delay):  # a GPU moved to the counters: read them from now on
                self._wake.clear()
                next_tick = time.monotonic()

    def _tick_s(self) -> float:
        """The thread's period: the counter rate while any GPU reads byte counters; otherwise it
        only has error counters to read, one GPU's per tick, spread over ``error_period_s``. A GPU
        that moves to the counters wakes the thread at once (``_wake``); on a virtual machine each
        wake-up of an idle thread costs about 0.1 ms of CPU, so it sleeps for as long as it can."""
        with self._lock:
            gpus = list(self._gpus.values())
        if any(g.method == "counters" and g.lost is None for g in gpus):
            return self.period_s
        return max(self.period_s, self.error_period_s / max(1, len(gpus)))

    # --- NVML calls --------------------------------------------------------------------------

    def _nvml(self, g: _Gpu, name: NvmlFunction, *args: object) -> tuple[object, NvmlFailure | None]:
        """One NVML call for GPU ``g``: ``(value, failure)``. Failures other than NotSupported are
        recorded for the collector to report; GPU_IS_LOST marks the GPU lost."""
        value, failure = self._call(self.nvml, name, *args)
        if failure is None:
            return value, None
        with self._lock:
            if getattr(failure, "gpu_lost", False):
                if g.lost is None:
                    g.lost = failure
            elif not getattr(failure, "not_supported", False):
                g.failures.record(failure)
        return None, failure

    def _detect(self, g: _Gpu) -> None:
        if self.prefer_gpm and hasattr(self.nvml, "nvmlGpmQueryDeviceSupport"):
            reader = GpmReader(self.nvml, g.handle, lambda name, *a: self._nvml(g, name, *a),
                               self._clock)
            if reader.start():
                g.gpm, g.method = reader, "gpm"
                return
            if g.lost is not None:
                return
        self._detect_counters(g)

    def _detect_counters(self, g: _Gpu) -> None:
        values = None
        if self._byte_fields is not None:
            values, _ = self._nvml(g, "nvmlDeviceGetFieldValues", g.handle, list(self._byte_fields))
        if g.lost is not None:
            return
        raws = byte_values(values)
        if raws is not None:
            g.link_bytes = LinkBytes(raws, self._clock())
            g.method = "counters"
        else:
            g.method = "sampled"

    # --- the counter thread's work -----------------------------------------------------------

    def poll_once(self) -> None:
        """One tick: byte counters of every counter GPU, then the error counters of one due GPU."""
        t0 = time.thread_time()
        for g in self._gpus.values():
            if g.method == "counters" and g.lost is None:
                self._poll_bytes(g)
        now = self._clock()
        due = [g for g in self._gpus.values() if g.lost is None and g.errors_due <= now]
        if due:
            g = min(due, key=lambda x: x.errors_due)
            self._poll_errors_of(g)
            g.errors_due = max(g.errors_due + self.error_period_s, now)
        with self._lock:
            self._cpu_s += time.thread_time() - t0

    def _poll_bytes(self, g: _Gpu) -> None:
        # Only a "counters" GPU is polled: the byte fields exist and its first reading is in link_bytes.
        byte_fields, link_bytes = self._byte_fields, g.link_bytes
        if byte_fields is None or link_bytes is None:
            return
        values, _ = self._nvml(g, "nvmlDeviceGetFieldValues", g.handle, list(byte_fields))
        raws = byte_values(values)
        if raws is None:
            return  # a failed read: the next good one catches up, unless a wrap was missed
        now = self._clock()
        with self._lock:
            link_bytes.update(raws, now)

    def poll_errors(self) -> None:
        """Read the error counters of every GPU now (the thread spreads them over ``error_period_s``)."""
        t0 = time.thread_time()
        for g in self._gpus.values():
            if g.lost is None:
                self._poll_errors_of(g)
        with self._lock:
            self._cpu_s += time.thread_time() - t0

    def _poll_errors_of(self, g: _Gpu) -> None:
        if not self._error_fields:
            return
        ids = [fid for fid, _ in self._error_fields]
        values, failure = self._nvml(g, "nvmlDeviceGetFieldValues", g.handle, ids)
        if values is None:
            if getattr(failure, "not_supported", False):
                with self._lock:
                    for _, short in self._error_fields:
                        g.errors.setdefault(short, None)
            return
        with self._lock:
            fold_errors(g.errors, [short for _, short in self._error_fields], values)

    # --- the sampled fallback ----------------------------------------------------------------

    def _sampled_gpus(self) -> list[int]:
        with self._lock:
            return [g.index for g in self._gpus.values() if g.method == "sampled" and g.lost is None]

    def request_sampled(self) -> None:
        """Queue one throughput sample of each sampled GPU not already being sampled; returns at once."""
        if not self._throughput.running or self._stop.is_set():
            return
        self._throughput.request(self._sampled_gpus())

    def refresh_sampled(self) -> None:
        """Sample every sampled GPU on the calling thread, one after another (for tests)."""
        for gpu in self._sampled_gpus():
            self._throughput.sample_now(gpu)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no throughput sample is in flight; False on timeout."""
        return self._throughput.wait_idle(timeout_s)

    def _landed(self, gpu: int, rates: Rates, unsupported: bool) -> None:
        g = self._gpus[gpu]
        with self._lock:
            if unsupported:
                g.method = None  # no PCIe traffic reading at all on this GPU
            g.sampled = rates

    # --- what the collector reads ------------------------------------------------------------

    def method(self, gpu: int) -> PcieMethod | None:
        """"gpm", "counters", "sampled", or None (no traffic reading for this GPU)."""
        g = self._gpus.get(gpu)
        return None if g is None or g.lost is not None else g.method

    def take(self, gpu: int) -> tuple[int | None, int | None, float] | None:
        """``(rx_bytes, tx_bytes, interval_s)`` since the previous take; None without a new reading.

        ``interval_s`` runs between the two reads (counter reads or GPM samples) that bound the
        bytes, not between the two calls to take, so the rate is exact however late the caller is.
        GPM may leave one direction None.
        """
        g = self._gpus.get(gpu)
        if g is None:
            return None
        if g.method == "gpm":
            return self._take_gpm(g)
        with self._lock:
            if g.method != "counters" or g.lost is not None or g.link_bytes is None:
                return None
            return g.link_bytes.take()

    def _take_gpm(self, g: _Gpu) -> tuple[int | None, int | None, float] | None:
        """A GPM reading on the caller's thread (~40 us); after ``GPM_GIVE_UP_S`` of failures in a
        row the GPU moves to the byte counters (or the sampled fallback)."""
        reader = g.gpm
        if reader is None or g.lost is not None:
            return None
        t0 = time.thread_time()
        try:
            taken = reader.take()
            if taken is None and reader.failing_s() >= GPM_GIVE_UP_S and g.lost is None:
                reader.close()
                g.gpm = None
                self._detect_counters(g)
                with self._lock:
                    note = (f"GPU {g.index}: GPM gave no PCIe reading for {GPM_GIVE_UP_S:.0f} s;"
                            f" now using the {'byte counters' if g.method == 'counters' else 'sampled throughput'}")
                    if note not in self._notices:
                        self._notices.append(note)
                if g.method == "sampled" and self._thread is not None:
                    self._throughput.start(1)
                self._wake.set()
            return taken
        finally:
            with self._lock:
                self._cpu_s += time.thread_time() - t0

    def wrap_gap_s(self, gpu: int) -> float | None:
        """Longest gap between two 32-bit counter reads within the interval of the latest take.

        A gap longer than the counter's wrap time at line rate (2**32 bytes / link bytes per s)
        may have hidden a whole wrap. None for 64-bit counters or before the first take.
        """
        g = self._gpus.get(gpu)
        if g is None:
            return None
        with self._lock:
            return None if g.link_bytes is None else g.link_bytes.taken_gap_s

    def sampled(self, gpu: int) -> tuple[float | None, float | None] | None:
        """Latest ``(rx_bytes_per_s, tx_bytes_per_s)`` from the throughput sample; None if none yet."""
        g = self._gpus.get(gpu)
        if g is None:
            return None
        with self._lock:
            return g.sampled

    def error_deltas(self, gpu: int) -> dict[str, int | None]:
        """Increase of each PCIe error counter since start, by short name; None = unsupported."""
        g = self._gpus.get(gpu)
        if g is None:
            return {}
        with self._lock:
            return {short: (None if c is None else c.delta) for short, c in g.errors.items()}

    def lost(self, gpu: int) -> NvmlFailure | None:
        """The failure that reported the GPU lost, or None."""
        g = self._gpus.get(gpu)
        return None if g is None else g.lost

    def mark_lost(self, gpu: int, failure: NvmlFailure) -> None:
        """Stop polling a GPU another caller found lost."""
        g = self._gpus.get(gpu)
        if g is not None:
            with self._lock:
                if g.lost is None:
                    g.lost = failure

    def drain_failures(self, gpu: int) -> list[tuple[NvmlFailure, int]]:
        """NVML failures (other than NotSupported and lost) since the last drain: (failure, count)."""
        g = self._gpus.get(gpu)
        if g is None:
            return []
        with self._lock:
            return g.failures.drain()

    def take_start_failures(self, gpu: int) -> list[tuple[NvmlFailure, int]]:
        """NVML failures of ``start()`` for this GPU (other than NotSupported and lost), once;
        they are taken out of what ``drain_failures`` hands out, so none is reported twice."""
        with self._lock:
            early = self._start_failures.pop(gpu, [])
            g = self._gpus.get(gpu)
            if g is not None:
                g.failures.discount(early)
            return early

    def drain_notices(self) -> list[str]:
        """Sampler-wide notices (internal errors) since the last drain."""
        with self._lock:
            out, self._notices = self._notices, []
            return out

    def cpu_seconds(self) -> float:
        """CPU time the sampler's own work has used, in seconds (time.thread_time per job)."""
        with self._lock:
            return self._cpu_s + self._throughput.cpu_seconds()
