"""What the app's worker threads run, and the messages they post to the UI thread.

The poll thread reads the source at the session's period (a replay's follows its speed; a paused
replay waits) and posts each snapshot, a failed read or the end of a recording. The probe thread
runs one probe and posts its progress and its result. The attach thread runs one attach window and
posts how it ended. None touches the session's state: the UI thread owns it and applies the messages.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from textual.message import Message

from ..model import ProbeResult, Snapshot
from ..model.kinds import ProbeKind
from ..model.source import Source
from .view.attach import AttachEnd, AttachRunner
from .view.session import Session


class SnapshotReady(Message):
    def __init__(self, snapshot: Snapshot):
        super().__init__()
        self.snapshot = snapshot


class SourceFailed(Message):
    def __init__(self, error: str):
        super().__init__()
        self.error = error


class SourceEnded(Message):
    pass


class ProbeProgress(Message):
    def __init__(self, done: float, total: float | None, label: str):
        super().__init__()
        self.done, self.total, self.label = done, total, label


class ProbeFinished(Message):
    def __init__(self, result: ProbeResult, seconds: float):
        super().__init__()
        self.result, self.seconds = result, seconds


class AttachFinished(Message):
    def __init__(self, end: AttachEnd):
        super().__init__()
        self.end = end


class Poller:
    """Reads ``source`` until it ends or ``stop`` is set; ``wake`` cuts a wait short (a speed
    change, the end of a pause); ``done`` is set once the thread has finished."""

    def __init__(self, source: Source, session: Session, post: Callable[[Message], object]):
        self.source, self.session, self.post = source, session, post
        self.stop = threading.Event()
        self.wake = threading.Event()
        self.done = threading.Event()
        self.done.set()  # nothing polls until run() starts

    def run(self) -> None:
        self.done.clear()
        try:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    snap = self.source.snapshot()
                except Exception as e:  # a broken reading degrades to a notice; polling goes on
                    self.post(SourceFailed(f"{type(e).__name__}: {e}"))
                else:
                    if snap is None:
                        self.post(SourceEnded())
                        return
                    self.post(SnapshotReady(snap))
                self._sleep_until_due(started)
        finally:
            self.done.set()

    def _sleep_until_due(self, started: float) -> None:
        # Re-reads the period after every wake-up, so a speed change applies at once.
        session = self.session
        while not self.stop.is_set():
            if not session.live and session.paused:
                self.wake.wait(0.5)  # unpausing sets wake; the timeout covers a lost wake-up
                self.wake.clear()
                started = time.monotonic()
                continue
            remaining = started + session.period_s() - time.monotonic()
            if remaining <= 0:
                return
            self.wake.wait(remaining)
            self.wake.clear()


def run_probe(runner: Callable[..., ProbeResult], kind: ProbeKind, gpu_index: int, cancel: threading.Event,
              post: Callable[[Message], object], clock: Callable[[], float]) -> None:
    """One probe on this thread: its progress and its result (with the seconds it took) posted."""
    started = clock()

    def progress(done: float, total: float | None, label: object = "") -> None:
        post(ProbeProgress(done, total, str(label)))

    try:
        result = runner(kind, gpu_index=gpu_index, progress=progress, cancel=cancel)
    except Exception as e:  # the runner promises not to raise; if it does, say so, invent nothing
        result = ProbeResult(time=time.time(), gpu_index=gpu_index, status="unavailable", kind=kind,
                             reason=f"probe failed: {type(e).__name__}: {e}")
    post(ProbeFinished(result, max(0.0, clock() - started)))


def run_attach(runner: AttachRunner, pid: int, seconds: float, stop: threading.Event, attached: threading.Event,
               post: Callable[[Message], object]) -> None:
    """One attach window on this thread; how it ended posted (a runner that raises: its error as the
    reason, so the key says something and the app goes on)."""
    try:
        end = runner(pid, seconds, stop, attached)
    except Exception as e:
        end = AttachEnd(pid, f"attach failed: {type(e).__name__}: {e}")
    post(AttachFinished(end))
