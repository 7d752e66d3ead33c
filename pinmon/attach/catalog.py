"""Every libcuda entry point pinmon probes and what its arguments mean.

One ``Entry`` per exported function: its kind (what a call of it is: a copy one way, a copy whose way
the pointers tell, a copy between devices, a host allocation...) and the arguments its probe fetches,
each named. ``probes.py`` renders them for an architecture (``arch.py``), ``calls.py`` turns a fired
event's fields back into a call. Only functions the library exports are probed (``symbols.py``).

Sources: the CUDA driver API's prototypes (``cuda.h``), declared again in the stand-in library of the
tests (``tests/attach/standin_libcuda.c``). Per-thread-default-stream variants share their base's
arguments: ``_ptds`` for synchronous calls, ``_ptsz`` for asynchronous ones. The legacy functions
without ``_v2`` (the API before CUDA 3.2) take 32-bit sizes and device pointers, read as ``u32``.

2D and 3D copies pass a descriptor; its fields are fetched through the pointer (``+OFFSET(reg)``).
Offsets on LP64 (x86-64 and aarch64 alike), from the structures' field order and C's alignment rules
(``tests/attach/test_catalog.py`` compiles the same declarations with gcc and compares):

| descriptor | srcMemoryType | srcHost | srcDevice | dstMemoryType | dstHost | dstDevice | WidthInBytes | Height | Depth |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| ``CUDA_MEMCPY2D`` (v2) | 16 | 24 | 32 | 72 | 80 | 88 | 112 | 120 | |
| ``CUDA_MEMCPY3D`` (v2) and ``CUDA_MEMCPY3D_PEER`` | 32 | 40 | 48 | 120 | 128 | 136 | 176 | 184 | 192 |
| ``CUDA_MEMCPY2D_v1`` (32-bit fields) | 8 | 16 | 24 | 52 | 56 | 64 | 84 | 88 | |
| ``CUDA_MEMCPY3D_v1`` (32-bit fields) | 16 | 24 | 32 | 80 | 88 | 96 | 128 | 132 | 136 |

A side whose memory type is host (1) is host memory at ``srcHost``/``dstHost``; device (2) and array
(3) are the GPU's; unified (4) is a pointer at ``srcDevice``/``dstDevice`` whose kind the process's
mappings tell, as for ``cuMemcpy``. Bytes are ``WidthInBytes x Height (x Depth)``.

Batches (``cuMemcpyBatchAsync``, CUDA 12.8+): the count is an argument, and the first
``BATCH_FETCHED`` destinations, sources and sizes are fetched element by element through the array
pointers (``+8*i(reg)``), so a batch's probe has the nine 64-bit slots of every other call and shares
its event; a longer batch's other copies are counted but their bytes are not known. 3D batches and
``cuMemcpy3DWithAttributesAsync`` are counted (operations), their bytes not.

No function is probed on its return: an allocation's new mapping is looked for when its entry event
is read (``classify.ProcessMemory.allocated``), by which time the call has returned in practice.
"""
from __future__ import annotations

from dataclasses import dataclass

# What a call is.
COPY = "copy"                # one way, host pointer and size are arguments
UNIFIED = "unified"          # cuMemcpy: the way from the pointers
DEVICE = "device"            # device or array to device or array
PEER = "peer"                # between two contexts' devices
DESC2D = "desc2d"            # a CUDA_MEMCPY2D descriptor
DESC3D = "desc3d"            # a CUDA_MEMCPY3D descriptor
DESC3D_PEER = "desc3d_peer"  # a CUDA_MEMCPY3D_PEER descriptor (device to device counts as peer)
BATCH = "batch"              # cuMemcpyBatchAsync: arrays of pointers and sizes
BATCH_OPS = "batch_ops"      # 3D batches: a count of operations only
ALLOC = "alloc"              # a pinned host allocation
REGISTER = "register"        # cuMemHostRegister
UNREGISTER = "unregister"
FREE = "free"                # cuMemFreeHost

DESC_KINDS = frozenset({DESC2D, DESC3D, DESC3D_PEER})
# A descriptor's fields as its probes fetch them, in this order (probes.py, calls.py).
DESC_FIELDS = ("st", "sh", "sd", "dt", "dh", "dd", "w", "h", "d")
# Host-memory calls: they change what a pointer is, so they are applied in the order they ran.
HOST_KINDS = frozenset({ALLOC, REGISTER, UNREGISTER, FREE})

# Copies of a batch whose pointers and size are fetched: with its count, 1 + 3 x 2 of the call
# event's nine slots.
BATCH_FETCHED = 2

# CUmemorytype
MEMORYTYPE_HOST, MEMORYTYPE_DEVICE, MEMORYTYPE_ARRAY, MEMORYTYPE_UNIFIED = 1, 2, 3, 4

# cuMemHostAlloc's flags (CU_MEMHOSTALLOC_*) and cuMemHostRegister's (CU_MEMHOSTREGISTER_*).
HOST_ALLOC_FLAGS = {0x01: "portable", 0x02: "devicemap", 0x04: "writecombined"}
HOST_REGISTER_FLAGS = {0x01: "portable", 0x02: "devicemap", 0x04: "iomemory", 0x08: "read_only"}
WRITECOMBINED = 0x04


@dataclass(frozen=True)
class Fetch:
    """One fetched value: argument ``arg`` itself, or (``offset`` set) what it points to at that
    offset."""

    arg: int
    type: str = "u64"
    offset: int | None = None


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str
    fields: tuple[tuple[str, Fetch], ...]
    direction: str | None = None   # "h2d" or "d2h" for COPY


def _a(i: int, t: str = "u64") -> Fetch:
    return Fetch(i, t)


def _d(i: int, offset: int, t: str = "u64") -> Fetch:
    return Fetch(i, t, offset)


def _desc(layout: dict[str, tuple[int, str]]) -> tuple[tuple[str, Fetch], ...]:
    return tuple((name, _d(0, off, t)) for name, (off, t) in layout.items())


# Descriptor fields: st/sh/sd = src memory type, host, device; dt/dh/dd = the same for dst; w, h, d.
MEMCPY2D = {"st": (16, "u32"), "sh": (24, "u64"), "sd": (32, "u64"), "dt": (72, "u32"), "dh": (80, "u64"),
            "dd": (88, "u64"), "w": (112, "u64"), "h": (120, "u64")}
MEMCPY3D = {"st": (32, "u32"), "sh": (40, "u64"), "sd": (48, "u64"), "dt": (120, "u32"), "dh": (128, "u64"),
            "dd": (136, "u64"), "w": (176, "u64"), "h": (184, "u64"), "d": (192, "u64")}
MEMCPY2D_V1 = {"st": (8, "u32"), "sh": (16, "u64"), "sd": (24, "u32"), "dt": (52, "u32"), "dh": (56, "u64"),
               "dd": (64, "u32"), "w": (84, "u32"), "h": (88, "u32")}
MEMCPY3D_V1 = {"st": (16, "u32"), "sh": (24, "u64"), "sd": (32, "u32"), "dt": (80, "u32"), "dh": (88, "u64"),
               "dd": (96, "u32"), "w": (128, "u32"), "h": (132, "u32"), "d": (136, "u32")}


def _variants(base: str) -> tuple[str, ...]:
    """A function and its per-thread-default-stream twin."""
    return (base, base + ("_ptsz" if "Async" in base else "_ptds"))


def _build() -> dict[str, Entry]:
    out: dict[str, Entry] = {}

    def add(names, kind, fields, direction=None):
        for n in names:
            out[n] = Entry(n, kind, tuple(fields), direction)

    # (name without version, direction, host arg, size arg); the device side is the other pointer.
    one_way = [("cuMemcpyHtoD", "h2d", 1, 2), ("cuMemcpyHtoDAsync", "h2d", 1, 2),
               ("cuMemcpyDtoH", "d2h", 0, 2), ("cuMemcpyDtoHAsync", "d2h", 0, 2),
               ("cuMemcpyHtoA", "h2d", 2, 3), ("cuMemcpyHtoAAsync", "h2d", 2, 3),
               ("cuMemcpyAtoH", "d2h", 0, 3), ("cuMemcpyAtoHAsync", "d2h", 0, 3)]
    for base, way, host, size in one_way:
        add(_variants(base + "_v2"), COPY, [("host", _a(host)), ("size", _a(size))], way)
        add([base], COPY, [("host", _a(host)), ("size", _a(size, "u32"))], way)
    # device or array on both sides: (name, size arg)
    for base, size in [("cuMemcpyDtoD", 2), ("cuMemcpyDtoDAsync", 2), ("cuMemcpyDtoA", 3), ("cuMemcpyAtoD", 3),
                       ("cuMemcpyAtoA", 4)]:
        add(_variants(base + "_v2"), DEVICE, [("size", _a(size))])
        add([base], DEVICE, [("size", _a(size, "u32"))])
    for base in ("cuMemcpy", "cuMemcpyAsync", "cuMemcpyWithAttributesAsync"):
        add(_variants(base), UNIFIED, [("dst", _a(0)), ("src", _a(1)), ("size", _a(2))])
    for base in ("cuMemcpyPeer", "cuMemcpyPeerAsync"):
        add(_variants(base), PEER, [("size", _a(4))])
    for base in ("cuMemcpy2D", "cuMemcpy2DUnaligned", "cuMemcpy2DAsync"):
        add(_variants(base + "_v2"), DESC2D, _desc(MEMCPY2D))
        add([base], DESC2D, _desc(MEMCPY2D_V1))
    for base in ("cuMemcpy3D", "cuMemcpy3DAsync"):
        add(_variants(base + "_v2"), DESC3D, _desc(MEMCPY3D))
        add([base], DESC3D, _desc(MEMCPY3D_V1))
    for base in ("cuMemcpy3DPeer", "cuMemcpy3DPeerAsync"):
        add(_variants(base), DESC3D_PEER, _desc(MEMCPY3D))
    # dsts, srcs and sizes are arrays (arguments 0, 1, 2): element i at +8*i.
    batch = [("n", _a(3))] + [(f"{name}{i}", _d(arg, 8 * i)) for name, arg in (("dst", 0), ("src", 1), ("size", 2))
                              for i in range(BATCH_FETCHED)]
    for base in ("cuMemcpyBatchAsync", "cuMemcpyBatchAsync_v2"):
        add(_variants(base), BATCH, batch)
    for base in ("cuMemcpy3DBatchAsync", "cuMemcpy3DBatchAsync_v2"):
        add(_variants(base), BATCH_OPS, [("n", _a(0))])
    add(_variants("cuMemcpy3DWithAttributesAsync"), BATCH_OPS, [])  # one operation a call
    add(["cuMemHostAlloc"], ALLOC, [("size", _a(1)), ("flags", _a(2, "u32"))])
    add(["cuMemAllocHost_v2"], ALLOC, [("size", _a(1))])
    add(["cuMemAllocHost"], ALLOC, [("size", _a(1, "u32"))])
    add(["cuMemHostRegister_v2", "cuMemHostRegister"], REGISTER,
        [("ptr", _a(0)), ("size", _a(1)), ("flags", _a(2, "u32"))])
    add(["cuMemHostUnregister"], UNREGISTER, [("ptr", _a(0))])
    add(["cuMemFreeHost"], FREE, [("ptr", _a(0))])
    return out


CATALOG: dict[str, Entry] = _build()


def flag_names(flags: int, table: dict[int, str]) -> tuple[str, ...]:
    """The names of the bits set in ``flags`` ("default" for none; "0x..." for an unknown bit)."""
    if flags == 0:
        return ("default",)
    names = [name for bit, name in sorted(table.items()) if flags & bit]
    unknown = flags & ~sum(table)
    if unknown:
        names.append(f"0x{unknown:x}")
    return tuple(names)
