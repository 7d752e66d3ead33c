"""How much of each GPU's link traffic the processes' measured copies explain: arithmetic on a
``Snapshot`` (no I/O), the one place ``pinmon attach``, ``check``, their JSON and the exporter take it.

"RX 40 GB/s: 32 GB/s pid 123, pinned; 6 GB/s pid 456, pageable". A GPU's RX (link bytes it received)
is its host-to-device traffic, TX its device-to-host. A process's copies of one direction count on the
GPU they went to (``Snapshot.copy_gpu``: the bus id its copies name, else the one GPU NVML lists it on,
else the snapshot's only GPU); where that does not settle it (a process on several GPUs, or one NVML
does not list on a host with several) its copies are ``unplaced``, shown apart, never guessed.

What a share can and cannot say, which the views repeat where they show it:

- link bytes count protocol overhead (~7% over the payload of host-to-device copies), and TX also
  carries the read requests of host-to-device copies: a link that only known copies use reads below
  100% on RX and well below on TX;
- copies are counted over their instrument's window (attach: the calls issued in it; CUPTI: copies
  that ended in its last 5 s), the link over the snapshot's interval: over a steady load they agree;
- the rest of a link's bytes are what no instrument here sees: processes neither attached nor traced,
  GPUDirect RDMA and Storage, peer-to-peer traffic.
"""
from __future__ import annotations

from dataclasses import dataclass

from .kinds import DIRECTIONS, Direction, HostMemoryKind, PcieMethod, RowSource
from .serial import Serial
from .snapshot import Gpu, Snapshot

LINK_WORDS: dict[Direction, str] = {"h2d": "RX", "d2h": "TX"}


@dataclass(frozen=True)
class CopyShare(Serial):
    """One process's copies of one direction and host memory kind: their rate over its window."""

    pid: int
    direction: Direction
    memory: HostMemoryKind
    bytes_per_s: float
    source: RowSource = "attached"
    name: str | None = None          # untrusted text (the process names itself)


@dataclass(frozen=True)
class LinkExplained(Serial):
    """One direction of one GPU's link: its traffic and the copies measured on it, largest first."""

    gpu_index: int
    direction: Direction
    link_bytes_per_s: float | None = None    # RX for h2d, TX for d2h; None without a reading
    method: PcieMethod | None = None
    explained_bytes_per_s: float = 0.0          # the shares added up
    explained_share: float | None = None     # of the link's traffic; None without a reading
    shares: tuple[CopyShare, ...] = ()

    @property
    def word(self) -> str:
        return LINK_WORDS[self.direction]


@dataclass(frozen=True)
class TrafficExplained(Serial):
    """Every GPU's two directions (when any process has measured copies), and the copies whose GPU
    cannot be known."""

    links: tuple[LinkExplained, ...] = ()
    unplaced: tuple[CopyShare, ...] = ()

    @property
    def measured(self) -> bool:
        """Whether any process's copies were measured (else there is nothing to explain)."""
        return any(link.shares for link in self.links) or bool(self.unplaced)


def _shares(snap: Snapshot) -> tuple[dict[tuple[int, Direction], list[CopyShare]], list[CopyShare]]:
    placed: dict[tuple[int, Direction], list[CopyShare]] = {}
    unplaced: list[CopyShare] = []
    for p in snap.processes:
        if p.copies is None:
            continue
        gpu: Gpu | None = snap.copy_gpu(p)
        for s in p.copies.stats:
            if not s.bytes_per_s:
                continue
            share = CopyShare(p.pid, s.direction, s.memory, s.bytes_per_s, p.source, p.identity.name)
            if gpu is None:
                unplaced.append(share)
            else:
                placed.setdefault((gpu.index, s.direction), []).append(share)
    return placed, unplaced


def _largest_first(shares: list[CopyShare]) -> tuple[CopyShare, ...]:
    return tuple(sorted(shares, key=lambda s: (-s.bytes_per_s, s.pid, s.memory)))


def explain_traffic(snap: Snapshot) -> TrafficExplained:
    """Each GPU's RX and TX with the measured copies on them, and the copies no GPU can be given."""
    placed, unplaced = _shares(snap)
    if not placed and not unplaced:
        return TrafficExplained()
    links = []
    for g in snap.gpus:
        for d in DIRECTIONS:
            shares = _largest_first(placed.get((g.index, d), []))
            link = g.pcie.rx_bytes_per_s if d == "h2d" else g.pcie.tx_bytes_per_s
            explained = sum(s.bytes_per_s for s in shares)
            share = explained / link if link else None
            links.append(LinkExplained(g.index, d, link, g.pcie.method, explained, share, shares))
    return TrafficExplained(tuple(links), _largest_first(unplaced))
