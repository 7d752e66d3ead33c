"""Replay: a recording as a ``Source``, at the recording's own pace.

The first snapshot is read when the source opens, so a wrong file fails at once with a one-line
reason (``RecordingError``). A damaged line later on (a recording cut short, a corrupt or binary
line, a line or line count over the caps in ``pinmon.limits``) ends the replay with a notice naming
that line, after every valid line before it. Snapshots come back with ``source="replay"``. The
format itself (reading and writing) is ``pinmon.recording``'s.
"""
from __future__ import annotations

import dataclasses

from ..model import Snapshot
from .reader import RecordingError, RecordingReader


class ReplaySource:
    live = False

    def __init__(self, path: str, loop: bool = False):
        self.path = path
        self.loop = loop
        self.notices: list[str] = []
        self._reader: RecordingReader | None = None
        self._pending: Snapshot | None = self._read_first()
        self.interval_s = self._pending.interval_s or 1.0

    def _read_first(self) -> Snapshot:
        self._reader = RecordingReader(self.path)
        try:
            first = self._reader.next_snapshot()
            if first is None:
                raise RecordingError(f"{self.path}: empty recording (no snapshots)")
            return first
        except RecordingError:
            self.close()
            raise

    def snapshot(self) -> Snapshot | None:
        if self._pending is not None:
            first, self._pending = self._pending, None
            return self._mark(first)
        if self._reader is None:
            return None
        try:
            snap = self._reader.next_snapshot()
            if snap is None:
                self.close()
                if not self.loop:
                    return None
                self._reader = RecordingReader(self.path)
                snap = self._reader.next_snapshot()
                if snap is None:
                    return None
            return self._mark(snap)
        except RecordingError as e:
            # A damaged tail ends the replay; what came before stays valid.
            self.notices.append(f"recording ends early: {e}")
            self.close()
            return None

    def _mark(self, snap: Snapshot) -> Snapshot:
        return dataclasses.replace(snap, source="replay")

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()
