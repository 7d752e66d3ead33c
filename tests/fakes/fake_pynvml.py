"""A scriptable stand-in for the ``pynvml`` module: GPUs, link state, counters, injected errors.

``FakeNvml`` has the functions and constants of pynvml that pinmon calls (``CALLED_FUNCTIONS``) and
an ``NVMLError`` hierarchy built like pynvml's (``NVMLError(code)`` returns the subclass for that
code, with ``.value``). It keeps a virtual clock: ``advance(dt_s)`` moves time and every GPU's link
byte totals by its scripted rates, so tests know the exact bytes, wrap-arounds included; the byte
counter fields report ``total mod 2**counter_bits``.

GPM (``gpm_supported=True`` on a ``FakeGpu``): a sample records the GPU's byte totals and the
virtual time, and ``nvmlGpmMetricsGet`` answers the average rates between two samples in MiB/s, as
the real one does, so chained samples add up to the exact bytes.

Faults: ``fail(function, error, gpu=None, times=None)`` makes calls raise (``error`` is an NVML
code or a key of ``ERRORS``); ``lose(gpu)`` makes every call for that GPU answer GPU_IS_LOST.
Every call is recorded in ``calls`` as ``(function, gpu_index_or_None, thread_ident)``.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, ClassVar

# --- constants, same values as pynvml -----------------------------------------------------------
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_UNKNOWN = 999

_ERROR_TEXT = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}

# The errors a fault-injection test picks from, by plain name.
ERRORS = {
    "not_supported": NVML_ERROR_NOT_SUPPORTED,
    "gpu_lost": NVML_ERROR_GPU_IS_LOST,
    "no_permission": NVML_ERROR_NO_PERMISSION,
    "unknown": NVML_ERROR_UNKNOWN,
    "timeout": NVML_ERROR_TIMEOUT,
    "library_not_found": NVML_ERROR_LIBRARY_NOT_FOUND,
    "driver_not_loaded": NVML_ERROR_DRIVER_NOT_LOADED,
    "uninitialized": NVML_ERROR_UNINITIALIZED,
}

NVML_VALUE_TYPE_DOUBLE = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VALUE_TYPE_UNSIGNED_LONG = 2
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4

NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1

NVML_FI_DEV_PCIE_REPLAY_COUNTER = 94
NVML_FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER = 169
NVML_FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS = 173
NVML_FI_DEV_PCIE_COUNT_NAKS_RECEIVED = 174
NVML_FI_DEV_PCIE_COUNT_RECEIVER_ERROR = 175
NVML_FI_DEV_PCIE_COUNT_BAD_TLP = 176
NVML_FI_DEV_PCIE_COUNT_NAKS_SENT = 177
NVML_FI_DEV_PCIE_COUNT_BAD_DLLP = 178
NVML_FI_DEV_PCIE_COUNT_NON_FATAL_ERROR = 179
NVML_FI_DEV_PCIE_COUNT_FATAL_ERROR = 180
NVML_FI_DEV_PCIE_COUNT_UNSUPPORTED_REQ = 181
NVML_FI_DEV_PCIE_COUNT_LCRC_ERROR = 182
NVML_FI_DEV_PCIE_COUNT_LANE_ERROR = 183
NVML_FI_DEV_PCIE_COUNT_TX_BYTES = 197
NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 198

NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20
NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21
NVML_GPM_METRICS_GET_VERSION = 1

CONSTANT_NAMES = tuple(n for n in dir() if n.startswith("NVML_"))


# --- errors, built the way pynvml builds them ---------------------------------------------------
class NVMLError(Exception):
    _valClassMapping: ClassVar[dict[int, type]] = {}

    def __new__(cls, value):
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __init__(self, value=None):
        super().__init__()

    def __str__(self):
        return _ERROR_TEXT.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other):
        return isinstance(other, NVMLError) and self.value == other.value

    __hash__ = Exception.__hash__


def _make_error_classes() -> dict[str, type]:
    out = {}
    for name, code in list(globals().items()):
        if not name.startswith("NVML_ERROR_"):
            continue
        cls_name = "NVMLError_" + "".join(p.capitalize() for p in name[len("NVML_ERROR_"):].split("_"))

        def new(cls, *args, _code=code):
            return NVMLError.__new__(cls, _code)

        cls = type(cls_name, (NVMLError,), {"__new__": new})
        NVMLError._valClassMapping[code] = cls
        out[cls_name] = cls
    return out


ERROR_CLASSES = _make_error_classes()
globals().update(ERROR_CLASSES)

# --- the fake devices ---------------------------------------------------------------------------
# The five error counters that answered on the H200 test box, with its readings; the rest of the
# PCIe error fields answered NotSupported there and do here (None).
DEFAULT_ERROR_COUNTERS = {
    NVML_FI_DEV_PCIE_REPLAY_COUNTER: 0,
    NVML_FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER: 791,
    NVML_FI_DEV_PCIE_COUNT_BAD_TLP: 21,
    NVML_FI_DEV_PCIE_COUNT_NAKS_SENT: 16,
    NVML_FI_DEV_PCIE_COUNT_RECEIVER_ERROR: 17,
}


@dataclass
class FakeGpu:
    """One scripted GPU. Rates are link bytes per second; totals are the true (unwrapped) bytes."""

    index: int = 0
    name: str = "NVIDIA H200"
    uuid: str | None = None
    pci_bus_id: str | None = None
    gen: int = 5
    gen_max: int = 5
    width: int = 16
    width_max: int = 16
    memory_total_bytes: int = 150_754_820_096
    memory_used_bytes: int = 1_073_741_824
    processes: list = field(default_factory=list)  # [(pid, used_bytes_or_None)]
    cpu_affinity_words: list = field(default_factory=lambda: [0x0000FFFF0000FFFF])  # CPUs 0-15,32-47
    numa_node: int | None = None  # None: NotSupported (as on the H200 box)
    rx_bytes_per_s: float = 0.0
    tx_bytes_per_s: float = 0.0
    rx_total: int = 0
    tx_total: int = 0
    counter_bits: int = 32
    byte_counters_return: int = NVML_SUCCESS  # per-field nvmlReturn of the RX/TX byte fields
    throughput_supported: bool = True
    gpm_supported: bool = False
    error_counters: dict = field(default_factory=lambda: dict(DEFAULT_ERROR_COUNTERS))
    lost: bool = False

    def __post_init__(self):
        if self.uuid is None:
            self.uuid = f"GPU-00000000-0000-0000-0000-{self.index:012d}"
        if self.pci_bus_id is None:
            self.pci_bus_id = f"00000000:{0x17 + 0x10 * self.index:02X}:00.0"


@dataclass(frozen=True)
class FakeHandle:
    index: int


@dataclass
class _Fault:
    function: str
    code: int
    gpu: int | None
    times: int | None


class FakeNvml:
    """An object that quacks like the ``pynvml`` module for the calls pinmon makes."""

    CALLED_FUNCTIONS = (
        "nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo", "nvmlDeviceGetCpuAffinity",
        "nvmlDeviceGetNumaNodeId", "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
        "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetFieldValues",
        "nvmlDeviceGetPcieThroughput", "nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc",
        "nvmlGpmSampleGet", "nvmlGpmMetricsGet", "nvmlGpmSampleFree",
    )
    ERRORS = ERRORS
    NVMLError = NVMLError

    def __init__(self, gpus: int | list[FakeGpu] = 1, **gpu_defaults: Any):
        if isinstance(gpus, int):
            gpus = [FakeGpu(index=i, **gpu_defaults) for i in range(gpus)]
        self.gpus: list[FakeGpu] = gpus
        self.now = 1000.0
        self.calls: list[tuple[str, int | None, int]] = []
        self.field_requests: list[tuple[int, tuple[int, ...]]] = []  # (gpu, field ids) per call
        self.faults: list[_Fault] = []
        self.init_count = 0
        self.gpm_samples_alive = 0
        # Called inside nvmlDeviceGetPcieThroughput as hook(gpu_index, counter), outside the lock,
        # so a test can block there (a barrier proves the calls run in parallel).
        self.throughput_hook: Callable[[int, int], None] | None = None
        self._lock = threading.RLock()

    def __getattr__(self, name: str) -> Any:
        # Constants and error classes read like module attributes.
        if name in CONSTANT_NAMES or name in ERROR_CLASSES:
            return globals()[name]
        raise AttributeError(name)

    # --- scripting ---------------------------------------------------------------------------

    def clock(self) -> float:
        with self._lock:
            return self.now

    def advance(self, dt_s: float) -> None:
        """Move the virtual clock; every GPU's link byte totals grow by rate x dt."""
        with self._lock:
            self.now += dt_s
            for g in self.gpus:
                g.rx_total += round(g.rx_bytes_per_s * dt_s)
                g.tx_total += round(g.tx_bytes_per_s * dt_s)

    def fail(self, function: str, error: int | str, gpu: int | None = None,
             times: int | None = None) -> None:
        """Make ``function`` raise ``error`` (for one GPU, or all; ``times`` calls, or forever).

        ``function="*"`` matches every function.
        """
        code = ERRORS[error] if isinstance(error, str) else int(error)
        with self._lock:
            self.faults.append(_Fault(function, code, gpu, times))

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()

    def lose(self, gpu: int) -> None:
        """The GPU falls off the bus: every call for it raises GPU_IS_LOST from now on."""
        with self._lock:
            self.gpus[gpu].lost = True

    def called(self, function: str, gpu: int | None = None) -> int:
        """How many times ``function`` was called (for one GPU, or at all)."""
        with self._lock:
            return sum(1 for f, g, _ in self.calls if f == function and (gpu is None or g == gpu))

    # --- plumbing ----------------------------------------------------------------------------

    def _enter(self, function: str, gpu: int | None = None, needs_init: bool = True) -> None:
        with self._lock:
            self.calls.append((function, gpu, threading.get_ident()))
            for fault in self.faults:
                if fault.function not in (function, "*") or fault.gpu not in (None, gpu):
                    continue
                if fault.times is not None:
                    if fault.times <= 0:
                        continue
                    fault.times -= 1
                raise NVMLError(fault.code)
            if needs_init and self.init_count <= 0:
                raise NVMLError(NVML_ERROR_UNINITIALIZED)
            if gpu is not None and self.gpus[gpu].lost:
                raise NVMLError(NVML_ERROR_GPU_IS_LOST)

    def _gpu(self, function: str, handle: Any) -> FakeGpu:
        if not isinstance(handle, FakeHandle) or not 0 <= handle.index < len(self.gpus):
            with self._lock:
                self.calls.append((function, None, threading.get_ident()))
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        self._enter(function, handle.index)
        return self.gpus[handle.index]

    # --- the pynvml functions ----------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._enter("nvmlInit", needs_init=False)
        with self._lock:
            self.init_count += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        with self._lock:
            self.init_count -= 1

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        if not 0 <= index < len(self.gpus):
            self._enter("nvmlDeviceGetHandleByIndex")
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        self._enter("nvmlDeviceGetHandleByIndex", index)
        return FakeHandle(index)

    def nvmlDeviceGetName(self, handle) -> str:
        return self._gpu("nvmlDeviceGetName", handle).name

    def nvmlDeviceGetUUID(self, handle) -> str:
        return self._gpu("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetPciInfo(self, handle):
        g = self._gpu("nvmlDeviceGetPciInfo", handle)
        domain, bus, rest = g.pci_bus_id.split(":")
        return SimpleNamespace(busId=g.pci_bus_id, busIdLegacy=g.pci_bus_id[4:],
                               domain=int(domain, 16), bus=int(bus, 16),
                               device=int(rest.split(".")[0], 16))

    def nvmlDeviceGetCpuAffinity(self, handle, cpuSetSize: int) -> list[int]:
        g = self._gpu("nvmlDeviceGetCpuAffinity", handle)
        words = list(g.cpu_affinity_words)[:cpuSetSize]
        return words + [0] * (cpuSetSize - len(words))

    def nvmlDeviceGetNumaNodeId(self, handle) -> int:
        g = self._gpu("nvmlDeviceGetNumaNodeId", handle)
        if g.numa_node is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return g.numa_node

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle) -> int:
        return self._gpu("nvmlDeviceGetCurrPcieLinkGeneration", handle).gen

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle) -> int:
        return self._gpu("nvmlDeviceGetMaxPcieLinkGeneration", handle).gen_max

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle) -> int:
        return self._gpu("nvmlDeviceGetCurrPcieLinkWidth", handle).width

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle) -> int:
        return self._gpu("nvmlDeviceGetMaxPcieLinkWidth", handle).width_max

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        g = self._gpu("nvmlDeviceGetMemoryInfo", handle)
        return SimpleNamespace(total=g.memory_total_bytes, used=g.memory_used_bytes,
                               free=g.memory_total_bytes - g.memory_used_bytes)

    def nvmlDeviceGetComputeRunningProcesses(self, handle) -> list:
        g = self._gpu("nvmlDeviceGetComputeRunningProcesses", handle)
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in g.processes]

    def nvmlDeviceGetFieldValues(self, handle, fieldIds) -> list:
        g = self._gpu("nvmlDeviceGetFieldValues", handle)
        with self._lock:
            self.field_requests.append((g.index, tuple(fieldIds)))
            return [self._field(g, fid) for fid in fieldIds]

    def _field(self, g: FakeGpu, fid: int) -> SimpleNamespace:
        ret, value = NVML_SUCCESS, 0
        if fid in (NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES):
            ret = g.byte_counters_return
            total = g.rx_total if fid == NVML_FI_DEV_PCIE_COUNT_RX_BYTES else g.tx_total
            value = total % (1 << g.counter_bits)
        elif g.error_counters.get(fid) is not None:
            value = g.error_counters[fid]
        else:
            ret = NVML_ERROR_NOT_SUPPORTED
        v = SimpleNamespace(ullVal=value, uiVal=value & 0xFFFFFFFF, ulVal=value, sllVal=value,
                            siVal=value, usVal=value & 0xFFFF, dVal=float(value))
        return SimpleNamespace(fieldId=fid, scopeId=0, timestamp=int(self.now * 1e6), latencyUsec=0,
                               valueType=NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, nvmlReturn=ret,
                               value=v)

    def nvmlDeviceGetPcieThroughput(self, device, counter: int) -> int:
        g = self._gpu("nvmlDeviceGetPcieThroughput", device)
        hook = self.throughput_hook
        if hook is not None:
            hook(g.index, counter)
        if not g.throughput_supported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        rate = g.rx_bytes_per_s if counter == NVML_PCIE_UTIL_RX_BYTES else g.tx_bytes_per_s
        return int(rate // 1000)  # KB/s, KB = 1000 bytes

    # --- GPM -----------------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, device):
        g = self._gpu("nvmlGpmQueryDeviceSupport", device)
        return SimpleNamespace(version=1, isSupportedDevice=int(g.gpm_supported))

    def nvmlGpmSampleAlloc(self) -> FakeGpmSample:
        self._enter("nvmlGpmSampleAlloc")
        sample = FakeGpmSample()
        with self._lock:
            self.gpm_samples_alive += 1
        return sample

    def nvmlGpmSampleFree(self, sample: FakeGpmSample) -> None:
        self._enter("nvmlGpmSampleFree", sample.gpu)
        if sample.freed:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        sample.freed = True
        with self._lock:
            self.gpm_samples_alive -= 1

    def nvmlGpmSampleGet(self, device, sample: FakeGpmSample) -> FakeGpmSample:
        g = self._gpu("nvmlGpmSampleGet", device)
        if not g.gpm_supported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        with self._lock:
            sample.gpu, sample.time, sample.rx, sample.tx = g.index, self.now, g.rx_total, g.tx_total
        return sample

    def c_nvmlGpmMetricsGet_t(self) -> SimpleNamespace:
        return SimpleNamespace(version=0, numMetrics=0, sample1=None, sample2=None,
                               metrics=[SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0)
                                        for _ in range(8)])

    def nvmlGpmMetricsGet(self, request):
        s1, s2 = request.sample1, request.sample2
        self._enter("nvmlGpmMetricsGet", getattr(s1, "gpu", None))
        if request.version != NVML_GPM_METRICS_GET_VERSION or s1 is None or s2 is None \
                or s1.time is None or s2.time is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        dt = s2.time - s1.time
        for m in request.metrics[:request.numMetrics]:
            if m.metricId not in (NVML_GPM_METRIC_PCIE_RX_PER_SEC, NVML_GPM_METRIC_PCIE_TX_PER_SEC) or dt <= 0:
                m.nvmlReturn, m.value = NVML_ERROR_INVALID_ARGUMENT, 0.0
                continue
            moved = s2.rx - s1.rx if m.metricId == NVML_GPM_METRIC_PCIE_RX_PER_SEC else s2.tx - s1.tx
            m.nvmlReturn, m.value = NVML_SUCCESS, moved / dt / (1 << 20)  # MiB/s
        return request


@dataclass
class FakeGpmSample:
    """A GPM sample buffer: which GPU, when, and its byte totals then."""

    gpu: int | None = None
    time: float | None = None
    rx: int = 0
    tx: int = 0
    freed: bool = False
