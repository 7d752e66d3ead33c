"""Replay: a recording (JSON lines of ``pinmon.snapshot/1``) as a ``Source``.

The first line is validated when the file is opened, so a wrong file fails at once with a one-line
reason. A damaged line later on (a recording cut short, a corrupt or binary line, a line or line
count over the caps in ``pinmon.limits``) ends the replay with a notice naming that line, after
every valid line before it. Snapshots come back with ``source="replay"``.
"""
from __future__ import annotations

import dataclasses
import json
from collections import deque
from typing import Any, Optional

from ..infile import Damaged, InputError, LineReader, TooLarge, read_capped
from ..limits import MAX_SNAPSHOT_FILE_BYTES
from ..model import SchemaError, Snapshot
from ..outputs.record import RecordingError


class NestedTooDeep(RecordingError):
    """JSON nested past the parser's recursion limit: no snapshot is, so the file is refused."""


def parse_json(text: "str | bytes", where: str) -> Any:
    """JSON from one line or document; RecordingError (one line) for anything that is not JSON."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise RecordingError(f"{where}: not UTF-8 text (binary data)") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise NestedTooDeep(f"{where}: not a snapshot (JSON nested too deeply)") from None
    except ValueError as e:
        msg = getattr(e, "msg", None) or " ".join(str(e).split())
        raise RecordingError(f"{where}: not JSON ({msg})") from None


def _snapshot(data: Any, where: str) -> Snapshot:
    try:
        return Snapshot.from_dict(data)
    except SchemaError as e:
        raise RecordingError(f"{where}: {e}") from None


def _decode(line: "str | bytes", where: str) -> Snapshot:
    return _snapshot(parse_json(line, where), where)


class ReplaySource:
    live = False

    def __init__(self, path: str, loop: bool = False):
        self.path = path
        self.loop = loop
        self.notices: list[str] = []
        self._reader: Optional[LineReader] = None
        self._first = self._open_and_read_first()
        self._pending: Optional[Snapshot] = self._first
        self.interval_s = self._first.interval_s or 1.0

    def _open(self) -> None:
        try:
            self._reader = LineReader(self.path)
        except InputError as e:
            raise RecordingError(str(e)) from None

    def _next_line(self) -> Optional[bytes]:
        assert self._reader is not None
        try:
            return self._reader.next_line()
        except InputError as e:
            raise RecordingError(str(e)) from None

    def _where(self) -> str:
        return f"{self.path}:{self._reader.line_no if self._reader else 0}"

    def _open_and_read_first(self) -> Snapshot:
        self._open()
        try:
            line = self._next_line()
            if line is None:
                raise RecordingError(f"{self.path}: empty recording (no snapshots)")
            return _decode(line, self._where())
        except RecordingError:
            self.close()
            raise

    def snapshot(self) -> Optional[Snapshot]:
        if self._pending is not None:
            snap, self._pending = self._pending, None
            return self._mark(snap)
        if self._reader is None:
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
            return self._mark(_decode(line, self._where()))
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


def read_snapshot_file(path: str) -> Snapshot:
    """One snapshot from a file: a ``--json`` dump, a check output, or a recording (its last whole
    snapshot: the most recent state)."""
    data = _whole_document(path)
    if data is None:
        data = _last_recorded(path)
    if isinstance(data, dict) and data.get("schema") == "pinmon.check/1":
        data = data.get("snapshot")
    return _snapshot(data, path)


def _whole_document(path: str) -> Any:
    """The file parsed as one JSON document; None when it is not one (maybe a recording)."""
    try:
        text = read_capped(path, MAX_SNAPSHOT_FILE_BYTES, "a snapshot")
    except (TooLarge, Damaged):
        return None  # a long or damaged recording: read it line by line
    except InputError as e:
        raise RecordingError(str(e)) from None
    if not text.strip():
        raise RecordingError(f"{path}: empty file")
    try:
        return parse_json(text, path)
    except NestedTooDeep:
        raise
    except RecordingError:
        return None


def _last_recorded(path: str) -> Any:
    """The last line that parses as JSON among the last two lines read before the end or the first
    unreadable line (a recording cut short ends in a partial line)."""
    try:
        reader = LineReader(path)
    except InputError as e:
        raise RecordingError(str(e)) from None
    tail: deque = deque(maxlen=2)
    try:
        while True:
            try:
                line = reader.next_line()
            except InputError as e:
                if not tail:
                    raise RecordingError(str(e)) from None
                break
            if line is None:
                break
            tail.append((line, reader.line_no))
    finally:
        reader.close()
    for line, line_no in reversed(tail):
        try:
            return parse_json(line, f"{path}:{line_no}")
        except NestedTooDeep:
            raise
        except RecordingError:
            continue
    raise RecordingError(f"{path}: not JSON and not a recording")
