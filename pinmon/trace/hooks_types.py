"""The parts of CuPy and PyTorch the tracer's hooks use, as typing Protocols: the type of the ``cupy``
and ``torch`` modules the import hook hands to ``hooks_cupy.hook`` and ``hooks_torch.hook``, and of
the objects they read (pinned memory, arrays, tensors, storages); and of the profiler sessions the
CUPTI engine steps aside for (``torch.autograd.profiler.profile``, ``jax.profiler.trace``).

Neither library ships types the tracer could rely on (CuPy has none; PyTorch's are the program's, of
whatever version it has), and tests pass stand-ins (tests/trace/fakecupy, the torch stand-in of
tests/trace/test_hooks_torch.py). Protocols name what any such module must have, and are read by
the type checker only: the hooks call the libraries exactly as untyped code would, which matters on
paths that run on every copy. The one place each module comes in untyped is the import hook
(``pinmon.trace.install``): from there on it is ``CuPy`` or ``Torch``.

Names and signatures are the libraries' own: CuPy's ``cupy_backends/cuda/api/runtime.pyx`` (pointers
and sizes are ``intptr_t`` and ``size_t``, so ints), ``cupy/cuda/pinned_memory.pyx`` and
``cupy/_creation/from_data.py``; PyTorch's ``torch/_C/__init__.pyi`` and ``torch/csrc/cuda/shared/cudart.cpp``.
The functions the hooks wrap by name are listed too, with the parameters the wrappers read. A name
an older release lacks is looked up with ``getattr`` where it is used (``host_memory_stats``, before
PyTorch 2.5; ``torch.compiler``, before 2.1). tests/trace/test_hooks_types.py checks that the stand-ins,
and on a GPU machine the real libraries, have every name listed.
"""
from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Protocol, SupportsInt

# --- CuPy -----------------------------------------------------------------------------------------


class PinnedMemory(Protocol):
    """``cupy.cuda.PinnedMemory``: one pinned allocation (a pool block holds one)."""

    @property
    def size(self) -> int: ...


class PinnedMemoryPointer(Protocol):
    """``cupy.cuda.PinnedMemoryPointer``: what ``alloc_pinned_memory`` hands out."""

    @property
    def ptr(self) -> int: ...

    @property
    def mem(self) -> PinnedMemory: ...


class PinnedMemoryPool(Protocol):
    """``cupy.cuda.PinnedMemoryPool``."""

    def n_free_blocks(self) -> int: ...


class CupyArray(Protocol):
    """``cupy.ndarray``; ``get`` and ``set`` are wrapped."""

    @property
    def nbytes(self) -> int: ...

    def get(self, stream: object = None, order: str = "C", out: object = None, blocking: bool = True) -> object: ...

    def set(self, arr: object, stream: object = None) -> None: ...


class CupyRuntime(Protocol):
    """``cupy.cuda.runtime``: every function here is wrapped; a CUDA error raises ``CUDARuntimeError``."""

    def hostAlloc(self, size: int, flags: int) -> int: ...

    def freeHost(self, ptr: int) -> None: ...

    def hostRegister(self, ptr: int, size: int, flags: int) -> None: ...

    def hostUnregister(self, ptr: int) -> None: ...

    def memcpy(self, dst: int, src: int, size: int, kind: int) -> None: ...

    def memcpyAsync(self, dst: int, src: int, size: int, kind: int, stream: int) -> None: ...


class CupyCuda(Protocol):
    """``cupy.cuda``; ``alloc_pinned_memory`` is wrapped."""

    @property
    def runtime(self) -> CupyRuntime: ...

    def alloc_pinned_memory(self, size: int) -> PinnedMemoryPointer: ...


class CuPy(Protocol):
    """The ``cupy`` module; ``asarray``, ``array`` and ``asnumpy`` are wrapped."""

    @property
    def cuda(self) -> CupyCuda: ...

    @property
    def ndarray(self) -> type[CupyArray]: ...

    def get_default_pinned_memory_pool(self) -> PinnedMemoryPool: ...

    def asarray(self, a: object, dtype: object = None, order: str | None = None) -> CupyArray: ...

    def array(self, obj: object, dtype: object = None, copy: bool = True, order: str = "K", subok: bool = False,
              ndmin: int = 0) -> CupyArray: ...

    def asnumpy(self, a: object, stream: object = None, order: str = "C", out: object = None) -> object: ...


# --- PyTorch --------------------------------------------------------------------------------------


class UntypedStorage(Protocol):
    """``torch.UntypedStorage``: the memory under a tensor (a pinned block, for a pinned tensor)."""

    def nbytes(self) -> int: ...

    def data_ptr(self) -> int: ...


class Tensor(Protocol):
    """``torch.Tensor``; ``pin_memory``, ``to``, ``cuda``, ``cpu`` and ``copy_`` are wrapped."""

    @property
    def is_cuda(self) -> bool: ...

    @property
    def nbytes(self) -> int: ...

    def is_pinned(self) -> bool: ...

    def untyped_storage(self) -> UntypedStorage: ...

    def numel(self) -> int: ...

    def element_size(self) -> int: ...

    def pin_memory(self) -> Tensor: ...

    def to(self, *args: object, **kwargs: object) -> Tensor: ...

    def cuda(self, device: object = None, non_blocking: bool = False) -> Tensor: ...

    def cpu(self) -> Tensor: ...

    def copy_(self, src: Tensor, non_blocking: bool = False) -> Tensor: ...


class TorchCuda(Protocol):
    """``torch.cuda`` (``host_memory_stats``: PyTorch 2.5 and later, looked up where used)."""

    def is_initialized(self) -> bool: ...

    def host_memory_stats(self) -> dict[str, int]: ...


class Cudart(Protocol):
    """``torch._C._cudart``, what ``torch.cuda.cudart()`` returns: the CUDA runtime calls hand back a
    ``cudaError`` (an enum ``int()`` reads; 0 is success) instead of raising. Both are wrapped."""

    def cudaHostRegister(self, ptr: int, size: int, flags: int) -> SupportsInt: ...

    def cudaHostUnregister(self, ptr: int) -> SupportsInt: ...


class TorchC(Protocol):
    """``torch._C``: only its CUDA runtime bindings (absent in a build without CUDA)."""

    @property
    def _cudart(self) -> Cudart: ...


class TorchProfiler(Protocol):
    """``torch.autograd.profiler``: ``profile``, the class torch.profiler and the legacy API drive Kineto
    through (its ``_prepare_trace`` or ``__enter__``, and ``__exit__``, are wrapped)."""

    @property
    def profile(self) -> type: ...


class TorchAutograd(Protocol):
    @property
    def profiler(self) -> TorchProfiler: ...


class JaxTrace(Protocol):
    """What ``jax.profiler.trace(log_dir)`` returns: a context manager that also decorates a function.
    ``jax.profiler``'s ``start_trace``, ``stop_trace`` and ``trace`` are wrapped (``engine_cupti``)."""

    def __enter__(self) -> object: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None: ...

    def __call__(self, fn: Callable[..., object]) -> Callable[..., object]: ...


class Torch(Protocol):
    """The ``torch`` module; the factories of ``hooks_torch.FACTORIES`` (``torch.empty``...) are wrapped."""

    @property
    def Tensor(self) -> type[Tensor]: ...

    @property
    def cuda(self) -> TorchCuda: ...

    @property
    def autograd(self) -> TorchAutograd: ...
