"""Recordings: the one file format of pinmon's snapshots, its writer, its readers and its replay.

A recording is JSON lines, one ``pinmon.snapshot/2`` object per line (a ``/1`` line is read
through ``model/migrate.py``), gzip when the name ends in .gz.

- ``writer``: ``Recorder`` (and ``default_recording_path``);
- ``reader``: ``RecordingReader``, ``read_snapshot_file`` and ``RecordingError``;
- ``infile``: reading files the user names, bounded (regular files only, size and line caps, gzip);
- ``replay``: ``ReplaySource``, a recording played back as a ``Source``.
"""
from .reader import NestedTooDeep, RecordingError, RecordingReader, read_snapshot_file
from .writer import RECORDING_MODE, Recorder, default_recording_path

__all__ = ["RECORDING_MODE", "NestedTooDeep", "Recorder", "RecordingError", "RecordingReader",
           "default_recording_path", "read_snapshot_file"]
