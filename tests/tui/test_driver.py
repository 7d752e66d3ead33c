"""The quiet input thread on a real pseudo-terminal: keys arrive through Textual's own loop, a lone
Esc and a paste too, idle means asleep, quitting wakes it, and a Textual that differs keeps its
own driver."""
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

from pinmon.tui import textual_compat as quiet
from pinmon.tui.app import PinmonApp
from pinmon.tui.textual_compat import ENV
from tests.waiting import wait_until

from .fakes import FakeSource, fake_advisor

pytestmark = pytest.mark.skipif(not quiet.quiet_input_supported(), reason="this Textual's driver differs")


class RecordingDriver(quiet.QuietLinuxDriver):
    def send_message(self, message) -> None:  # the thread's output, without an app loop
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
        thread.join(3)
        drv.close()
    stdin.close()
    os.close(master)
    os.close(slave)


def textual_polls(polls):
    """The waits of Textual's loop (0.1 s), not the thread's sleep nor the pending-bytes look."""
    return [w for w in polls if w is not None and 0 < w < 1]


def keys(drv):
    return [m.key for m in drv.received if isinstance(m, events.Key)]


@pytest.fixture
def polls(monkeypatch):
    """Every wait of Textual's loop (its selectors), and a quiet spell of three polls, not ten."""
    monkeypatch.setattr(quiet, "QUIET_POLLS", 3)
    monkeypatch.setattr(quiet, "QUIET_S", 0.2)
    made = []
    real = selectors.SelectSelector.select

    def counting(self, timeout=None):
        made.append(timeout)
        return real(self, timeout)

    monkeypatch.setattr(selectors.SelectSelector, "select", counting)
    return made


def test_by_default_the_app_runs_on_the_quiet_driver(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
    assert app.driver_class is quiet.QuietLinuxDriver and issubclass(app.driver_class, LinuxDriver)


@pytest.mark.parametrize("value", ["0", "off", "no"])
def test_turned_off_the_app_runs_on_textuals_driver(monkeypatch, value):
    monkeypatch.setenv(ENV, value)
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
    assert app.driver_class is LinuxDriver


def test_a_chosen_driver_is_kept(monkeypatch):
    import textual.constants

    monkeypatch.setattr(textual.constants, "DRIVER", "textual.drivers.linux_driver:LinuxDriver")
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
    assert app.driver_class is LinuxDriver


def test_keys_a_lone_escape_and_a_sequence_arrive(on_pty, polls):
    master, start = on_pty
    drv, _ = start()
    os.write(master, b"q")
    assert wait_until(lambda: keys(drv) == ["q"])
    os.write(master, b"\x1b")  # alone it is a key once Textual's parser has waited long enough
    assert wait_until(lambda: keys(drv) == ["q", "escape"])
    os.write(master, b"\x1b[A")  # an escape sequence in one read is one key
    assert wait_until(lambda: keys(drv) == ["q", "escape", "up"])


def test_keys_after_a_quiet_spell_arrive(on_pty, polls):
    master, start = on_pty
    drv, _ = start()
    os.write(master, b"a")
    assert wait_until(lambda: keys(drv) == ["a"])
    time.sleep(1.0)  # Textual's loop has returned: the thread sleeps on the terminal
    n = len(textual_polls(polls))
    assert n >= 3
    time.sleep(0.5)
    assert len(textual_polls(polls)) == n  # asleep: no poll at all (Textual's loop polls five times in 0.5 s)
    os.write(master, b"b\x1b[B")
    assert wait_until(lambda: keys(drv) == ["a", "b", "down"])


def test_a_paste_is_one_event(on_pty, polls):
    master, start = on_pty
    drv, _ = start()
    os.write(master, b"\x1b[200~pinned memory\x1b[201~")
    assert wait_until(lambda: any(isinstance(m, events.Paste) for m in drv.received))
    paste = [m for m in drv.received if isinstance(m, events.Paste)]
    assert [p.text for p in paste] == ["pinned memory"] and keys(drv) == []


def test_idle_it_sleeps_and_quitting_wakes_it(on_pty, polls):
    master, start = on_pty
    drv, thread = start()
    time.sleep(1.0)
    assert textual_polls(polls) == [] and polls == [quiet.IDLE_WAKE_S]  # not one poll of Textual's loop (it would have polled ten times)
    drv.exit_event.set()
    thread.join(3)
    assert not thread.is_alive()  # the pipe woke it: its own wake-up is a minute away


def test_quitting_while_textuals_loop_runs(on_pty, polls):
    master, start = on_pty
    drv, thread = start()
    os.write(master, b"x")
    assert wait_until(lambda: keys(drv) == ["x"])
    drv.exit_event.set()  # Textual's loop sees it at its next poll
    thread.join(3)
    assert not thread.is_alive()


@pytest.mark.parametrize("first_busy", [False, True], ids=["first asleep", "first reading"])
def test_two_input_threads_both_end(on_pty, polls, first_busy):
    """On SIGCONT Textual resumes the application mode without suspending it, so a second input
    thread runs beside the first; stopping joins only the second, then clears the event. The
    first must end as well, asleep or inside Textual's loop, or the process never exits."""
    master, start = on_pty
    drv, first = start()
    if first_busy:
        os.write(master, b"x")
        assert wait_until(lambda: keys(drv) == ["x"])
    second = threading.Thread(target=drv.run_input_thread, daemon=True)
    second.start()
    time.sleep(0.3)
    drv.exit_event.set()  # what Textual's disable_input does: set, join the newer thread, clear
    second.join(3)
    drv.exit_event.clear()
    first.join(3)
    assert not second.is_alive() and not first.is_alive()


def test_other_threads_see_the_events_real_state(on_pty, polls):
    """The stopping app asks ``exit_event.is_set()`` before it sets it: a quiet spell of input must
    not look like "already stopped" there, or the input thread would never be joined."""
    master, start = on_pty
    drv, thread = start()
    os.write(master, b"x")
    assert wait_until(lambda: keys(drv) == ["x"])
    time.sleep(0.6)
    assert not drv.exit_event.is_set()
    drv.exit_event.set()
    assert drv.exit_event.is_set()
    thread.join(3)
    assert not thread.is_alive()


def test_after_close_set_writes_nowhere(on_pty):
    _, start = on_pty
    drv, thread = start()
    drv.exit_event.set()
    thread.join(3)
    drv.close()
    assert drv.exit_event.wake_fd == -1
    drv.exit_event.set()  # no write into a descriptor number the process may have reused


def test_a_textual_whose_loop_does_not_ask_the_event_keeps_its_own_driver(monkeypatch):
    def run_input_thread(self):  # a loop that stops some other way
        while not self.stopping:
            pass

    monkeypatch.setattr(LinuxDriver, "run_input_thread", run_input_thread)
    assert not quiet.quiet_input_supported()
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
    assert app.driver_class is LinuxDriver


def test_a_textual_without_the_linux_driver_module_keeps_its_own(monkeypatch):
    """Where ``textual.drivers.linux_driver`` does not import (it moved), the quiet driver has
    nothing to build on: Textual's own driver runs."""
    monkeypatch.setattr(quiet, "LinuxDriver", None)
    assert not quiet.quiet_input_supported()
    assert quiet.choose_driver(LinuxDriver) is LinuxDriver


def test_an_app_whose_compat_module_cannot_load_keeps_textuals_driver(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_compat(name, globals=None, locals=None, fromlist=(), level=0):
        if level and fromlist and "choose_driver" in fromlist:
            raise ImportError("no compat module")
        return real_import(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", no_compat)
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False)
    assert app.driver_class is LinuxDriver
