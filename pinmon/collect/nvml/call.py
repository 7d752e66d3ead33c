"""Every NVML call pinmon makes goes through ``call_nvml``: it returns ``(value, None)`` or
``(None, NvmlFailure)`` and never raises, whatever pynvml (or a broken library) throws.

What a failure means is decided here: NotSupported (or a function this driver lacks) leaves the
value ``None`` silently, GPU_IS_LOST means the GPU fell off the bus, anything else is reported. The
words of those reports are here too: what each function could not read, and why NVML could not start.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

# NVML return codes: part of NVML's ABI, identical in every pynvml.
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18

# A driver too old for a function answers FUNCTION_NOT_FOUND: for the user that is "not supported".
_NOT_SUPPORTED_CODES = frozenset({NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND})

# Every NVML function pinmon calls (the collector, the sampler, GPM): a name outside this list is
# a type error at the call, and typings/pynvml.pyi declares each with pynvml's signature. Listed at
# run time in NVML_FUNCTIONS, for fakes and fault-injection tests.
NvmlFunction = Literal[
    "nvmlInit",
    "nvmlShutdown",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetCpuAffinity",
    "nvmlDeviceGetNumaNodeId",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetPcieThroughput",
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleGet",
    "nvmlGpmMetricsGet",
    "nvmlGpmSampleFree",
]
NVML_FUNCTIONS: tuple[NvmlFunction, ...] = get_args(NvmlFunction)

# What a failing call could not read, in a notice's words.
_WHAT = {
    "nvmlDeviceGetHandleByIndex": "the device",
    "nvmlDeviceGetName": "the name",
    "nvmlDeviceGetUUID": "the UUID",
    "nvmlDeviceGetPciInfo": "the PCI bus id",
    "nvmlDeviceGetCpuAffinity": "the CPU affinity",
    "nvmlDeviceGetNumaNodeId": "the NUMA node",
    "nvmlDeviceGetCurrPcieLinkGeneration": "the PCIe link generation",
    "nvmlDeviceGetMaxPcieLinkGeneration": "the maximum PCIe link generation",
    "nvmlDeviceGetCurrPcieLinkWidth": "the PCIe link width",
    "nvmlDeviceGetMaxPcieLinkWidth": "the maximum PCIe link width",
    "nvmlDeviceGetMemoryInfo": "memory use",
    "nvmlDeviceGetComputeRunningProcesses": "compute processes",
    "nvmlDeviceGetFieldValues": "PCIe counters",
    "nvmlDeviceGetPcieThroughput": "PCIe throughput",
    "nvmlGpmQueryDeviceSupport": "GPM support",
    "nvmlGpmSampleAlloc": "a GPM sample buffer",
    "nvmlGpmSampleGet": "PCIe traffic (GPM sample)",
    "nvmlGpmMetricsGet": "PCIe traffic (GPM metrics)",
    "nvmlGpmSampleFree": "a GPM sample buffer",
}

# Why NVML could not start, for the "no NVIDIA GPU monitoring: ..." notice. Looked up by
# NvmlFailure.code, which is None for an exception that is not an NVMLError (no reason then).
START_REASONS: dict[int | None, str] = {
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML library not found (is the NVIDIA driver installed?)",
    NVML_ERROR_DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded",
    NVML_ERROR_NO_PERMISSION: "no permission to use NVML (check access to /dev/nvidia*)",
    NVML_ERROR_UNINITIALIZED: "NVML did not initialize",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        "the NVML library and the loaded NVIDIA driver differ in version (reload the driver or reboot)",
}


@dataclass(frozen=True)
class NvmlFailure:
    """One failed NVML call: the function, NVML's return code (None if not an NVMLError), its text."""

    function: str
    code: int | None
    message: str

    @property
    def not_supported(self) -> bool:
        return self.code in _NOT_SUPPORTED_CODES

    @property
    def gpu_lost(self) -> bool:
        return self.code == NVML_ERROR_GPU_IS_LOST


def _error_text(e: BaseException) -> str:
    try:
        return str(e) or type(e).__name__
    except Exception:  # pynvml's __str__ asks the library, which may be gone
        return f"NVML error {getattr(e, 'value', '?')}"


def call_nvml(nvml: object, name: NvmlFunction, *args: object) -> tuple[object, NvmlFailure | None]:
    """Call ``nvml.<name>(*args)``; returns ``(value, None)`` or ``(None, NvmlFailure)``, never raises.

    ``nvml`` is the pynvml module or a stand-in with its names. The value is ``object``: whatever the
    binding answered, which ``values`` checks before anything reads it."""
    fn = getattr(nvml, name, None)
    if fn is None:
        return None, NvmlFailure(name, NVML_ERROR_FUNCTION_NOT_FOUND, "not in this pynvml")
    try:
        return fn(*args), None
    except Exception as e:
        nvml_error = getattr(nvml, "NVMLError", None)
        if isinstance(nvml_error, type) and isinstance(e, nvml_error):
            code = getattr(e, "value", None)
            return None, NvmlFailure(name, code if isinstance(code, int) else None, _error_text(e))
        return None, NvmlFailure(name, None, f"{type(e).__name__}: {_error_text(e)}")


class NvmlCall(Protocol):
    """``call_nvml``'s signature, for code that takes it (or a test's stand-in) as an argument."""

    def __call__(self, nvml: object, name: NvmlFunction, *args: object) -> tuple[object, NvmlFailure | None]: ...


def failure_notice(index: int, failures: Sequence[NvmlFailure],
                   counts: dict[str, int] | None = None) -> str:
    """One notice for a GPU's failed calls: "GPU 0: NVML could not read memory use (Unknown Error)"."""
    parts: list[str] = []
    seen: set[str] = set()
    for f in failures:
        what = _WHAT.get(f.function, f.function)
        n = (counts or {}).get(f.function, 1)
        text = f"{what} ({f.message}{f', {n} times' if n > 1 else ''})"
        if text not in seen:
            seen.add(text)
            parts.append(text)
    return f"GPU {index}: NVML could not read " + ", ".join(parts)


class FailureLog:
    """One GPU's failed calls since they were last handed out, by function: the latest failure and
    how many times it failed. The owner holds its own lock around every use."""

    def __init__(self) -> None:
        self._by_function: dict[str, list] = {}

    def __bool__(self) -> bool:
        return bool(self._by_function)

    def record(self, failure: NvmlFailure) -> None:
        entry = self._by_function.setdefault(failure.function, [failure, 0])
        entry[0] = failure
        entry[1] += 1

    def items(self) -> list[tuple[NvmlFailure, int]]:
        """(latest failure, count) of each function, without handing them out."""
        return [(f, n) for f, n in self._by_function.values()]

    def drain(self) -> list[tuple[NvmlFailure, int]]:
        """(latest failure, count) of each function, handed out: the log is empty afterwards."""
        out = self.items()
        self._by_function.clear()
        return out

    def discount(self, handed_out: Sequence[tuple[NvmlFailure, int]]) -> None:
        """Take failures handed out another way off the counts, so none is reported twice."""
        for f, n in handed_out:
            entry = self._by_function.get(f.function)
            if entry is not None:
                entry[1] -= n
                if entry[1] <= 0:
                    del self._by_function[f.function]
