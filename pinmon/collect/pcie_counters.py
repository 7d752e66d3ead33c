"""PCIe sampling for every GPU: GPM samples, link byte counters, error counters, the sampled fallback.

Where the GPU offers GPM (Hopper and newer), link bytes come from chained GPM samples taken when
the collector takes a reading (``pcie_gpm.GpmReader``): exact over each interval at a few tens of
microseconds of CPU per snapshot, with no fast thread. Elsewhere (or with ``prefer_gpm=False``),
NVML's cumulative link byte counters (``NVML_FI_DEV_PCIE_COUNT_RX_BYTES`` / ``_TX_BYTES``) are only
32 bits wide: at 55 GB/s they wrap about every 78 ms, so a 1 s poll cannot difference them. One
daemon thread reads them for all GPUs at ``hz`` (50 Hz by default) and unwraps them into monotonic
totals; ``take(gpu)`` hands out the bytes and the exact interval between the two counter reads
that bound them. The same thread reads the PCIe error counters about once a second per GPU.

Where the byte counters are unsupported, the GPU falls back to ``nvmlDeviceGetPcieThroughput``
("sampled"), which blocks ~21 ms per call. Those calls run on a small pool of daemon workers, one
job per GPU, so eight GPUs cost the wall time of one and the caller never waits.

A GPU whose GPM keeps failing for ``GPM_GIVE_UP_S`` is moved to the byte counters.

The sampler never raises out of its threads: an NVML error is recorded for the collector to report,
a lost GPU is marked lost and skipped, the other GPUs keep being served.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from .pcie_gpm import GpmReader

MASK_32 = (1 << 32) - 1

# (pynvml constant, short name). Names missing from an older pynvml are skipped. "replay" and
# "l0_to_recovery" are reported on their own; the rest are summed into Pcie.error_delta.
ERROR_FIELDS: tuple[tuple[str, str], ...] = (
    ("NVML_FI_DEV_PCIE_REPLAY_COUNTER", "replay"),
    ("NVML_FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER", "l0_to_recovery"),
    ("NVML_FI_DEV_PCIE_COUNT_NAKS_SENT", "naks_sent"),
    ("NVML_FI_DEV_PCIE_COUNT_NAKS_RECEIVED", "naks_received"),
    ("NVML_FI_DEV_PCIE_COUNT_BAD_TLP", "bad_tlp"),
    ("NVML_FI_DEV_PCIE_COUNT_BAD_DLLP", "bad_dllp"),
    ("NVML_FI_DEV_PCIE_COUNT_RECEIVER_ERROR", "receiver_error"),
    ("NVML_FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS", "correctable_errors"),
    ("NVML_FI_DEV_PCIE_COUNT_NON_FATAL_ERROR", "non_fatal_error"),
    ("NVML_FI_DEV_PCIE_COUNT_FATAL_ERROR", "fatal_error"),
    ("NVML_FI_DEV_PCIE_COUNT_UNSUPPORTED_REQ", "unsupported_req"),
    ("NVML_FI_DEV_PCIE_COUNT_LCRC_ERROR", "lcrc_error"),
    ("NVML_FI_DEV_PCIE_COUNT_LANE_ERROR", "lane_error"),
)

# nvmlDeviceGetPcieThroughput's "KB" is 1000 bytes: during a 55 GB/s copy it read 59.4e6 KB/s,
# which matches the counters' link bytes (1.08x payload) only with 1000.
_THROUGHPUT_UNIT_BYTES = 1000


def field_int(fv: Any) -> Optional[int]:
    """The integer in an ``nvmlFieldValue_t`` according to its ``valueType``; None if unreadable."""
    vt = getattr(fv, "valueType", 3)
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
              6: "usVal"}.get(int(vt), "ullVal")
    try:
        raw = getattr(fv.value, member)
        return int(raw)
    except (AttributeError, TypeError, ValueError, OverflowError):
        return None


class CounterUnwrapper:
    """Turns a cumulative counter that may be 32 bits wide into a monotonic total.

    Deltas are taken modulo 2**32, so one wrap between two reads is exact; more than one is lost,
    which is why the reads must come faster than the wrap period. A raw value above 2**32-1 proves
    the counter is really 64 bits wide; from then on it is differenced without the modulo.
    """

    def __init__(self, first_raw: int):
        self.last_raw = first_raw
        self.total = 0
        self.wide = first_raw > MASK_32

    def update(self, raw: int) -> int:
        """Fold in a new raw reading; returns the bytes added."""
        if raw > MASK_32:
            self.wide = True
        if self.wide:
            # A 64-bit counter does not wrap in practice; going backwards means it was reset.
            delta = raw - self.last_raw if raw >= self.last_raw else 0
        else:
            delta = (raw - self.last_raw) & MASK_32
        self.last_raw = raw
        self.total += delta
        return delta


class _EventCounter:
    """An error counter's increase since the first reading; a decrease is taken as a reset."""

    def __init__(self, first_raw: int):
        self.last_raw = first_raw
        self.delta = 0

    def update(self, raw: int) -> None:
        self.delta += raw - self.last_raw if raw >= self.last_raw else raw
        self.last_raw = raw


@dataclass
class _Gpu:
    index: int
    handle: Any
    method: Optional[str] = None  # "gpm", "counters", "sampled" or None
    lost: Any = None  # the failure that said GPU_IS_LOST
    # byte counters
    rx: Optional[CounterUnwrapper] = None
    tx: Optional[CounterUnwrapper] = None
    read_time: Optional[float] = None  # clock() of the last successful counter read
    taken: Optional[tuple[int, int, float]] = None  # (rx total, tx total, read_time) at the last take
    gap_s: float = 0.0  # longest gap between successful reads since the last take
    taken_gap_s: Optional[float] = None
    # error counters
    errors: dict[str, Optional[_EventCounter]] = field(default_factory=dict)
    errors_due: float = 0.0
    # GPM
    gpm: Optional[GpmReader] = None
    gpm_failing_since: Optional[float] = None  # clock() of the first failed take in a row
    # sampled fallback
    sampled: Optional[tuple[Optional[float], Optional[float]]] = None
    in_flight: bool = False
    # failures since the collector last drained them: function name -> [failure, count]
    failures: dict[str, list] = field(default_factory=dict)


class _DaemonPool:
    """A fixed set of daemon threads running jobs from a queue.

    Daemon threads so that an NVML call that never returns cannot hold up interpreter exit
    (concurrent.futures joins its workers at exit).
    """

    def __init__(self, size: int, name: str):
        self._jobs: "queue.SimpleQueue[Optional[Callable[[], None]]]" = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(size)]
        for t in self._threads:
            t.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # pragma: no cover - jobs catch their own errors
                pass

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def stop(self, timeout_s: float) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))


# Reads per wrap of a 32-bit byte counter at the link's top rate: two leave a whole wrap period of
# slack for a late tick (GIL, a slow NVML call) before bytes could be lost.
READS_PER_WRAP = 2.0
MIN_COUNTER_HZ, MAX_COUNTER_HZ = 5.0, 50.0
UNKNOWN_LINK_COUNTER_HZ = 50.0
# GPM failing this long in a row (every take None) moves the GPU to the byte counters.
GPM_GIVE_UP_S = 5.0


def counter_hz_for_link(max_bytes_per_s: Optional[float]) -> float:
    """How often to read the byte counters of a link whose top payload rate is ``max_bytes_per_s``.

    The counters are 32 bits of link bytes: at Gen5 x16 (63.0 GB/s) they wrap every 68 ms, so
    they are read at 29 Hz; a Gen4 x16 link needs 15 Hz, Gen3 x16 8 Hz. Reading no faster than
    needed is most of pinmon's own CPU cost (each read is ~0.3-0.7 ms of CPU inside NVML).
    """
    if not max_bytes_per_s or max_bytes_per_s <= 0:
        return UNKNOWN_LINK_COUNTER_HZ
    wrap_s = (1 << 32) / max_bytes_per_s
    return min(MAX_COUNTER_HZ, max(MIN_COUNTER_HZ, READS_PER_WRAP / wrap_s))


class PcieSampler:
    """PCIe byte and error counters of several GPUs, read in one background thread.

    ``gpus`` is a sequence of ``(gpu_index, nvml_handle)``. ``call(nvml, name, *args)`` returns
    ``(value, failure)`` (see ``nvml.call_nvml``); every NVML call goes through it. ``clock`` gives
    seconds and stamps each counter read and GPM sample. ``prefer_gpm=False`` never uses GPM (the
    byte counters are then read on every GPU that has them). Tests call ``start(background=False)`` and then drive
    ``poll_once()``, ``poll_errors()`` and ``refresh_sampled()`` themselves.
    """

    def __init__(self, nvml: Any, gpus: Sequence[tuple[int, Any]], hz: float = 50.0, *,
                 call: Optional[Callable[..., tuple[Any, Any]]] = None,
                 clock: Callable[[], float] = time.monotonic, error_period_s: float = 1.0,
                 sample_workers: int = 8, prefer_gpm: bool = True):
        if not hz > 0:
            raise ValueError(f"counter rate must be positive, got {hz!r} Hz")
        if call is None:
            from .nvml import call_nvml  # deferred: nvml.py imports this module

            call = call_nvml
        self.nvml = nvml
        self.hz = float(hz)
        self.period_s = 1.0 / self.hz
        self.error_period_s = error_period_s
        self.prefer_gpm = prefer_gpm
        self._call = call
        self._clock = clock
        self._sample_workers = max(1, sample_workers)
        self._gpus: dict[int, _Gpu] = {i: _Gpu(i, h) for i, h in gpus}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._wake = threading.Event()  # set to make the thread re-plan its next tick now
        self._thread: Optional[threading.Thread] = None
        self._pool: Optional[_DaemonPool] = None
        self._cpu_s = 0.0
        self._notices: list[str] = []
        self._start_failures: dict[int, list[tuple[Any, int]]] = {}
        self._started = False
        self._byte_fields = self._field_ids(("NVML_FI_DEV_PCIE_COUNT_RX_BYTES",
                                             "NVML_FI_DEV_PCIE_COUNT_TX_BYTES"))
        self._error_fields = [(fid, short) for (name, short) in ERROR_FIELDS
                              if (fid := getattr(nvml, name, None)) is not None]

    def _field_ids(self, names: Sequence[str]) -> Optional[list[int]]:
        ids = [getattr(self.nvml, n, None) for n in names]
        return None if any(i is None for i in ids) else ids

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
        # Spread the ~4 ms error reads over the second so no tick carries all of them.
        for n, g in enumerate(self._gpus.values()):
            self._poll_errors_of(g)
            g.errors_due = now + self.error_period_s * (1 + n / max(1, len(self._gpus)))
        with self._lock:
            self._cpu_s += time.thread_time() - t0
            # What failed while detecting decides a GPU's method for good (a failed counter read
            # means the sampled fallback), so the collector keeps it visible: noted before the
            # threads start, so no later, passing failure is mistaken for one of these.
            self._start_failures = {g.index: [(f, n) for f, n in g.failures.values()]
                                    for g in self._gpus.values() if g.failures}
        if not background:
            return
        if any(g.method == "sampled" for g in self._gpus.values()):
            n_sampled = sum(g.method == "sampled" for g in self._gpus.values())
            self._pool = _DaemonPool(min(self._sample_workers, n_sampled), "pinmon-pcie-sampled")
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
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop(timeout_s)
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
        only has error counters to read, spread over ``error_period_s``."""
        with self._lock:
            gpus = list(self._gpus.values())
        if any(g.method == "counters" and g.lost is None for g in gpus):
            return self.period_s
        return max(self.period_s, min(1.0, self.error_period_s / max(1, len(gpus))))

    # --- NVML calls --------------------------------------------------------------------------

    def _nvml(self, g: _Gpu, name: str, *args: Any) -> tuple[Any, Any]:
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
                entry = g.failures.setdefault(name, [failure, 0])
                entry[0] = failure
                entry[1] += 1
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
        raws = self._byte_values(values)
        if raws is not None:
            now = self._clock()
            g.rx, g.tx = CounterUnwrapper(raws[0]), CounterUnwrapper(raws[1])
            g.read_time = now
            g.taken = (0, 0, now)
            g.method = "counters"
        else:
            g.method = "sampled"

    @staticmethod
    def _byte_values(values: Any) -> Optional[tuple[int, int]]:
        if values is None:
            return None
        try:
            rx_fv, tx_fv = values[0], values[1]
        except (TypeError, IndexError):
            return None
        if getattr(rx_fv, "nvmlReturn", 0) != 0 or getattr(tx_fv, "nvmlReturn", 0) != 0:
            return None
        rx, tx = field_int(rx_fv), field_int(tx_fv)
        if rx is None or tx is None or rx < 0 or tx < 0:
            return None
        return rx, tx

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
        values, _ = self._nvml(g, "nvmlDeviceGetFieldValues", g.handle, list(self._byte_fields))
        raws = self._byte_values(values)
        if raws is None:
            return  # a failed read: the next good one catches up, unless a wrap was missed
        now = self._clock()
        with self._lock:
            g.rx.update(raws[0])
            g.tx.update(raws[1])
            if g.read_time is not None:
                g.gap_s = max(g.gap_s, now - g.read_time)
            g.read_time = now

    def poll_errors(self) -> None:
        """Read the error counters of every GPU now (the thread spreads these over a second)."""
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
            for (fid, short), fv in zip(self._error_fields, values):
                counter = g.errors.get(short)
                raw = field_int(fv) if getattr(fv, "nvmlReturn", 0) == 0 else None
                if raw is None:
                    # Unsupported stays None; a counter that worked keeps its last delta.
                    g.errors.setdefault(short, None)
                elif counter is None:
                    g.errors[short] = _EventCounter(raw)
                else:
                    counter.update(raw)

    # --- the sampled fallback ----------------------------------------------------------------

    def request_sampled(self) -> None:
        """Queue one throughput sample of each sampled GPU not already being sampled; returns at once."""
        if self._pool is None or self._stop.is_set():
            return
        jobs = []
        with self._lock:
            for g in self._gpus.values():
                if g.method == "sampled" and g.lost is None and not g.in_flight:
                    g.in_flight = True
                    jobs.append(g)
        for g in jobs:
            self._pool.submit(lambda g=g: self._sample(g))

    def refresh_sampled(self) -> None:
        """Sample every sampled GPU on the calling thread, one after another (for tests)."""
        for g in self._gpus.values():
            if g.method == "sampled" and g.lost is None:
                with self._lock:
                    g.in_flight = True
                self._sample(g)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no throughput sample is in flight; False on timeout."""
        with self._idle:
            return self._idle.wait_for(
                lambda: not any(g.in_flight for g in self._gpus.values()), timeout_s)

    def _sample(self, g: _Gpu) -> None:
        t0 = time.thread_time()
        try:
            nvml = self.nvml
            rx_kb, rx_failure = self._nvml(g, "nvmlDeviceGetPcieThroughput", g.handle,
                                           getattr(nvml, "NVML_PCIE_UTIL_RX_BYTES", 1))
            tx_kb, tx_failure = None, None
            if g.lost is None:
                tx_kb, tx_failure = self._nvml(g, "nvmlDeviceGetPcieThroughput", g.handle,
                                               getattr(nvml, "NVML_PCIE_UTIL_TX_BYTES", 0))
            with self._lock:
                if rx_kb is None and tx_kb is None:
                    if all(getattr(f, "not_supported", False) for f in (rx_failure, tx_failure)):
                        g.method = None  # no PCIe traffic reading at all on this GPU
                    g.sampled = None
                else:
                    g.sampled = (None if rx_kb is None else float(rx_kb) * _THROUGHPUT_UNIT_BYTES,
                                 None if tx_kb is None else float(tx_kb) * _THROUGHPUT_UNIT_BYTES)
        finally:
            with self._idle:
                g.in_flight = False
                self._cpu_s += time.thread_time() - t0
                self._idle.notify_all()

    # --- what the collector reads ------------------------------------------------------------

    def method(self, gpu: int) -> Optional[str]:
        """"counters", "sampled", or None (no traffic reading for this GPU)."""
        g = self._gpus.get(gpu)
        return None if g is None or g.lost is not None else g.method

    def take(self, gpu: int) -> Optional[tuple[int, int, float]]:
        """``(rx_bytes, tx_bytes, interval_s)`` since the previous take; None without a new read.

        ``interval_s`` runs between the two counter reads that bound the bytes, not between the
        two calls to take, so the rate is exact however late the caller is.
        """
        g = self._gpus.get(gpu)
        if g is None:
            return None
        if g.method == "gpm":
            return self._take_gpm(g)
        with self._lock:
            if g.method != "counters" or g.lost is not None or g.taken is None:
                return None
            rx0, tx0, t0 = g.taken
            if g.read_time is None or g.read_time <= t0:
                return None
            rx1, tx1, t1 = g.rx.total, g.tx.total, g.read_time
            g.taken = (rx1, tx1, t1)
            # Both counters come from the same hardware: one proven 64-bit proves the other.
            g.taken_gap_s = None if (g.rx.wide or g.tx.wide) else g.gap_s
            g.gap_s = 0.0
            return rx1 - rx0, tx1 - tx0, t1 - t0

    def _take_gpm(self, g: _Gpu) -> Optional[tuple[Optional[int], Optional[int], float]]:
        """A GPM reading on the caller's thread (~40 us); after ``GPM_GIVE_UP_S`` of failures in a
        row the GPU moves to the byte counters (or the sampled fallback)."""
        reader = g.gpm
        if reader is None or g.lost is not None:
            return None
        t0 = time.thread_time()
        try:
            taken = reader.take()
            now = self._clock()
            if taken is not None:
                g.gpm_failing_since = None
                return taken
            if not reader.due(now):
                return None  # too soon after the last sample: not a failure
            if g.gpm_failing_since is None:
                g.gpm_failing_since = now
            elif now - g.gpm_failing_since >= GPM_GIVE_UP_S and g.lost is None:
                reader.close()
                g.gpm = None
                self._detect_counters(g)
                with self._lock:
                    note = (f"GPU {g.index}: GPM gave no PCIe reading for {GPM_GIVE_UP_S:.0f} s;"
                            f" now using the {'byte counters' if g.method == 'counters' else 'sampled throughput'}")
                    if note not in self._notices:
                        self._notices.append(note)
                if g.method == "sampled" and self._pool is None and self._thread is not None:
                    self._pool = _DaemonPool(1, "pinmon-pcie-sampled")
                self._wake.set()
            return None
        finally:
            with self._lock:
                self._cpu_s += time.thread_time() - t0

    def wrap_gap_s(self, gpu: int) -> Optional[float]:
        """Longest gap between two 32-bit counter reads within the interval of the latest take.

        A gap longer than the counter's wrap time at line rate (2**32 bytes / link bytes per s)
        may have hidden a whole wrap. None for 64-bit counters or before the first take.
        """
        g = self._gpus.get(gpu)
        if g is None:
            return None
        with self._lock:
            return g.taken_gap_s

    def sampled(self, gpu: int) -> Optional[tuple[Optional[float], Optional[float]]]:
        """Latest ``(rx_bytes_per_s, tx_bytes_per_s)`` from the throughput sample; None if none yet."""
        g = self._gpus.get(gpu)
        if g is None:
            return None
        with self._lock:
            return g.sampled

    def error_deltas(self, gpu: int) -> dict[str, Optional[int]]:
        """Increase of each PCIe error counter since start, by short name; None = unsupported."""
        g = self._gpus.get(gpu)
        if g is None:
            return {}
        with self._lock:
            return {short: (None if c is None else c.delta) for short, c in g.errors.items()}

    def lost(self, gpu: int) -> Any:
        """The failure that reported the GPU lost, or None."""
        g = self._gpus.get(gpu)
        return None if g is None else g.lost

    def mark_lost(self, gpu: int, failure: Any) -> None:
        """Stop polling a GPU another caller found lost."""
        g = self._gpus.get(gpu)
        if g is not None:
            with self._lock:
                if g.lost is None:
                    g.lost = failure

    def drain_failures(self, gpu: int) -> list[tuple[Any, int]]:
        """NVML failures (other than NotSupported and lost) since the last drain: (failure, count)."""
        g = self._gpus.get(gpu)
        if g is None:
            return []
        with self._lock:
            out = [(f, n) for f, n in g.failures.values()]
            g.failures.clear()
            return out

    def take_start_failures(self, gpu: int) -> list[tuple[Any, int]]:
        """NVML failures of ``start()`` for this GPU (other than NotSupported and lost), once;
        they are taken out of what ``drain_failures`` hands out, so none is reported twice."""
        with self._lock:
            early = self._start_failures.pop(gpu, [])
            g = self._gpus.get(gpu)
            if g is not None:
                for f, n in early:
                    entry = g.failures.get(f.function)
                    if entry is not None:
                        entry[1] -= n
                        if entry[1] <= 0:
                            del g.failures[f.function]
            return early

    def drain_notices(self) -> list[str]:
        """Sampler-wide notices (internal errors) since the last drain."""
        with self._lock:
            out, self._notices = self._notices, []
            return out

    def cpu_seconds(self) -> float:
        """CPU time the sampler's own work has used, in seconds (time.thread_time per job)."""
        with self._lock:
            return self._cpu_s
