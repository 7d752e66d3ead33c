"""What one probed call did, from its event's fields: the catalog's meaning of the arguments applied
to a process's tally. Pure: the tally (``aggregate.ProcessTally``) and the process's memory
(``classify.ProcessMemory``) hold the state."""
from __future__ import annotations

from typing import Any

from . import catalog as c

MAX_COPY_BYTES = 1 << 48  # 256 TiB: no single copy moves more; a larger argument is not a real copy


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) else None


def _size(v: Any) -> int | None:
    v = _int(v)
    return v if v is not None and 0 <= v <= MAX_COPY_BYTES else None


def _slots(entry: c.Entry) -> tuple[tuple[str, str, int], ...]:
    """(field, slot, mask) of each of the entry's fields in a ``call`` event."""
    if entry.kind in c.DESC_KINDS:
        types = {name: f.type for name, f in entry.fields}
        return tuple((name, f"a{i}", 0xFFFFFFFF if types.get(name) == "u32" else -1)
                     for i, name in enumerate(c.DESC_FIELDS))
    if entry.kind == c.BATCH:
        return tuple((name, f"a{i}", -1) for i, (name, _) in enumerate(entry.fields))
    return tuple((name, f"a{f.arg}", 0xFFFFFFFF if f.type == "u32" else -1) for name, f in entry.fields)


SLOTS: dict[str, tuple[tuple[str, str, int], ...]] = {name: _slots(e) for name, e in c.CATALOG.items()}


def call_fields(entry: c.Entry, raw: dict) -> dict:
    """A ``call`` event's slots (``a0``...) -> the entry's named fields, each cut to its type (a legacy
    32-bit size arrives in a 64-bit register whose upper half is undefined; a descriptor's 32-bit
    field was read with the 32 bits after it)."""
    out: dict = {}
    for name, slot, mask in SLOTS[entry.name]:
        v = raw.get(slot)
        out[name] = v & mask if isinstance(v, int) else v
    return out


def apply(entry: c.Entry, fields: dict, tally: Any, times: int = 1) -> None:
    """Count ``times`` equal calls of ``entry`` in ``tally``."""
    kind = entry.kind
    if kind == c.COPY:
        tally.copy(entry.direction, _int(fields.get("host")), _size(fields.get("size")), times)
    elif kind == c.UNIFIED:
        tally.unified(_int(fields.get("dst")), _int(fields.get("src")), _size(fields.get("size")), times)
    elif kind == c.DEVICE:
        tally.device(_size(fields.get("size")), times)
    elif kind == c.PEER:
        tally.peer(_size(fields.get("size")), times)
    elif kind in (c.DESC2D, c.DESC3D, c.DESC3D_PEER):
        _descriptor(kind, fields, tally, times)
    elif kind == c.BATCH:
        _batch(fields, tally, times)
    elif kind == c.BATCH_OPS:
        n = _int(fields.get("n")) if "n" in fields else 1
        tally.batch_ops(n, times)
    elif kind == c.ALLOC:
        tally.alloc(_size(fields.get("size")), _int(fields.get("flags")) or 0)
    elif kind == c.REGISTER:
        tally.register(_int(fields.get("ptr")), _size(fields.get("size")), _int(fields.get("flags")) or 0)
    elif kind == c.UNREGISTER:
        tally.unregister(_int(fields.get("ptr")))
    elif kind == c.FREE:
        tally.free(_int(fields.get("ptr")))


def _descriptor(kind: str, f: dict, tally: Any, times: int) -> None:
    w, h = _int(f.get("w")), _int(f.get("h"))
    d = _int(f.get("d")) if kind != c.DESC2D else 1
    size = _size(w * h * d) if None not in (w, h, d) else None  # type: ignore[operator]
    src = _side(_int(f.get("st")), _int(f.get("sh")), _int(f.get("sd")))
    dst = _side(_int(f.get("dt")), _int(f.get("dh")), _int(f.get("dd")))
    tally.described(src, dst, size, kind == c.DESC3D_PEER, times)


def _side(memory_type: int | None, host: int | None, device: int | None) -> tuple[str, int | None]:
    """("host", pointer), ("device", None) or ("unified", pointer) for one side of a descriptor."""
    if memory_type == c.MEMORYTYPE_HOST:
        return "host", host
    if memory_type == c.MEMORYTYPE_UNIFIED:
        return "unified", device
    return "device", None


def _batch(f: dict, tally: Any, times: int) -> None:
    """A batch's first copies (the others' slots hold what was past a shorter batch's arrays)."""
    n = _int(f.get("n"))
    known = []
    for i in range(min(n or 0, c.BATCH_FETCHED)):
        dst, src = _int(f.get(f"dst{i}")), _int(f.get(f"src{i}"))
        known.append((dst, src, _size(f.get(f"size{i}"))))
    tally.batch(n, known, times)
