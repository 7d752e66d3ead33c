"""Reading what the user sees: widget text and the whole screen as plain text."""
from __future__ import annotations

import io

from rich.console import Console

from tests.tui.textual_private import screen_update
from tests.waiting import DEADLINE_S, wait_until_async


def text_of(widget) -> str:
    return str(widget.render())


def screen_text(app) -> str:
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, record=True,
                      legacy_windows=False, safe_box=False)
    console.print(screen_update(app))
    return console.export_text()


async def wait_for(pilot, predicate, timeout_s: float = DEADLINE_S) -> None:
    """Let the app run until ``predicate()`` holds (worker threads post their messages meanwhile):
    ``tests.waiting.wait_until_async`` on the pilot's pause, then one more pause so the views draw."""
    await wait_until_async(predicate, pilot.pause, timeout_s=timeout_s)
    await pilot.pause()


class StepClock:
    """A monotonic clock that moves only when told: duty cycles stay the same in every run."""

    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
