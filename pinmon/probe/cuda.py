"""CuPy for the probe: the one place it is imported, whether a probe can run here (and why not, in
words), the device's context, and the CUDA operations the probe times (copies and a read kernel).

CuPy is imported inside functions, so ``import pinmon.probe`` works without it. Callers that have
checked ``import_cupy()`` pass the module on. A CuPy or CUDA error becomes one line of text here:
``describe_error`` for any exception, ``start_failure`` and ``driver_hint`` for a missing driver or
one older than CuPy's CUDA. Allocation calls are made by ``buffers`` on ``runtime()``, and events
are recorded by ``timing``: each call is timed on its own, and a wrapper that looked CuPy up per
call would add about 1.5 us to every timed call. The types of what CuPy hands back are the
Protocols of ``cupy_types``.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable

from .cupy_types import CudaRuntime, CudaStream, CuPy, Kernel

CUPY_MISSING = ("CuPy is not installed (pip install 'pinmon[cuda12]',"
                " or 'pinmon[cuda13]' with a CUDA 13 driver)")
UNAVAILABLE_PREFIX = "probe unavailable: "

# The kernel driver's own file: present while the NVIDIA module is loaded. WSL has no module and
# reaches the GPU through /dev/dxg instead.
NVIDIA_PROC_VERSION = "/proc/driver/nvidia/version"
WSL_GPU_DEVICE = "/dev/dxg"
# The CuPy build, and pinmon's extra that installs it, for each CUDA major version.
_CUPY_FOR_CUDA = {11: "cupy-cuda11x", 12: "cupy-cuda12x (pip install 'pinmon[cuda12]')",
                  13: "cupy-cuda13x (pip install 'pinmon[cuda13]')"}

KERNEL_THREADS = 256
KERNEL_BLOCKS_PER_SM = 8

# One 16-byte load per thread per iteration; the conditional store keeps the loads from being
# optimised away without adding write traffic. Addresses come in as integers so the same argument
# packing works for device memory and for mapped host memory.
_READ_KERNEL_SRC = r"""
struct alignas(16) pinmon_u64x2 { unsigned long long x, y; };
extern "C" __global__ void pinmon_read(unsigned long long src_addr, unsigned long long n_vec,
                                       unsigned long long out_addr) {
    const pinmon_u64x2* src = (const pinmon_u64x2*)src_addr;
    unsigned long long acc = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < n_vec; i += stride) {
        pinmon_u64x2 v = src[i];
        acc ^= v.x ^ v.y;
    }
    if (acc == 0x5bd1e9955bd1e995ULL) { *((unsigned long long*)out_addr) = acc; }
}
"""

_contexts_seen: set[int] = set()
_read_kernels: dict[tuple[CuPy, int], Kernel] = {}


# --- CuPy and its errors ----------------------------------------------------------------------------

def import_cupy() -> tuple[CuPy, None] | tuple[None, str]:
    """(cupy module, None) or (None, reason). The one place the untyped module becomes ``CuPy``."""
    try:
        import cupy
    except ImportError as e:
        if getattr(e, "name", None) == "cupy":
            return None, CUPY_MISSING
        return None, f"CuPy failed to import ({describe_error(e)})"
    except Exception as e:  # a broken install can raise anything at import time
        return None, f"CuPy failed to import ({describe_error(e)})"
    if cupy is None:
        return None, CUPY_MISSING
    return cupy, None


def cupy_installed() -> bool:
    """Whether CuPy is installed, without importing it (an import takes a second on a GPU box):
    callers that only decide whether to offer probes ask this, and the probe itself says later
    what else stands in the way (``import_cupy``, ``device_problem``)."""
    import importlib.util

    try:
        return importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError):
        return False


def runtime() -> CudaRuntime:
    """CuPy's CUDA runtime module; only after ``import_cupy()`` succeeded."""
    import cupy

    return cupy.cuda.runtime


def describe_error(e: BaseException) -> str:
    """CuPy's CUDA errors already read 'cudaErrorX: text'; others get their type name."""
    name = type(e).__name__
    text = str(e).strip()
    if name in ("CUDARuntimeError", "CUDADriverError") and text:
        return text[:300]
    return f"{name}: {text}"[:300] if text else name


def _cuda_version(rt: CudaRuntime, name: str) -> int | None:
    """CUDA's version number (12020 for 12.2) from ``rt.<name>()``; None when it cannot be asked."""
    try:
        v = getattr(rt, name)()
    except Exception:
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _version_text(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def _no_driver(cp: CuPy) -> str | None:
    """Why there is no NVIDIA driver at all, or None when there is one (or it cannot be told).

    CUDA documents a driver version of 0 for "no driver installed" (no libcuda), whatever error
    its calls then give; a library without the kernel module leaves no /proc/driver/nvidia.
    """
    if _cuda_version(cp.cuda.runtime, "driverGetVersion") == 0:
        return "the CUDA driver library, libcuda, is not installed"
    if not os.path.exists(NVIDIA_PROC_VERSION) and not os.path.exists(WSL_GPU_DEVICE):
        return "the NVIDIA kernel module is not loaded"
    return None


def driver_hint(cp: CuPy, text: str) -> str:
    """What to do about a driver older than this CuPy's CUDA: said only when that is the case."""
    if "InsufficientDriver" not in text and "insufficient" not in text.lower():
        return ""
    rt = cp.cuda.runtime
    driver = _cuda_version(rt, "driverGetVersion")
    runtime_version = _cuda_version(rt, "runtimeGetVersion")
    if not driver or not runtime_version:
        return " (the NVIDIA driver is missing or older than this CuPy's CUDA: see `nvidia-smi`)"
    if driver >= runtime_version:
        return ""
    d, r = _version_text(driver), _version_text(runtime_version)
    hint = f" (the NVIDIA driver supports CUDA {d}, this CuPy is built for CUDA {r}: update the driver"
    other = _CUPY_FOR_CUDA.get(driver // 1000) if driver // 1000 < runtime_version // 1000 else None
    return hint + (f", or install the CuPy for CUDA {driver // 1000}, {other})" if other else ")")


def start_failure(cp: CuPy, text: str) -> str:
    """A CUDA error at start, named after its cause: no driver, an old driver, or as CUDA said."""
    missing = _no_driver(cp)
    if missing:
        return f"no NVIDIA driver: {missing} (CUDA: {text})"
    return f"no usable CUDA device ({text}){driver_hint(cp, text)}"


# --- devices ----------------------------------------------------------------------------------------

def device_problem(cp: CuPy, gpu_index: int) -> str | None:
    """Why CUDA device ``gpu_index`` cannot be probed, or None when it can."""
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as e:
        return start_failure(cp, describe_error(e))
    if count <= 0:
        return "no CUDA device visible to CuPy"
    if not 0 <= gpu_index < count:
        return f"CUDA device {gpu_index} not found (CuPy sees {count})"
    return None


def probe_available(gpu_index: int = 0) -> tuple[bool, str | None]:
    """(True, None) if CuPy imports and sees CUDA device ``gpu_index``; else (False, reason).

    The reason starts with "probe unavailable: ". Initialises the CUDA driver but creates no context.
    """
    cp, reason = import_cupy()
    if cp is None:
        return False, f"{UNAVAILABLE_PREFIX}{reason}"
    reason = device_problem(cp, gpu_index)
    if reason:
        return False, UNAVAILABLE_PREFIX + reason
    return True, None


def cuda_devices() -> tuple[list[tuple[int, str | None]], str | None]:
    """([(CUDA index, PCI bus id or None), ...], None), or ([], reason starting "probe unavailable: ").

    CUDA numbers devices in its own order (and CUDA_VISIBLE_DEVICES renumbers them), so callers
    match a device to its NVML entry by bus id, not by index.
    """
    cp, reason = import_cupy()
    if cp is None:
        return [], f"{UNAVAILABLE_PREFIX}{reason}"
    reason = device_problem(cp, 0)
    if reason:
        return [], UNAVAILABLE_PREFIX + reason
    devices: list[tuple[int, str | None]] = []
    for i in range(cp.cuda.runtime.getDeviceCount()):
        bus: object
        try:
            bus = cp.cuda.Device(i).pci_bus_id
        except Exception:  # an old CuPy or a device that will not answer: the index still works
            bus = None
        devices.append((i, bus if isinstance(bus, str) else None))
    return devices, None


def init_context(cp: CuPy, gpu_index: int) -> tuple[float, str]:
    """Make sure device ``gpu_index``'s primary context exists; (seconds, note). Called inside
    ``with cupy.cuda.Device(gpu_index)``, which restores the caller's device afterwards."""
    rt = cp.cuda.runtime
    t0 = time.perf_counter()
    rt.setDevice(gpu_index)
    rt.free(0)  # cudaFree(NULL): the classic way to force context creation
    seconds = time.perf_counter() - t0
    if gpu_index in _contexts_seen:
        note = "CUDA context already existed (earlier probe in this process)"
    else:
        note = "CUDA context ready (includes creating it if this was the process's first CUDA call)"
        _contexts_seen.add(gpu_index)
    try:
        note += f"; CUDA device {gpu_index} is {rt.deviceGetPCIBusId(gpu_index)}"
    except Exception:
        pass
    return seconds, note


# --- what the probe times ---------------------------------------------------------------------------

def copy_launch(cp: CuPy, host_ptr: int, device_ptr: int, size_bytes: int, direction: str,
                stream: CudaStream) -> Callable[[], None]:
    """One asynchronous copy of ``size_bytes`` between host and device on ``stream``, ready to repeat."""
    rt = cp.cuda.runtime
    if direction == "h2d":
        dst, src, kind = device_ptr, host_ptr, rt.memcpyHostToDevice
    elif direction == "d2h":
        dst, src, kind = host_ptr, device_ptr, rt.memcpyDeviceToHost
    else:
        raise ValueError(f"direction must be 'h2d' or 'd2h', not {direction!r}")
    stream_ptr = stream.ptr
    return lambda: rt.memcpyAsync(dst, src, size_bytes, kind, stream_ptr)


def mapped_device_pointer(cp: CuPy, host_ptr: int) -> int:
    """The device's address of mapped (zero-copy) host memory at ``host_ptr``."""
    attrs = cp.cuda.runtime.pointerGetAttributes(host_ptr)
    return int(attrs.devicePointer or host_ptr)


def read_kernel(cp: CuPy, gpu_index: int) -> Kernel:
    """The read kernel, compiled once per device; raises when it cannot be (no NVRTC, say).

    Keyed by the CuPy module itself, not its id(): the cache keeps the module alive, so an id can
    never be reused by another module (a stand-in) and hand it this one's kernel."""
    key = (cp, gpu_index)
    kernel = _read_kernels.get(key)
    if kernel is None:
        kernel = cp.RawKernel(_READ_KERNEL_SRC, "pinmon_read")
        kernel.compile()  # compile errors surface here, not in the middle of a timing loop
        _read_kernels[key] = kernel
    return kernel


def _sm_count(cp: CuPy, gpu_index: int) -> int:
    try:
        return int(cp.cuda.Device(gpu_index).attributes["MultiProcessorCount"])
    except Exception:  # only sizes the grid; any sane value works
        return 108


def read_kernel_launch(cp: CuPy, gpu_index: int, src_ptr: int, size_bytes: int, out_ptr: int,
                       stream: CudaStream) -> Callable[[], None]:
    """The read kernel over ``size_bytes`` at device address ``src_ptr`` on ``stream``, ready to repeat."""
    import numpy as np

    kernel = read_kernel(cp, gpu_index)
    blocks = max(1, _sm_count(cp, gpu_index) * KERNEL_BLOCKS_PER_SM)
    args = (np.uint64(src_ptr), np.uint64(size_bytes // 16), np.uint64(out_ptr))
    return lambda: kernel((blocks,), (KERNEL_THREADS,), args, stream=stream)
