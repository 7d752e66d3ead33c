"""The quiet input thread on a real pseudo-terminal: keys arrive, a lone Esc too, idle means asleep."""
from __future__ import annotations

import asyncio
import os
import pty
import selectors
import sys
import threading
import time
import tty

import pytest
from textual import events
from textual.drivers.linux_driver import LinuxDriver

from pinmon.tui import driver as quiet
from pinmon.tui.app import PinmonApp
from pinmon.tui.driver_choice import OPT_IN_ENV

from .fakes import FakeSource, fake_advisor

pytestmark = pytest.mark.skipif(not quiet.supported(), reason="this Textual's driver differs")


class RecordingDriver(quiet.QuietLinuxDriver):
    def process_message(self, message) -> None:  # the thread's output, without an app loop
        self.received.append(message)


@pytest.fixture
def on_pty(monkeypatch):
    master, slave = pty.openpty()
    tty.setraw(slave)  # as the app's terminal: each key readable at once, no line editing
    stdin = os.fdopen(slave, "r", closefd=False)
    monkeypatch.setattr(sys, "__stdin__", stdin)
    made = []

    def start():
        async def make():  # a driver takes the running loop it will post to (unused here)
            return RecordingDriver(PinmonApp(FakeSource(), fake_advisor, start_polling=False))

        loop = asyncio.new_event_loop()
        try:
            drv = loop.run_until_complete(make())
        finally:
            loop.close()
        drv.received = []
        thread = threading.Thread(target=drv.run_input_thread, daemon=True)
        thread.start()
        made.append((drv, thread))
        return drv, thread

    yield master, start
    for drv, thread in made:
        drv.exit_event.set()
        thread.join(2)
        drv.close()
    stdin.close()
    os.close(master)
    os.close(slave)


def wait_for(pred, timeout=2.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def keys(drv):
    return [m.key for m in drv.received if isinstance(m, events.Key)]


@pytest.fixture
def waits(monkeypatch):
    """The timeout of every wait the input thread makes; its idle wake-up an hour away, so only
    the mechanism under test (the Esc timeout, the wake pipe) can end a wait in a test's time."""
    monkeypatch.setattr(quiet, "IDLE_WAKE_S", 3600.0)
    made = []
    real = selectors.SelectSelector.select

    def counting(self, timeout=None):
        made.append(timeout)
        return real(self, timeout)

    monkeypatch.setattr(selectors.SelectSelector, "select", counting)
    return made


@pytest.fixture
def opted_in(monkeypatch):
    monkeypatch.setenv(OPT_IN_ENV, "1")


def test_by_default_the_app_runs_on_textuals_driver(monkeypatch):
    monkeypatch.delenv(OPT_IN_ENV, raising=False)
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
    assert app.driver_class is LinuxDriver


def test_opted_in_the_app_runs_on_the_quiet_driver(opted_in):
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
    assert app.driver_class is quiet.QuietLinuxDriver and issubclass(app.driver_class, LinuxDriver)


def test_a_chosen_driver_is_kept(monkeypatch, opted_in):
    import textual.constants

    monkeypatch.setattr(textual.constants, "DRIVER", "textual.drivers.linux_driver:LinuxDriver")
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
    assert app.driver_class is LinuxDriver


def test_keys_and_a_lone_escape_arrive(on_pty, waits):
    master, start = on_pty
    drv, _ = start()
    os.write(master, b"q")
    assert wait_for(lambda: keys(drv) == ["q"])
    os.write(master, b"\x1b")  # alone it is a key only once the parser's short wait is over
    assert wait_for(lambda: keys(drv) == ["q", "escape"])  # not held until the idle wake-up
    assert any(w < 1 for w in waits)  # the thread waited for the parser's timeout, no longer
    os.write(master, b"\x1b[A")  # an escape sequence in one read is one key
    assert wait_for(lambda: keys(drv) == ["q", "escape", "up"])


def test_idle_it_sleeps_and_quitting_wakes_it(on_pty, waits):
    master, start = on_pty
    drv, thread = start()
    time.sleep(1.5)
    assert waits == [quiet.IDLE_WAKE_S]  # one wait, still going (Textual's woke 15 times)
    drv.exit_event.set()
    thread.join(10)
    assert not thread.is_alive()  # the pipe woke it: its own wake-up is an hour away


def test_end_of_input_does_not_spin(on_pty, waits):
    master, start = on_pty
    drv, thread = start()
    r, w = os.pipe()
    os.close(w)
    drv.fileno = r  # a stdin at its end: readable for ever, nothing to read
    drv.exit_event.set()
    thread.join(2)
    drv.exit_event.clear()
    thread = threading.Thread(target=drv.run_input_thread, daemon=True)
    thread.start()
    time.sleep(0.5)
    assert len(waits) <= 4 and thread.is_alive()
    drv.exit_event.set()
    thread.join(2)
    assert not thread.is_alive()
    os.close(r)


def test_after_close_set_writes_nowhere(on_pty):
    _, start = on_pty
    drv, thread = start()
    drv.exit_event.set()
    thread.join(2)
    drv.close()
    assert drv.exit_event.wake_fd == -1
    drv.exit_event.set()  # no write into a descriptor number the process may have reused


def test_a_textual_without_those_parts_keeps_its_own_driver(monkeypatch, opted_in):
    class OtherParser:  # a key parser that keeps its pending timeout elsewhere
        def __init__(self, debug=False):
            pass

    monkeypatch.setattr(quiet, "XTermParser", OtherParser)
    assert not quiet.supported()
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
    assert app.driver_class is LinuxDriver


def test_private_parts_missing_at_import_make_it_unsupported(monkeypatch, opted_in):
    """The module's own guard: where Textual's private parts fail to import, the module still
    imports, ``supported()`` says no, and the app keeps Textual's driver."""
    import builtins
    import importlib

    real_import = builtins.__import__

    def no_private_modules(name, globals=None, locals=None, fromlist=(), level=0):
        if name.startswith("textual._"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", no_private_modules)
    try:
        importlib.reload(quiet)
        assert quiet.XTermParser is None and quiet.get_time is None
        assert not quiet.supported()
        app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
        assert app.driver_class is LinuxDriver
    finally:
        monkeypatch.setattr(builtins, "__import__", real_import)
        importlib.reload(quiet)
    assert quiet.supported()


def test_internals_that_fail_to_import_keep_textuals_driver(monkeypatch, opted_in):
    import builtins

    real_import = builtins.__import__

    def no_private_parser(name, globals=None, locals=None, fromlist=(), level=0):
        if name == "driver" or "driver" in (fromlist or ()) and level == 1:
            raise ImportError("cannot import name 'XTermParser' from 'textual._xterm_parser'")
        return real_import(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", no_private_parser)
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
    assert app.driver_class is LinuxDriver


def test_a_supported_check_that_raises_keeps_textuals_driver(monkeypatch, opted_in):
    def broken():
        raise AttributeError("renamed")

    monkeypatch.setattr(quiet, "supported", broken)
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
    assert app.driver_class is LinuxDriver
