"""The Prometheus exporter: the latest snapshot and its findings as metrics, served over HTTP.

Data flows one way: a ``Source`` (live collector or replay) -> ``Refresher`` (background thread:
snapshot, advisor) -> ``ExportState`` -> ``PinmonCollector`` (built at scrape time from the cached
state, so a scrape never waits for collection) -> ``MetricsServer``. The exporter never calls NVML
or CUDA itself: the live collector and the probe engine do.
"""
from .prometheus import PinmonCollector, build_registry, metrics_text
from .refresher import Refresher
from .server import MetricsServer
from .state import ExportState

__all__ = ["ExportState", "MetricsServer", "PinmonCollector", "Refresher", "build_registry", "metrics_text"]
