"""What probe measurements say: speedups, share of the link, break-even of a pinned allocation, the
write-combined read verdict, local against remote NUMA nodes, and the notes that compare rows.

Pure functions of ``ProbeMeasurement`` rows and ``ProbeResult``s (a result or a list of rows is
accepted where it says so): no CUDA, no I/O, so the engine, the text output and tests share them.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from ..model import ProbeMeasurement, ProbeResult

# A probe's result, or its measurement rows.
Rows = ProbeResult | Iterable[ProbeMeasurement]

# A write-combined buffer counts as having a CPU-read penalty when reads from it run at under
# half the speed of reads from ordinary pinned memory (on bare metal the gap is ~10x).
WC_READ_PENALTY_RATIO = 0.5

DIRECTIONS = ("h2d", "d2h")


# --- finding rows -----------------------------------------------------------------------------------

def _rows(result: Rows) -> list[ProbeMeasurement]:
    return list(result.measurements if isinstance(result, ProbeResult) else result)


def find(rows: Iterable[ProbeMeasurement], kind: str, memory: str, size_bytes: int | None = None,
         direction: str | None = None, note: str | None = None) -> ProbeMeasurement | None:
    """The first row of this kind and memory (and size, direction, note where given), or None."""
    for m in rows:
        if (m.kind == kind and m.memory == memory
                and (size_bytes is None or m.size_bytes == size_bytes)
                and (direction is None or m.direction == direction)
                and (note is None or m.note == note)):
            return m
    return None


def copies(result: Rows, memory: str, direction: str) -> dict[int, ProbeMeasurement]:
    """Copy rows of one memory kind and direction that have a rate, by size."""
    return {m.size_bytes: m for m in _rows(result)
            if m.kind == "copy" and m.memory == memory and m.direction == direction
            and m.bytes_per_s is not None}


def cost_s(result: Rows, kind: str, memory: str, size_bytes: int, note: str) -> float | None:
    """Seconds of the ``kind`` ("alloc", "free") row with this memory, size and note ("first", "steady")."""
    m = find(_rows(result), kind, memory, size_bytes, note=note)
    return None if m is None else m.seconds


# --- ratios -----------------------------------------------------------------------------------------

def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is unknown or b is 0 (a speedup, a share of the link)."""
    if a is None or not b:
        return None
    return a / b


def h2d_pinned_vs_pageable(result: Rows) -> tuple[float | None, float | None]:
    """(pinned, pageable) H2D bytes/s at the largest size measured both ways; without a pageable
    copy (pinned at its largest size, None); without a pinned one (None, None)."""
    pinned = copies(result, "pinned", "h2d")
    pageable = copies(result, "pageable", "h2d")
    both = sorted(set(pinned) & set(pageable))
    if both:
        return pinned[both[-1]].bytes_per_s, pageable[both[-1]].bytes_per_s
    if pinned:
        return pinned[max(pinned)].bytes_per_s, None
    return None, None


# --- allocation cost and break-even -----------------------------------------------------------------

def alloc_free_s(result: Rows, memory: str, size_bytes: int) -> float:
    """Steady allocation plus free seconds of one buffer of ``memory`` ("pinned", "pageable"); a
    missing row counts 0."""
    return ((cost_s(result, "alloc", memory, size_bytes, "steady") or 0)
            + (cost_s(result, "free", memory, size_bytes, "steady") or 0))


def break_even_transfers(result: Rows, size_bytes: int) -> float | None:
    """How many H2D transfers of ``size_bytes`` before pinning pays for its allocation.

    (pinned alloc + free - pageable alloc - pageable free) / (pageable copy - pinned copy), all
    steady-state medians from an ``alloc`` probe (``result`` is a ProbeResult or a list of
    measurements). 0.0 when the pinned buffer is not dearer to get; ``math.inf`` when a pinned copy
    is not faster, so pinning never pays; None when a needed measurement is missing.
    """
    rows = _rows(result)

    def seconds(kind: str, memory: str, direction: str | None = None,
                note: str | None = None) -> float | None:
        m = find(rows, kind, memory, size_bytes, direction, note)
        return None if m is None else m.seconds

    pa = seconds("alloc", "pinned", note="steady")
    pf = seconds("free", "pinned", note="steady")
    ga = seconds("alloc", "pageable", note="steady")
    gf = seconds("free", "pageable", note="steady")
    pc = seconds("copy", "pinned", direction="h2d")
    gc = seconds("copy", "pageable", direction="h2d")
    if pa is None or pf is None or ga is None or pc is None or gc is None:
        return None
    extra_s = pa + pf - ga - (gf or 0.0)
    saving_s = gc - pc
    if extra_s <= 0:
        return 0.0
    if saving_s <= 0:
        return float("inf")
    return extra_s / saving_s


# --- write-combined memory --------------------------------------------------------------------------

def wc_read_verdict(rows: Sequence[ProbeMeasurement]) -> str | None:
    """What the measured CPU reads of write-combined memory say, or None without both rows."""
    wc = find(rows, "cpu_read", "write_combined")
    pinned = find(rows, "cpu_read", "pinned")
    if wc is None or pinned is None or not wc.bytes_per_s or not pinned.bytes_per_s:
        return None
    r = wc.bytes_per_s / pinned.bytes_per_s
    if r >= WC_READ_PENALTY_RATIO:
        return ("no CPU-read penalty measured (write-combining not honoured here, e.g. in a VM);"
                f" {r:.2f}x the read speed of ordinary pinned memory")
    return (f"CPU reads {1 / r:.1f}x slower than from ordinary pinned memory"
            " (write-combining honoured: never read this buffer on the CPU)")


# --- NUMA -------------------------------------------------------------------------------------------

def numa_rows(result: ProbeResult) -> list[ProbeMeasurement]:
    """The copy rows of a NUMA probe: those that say which node their host buffer was on."""
    return [m for m in result.measurements if m.kind == "copy" and m.host_numa_node is not None]


def numa_local_remote(result: ProbeResult, direction: str) -> tuple[float | None, float | None]:
    """(local node's bytes/s, slowest remote node's bytes/s) of one direction; None for a side not
    measured (both None where the GPU's node is unknown: no row is local or remote then)."""
    rates = [(m.note or "", m.bytes_per_s) for m in numa_rows(result) if m.direction == direction and m.bytes_per_s]
    local = [rate for note, rate in rates if note.startswith("local")]
    remote = [rate for note, rate in rates if note.startswith("remote")]
    return (local[0] if local else None), (min(remote) if remote else None)


def numa_ratios(result: ProbeResult) -> dict[str, float | None]:
    """{"h2d": remote/local, "d2h": ...}: the slowest remote node's rate over the local node's, None
    where the GPU's node is unknown or a side was not measured."""
    out: dict[str, float | None] = {}
    for direction in DIRECTIONS:
        local, remote = numa_local_remote(result, direction)
        out[direction] = remote / local if local and remote else None
    return out


# --- notes that compare rows ------------------------------------------------------------------------

def add_note(m: ProbeMeasurement, text: str) -> ProbeMeasurement:
    """``m`` with ``text`` appended to its note."""
    return replace(m, note=f"{m.note}; {text}" if m.note else text)


def annotate_break_even(rows: list[ProbeMeasurement]) -> list[ProbeMeasurement]:
    """Add "break_even_transfers=N" to the note of each pinned H2D copy of an alloc probe."""
    out = []
    for m in rows:
        if m.kind == "copy" and m.memory == "pinned" and m.direction == "h2d":
            n = break_even_transfers(rows, m.size_bytes)
            if n is not None:
                text = "break_even_transfers=never (pageable copy not slower)" if n == float("inf") \
                    else f"break_even_transfers={n:.1f}"
                m = add_note(m, text)
        out.append(m)
    return out


def annotate_modes(rows: list[ProbeMeasurement]) -> list[ProbeMeasurement]:
    """Notes that compare the modes rows with each other: the WC read verdict, zero-copy vs device
    reads, registered vs cudaHostAlloc'ed H2D."""
    verdict = wc_read_verdict(rows)
    mapped = find(rows, "kernel_read", "mapped")
    device = find(rows, "kernel_read", "device")
    pinned_h2d = find(rows, "copy", "pinned", direction="h2d")
    out = []
    for m in rows:
        if verdict and m.kind == "cpu_read" and m.memory == "write_combined":
            m = add_note(m, verdict)
        elif (m.kind == "kernel_read" and m.memory == "mapped" and mapped and device
              and mapped.bytes_per_s and device.bytes_per_s):
            m = add_note(m, f"device memory reads {device.bytes_per_s / mapped.bytes_per_s:.1f}x faster")
        elif (m.kind == "copy" and m.memory in ("registered", "portable", "write_combined")
              and pinned_h2d and pinned_h2d.bytes_per_s and m.bytes_per_s):
            m = add_note(m, f"{m.bytes_per_s / pinned_h2d.bytes_per_s:.2f}x default pinned H2D")
        out.append(m)
    return out

