"""The one protocol every snapshot source implements: live collector, replay, test fakes.

The TUI, ``check``, ``record`` and the exporter only ever see a ``Source``, so a recording and the
live machine are interchangeable everywhere. It sits beside the model, not in ``collect/``, so a view
can name it without importing the code that reads the machine. ``OpenedOnFirstRead`` makes a source
on the thread that first reads it.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from . import Snapshot


@runtime_checkable
class Source(Protocol):
    live: bool  # False for recordings: views say REPLAY

    def snapshot(self) -> Snapshot | None:
        """The next snapshot; ``None`` when a finite source (a recording) is exhausted."""

    def close(self) -> None:
        """Release threads, handles and files. Safe to call twice."""


class OpenedOnFirstRead:
    """A ``Source`` made by ``open_source()`` at the first ``snapshot()``, on the thread that reads it.

    The terminal app reads its source on a worker thread: opening the live collector there (NVML's
    start, the first reads of /sys) leaves the UI thread free to draw its first frame meanwhile.
    ``close()`` closes what was opened (it waits for an opening in progress) and stops any later one.
    """

    def __init__(self, open_source: Callable[[], Source], live: bool = True):
        self.live = live
        self._open = open_source
        self._source: Source | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def notices(self) -> list:
        return list(getattr(self._source, "notices", ()))

    def snapshot(self) -> Snapshot | None:
        with self._lock:
            if self._closed:
                return None
            if self._source is None:
                self._source = self._open()
            source = self._source
        return source.snapshot()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            source, self._source = self._source, None
        if source is not None:
            source.close()
