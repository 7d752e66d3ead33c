"""An attach's results (``pinmon.attach``) as snapshot rows: the one mapping from the engine's records
to the model's, and the bounds on what they may claim.

- A process's copies become ``Copies(instrument="uprobes")`` (host<->device by direction and host
  memory kind; peer copies apart), its pinned allocations ``Allocations(instrument="uprobes")``
  (registrations apart), over the attach's window. Held bytes do not come from an attach: the maps and
  the kernel stay their source.
- A row of the maps estimate takes them and its source becomes ``"attached"``; a traced row keeps the
  tracer's figures (it sees what uprobes cannot: GPU time, call sites); a CUDA process the scan did not
  list (it maps no pinned memory) gets a row of its own.
- A process calls libcuda itself, so its arguments are its own word: its copies of one direction are
  held to what the links it may use can move (the rated rate of its GPUs' links, or of every GPU's
  where NVML does not list it), with a note. An attach's figures fill in the attached process's own
  row and nothing else: no host total, no other process's row.
- Only a recent outcome counts (its window ended at most ``max_age_s`` ago); one that attached nothing
  is a notice.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from ..model import Allocations, Copies, CopyStats, ProcessIdentity, ProcessPinned
from ..model.kinds import DIRECTIONS, HOST_MEMORY_KINDS, Instrument
from ..model.serial import evolve
from ..units import fmt_rate, printable

if TYPE_CHECKING:
    from ..attach.results import AttachOutcome, ProcessCopies
    from ..model import Gpu

INSTRUMENT: Instrument = "uprobes"
NOTICE_CHARS = 300
SHOWN_FAILURES = 5
# cuMemHostAlloc's and cuMemHostRegister's flag names (attach/catalog.py) -> the model's words.
ALLOC_FLAG_WORDS = {"writecombined": "write_combined", "devicemap": "mapped", "portable": "portable"}
REGISTER_FLAG_WORDS = {"portable": "portable", "devicemap": "mapped", "iomemory": "io_memory",
                       "read_only": "read_only"}


class AttachedSource(Protocol):
    """What the live collector asks for an attach's latest window: ``Attacher``, ``LatestOutcome`` or
    ``RequestedWindows``."""

    def latest(self) -> AttachOutcome | None: ...


class LatestOutcome:
    """An ``AttachedSource`` holding the outcome of a window someone else ran (``check --attach``)."""

    def __init__(self, outcome: AttachOutcome | None = None) -> None:
        self._outcome = outcome
        self._lock = threading.Lock()

    def set(self, outcome: AttachOutcome | None) -> None:
        with self._lock:
            self._outcome = outcome

    def latest(self) -> AttachOutcome | None:
        with self._lock:
            return self._outcome


class RequestedWindows(LatestOutcome):
    """The windows a user asks for one at a time (the app's attach key on a process): the latest that
    attached something. Nothing is attached until one is asked for, so there is nothing to say before
    (``quiet_before_first``: the collector's "attaching" notice is for an attach always running), and
    a window that attached nothing is the asker's to say (one line, where the key was pressed), not a
    notice in every snapshot."""

    quiet_before_first = True

    def set(self, outcome: AttachOutcome | None) -> None:
        if outcome is not None and outcome.result is not None:
            super().set(outcome)


def _flags(flags: dict[str, int], words: dict[str, str]) -> dict[str, int]:
    """The engine's flag counts in the model's words; "default" (no flag) is not a flag."""
    out: dict[str, int] = {}
    for name, n in flags.items():
        if name == "default":
            continue
        word = words.get(name, printable(name, 20))
        out[word] = out.get(word, 0) + n
    return out


def copies_of(pc: ProcessCopies) -> Copies:
    """One process's copies as the model's record."""
    stats = tuple(CopyStats(s.direction, s.memory, s.bytes_per_s, s.bytes, s.count, s.size_p50_bytes,
                            s.size_p90_bytes, s.size_max_bytes)
                  for s in pc.stats if s.direction in DIRECTIONS and s.memory in HOST_MEMORY_KINDS)
    notes = [printable(n, NOTICE_CHARS) for n in pc.notes]
    unknown = sum(s.unknown_size_count for s in pc.stats)
    if unknown:
        notes.append(f"{unknown} copies whose size is not a real copy's: counted, their bytes not")
    if pc.batch_copies_unmeasured:
        notes.append(f"{pc.batch_copies_unmeasured} copies in batches past the first ones fetched: counted,"
                     " their bytes not")
    if pc.batch_ops:
        notes.append(f"{pc.batch_ops} 3D batch operations: their bytes are not known")
    return Copies(instrument=INSTRUMENT, window_s=pc.window_s, stats=stats, peer_bytes_per_s=pc.peer.bytes_per_s,
                  peer_count=pc.peer.count, pageable_may_be_registered=pc.pageable_may_be_registered,
                  notes=tuple(notes))


def allocations_of(pc: ProcessCopies) -> Allocations:
    a = pc.allocations
    return Allocations(instrument=INSTRUMENT, window_s=pc.window_s, count=a.count, per_s=a.per_s, frees=a.frees,
                       frees_per_s=a.frees_per_s, median_bytes=a.median_bytes, size_p90_bytes=a.size_p90_bytes,
                       size_max_bytes=a.size_max_bytes, flags=_flags(a.flags, ALLOC_FLAG_WORDS),
                       registrations=a.registrations, registered_bytes=a.registered_bytes,
                       registration_median_bytes=a.registration_median_bytes,
                       registration_max_bytes=a.registration_max_bytes,
                       registration_flags=_flags(a.registration_flags, REGISTER_FLAG_WORDS),
                       unregistrations=a.unregistrations)


def link_cap(pid: int, gpus: Iterable[Gpu]) -> float | None:
    """The most a process's copies of one direction can move: the rated rates of the links of the
    GPUs NVML lists it on, else of every GPU; None where a link's rate is not known (or no GPU)."""
    gpus = [g for g in gpus if not g.lost]
    own = [g for g in gpus if any(gp.pid == pid for gp in g.processes)]
    rates = [g.link.max_theoretical_bytes_per_s or g.link.theoretical_bytes_per_s for g in (own or gpus)]
    if not rates or any(r is None for r in rates):
        return None
    return float(sum(r for r in rates if r is not None))


def held_to_links(copies: Copies, cap: float | None) -> Copies:
    """Each direction's copies scaled down to ``cap`` where their rates add up to more (a note each)."""
    if cap is None:
        return copies
    stats = list(copies.stats)
    notes = list(copies.notes)
    for d in DIRECTIONS:
        claimed = copies.bytes_per_s(d)
        if claimed is None or claimed <= cap:
            continue
        k = cap / claimed
        stats = [evolve(s, bytes_per_s=None if s.bytes_per_s is None else s.bytes_per_s * k,
                        bytes=None if s.bytes is None else int(s.bytes * k)) if s.direction == d else s for s in stats]
        notes.append(f"{d}: the calls claimed {fmt_rate(claimed)}, more than its GPUs' links move;"
                     f" held to {fmt_rate(cap)}")
    return evolve(copies, stats=tuple(stats), notes=tuple(notes))


def fresh(outcome: AttachOutcome | None, now_mono: float, max_age_s: float | None = None) -> bool:
    """Whether ``outcome``'s window ended recently enough to stand for now (by default three windows,
    at least 10 s)."""
    if outcome is None:
        return False
    if max_age_s is None:
        window = outcome.result.window_s if outcome.result is not None else 0.0
        max_age_s = max(10.0, 3 * window)
    return now_mono - outcome.ended_mono <= max_age_s


def outcome_notices(outcome: AttachOutcome) -> list[str]:
    """What the snapshot says of an attach: why nothing was attached, which processes were not, what a
    window leaves out (sampled, stopped, events lost)."""
    out = [f"attach: {printable(n, NOTICE_CHARS)}" for n in outcome.notices]
    if outcome.result is None:
        out.append(f"attach: {printable(outcome.error or 'nothing attached', NOTICE_CHARS)}")
        return out
    r = outcome.result
    failed = sorted(r.failed.items())
    for pid, why in failed[:SHOWN_FAILURES]:
        out.append(f"attach: pid {pid} not attached: {printable(why, NOTICE_CHARS)}")
    if len(failed) > SHOWN_FAILURES:
        out.append(f"attach: {len(failed) - SHOWN_FAILURES} more processes not attached")
    out += [f"attach: {printable(n, NOTICE_CHARS)}" for n in r.notices]
    if outcome.interrupted:
        out.append(f"attach: the window was cut to {r.window_s:.1f} s")
    return out


def merge_attached(rows: list[ProcessPinned], outcome: AttachOutcome | None,
                   describe: Callable[[int], tuple] | None = None, only_pids: list[int] | None = None,
                   gpus: Iterable[Gpu] = (), now_mono: float | None = None,
                   max_age_s: float | None = None) -> tuple[list[ProcessPinned], list[str]]:
    """(rows with each attached process's copies and allocations, the attach's notices)."""
    now = time.monotonic() if now_mono is None else now_mono
    if outcome is None or not fresh(outcome, now, max_age_s):
        return rows, []
    notices = outcome_notices(outcome)
    if outcome.result is None:
        return rows, notices
    gpus = tuple(gpus)
    attached = outcome.result.processes
    out, seen = [], set()
    for r in rows:
        pc = attached.get(r.pid)
        if pc is not None:
            seen.add(r.pid)
            if r.source != "traced":  # the tracer's figures stay
                r = evolve(r, source="attached", copies=held_to_links(copies_of(pc), link_cap(r.pid, gpus)),
                           allocations=allocations_of(pc))
        out.append(r)
    for pid in sorted(attached):
        if pid in seen or (only_pids is not None and pid not in only_pids):
            continue
        pc = attached[pid]
        name = user = cmdline = None
        if describe is not None:
            try:
                name, user, cmdline = describe(pid)
            except Exception:  # a process that exited: its name as it was when attached
                pass
        if name is None and pc.name:
            name = printable(pc.name, 64)
        out.append(ProcessPinned(pid=pid, source="attached",
                                 identity=ProcessIdentity(name=name, user=user, cmdline=cmdline),
                                 copies=held_to_links(copies_of(pc), link_cap(pid, gpus)),
                                 allocations=allocations_of(pc)))
    return out, notices
