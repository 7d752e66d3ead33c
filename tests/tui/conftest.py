"""TUI tests: local times print in UTC, so headers read the same on every machine.

The SVG baselines are drawn by one Textual release (``SNAPSHOT_TEXTUAL``): other releases in the
supported range lay out the same cells but may pick other colours, so on those the SVG comparisons
are skipped and every other TUI test (the pilot tests, the rows, the driver) still runs.
"""
import time
from importlib.metadata import version

import pytest

SNAPSHOT_TEXTUAL = "8.2.8"


@pytest.fixture(autouse=True)
def utc_clock_display(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def pytest_collection_modifyitems(config, items):
    installed = version("textual")
    if installed == SNAPSHOT_TEXTUAL:
        return
    skip = pytest.mark.skip(reason=f"SVG baselines are Textual {SNAPSHOT_TEXTUAL}'s; this is {installed}")
    for item in items:
        if "snap_compare" in getattr(item, "fixturenames", ()):
            item.add_marker(skip)
