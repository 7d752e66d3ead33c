"""The app's attach key end to end on this machine's kernel: ``a`` on a process row runs the command
line's runner (``cli/attaching.key_window``: the real ``Attacher``, uprobes on a gcc-built stand-in
libcuda called by a child started before the attach), the status line counts down while the child
copies, the probes leave the child when the window ends, and the collector's merge of the window
(``RequestedWindows``, ``merge_attached``) gives the row source attached and the pop-up its exact
counts and sizes. Needs root, tracefs with uprobe events and gcc; skipped elsewhere with the reason.

It shares the kernel's tracefs with the attach tests, so it runs in their xdist group."""
from __future__ import annotations

import dataclasses

import pytest

from pinmon.cli.attaching import key_window
from pinmon.collect.attached import RequestedWindows, merge_attached
from pinmon.tui.screens.process import ProcessScreen
from tests.attach.standin import CUDA, mine, why_not
from tests.factories import GIB, process

from .fakes import FakeSource
from .test_app import SIZE, header, make_app
from .util import screen_text, text_of, wait_for

WHY = why_not()
pytestmark = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.xdist_group("tracefs")]
MIB = 1 << 20
WINDOW_S = 2.0


class ChildOnTheBox(FakeSource):
    """The box, with a row for the child (the most pinned, on GPU 0) and the latest key window merged
    in, as the live collector does."""

    def __init__(self, pid: int, windows: RequestedWindows):
        super().__init__()
        self.pid, self.windows = pid, windows

    def snapshot(self):
        snap = super().snapshot()
        row = process(self.pid, "child", user="root", cmdline="python child.py", pinned_bytes=900 * GIB,
                      gpu_indices=(0,))
        rows, notices = merge_attached([row, *snap.processes], self.windows.latest(), gpus=snap.gpus)
        return dataclasses.replace(snap, processes=tuple(rows), notices=snap.notices + tuple(notices))



async def test_a_attaches_the_row_for_real_and_its_copies_reach_the_row_and_pop_up(child):
    windows = RequestedWindows()
    source = ChildOnTheBox(child.pid, windows)
    app = make_app(source, attach_runner=key_window(windows, is_cuda=CUDA), attach_window_s=WINDOW_S)
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(source.snapshot())
        await pilot.press("4", "a")
        await wait_for(pilot, lambda: f"attaching pid {child.pid}: " in header(app) and "s left" in header(app))
        assert mine() == (True, True)  # the probes are in the child
        child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 8 * MIB, n=20)
        child.call("cuMemcpyDtoH_v2", {"buf": "pageable"}, 0x1000, 4096, n=3)
        child.call("cuMemAllocHost_v2", {"out": "p"}, 4096)
        await wait_for(pilot, lambda: app.session.attach.window is None)
        assert app.notes[-1].startswith(f"pid {child.pid} attached for ")
        assert app.attach_done.wait(10) and mine() == (False, False)  # detached at the window's end
        app.apply_snapshot(source.snapshot())
        await pilot.pause()
        row = next(p for p in app.session.displayed.processes if p.pid == child.pid)
        assert row.source == "attached" and row.copies.instrument == "uprobes"
        assert any(line.split()[:1] == [str(child.pid)] and " attached " in line
                   for line in screen_text(app).splitlines())  # its row in the table: SRC attached
        await pilot.press("2")
        assert f"pid {child.pid}" in screen_text(app)  # GPU 0's line of what the copies explain
        await pilot.press("4", "enter")
        assert isinstance(app.screen, ProcessScreen)
        text = text_of(app.screen.query_one("#process-text"))
        h2d = next(line for line in text.splitlines() if "H2D pinned" in line).split()
        assert h2d[4:10] == ["20", "8.0", "MiB", "8.0", "MiB", "8.0"]
        d2h = next(line for line in text.splitlines() if "D2H pageable" in line).split()
        assert d2h[4:6] == ["3", "4.0"]
        assert "allocs" in text and "1 in " in text and "median 4.0 KiB" in text
