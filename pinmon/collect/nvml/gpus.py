"""NVML: per-GPU static facts, link state, memory, compute processes and PCIe traffic, as ``Gpu`` models.

``NvmlCollector`` owns the NVML session (init, handles, shutdown) and the background PCIe sampler
(``sampler.PcieSampler``). ``read()`` is cheap: a handful of sub-millisecond calls per GPU (a GPM
sample among them, ~40 us, where the GPU has GPM) plus what the sampler has gathered; nothing slow
runs on the caller's thread.

It degrades and never crashes. Every NVML call goes through ``call.call_nvml``, which turns an
exception into an ``NvmlFailure``: NotSupported leaves the value ``None`` silently, any other error
leaves it ``None`` and adds a notice, GPU_IS_LOST marks that GPU lost while the others carry on, and
an NVML that cannot start (no library, no driver, no permission) makes the collector unavailable
with a plain reason instead of an exception.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from ...model import EXACT_PCIE_METHODS, Gpu, Link, Pcie
from ...model.link import theoretical_bytes_per_s
from .call import START_REASONS, NvmlFailure, NvmlFunction, call_nvml, failure_notice
from .counters import WRAP_BYTES, counter_hz_for_link
from .sampler import ERROR_PERIOD_S, PcieSampler
from .sysfs import sysfs_numa_node
from .values import bytes_value, cpu_mask_words, format_cpu_list, processes, small_int, str_or_none

# The current link width is read again after this many seconds (at once when the generation moves).
LINK_WIDTH_TTL_S = 10.0


class _Get(Protocol):
    """One GPU's NVML call: the value, or None when it failed (the failure is kept elsewhere)."""

    def __call__(self, name: NvmlFunction, *args: object) -> object: ...


class _PcieErrors(TypedDict):
    """The error-counter fields of ``Pcie``, the same whatever method measured the traffic."""
    replay_delta: int | None
    recovery_delta: int | None
    error_delta: int | None
    counter_deltas: dict[str, int | None]


@dataclass
class _GpuState:
    index: int
    handle: object = None  # NVML's device handle; None until opened
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    cpu_affinity: str | None = None
    numa_node: int | None = None
    lost: NvmlFailure | None = None
    start_notices: list[str] = field(default_factory=list)
    # The link's maximum generation and width: what the GPU and slot can do, fixed while the GPU is
    # there. Kept once read, so each snapshot asks NVML only what moves.
    gen_max: int | None = None
    width_max: int | None = None
    # The current width as last read: (width, the generation then, when it was read).
    width_read: tuple[int | None, int | None, float] | None = None


class NvmlCollector:
    """Reads every NVIDIA GPU through NVML into ``Gpu`` models; ``available`` says whether it can.

    ``nvml`` is the pynvml module (imported on ``start()`` when None) or a fake with its names.
    ``counter_hz`` is the PCIe byte counter read rate; ``prefer_gpm=False`` reads the byte counters
    even where GPM could give the bytes (see ``sampler``). ``background=False`` starts no thread, so
    tests drive ``sampler.poll_once()`` themselves; ``clock`` stamps the counter reads.
    """

    def __init__(self, nvml: object = None, counter_hz: float | None = None, *, background: bool = True,
                 clock: Callable[[], float] = time.monotonic, sysfs_root: str = "/sys",
                 error_period_s: float = ERROR_PERIOD_S, prefer_gpm: bool = True):
        if counter_hz is not None and not counter_hz > 0:
            raise ValueError(f"counter rate must be positive, got {counter_hz!r} Hz")
        self.nvml = nvml
        # None: as often as the fastest GPU's link needs (counters.counter_hz_for_link).
        self.counter_hz = float(counter_hz) if counter_hz is not None else None
        self.error_period_s = error_period_s
        self.prefer_gpm = prefer_gpm
        self.available = False
        self.reason: str | None = None
        self.sampler: PcieSampler | None = None
        self._background = background
        self._clock = clock
        self._sysfs_root = sysfs_root
        self._gpus: list[_GpuState] = []
        self._lock = threading.RLock()
        self._started = False
        self._initialized = False
        self._closed = False

    # --- life cycle --------------------------------------------------------------------------

    def start(self) -> bool:
        """Initialise NVML, read each GPU's static facts, start the sampler. Returns ``available``."""
        with self._lock:
            if self._started or self._closed:
                return self.available
            self._started = True
            if self.nvml is None:
                try:
                    import pynvml
                except Exception:
                    return self._unavailable(
                        "the NVML Python bindings are missing (install nvidia-ml-py)")
                self.nvml = pynvml
            _, failure = call_nvml(self.nvml, "nvmlInit")
            if failure is not None:
                return self._unavailable(START_REASONS.get(
                    failure.code, f"NVML did not start (NVML: {failure.message})"))
            self._initialized = True
            count, failure = call_nvml(self.nvml, "nvmlDeviceGetCount")
            if failure is not None or not isinstance(count, int):
                reason = START_REASONS.get(failure.code) if failure else None
                self._shutdown()
                return self._unavailable(reason or "NVML could not count the GPUs (NVML: "
                                         f"{failure.message if failure else count!r})")
            if count <= 0:
                self._shutdown()
                return self._unavailable("NVML sees no GPU")
            self._gpus = [self._open(i) for i in range(count)]
            if self.counter_hz is None:
                self.counter_hz = counter_hz_for_link(self._fastest_link_bytes_per_s())
            self.sampler = PcieSampler(
                self.nvml, [(g.index, g.handle) for g in self._gpus
                            if g.handle is not None and g.lost is None],
                self.counter_hz, call=call_nvml, clock=self._clock, error_period_s=self.error_period_s,
                prefer_gpm=self.prefer_gpm)
            self.sampler.start(background=self._background)
            for st in self._gpus:
                # A failure while detecting the byte counters outlasts one snapshot (the GPU stays
                # on the sampled fallback), so it joins the start notices every snapshot carries;
                # `pinmon check` would otherwise lose it with its discarded first snapshot.
                early = self.sampler.take_start_failures(st.index)
                if early:
                    st.start_notices.append(failure_notice(st.index, [f for f, _ in early],
                                                            {f.function: n for f, n in early}))
            self.available = True
            return True

    def _fastest_link_bytes_per_s(self) -> float | None:
        """The top payload rate of the fastest GPU's link at its maximum generation and width; None
        when any GPU's cannot be read (then the counters are read at the safe top rate)."""
        rates = []
        for g in self._gpus:
            if g.handle is None or g.lost is not None:
                continue
            gen, _ = call_nvml(self.nvml, "nvmlDeviceGetMaxPcieLinkGeneration", g.handle)
            width, _ = call_nvml(self.nvml, "nvmlDeviceGetMaxPcieLinkWidth", g.handle)
            rate = theoretical_bytes_per_s(small_int(gen, 64), small_int(width, 1024))
            if rate is None:
                return None
            rates.append(rate)
        return max(rates) if rates else None

    def _unavailable(self, reason: str) -> bool:
        self.available = False
        self.reason = reason
        return False

    def _shutdown(self) -> None:
        if self._initialized:
            self._initialized = False
            call_nvml(self.nvml, "nvmlShutdown")

    def _open(self, index: int) -> _GpuState:
        st = _GpuState(index)
        handle, failure = call_nvml(self.nvml, "nvmlDeviceGetHandleByIndex", index)
        if failure is not None:
            if failure.gpu_lost:
                st.lost = failure
            else:
                st.start_notices.append(f"GPU {index}: NVML cannot open the device ({failure.message})")
            return st
        st.handle = handle
        failures: list[NvmlFailure] = []
        get = self._getter(st, failures)
        st.name = str_or_none(get("nvmlDeviceGetName", handle))
        st.uuid = str_or_none(get("nvmlDeviceGetUUID", handle))
        pci = get("nvmlDeviceGetPciInfo", handle)
        st.pci_bus_id = str_or_none(getattr(pci, "busId", None)) if pci is not None else None
        words = max(1, ((os.cpu_count() or 64) + 63) // 64)
        st.cpu_affinity = format_cpu_list(cpu_mask_words(get("nvmlDeviceGetCpuAffinity", handle, words)))
        st.numa_node = self._numa_node(st, get)
        if failures:
            st.start_notices.append(failure_notice(index, failures))
        return st

    def _numa_node(self, st: _GpuState, get: _Get) -> int | None:
        # sysfs first: it is the host node nearest the PCIe device, which is what pinned-memory
        # placement needs. NVML's answer exists only where the GPU is itself a NUMA node (its
        # memory's node on coherent platforms), so it is the fallback, not the authority.
        node = sysfs_numa_node(st.pci_bus_id, self._sysfs_root)
        if node is not None:
            return node
        value = get("nvmlDeviceGetNumaNodeId", st.handle)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        return None

    def _getter(self, st: _GpuState, failures: list[NvmlFailure]) -> _Get:
        """A call_nvml for one GPU: a lost GPU is not asked again, failures are collected."""
        def get(name: NvmlFunction, *args: object) -> object:
            if st.lost is not None:
                return None
            value, failure = call_nvml(self.nvml, name, *args)
            if failure is None:
                return value
            if failure.gpu_lost:
                st.lost = failure
                if self.sampler is not None:
                    self.sampler.mark_lost(st.index, failure)
            elif not failure.not_supported:
                failures.append(failure)
            return None
        return get

    def close(self) -> None:
        """Stop the sampler and shut NVML down; safe to call twice, or without ``start()``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sampler, self.sampler = self.sampler, None
            if sampler is not None:
                sampler.stop()
            self._shutdown()
            if self.available:
                self.available = False
                self.reason = "the NVML collector is closed"

    def __enter__(self) -> NvmlCollector:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def cpu_seconds(self) -> float:
        """CPU time of the background PCIe sampling so far, in seconds."""
        sampler = self.sampler
        return 0.0 if sampler is None else sampler.cpu_seconds()

    # --- reading -----------------------------------------------------------------------------

    def read(self) -> tuple[tuple[Gpu, ...], tuple[str, ...]]:
        """Every GPU as a ``Gpu``, and notices (those about one GPU are also in its ``notices``)."""
        with self._lock:
            if not self._started and not self._closed:
                self.start()
            if not self.available:
                return (), (f"no NVIDIA GPU monitoring: {self.reason}",)
            sampler = self.sampler
            notices: list[str] = list(sampler.drain_notices()) if sampler is not None else []
            gpus = []
            for st in self._gpus:
                gpu = self._read_gpu(st)
                gpus.append(gpu)
                notices.extend(gpu.notices)
            if sampler is not None:
                sampler.request_sampled()  # the next read gets a fresh sample, without waiting
            return tuple(gpus), tuple(notices)

    def _read_gpu(self, st: _GpuState) -> Gpu:
        sampler = self.sampler
        if st.lost is None and sampler is not None:
            st.lost = sampler.lost(st.index)
        if st.lost is not None:
            return self._lost_gpu(st)
        if st.handle is None:
            return Gpu(index=st.index, notices=tuple(st.start_notices))
        failures: list[NvmlFailure] = []
        get = self._getter(st, failures)
        h = st.handle
        gen = small_int(get("nvmlDeviceGetCurrPcieLinkGeneration", h), 64)
        if st.gen_max is None:
            st.gen_max = small_int(get("nvmlDeviceGetMaxPcieLinkGeneration", h), 64)
        width = self._width(st, get, gen)
        if st.width_max is None:
            st.width_max = small_int(get("nvmlDeviceGetMaxPcieLinkWidth", h), 1024)
        gen_max, width_max = st.gen_max, st.width_max
        mem = get("nvmlDeviceGetMemoryInfo", h)
        procs = get("nvmlDeviceGetComputeRunningProcesses", h)
        if st.lost is not None:
            return self._lost_gpu(st)
        link = Link(gen=gen, gen_max=gen_max, width=width, width_max=width_max,
                    theoretical_bytes_per_s=theoretical_bytes_per_s(gen, width),
                    max_theoretical_bytes_per_s=theoretical_bytes_per_s(gen_max, width_max))
        notices = list(st.start_notices)
        pcie, pcie_notices = self._pcie(st, link)
        if sampler is not None:
            if sampler.lost(st.index) is not None:
                st.lost = sampler.lost(st.index)
                return self._lost_gpu(st)
            drained = sampler.drain_failures(st.index)
        else:
            drained = []
        counts: dict[str, int] = {}
        for f, n in drained:
            failures.append(f)
            counts[f.function] = n
        if failures:
            notices.append(failure_notice(st.index, failures, counts))
        notices += pcie_notices
        return Gpu(index=st.index, name=st.name, uuid=st.uuid, pci_bus_id=st.pci_bus_id,
                   link=link, pcie=pcie,
                   memory_total_bytes=bytes_value(getattr(mem, "total", None)),
                   memory_used_bytes=bytes_value(getattr(mem, "used", None)),
                   cpu_affinity=st.cpu_affinity, numa_node=st.numa_node,
                   processes=processes(procs), notices=tuple(notices))

    def _width(self, st: _GpuState, get, gen: int | None) -> int | None:
        """The link's current width, read again every ``LINK_WIDTH_TTL_S`` or at once when the
        generation moved (a link that retrains renegotiates both). The width is the slowest of
        NVML's per-snapshot calls (0.14 ms on the H200, bench/results/cpu_breakdown_h200.json), and
        it moves only when the link retrains, unlike the generation, which an idle GPU lowers."""
        now = self._clock()
        kept = st.width_read
        if kept is not None and kept[0] is not None and kept[1] == gen and now - kept[2] < LINK_WIDTH_TTL_S:
            return kept[0]
        width = small_int(get("nvmlDeviceGetCurrPcieLinkWidth", st.handle), 1024)
        st.width_read = (width, gen, now)
        return width

    def _pcie(self, st: _GpuState, link: Link) -> tuple[Pcie, list[str]]:
        sampler = self.sampler
        if sampler is None:
            return Pcie(), []
        notices: list[str] = []
        deltas = sampler.error_deltas(st.index)
        others = [v for k, v in deltas.items() if k not in ("replay", "l0_to_recovery") and v is not None]
        errors = _PcieErrors(replay_delta=deltas.get("replay"), recovery_delta=deltas.get("l0_to_recovery"),
                             # An alarm figure: a few counters overlap (correctable errors include bad
                             # TLPs), so it is not a count of distinct events; counter_deltas has each.
                             error_delta=sum(others) if others else None, counter_deltas=deltas)
        method = sampler.method(st.index)
        if method in EXACT_PCIE_METHODS:
            taken = sampler.take(st.index)
            if taken is None:
                return Pcie(method=method, **errors), notices
            rx, tx, interval_s = taken  # GPM may leave one direction None
            if method == "counters":
                gap_s = sampler.wrap_gap_s(st.index)
                line_rate = link.theoretical_bytes_per_s or link.max_theoretical_bytes_per_s
                if gap_s is not None and line_rate and gap_s > WRAP_BYTES / line_rate:
                    notices.append(
                        f"GPU {st.index}: the PCIe counter reads fell behind (a {gap_s * 1e3:.0f} ms gap;"
                        f" the 32-bit counters can wrap in {WRAP_BYTES / line_rate * 1e3:.0f} ms at this"
                        " link's speed), so link bytes may be undercounted")
            ok = interval_s > 0
            return Pcie(rx_bytes_per_s=rx / interval_s if ok and rx is not None else None,
                        tx_bytes_per_s=tx / interval_s if ok and tx is not None else None, method=method,
                        rx_bytes=rx, tx_bytes=tx, interval_s=interval_s, **errors), notices
        if method == "sampled":
            rates = sampler.sampled(st.index)
            rx_rate, tx_rate = rates if rates is not None else (None, None)
            return Pcie(rx_bytes_per_s=rx_rate, tx_bytes_per_s=tx_rate, method=method,
                        **errors), notices
        return Pcie(**errors), notices

    def _lost_gpu(self, st: _GpuState) -> Gpu:
        where = f" (bus {st.pci_bus_id})" if st.pci_bus_id else ""
        message = st.lost.message if st.lost is not None else "GPU is lost"
        notice = f"GPU {st.index}{where} fell off the bus (NVML: {message})"
        return Gpu(index=st.index, name=st.name, uuid=st.uuid, pci_bus_id=st.pci_bus_id,
                   cpu_affinity=st.cpu_affinity, numa_node=st.numa_node, lost=True,
                   notices=(notice,))

