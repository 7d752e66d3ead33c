"""The PyTorch hooks against a small torch stand-in: pinned tensors (requested vs the power-of-two
block the caching host allocator hands out), host<->device copies pinned or pageable, and the lazy
import hook that waits for the program to import torch."""
import ctypes
import sys
import types

import pytest

from pinmon.trace import hooks_torch
from pinmon.trace.importhook import when_imported
from pinmon.trace.state import TracerState

MIB = 1 << 20


class Storage:
    def __init__(self, n):
        self.buf = ctypes.create_string_buffer(max(n, 1))
        self.n = n

    def nbytes(self):
        return self.n

    def data_ptr(self):
        return ctypes.addressof(self.buf)


class Tensor:
    def __init__(self, nbytes, cuda=False, pinned=False):
        self._storage = Storage(nbytes)
        self.is_cuda = cuda
        self._pinned = pinned
        self.nbytes = nbytes

    def numel(self):
        return self.nbytes

    def element_size(self):
        return 1

    def untyped_storage(self):
        return self._storage

    def is_pinned(self):
        return self._pinned

    def pin_memory(self):
        if self.is_cuda:
            raise RuntimeError("cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned")
        return Tensor(self.nbytes, pinned=True)

    def to(self, device, non_blocking=False):
        return Tensor(self.nbytes, cuda=device == "cuda")

    def cuda(self, non_blocking=False):
        return self if self.is_cuda else Tensor(self.nbytes, cuda=True)

    def cpu(self):
        return Tensor(self.nbytes) if self.is_cuda else self

    def copy_(self, src, non_blocking=False):
        return self


class CudaError(int):
    """``torch._C._cudart.cudaError``: an enum member that ``int()`` reads."""


def make_cudart():
    """``torch._C._cudart``: the runtime calls hand back a cudaError (11: cudaErrorInvalidValue)."""
    cudart = types.ModuleType("torch._C._cudart")
    cudart.registered = {}

    def cudaHostRegister(ptr, size, flags):
        if not ptr or ptr in cudart.registered:
            return CudaError(11)
        cudart.registered[ptr] = size
        return CudaError(0)

    def cudaHostUnregister(ptr):
        return CudaError(0 if cudart.registered.pop(ptr, None) is not None else 11)

    cudart.cudaHostRegister, cudart.cudaHostUnregister = cudaHostRegister, cudaHostUnregister
    return cudart


def make_torch():
    torch = types.ModuleType("torch")
    torch.Tensor = Tensor
    torch.empty = lambda n, pin_memory=False: Tensor(n, pinned=pin_memory)
    torch.zeros = torch.empty
    cudart = make_cudart()
    cuda = types.SimpleNamespace(is_initialized=lambda: True,
                                 host_memory_stats=lambda: {"allocated_bytes.current": torch.held},
                                 cudart=lambda: cudart)
    torch.cuda = cuda
    torch._C = types.SimpleNamespace(_cudart=cudart)
    torch.held = None
    return torch


@pytest.fixture
def torch_state():
    saved = {k: getattr(Tensor, k) for k in ("pin_memory", "to", "cuda", "cpu", "copy_")}
    torch = make_torch()
    st = TracerState()
    hooks_torch.hook(torch, st)
    yield torch, st
    for k, v in saved.items():
        setattr(Tensor, k, v)


def test_pin_memory_rounds_up_to_a_power_of_two(torch_state):
    _torch, st = torch_state
    keep = [Tensor(129 * MIB).pin_memory() for _ in range(3)]
    r = st.report()
    assert r["pinned"]["bytes"] == 3 * 256 * MIB and r["pinned"]["requested_bytes"] == 3 * 129 * MIB
    assert r["pinned"]["rounding_waste_bytes"] == 3 * 127 * MIB
    assert r["call_sites"]["rounding_waste"][0]["site"].startswith("tests/trace/test_hooks_torch.py:")
    del keep
    import gc

    gc.collect()
    assert st.report()["pinned"]["bytes"] == 0  # tensors gone: their blocks are free


def test_the_allocators_own_figure_wins_when_it_has_one(torch_state):
    torch, st = torch_state
    keep = Tensor(3 * MIB).pin_memory()
    torch.held = 8 * MIB  # e.g. cached blocks still held
    r = st.report()
    assert r["pinned"]["bytes"] == 8 * MIB and r["pinned"]["requested_bytes"] == 3 * MIB
    assert r["extra"]["torch_host_memory"]["allocated_bytes.current"] == 8 * MIB
    del keep


def test_factories_with_pin_memory(torch_state):
    torch, st = torch_state
    a = torch.empty(MIB, pin_memory=True)
    b = torch.zeros(MIB)
    assert st.report()["allocs"]["count"] == 1 and a.is_pinned() and not b.is_pinned()


def test_copies_pinned_and_pageable(torch_state):
    _torch, st = torch_state
    pageable = Tensor(4 * MIB)
    pinned = pageable.pin_memory()
    d = pageable.to("cuda")
    pinned.cuda()
    d.cpu()
    d.copy_(pinned)
    pageable.copy_(d)
    pageable.to("cpu")  # same device: not a transfer
    c = st.report()["copies"]
    assert c["h2d"]["pageable"]["bytes"] == 4 * MIB and c["h2d"]["pinned"]["bytes"] == 8 * MIB
    assert c["d2h"]["pageable"]["count"] == 2 and c["d2h"]["pinned"]["count"] == 0


def test_the_originals_exceptions_pass_through(torch_state):
    _torch, st = torch_state
    with pytest.raises(RuntimeError, match="only dense CPU tensors"):
        Tensor(10, cuda=True).pin_memory()
    assert st.report()["allocs"]["count"] == 0


def test_import_hook_waits_for_the_import(tmp_path, monkeypatch):
    (tmp_path / "late_module_xyz.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    when_imported("late_module_xyz", lambda m: seen.append(m.VALUE))
    assert seen == [] and "late_module_xyz" not in sys.modules
    import late_module_xyz

    assert seen == [1]
    assert late_module_xyz.__spec__.loader.__class__.__name__ != "_Loader"  # the real loader is back
    when_imported("late_module_xyz", lambda m: seen.append(2))  # already imported: at once
    assert seen == [1, 2]
    del sys.modules["late_module_xyz"]


def test_cudart_registrations_count_as_registered_memory(torch_state):
    """B6 under the PyTorch hooks: torch.cuda.cudart().cudaHostRegister is registered memory, in the
    pinned bytes; a call that returned an error is not, and unregistering gives it back."""
    torch, st = torch_state
    buf = ctypes.create_string_buffer(32 * MIB)
    ptr = ctypes.addressof(buf)
    cudart = torch.cuda.cudart()
    assert int(cudart.cudaHostRegister(ptr, 32 * MIB, 1)) == 0
    assert int(cudart.cudaHostRegister(ptr, 32 * MIB, 1)) == 11  # already registered: an error, not counted
    assert int(cudart.cudaHostRegister(0, MIB, 0)) == 11
    r = st.report()
    assert r["pinned"]["registered_bytes"] == 32 * MIB and r["pinned"]["bytes"] == 32 * MIB
    assert r["allocs"]["registers"] == 1 and r["hooks"]["torch.cuda.cudart().cudaHostRegister"]
    assert r["call_sites"]["register"][0]["site"].startswith("tests/trace/test_hooks_torch.py:")
    assert int(cudart.cudaHostUnregister(ptr)) == 0 and int(cudart.cudaHostUnregister(ptr)) == 11
    assert st.report()["pinned"]["registered_bytes"] == 0 and st.report()["pinned"]["bytes"] == 0


def test_a_torch_without_cuda_bindings_gets_the_other_hooks():
    from pinmon.trace.wrap import unpatch

    torch = make_torch()
    del torch._C
    st = TracerState()
    hooks_torch.hook(torch, st)
    try:
        assert not any("cudart" in name for name in st.hooks) and st.hooks["torch.Tensor.pin_memory"]
    finally:
        for name in ("pin_memory", "to", "cuda", "cpu", "copy_"):
            unpatch(Tensor, name)
