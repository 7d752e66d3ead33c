"""The Protocols that type CuPy, PyTorch and jax.profiler for the tracer (pinmon/trace/hooks_types.py)
name what those libraries have: the tests' stand-ins have every name listed, and so have the real
libraries where they are installed (CuPy on a GPU machine; PyTorch and JAX wherever they import).
mypy trusts these Protocols, so a name they list that a library lacks would only fail inside a
traced program."""
import contextlib
import inspect
import types

import pytest

from pinmon.trace import hooks_types as H
from tests.protocol_names import members, missing

from .test_hooks_torch import Tensor, make_torch


def cupy_instances(cp) -> list:
    pointer = cp.cuda.alloc_pinned_memory(4096)
    return [(H.CuPy, cp), (H.CupyCuda, cp.cuda), (H.CupyRuntime, cp.cuda.runtime), (H.CupyArray, cp.empty(4)),
            (H.PinnedMemoryPointer, pointer), (H.PinnedMemory, pointer.mem),
            (H.PinnedMemoryPool, cp.get_default_pinned_memory_pool())]


def torch_instances(torch, tensor) -> list:
    return [(H.Torch, torch), (H.Tensor, tensor), (H.UntypedStorage, tensor.untyped_storage()),
            (H.TorchCuda, torch.cuda), (H.TorchC, torch._C), (H.Cudart, torch._C._cudart),
            (H.TorchAutograd, torch.autograd), (H.TorchProfiler, torch.autograd.profiler)]


def fake_torch():
    torch = make_torch()
    torch.cuda.is_initialized = lambda: False
    profiler = types.SimpleNamespace(profile=type("profile", (), {}))
    torch.autograd = types.SimpleNamespace(profiler=profiler)
    return torch


@contextlib.contextmanager
def fake_trace(log_dir):  # jax.profiler.trace's shape: a context manager that also decorates
    yield


def test_every_protocol_is_checked_here(fake_cupy):
    cupy, _ = fake_cupy
    checked = {p for p, _ in cupy_instances(cupy) + torch_instances(fake_torch(), Tensor(8))} | {H.JaxTrace}
    protocols = {c for _, c in inspect.getmembers(H, inspect.isclass) if c.__module__ == H.__name__}
    assert protocols == checked


def test_the_stand_ins_have_every_name(fake_cupy):
    cupy, _ = fake_cupy
    assert missing(cupy_instances(cupy)) == []
    assert missing(torch_instances(fake_torch(), Tensor(8))) == []
    assert missing([(H.JaxTrace, fake_trace("/nonexistent"))]) == []


def test_members_lists_the_underscored_bindings_and_the_dunders_a_protocol_needs():
    assert members(H.TorchC) == ["_cudart"]
    assert members(H.JaxTrace) == ["__call__", "__enter__", "__exit__"]


@pytest.mark.gpu
def test_the_real_cupy_has_every_name():
    import cupy

    assert missing(cupy_instances(cupy)) == []


def test_the_real_torch_has_every_name():
    torch = pytest.importorskip("torch")
    if getattr(torch._C, "_cudart", None) is None:
        pytest.skip("this PyTorch is built without CUDA")
    assert missing(torch_instances(torch, torch.ones(2))) == []


def test_the_real_jax_profiler_trace_has_every_name(tmp_path):
    profiler = pytest.importorskip("jax.profiler")
    assert missing([(H.JaxTrace, profiler.trace(str(tmp_path)))]) == []
