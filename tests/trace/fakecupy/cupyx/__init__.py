"""A stand-in for ``cupyx.empty_pinned/zeros_pinned`` (numpy arrays over pinned pool memory)."""
import ctypes

import numpy
from cupy import cuda


def empty_pinned(shape, dtype=float):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = int(numpy.prod(shape)) * numpy.dtype(dtype).itemsize
    mem = cuda.alloc_pinned_memory(nbytes)
    buf = (ctypes.c_char * max(nbytes, 1)).from_address(mem.ptr)
    out = numpy.frombuffer(buf, dtype=dtype, count=int(numpy.prod(shape))).reshape(shape)
    out_holder[id(out)] = mem  # keep the pool block alive as long as the test needs it
    return out


def zeros_pinned(shape, dtype=float):
    out = empty_pinned(shape, dtype)
    out[...] = 0
    return out


out_holder = {}
