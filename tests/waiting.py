"""Waiting in tests for what another thread or process does: poll a condition until it holds.

A test that sleeps a fixed time and then looks fails on a loaded machine and wastes the time on an
idle one; a test that polls returns as soon as the effect is there and has a deadline far above what
the effect takes (tests run beside other work, two to a core under ``-n``). The deadline is only a
cap that turns a hang into a failure, never a measurement: timings belong in ``bench/``.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Far above what any effect awaited in the tests takes on an idle machine (a second or two at most).
DEADLINE_S = 30.0


class NotYet(Exception):
    """Raised by a condition to say "not yet" with a reason, which a timeout then reports."""


def wait_until(condition: Callable[[], T], *, timeout_s: float = DEADLINE_S, interval_s: float = 0.02,
               what: str | None = None, retry_on: tuple[type[BaseException], ...] = ()) -> T:
    """Call ``condition()`` until it returns something true, and return that.

    An exception of a type in ``retry_on`` (a server not listening yet, a file half written) counts
    as "not yet", and so does ``NotYet``; any other propagates at once, so a condition can also stop
    the wait early (a child process that died). After ``timeout_s`` an ``AssertionError`` names
    ``what`` and the last value or error seen.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            last = condition()
        except (NotYet, *retry_on) as e:
            last = e
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for "
                                 f"{what or getattr(condition, '__name__', 'the condition')} (last: {last!r})")
        time.sleep(interval_s)  # not a wait: the pause between looks


def read_until(read: Callable[[], T], ok: Callable[[T], object], *, timeout_s: float = DEADLINE_S,
               interval_s: float = 0.02) -> T:
    """Call ``read()`` until ``ok`` holds for what it returns, or ``timeout_s`` passes; return the
    last reading either way. For a test that then asserts on the reading itself, so that a timeout
    fails there with the figures that were read rather than here with a bare "timed out"."""
    last: list[T] = []

    def looked() -> bool:
        last[:] = [read()]
        return bool(ok(last[0]))

    try:
        wait_until(looked, timeout_s=timeout_s, interval_s=interval_s)
    except AssertionError:
        pass
    return last[0]


async def wait_until_async(condition: Callable[[], T], pause: Callable[[float], object], *,
                           timeout_s: float = DEADLINE_S, interval_s: float = 0.02,
                           what: str | None = None) -> T:
    """``wait_until`` for code on an event loop: ``await pause(interval_s)`` between looks (a Textual
    pilot's ``pause``), so the loop runs the work being waited for."""
    deadline = time.monotonic() + timeout_s
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for "
                                 f"{what or getattr(condition, '__name__', 'the condition')} (last: {last!r})")
        await pause(interval_s)
