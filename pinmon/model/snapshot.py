"""The snapshot model: plain frozen dataclasses and the one JSON schema, ``pinmon.snapshot/2``.

A process row (``ProcessPinned``) and a group (``Cgroup``) are built of records of their own
(``process.py``, ``group.py``); the closed sets of words are ``Literal`` types (``kinds.py``). A
``pinmon.snapshot/1`` document is turned into a ``/2`` one before it is read (``migrate.py``).

Everything downstream of collection (advisor, check report, ``--json``, recordings, replay, TUI,
exporter) reads these types and nothing else, so a recorded snapshot and a live one are
indistinguishable. Units are bytes and bytes/second; ``None`` means "unknown" and is written as
JSON ``null``, never as a 0 that pretends to be a reading.

``to_dict``/``from_dict`` are ``serial.Serial``'s: ``from_dict`` ignores keys it does not know (a
newer writer may add fields) and refuses what no collector can produce with ``SchemaError``, naming
the path of the first bad value.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any

from .group import Cgroup
from .kinds import (
    Direction,
    MeasurementKind,
    PcieMethod,
    PinnedTotalSource,
    ProbeKind,
    ProbeMemory,
    ProbeStatus,
    Severity,
    SnapshotOrigin,
    Status,
)
from .migrate import SNAPSHOT_SCHEMA_V1, snapshot_v1_to_v2
from .oom import OomKill
from .process import ProcessPinned
from .serial import SchemaError, Serial, from_dict_of, to_json

SNAPSHOT_SCHEMA = "pinmon.snapshot/2"
CHECK_SCHEMA = "pinmon.check/1"

SEVERITY_RANK: dict[str, int] = {"ok": 0, "info": 0, "warning": 1, "critical": 2}


# --- the model ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class HostMemory(Serial):
    hostname: str
    mem_total_bytes: int | None = None
    mem_available_bytes: int | None = None
    # min(MemTotal, cgroup memory limit): what this process tree can really use.
    effective_mem_limit_bytes: int | None = None
    cgroup_limit_bytes: int | None = None
    swap_used_bytes: int | None = None
    shmem_bytes: int | None = None
    mlocked_bytes: int | None = None
    # Sum of the per-process pinned estimates (see collect/processes/procmaps.py); an estimate, not a reading.
    pinned_bytes_est: int | None = None
    write_combined_bytes_est: int | None = None
    # RLIMIT_MEMLOCK soft limit of pinmon itself; None = unlimited or unknown (see memlock_unlimited).
    memlock_limit_bytes: int | None = None
    memlock_unlimited: bool | None = None
    # The kernel's count of pages pinned now (FOLL_PIN, /proc/vmstat), in bytes: exact and host-wide,
    # cudaHostRegister'ed, RDMA, VFIO and io_uring memory included, write-combined memory not.
    kernel_pinned_bytes: int | None = None
    kernel_pinned_bytes_by_node: dict[str, int] | None = None  # {"0": bytes, ...}
    # The best figure of all pinned memory: kernel's count + write-combined (est.) where the kernel
    # counts pins ("kernel"), else pinned (est.) + write-combined (est.) ("est.").
    pinned_bytes_total: int | None = None
    pinned_bytes_source: PinnedTotalSource | None = None
    # The kernel's count minus what the process rows explain (never below 0); None without the count.
    unattributed_pinned_bytes: int | None = None
    numa_nodes: tuple[int, ...] | None = None  # online NUMA node ids

    @property
    def used_bytes(self) -> int | None:
        if self.mem_total_bytes is None or self.mem_available_bytes is None:
            return None
        return self.mem_total_bytes - self.mem_available_bytes


@dataclass(frozen=True)
class Link(Serial):
    gen: int | None = None
    gen_max: int | None = None
    width: int | None = None
    width_max: int | None = None
    # Payload rate of the link as it runs now (gen x width, after line encoding).
    theoretical_bytes_per_s: float | None = None
    # The same at the link's maximum generation and width: what the slot is rated for.
    max_theoretical_bytes_per_s: float | None = None

    @property
    def gen_below_max(self) -> bool:
        return self.gen is not None and self.gen_max is not None and self.gen < self.gen_max

    @property
    def width_below_max(self) -> bool:
        return self.width is not None and self.width_max is not None and self.width < self.width_max

    @property
    def below_max(self) -> bool:
        """Running below its rated generation or width (both figures known)."""
        return self.gen_below_max or self.width_below_max


# PCIe methods that count every link byte over the interval (see Pcie.method).
EXACT_PCIE_METHODS: frozenset[str | None] = frozenset({"gpm", "counters"})


@dataclass(frozen=True)
class Pcie(Serial):
    rx_bytes_per_s: float | None = None
    tx_bytes_per_s: float | None = None
    # "gpm": exact link bytes from chained GPM samples (Hopper and newer); "counters": exact link
    # bytes from NVML's cumulative 32-bit counters; "sampled": NVML's 20 ms throughput sample
    # extrapolated; None: no reading.
    method: PcieMethod | None = None
    rx_bytes: int | None = None  # link bytes over the interval (exact methods only)
    tx_bytes: int | None = None
    interval_s: float | None = None
    replay_delta: int | None = None
    recovery_delta: int | None = None
    error_delta: int | None = None  # sum of the error counters below
    counter_deltas: dict[str, int | None] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """Whether the bytes were counted (GPM or the link counters), not extrapolated."""
        return self.method in EXACT_PCIE_METHODS

    @property
    def traffic_bytes_per_s(self) -> float | None:
        """RX + TX, of the directions that have a reading; None when neither has one."""
        known = [v for v in (self.rx_bytes_per_s, self.tx_bytes_per_s) if v is not None]
        return sum(known) if known else None


@dataclass(frozen=True)
class GpuProcess(Serial):
    pid: int
    gpu_memory_bytes: int | None = None


@dataclass(frozen=True)
class Gpu(Serial):
    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    link: Link = field(default_factory=Link)
    pcie: Pcie = field(default_factory=Pcie)
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    cpu_affinity: str | None = None  # CPU list, e.g. "0-15"
    numa_node: int | None = None
    processes: tuple[GpuProcess, ...] = ()
    lost: bool = False  # NVML said the GPU fell off the bus
    notices: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProbeMeasurement(Serial):
    """One timed operation (``kind``) on one kind of memory."""

    kind: MeasurementKind
    memory: ProbeMemory
    size_bytes: int
    direction: Direction | None = None  # for copies
    bytes_per_s: float | None = None
    seconds: float | None = None  # median time of one operation
    repeats: int | None = None
    note: str | None = None
    host_numa_node: int | None = None  # the NUMA node the host buffer's pages were on (probe --numa)


@dataclass(frozen=True)
class ProbeResult(Serial):
    time: float
    gpu_index: int | None = None
    status: ProbeStatus = "ok"
    reason: str | None = None
    kind: ProbeKind = "quick"
    link_theoretical_bytes_per_s: float | None = None
    duration_s: float | None = None
    max_pinned_bytes: int | None = None
    measurements: tuple[ProbeMeasurement, ...] = ()
    # The GPU's link traffic while the probe ran, the probe's own included: the mean of the
    # collector's readings whose intervals overlap the probe (joined by the app, never measured by
    # the probe itself), the seconds those readings span, and their Pcie.method.
    link_rx_bytes_per_s: float | None = None
    link_tx_bytes_per_s: float | None = None
    link_window_s: float | None = None
    link_method: PcieMethod | None = None

    def rate(self, direction: Direction, memory: ProbeMemory, size_bytes: int | None = None) -> float | None:
        """Bandwidth of the largest (or the given) copy of this direction and memory kind."""
        rows = [m for m in self.measurements
                if m.kind == "copy" and m.direction == direction and m.memory == memory
                and m.bytes_per_s is not None and (size_bytes is None or m.size_bytes == size_bytes)]
        if not rows:
            return None
        return max(rows, key=lambda m: m.size_bytes).bytes_per_s


@dataclass(frozen=True)
class Finding(Serial):
    rule: str
    severity: Severity
    subject: str
    message: str
    advice: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot(Serial):
    time: float
    host: HostMemory
    schema: str = SNAPSHOT_SCHEMA
    gpus: tuple[Gpu, ...] = ()
    processes: tuple[ProcessPinned, ...] = ()
    probe: ProbeResult | None = None
    notices: tuple[str, ...] = ()
    interval_s: float | None = None
    source: SnapshotOrigin = "live"
    # NVIDIA GPUs on the PCI bus (sysfs), counted without NVML; None when unknown.
    nvidia_pci_gpus: int | None = None
    # Why NVML gives no GPU data (it could not start, or sees no GPU); None when it runs or was
    # not asked. With nvidia_pci_gpus > 0 it means GPUs that nothing monitors.
    nvml_error: str | None = None
    # The groups (containers, pods, jobs) of the processes above, each with its own memory limit.
    cgroups: tuple[Cgroup, ...] = ()
    # Memory cgroup OOM kills in the kernel's log within the lookback (default 24 h), oldest first:
    # their groups may be gone.
    oom_kills: tuple[OomKill, ...] = ()

    def to_dict(self) -> dict:
        d = to_json(self)
        return {"schema": d.pop("schema"), **d}  # schema first: it is what a reader checks

    @classmethod
    def from_dict(cls, data: Any, path: str | None = None) -> Snapshot:
        if not isinstance(data, dict):
            raise SchemaError(f"snapshot: expected an object, got {type(data).__name__}")
        schema = data.get("schema")
        if schema == SNAPSHOT_SCHEMA_V1:
            data = snapshot_v1_to_v2(data)  # the one way a /1 document is read
        elif schema != SNAPSHOT_SCHEMA:
            raise SchemaError(f"snapshot: schema is {repr(schema)[:60]}, expected {SNAPSHOT_SCHEMA!r}"
                              f" (or {SNAPSHOT_SCHEMA_V1!r})")
        return from_dict_of(cls, data, "snapshot")

    def copy_gpu(self, p: ProcessPinned) -> Gpu | None:
        """The GPU a process's copies went to: the bus id its copies name, else its only GPU, else the
        snapshot's only GPU; None where that does not settle it."""
        bus = p.copies.gpu_pci_bus_id if p.copies is not None else None
        key = bus_key(bus)
        if key is not None:
            return next((g for g in self.gpus if bus_key(g.pci_bus_id) == key), None)
        used = p.placement.gpu_indices
        candidates = [g for g in self.gpus if g.index in used] if used else list(self.gpus)
        return candidates[0] if len(candidates) == 1 else None


def bus_key(bus_id: str | None) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) of a PCI bus id as numbers: NVML writes 8 domain digits, CUDA 4."""
    if not bus_id:
        return None
    try:
        domain, bus, rest = bus_id.strip().split(":")
        dev, fn = rest.split(".")
        return int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except ValueError:
        return None


def worst_severity(findings: typing.Iterable[Finding]) -> Status:
    """"ok", "warning" or "critical" (info findings do not raise the status)."""
    rank = max((SEVERITY_RANK[f.severity] for f in findings), default=0)
    statuses: dict[int, Status] = {0: "ok", 1: "warning", 2: "critical"}
    return statuses[rank]
