"""A stand-in for ``cupy.cuda``: the pinned memory pool (reuses freed blocks of the same size)."""
import ctypes
import weakref

from . import runtime


class PinnedMemory:
    def __init__(self, size):
        self.size = size
        self.ptr = runtime._raw_host_alloc(size, 0)


class PinnedMemoryPointer:
    def __init__(self, mem, pool):
        self.mem = mem
        self.ptr = mem.ptr
        self._pool = pool
        weakref.finalize(self, pool._give_back, mem)

    def size(self):
        return self.mem.size

    # numpy.ndarray(buffer=...) needs the buffer protocol: expose the bytes through ctypes.
    def __buffer__(self, flags):
        return memoryview((ctypes.c_char * self.mem.size).from_address(self.ptr)).cast("B")


class PinnedMemoryPool:
    def __init__(self):
        self._free = {}
        self._all = []

    def malloc(self, size):
        size = ((int(size) + 511) // 512) * 512 or 512
        blocks = self._free.get(size)
        mem = blocks.pop() if blocks else None
        if mem is None:
            mem = PinnedMemory(size)
            self._all.append(mem)
        return PinnedMemoryPointer(mem, self)

    def _give_back(self, mem):
        self._free.setdefault(mem.size, []).append(mem)

    def n_free_blocks(self):
        return sum(len(v) for v in self._free.values())

    def free_all_blocks(self):
        self._free.clear()


_pool = PinnedMemoryPool()


def alloc_pinned_memory(size):
    return _pool.malloc(size)
