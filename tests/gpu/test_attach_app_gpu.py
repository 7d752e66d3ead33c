"""On a real GPU, as root: the terminal app's ``a`` on a running CuPy process's row, with the live
collector and the command line's runner as ``pinmon`` wires them.

The process (as in ``test_attach_gpu.py``) loads the machine's libcuda copied to a local directory (the
GPU box keeps the driver's files on squashfs, which refuses uprobes) and copies 64 MiB host to device
from pinned memory. The key must attach it for the window, and the live collector's next snapshots must
show its row with source attached, its pinned copies of 64 MiB, and GPU's RX line naming it.
"""
from __future__ import annotations

import os

import pytest

from tests.gpu.test_attach_gpu import start_child

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(os.geteuid() != 0, reason="attach needs root")]
WINDOW_S = 4.0


async def test_a_on_a_cuda_process_row_shows_its_copies(tmp_path):
    pytest.importorskip("cupy")
    pytest.importorskip("textual")
    from pinmon.cli.attaching import key_window
    from pinmon.collect.attached import RequestedWindows
    from pinmon.collect.live import LiveCollector
    from pinmon.model.traffic import explain_traffic
    from tests.tui.test_app import make_app
    from tests.tui.util import screen_text, wait_for

    p = start_child(tmp_path, 60)
    windows = RequestedWindows()
    source = LiveCollector(interval_s=1.0, attached=windows, oom_lookback_s=0)
    try:
        assert p.stdout.readline().strip() == "ready"
        app = make_app(source, poll=True, attach_runner=key_window(windows), attach_window_s=WINDOW_S)
        async with app.run_test(size=(160, 48)) as pilot:
            shown = lambda: app.session.displayed is not None and any(
                r.pid == p.pid for r in app.session.displayed.processes)
            await wait_for(pilot, shown, timeout_s=60)
            await pilot.press("4", "slash", *str(p.pid), "enter", "a")
            await wait_for(pilot, lambda: f"attaching pid {p.pid}" in screen_text(app), timeout_s=60)
            await wait_for(pilot, lambda: app.session.attach.window is None, timeout_s=60)
            assert app.notes[-1].startswith(f"pid {p.pid} attached for "), app.notes[-1]

            def attached_row():
                snap = app.session.displayed
                row = next((r for r in snap.processes if r.pid == p.pid), None)
                return row is not None and row.source == "attached" and (row, snap)

            await wait_for(pilot, attached_row, timeout_s=30)
            row, snap = attached_row()
            stat = row.copies.get("h2d", "pinned")
            assert stat is not None and stat.size_p50_bytes == 64 << 20 and stat.count and stat.bytes_per_s > 1e9
            rx = next(x for x in explain_traffic(snap).links if x.direction == "h2d" and x.shares)
            assert rx.shares[0].pid == p.pid and rx.explained_share is not None and 0.5 <= rx.explained_share <= 1.1
            await pilot.press("escape", "2")
            assert f"pid {p.pid}" in screen_text(app)
    finally:
        p.kill()
        p.wait()
        source.close()
