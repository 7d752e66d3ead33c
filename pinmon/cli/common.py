"""What more than one command uses: exit codes, ``UsageError``, argument types, the config, advice
with the config's disabled rules, strict JSON, replays and their notices, the terminal app.

Argument types raise ``argparse.ArgumentTypeError``, which the parser turns into one line naming the
option; the bounds come from ``pinmon.limits``. Everything else raises ``UsageError`` for bad input,
which ``main`` prints as one line and maps to the command's exit code.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..limits import (
    MAX_DURATION_S,
    MAX_GPUS,
    MAX_INTERVAL_S,
    MAX_PID,
    MAX_PROBE_EVERY_S,
    MAX_SPEED,
    MAX_TOP_PROCESSES,
    MAX_WINDOW_S,
    MIN_INTERVAL_S,
    MIN_PROBE_EVERY_S,
    MIN_SPEED,
)

if TYPE_CHECKING:  # imported where used, so a command loads only what it needs
    from ..collect.attached import RequestedWindows
    from ..model import Finding, ProbeResult, Snapshot
    from ..model.source import Source
    from ..recording.replay import ReplaySource
    from ..tui.view.first_frame import FirstFrame
    from .config import Config
    from .settings import Settings

EXIT_BAD_INPUT = 2
# pinmon check follows the Nagios convention: 0 ok, 1 warning, 2 critical, 3 unknown (could not assess).
EXIT_CHECK_UNKNOWN = 3


class UsageError(Exception):
    """Bad input; the message is one line for the user."""


# --- argument types -------------------------------------------------------------------------------

def fmt_bound_s(seconds: float) -> str:
    """A bound in seconds as a user types it: 0.01, 3600, 31622400 (366 days); never 3.16224e+07."""
    text = f"{seconds:.0f}" if seconds >= 1e6 else f"{seconds:g}"
    return f"{text} ({seconds / 86400:g} days)" if seconds >= 86400 * 2 else text


def seconds_arg(low: float, high: float, what: str) -> Callable[[str], float]:
    """An argparse type: seconds from ``low`` to ``high`` (the caps in pinmon.limits)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not low <= v <= high:  # NaN fails too
            raise argparse.ArgumentTypeError(f"{what} must be a positive number of seconds from"
                                             f" {fmt_bound_s(low)} to {fmt_bound_s(high)}, got {text!r}")
        return v
    return parse


interval_arg = seconds_arg(MIN_INTERVAL_S, MAX_INTERVAL_S, "an interval")
window_arg = seconds_arg(MIN_INTERVAL_S, MAX_WINDOW_S, "the window")
duration_arg = seconds_arg(MIN_INTERVAL_S, MAX_DURATION_S, "the duration")
probe_every_arg = seconds_arg(MIN_PROBE_EVERY_S, MAX_PROBE_EVERY_S, "the probe period")


def oom_lookback_arg(text: str) -> float:
    """An argparse type: seconds of the kernel's log searched for OOM kills, 0 (off) to 366 days."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= v <= MAX_DURATION_S:  # NaN fails too
        raise argparse.ArgumentTypeError(f"the OOM lookback is a number of seconds from 0 (off) to"
                                         f" {fmt_bound_s(MAX_DURATION_S)}, got {text!r}")
    return v


def speed_arg(text: str) -> float:
    """An argparse type: a replay speed factor within pinmon.limits."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not MIN_SPEED <= v <= MAX_SPEED:
        raise argparse.ArgumentTypeError(f"speed is a factor (2 plays twice as fast, 0.5 at half speed),"
                                         f" from {MIN_SPEED:g} to {MAX_SPEED:g}, got {text!r}")
    return v


def int_arg(low: int, high: int, what: str | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high`` (the caps in pinmon.limits). With
    ``what`` ("a process id"), anything else is "not a process id: 'TEXT'"; without it, text that is not
    a whole number says so, and a number out of range gets the range."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what or 'a whole number'}: {text!r}") from None
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}" if what else
                                             f"must be {low}-{high}, got {text!r}")
        return v
    return parse


pid_arg = int_arg(1, MAX_PID, "a process id")  # one the kernel could hand out
top_processes_arg = int_arg(0, MAX_TOP_PROCESSES)
_cuda_index_arg = int_arg(0, MAX_GPUS - 1, "a CUDA device index or 'all'")


def cuda_device_arg(text: str) -> int | str:
    """An argparse type: a CUDA device index (CUDA's numbering, below ``MAX_GPUS``) or ``"all"``."""
    return "all" if text == "all" else _cuda_index_arg(text)


def size_arg(text: str) -> int:
    """An argparse type: bytes from a size like ``256M`` (``units.parse_size``)."""
    from ..units import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


# --- config, advice, output -----------------------------------------------------------------------

def load_config(path: str | None) -> Config:
    """The config file at ``path`` (default: the user's); UsageError naming what is wrong with it."""
    from .config import ConfigError
    from .config import load_config as load

    try:
        return load(path)
    except ConfigError as e:
        raise UsageError(str(e)) from None


def advise(history: Sequence[Snapshot], config: Config) -> list[Finding]:
    """The advisor's findings over ``history`` with the config's thresholds, less its disabled rules."""
    from ..advise import advise as run_rules

    findings = run_rules(history, config.thresholds)
    if config.disabled_rules:
        findings = [f for f in findings if f.rule not in config.disabled_rules]
    return findings


def dumps(obj: object, **kw: Any) -> str:
    """JSON text that is always valid JSON: a NaN or infinity (none should reach here) is refused
    by ``allow_nan=False`` rather than printed bare."""
    return json.dumps(obj, allow_nan=False, **kw)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --- sources and the terminal app -----------------------------------------------------------------

def open_replay(path: str) -> ReplaySource:
    """A ``ReplaySource`` of the recording at ``path``; UsageError when it cannot be read."""
    from ..recording import RecordingError
    from ..recording.replay import ReplaySource

    try:
        return ReplaySource(path)
    except RecordingError as e:
        raise UsageError(str(e)) from None


def print_notices(source: Source, prefix: str = "pinmon") -> None:
    """The source's own notices (a recording that ends early), one line each on stderr."""
    from ..units import printable

    for n in getattr(source, "notices", []):
        print(f"{prefix}: {printable(n, 2000)}", file=sys.stderr)


def no_app_here(env: Mapping[str, str] | None = None, stdout: TextIO | None = None) -> str | None:
    """Why the full-screen app cannot draw here, as the words that follow "pinmon: " on stderr
    (None where it can): stdout is not a terminal, or the terminal says it cannot place the cursor
    (``TERM`` dumb, or unset). The commands then print the check report instead."""
    out = sys.stdout if stdout is None else stdout
    try:
        tty = out.isatty()
    except (AttributeError, ValueError):  # closed, or no file at all
        tty = False
    if not tty:
        return "stdout is not a terminal"
    term = (os.environ if env is None else env).get("TERM", "").strip()
    if term in ("", "dumb"):
        return f"TERM is {'unset' if not term else 'dumb'}, so no full-screen app"
    return None


# Why the live app has no probe numbers when the config forbids its probes.
PROBES_OFF_REASON = 'probes are off in the config (app_probes = "off")'


def run_app(source: Source, settings: Settings, speed: float = 1.0, attach_all: bool = False,
            attach_windows: RequestedWindows | None = None, frame: FirstFrame | None = None) -> int:
    """The terminal app on ``source`` with the config's thresholds. Live, its probes follow
    ``settings.app_probes``: automatic ones every ``app_probe_every_s`` and p/s ("auto"), p/s only
    ("manual", also ``--no-probe``), or none, with p and s hidden ("off"). ``attach_all``: the source
    keeps every CUDA process attached (``--attach``); else ``attach_windows``, the source's attached
    source, takes the attach key's windows (a), where attaching can work here (root, no lockdown).
    ``frame``: the frame drawn before Textual loads, where the caller drew it; else drawn here."""
    if frame is None:
        from ..tui.view.first_frame import draw_first_frame

        frame = draw_first_frame()
    try:
        return _run_app(source, settings, speed, attach_all, attach_windows, frame)
    finally:
        if frame is not None:
            frame.abandon()  # where Textual never took the terminal (an error first); else a no-op


def _run_app(source: Source, settings: Settings, speed: float, attach_all: bool,
             attach_windows: RequestedWindows | None, frame: FirstFrame | None) -> int:
    try:
        from ..tui.app import run_app as run
    except ImportError as e:  # the app is part of the package; this only guards broken installs
        raise UsageError(f"terminal app unavailable: {e}") from None
    config = settings.config
    kwargs: dict[str, Any] = {}
    if source.live and settings.app_probes == "off":
        kwargs.update(probe_unavailable_reason=PROBES_OFF_REASON, probe_every_s=None, probe_keys=False)
    elif source.live:
        # Only whether CuPy is installed is asked before the first frame; importing it and finding
        # the GPU wait for the first probe, on its worker thread (a probe that cannot run says why).
        from ..probe.cuda import CUPY_MISSING, UNAVAILABLE_PREFIX, cupy_installed

        if cupy_installed():
            def runner(kind: str = "quick", **kw: Any) -> ProbeResult:
                from ..probe import run_probe

                return run_probe(kind, max_pinned_bytes=settings.max_pinned_bytes, **kw)
            kwargs.update(probe_runner=runner, probe_unavailable_reason=None)
        else:
            kwargs.update(probe_unavailable_reason=UNAVAILABLE_PREFIX + CUPY_MISSING)
        kwargs.update(probe_every_s=settings.app_probe_every_s)
    if source.live:
        kwargs.update(attach_all=attach_all, attach_window_s=config.attach_window_s,
                      **attach_key(attach_windows, attach_all))
    interval = settings.interval_s if source.live else getattr(source, "interval_s", 1.0)
    if frame is not None:
        kwargs["before_start"] = frame.handover
    return run(source=source, advisor=lambda h: advise(h, config), interval_s=interval, speed=speed,
               thresholds=config.thresholds, **kwargs) or 0


# Why the live app's attach key has nothing to attach with, where no window can be taken in.
NO_ATTACH_SOURCE = "this source takes no attach windows"


def attach_key(windows: RequestedWindows | None, attach_all: bool) -> dict[str, Any]:
    """The app's options for its attach key: a runner, or why it cannot attach (known before trying:
    not root, a locked-down kernel; the rest, a missing tracefs or a file system that refuses uprobes,
    the key says when pressed)."""
    if attach_all:
        return {}
    if windows is None:
        return {"attach_unavailable_reason": NO_ATTACH_SOURCE}
    from ..attach.tracefs import preflight
    from .attaching import key_window

    why = preflight()
    if why is not None:
        return {"attach_unavailable_reason": why}
    return {"attach_runner": key_window(windows)}
