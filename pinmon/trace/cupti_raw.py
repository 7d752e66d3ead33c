"""CUPTI's activity buffers read straight from memory: the tracer's fast path for records.

``cupti-python`` hands its completion callback one Python object per record, and each field read
on such an object goes through a NumPy record view (about 4 µs a field; a copy record needs nine).
At one record per host-device copy that is more than the copy itself takes at 1 MiB. So the tracer
registers its own buffer callbacks with libcupti (``cuptiActivityRegisterCallbacks``, through
ctypes, on the same library ``cupti-python`` loaded) and reads each record's fields with one
``struct`` unpack at its offset. The layouts come from ``cupti-python``'s record dtypes (the C
structs of the loaded CUPTI), so nothing here hard-codes an offset.

Records sit one after another in a buffer, each the size of its kind's struct. That walk is checked
against CUPTI's own iterator (``cuptiActivityGetNextRecord``) on the first buffers that hold records;
on any disagreement the iterator is used for every record from then on. A record of a kind without a
layout ends the walk of its buffer (its size is unknown) and is counted.
"""
from __future__ import annotations

import ctypes
import re
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # NumPy is imported where a buffer is read: cupti-python has it, pinmon does not need it
    import numpy

# A record read as a tuple of ints, its fields in the order of its kind's *_FIELDS.
Fields = tuple[int, ...]

# (CUPTI activity kind, the stem of cupti-python's dtype names, the fields read, in offset order).
# The dtype of the newest record version cupti-python knows is taken (activity_memcpy6_dtype in
# 13.0, activity_memcpy7_dtype in 13.4, c_upti_activity_memcpy6_dtype in 12.8): that is the struct
# its libcupti writes. Driver and runtime API records share one struct, unversioned (activity_api_dtype).
MEMCPY_FIELDS = ("kind", "copy_kind", "src_kind", "dst_kind", "bytes", "start", "end", "device_id",
                 "context_id", "stream_id", "copy_count")
MEMORY_FIELDS = ("kind", "memory_operation_type", "memory_kind", "correlation_id", "address", "bytes",
                 "timestamp")
CONTEXT_FIELDS = ("kind", "context_id", "null_stream_id")
API_FIELDS = ("kind", "cbid", "correlation_id", "return_value")
KIND_MEMCPY, KIND_DRIVER, KIND_RUNTIME, KIND_CONTEXT, KIND_MEMORY2 = 1, 4, 5, 9, 49
LAYOUTS = ((KIND_MEMCPY, "memcpy", MEMCPY_FIELDS),
           (KIND_MEMORY2, "memory", MEMORY_FIELDS),
           (KIND_CONTEXT, "context", CONTEXT_FIELDS),
           (KIND_DRIVER, "api", API_FIELDS),
           (KIND_RUNTIME, "api", API_FIELDS))
CHECKED_BUFFERS = 4           # buffers whose walk is compared with CUPTI's iterator
CUPTI_SUCCESS = 0
_CODES = {("i", 1): "b", ("u", 1): "B", ("i", 2): "h", ("u", 2): "H", ("i", 4): "i", ("u", 4): "I",
          ("i", 8): "q", ("u", 8): "Q"}


class LayoutError(ValueError):
    """A dtype that does not describe the record as this module reads it."""


class Layout:
    """One record kind: its size and a ``struct`` that reads the wanted fields in offset order."""

    def __init__(self, dtype: numpy.dtype, fields: tuple[str, ...]):
        by_name = dtype.fields
        if by_name is None:
            raise LayoutError(f"{dtype} is not a record")
        try:
            spec = [(int(by_name[f][1]), f, by_name[f][0]) for f in fields]
        except KeyError as e:
            raise LayoutError(f"no field {e}") from None
        if [f for _, f, _ in sorted(spec, key=lambda s: s[0])] != list(fields):
            raise LayoutError("fields are not in offset order")
        fmt, pos = "<", 0
        for offset, name, t in spec:
            code = _CODES.get((t.kind, t.itemsize))
            if code is None or offset < pos:
                raise LayoutError(f"{name}: unexpected type {t}")
            fmt += (f"{offset - pos}x" if offset > pos else "") + code
            pos = offset + t.itemsize
        self.size = int(dtype.itemsize)
        if pos > self.size or self.size % 8:
            raise LayoutError("record size")
        self.struct = struct.Struct(fmt)
        self.dtype = dtype  # the record's own: record arrays of runs of copies are read with it


def newest_dtype_name(cupti: object, stem: str) -> str | None:
    """``activity_<stem><N>_dtype`` (cupti-python 13) or ``c_upti_activity_<stem><N>_dtype`` (12.x)
    with the largest N that ``cupti`` has (no N: the first version), or None."""
    pattern = re.compile(rf"(?:c_upti_)?activity_{stem}(\d*)_dtype")
    found = [(int(m.group(1) or 0), n) for n in dir(cupti) for m in [pattern.fullmatch(n)] if m]
    return max(found)[1] if found else None


def layouts_of(cupti: object) -> dict[int, Layout]:
    """{activity kind: Layout} from ``cupti-python``'s dtypes (NumPy's); raises LayoutError."""
    out = {}
    for kind, stem, fields in LAYOUTS:
        name = newest_dtype_name(cupti, stem)
        if name is None:
            raise LayoutError(f"cupti-python has no activity_{stem}N_dtype")
        dtype: numpy.dtype = getattr(cupti, name)  # looked up by name: it differs by version
        out[kind] = Layout(dtype, fields)
    return out


class Parsed:
    """One buffer's records: copy records as NumPy record arrays of runs of consecutive copies
    (``memcpy_runs``, the dtype of the record), or as tuples (``memcpy``, fields as MEMCPY_FIELDS;
    the path without NumPy and the record-object path); MEMORY2, CONTEXT and driver or runtime API
    records as tuples."""

    __slots__ = ("api", "context", "memcpy", "memcpy_runs", "memory", "unknown")

    def __init__(self) -> None:
        self.memcpy: list[Fields] = []
        self.memcpy_runs: list[numpy.ndarray] = []
        self.memory: list[Fields] = []
        self.context: list[Fields] = []
        self.api: list[Fields] = []
        self.unknown = 0

    @property
    def copies(self) -> int:
        return len(self.memcpy) + sum(len(r) for r in self.memcpy_runs)

    @property
    def records(self) -> int:
        return self.copies + len(self.memory) + len(self.context) + len(self.api)


def _numpy_present() -> bool:
    try:
        import numpy  # noqa: F401
        return True
    except ImportError:  # cupti-python needs NumPy; without it the tuples path serves
        return False


def _copy_run(i32: numpy.ndarray, start: int, step: int, most: int) -> int:
    """How many records in a row are copy records, from the one at int32 word ``start``, each
    ``step`` words long, at most ``most``: their kinds checked at once."""
    import numpy as np

    kinds = i32[start: start + most * step: step]
    other = np.flatnonzero(kinds != KIND_MEMCPY)
    return int(other[0]) if other.size else most


def _record_array(buf: memoryview, dtype: numpy.dtype | str, count: int, offset: int) -> numpy.ndarray:
    """``count`` records of ``dtype`` from byte ``offset`` of ``buf``, as an array over its memory."""
    import numpy as np

    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset)


_INT32 = "<i4"


# CUPTI's iterator over a buffer: (address, valid bytes) -> the offsets of its records.
NextRecord = Callable[[int, int], "list[int]"]
# (activity kind, offset, record count): a run of records of one kind; count 0: of unknown size.
Run = tuple[int, int, int]


class BufferParser:
    """Turns a completed buffer (address, valid bytes) into ``Parsed`` records.

    The walk steps record by record, by its kind's size, except through a run of copy records
    (most of a busy buffer), whose kinds NumPy checks at once and which becomes one record array.
    ``runs`` are (kind, offset, count)."""

    def __init__(self, layouts: dict[int, Layout], next_record: NextRecord | None = None,
                 use_numpy: bool | None = None):
        self.layouts = layouts
        self.next_record = next_record
        self.checked = 0
        self.use_iterator = False
        self.walk_mismatches = 0
        self.use_numpy = _numpy_present() if use_numpy is None else use_numpy
        self._kind = struct.Struct("<i").unpack_from

    def walk(self, buf: ctypes.Array[ctypes.c_char], valid: int) -> list[Run]:
        """[(kind, offset, count)] by each kind's size; an unknown kind ends it as (kind, offset, 0)."""
        kind_at, layouts = self._kind, self.layouts
        i32 = _record_array(memoryview(buf), _INT32, valid // 4, 0) if self.use_numpy else None
        out: list[Run] = []
        off = 0
        while off + 8 <= valid:
            kind = kind_at(buf, off)[0]
            layout = layouts.get(kind)
            if layout is None:
                out.append((kind, off, 0))
                break
            size = layout.size
            n = 1
            if kind == KIND_MEMCPY and i32 is not None:
                most = (valid - off) // size
                if most > 1:
                    n = _copy_run(i32, off // 4, size // 4, most)
            elif off + size > valid:
                out.append((kind, off, 0))
                break
            out.append((kind, off, n))
            off += n * size
        return out

    def offsets(self, runs: list[Run]) -> list[int]:
        out: list[int] = []
        for kind, off, n in runs:
            size = self.layouts[kind].size if kind in self.layouts else 0
            out.extend(off + j * size for j in range(max(n, 1)))
        return out

    def parse(self, address: int, valid: int) -> Parsed:
        p = Parsed()
        if not address or valid <= 0:
            return p
        buf = (ctypes.c_char * valid).from_address(address)
        if not self.use_iterator:
            runs = self.walk(buf, valid)
            if self.next_record is not None and self.checked < CHECKED_BUFFERS and runs:
                self.checked += 1
                truth = self.next_record(address, valid)
                if truth != self.offsets(runs):
                    self.walk_mismatches += 1
                    self.use_iterator = True
        next_record = self.next_record
        if self.use_iterator and next_record is not None:
            kind_at = self._kind
            runs = [(kind_at(buf, off)[0], off, 1) for off in next_record(address, valid)]
        layouts = self.layouts
        for kind, off, n in runs:
            layout = layouts.get(kind)
            if layout is None or n == 0 or off + n * layout.size > valid:
                p.unknown += 1
                continue
            if kind == KIND_MEMCPY:
                if n > 1 and self.use_numpy:
                    p.memcpy_runs.append(_record_array(memoryview(buf), layout.dtype, n, off))
                else:
                    unpack = layout.struct.unpack_from
                    p.memcpy.extend(unpack(buf, off + j * layout.size) for j in range(n))
            elif kind == KIND_MEMORY2:
                p.memory.append(layout.struct.unpack_from(buf, off))
            elif kind == KIND_CONTEXT:
                p.context.append(layout.struct.unpack_from(buf, off))
            else:
                p.api.append(layout.struct.unpack_from(buf, off))
        return p


# --- libcupti through ctypes ------------------------------------------------------------------------

_REQUEST = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                            ctypes.POINTER(ctypes.c_size_t))
_COMPLETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_size_t)


def loaded_libcupti(maps_path: str = "/proc/self/maps") -> str | None:
    """The path of the libcupti this process has loaded (by ``cupti-python``), or None."""
    try:
        with open(maps_path) as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                if "/libcupti.so" in path:
                    return path.strip()
    except OSError:
        pass
    return None


class RawCallbacks:
    """libcupti's buffer callbacks, registered through ctypes, feeding ``on_buffer(Parsed)``.

    ``request_bytes()`` says how large a buffer to hand out (0: none, CUPTI then drops records);
    ``on_buffer`` runs on CUPTI's worker thread or the flushing thread and must not raise (a raise
    is caught and counted). Buffers are Python-owned and 8-byte aligned, freed once completed."""

    def __init__(self, lib: ctypes.CDLL, layouts: dict[int, Layout], request_bytes: Callable[[], int],
                 on_buffer: Callable[[Parsed], None]):
        self.lib = lib
        self.request_bytes = request_bytes
        self.on_buffer = on_buffer
        self.callback_errors = 0
        self._buffers: dict[int, ctypes.Array[ctypes.c_char]] = {}  # address handed out -> its memory
        lib.cuptiActivityRegisterCallbacks.argtypes = [_REQUEST, _COMPLETE]
        lib.cuptiActivityRegisterCallbacks.restype = ctypes.c_int
        self._next = lib.cuptiActivityGetNextRecord
        self._next.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
        self._next.restype = ctypes.c_int
        self.parser = BufferParser(layouts, self.iterate)
        # Kept on the object for as long as CUPTI may call them (the tracer keeps the object for life).
        self._request_cb = _REQUEST(self._request)
        self._complete_cb = _COMPLETE(self._complete)

    def register(self) -> None:
        status = self.lib.cuptiActivityRegisterCallbacks(self._request_cb, self._complete_cb)
        if status != CUPTI_SUCCESS:
            raise OSError(f"cuptiActivityRegisterCallbacks returned {status}")

    def iterate(self, address: int, valid: int) -> list[int]:
        """Record offsets by CUPTI's own iterator."""
        rec = ctypes.c_void_p(None)
        out: list[int] = []
        nxt = self._next
        while nxt(address, valid, ctypes.byref(rec)) == CUPTI_SUCCESS and rec.value:
            out.append(rec.value - address)
        return out

    def _request(self, buffer_pp: ctypes._Pointer[ctypes.c_void_p], size_p: ctypes._Pointer[ctypes.c_size_t],
                 max_records_p: ctypes._Pointer[ctypes.c_size_t]) -> None:
        try:
            n = int(self.request_bytes())
            if n <= 0:
                buffer_pp[0], size_p[0], max_records_p[0] = None, 0, 0
                return
            block = ctypes.create_string_buffer(n + 8)
            address = (ctypes.addressof(block) + 7) & ~7
            self._buffers[address] = block
            buffer_pp[0], size_p[0], max_records_p[0] = address, n, 0
        except BaseException:
            self.callback_errors += 1
            try:
                buffer_pp[0], size_p[0], max_records_p[0] = None, 0, 0
            except BaseException:
                pass

    def _complete(self, context: int | None, stream_id: int, address: int | None, size: int,
                  valid: int) -> None:
        try:
            block = self._buffers.get(address) if address else None
            parsed = self.parser.parse(address, int(valid)) if block is not None and address else Parsed()
            self.on_buffer(parsed)
        except BaseException:
            self.callback_errors += 1
        finally:
            if address:
                self._buffers.pop(address, None)

    @property
    def outstanding(self) -> int:
        return len(self._buffers)

    # An activity kind switched through libcupti itself, for a kind whose records this path reads but
    # cupti-python will not enable (12.8 refuses the API kinds: it has no record objects for them).

    def enable_kind(self, kind: int) -> None:
        self._call("cuptiActivityEnable", kind)

    def disable_kind(self, kind: int) -> None:
        self._call("cuptiActivityDisable", kind)

    def switch_api_call(self, kind: int, cbid: int, enable: int) -> None:
        """One call's records of API kind ``kind`` (driver or runtime) on or off."""
        name = "cuptiActivityEnableRuntimeApi" if kind == KIND_RUNTIME else "cuptiActivityEnableDriverApi"
        self._call(name, cbid, enable, argtypes=[ctypes.c_uint32, ctypes.c_uint8])

    def _call(self, name: str, *args: int, argtypes: list | None = None) -> None:
        func = getattr(self.lib, name)  # AttributeError: a libcupti without it
        func.argtypes = argtypes or [ctypes.c_int]
        func.restype = ctypes.c_int
        status = func(*args)
        if status != CUPTI_SUCCESS:
            raise OSError(f"{name} returned {status}")
