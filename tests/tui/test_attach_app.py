"""The app's attach: ``a`` on a process row (or in its pop-up) attaches it for a window, the status line
counts down, the row then shows source attached and the pop-up its copies; a refusal is one line and
nothing else; replay and ``--attach`` have no key; quitting ends the window. Without root: the runner
pretends (``attach_fakes``), or is the real one refused by the engine's own check (not root)."""
from __future__ import annotations

from pinmon.cli.attaching import key_window
from pinmon.collect.attached import RequestedWindows
from pinmon.tui.screens.process import ProcessScreen
from pinmon.tui.view.attach import AttachEnd

from .attach_fakes import AttachedSource, FakeAttachRunner
from .fakes import FakeSource
from .test_app import SIZE, header, make_app
from .util import StepClock, screen_text, text_of, wait_for

SQUASHFS = ("its libcuda (/usr/local/nvidia/lib64/libcuda.so.1): the kernel refused uprobes on this file (defining"
            " a probe: EINVAL); its file system may not support them (squashfs): copy libcuda to a local disk")


def footer(app) -> str:
    return screen_text(app).rstrip().splitlines()[-1]


def feed(app, source, n: int = 2) -> None:
    for _ in range(n):
        app.apply_snapshot(source.snapshot())


def row_source(app, pid: int) -> str:
    return next(p.source for p in app.session.displayed.processes if p.pid == pid)


def attach_app(runner=None, source=None, **kw):
    source = source or AttachedSource()
    if runner is None:
        runner = FakeAttachRunner(source.windows, block=True)
    clock = StepClock()
    app = make_app(source, attach_runner=runner, clock=clock, attach_window_s=10, **kw)
    return app, source, runner, clock


async def test_a_attaches_the_highlighted_row_counts_down_then_shows_its_copies():
    app, source, runner, clock = attach_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app, source)
        await pilot.press("4")
        assert "a Attach" in footer(app)
        await pilot.press("a")  # the first row: 4242, the most pinned
        await wait_for(pilot, lambda: "attaching pid 4242: 10 s left" in header(app))
        assert runner.calls == [(4242, 10.0)]
        clock.advance(3.2)
        app.attach_tick()
        assert "attaching pid 4242: 7 s left" in header(app)
        await pilot.press("down", "a")  # one window at a time: the second a says so
        await pilot.pause()
        assert runner.calls == [(4242, 10.0)] and "one attach at a time: attaching pid 4242: 7 s left" in app.notes[-1]
        runner.release.set()
        await wait_for(pilot, lambda: app.session.attach.window is None)
        assert "pid 4242 attached for 10.00 s" in app.notes[-1] and "attaching" not in header(app)
        assert app.attach_done.wait(5)
        feed(app, source, 1)  # the collector's next snapshot holds the window
        await pilot.pause()
        assert row_source(app, 4242) == "attached" and row_source(app, 5151) == "est."
        assert "attached python" in screen_text(app)  # SRC is wide enough for the word
        await pilot.press("up", "enter")
        assert isinstance(app.screen, ProcessScreen)
        text = text_of(app.screen.query_one("#process-text"))
        assert "attached, uprobes on libcuda" in text and "p50 size" in text and "32.0 GB/s" in text
        assert "registered" in text and "unregistered 1" in text


async def test_a_in_the_pop_up_attaches_its_process():
    source = AttachedSource()
    app, _, runner, _ = attach_app(FakeAttachRunner(source.windows), source)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, source)
        await pilot.press("4", "down", "enter")
        assert isinstance(app.screen, ProcessScreen) and app.screen.pid == 5151
        assert "a: attach" in app.screen.query_one("#process-box").border_subtitle
        await pilot.press("a")
        await wait_for(pilot, lambda: runner.calls and app.session.attach.window is None)
        assert runner.calls == [(5151, 10.0)] and isinstance(app.screen, ProcessScreen)


async def test_a_refused_attach_is_one_line_and_nothing_else_changes():
    source = AttachedSource()
    app, _, _runner, _ = attach_app(FakeAttachRunner(source.windows, error=SQUASHFS), source)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, source)
        before = header(app)
        await pilot.press("4", "a")
        await wait_for(pilot, lambda: app.notes and app.session.attach.window is None)
        assert app.notes[-1].startswith("pid 4242 not attached: its libcuda") and "squashfs" in app.notes[-1]
        assert "\n" not in app.notes[-1] and header(app) == before
        feed(app, source, 1)
        assert source.windows.latest() is None and {p.source for p in app.session.displayed.processes} <= {"est.",
                                                                                                          "traced"}
        assert not any("attach" in n for n in app.session.notices())


async def test_the_engines_own_refusal_reaches_the_key():
    """The CLI's runner with the real attacher, told it is not root: its one line, as `pinmon attach` says it."""
    windows = RequestedWindows()
    app, source, _, _ = attach_app(key_window(windows, euid=1000))
    async with app.run_test(size=SIZE) as pilot:
        feed(app, source)
        await pilot.press("4", "a")
        await wait_for(pilot, lambda: app.notes and app.session.attach.window is None)
        assert app.notes[-1] == "pid 4242 not attached: attach needs root: uprobes are set through tracefs"
        assert windows.latest() is None


async def test_a_runner_that_raises_is_a_reason_not_a_crash():
    def broken(pid, seconds, stop, attached):
        raise RuntimeError("boom")
    app, source, _, _ = attach_app(broken)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, source)
        await pilot.press("4", "a")
        await wait_for(pilot, lambda: app.notes and app.session.attach.window is None)
        assert app.notes[-1] == "pid 4242 not attached: attach failed: RuntimeError: boom" and app.is_running


async def test_where_attach_cannot_work_the_key_is_hidden_and_says_why():
    app = make_app(AttachedSource(), attach_unavailable_reason="attach needs root: uprobes are set through tracefs")
    async with app.run_test(size=SIZE) as pilot:
        feed(app, app.source)
        await pilot.press("4")
        assert "Attach" not in footer(app)
        await pilot.press("a")
        await pilot.pause()
        assert app.notes[-1] == "no attach: attach needs root: uprobes are set through tracefs"
        assert app.session.attach.window is None


async def test_replay_has_no_attach_key():
    runner = FakeAttachRunner()
    app = make_app(FakeSource(live=False), attach_runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, app.source)
        await pilot.press("4")
        assert "Attach" not in footer(app)
        await pilot.press("a")
        await pilot.pause()
        assert runner.calls == [] and "not on a recording's" in app.notes[-1]
        assert not any(c.title.startswith("Attach") for c in app.get_system_commands(app.screen))


async def test_attach_all_says_so_and_the_key_has_nothing_to_add():
    app = make_app(AttachedSource(), attach_all=True)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, app.source)
        assert "ATTACH" in header(app)
        await pilot.press("4")
        assert "Attach" not in footer(app)
        await pilot.press("a")
        await pilot.pause()
        assert "--attach keeps every CUDA process attached already" in app.notes[-1]


async def test_a_elsewhere_says_where_it_works_and_the_palette_offers_it():
    app, source, runner, _ = attach_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app, source)
        await pilot.press("1", "a")
        await pilot.pause()
        assert runner.calls == [] and "Processes tab (4)" in app.notes[-1]
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Attach to the process" in titles


async def test_quitting_ends_the_window_and_waits_for_it():
    app, source, runner, _ = attach_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app, source)
        await pilot.press("4", "a")
        await wait_for(pilot, lambda: runner.started.is_set())
        notes = len(app.notes)
        app.shutdown()
        assert app.attach_done.wait(5) and runner.stopped.is_set()  # the probes left with the window
        await pilot.pause()
        assert len(app.notes) == notes  # stopped by quitting: nothing to say


def test_a_window_stopped_by_quitting_says_nothing():
    from pinmon.tui.view.attach import AttachKey

    key = AttachKey(unavailable_reason=None, clock=StepClock())
    key.begin(7)
    assert key.finish(AttachEnd(7, None, 1.0, interrupted=True)) is None and key.window is None
