"""``Settings``: what the shared options and the config file settle, once, for every command.

``options.resolve`` settles them (the argument, else the config file, else the built-in default);
commands and ``common`` read them. A module of its own, below ``common`` and ``options``, so both
can name the type.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..limits import DEFAULT_OOM_LOOKBACK_S
from .config import Config

# Seconds between the terminal app's automatic quick probes when --probe-every is not given.
APP_PROBE_EVERY_S = 60.0


@dataclass(frozen=True)
class Settings:
    """What the shared options and the config file settle, once, for every command."""
    config: Config
    interval_s: float
    max_pinned_bytes: int | None  # None: the probe's own cap (256M, never over 5% of available RAM)
    probe_every_s: float | None  # --probe-every where given; each user of it has its own "not given"
    app_probes: str  # the terminal app's probes: "auto", "manual" (p and s only) or "off"
    oom_lookback_s: float = DEFAULT_OOM_LOOKBACK_S  # the kernel log's OOM kills this far back; 0: not read

    @property
    def app_probe_every_s(self) -> float | None:
        """Seconds between the live app's automatic probes; None: no automatic probes."""
        if self.app_probes != "auto":
            return None
        return APP_PROBE_EVERY_S if self.probe_every_s is None else self.probe_every_s
