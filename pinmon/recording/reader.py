"""Reading recordings and snapshot files: ``RecordingReader`` reads a recording line by line,
``read_snapshot_file`` one snapshot from a ``--json`` dump, a check output or a recording's last line.

Files the user names are read through the bounded readers of ``infile`` (caps in ``pinmon.limits``).
Every problem is a ``RecordingError`` whose message is one line naming the file (and the line).
"""
from __future__ import annotations

import json
from collections import deque

from ..limits import MAX_SNAPSHOT_FILE_BYTES
from ..model import CHECK_SCHEMA, SchemaError, Snapshot
from .infile import Damaged, InputError, LineReader, TooLarge, is_blank, read_capped_buffer
from .json_cost import over_budget


class RecordingError(Exception):
    """A recording or snapshot file cannot be opened, read or written; the message is one line for the user."""


class NestedTooDeep(RecordingError):
    """JSON nested past the parser's recursion limit: no snapshot is, so the file is refused."""


class TooCostly(RecordingError):
    """JSON of more objects or values than any snapshot has (``json_cost``): refused unparsed."""


# Refusals of a whole text, not signs that it is some other format: never retried line by line.
_REFUSED = (NestedTooDeep, TooCostly)


def _parse_json(text: str | bytes | bytearray, where: str) -> object:
    """JSON from one line or document; RecordingError (one line) for anything that is not JSON, or
    that would cost more to parse than any snapshot (``json_cost``)."""
    too_costly = over_budget(text)
    if too_costly is not None:
        raise TooCostly(f"{where}: not a snapshot ({too_costly})")
    if isinstance(text, (bytes, bytearray)):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise RecordingError(f"{where}: not UTF-8 text (binary data)") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise NestedTooDeep(f"{where}: not a snapshot (JSON nested too deeply)") from None
    except ValueError as e:
        msg = (e.msg if isinstance(e, json.JSONDecodeError) else "") or " ".join(str(e).split())
        raise RecordingError(f"{where}: not JSON ({msg})") from None


def _snapshot_from(data: object, where: str) -> Snapshot:
    """The snapshot a parsed ``pinmon.snapshot`` object (/2, or /1 migrated) holds; RecordingError naming ``where``."""
    try:
        return Snapshot.from_dict(data)
    except SchemaError as e:
        raise RecordingError(f"{where}: {e}") from None


class RecordingReader:
    """A recording's snapshots in order, one line at a time; RecordingError for the file or a line."""

    def __init__(self, path: str):
        self.path = path
        try:
            self._lines: LineReader | None = LineReader(path)
        except InputError as e:
            raise RecordingError(str(e)) from None

    def where(self) -> str:
        """``path:line`` of the line read last."""
        return f"{self.path}:{self._lines.line_no if self._lines else 0}"

    def next_snapshot(self) -> Snapshot | None:
        """The next line's snapshot; None at the end (or once closed)."""
        if self._lines is None:
            return None
        try:
            line = self._lines.next_line()
        except InputError as e:
            raise RecordingError(str(e)) from None
        if line is None:
            return None
        where = self.where()
        return _snapshot_from(_parse_json(line, where), where)

    def close(self) -> None:
        lines, self._lines = self._lines, None
        if lines is not None:
            lines.close()


def read_snapshot_file(path: str) -> Snapshot:
    """One snapshot from a file: a ``--json`` dump, a check output, or a recording (its last whole
    snapshot: the most recent state)."""
    data = _whole_document(path)
    if data is None:
        data = _last_recorded(path)
    if isinstance(data, dict) and data.get("schema") == CHECK_SCHEMA:
        data = data.get("snapshot")
    return _snapshot_from(data, path)


def _whole_document(path: str) -> object:
    """The file parsed as one JSON document; None when it is not one (maybe a recording)."""
    try:
        text = read_capped_buffer(path, MAX_SNAPSHOT_FILE_BYTES, "a snapshot")
    except (TooLarge, Damaged):
        return None  # a long or damaged recording: read it line by line
    except InputError as e:
        raise RecordingError(str(e)) from None
    if is_blank(text):
        raise RecordingError(f"{path}: empty file")
    try:
        return _parse_json(text, path)
    except _REFUSED:
        raise
    except RecordingError:
        return None


def _last_recorded(path: str) -> object:
    """The last line that parses as JSON among the last two lines read before the end or the first
    unreadable line (a recording cut short ends in a partial line)."""
    try:
        reader = LineReader(path)
    except InputError as e:
        raise RecordingError(str(e)) from None
    tail: deque[tuple[bytes, int]] = deque(maxlen=2)
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
            return _parse_json(line, f"{path}:{line_no}")
        except _REFUSED:
            raise
        except RecordingError:
            continue
    raise RecordingError(f"{path}: not JSON and not a recording")
