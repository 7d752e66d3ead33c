"""Recordings: snapshots as JSON lines, one ``pinmon.snapshot/1`` object per line (gzip for *.gz).

Each line is flushed as it is written (a gzip sync-flush for .gz), so a recording cut short by a
crash or a closed SSH session is still readable up to its last whole line. A recorder never
overwrites an existing file.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import zlib
from typing import IO, Optional

from ..model import Snapshot


class RecordingError(Exception):
    """A recording cannot be opened, read or written; the message is one line for the user."""


def open_text(path: str, mode: str) -> IO[str]:
    """Open a recording for text read ("r") or exclusive create ("x"); gzip when it ends in .gz."""
    if path.endswith(".gz"):
        raw = open(path, mode + "b")
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode=mode + "b"), encoding="utf-8")
    return open(path, mode, encoding="utf-8")


class Recorder:
    def __init__(self, path: str):
        self.path = path
        self.count = 0
        try:
            self._f: Optional[IO[str]] = open_text(path, "x")
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
        if f is not None:
            try:
                f.close()
            except OSError:
                pass

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def default_recording_path(directory: str = ".", now: Optional[float] = None) -> str:
    """A new file name like ./pinmon-20261202-153000.jsonl.gz that does not exist yet."""
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = os.path.join(directory, f"pinmon-{stamp}")
    path, n = base + ".jsonl.gz", 1
    while os.path.exists(path):
        path, n = f"{base}-{n}.jsonl.gz", n + 1
    return path
