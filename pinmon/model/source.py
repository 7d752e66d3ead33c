"""The one protocol every snapshot source implements: live collector, replay, test fakes.

The TUI, ``check``, ``record`` and the exporter only ever see a ``Source``, so a recording and the
live machine are interchangeable everywhere. It sits beside the model, not in ``collect/``, so a view
can name it without importing the code that reads the machine.
"""
from __future__ import annotations

from typing import Optional, Protocol, runtime_checkable

from . import Snapshot


@runtime_checkable
class Source(Protocol):
    live: bool  # False for recordings: views say REPLAY

    def snapshot(self) -> Optional[Snapshot]:
        """The next snapshot; ``None`` when a finite source (a recording) is exhausted."""

    def close(self) -> None:
        """Release threads, handles and files. Safe to call twice."""
