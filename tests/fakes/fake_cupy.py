"""A CuPy stand-in for the probe: its "device" is host memory, its events read the host clock, and it
keeps the books (what is allocated, registered, pinned at the peak) so tests can prove every buffer
was freed. ``fail_at`` makes the n-th call of a runtime function raise a CUDA error."""
import ctypes
import time
import types

from pinmon.probe.buffers import held_pinned_bytes


class FakeCUDARuntimeError(RuntimeError):
    pass


FakeCUDARuntimeError.__name__ = "CUDARuntimeError"


class FakeRuntime:
    memcpyHostToDevice = 1
    memcpyDeviceToHost = 2
    hostAllocDefault, hostAllocPortable, hostAllocMapped, hostAllocWriteCombined = 0, 1, 2, 4
    CUDARuntimeError = FakeCUDARuntimeError

    def __init__(self):
        self.device_count = 1
        self.host: dict = {}
        self.device: dict = {}
        self.registered: dict = {}
        self.pinned_now = 0
        self.pinned_peak = 0
        self.fail_at: dict = {}  # call name -> fail on this call number (1-based)
        self.calls: dict = {}
        self.count_error = None

    def _call(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.fail_at.get(name) == self.calls[name]:
            raise FakeCUDARuntimeError("cudaErrorMemoryAllocation: out of memory")

    def _pin(self, n):
        self.pinned_now += n
        self.pinned_peak = max(self.pinned_peak, self.pinned_now)

    def getDeviceCount(self):
        if self.count_error:
            raise FakeCUDARuntimeError(self.count_error)
        return self.device_count

    # CUDA's version numbers (1000 * major + 10 * minor); a driver of 0 is CUDA's "no driver".
    driver_version = 13000
    runtime_version = 13000

    def driverGetVersion(self):
        return self.driver_version

    def runtimeGetVersion(self):
        return self.runtime_version

    def setDevice(self, i):
        self._call("setDevice")

    def deviceGetPCIBusId(self, i):
        return "0000:00:06.0"

    def malloc(self, n):
        self._call("malloc")
        buf = ctypes.create_string_buffer(n)
        ptr = ctypes.addressof(buf)
        self.device[ptr] = buf
        return ptr

    def free(self, ptr):
        self._call("free")
        if ptr:
            del self.device[ptr]

    def hostAlloc(self, n, flags):
        self._call("hostAlloc")
        buf = ctypes.create_string_buffer(n)
        ptr = ctypes.addressof(buf)
        self.host[ptr] = (buf, n, flags)
        self._pin(n)
        return ptr

    def freeHost(self, ptr):
        self._call("freeHost")
        _, n, _ = self.host.pop(ptr)
        self.pinned_now -= n

    def hostRegister(self, ptr, n, flags):
        self._call("hostRegister")
        assert ptr % 4096 == 0, "registered buffers are page-aligned"
        self.registered[ptr] = n
        self._pin(n)

    def hostUnregister(self, ptr):
        self._call("hostUnregister")
        self.pinned_now -= self.registered.pop(ptr)

    def memcpyAsync(self, dst, src, n, kind, stream):
        self._call("memcpyAsync")
        assert kind in (1, 2)
        ctypes.memmove(dst, src, n)

    def pointerGetAttributes(self, ptr):
        assert ptr in self.host
        return types.SimpleNamespace(device=0, devicePointer=ptr, hostPointer=ptr, type=1)


def make_fake_cupy(compile_error=None):
    rt = FakeRuntime()

    class Event:
        def __init__(self, *a, **k):
            self.t = None

        def record(self, stream=None):
            self.t = time.perf_counter()
            return self

        def synchronize(self):
            pass

    class Stream:
        def __init__(self, null=False, non_blocking=False, ptds=False):
            assert non_blocking
            self.ptr = 12345

        def synchronize(self):
            pass

    class Device:
        def __init__(self, i=0):
            self.id = i
            self.attributes = {"MultiProcessorCount": 4}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def use(self):
            pass

    class RawKernel:
        def __init__(self, code, name, options=()):
            self.code, self.name = code, name
            self.launches = 0

        def compile(self, log_stream=None):
            if compile_error:
                raise RuntimeError(compile_error)

        def __call__(self, grid, block, args, **kwargs):
            assert len(args) == 3 and "stream" in kwargs
            self.launches += 1

    cp = types.ModuleType("cupy")
    cp.cuda = types.SimpleNamespace(runtime=rt, Event=Event, Stream=Stream, Device=Device,
                                    get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3)
    cp.RawKernel = RawKernel
    return cp


def assert_all_freed(rt):
    assert rt.host == {}, "pinned buffers left allocated"
    assert rt.registered == {}, "buffers left registered"
    assert rt.device == {}, "device buffers left allocated"
    assert rt.pinned_now == 0
    assert held_pinned_bytes() == 0
