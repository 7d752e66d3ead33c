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
from typing import Callable, Optional, Union

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

EXIT_BAD_INPUT = 2
# pinmon check follows the Nagios convention: 0 ok, 1 warning, 2 critical, 3 unknown (could not assess).
EXIT_CHECK_UNKNOWN = 3
# The advisor sees the last 600 snapshots (10 minutes at 1 s), as in the terminal app.
ADVISOR_WINDOW = 600


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


def int_arg(low: int, high: int, what: Optional[str] = None) -> Callable[[str], int]:
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


def cuda_device_arg(text: str) -> Union[int, str]:
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

def load_config(path: Optional[str]):
    """The config file at ``path`` (default: the user's); UsageError naming what is wrong with it."""
    from .config import ConfigError
    from .config import load_config as load

    try:
        return load(path)
    except ConfigError as e:
        raise UsageError(str(e)) from None


def advise(history, config) -> list:
    """The advisor's findings over ``history`` with the config's thresholds, less its disabled rules."""
    from ..advise import advise as run_rules

    findings = run_rules(history, config.thresholds)
    if config.disabled_rules:
        findings = [f for f in findings if f.rule not in config.disabled_rules]
    return findings


def dumps(obj, **kw) -> str:
    """JSON text that is always valid JSON: a NaN or infinity (none should reach here) is refused
    by ``allow_nan=False`` rather than printed bare."""
    return json.dumps(obj, allow_nan=False, **kw)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --- sources and the terminal app -----------------------------------------------------------------

def open_replay(path: str):
    """A ``ReplaySource`` of the recording at ``path``; UsageError when it cannot be read."""
    from ..recording import RecordingError
    from ..recording.replay import ReplaySource

    try:
        return ReplaySource(path)
    except RecordingError as e:
        raise UsageError(str(e)) from None


def print_notices(source, prefix: str = "pinmon") -> None:
    """The source's own notices (a recording that ends early), one line each on stderr."""
    from ..units import printable

    for n in getattr(source, "notices", []):
        print(f"{prefix}: {printable(n, 2000)}", file=sys.stderr)


def no_app_here(env=None, stdout=None) -> Optional[str]:
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


def run_app(source, config, args, speed: float = 1.0) -> int:
    """The terminal app on ``source``; live, with automatic probes unless ``--no-probe``."""
    try:
        from ..tui.app import run_app as run
    except ImportError as e:  # the app is part of the package; this only guards broken installs
        raise UsageError(f"terminal app unavailable: {e}") from None
    kwargs = {}
    if source.live and not args.no_probe:
        from ..probe import probe_available, run_probe

        ok, reason = probe_available()
        if ok:
            def runner(kind="quick", **kw):
                return run_probe(kind, max_pinned_bytes=args.max_pinned, **kw)
            kwargs["probe_runner"] = runner
        kwargs["probe_unavailable_reason"] = reason
        kwargs["probe_every_s"] = args.probe_every
    elif source.live:
        kwargs["probe_unavailable_reason"] = "probe disabled (--no-probe)"
        kwargs["probe_every_s"] = None
    interval = (args.interval or config.interval_s) if source.live else getattr(source, "interval_s", 1.0)
    return run(source=source, advisor=lambda h: advise(h, config), interval_s=interval, speed=speed,
               **kwargs) or 0
