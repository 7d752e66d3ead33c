"""The options pinmon and several of its commands share, and the one place their values are settled.

Each shared option is declared once here (name, type and bounds, help) with ``default=SUPPRESS``,
and reaches a parser through argparse's ``parents``: ``shared("config", "interval")``. The top-level
parser takes every one of them, so ``pinmon --interval 2 record`` and ``pinmon record --interval 2``
are the same; a command takes those it uses (given in both places, the one after the command counts).
An option that is not given leaves no attribute, and ``resolve`` settles each value once: the
argument, else the config file, else the built-in default, into a ``Settings`` (``settings.py``).
Commands read ``Settings``, never a default of their own.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable

from ..limits import MAX_INTERVAL_S, MIN_INTERVAL_S
from .common import interval_arg, load_config, oom_lookback_arg, probe_every_arg, size_arg
from .config import DEFAULT_INTERVAL_S
from .parser import CliParser
from .settings import APP_PROBE_EVERY_S, Settings


def _config(p: CliParser) -> None:
    p.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                   help="TOML config (default: the user config dir's pinmon/config.toml)")


def _interval(p: CliParser) -> None:
    p.add_argument("--interval", type=interval_arg, default=argparse.SUPPRESS, metavar="S",
                   help=f"seconds between snapshots, {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g}"
                        f" (default {DEFAULT_INTERVAL_S:g}, or the config file's interval)")


def _max_pinned(p: CliParser) -> None:
    p.add_argument("--max-pinned", type=size_arg, default=argparse.SUPPRESS, metavar="SIZE",
                   help="cap on pinned bytes a probe may allocate (default 256M, never over 5%% of available RAM)")


def _probe_every(p: CliParser) -> None:
    p.add_argument("--probe-every", type=probe_every_arg, default=argparse.SUPPRESS, metavar="S",
                   help=f"seconds between automatic quick probes: the live app's (default {APP_PROBE_EVERY_S:g};"
                        " none with --no-probe) or pinmon export's (default: none)")


def _oom_lookback(p: CliParser) -> None:
    p.add_argument("--oom-lookback", type=oom_lookback_arg, default=argparse.SUPPRESS, metavar="S",
                   help="seconds of the kernel's log searched for memory cgroup OOM kills, 0 for none"
                        " (default 86400, or the config file's oom_lookback)")


SHARED: dict[str, Callable[[CliParser], None]] = {
    "config": _config, "interval": _interval, "max_pinned": _max_pinned, "probe_every": _probe_every,
    "oom_lookback": _oom_lookback}


def shared(*names: str) -> list[CliParser]:
    """``parents`` for a parser that takes these shared options (keys of ``SHARED``)."""
    parent = CliParser(add_help=False)
    for name in names:
        SHARED[name](parent)
    return [parent]


def resolve(args: argparse.Namespace) -> Settings:
    """The settings of one run: each value from its argument, else the config file, else the
    built-in default. Raises ``UsageError`` for a config file that cannot be used."""
    config = load_config(getattr(args, "config", None))
    interval = getattr(args, "interval", None)
    app_probes = config.app_probes
    if getattr(args, "no_probe", False) and app_probes == "auto":
        app_probes = "manual"  # --no-probe stops the automatic ones; a config's "off" stays off
    return Settings(config=config,
                    interval_s=config.interval_s if interval is None else interval,
                    max_pinned_bytes=getattr(args, "max_pinned", None),
                    probe_every_s=getattr(args, "probe_every", None),
                    app_probes=app_probes,
                    oom_lookback_s=getattr(args, "oom_lookback", config.oom_lookback_s))
