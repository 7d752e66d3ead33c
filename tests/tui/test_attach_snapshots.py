"""SVG snapshots of the app with attached processes (``attach_fakes``): the process pop-up with its
copies, sizes, allocations and registrations; the GPU rows and detail saying how much of each link the
copies explain, a process whose GPU cannot be known apart; ``--attach``'s status line; the attach key's
countdown. 80x24 and 160x48, fixed data as in ``test_snapshots``."""
from __future__ import annotations

import pytest

from .attach_fakes import FakeAttachRunner, attached_snapshot
from .fakes import FakeSource
from .test_snapshots import LARGE, SMALL, build

SIZES = pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])


class AttachedBox(FakeSource):
    """The box with 4242, 5151 and 9090 attached over 10 s, every snapshot."""

    def snapshot(self):
        i = self.calls
        self.calls += 1
        return attached_snapshot(i)


def attach_build(**kw):
    kw.setdefault("attach_runner", FakeAttachRunner())
    return build(AttachedBox(), **kw)


@pytest.mark.parametrize("size,rows_down", [(SMALL, 0), (LARGE, 1)], ids=["80x24", "160x48"])
def test_attached_process_detail(snap_compare, size, rows_down):
    """80x24: the trainer (pinned copies, allocations, registrations); 160x48: the loader (pageable
    copies that may be registered, write-combined read-backs, peer copies)."""
    app, run_before = attach_build()
    assert snap_compare(app, press=["4", *["down"] * rows_down, "enter"], terminal_size=size, run_before=run_before)


@SIZES
def test_gpus_copies_explained(snap_compare, size):
    app, run_before = attach_build()
    assert snap_compare(app, press=["2"], terminal_size=size, run_before=run_before)


@SIZES
def test_overview_every_process_attached(snap_compare, size):
    app, run_before = build(AttachedBox(), attach_all=True)
    assert snap_compare(app, press=["1"], terminal_size=size, run_before=run_before)


def test_attach_countdown_80x24(snap_compare):
    app, run_before = build(FakeSource(), attach_runner=FakeAttachRunner())

    async def before(pilot):
        await run_before(pilot)
        # The key's window, set directly: no thread, so no race with the picture.
        app.session.attach.begin(5151)
        app.session.attach.mark_attached()
        app.session.clock.advance(2.5)
        app.refresh_views()

    assert snap_compare(app, press=["4", "down"], terminal_size=SMALL, run_before=before)
