"""The ring buffer's binary pages (``per_cpu/cpuN/trace_pipe_raw``) -> events; pure, never raises.

Reading the binary pages skips the kernel's text formatting and pinmon's text parsing: at 10,000
events a second the text path alone costs several per cent of a core (``bench/attach_cost.py``).

A page (a "sub-buffer", ``buffer_subbuf_size_kb``; ``events/header_page``): a u64 timestamp, a
``local_t`` commit word (its low 20 bits: bytes of event data; bit 31: events were lost before this
page; bit 30: their count is stored after the data), then the events. Each event starts with a u32:
``type_len`` (5 bits) and ``time_delta`` (27 bits, added to the running timestamp):

- 1..28: a record of ``type_len * 4`` bytes follows;
- 0: the next u32 is the record's length plus 4, then the record;
- 29: padding, ``time_delta`` 0 ends the page, else the next u32 is its length;
- 30: a time extend: the next u32 is the delta's upper bits (``<< 27``);
- 31: an absolute timestamp, built the same way.

A record is the event's fields at the offsets its ``format`` file gives (``common_type`` at 0,
``common_pid`` at 4: the thread id), packed without padding; ``parse_format`` reads that file.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass

PAGE_HEADER = struct.Struct("<QQ")
U32 = struct.Struct("<I")
COMMIT_LENGTH_MASK = (1 << 20) - 1
MISSED_EVENTS = 1 << 31
MISSED_STORED = 1 << 30
TYPE_PADDING, TYPE_TIME_EXTEND, TYPE_TIME_STAMP = 29, 30, 31
TS_SHIFT = 27
MAX_FIELDS = 256
MAX_ARRAY = 64

_FIELD = re.compile(r"field:(?P<decl>[^;]*);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<signed>\d);")
_ID = re.compile(r"^ID:\s*(\d+)\s*$", re.M)
_NAME = re.compile(r"^name:\s*(\S+)\s*$", re.M)
_INT_FORMATS = {(1, 0): "B", (1, 1): "b", (2, 0): "H", (2, 1): "h", (4, 0): "I", (4, 1): "i", (8, 0): "Q", (8, 1): "q"}


@dataclass(frozen=True)
class Layout:
    """How to read one event's records: its id, its name, and its named fields."""

    id: int
    name: str
    names: tuple[str, ...]           # the fields after the common ones, in order
    struct: struct.Struct            # common_type, common_pid, then each field (arrays flattened)
    counts: tuple[int, ...]          # values per field (1, or an array's length)

    @property
    def flat(self) -> bool:
        return all(n == 1 for n in self.counts)

    def decode(self, record: bytes) -> tuple[int, dict] | None:
        """(thread id, {field: int or tuple}) of one record; None when it is too short."""
        if len(record) < self.struct.size:
            return None
        values = self.struct.unpack_from(record)
        tid = values[1]
        if self.flat:
            return tid, dict(zip(self.names, values[2:]))
        out: dict = {}
        i = 2
        for name, n in zip(self.names, self.counts):
            out[name] = values[i] if n == 1 else values[i:i + n]
            i += n
        return tid, out


def parse_format(text: str) -> Layout | None:
    """An event's ``format`` file -> its Layout; None where it is not one pinmon can read (a field
    that is not a fixed-size integer or an array of them, or common fields elsewhere than usual)."""
    id_m, name_m = _ID.search(text), _NAME.search(text)
    if id_m is None or name_m is None:
        return None
    fields = list(_FIELD.finditer(text))
    if len(fields) > MAX_FIELDS:
        return None
    fmt = ["<Hxxi"]  # common_type at 0, common_pid at 4
    pos = 8
    names: list[str] = []
    counts: list[int] = []
    common: dict[str, tuple[int, int]] = {}
    for f in fields:
        decl, offset, size, signed = f["decl"].strip(), int(f["offset"]), int(f["size"]), int(f["signed"])
        ident = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*(\[\d*\])?$", decl)
        if ident is None:
            return None
        name, is_array = ident.group(1), ident.group(2) is not None
        if name.startswith("common_"):
            common[name] = (offset, size)
            continue
        if offset < pos or size <= 0:
            return None
        if offset > pos:
            fmt.append(f"{offset - pos}x")
        pos = offset + size
        if name.startswith("__probe_"):
            fmt.append(f"{size}x")  # the probe's address: not needed
            continue
        elem = _element_size(decl[: ident.start()].strip()) if is_array else size
        if not elem or size % elem:
            return None
        count = size // elem
        code = _INT_FORMATS.get((elem, signed))
        if code is None or count > MAX_ARRAY or (count > 1 and not is_array):
            return None
        fmt.append(code * count)
        names.append(name)
        counts.append(count)
    if common.get("common_type") != (0, 2) or common.get("common_pid") != (4, 4):
        return None
    try:
        st = struct.Struct("".join(fmt))
    except struct.error:
        return None
    return Layout(int(id_m.group(1)), name_m.group(1), tuple(names), st, tuple(counts))


def _element_size(type_text: str) -> int:
    t = type_text.replace("unsigned", "").replace("signed", "").strip()
    return {"u8": 1, "s8": 1, "char": 1, "u16": 2, "s16": 2, "short": 2, "u32": 4, "s32": 4, "int": 4,
            "u64": 8, "s64": 8, "long": 8, "long long": 8}.get(t, 0)


@dataclass
class PageResult:
    records: list           # (timestamp ns, event id, record bytes)
    missed: int | None   # events lost before this page: a count, -1 where the kernel did not store it, None for none
    bad: bool = False       # the page broke the format somewhere (what came before it was kept)


def parse_page(page: bytes) -> PageResult:
    """The records of one page, with their timestamps on the instance's clock (ns)."""
    out = PageResult([], None)
    if len(page) < PAGE_HEADER.size:
        out.bad = bool(page)
        return out
    ts, commit = PAGE_HEADER.unpack_from(page)
    length = commit & COMMIT_LENGTH_MASK
    start = PAGE_HEADER.size
    end = start + length
    if end > len(page):
        out.bad = True
        end = len(page)
    if commit & MISSED_EVENTS:
        out.missed = -1
        if commit & MISSED_STORED and end + 8 <= len(page):
            out.missed = struct.unpack_from("<Q", page, end)[0]
    pos = start
    while pos + 4 <= end:
        header = U32.unpack_from(page, pos)[0]
        type_len, delta = header & 0x1F, header >> 5
        pos += 4
        if type_len == TYPE_PADDING:
            if delta == 0:
                break
            if pos + 4 > end:
                out.bad = True
                break
            pad = U32.unpack_from(page, pos)[0]
            ts += delta
            pos += pad
            continue
        if type_len in (TYPE_TIME_EXTEND, TYPE_TIME_STAMP):
            if pos + 4 > end:
                out.bad = True
                break
            value = (U32.unpack_from(page, pos)[0] << TS_SHIFT) + delta
            ts = value if type_len == TYPE_TIME_STAMP else ts + value
            pos += 4
            continue
        if type_len == 0:
            if pos + 4 > end:
                out.bad = True
                break
            size = U32.unpack_from(page, pos)[0] - 4
            pos += 4
            size = (size + 3) & ~3
        else:
            size = type_len * 4
        if size <= 0 or pos + size > end:
            out.bad = True
            break
        ts += delta
        record = page[pos:pos + size]
        if len(record) >= 2:
            out.records.append((ts, record[0] | (record[1] << 8), record))
        pos += size
    return out
