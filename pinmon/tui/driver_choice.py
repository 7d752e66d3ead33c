"""Which terminal driver the app runs on: Textual's own, unless the user opts in to the quiet one.

``pinmon/tui/driver.py`` replaces the input thread of Textual's Linux driver so that an idle app
does not wake ten times a second. It builds on Textual internals (a private key parser and the
driver's exit event), so it is opt-in (``PINMON_QUIET_INPUT=1``), imported under a guard, and
taken only where ``driver.supported()`` finds those internals as expected; on any mismatch, on
another platform, or when ``TEXTUAL_DRIVER`` names a driver, Textual's own driver runs.
"""
from __future__ import annotations

import os

OPT_IN_ENV = "PINMON_QUIET_INPUT"


def quiet_input_requested(env=None) -> bool:
    value = (os.environ if env is None else env).get(OPT_IN_ENV, "")
    return value.strip().lower() in ("1", "yes", "true", "on")


def choose_driver(stock: type, env=None) -> type:
    """``stock`` (the driver Textual picked) or the quiet driver, as described above."""
    if not quiet_input_requested(env):
        return stock
    try:
        from textual import constants
        from textual.drivers.linux_driver import LinuxDriver

        if constants.DRIVER is not None or stock is not LinuxDriver:
            return stock  # a driver chosen through TEXTUAL_DRIVER, or not Linux: kept
        from . import driver
    except Exception:  # not Linux (no termios), or Textual's internals moved: its own driver
        return stock
    try:
        return driver.QuietLinuxDriver if driver.supported() else stock
    except Exception:
        return stock
