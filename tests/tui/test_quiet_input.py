"""QuietInputDriver's gate: the input thread alone is told to park once input is quiet, a stop ends
a parked wait at once, and the driver is the app's only where Textual would pick its Linux driver.
The driver on a real terminal (keys after parking, suspend, resume, hang-up) is in test_pty_session."""
from __future__ import annotations

import os
import threading
import time

import pytest
from textual.drivers.linux_driver import LinuxDriver

from pinmon.tui.app import PinmonApp
from pinmon.tui.quiet_input import InputGate, QuietInputDriver
from tests.tui.fakes import FakeSource, fake_advisor


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def gate():
    clock = Clock()
    g = InputGate(park_after_s=1.0, clock=clock)
    g.clock = clock
    yield g
    g.close()


def in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(5)
    return out[0]


def test_only_the_input_thread_is_told_to_park_and_only_once_input_is_quiet(gate):
    gate.input_thread_started()
    assert not gate.is_set()
    gate.clock.now += 0.99
    assert not gate.is_set()
    gate.clock.now += 0.01
    assert gate.is_set()  # the input thread: quiet for a second, park
    assert not in_thread(gate.is_set)  # anyone else (Textual's disable_input): the real flag
    assert not gate.stop_requested()
    gate.touch()  # an event came
    assert not gate.is_set()


def test_a_stop_is_set_for_everyone(gate):
    gate.input_thread_started()
    gate.set()
    assert gate.is_set() and in_thread(gate.is_set) and gate.stop_requested()
    gate.clear()
    assert not in_thread(gate.is_set)


def test_a_parked_wait_ends_on_input_and_on_a_stop():
    gate = InputGate(park_after_s=1.0)
    r, w = os.pipe()
    try:
        os.write(w, b"k")
        assert gate.wait_for_input(r) is True  # readable: the loop runs again

        os.read(r, 1)
        result = []
        waiter = threading.Thread(target=lambda: result.append(gate.wait_for_input(r)))
        waiter.start()
        time.sleep(0.2)  # not a wait: nothing is to happen, the waiter must still block after it
        assert waiter.is_alive()  # nothing to read: it blocks, with no timeout
        gate.set()  # Textual's disable_input
        waiter.join(2)
        assert not waiter.is_alive() and result == [False]
    finally:
        gate.close()
        os.close(r)
        os.close(w)


def test_a_stop_left_unread_does_not_wake_the_next_park():
    gate = InputGate(park_after_s=1.0)
    r, w = os.pipe()
    try:
        gate.set()  # the thread was running Textual's loop, not parked: the byte stays
        gate.clear()  # a suspend ends; resumed, the thread parks again
        result = []
        waiter = threading.Thread(target=lambda: result.append(gate.wait_for_input(r)), daemon=True)
        waiter.start()
        time.sleep(0.2)  # not a wait: nothing is to happen, the waiter must still block after it
        assert waiter.is_alive() and result == []
        os.write(w, b"k")
        waiter.join(2)
        assert result == [True]
    finally:
        gate.close()
        os.close(r)
        os.close(w)


def test_set_after_close_writes_to_no_descriptor(tmp_path):
    gate = InputGate()
    gate.close()
    path = tmp_path / "reused"
    fds = [os.open(path, os.O_WRONLY | os.O_CREAT) for _ in range(2)]  # likely the pipe's old numbers
    try:
        gate.set()
        assert path.read_bytes() == b""
    finally:
        for fd in fds:
            os.close(fd)


def test_the_app_picks_the_quiet_driver_where_textual_picks_its_linux_one(monkeypatch):
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False, probe_every_s=None)
    assert app.driver_class is QuietInputDriver
    assert issubclass(QuietInputDriver, LinuxDriver)


def test_a_driver_named_in_textual_driver_is_used_as_it_is(monkeypatch):
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.linux_driver:LinuxDriver")
    monkeypatch.setattr("textual.constants.DRIVER", "textual.drivers.linux_driver:LinuxDriver", raising=False)
    app = PinmonApp(FakeSource(), fake_advisor, start_polling=False, probe_every_s=None)
    assert app.driver_class is LinuxDriver
