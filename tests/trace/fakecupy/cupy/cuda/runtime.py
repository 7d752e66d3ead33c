"""A stand-in for ``cupy.cuda.runtime``: host memory from ctypes, "device" memory too."""
import ctypes

memcpyHostToHost, memcpyHostToDevice, memcpyDeviceToHost, memcpyDeviceToDevice, memcpyDefault = 0, 1, 2, 3, 4
hostAllocDefault, hostAllocPortable, hostAllocMapped, hostAllocWriteCombined = 0, 1, 2, 4


class CUDARuntimeError(RuntimeError):
    pass


_host = {}
_device = {}
calls = {}
fail_next = set()


def _call(name):
    calls[name] = calls.get(name, 0) + 1
    if name in fail_next:
        fail_next.discard(name)
        raise CUDARuntimeError(f"cudaErrorMemoryAllocation: {name} failed")


def hostAlloc(size, flags):
    _call("hostAlloc")
    return _raw_host_alloc(size, flags)


def _raw_host_alloc(size, flags):
    """What CuPy's compiled code calls (a cimport, which Python-level hooks do not see)."""
    buf = ctypes.create_string_buffer(max(int(size), 1))
    ptr = ctypes.addressof(buf)
    _host[ptr] = (buf, flags)
    return ptr


def freeHost(ptr):
    _call("freeHost")
    if ptr not in _host:
        raise CUDARuntimeError("cudaErrorInvalidValue: invalid argument")
    del _host[ptr]


def hostRegister(ptr, size, flags):
    _call("hostRegister")


def hostUnregister(ptr):
    _call("hostUnregister")


def malloc(size):
    _call("malloc")
    buf = ctypes.create_string_buffer(max(int(size), 1))
    _device[ctypes.addressof(buf)] = buf
    return ctypes.addressof(buf)


def free(ptr):
    _device.pop(ptr, None)


def memcpy(dst, src, size, kind):
    _call("memcpy")
    _raw_memcpy(dst, src, size, kind)


def _raw_memcpy(dst, src, size, kind):
    if kind not in (0, 1, 2, 3, 4):
        raise CUDARuntimeError("cudaErrorInvalidMemcpyDirection")
    ctypes.memmove(dst, src, size)


def memcpyAsync(dst, src, size, kind, stream):
    _call("memcpyAsync")
    _raw_memcpy(dst, src, size, kind)
