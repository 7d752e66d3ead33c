"""The part of CuPy the probe uses, as typing Protocols: the type of the ``cp`` the probe passes
around, of ``cp.cuda.runtime`` and of the streams, events, devices and kernels it makes.

CuPy ships no type information, so without these every CUDA call would be ``Any``. These Protocols
list only the names pinmon calls, with CuPy's real signatures (``cupy_backends/cuda/api/runtime.pyx``:
pointers and sizes are ``intptr_t`` and ``size_t``, so ints; ``cupy/cuda/stream.pyx``,
``device.pyx``, ``_core/raw.pyx``). ``cuda.import_cupy`` and ``cuda.runtime`` are the one place CuPy
is imported; each hands the untyped module on as ``CuPy`` or ``CudaRuntime``, so ``Any`` stops there.

Why Protocols, not stub files or a wrapper:
- the probe hands the CuPy module on as a value (``cp``), so a test's stand-in (tests/fakes/fake_cupy.py)
  or another CuPy can take its place. A stub (``typings/cupy/*.pyi``) types ``import cupy``, but a
  function parameter cannot be annotated with a module; only a Protocol can name what a module value
  must have, and mypy checks modules and objects against it alike.
- a typed wrapper would put one more Python call inside every timed region, between the two CUDA
  events (the cost ``cuda``'s docstring gives: about 1.5 us a call, on copies of a few microseconds
  at a sweep's small sizes). A Protocol is read by the type checker only: at run time the probe
  calls CuPy exactly as it would untyped.

The classes are never instantiated nor checked at run time (``tests/probe/test_cupy_types.py``
checks that the stand-in, and on a GPU machine the real CuPy, has every name listed here).
"""
from __future__ import annotations

from typing import Protocol, TextIO


class PointerAttributes(Protocol):
    """``cudaPointerGetAttributes``' answer (``cupy_backends.cuda.api.runtime.PointerAttributes``)."""

    @property
    def devicePointer(self) -> int: ...


class CudaRuntime(Protocol):
    """``cupy.cuda.runtime``: CUDA runtime calls; a CUDA error raises ``CUDARuntimeError``."""

    @property
    def memcpyHostToDevice(self) -> int: ...

    @property
    def memcpyDeviceToHost(self) -> int: ...

    def getDeviceCount(self) -> int: ...

    def driverGetVersion(self) -> int: ...

    def runtimeGetVersion(self) -> int: ...

    def setDevice(self, device: int) -> None: ...

    def deviceGetPCIBusId(self, device: int) -> str: ...

    def malloc(self, size: int) -> int: ...

    def free(self, ptr: int) -> None: ...

    def hostAlloc(self, size: int, flags: int) -> int: ...

    def freeHost(self, ptr: int) -> None: ...

    def hostRegister(self, ptr: int, size: int, flags: int) -> None: ...

    def hostUnregister(self, ptr: int) -> None: ...

    def memcpyAsync(self, dst: int, src: int, size: int, kind: int, stream: int) -> None: ...

    def pointerGetAttributes(self, ptr: int) -> PointerAttributes: ...


class CudaStream(Protocol):
    """``cupy.cuda.Stream``: ``ptr`` is the ``cudaStream_t`` as an integer."""

    @property
    def ptr(self) -> int: ...

    def synchronize(self) -> None: ...


class CudaEvent(Protocol):
    """``cupy.cuda.Event``."""

    def record(self, stream: CudaStream | None = None) -> None: ...

    def synchronize(self) -> None: ...


class CudaDevice(Protocol):
    """``cupy.cuda.Device``: a with block makes it the current device and restores the one before."""

    @property
    def pci_bus_id(self) -> str: ...

    @property
    def attributes(self) -> dict[str, int]: ...

    def __enter__(self) -> CudaDevice: ...

    def __exit__(self, *exc: object) -> None: ...


class Kernel(Protocol):
    """``cupy.RawKernel``: compiled on ``compile()`` (or its first launch), launched by calling it."""

    def compile(self, log_stream: TextIO | None = None) -> None: ...

    def __call__(self, grid: tuple[int, ...], block: tuple[int, ...], args: tuple[object, ...], *,
                 shared_mem: int = 0, stream: CudaStream | None = None) -> None: ...


class CudaModule(Protocol):
    """``cupy.cuda``."""

    @property
    def runtime(self) -> CudaRuntime: ...

    def Stream(self, null: bool = False, non_blocking: bool = False, ptds: bool = False) -> CudaStream: ...

    def Event(self, block: bool = False, disable_timing: bool = False,
              interprocess: bool = False) -> CudaEvent: ...

    def Device(self, device: int | None = None) -> CudaDevice: ...

    def get_elapsed_time(self, start_event: CudaEvent, end_event: CudaEvent) -> float:
        """Milliseconds between two recorded events."""
        ...


class CuPy(Protocol):
    """The ``cupy`` module."""

    @property
    def cuda(self) -> CudaModule: ...

    def RawKernel(self, code: str, name: str, options: tuple[str, ...] = (),
                  backend: str = "nvrtc") -> Kernel: ...
