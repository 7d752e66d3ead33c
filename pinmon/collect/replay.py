"""Replay: a recording (JSON lines of ``pinmon.snapshot/1``) as a ``Source``.

The first line is validated when the file is opened, so a wrong file fails at once with a one-line
reason. A truncated or corrupt line later on (a recording cut short) ends the replay with a notice
on the last snapshot instead of a crash. Snapshots come back with ``source="replay"``.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import zlib
from typing import IO, Optional

from ..model import SchemaError, Snapshot
from ..outputs.record import RecordingError, open_text


def _decode(line: str, where: str) -> Snapshot:
    try:
        data = json.loads(line)
    except ValueError as e:
        raise RecordingError(f"{where}: not JSON ({e.msg})") from None
    try:
        return Snapshot.from_dict(data)
    except SchemaError as e:
        raise RecordingError(f"{where}: {e}") from None


class ReplaySource:
    live = False

    def __init__(self, path: str, loop: bool = False):
        self.path = path
        self.loop = loop
        self.notices: list[str] = []
        self._f: Optional[IO[str]] = None
        self._line_no = 0
        self._first = self._open_and_read_first()
        self._pending: Optional[Snapshot] = self._first
        self.interval_s = self._first.interval_s or 1.0

    def _open(self) -> None:
        try:
            self._f = open_text(self.path, "r")
        except FileNotFoundError:
            raise RecordingError(f"{self.path}: no such file") from None
        except IsADirectoryError:
            raise RecordingError(f"{self.path}: is a directory, not a recording") from None
        except OSError as e:
            raise RecordingError(f"{self.path}: cannot open ({e.strerror or e})") from None
        self._line_no = 0

    def _next_line(self) -> Optional[str]:
        assert self._f is not None
        while True:
            try:
                line = self._f.readline()
            except (OSError, EOFError, UnicodeDecodeError, zlib.error, gzip.BadGzipFile) as e:
                raise RecordingError(f"{self.path}: unreadable after line {self._line_no} ({e})") from None
            if not line:
                return None
            self._line_no += 1
            if line.strip():
                return line

    def _open_and_read_first(self) -> Snapshot:
        self._open()
        line = self._next_line()
        if line is None:
            raise RecordingError(f"{self.path}: empty recording (no snapshots)")
        return _decode(line, f"{self.path}:{self._line_no}")

    def snapshot(self) -> Optional[Snapshot]:
        if self._pending is not None:
            snap, self._pending = self._pending, None
            return self._mark(snap)
        if self._f is None:
            return None
        try:
            line = self._next_line()
            if line is None:
                if not self.loop:
                    self.close()
                    return None
                self.close()
                self._open()
                line = self._next_line()
                if line is None:
                    return None
            return self._mark(_decode(line, f"{self.path}:{self._line_no}"))
        except RecordingError as e:
            # A damaged tail ends the replay; what came before stays valid.
            self.notices.append(f"recording ends early: {e}")
            self.close()
            return None

    def _mark(self, snap: Snapshot) -> Snapshot:
        return dataclasses.replace(snap, source="replay")

    def close(self) -> None:
        f, self._f = self._f, None
        if f is not None:
            try:
                f.close()
            except (OSError, EOFError, zlib.error):
                pass


def read_snapshot_file(path: str) -> Snapshot:
    """One snapshot from a file: a ``--json`` dump, a check output, or the first line of a recording."""
    try:
        with open_text(path, "r") as f:
            text = f.read()
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise RecordingError(f"{path}: is a directory, not a snapshot") from None
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:
        raise RecordingError(f"{path}: cannot read ({e})") from None
    if not text.strip():
        raise RecordingError(f"{path}: empty file")
    try:
        data = json.loads(text)
    except ValueError:
        # Maybe a recording: take its last whole snapshot (the most recent state).
        lines = [l for l in text.splitlines() if l.strip()]
        data = None
        for l in reversed(lines):
            try:
                data = json.loads(l)
                break
            except ValueError:
                continue
        if data is None:
            raise RecordingError(f"{path}: not JSON and not a recording") from None
    if isinstance(data, dict) and data.get("schema") == "pinmon.check/1":
        data = data.get("snapshot")
    try:
        return Snapshot.from_dict(data)
    except SchemaError as e:
        raise RecordingError(f"{path}: {e}") from None
