"""NVML's answers as pinmon's values: its "cannot read" sentinels become ``None``, bytes stay bytes,
names become text, a CPU affinity mask becomes a CPU list, a field value its integer.
"""
from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from ...model import GpuProcess

# NVML's "no value" for a process's GPU memory (pynvml maps it to None; older ones did not).
_NOT_AVAILABLE_ULL = (1 << 64) - 1


def small_int(value: Any, limit: int) -> int | None:
    """A link generation or width: None for NVML's 0 or 0xFFFFFFFF (a link it cannot read, e.g. a
    GPU in a low-power state) and for anything above ``limit``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= limit:
        return None
    return value


def bytes_value(value: Any) -> int | None:
    """A byte count, or None for a negative, non-integer or "not available" answer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value == _NOT_AVAILABLE_ULL:
        return None
    return value


def str_or_none(value: Any) -> str | None:
    """Text from NVML's str or bytes; None when empty."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value if isinstance(value, str) and value else None


def cpu_mask_words(value: object) -> list[int] | None:
    """NVML's CPU affinity answer, a ctypes array of 64-bit words (a list from a stand-in), as its
    words; None for any other answer or a word that is not a 64-bit count."""
    if not isinstance(value, (ctypes.Array, list, tuple)):
        return None
    words: list[int] = []
    for word in value:
        if isinstance(word, bool) or not isinstance(word, int) or not 0 <= word < 1 << 64:
            return None
        words.append(word)
    return words


def format_cpu_list(mask_words: Sequence[int] | None) -> str | None:
    """NVML's CPU affinity (64-bit words, CPU 64*i+j is bit j of word i) -> "0-15,32-47"; None if empty."""
    if mask_words is None:
        return None
    cpus = []
    for i, word in enumerate(mask_words):
        w = int(word)
        j = 0
        while w:
            if w & 1:
                cpus.append(64 * i + j)
            w >>= 1
            j += 1
    if not cpus:
        return None
    parts = []
    start = prev = cpus[0]
    for c in cpus[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if c is not None:
            start = prev = c
    return ",".join(parts)


def processes(procs: Any) -> tuple[GpuProcess, ...]:
    """Compute processes, one per pid (MIG lists a pid once per instance; their memory is summed)."""
    if not procs:
        return ()
    by_pid: dict[int, int | None] = {}
    for p in procs:
        pid = getattr(p, "pid", None)
        if not isinstance(pid, int) or isinstance(pid, bool):
            continue
        used = bytes_value(getattr(p, "usedGpuMemory", None))
        if pid in by_pid:
            prev = by_pid[pid]
            by_pid[pid] = used if prev is None else prev + (used or 0)
        else:
            by_pid[pid] = used
    return tuple(GpuProcess(pid=pid, gpu_memory_bytes=used) for pid, used in by_pid.items())


def field_int(fv: Any) -> int | None:
    """The integer in an ``nvmlFieldValue_t`` according to its ``valueType``; None if unreadable."""
    vt = getattr(fv, "valueType", 3)
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
              6: "usVal"}.get(int(vt), "ullVal")
    try:
        raw = getattr(fv.value, member)
        return int(raw)
    except (AttributeError, TypeError, ValueError, OverflowError):
        return None
