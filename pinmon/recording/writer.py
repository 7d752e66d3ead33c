"""Writing recordings: ``Recorder`` writes snapshots to a new file, one flushed JSON line each.

Each line is flushed as it is written (a gzip sync-flush for .gz), so a recording cut short by a crash
or a closed SSH session is still readable up to its last whole line. An existing file is never
overwritten, and a new one is readable by its owner only (it holds every user's command lines).
"""
from __future__ import annotations

import gzip
import io
import json
import os
import sys
import time
import zlib
from typing import IO

from ..model import Snapshot
from .reader import RecordingError

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
        self._raw: IO[bytes] | None = None
        try:
            if path == "-":
                self._f: IO[str] | None = sys.stdout
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

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def default_recording_path(directory: str = ".", now: float | None = None) -> str:
    """A new file name like ./pinmon-20261202-153000.jsonl.gz that does not exist yet."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = os.path.join(directory, f"pinmon-{stamp}")
    path, n = base + ".jsonl.gz", 1
    while os.path.exists(path):
        path, n = f"{base}-{n}.jsonl.gz", n + 1
    return path
