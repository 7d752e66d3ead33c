"""The probe engine: every CUDA call pinmon makes, through CuPy's public runtime API.

CuPy is imported inside functions, so ``import pinmon.probe`` works without it. ``run_probe`` walks a
``plan.Plan``: copies are timed with CUDA events on a dedicated non-blocking stream (one warm-up,
then the median of the repeats), host-side costs (allocation, CPU reads and writes) with
``time.perf_counter``. It never raises for CUDA or CuPy errors or a missing CuPy: it returns a
``ProbeResult`` with status "unavailable" and the reason. ``KeyboardInterrupt`` propagates, but only
after every allocation is freed: each one is owned by a context manager (``PinnedBuffer``,
``Registered``, ``DeviceBuffer``) that frees it on the way out, and a Ctrl-C arriving during an
allocation or free is held back until the pointer is stored (or released).

Bounds: a ``PinnedLedger`` refuses any pinned or registered buffer that would cross the cap before
CUDA is called; the cancel event and the time budget are checked between measurements; one probe
runs at a time per process.
"""
from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import signal
import statistics
import threading
import time
from dataclasses import replace
from typing import Callable, Iterable, Optional, Sequence

from ..model import ProbeMeasurement, ProbeResult
from ..units import fmt_bytes
from . import plan as P
from .safety import PinnedLedger, TimeBudget, pinned_cap

CUPY_MISSING = ("CuPy is not installed (pip install 'pinmon[cuda12]',"
                " or 'pinmon[cuda13]' with a CUDA 13 driver)")
UNAVAILABLE_PREFIX = "probe unavailable: "

Progress = Callable[[int, int, str], None]

_PROBE_LOCK = threading.Lock()
_HELD_LOCK = threading.Lock()
_held_pinned_bytes = 0
_contexts_seen: set = set()
_read_kernels: dict = {}

# A write-combined buffer counts as having a CPU-read penalty when reads from it run at under
# half the speed of reads from ordinary pinned memory (on bare metal the gap is ~10x).
WC_READ_PENALTY_RATIO = 0.5
_KERNEL_THREADS = 256
_KERNEL_BLOCKS_PER_SM = 8

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


# --- CuPy access and error text -------------------------------------------------------------------

def _import_cupy():
    """(cupy module, None) or (None, reason)."""
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


def _runtime():
    import cupy

    return cupy.cuda.runtime


def describe_error(e: BaseException) -> str:
    """CuPy's CUDA errors already read 'cudaErrorX: text'; others get their type name."""
    name = type(e).__name__
    text = str(e).strip()
    if name in ("CUDARuntimeError", "CUDADriverError") and text:
        return text[:300]
    return f"{name}: {text}"[:300] if text else name


# The kernel driver's own file: present while the NVIDIA module is loaded. WSL has no module and
# reaches the GPU through /dev/dxg instead.
NVIDIA_PROC_VERSION = "/proc/driver/nvidia/version"
WSL_GPU_DEVICE = "/dev/dxg"
# The CuPy build, and pinmon's extra that installs it, for each CUDA major version.
_CUPY_FOR_CUDA = {11: "cupy-cuda11x", 12: "cupy-cuda12x (pip install 'pinmon[cuda12]')",
                  13: "cupy-cuda13x (pip install 'pinmon[cuda13]')"}


def _cuda_version(rt, name: str) -> Optional[int]:
    """CUDA's version number (12020 for 12.2) from ``rt.<name>()``; None when it cannot be asked."""
    try:
        v = getattr(rt, name)()
    except Exception:
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _version_text(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def _no_driver(cp) -> Optional[str]:
    """Why there is no NVIDIA driver at all, or None when there is one (or it cannot be told).

    CUDA documents a driver version of 0 for "no driver installed" (no libcuda), whatever error
    its calls then give; a library without the kernel module leaves no /proc/driver/nvidia.
    """
    if _cuda_version(cp.cuda.runtime, "driverGetVersion") == 0:
        return "the CUDA driver library, libcuda, is not installed"
    if not os.path.exists(NVIDIA_PROC_VERSION) and not os.path.exists(WSL_GPU_DEVICE):
        return "the NVIDIA kernel module is not loaded"
    return None


def _driver_hint(cp, text: str) -> str:
    """What to do about a driver older than this CuPy's CUDA: said only when that is the case."""
    if "InsufficientDriver" not in text and "insufficient" not in text.lower():
        return ""
    rt = cp.cuda.runtime
    driver = _cuda_version(rt, "driverGetVersion")
    runtime = _cuda_version(rt, "runtimeGetVersion")
    if not driver or not runtime:
        return " (the NVIDIA driver is missing or older than this CuPy's CUDA: see `nvidia-smi`)"
    if driver >= runtime:
        return ""
    d, r = _version_text(driver), _version_text(runtime)
    hint = f" (the NVIDIA driver supports CUDA {d}, this CuPy is built for CUDA {r}: update the driver"
    other = _CUPY_FOR_CUDA.get(driver // 1000) if driver // 1000 < runtime // 1000 else None
    return hint + (f", or install the CuPy for CUDA {driver // 1000}, {other})" if other else ")")


def _start_failure(cp, text: str) -> str:
    """A CUDA error at start, named after its cause: no driver, an old driver, or as CUDA said."""
    missing = _no_driver(cp)
    if missing:
        return f"no NVIDIA driver: {missing} (CUDA: {text})"
    return f"no usable CUDA device ({text}){_driver_hint(cp, text)}"


def probe_available(gpu_index: int = 0) -> tuple[bool, Optional[str]]:
    """(True, None) if CuPy imports and sees CUDA device ``gpu_index``; else (False, reason).

    The reason starts with "probe unavailable: ". Initialises the CUDA driver but creates no context.
    """
    cp, reason = _import_cupy()
    if cp is None:
        return False, UNAVAILABLE_PREFIX + reason
    reason = _device_problem(cp, gpu_index)
    if reason:
        return False, UNAVAILABLE_PREFIX + reason
    return True, None


def cuda_devices() -> tuple[list[tuple[int, Optional[str]]], Optional[str]]:
    """([(CUDA index, PCI bus id or None), ...], None), or ([], reason starting "probe unavailable: ").

    CUDA numbers devices in its own order (and CUDA_VISIBLE_DEVICES renumbers them), so callers
    match a device to its NVML entry by bus id, not by index.
    """
    cp, reason = _import_cupy()
    if cp is None:
        return [], UNAVAILABLE_PREFIX + reason
    reason = _device_problem(cp, 0)
    if reason:
        return [], UNAVAILABLE_PREFIX + reason
    devices = []
    for i in range(cp.cuda.runtime.getDeviceCount()):
        try:
            bus = cp.cuda.Device(i).pci_bus_id
        except Exception:  # an old CuPy or a device that will not answer: the index still works
            bus = None
        devices.append((i, bus if isinstance(bus, str) else None))
    return devices, None


def _device_problem(cp, gpu_index: int) -> Optional[str]:
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as e:
        return _start_failure(cp, describe_error(e))
    if count <= 0:
        return "no CUDA device visible to CuPy"
    if not 0 <= gpu_index < count:
        return f"CUDA device {gpu_index} not found (CuPy sees {count})"
    return None


# --- interrupt deferral and owned allocations -----------------------------------------------------

@contextlib.contextmanager
def _interrupts_deferred():
    """Hold back a Ctrl-C for the few microseconds between a CUDA allocation returning and its
    pointer being stored (or a free and the pointer being cleared): a KeyboardInterrupt landing
    there would leak the buffer. Python runs signal handlers in the main thread only, so other
    threads need nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list = []
    try:
        old = signal.getsignal(signal.SIGINT)
        if old is None:  # a handler not installed from Python: cannot be restored, leave it
            yield
            return
        signal.signal(signal.SIGINT, lambda signum, frame: pending.append((signum, frame)))
    except (ValueError, OSError, TypeError, AttributeError):
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if pending:
            if callable(old):
                old(*pending[0])  # default_int_handler: raises KeyboardInterrupt here
            elif old == signal.SIG_DFL:
                import os

                os.kill(os.getpid(), signal.SIGINT)


def _track(delta: int) -> None:
    global _held_pinned_bytes
    with _HELD_LOCK:
        _held_pinned_bytes += delta


def held_pinned_bytes() -> int:
    """Pinned and registered bytes the probe engine holds now in this process (0 between probes)."""
    with _HELD_LOCK:
        return _held_pinned_bytes


def _sync_quietly(stream) -> None:
    # Before freeing host memory a copy may still be reading: wait for the stream, and do not let a
    # failed wait stop the free.
    if stream is None:
        return
    try:
        stream.synchronize()
    except Exception:
        pass


class _Owned:
    """Shared shape of the owners below: ``open()``/``close()`` (idempotent) and a with block that
    closes even when opening was interrupted half way."""

    ptr: int = 0

    def __enter__(self):
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class PinnedBuffer(_Owned):
    """One ``cudaHostAlloc`` allocation of ``nbytes`` with ``flags``; ``cudaFreeHost`` on close.

    ``alloc_s`` and ``free_s`` are the seconds the two CUDA calls took. With a ``ledger`` the bytes
    are reserved before the call, so the cap holds even if the call would succeed.
    """

    def __init__(self, nbytes: int, flags: int = 0, *, ledger: Optional[PinnedLedger] = None,
                 stream=None):
        self.nbytes = int(nbytes)
        self.flags = int(flags)
        self.ledger = ledger
        self.stream = stream
        self.ptr = 0
        self.alloc_s: Optional[float] = None
        self.free_s: Optional[float] = None

    def open(self) -> "PinnedBuffer":
        if self.ptr:
            return self
        rt = _runtime()
        if self.ledger is not None:
            self.ledger.reserve(self.nbytes)
        try:
            with _interrupts_deferred():
                t0 = time.perf_counter()
                ptr = rt.hostAlloc(self.nbytes, self.flags)
                self.alloc_s = time.perf_counter() - t0
                self.ptr = ptr
                _track(self.nbytes)
        except BaseException:
            if not self.ptr and self.ledger is not None:
                self.ledger.release(self.nbytes)
            raise
        return self

    def close(self) -> None:
        if not self.ptr:
            return
        _sync_quietly(self.stream)
        rt = _runtime()
        try:
            with _interrupts_deferred():
                ptr, self.ptr = self.ptr, 0
                _track(-self.nbytes)
                t0 = time.perf_counter()
                rt.freeHost(ptr)
                self.free_s = time.perf_counter() - t0
        finally:
            if self.ledger is not None:
                self.ledger.release(self.nbytes)

    def view(self, nbytes: Optional[int] = None):
        """A numpy uint8 array over the buffer; never use it after close()."""
        return host_view(self.ptr, self.nbytes if nbytes is None else nbytes)


class Registered(_Owned):
    """``cudaHostRegister`` of existing host memory (``ptr``, ``nbytes``); ``cudaHostUnregister`` on
    close. The caller keeps the memory alive for longer than this object."""

    def __init__(self, ptr: int, nbytes: int, flags: int = 0, *,
                 ledger: Optional[PinnedLedger] = None, stream=None):
        self.host_ptr = int(ptr)
        self.nbytes = int(nbytes)
        self.flags = int(flags)
        self.ledger = ledger
        self.stream = stream
        self.ptr = 0
        self.register_s: Optional[float] = None
        self.unregister_s: Optional[float] = None

    def open(self) -> "Registered":
        if self.ptr:
            return self
        rt = _runtime()
        if self.ledger is not None:
            self.ledger.reserve(self.nbytes)
        try:
            with _interrupts_deferred():
                t0 = time.perf_counter()
                rt.hostRegister(self.host_ptr, self.nbytes, self.flags)
                self.register_s = time.perf_counter() - t0
                self.ptr = self.host_ptr
                _track(self.nbytes)
        except BaseException:
            if not self.ptr and self.ledger is not None:
                self.ledger.release(self.nbytes)
            raise
        return self

    def close(self) -> None:
        if not self.ptr:
            return
        _sync_quietly(self.stream)
        rt = _runtime()
        try:
            with _interrupts_deferred():
                ptr, self.ptr = self.ptr, 0
                _track(-self.nbytes)
                t0 = time.perf_counter()
                rt.hostUnregister(ptr)
                self.unregister_s = time.perf_counter() - t0
        finally:
            if self.ledger is not None:
                self.ledger.release(self.nbytes)


class DeviceBuffer(_Owned):
    """``cudaMalloc`` of ``nbytes`` on the current device; ``cudaFree`` on close. Bypasses CuPy's
    memory pool so the memory is really returned when the probe ends."""

    def __init__(self, nbytes: int, *, stream=None):
        self.nbytes = int(nbytes)
        self.stream = stream
        self.ptr = 0

    def open(self) -> "DeviceBuffer":
        if self.ptr:
            return self
        rt = _runtime()
        with _interrupts_deferred():
            self.ptr = rt.malloc(self.nbytes)
        return self

    def close(self) -> None:
        if not self.ptr:
            return
        _sync_quietly(self.stream)
        rt = _runtime()
        with _interrupts_deferred():
            ptr, self.ptr = self.ptr, 0
            rt.free(ptr)


def host_view(ptr: int, nbytes: int):
    """A writable numpy uint8 array over ``nbytes`` of host memory at ``ptr`` (no copy)."""
    import numpy as np

    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr))


def pageable_array(nbytes: int, touch: bool = True):
    """An ordinary (pageable) numpy uint8 buffer, page-aligned so cudaHostRegister can take it,
    with every page touched so first-touch faults stay out of later timings."""
    import numpy as np

    raw = np.empty(nbytes + P.PAGE_BYTES, dtype=np.uint8)
    offset = (-raw.ctypes.data) % P.PAGE_BYTES
    arr = raw[offset:offset + nbytes]
    if touch:
        arr[::P.PAGE_BYTES] = 1
    return arr


# --- timing ---------------------------------------------------------------------------------------

class _EventTimer:
    """Times GPU work on one stream with a pair of CUDA events: warm-up, then one sample per repeat."""

    def __init__(self, cp, stream):
        self.cp = cp
        self.stream = stream
        self.start = cp.cuda.Event()
        self.end = cp.cuda.Event()

    def samples(self, launch: Callable[[], None], repeats: int) -> list[float]:
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


def _wall_samples(fn: Callable[[], None], repeats: int) -> list[float]:
    fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _rate_row(kind: str, memory: str, size_bytes: int, samples: Sequence[float],
              direction: Optional[str] = None, note: Optional[str] = None) -> ProbeMeasurement:
    median_s = statistics.median(samples)
    return ProbeMeasurement(kind=kind, memory=memory, size_bytes=size_bytes, direction=direction,
                            bytes_per_s=(size_bytes / median_s) if median_s > 0 else None,
                            seconds=median_s, repeats=len(samples), note=note)


def _cost_rows(kind: str, memory: str, size_bytes: int, samples: Sequence[float]) -> list[ProbeMeasurement]:
    """The first call and the median of the rest: notes "first" and "steady"."""
    rows = [ProbeMeasurement(kind=kind, memory=memory, size_bytes=size_bytes, seconds=samples[0],
                             repeats=1, note="first")]
    if len(samples) > 1:
        rows.append(ProbeMeasurement(kind=kind, memory=memory, size_bytes=size_bytes,
                                     seconds=statistics.median(samples[1:]),
                                     repeats=len(samples) - 1, note="steady"))
    return rows


def _copy_samples(cp, timer: _EventTimer, host_ptr: int, device_ptr: int, size_bytes: int,
                  direction: str, repeats: int) -> list[float]:
    rt = cp.cuda.runtime
    if direction == "h2d":
        dst, src, kind = device_ptr, host_ptr, getattr(rt, "memcpyHostToDevice", 1)
    elif direction == "d2h":
        dst, src, kind = host_ptr, device_ptr, getattr(rt, "memcpyDeviceToHost", 2)
    else:
        raise ValueError(f"direction must be 'h2d' or 'd2h', not {direction!r}")
    stream_ptr = timer.stream.ptr
    return timer.samples(lambda: rt.memcpyAsync(dst, src, size_bytes, kind, stream_ptr), repeats)


def _read_kernel(cp, device_id: int):
    key = (id(cp), device_id)
    kernel = _read_kernels.get(key)
    if kernel is None:
        kernel = cp.RawKernel(_READ_KERNEL_SRC, "pinmon_read")
        kernel.compile()  # compile errors surface here, not in the middle of a timing loop
        _read_kernels[key] = kernel
    return kernel


def _sm_count(cp, gpu_index: int) -> int:
    try:
        return int(cp.cuda.Device(gpu_index).attributes["MultiProcessorCount"])
    except Exception:  # only sizes the grid; any sane value works
        return 108


# --- the run --------------------------------------------------------------------------------------

class _Stop(Exception):
    pass


class _Run:
    def __init__(self, cp, plan: P.Plan, gpu_index: int, budget: TimeBudget,
                 progress: Optional[Progress], cancel, ledger: PinnedLedger):
        self.cp = cp
        self.plan = plan
        self.gpu_index = gpu_index
        self.budget = budget
        self.progress = progress
        self.cancel = cancel
        self.ledger = ledger
        self.measurements: list[ProbeMeasurement] = []
        self.stop_reason: Optional[str] = None
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
        self.timer = _EventTimer(cp, self.stream)
        self._report("CUDA ready")
        try:
            for group, steps in itertools.groupby(self.plan.steps, key=lambda s: s.group):
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
            _sync_quietly(self.stream)
        self._annotate()

    # buffers of a group
    def _open_group(self, stack: contextlib.ExitStack, group: tuple) -> dict:
        res: dict = {}
        resource, size = group[0], group[1]
        if resource == P.G_NONE:
            return res
        res["device"] = stack.enter_context(DeviceBuffer(size, stream=self.stream))
        if resource == P.G_COPY:
            res["host:pinned"] = stack.enter_context(
                PinnedBuffer(size, P.HOST_ALLOC_FLAGS["pinned"], ledger=self.ledger, stream=self.stream))
            res["host:pageable"] = pageable_array(size)
        elif resource == P.G_PINNED:
            memory = group[2]
            res["host:" + memory] = stack.enter_context(
                PinnedBuffer(size, P.HOST_ALLOC_FLAGS[memory], ledger=self.ledger, stream=self.stream))
            if memory in ("pinned", "write_combined"):
                res["scratch"] = pageable_array(min(P.MODES_CPU_SIZE_BYTES, size))
            if memory == "mapped":
                res["out"] = stack.enter_context(DeviceBuffer(256, stream=self.stream))
        elif resource == P.G_REGISTERED:
            res["host:registered"] = pageable_array(size)
        else:  # pragma: no cover - plan bug
            raise ValueError(f"unknown group resource {resource!r}")
        return res

    def _run_step(self, step: P.Step, res: dict) -> list[ProbeMeasurement]:
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

    def _copy(self, step: P.Step, res: dict) -> ProbeMeasurement:
        host = res["host:" + step.memory]
        device_ptr = res["device"].ptr
        note = None
        if self.plan.kind == "quick" and step.size_bytes < P.QUICK_SIZE_BYTES:
            note = f"capped to {fmt_bytes(step.size_bytes)} by the pinned cap"
        if step.memory == "registered":
            with Registered(host.ctypes.data, step.size_bytes, ledger=self.ledger,
                            stream=self.stream) as reg:
                samples = _copy_samples(self.cp, self.timer, reg.ptr, device_ptr, step.size_bytes,
                                        step.direction, step.repeats)
        else:
            host_ptr = host.ctypes.data if step.memory == "pageable" else host.ptr
            samples = _copy_samples(self.cp, self.timer, host_ptr, device_ptr, step.size_bytes,
                                    step.direction, step.repeats)
        return _rate_row("copy", step.memory, step.size_bytes, samples, step.direction, note)

    def _alloc(self, step: P.Step) -> list[ProbeMeasurement]:
        import numpy as np

        size = step.size_bytes
        alloc_s: list[float] = []
        free_s: list[float] = []
        for _ in range(step.repeats + 1):
            if step.memory == "pinned":
                with PinnedBuffer(size, 0, ledger=self.ledger) as buf:
                    pass
                alloc_s.append(buf.alloc_s)
                free_s.append(buf.free_s)
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
        return _cost_rows("alloc", step.memory, size, alloc_s) + _cost_rows("free", step.memory, size, free_s)

    def _cpu(self, step: P.Step, res: dict) -> ProbeMeasurement:
        import numpy as np

        buf: PinnedBuffer = res["host:" + step.memory]
        n = step.size_bytes
        scratch = res["scratch"][:n]
        view = buf.view(n)
        try:
            if step.op == "cpu_read":
                samples = _wall_samples(lambda: np.copyto(scratch, view), step.repeats)
                note = "numpy copy out of the buffer into ordinary memory"
            else:
                samples = _wall_samples(lambda: np.copyto(view, scratch), step.repeats)
                note = "numpy copy from ordinary memory into the buffer"
        finally:
            del view  # never outlives the buffer
        return _rate_row(step.op, step.memory, n, samples, note=note)

    def _kernel_read(self, step: P.Step, res: dict) -> ProbeMeasurement:
        import numpy as np

        cp = self.cp
        try:
            kernel = _read_kernel(cp, self.gpu_index)
        except Exception as e:  # NVRTC missing or broken: the other modes still mean something
            return ProbeMeasurement(kind="kernel_read", memory=step.memory, size_bytes=step.size_bytes,
                                    note=f"not measured: kernel unavailable ({describe_error(e)})")
        if step.memory == "mapped":
            host_ptr = res["host:mapped"].ptr
            attrs = cp.cuda.runtime.pointerGetAttributes(host_ptr)
            src = int(getattr(attrs, "devicePointer", 0) or host_ptr)
            note = "GPU kernel reading mapped host memory over PCIe (zero-copy)"
        else:
            src = res["device"].ptr
            note = "the same kernel reading device memory"
        out = res["out"].ptr
        n_vec = step.size_bytes // 16
        blocks = max(1, _sm_count(cp, self.gpu_index) * _KERNEL_BLOCKS_PER_SM)
        args = (np.uint64(src), np.uint64(n_vec), np.uint64(out))
        stream = self.stream
        samples = self.timer.samples(
            lambda: kernel((blocks,), (_KERNEL_THREADS,), args, stream=stream), step.repeats)
        return _rate_row("kernel_read", step.memory, step.size_bytes, samples, note=note)

    def _register(self, step: P.Step, res: dict) -> list[ProbeMeasurement]:
        host = res["host:registered"]
        reg_s: list[float] = []
        unreg_s: list[float] = []
        for _ in range(step.repeats):
            with Registered(host.ctypes.data, step.size_bytes, ledger=self.ledger,
                            stream=self.stream) as reg:
                pass
            reg_s.append(reg.register_s)
            unreg_s.append(reg.unregister_s)
        size = step.size_bytes
        return [
            ProbeMeasurement(kind="register", memory="registered", size_bytes=size,
                             seconds=statistics.median(reg_s), repeats=len(reg_s),
                             note=f"cudaHostRegister of an existing numpy buffer; first {_fmt_s(reg_s[0])}"),
            ProbeMeasurement(kind="free", memory="registered", size_bytes=size,
                             seconds=statistics.median(unreg_s), repeats=len(unreg_s),
                             note="cudaHostUnregister"),
        ]

    # notes that compare rows
    def _annotate(self) -> None:
        if self.plan.kind == "alloc":
            self.measurements = annotate_break_even(self.measurements)
        elif self.plan.kind == "modes":
            self.measurements = annotate_modes(self.measurements)


def _fmt_s(seconds: Optional[float]) -> str:
    if seconds is None:
        return "n/a"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} us"


def _find(rows: Iterable[ProbeMeasurement], kind: str, memory: str, size_bytes: Optional[int] = None,
          direction: Optional[str] = None, note: Optional[str] = None) -> Optional[ProbeMeasurement]:
    for m in rows:
        if (m.kind == kind and m.memory == memory
                and (size_bytes is None or m.size_bytes == size_bytes)
                and (direction is None or m.direction == direction)
                and (note is None or m.note == note)):
            return m
    return None


def _add_note(m: ProbeMeasurement, text: str) -> ProbeMeasurement:
    return replace(m, note=f"{m.note}; {text}" if m.note else text)


def break_even_transfers(result, size_bytes: int) -> Optional[float]:
    """How many H2D transfers of ``size_bytes`` before pinning pays for its allocation.

    (pinned alloc + free - pageable alloc - pageable free) / (pageable copy - pinned copy), all
    steady-state medians from an ``alloc`` probe (``result`` is a ProbeResult or a list of
    measurements). 0.0 when the pinned buffer is not dearer to get; ``math.inf`` when a pinned copy
    is not faster, so pinning never pays; None when a needed measurement is missing.
    """
    rows = list(getattr(result, "measurements", result))
    pa = _find(rows, "alloc", "pinned", size_bytes, note="steady")
    pf = _find(rows, "free", "pinned", size_bytes, note="steady")
    ga = _find(rows, "alloc", "pageable", size_bytes, note="steady")
    gf = _find(rows, "free", "pageable", size_bytes, note="steady")
    pc = _find(rows, "copy", "pinned", size_bytes, direction="h2d")
    gc = _find(rows, "copy", "pageable", size_bytes, direction="h2d")
    if None in (pa, pf, ga, pc, gc) or None in (pa.seconds, pf.seconds, ga.seconds, pc.seconds, gc.seconds):
        return None
    extra_s = pa.seconds + pf.seconds - ga.seconds - (gf.seconds if gf is not None and gf.seconds else 0.0)
    saving_s = gc.seconds - pc.seconds
    if extra_s <= 0:
        return 0.0
    if saving_s <= 0:
        return float("inf")
    return extra_s / saving_s


def annotate_break_even(rows: list[ProbeMeasurement]) -> list[ProbeMeasurement]:
    """Add "break_even_transfers=N" to the note of each pinned H2D copy of an alloc probe."""
    out = []
    for m in rows:
        if m.kind == "copy" and m.memory == "pinned" and m.direction == "h2d":
            n = break_even_transfers(rows, m.size_bytes)
            if n is not None:
                text = "break_even_transfers=never (pageable copy not slower)" if n == float("inf") \
                    else f"break_even_transfers={n:.1f}"
                m = _add_note(m, text)
        out.append(m)
    return out


def wc_read_verdict(rows: Sequence[ProbeMeasurement]) -> Optional[str]:
    """What the measured CPU reads of write-combined memory say, or None without both rows."""
    wc = _find(rows, "cpu_read", "write_combined")
    pinned = _find(rows, "cpu_read", "pinned")
    if wc is None or pinned is None or not wc.bytes_per_s or not pinned.bytes_per_s:
        return None
    ratio = wc.bytes_per_s / pinned.bytes_per_s
    if ratio >= WC_READ_PENALTY_RATIO:
        return ("no CPU-read penalty measured (write-combining not honoured here, e.g. in a VM);"
                f" {ratio:.2f}x the read speed of ordinary pinned memory")
    return (f"CPU reads {1 / ratio:.1f}x slower than from ordinary pinned memory"
            " (write-combining honoured: never read this buffer on the CPU)")


def annotate_modes(rows: list[ProbeMeasurement]) -> list[ProbeMeasurement]:
    """Notes that compare the modes rows with each other: the WC read verdict, zero-copy vs device
    reads, registered vs cudaHostAlloc'ed H2D."""
    verdict = wc_read_verdict(rows)
    mapped = _find(rows, "kernel_read", "mapped")
    device = _find(rows, "kernel_read", "device")
    pinned_h2d = _find(rows, "copy", "pinned", direction="h2d")
    out = []
    for m in rows:
        if verdict and m.kind == "cpu_read" and m.memory == "write_combined":
            m = _add_note(m, verdict)
        elif (m.kind == "kernel_read" and m.memory == "mapped" and mapped and device
              and mapped.bytes_per_s and device.bytes_per_s):
            m = _add_note(m, f"device memory reads {device.bytes_per_s / mapped.bytes_per_s:.1f}x faster")
        elif (m.kind == "copy" and m.memory in ("registered", "portable", "write_combined")
              and pinned_h2d and pinned_h2d.bytes_per_s and m.bytes_per_s):
            m = _add_note(m, f"{m.bytes_per_s / pinned_h2d.bytes_per_s:.2f}x default pinned H2D")
        out.append(m)
    return out


# --- entry points ---------------------------------------------------------------------------------

def _init_context(cp, gpu_index: int) -> tuple[float, str]:
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


def run_probe(kind: str = "quick", gpu_index: int = 0, max_pinned_bytes: Optional[int] = None,
              time_budget_s: Optional[float] = None, progress: Optional[Progress] = None,
              cancel: Optional[threading.Event] = None,
              link_theoretical_bytes_per_s: Optional[float] = None,
              effective_mem_limit_bytes: Optional[int] = None) -> ProbeResult:
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

    def result(status: str, reason: Optional[str], rows=(), cap: Optional[int] = None) -> ProbeResult:
        return ProbeResult(time=wall_start, gpu_index=gpu_index, status=status, reason=reason, kind=kind,
                           link_theoretical_bytes_per_s=link_theoretical_bytes_per_s,
                           duration_s=time.perf_counter() - t0, max_pinned_bytes=cap,
                           measurements=tuple(rows))

    cap = pinned_cap(max_pinned_bytes, effective_limit_bytes=effective_mem_limit_bytes)
    if cap.refused:
        return result("unavailable", cap.reason, cap=cap.cap_bytes)
    cp, reason = _import_cupy()
    if cp is None:
        return result("unavailable", reason, cap=cap.cap_bytes)
    if not _PROBE_LOCK.acquire(blocking=False):
        return result("unavailable", "another probe is already running in this process", cap=cap.cap_bytes)
    run: Optional[_Run] = None
    try:
        reason = _device_problem(cp, gpu_index)
        if reason:
            return result("unavailable", reason, cap=cap.cap_bytes)
        plan = P.build_plan(kind, cap.cap_bytes)
        budget_s = P.DEFAULT_TIME_BUDGET_S[kind] if time_budget_s is None else time_budget_s
        budget = TimeBudget(budget_s)
        ledger = PinnedLedger(cap.cap_bytes)
        run = _Run(cp, plan, gpu_index, budget, progress, cancel, ledger)
        with cp.cuda.Device(gpu_index):
            init_s, init_note = _init_context(cp, gpu_index)
            notes = [init_note, *cap.notes, *plan.notes]
            init_row = ProbeMeasurement(kind="init", memory="device", size_bytes=0, seconds=init_s,
                                        repeats=1, note="; ".join(notes))
            run.run(init_row)
        return result("ok", run.stop_reason, run.measurements, cap.cap_bytes)
    except Exception as e:
        text = describe_error(e)
        rows = run.measurements if run is not None else ()
        return result("unavailable", f"CUDA error during the {kind} probe: {text}{_driver_hint(cp, text)}",
                      rows, cap.cap_bytes)
    finally:
        _PROBE_LOCK.release()


def measure_copies(sizes_bytes: Sequence[int], *, memory: str = "pinned",
                   directions: Sequence[str] = ("h2d", "d2h"), repeats: Optional[int] = None,
                   gpu_index: int = 0, max_pinned_bytes: Optional[int] = None) -> list[ProbeMeasurement]:
    """Copy bandwidth exactly as ``run_probe`` times it, for benchmarks: one host buffer of the
    largest size (``memory`` "pinned" or "pageable"), each size in each direction, ``repeats``
    (None: plan.copy_repeats) after one warm-up. Raises on errors, unlike run_probe."""
    if memory not in ("pinned", "pageable"):
        raise ValueError("memory must be 'pinned' or 'pageable'")
    cp, reason = _import_cupy()
    if cp is None:
        raise RuntimeError(reason)
    biggest = max(sizes_bytes)
    cap = pinned_cap(max_pinned_bytes)
    if memory == "pinned" and (cap.refused or biggest > cap.cap_bytes):
        raise RuntimeError(cap.reason or f"{fmt_bytes(biggest)} is over the pinned cap of"
                                          f" {fmt_bytes(cap.cap_bytes)} (pass max_pinned_bytes)")
    with _PROBE_LOCK, cp.cuda.Device(gpu_index):
        stream = cp.cuda.Stream(non_blocking=True)
        timer = _EventTimer(cp, stream)
        rows = []
        with contextlib.ExitStack() as stack:
            device = stack.enter_context(DeviceBuffer(biggest, stream=stream))
            if memory == "pinned":
                host_ptr = stack.enter_context(
                    PinnedBuffer(biggest, 0, ledger=PinnedLedger(cap.cap_bytes), stream=stream)).ptr
                keep = None
            else:
                keep = pageable_array(biggest)
                host_ptr = keep.ctypes.data
            for size in sizes_bytes:
                for d in directions:
                    n = P.copy_repeats(size) if repeats is None else repeats
                    samples = _copy_samples(cp, timer, host_ptr, device.ptr, size, d, n)
                    rows.append(_rate_row("copy", memory, size, samples, d))
            del keep
        return rows
