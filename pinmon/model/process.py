"""A process row of the snapshot (``ProcessPinned``) and the records it is made of.

One record per question a view or a rule asks of a process:

- ``ProcessIdentity``: who it is (name, user, command line) and the key of its group;
- ``HeldMemory``: the pinned memory it holds now and how it holds it; ``HeldMemory.bytes`` is THE held
  figure (pinned + write-combined + VmPin) that every table sorts by, every total adds and every rule
  compares. Groups (``Cgroup.held``) use the same record;
- ``Copies``: its host<->device copies over a window, one ``CopyStats`` per direction and host memory
  kind, whatever measured them (the tracer's CUPTI engine or hooks, uprobes on libcuda);
- ``Allocations``: its pinned allocations and releases over a window;
- ``Placement``: where its memory is (GPUs, GPU memory, pinned pages per NUMA node).

Units are bytes and bytes/second; ``None`` is "unknown", never 0.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .kinds import Direction, HostMemoryKind, Instrument, RowSource
from .serial import Serial


@dataclass(frozen=True)
class ProcessIdentity(Serial):
    """Who a process is. Untrusted text (a process names itself): shown through ``units.printable``."""

    name: str | None = None
    user: str | None = None
    cmdline: str | None = None
    # The key of its group in Snapshot.cgroups (pod container, container, Slurm step, unit, cgroup).
    cgroup: str | None = None


def _add(a: int | None, b: int | None) -> int | None:
    """a + b of the known ones; None when neither is known."""
    if a is None:
        return b
    return a if b is None else a + b


@dataclass(frozen=True)
class HeldMemory(Serial):
    """Pinned memory held now, by a process or a group of processes, and how it is held.

    ``bytes`` = pinned + write-combined + VmPin is what it holds in all; ``vm_locked_bytes`` (mlock)
    is shown apart: locked memory is not pinned for the CUDA driver."""

    # Pinned host memory: /dev/zero mappings (est.) or the tracer's count of cudaHostAlloc'ed and
    # registered memory (traced). VmPin is not in it.
    pinned_bytes: int | None = None
    # Write-combined pinned memory: driver pages mapped through /dev/nvidiactl.
    write_combined_bytes: int | None = None
    # VmPin from /proc/PID/status: pages pinned through the kernel's own accounting (io_uring
    # registered buffers, RDMA memory regions); CUDA's pinning does not move it.
    vm_pinned_bytes: int | None = None
    # Of pinned_bytes: cudaHostRegister'ed memory (traced), and what the program asked for (traced;
    # the rest is rounding by its allocator).
    registered_bytes: int | None = None
    requested_bytes: int | None = None
    # VmLck from /proc/PID/status: mlock()ed bytes, which are not CUDA-pinned.
    vm_locked_bytes: int | None = None
    # Pinned mappings (est.), and those that appeared or vanished since the previous scan (churn).
    mappings: int | None = None
    mappings_churn: int | None = None
    # True when the figures were lowered to what the kernel backs: a process's resident memory or
    # RAM (collect/processes/resident.py), a tracer's report to its mappings
    # (collect/traced/bounds.py), a group's to its memory in use (collect/cgroups/groups.py).
    capped: bool = False
    # True when a tracer's report counts less than the kernel shows of the process (its pinned or
    # write-combined mappings): the row holds the kernel's larger figure (collect/traced/bounds.py).
    report_understated: bool = False

    @property
    def bytes(self) -> int | None:
        """THE held figure: pinned + write-combined + VmPin, of the known ones; None when none is known."""
        return _add(_add(self.pinned_bytes, self.write_combined_bytes), self.vm_pinned_bytes)


def summed(helds: Iterable[HeldMemory]) -> HeldMemory:
    """The pinned, write-combined and VmPin bytes of ``helds`` added up (each None where none knows
    it), ``capped`` where any was: what a group or an exporter's "other" series holds."""
    pinned = wc = vm = None
    capped = False
    for h in helds:
        pinned = _add(pinned, h.pinned_bytes)
        wc = _add(wc, h.write_combined_bytes)
        vm = _add(vm, h.vm_pinned_bytes)
        capped = capped or h.capped
    return HeldMemory(pinned_bytes=pinned, write_combined_bytes=wc, vm_pinned_bytes=vm, capped=capped)


@dataclass(frozen=True)
class CopyStats(Serial):
    """A process's copies of one direction and host memory kind.

    ``bytes_per_s`` is over the window's wall time (``Copies.window_s``); ``bytes`` and ``count`` since
    the instrument started watching (the traced program's start; attaching); ``achieved_bytes_per_s``
    is bytes over the copies' GPU time and the rate percentiles are per copy (CUPTI only: the others
    see no GPU time)."""

    direction: Direction
    memory: HostMemoryKind
    bytes_per_s: float | None = None
    bytes: int | None = None
    count: int | None = None
    size_p50_bytes: int | None = None
    size_p90_bytes: int | None = None
    size_max_bytes: int | None = None
    achieved_bytes_per_s: float | None = None
    rate_p50_bytes_per_s: float | None = None
    rate_p10_bytes_per_s: float | None = None


@dataclass(frozen=True)
class BulkCopies(Serial):
    """CUPTI: a process's copies of 1 MiB or more from or to pinned memory on its busiest GPU (the one
    with the most such bytes) in the window: bytes over the GPU time they took, and that GPU time."""

    direction: Direction
    achieved_bytes_per_s: float | None = None
    busy_s: float | None = None


@dataclass(frozen=True)
class Copies(Serial):
    """A process's host<->device copies over a window, whatever measured them (``instrument``).

    ``stats`` has at most one entry per (direction, memory), and a copy counts in one entry only. The
    tracer counts copies into write-combined memory with its pinned ones; its write-combined entry
    carries only their count (a device-to-host copy into write-combined memory is read back by the CPU,
    uncached)."""

    instrument: Instrument
    window_s: float | None = None
    stats: tuple[CopyStats, ...] = ()
    bulk: tuple[BulkCopies, ...] = ()
    # Of the bulk copies' bytes, the share on the legacy default stream (serialised with its kernels).
    default_stream_share: float | None = None
    # The busiest GPU of the bulk copies, as CUDA names it ("0000:41:00.0").
    gpu_pci_bus_id: str | None = None
    peer_bytes_per_s: float | None = None  # device-to-device copies between GPUs, counted apart
    peer_count: int | None = None
    # True where pageable copies may be from memory registered outside what the instrument saw
    # (uprobes cannot tell a registered buffer from a pageable one it has not seen registered).
    pageable_may_be_registered: bool = False
    notes: tuple[str, ...] = ()  # why a figure is unknown or what it leaves out

    def get(self, direction: Direction, memory: HostMemoryKind) -> CopyStats | None:
        return next((s for s in self.stats if s.direction == direction and s.memory == memory), None)

    def bytes_per_s(self, direction: Direction | None = None,
                    memory: HostMemoryKind | None = None) -> float | None:
        """The window rate of the copies of ``direction`` (both when None) and ``memory`` (every kind
        when None): the sum of the known ones; None when none is known."""
        known = [s.bytes_per_s for s in self.stats if s.bytes_per_s is not None
                 and (direction is None or s.direction == direction) and (memory is None or s.memory == memory)]
        return sum(known) if known else None

    @property
    def pageable_bytes_per_s(self) -> float | None:
        """Copies from and to pageable memory, both directions (the rate ``pageable-bulk-copies`` reads)."""
        return self.bytes_per_s(memory="pageable")

    @property
    def wc_readbacks(self) -> int | None:
        """Device-to-host copies into write-combined memory: each is read back by the CPU, uncached."""
        s = self.get("d2h", "write_combined")
        return None if s is None else s.count

    def bulk_of(self, direction: Direction) -> BulkCopies | None:
        return next((b for b in self.bulk if b.direction == direction), None)


@dataclass(frozen=True)
class Allocations(Serial):
    """A process's pinned allocations and releases, whatever measured them (``instrument``): counts
    since it started watching, rates over the window (``window_s``), sizes of recent allocations."""

    instrument: Instrument
    window_s: float | None = None
    count: int | None = None
    per_s: float | None = None
    frees: int | None = None
    frees_per_s: float | None = None
    median_bytes: int | None = None
    size_p90_bytes: int | None = None
    size_max_bytes: int | None = None
    # Allocations with a flag, by flag: {"write_combined": n, "mapped": n, "portable": n}.
    flags: dict[str, int] = field(default_factory=dict)
    registrations: int | None = None  # cudaHostRegister calls
    registered_bytes: int | None = None  # bytes those calls registered
    # Registrations apart from allocations (uprobes): their sizes, flags ({"portable": n, "mapped": n,
    # "io_memory": n, "read_only": n}) and the unregistrations.
    registration_median_bytes: int | None = None
    registration_max_bytes: int | None = None
    registration_flags: dict[str, int] = field(default_factory=dict)
    unregistrations: int | None = None


@dataclass(frozen=True)
class Placement(Serial):
    """Where a process's memory is: the GPUs it uses (NVML), its memory on them, its pinned pages per
    NUMA node (/proc/PID/numa_maps; multi-node hosts only)."""

    gpu_indices: tuple[int, ...] = ()
    gpu_memory_bytes: int | None = None
    pinned_bytes_by_node: dict[str, int] | None = None  # {"node": bytes}


@dataclass(frozen=True)
class ProcessPinned(Serial):
    pid: int
    source: RowSource = "est."
    identity: ProcessIdentity = field(default_factory=ProcessIdentity)
    held: HeldMemory = field(default_factory=HeldMemory)
    copies: Copies | None = None
    allocations: Allocations | None = None
    placement: Placement = field(default_factory=Placement)
    # The tracer's call site (file:line) per behaviour: "alloc", "register", "rounding_waste",
    # "pageable_copy", "wc_readback"; each finding names the site of its own behaviour. Untrusted
    # text: shown through units.printable.
    call_sites: dict[str, str] = field(default_factory=dict)

    @property
    def instrument(self) -> Instrument | None:
        """What measured its copies (else its allocations); None for a row of the maps estimate."""
        if self.copies is not None:
            return self.copies.instrument
        return self.allocations.instrument if self.allocations is not None else None
