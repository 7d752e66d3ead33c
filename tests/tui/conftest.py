"""TUI tests: local times print in UTC, so headers read the same on every machine."""
import time

import pytest


@pytest.fixture(autouse=True)
def utc_clock_display(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
