"""Recordings and snapshot files: the one file format of pinmon's snapshots, its writer and its readers.

A recording is JSON lines, one ``pinmon.snapshot/1`` object per line, gzip when the name ends in .gz.
The writer (``Recorder``) flushes each line as it writes it (a gzip sync-flush for .gz), so a
recording cut short by a crash or a closed SSH session is still readable up to its last whole line,
and never overwrites an existing file. The readers take files the user names, through the bounded
readers of ``pinmon.infile`` (caps in ``pinmon.limits``): ``RecordingReader`` reads a recording line
by line, ``read_snapshot_file`` one snapshot from a ``--json`` dump, a check output or a recording.
Every problem is a ``RecordingError`` whose message is one line naming the file (and the line).
"""
from __future__ import annotations

import gzip
import io
import json
import os
import sys
import time
import zlib
from collections import deque
from typing import IO, Any, Optional

from .infile import Damaged, InputError, LineReader, TooLarge, read_capped
from .limits import MAX_SNAPSHOT_FILE_BYTES
from .model import CHECK_SCHEMA, SchemaError, Snapshot


class RecordingError(Exception):
    """A recording or snapshot file cannot be opened, read or written; the message is one line for the user."""


class NestedTooDeep(RecordingError):
    """JSON nested past the parser's recursion limit: no snapshot is, so the file is refused."""


# --- writing ---------------------------------------------------------------------------------------

# A recording holds every user's command lines: readable by its owner only.
RECORDING_MODE = 0o600
_CREATE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0))


def _create_text(path: str) -> tuple[IO[str], IO[bytes]]:
    """(text stream, the file under it) of a new file, mode 0600 (exclusive create: an existing
    file, or a symlink, is never touched); gzip for .gz."""
    raw = os.fdopen(os.open(path, _CREATE_FLAGS, RECORDING_MODE), "wb")
    if path.endswith(".gz"):
        # GzipFile does not close a file object it was given: the recorder closes ``raw`` itself.
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode="wb"), encoding="utf-8"), raw
    return io.TextIOWrapper(raw, encoding="utf-8"), raw


class Recorder:
    """Writes snapshots to a new recording, one flushed line each; ``count`` says how many.
    ``path`` "-" writes the lines to standard output."""

    def __init__(self, path: str):
        self.path = path
        self.count = 0
        self._raw: Optional[IO[bytes]] = None
        try:
            if path == "-":
                self._f: Optional[IO[str]] = sys.stdout
            else:
                self._f, self._raw = _create_text(path)
        except FileExistsError:
            raise RecordingError(f"{path} already exists; pinmon does not overwrite files") from None
        except OSError as e:
            raise RecordingError(f"cannot create {path}: {e.strerror or e}") from None

    def write(self, snapshot: Snapshot) -> None:
        if self._f is None:
            return
        try:
            self._f.write(json.dumps(snapshot.to_dict(), separators=(",", ":")) + "\n")
            self._f.flush()
            gz = getattr(self._f, "buffer", None)
            if isinstance(gz, gzip.GzipFile):
                gz.flush(zlib.Z_SYNC_FLUSH)
        except OSError as e:
            raise RecordingError(f"cannot write {self.path}: {e.strerror or e}") from None
        self.count += 1

    def close(self) -> None:
        f, self._f = self._f, None
        if f is None or self.path == "-":
            return
        for stream in (f, self._raw):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def default_recording_path(directory: str = ".", now: Optional[float] = None) -> str:
    """A new file name like ./pinmon-20261202-153000.jsonl.gz that does not exist yet."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = os.path.join(directory, f"pinmon-{stamp}")
    path, n = base + ".jsonl.gz", 1
    while os.path.exists(path):
        path, n = f"{base}-{n}.jsonl.gz", n + 1
    return path


# --- reading ---------------------------------------------------------------------------------------

def _parse_json(text: "str | bytes", where: str) -> Any:
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


def _snapshot_from(data: Any, where: str) -> Snapshot:
    """The snapshot a parsed ``pinmon.snapshot/1`` object holds; RecordingError naming ``where``."""
    try:
        return Snapshot.from_dict(data)
    except SchemaError as e:
        raise RecordingError(f"{where}: {e}") from None


class RecordingReader:
    """A recording's snapshots in order, one line at a time; RecordingError for the file or a line."""

    def __init__(self, path: str):
        self.path = path
        try:
            self._lines: Optional[LineReader] = LineReader(path)
        except InputError as e:
            raise RecordingError(str(e)) from None

    def where(self) -> str:
        """``path:line`` of the line read last."""
        return f"{self.path}:{self._lines.line_no if self._lines else 0}"

    def next_snapshot(self) -> Optional[Snapshot]:
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
        return _parse_json(text, path)
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
            return _parse_json(line, f"{path}:{line_no}")
        except NestedTooDeep:
            raise
        except RecordingError:
            continue
    raise RecordingError(f"{path}: not JSON and not a recording")
