"""Which terminal driver the app runs on: the quiet one where it fits, else Textual's own.

``pinmon/tui/driver.py`` lets the input thread of Textual's Linux driver sleep while nothing is
typed, so that an idle app does not wake ten times a second. It uses only public names of Textual
and is taken where ``driver.supported()`` finds them as expected. ``PINMON_QUIET_INPUT=0`` turns it
off; on any mismatch, on another platform, or when ``TEXTUAL_DRIVER`` names a driver, Textual's own
driver runs.
"""
from __future__ import annotations

import os

ENV = "PINMON_QUIET_INPUT"


def quiet_input_wanted(env=None) -> bool:
    """True unless the user turned the quiet input thread off."""
    value = (os.environ if env is None else env).get(ENV, "")
    return value.strip().lower() not in ("0", "no", "false", "off")


def choose_driver(stock: type, env=None) -> type:
    """``stock`` (the driver Textual picked) or the quiet driver, as described above."""
    if not quiet_input_wanted(env):
        return stock
    try:
        from textual import constants
        from textual.drivers.linux_driver import LinuxDriver

        if constants.DRIVER is not None or stock is not LinuxDriver:
            return stock  # a driver chosen through TEXTUAL_DRIVER, or not Linux: kept
        from . import driver
    except Exception:  # not Linux (no termios), or Textual's driver moved: its own driver
        return stock
    try:
        return driver.QuietLinuxDriver if driver.supported() else stock
    except Exception:
        return stock
