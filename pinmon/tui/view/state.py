"""What the views draw: one immutable ``ViewState`` the app rebuilds and hands to every view.

Views get data, they draw it; they hold no reference to the app's history, the source or the probe.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...advise.thresholds import Thresholds
from ...model import Finding, Gpu, ProbeResult, Snapshot
from ...model.kinds import ProbeKind
from ...model.traffic import TrafficExplained
from .history import GraphHistory


@dataclass(frozen=True)
class ProbeView:
    # None: a probe runner is wired in; otherwise why there are no probe numbers.
    unavailable_reason: str | None = None
    live: bool = True
    running_kind: ProbeKind | None = None
    progress_done: float | None = None
    progress_total: float | None = None
    progress_label: str = ""
    latest: ProbeResult | None = None  # the newest result of any kind
    latest_sweep: ProbeResult | None = None
    # Seconds spent probing and seconds the app has watched: the cost the probe puts on the box.
    probe_seconds: float = 0.0
    wall_seconds: float = 0.0
    count: int = 0
    # The latest result waits for the collector's reading that covers its end (its link traffic).
    link_pending: bool = False

    @property
    def duty_cycle(self) -> float | None:
        if self.wall_seconds <= 0:
            return None
        return min(1.0, self.probe_seconds / self.wall_seconds)


@dataclass(frozen=True)
class ViewState:
    snapshot: Snapshot | None = None
    findings: tuple[Finding, ...] = ()
    live: bool = True
    paused: bool = False
    speed: float = 1.0
    interval_s: float = 1.0
    recording_path: str | None = None
    ended: bool = False
    selected_gpu: int = 0  # position in snapshot.gpus
    # GPU index -> the last SPARK_SAMPLES readings (None where there was no reading).
    rx_series: dict[int, tuple[float | None, ...]] = field(default_factory=dict)
    tx_series: dict[int, tuple[float | None, ...]] = field(default_factory=dict)
    # The last minutes of each shown GPU's RX/TX and of the pinned share, for the overview's graphs.
    graphs: GraphHistory = field(default_factory=GraphHistory)
    notices: tuple[str, ...] = ()
    probe: ProbeView = field(default_factory=ProbeView)
    # The advisor's thresholds (the configured ones, else the defaults), for views that mark them
    # and figures whose look follows a rule (a link DEGRADED under load).
    thresholds: Thresholds = field(default_factory=Thresholds)
    # How much of each GPU's link the measured copies (attach, trace) explain; None before a snapshot.
    traffic: TrafficExplained | None = None
    # The attach key: its window's countdown ("attaching pid 4242: 7 s left") while one runs, and
    # whether it can start one here (live, attach possible, not --attach); --attach is on.
    attach_status: str | None = None
    attach_usable: bool = False
    attach_all: bool = False

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        return self.snapshot.gpus if self.snapshot is not None else ()

    @property
    def selected(self) -> Gpu | None:
        gpus = self.gpus
        if not gpus:
            return None
        return gpus[min(self.selected_gpu, len(gpus) - 1)]
