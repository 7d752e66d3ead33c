"""The TOML config file: refresh interval, the app's probes and attach window, advisor thresholds
and disabled rules.

Read from ``--config FILE`` or else ``<user config dir>/pinmon/config.toml`` when that exists; never
written. The default path comes from the environment (``XDG_CONFIG_HOME``, ``HOME``), which ``su``
without ``-`` and ``sudo -E`` carry over from another user: a default file that pinmon's effective
user does not own, or that sits in a directory someone else owns or can write, is ignored with a
notice (``Config.notices``), so another user cannot disable root's rules. ``--config`` names a file on
purpose and is read as given. Schema::

    interval = 2.0                       # seconds, 0.01 to 3600 (pinmon.limits)
    app_probes = "manual"                # the terminal app's probes: "auto" (default), "manual", "off"
    oom_lookback = 86400                 # seconds of the kernel's log searched for OOM kills; 0: off
    attach_window = 10                   # seconds the app's attach key (a) counts a process's copies
    disabled_rules = ["memlock-limit-low"]

    [thresholds]                         # one key per Thresholds field, same names
    pinned_ram_warning_fraction = 0.25
    growth_min_bytes = "2G"              # byte thresholds take an integer or a size string

Any problem raises ``ConfigError`` with a one-line message naming the file and the key.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import stat
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ..advise.registry import RULES
from ..advise.thresholds import Thresholds, threshold_fields
from ..limits import (
    DEFAULT_ATTACH_WINDOW_S,
    DEFAULT_OOM_LOOKBACK_S,
    MAX_ATTACH_S,
    MAX_CONFIG_BYTES,
    MAX_DURATION_S,
    MAX_INTERVAL_S,
    MAX_SIZE_BYTES,
    MIN_ATTACH_S,
    MIN_INTERVAL_S,
)
from ..recording.infile import InputError, read_capped
from ..units import parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_INTERVAL_S = 1.0
TOP_LEVEL_KEYS = ("interval", "app_probes", "oom_lookback", "attach_window", "thresholds", "disabled_rules")
# The terminal app's probes: automatic and on p/s; on p/s only (as --no-probe); none, p and s hidden.
APP_PROBES = ("auto", "manual", "off")


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Config:
    interval_s: float = DEFAULT_INTERVAL_S
    app_probes: str = "auto"  # one of APP_PROBES
    thresholds: Thresholds = field(default_factory=Thresholds)
    disabled_rules: frozenset[str] = frozenset()
    oom_lookback_s: float = DEFAULT_OOM_LOOKBACK_S  # the kernel log's OOM kills this far back; 0: off
    attach_window_s: float = DEFAULT_ATTACH_WINDOW_S  # the app's attach key: one window this long
    path: str | None = None  # the file it was read from; None: built-in defaults
    notices: tuple[str, ...] = ()  # what the user should know (a default file that was ignored)


def default_config_path() -> str:
    try:
        import platformdirs
    except ImportError:  # a broken install should still run: fall back to the XDG default
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        return os.path.join(base, "pinmon", "config.toml")
    return os.path.join(platformdirs.user_config_dir("pinmon"), "config.toml")


def load_config(path: str | None = None) -> Config:
    """The config from ``path``, or from the default location if a file is there, else defaults."""
    if path is not None:
        return parse_config(_read(path, explicit=True), path)
    path = default_config_path()
    if not os.path.exists(path):
        return Config()
    why = untrusted_reason(path)
    if why is not None:
        return Config(notices=(f"config {path} ignored: {why}; pass --config FILE to use it",))
    return parse_config(_read(path, explicit=False), path)


def untrusted_reason(path: str, euid: int | None = None) -> str | None:
    """Why the default config at ``path`` is not this user's own, or None: the file and every
    directory above it (as named and as resolved) must belong to ``euid`` or root, and none may be
    writable by others (a root-owned sticky directory such as /tmp aside, whose entries others
    cannot replace)."""
    euid = os.geteuid() if euid is None else euid
    seen = set()
    for start in (os.path.abspath(path), os.path.realpath(path)):
        cur = start
        while cur not in seen:
            seen.add(cur)
            try:
                st = os.lstat(cur)
            except OSError as e:
                return f"{cur}: {e.strerror or e}"
            if st.st_uid not in (euid, 0):
                return f"{cur} belongs to uid {st.st_uid}, not to uid {euid} (pinmon's user)"
            sticky_root_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and st.st_uid == 0
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not stat.S_ISLNK(st.st_mode) and not sticky_root_dir:
                return f"{cur} is writable by {'others' if st.st_mode & stat.S_IWOTH else 'its group'}"
            parent = os.path.dirname(cur)
            if parent == cur:
                break
            cur = parent
    return None


def _read(path: str, explicit: bool) -> bytes:
    try:
        return read_capped(path, MAX_CONFIG_BYTES, "a config file")
    except InputError as e:
        raise ConfigError(f"config {e}") from None


def parse_config(data: bytes | str, path: str = "<string>") -> Config:
    """Validate TOML text (bytes or str) into a ``Config``; ``path`` is only used in messages."""
    where = f"config {path}"
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{where}: not UTF-8 text, so not a TOML file") from None
    try:
        doc = tomllib.loads(data)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: not valid TOML: {_one_line(str(e))}") from None
    except RecursionError:  # the TOML parser recurses once per level of nested arrays and tables
        raise ConfigError(f"{where}: nested too deeply to be a pinmon config") from None

    for key in doc:
        if key not in TOP_LEVEL_KEYS:
            raise ConfigError(f"{where}: unknown key {key}{_hint(key, TOP_LEVEL_KEYS)}")

    interval_s = _seconds(doc, "interval", DEFAULT_INTERVAL_S, MIN_INTERVAL_S, MAX_INTERVAL_S, where)

    app_probes = "auto"
    if "app_probes" in doc:
        v = doc["app_probes"]
        if v not in APP_PROBES:
            raise ConfigError(f"{where}: app_probes must be one of {', '.join(map(_show, APP_PROBES))},"
                              f" got {_show(v)}")
        app_probes = v
    oom_lookback_s = _seconds(doc, "oom_lookback", DEFAULT_OOM_LOOKBACK_S, 0, MAX_DURATION_S, where,
                              low_words="0 (off)", high_words=f"{MAX_DURATION_S:.0f} (366 days)")
    attach_window_s = _seconds(doc, "attach_window", DEFAULT_ATTACH_WINDOW_S, MIN_ATTACH_S, MAX_ATTACH_S, where)

    thresholds = Thresholds()
    if "thresholds" in doc:
        table = doc["thresholds"]
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: thresholds must be a table ([thresholds]), got {_show(table)}")
        thresholds = _thresholds(table, where)

    disabled: frozenset[str] = frozenset()
    if "disabled_rules" in doc:
        v = doc["disabled_rules"]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ConfigError(f"{where}: disabled_rules must be a list of rule ids, got {_show(v)}")
        for rule_id in v:
            if rule_id not in RULES:
                raise ConfigError(f"{where}: disabled_rules: unknown rule id {_show(rule_id)}"
                                  f"{_hint(rule_id, RULES)}")
        disabled = frozenset(v)

    return Config(interval_s=interval_s, app_probes=app_probes, thresholds=thresholds, disabled_rules=disabled,
                  oom_lookback_s=oom_lookback_s, attach_window_s=attach_window_s, path=path)


def _seconds(doc: dict[str, Any], key: str, default: float, low: float, high: float, where: str,
             low_words: str | None = None, high_words: str | None = None) -> float:
    """``doc[key]``, a number of seconds from ``low`` to ``high`` (said as ``low_words``/``high_words``
    where given), as a float; ``default`` without the key."""
    if key not in doc:
        return default
    v = doc[key]
    if not _is_number(v) or not (low <= v <= high):
        raise ConfigError(f"{where}: {key} must be a number of seconds from {low_words or f'{low:g}'} to"
                          f" {high_words or f'{high:g}'}, got {_show(v)}")
    return float(v)


def _thresholds(table: dict[str, Any], where: str) -> Thresholds:
    known = threshold_fields()
    values: dict[str, Any] = {}
    for key, raw in table.items():
        if key not in known:
            raise ConfigError(f"{where}: unknown key thresholds.{key}{_hint(key, known)}")
        kind, _doc = known[key]
        values[key] = _threshold_value(kind, raw, f"{where}: thresholds.{key}")
    result = dataclasses.replace(Thresholds(), **values)
    # A warning level above the critical one would make the warning unreachable: surely a typo.
    if result.pinned_ram_warning_fraction > result.pinned_ram_critical_fraction:
        raise ConfigError(f"{where}: thresholds.pinned_ram_warning_fraction"
                          f" ({result.pinned_ram_warning_fraction:g}) must not exceed"
                          f" thresholds.pinned_ram_critical_fraction ({result.pinned_ram_critical_fraction:g})")
    return result


def _threshold_value(kind: str, v: Any, what: str) -> float:
    if kind == "fraction":
        if not _is_number(v) or not (0 <= v <= 1):
            raise ConfigError(f"{what} must be a number between 0 and 1, got {_show(v)}")
        return float(v)
    if kind == "bytes":
        if isinstance(v, str):
            try:
                return parse_size(v)
            except ValueError:
                pass
        elif _is_number(v) and 0 <= v <= MAX_SIZE_BYTES and float(v).is_integer():
            return int(v)
        raise ConfigError(f"{what} must be a byte count (an integer from 0 to 2**60, or a size such"
                          f" as \"1G\"), got {_show(v)}")
    if kind in ("bytes_per_s", "per_s"):
        unit = "bytes per second" if kind == "bytes_per_s" else "events per second"
        if not _is_number(v) or v < 0:
            raise ConfigError(f"{what} must be a number of {unit}, 0 or more, got {_show(v)}")
        return float(v)
    if kind == "seconds":
        if not _is_number(v) or not 0 < v <= MAX_DURATION_S:
            raise ConfigError(f"{what} must be a number of seconds above 0 and at most"
                              f" {MAX_DURATION_S:.0f} (366 days), got {_show(v)}")
        return float(v)
    raise AssertionError(f"unknown threshold kind {kind!r}")  # pragma: no cover - thresholds.py bug


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _show(v: Any) -> str:
    """A value as the user wrote it, roughly: strings quoted, TOML spellings for the rest."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if v != v else ("inf" if v > 0 else "-inf")
    if isinstance(v, (int, float)):
        return repr(v)
    return str(v)  # TOML dates and times


def _hint(key: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(known)})"


def _one_line(text: str) -> str:
    return " ".join(text.split())
