"""A CuPy stand-in for the tracer tests: same Python API shape, "device" arrays live in host memory."""
import numpy

from . import cuda


class _Memory:
    def __init__(self, arr):
        self.ptr = arr.ctypes.data


class ndarray:
    def __init__(self, host):
        self._data = numpy.array(host, copy=True)
        self.nbytes = self._data.nbytes
        self.shape = self._data.shape
        self.dtype = self._data.dtype
        self.data = _Memory(self._data)  # "device" memory is host memory here

    def __iadd__(self, other):
        self._data += other
        return self

    def get(self, stream=None, order="C", out=None, blocking=True):
        if out is not None:
            out[...] = self._data
            return out
        return self._data.copy()

    def set(self, arr, stream=None):
        if arr.shape != self.shape:
            raise ValueError("Shape mismatch")
        self._data[...] = arr


def asarray(a, dtype=None, order=None, *, blocking=False):
    if isinstance(a, ndarray):
        return a
    return ndarray(numpy.asarray(a, dtype=dtype))


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    return ndarray(numpy.array(obj, dtype=dtype))


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    if isinstance(a, ndarray):
        return a.get(stream=stream, order=order, out=out, blocking=blocking)
    return numpy.asarray(a)


def empty(shape, dtype=float):
    return ndarray(numpy.empty(shape, dtype))


def arange(n, dtype=None):
    return ndarray(numpy.arange(n, dtype=dtype))


def get_default_pinned_memory_pool():
    return cuda._pool
