"""The prometheus_client custom collector: metric families built from the cached ``ExportState``.

``collect()`` runs on every scrape and only reads the state (no NVML, no /proc), so a scrape costs
microseconds and never blocks on collection. Each section (GPUs, host, processes, probe, status) is
built on its own (copies: per-process copy rates and the links' share, where processes are traced
or attached): a section that fails is left out of that scrape and counted in
``pinmon_scrape_errors_total``, and the rest is served, so a bad value never turns into a 500.
Every label value of every family leaves through ``families.served`` (printable, bounded).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from .families import cgroups, copies, gpu, host, probe, processes, status
from .families.base import Counter, served
from .families.processes import DEFAULT_TOP
from .state import ExportState, StateView

# One section of a scrape: the families it builds from the state's view.
Section = Callable[[], list[Metric]]


class PinmonCollector(Collector):
    def __init__(self, state: ExportState, top_processes: int = DEFAULT_TOP) -> None:
        self.state = state
        self.top_processes = top_processes
        self._lock = threading.Lock()
        self.scrape_errors = 0

    def describe(self) -> list[Metric]:
        # Nothing up front: the series depend on the data, and an empty describe() keeps the
        # registry from running a collection at registration time.
        return []

    def _sections(self, view: StateView) -> tuple[Section, ...]:
        return (lambda: gpu.families(view), lambda: host.families(view),
                lambda: processes.families(view, self.top_processes),
                lambda: cgroups.families(view, self.top_processes),
                lambda: copies.families(view, self.top_processes), lambda: probe.families(view),
                lambda: status.families(view))

    def collect(self) -> Iterator[Metric]:
        view = self.state.view()
        out: list[Metric] = []
        failed = 0
        for build in self._sections(view):
            try:
                out.extend(build())
            except Exception:  # one bad section must not fail the scrape; the counter tells
                failed += 1
        with self._lock:
            self.scrape_errors += failed
            errors = self.scrape_errors
        counter = Counter("scrape_errors_total", "metric sections left out of a scrape because building them failed")
        counter.add((), errors)
        out.append(counter.family)
        return iter(served(out))  # every label value of every family, whoever built it


def build_registry(state: ExportState, top_processes: int = DEFAULT_TOP) -> CollectorRegistry:
    """A registry of its own (not the global one), holding only the pinmon collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PinmonCollector(state, top_processes))
    return registry


def metrics_text(registry: CollectorRegistry) -> str:
    """The Prometheus text exposition format (0.0.4) of ``registry``."""
    return generate_latest(registry).decode("utf-8")
