"""What a probe measures: the steps of each probe kind, their sizes and repeat counts.

Pure arithmetic, no CUDA: the engine walks a ``Plan`` in order. Steps that share a ``group`` share
the buffers the engine allocates for that group, so the plan also decides what is held at once:
every group holds at most one pinned (or registered) buffer, of at most the pinned cap.

Kinds:
- ``quick``: 64 MiB H2D and D2H, pinned and pageable (the size shrinks to the cap if that is smaller).
- ``sweep``: 4 KiB .. 256 MiB in powers of 4, both directions, pinned and pageable, sizes above the
  cap skipped: where pinning starts to matter.
- ``alloc``: cudaHostAlloc/cudaFreeHost against numpy ``empty`` + first touch at several sizes, and
  H2D copies at the same sizes, so the engine can work out when pinning pays for its allocation.
- ``modes``: the cudaHostAlloc flags (default, write-combined, mapped, portable) and
  cudaHostRegister of an existing buffer.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model.kinds import Direction, MeasurementKind, ProbeKind, ProbeMemory
from ..units import KIB, MIB, fmt_bytes

KINDS: tuple[ProbeKind, ...] = ("quick", "sweep", "alloc", "modes")

QUICK_SIZE_BYTES = 64 * MIB
SWEEP_SIZES_BYTES: tuple[int, ...] = tuple(4 * KIB * 4 ** i for i in range(9))  # 4 KiB, 16 KiB, ... 256 MiB
ALLOC_SIZES_BYTES = (4 * KIB, 64 * KIB, 1 * MIB, 16 * MIB, 64 * MIB, 256 * MIB)
MODES_SIZE_BYTES = 64 * MIB
# CPU reads of write-combined memory can run at a few hundred MB/s on bare metal: a smaller buffer
# keeps that measurement to a fraction of a second.
MODES_CPU_SIZE_BYTES = 16 * MIB
# Allocation and copy sizes stay multiples of a page (and so of the 16-byte kernel loads).
PAGE_BYTES = 4 * KIB

# Seconds a probe may run before it stops between measurements and returns what it has.
DEFAULT_TIME_BUDGET_S = {"quick": 10.0, "sweep": 60.0, "alloc": 60.0, "modes": 60.0}

# Repeats: enough bytes per measurement that small sizes get many samples, never so few that a
# median means nothing.
COPY_TARGET_BYTES = 512 * MIB
COPY_MIN_REPEATS = 5
COPY_MAX_REPEATS = 200
ALLOC_TARGET_BYTES = 64 * MIB
ALLOC_MIN_REPEATS = 3
ALLOC_MAX_REPEATS = 50
CPU_REPEATS = 5
KERNEL_REPEATS = 10
REGISTER_REPEATS = 3

# Group resources (what the engine allocates for a group of steps).
G_COPY = "copy"          # pinned (default flags) + pageable host buffer + device buffer
G_NONE = "none"          # the steps allocate and free by themselves (allocation cost)
G_PINNED = "pinned"      # one cudaHostAlloc buffer with the flags of its memory kind + device buffer
G_REGISTERED = "registered"  # a pageable buffer, registered by the steps themselves + device buffer

# A group: (resource, buffer bytes), and for G_PINNED the memory kind of its buffer.
Group = tuple[str, int] | tuple[str, int, str]

HOST_ALLOC_FLAGS = {"pinned": 0, "portable": 1, "mapped": 2, "write_combined": 4}


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def copy_repeats(size_bytes: int) -> int:
    """Timed repeats of one copy: 200 for 4 KiB .. 2.5 MiB, 8 for 64 MiB, 5 for 256 MiB."""
    return _clamp(-(-COPY_TARGET_BYTES // max(1, size_bytes)), COPY_MIN_REPEATS, COPY_MAX_REPEATS)


def alloc_repeats(size_bytes: int) -> int:
    """Steady-state allocations after the first one: 50 for small sizes, 3 for 64 MiB and up."""
    return _clamp(-(-ALLOC_TARGET_BYTES // max(1, size_bytes)), ALLOC_MIN_REPEATS, ALLOC_MAX_REPEATS)


@dataclass(frozen=True)
class Step:
    """One measurement (or, for ``alloc`` and ``register``, one family of measurements).

    ``op``: "copy", "alloc", "cpu_read", "cpu_write", "kernel_read", "register".
    ``memory``: the ProbeMeasurement memory kind. ``group``: (resource, buffer bytes); consecutive
    steps with the same group share one set of buffers.
    """

    op: MeasurementKind
    memory: ProbeMemory
    size_bytes: int
    repeats: int
    group: Group
    direction: Direction | None = None

    @property
    def label(self) -> str:
        parts: list[str] = [self.op, self.memory]
        if self.direction:
            parts.append(self.direction)
        parts.append(fmt_bytes(self.size_bytes))
        return " ".join(parts)


@dataclass(frozen=True)
class Plan:
    kind: ProbeKind
    cap_bytes: int
    steps: tuple[Step, ...]
    # Sentences for the result (e.g. "64 MiB capped to 32 MiB"); the engine puts them in notes.
    notes: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return len(self.steps)


def _page_floor(n: int) -> int:
    return n - n % PAGE_BYTES


def capped_size(want_bytes: int, cap_bytes: int) -> int:
    """``want_bytes`` or the cap, whichever is smaller, rounded down to whole pages."""
    return _page_floor(min(want_bytes, cap_bytes))


def _copy_steps(size: int, group: Group, directions: tuple[Direction, ...] = ("h2d", "d2h"),
                memories: tuple[ProbeMemory, ...] = ("pinned", "pageable")) -> list[Step]:
    return [Step("copy", mem, size, copy_repeats(size), group, direction=d)
            for d in directions for mem in memories]


def probe_kind(kind: str) -> ProbeKind:
    """``kind`` as one of ``KINDS``; ValueError for any other."""
    for k in KINDS:
        if k == kind:
            return k
    raise ValueError(f"unknown probe kind {kind!r} (one of {', '.join(KINDS)})")


def build_plan(kind: str, cap_bytes: int) -> Plan:
    """The steps of probe ``kind`` under a pinned cap of ``cap_bytes``. Raises ValueError for an
    unknown kind or a cap below one page."""
    kind = probe_kind(kind)
    if cap_bytes < PAGE_BYTES:
        raise ValueError(f"pinned cap of {cap_bytes} bytes is below one page")
    notes: list[str] = []
    steps: list[Step] = []
    if kind == "quick":
        size = capped_size(QUICK_SIZE_BYTES, cap_bytes)
        if size < QUICK_SIZE_BYTES:
            notes.append(f"copies of {fmt_bytes(size)} instead of {fmt_bytes(QUICK_SIZE_BYTES)}:"
                         f" pinned cap is {fmt_bytes(cap_bytes)}")
        steps = _copy_steps(size, (G_COPY, size))
    elif kind == "sweep":
        sizes = [s for s in SWEEP_SIZES_BYTES if s <= cap_bytes]
        skipped = [s for s in SWEEP_SIZES_BYTES if s > cap_bytes]
        if skipped:
            notes.append(f"sizes above the pinned cap of {fmt_bytes(cap_bytes)} skipped:"
                         f" {', '.join(fmt_bytes(s) for s in skipped)}")
        # One set of buffers of the largest size; each copy uses its first size_bytes.
        group = (G_COPY, sizes[-1])
        for size in sizes:
            steps += _copy_steps(size, group)
    elif kind == "alloc":
        sizes = [s for s in ALLOC_SIZES_BYTES if s <= cap_bytes]
        skipped = [s for s in ALLOC_SIZES_BYTES if s > cap_bytes]
        if skipped:
            notes.append(f"sizes above the pinned cap of {fmt_bytes(cap_bytes)} skipped:"
                         f" {', '.join(fmt_bytes(s) for s in skipped)}")
        for size in sizes:
            steps.append(Step("alloc", "pinned", size, alloc_repeats(size), (G_NONE, size)))
            steps.append(Step("alloc", "pageable", size, alloc_repeats(size), (G_NONE, size)))
            steps += _copy_steps(size, (G_COPY, size), directions=("h2d",))
    else:  # modes
        size = capped_size(MODES_SIZE_BYTES, cap_bytes)
        cpu = min(MODES_CPU_SIZE_BYTES, size)
        if size < MODES_SIZE_BYTES:
            notes.append(f"buffers of {fmt_bytes(size)} instead of {fmt_bytes(MODES_SIZE_BYTES)}:"
                         f" pinned cap is {fmt_bytes(cap_bytes)}")
        g: Group
        for mem in ("pinned", "write_combined"):
            g = (G_PINNED, size, mem)
            steps += [Step("cpu_read", mem, cpu, CPU_REPEATS, g),
                      Step("cpu_write", mem, cpu, CPU_REPEATS, g),
                      Step("copy", mem, size, copy_repeats(size), g, direction="h2d")]
        g = (G_PINNED, size, "mapped")
        steps += [Step("kernel_read", "mapped", size, KERNEL_REPEATS, g),
                  Step("kernel_read", "device", size, KERNEL_REPEATS, g)]
        g = (G_PINNED, size, "portable")
        steps.append(Step("copy", "portable", size, copy_repeats(size), g, direction="h2d"))
        g = (G_REGISTERED, size)
        steps += [Step("register", "registered", size, REGISTER_REPEATS, g),
                  Step("copy", "registered", size, copy_repeats(size), g, direction="h2d")]
    return Plan(kind=kind, cap_bytes=cap_bytes, steps=tuple(steps), notes=tuple(notes))
