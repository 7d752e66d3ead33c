"""PyTorch hooks: pinned tensors and host<->device tensor copies, once the program imports torch.

Wrapped: ``Tensor.pin_memory``, the factories ``torch.empty/zeros/ones/full/tensor/...`` when called
with ``pin_memory=True``, ``Tensor.to/copy_/cuda/cpu`` when they cross between host and device
(the host side is pinned when ``Tensor.is_pinned()`` says so; it is asked only for such copies), and
``torch.cuda.cudart().cudaHostRegister/cudaHostUnregister`` (PyTorch's own runtime bindings, which
``torch.cuda._pin_memory_utils`` and checkpoint staging call): registered memory. Those return a
``cudaError`` instead of raising, so only a call that returned success (0) is recorded.

PyTorch's caching host allocator rounds every pinned block up to a power of two and keeps freed
blocks cached: a tensor's requested bytes are its storage size, and the bytes held are
``torch.cuda.host_memory_stats()["allocated_bytes.current"]`` where PyTorch has it (2.5+), else
the live tensors' sizes rounded up. Not seen: pinning done inside C++ (e.g. a DataLoader's
``pin_memory=True`` pins through ``Tensor.pin_memory``, which is seen; custom extensions are not).
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, SupportsInt

from .state import TORCH, TracerState, next_pow2
from .wrap import guard, patch

if TYPE_CHECKING:
    from .hooks_types import Cudart, Tensor, Torch, TorchC

FACTORIES = ("empty", "zeros", "ones", "full", "tensor", "rand", "randn", "randint", "arange",
             "empty_strided", "empty_like", "zeros_like", "ones_like", "full_like", "as_tensor")

TensorFn = Callable[..., "Tensor"]


def _nbytes(t: Tensor) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except Exception:
        return int(t.nbytes)


def hook(torch: Torch, state: TracerState) -> None:
    from .callsite import skip_package

    skip_package(torch)
    st = state
    tensor_class = torch.Tensor
    # Block addresses handed out before: the caching allocator hands the same block out again, and
    # that reuse is no new cudaHostAlloc (bounded: an address seen once is cheap to forget).
    seen_blocks: set[int] = set()
    # Under torch.compile the wrappers are traced too: bookkeeping (a lock, dict updates) would
    # break the graph, so it is skipped while compiling (compiled code is not traced anyway).
    # torch.compiler: PyTorch 2.1 and later.
    is_compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling", None) or _never

    def record_pinned(t: Tensor) -> None:
        try:
            if is_compiling():
                return
            requested = _nbytes(t)
            ptr = int(t.untyped_storage().data_ptr())
            fresh = ptr not in seen_blocks
            if fresh:
                if len(seen_blocks) > 100_000:
                    seen_blocks.clear()
                seen_blocks.add(ptr)
            st.record_alloc(ptr, next_pow2(requested), TORCH, requested=requested, fresh=fresh)
            # The block goes back to the caching allocator when the storage dies; a tensor is the
            # handle we can watch (views keep the storage: a finalizer on the tensor can fire early).
            weakref.finalize(t, st.record_free, ptr)
        except Exception:
            pass

    def make_pin(orig: TensorFn) -> TensorFn:
        def pin_memory(self: Tensor, *a: object, **k: object) -> Tensor:
            if guard.on:
                return orig(self, *a, **k)
            out = orig(self, *a, **k)
            if out is not self:
                record_pinned(out)
            return out
        return pin_memory

    def make_factory(orig: TensorFn) -> TensorFn:
        def factory(*a: object, **k: object) -> Tensor:
            out = orig(*a, **k)
            if k.get("pin_memory"):
                record_pinned(out)
            return out
        return factory

    def host_kind(t: Tensor) -> str | None:
        try:
            return TORCH if t.is_pinned() else None
        except Exception:
            return None

    def crossing(src: Tensor, dst: Tensor) -> None:
        """Record a copy from tensor ``src`` to tensor ``dst`` if exactly one side is on a GPU."""
        try:
            if src.is_cuda == dst.is_cuda or is_compiling():
                return
            if dst.is_cuda:
                st.record_copy("h2d", _tensor_bytes(dst), host_kind(src))
            else:
                st.record_copy("d2h", _tensor_bytes(dst), host_kind(dst))
        except Exception:
            pass

    def make_to(orig: TensorFn) -> TensorFn:
        def to(self: Tensor, *a: object, **k: object) -> Tensor:
            out = orig(self, *a, **k)
            if out is not self and not guard.on:
                crossing(self, out)
            return out
        return to

    def make_copy(orig: TensorFn) -> TensorFn:
        def copy_(self: Tensor, src: Tensor, *a: object, **k: object) -> Tensor:
            out = orig(self, src, *a, **k)
            if not guard.on:
                crossing(src, self)
            return out
        return copy_

    def make_register(orig: Callable[..., SupportsInt]) -> Callable[..., SupportsInt]:
        def cudaHostRegister(ptr: int, size: int, flags: int, *a: object, **k: object) -> SupportsInt:
            err = orig(ptr, size, flags, *a, **k)
            try:
                if int(err) == 0:  # cudaSuccess: PyTorch hands the error back, it does not raise
                    st.record_register(int(ptr), int(size))
            except Exception:
                pass
            return err
        return cudaHostRegister

    def make_unregister(orig: Callable[..., SupportsInt]) -> Callable[..., SupportsInt]:
        def cudaHostUnregister(ptr: int, *a: object, **k: object) -> SupportsInt:
            err = orig(ptr, *a, **k)
            try:
                if int(err) == 0:
                    st.record_unregister(int(ptr))
            except Exception:
                pass
            return err
        return cudaHostUnregister

    for name, make in (("pin_memory", make_pin), ("to", make_to), ("cuda", make_to), ("cpu", make_to),
                       ("copy_", make_copy)):
        st.record_hook(f"torch.Tensor.{name}", patch(tensor_class, name, make))
    for name in FACTORIES:
        st.record_hook(f"torch.{name}", patch(torch, name, make_factory))
    # torch.cuda.cudart() is this module (torch._C._cudart); asking for it through torch.cuda would
    # initialise CUDA, which the hooks must not do. A build without CUDA has none.
    bindings: TorchC | None = getattr(torch, "_C", None)
    cudart: Cudart | None = getattr(bindings, "_cudart", None)
    if cudart is not None:
        st.record_hook("torch.cuda.cudart().cudaHostRegister", patch(cudart, "cudaHostRegister", make_register))
        st.record_hook("torch.cuda.cudart().cudaHostUnregister",
                       patch(cudart, "cudaHostUnregister", make_unregister))

    def host_memory_stats() -> Mapping[str, int] | None:
        """PyTorch's caching host allocator's statistics (2.5 and later), once CUDA is initialised."""
        cuda = getattr(torch, "cuda", None)
        stats_fn: Callable[[], Mapping[str, int]] | None = getattr(cuda, "host_memory_stats", None)
        if stats_fn is None or cuda is None or not cuda.is_initialized():
            return None
        return stats_fn()

    def held_bytes() -> int | None:
        stats = host_memory_stats()
        value = None if stats is None else stats.get("allocated_bytes.current")
        return int(value) if value is not None else None

    def stats() -> dict:
        s = host_memory_stats()
        if s is None:
            return {}
        keys = ("allocated_bytes.current", "allocated_bytes.peak", "active_bytes.current",
                "allocations.current", "num_host_alloc", "num_host_free")
        return {k: s[k] for k in keys if k in s}

    st.held_override[TORCH] = held_bytes
    st.extra["torch_host_memory"] = stats


def _never() -> bool:
    return False


def _tensor_bytes(t: Tensor) -> int:
    return int(t.numel()) * int(t.element_size())
