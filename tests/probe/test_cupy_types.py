"""The Protocols that type CuPy for the probe (pinmon/probe/cupy_types.py) name what CuPy has: the
tests' stand-in has every name they list, and so has the real CuPy on a GPU machine. mypy trusts
these Protocols, so a name they list that CuPy lacks would only fail on a GPU."""
import inspect

import pytest

from pinmon.probe import cupy_types as T
from tests.fakes.fake_cupy import make_fake_cupy

KERNEL_SRC = 'extern "C" __global__ void pinmon_nothing() {}'

# The stand-in has no pci_bus_id, as an old CuPy may not: cuda.cuda_devices() then reports no bus
# id (tests/cli/commands/test_probe.py gives the stand-in one where a test needs it).
FAKE_LEAVES_OUT = {"CudaDevice.pci_bus_id"}


def members(protocol: type) -> list[str]:
    """The names a Protocol class lists: its methods, properties and attributes."""
    names = set(getattr(protocol, "__annotations__", {}))
    for name, value in vars(protocol).items():
        if (callable(value) or isinstance(value, property)) and (
                not name.startswith("_") or name in ("__call__", "__enter__", "__exit__")):
            names.add(name)
    return sorted(names)


def instances(cp):
    """(Protocol, an object CuPy gives for it) for every Protocol of cupy_types."""
    rt = cp.cuda.runtime
    ptr = rt.hostAlloc(4096, 2)  # mapped, so it has attributes to ask for
    try:
        attrs = rt.pointerGetAttributes(ptr)
    finally:
        rt.freeHost(ptr)
    return [(T.CuPy, cp), (T.CudaModule, cp.cuda), (T.CudaRuntime, rt),
            (T.PointerAttributes, attrs), (T.CudaStream, cp.cuda.Stream(non_blocking=True)),
            (T.CudaEvent, cp.cuda.Event()), (T.CudaDevice, cp.cuda.Device(0)),
            (T.Kernel, cp.RawKernel(KERNEL_SRC, "pinmon_nothing"))]


def missing(cp) -> list[str]:
    return [f"{protocol.__name__}.{name}" for protocol, obj in instances(cp)
            for name in members(protocol) if not hasattr(obj, name)]


def test_every_protocol_is_checked_here():
    protocols = {c for _, c in inspect.getmembers(T, inspect.isclass) if c.__module__ == T.__name__}
    assert protocols == {p for p, _ in instances(make_fake_cupy())}


def test_members_lists_methods_and_properties():
    assert members(T.CudaStream) == ["ptr", "synchronize"]
    assert "__call__" in members(T.Kernel) and "__enter__" in members(T.CudaDevice)


def test_the_stand_in_has_every_name_the_protocols_list():
    assert set(missing(make_fake_cupy())) == FAKE_LEAVES_OUT


@pytest.mark.gpu
def test_the_real_cupy_has_every_name_the_protocols_list():
    import cupy

    with cupy.cuda.Device(0):
        assert missing(cupy) == []
