"""What an on-call reader needs at any size: every finding line starts with its subject (a job, a pod,
a container, a process); a rule's advice once for its findings; pop-ups that wrap and scroll rather
than cut; the GROUP column from exactly 120 columns; a hint, not a cut tab strip, on a terminal too
small; the frame drawn before the first snapshot; no report-less full-screen app where TERM is dumb."""
from __future__ import annotations

import dataclasses
import re
import threading
from typing import ClassVar

import pytest
from textual.widgets import DataTable

from pinmon.advise import advise
from pinmon.model import Finding
from pinmon.model.source import OpenedOnFirstRead
from pinmon.tui.app import PinmonApp
from pinmon.tui.screens.group import GroupScreen
from pinmon.tui.screens.too_small import TooSmallScreen
from pinmon.tui.view.finding_groups import group_by_rule, sentences
from pinmon.tui.widgets.processes import ProcessPanel

from .fakes import FakeSource, GroupsSource, make_groups_snapshot, no_findings
from .util import StepClock, screen_text, wait_for


def groups_app(**kw) -> PinmonApp:
    return PinmonApp(GroupsSource(kill_at=1), advise, start_polling=False, probe_every_s=None, clock=StepClock(),
                     **kw)


async def fed(app, pilot, n: int = 3):
    for _ in range(n):
        app.apply_snapshot(app.source.snapshot())
    await pilot.pause()
    await pilot.pause()


def finding_lines(text: str) -> list[str]:
    return [ln.strip(" │") for ln in text.splitlines() if " CRIT " in ln or " WARN " in ln or " INFO " in ln]


# --- C1, C8: the subject first, named once -------------------------------------------------------

@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48)], ids=["80x24", "100x30", "160x48"])
async def test_every_finding_line_of_the_overview_starts_with_its_subject(size):
    app = groups_app()
    async with app.run_test(size=size) as pilot:
        await fed(app, pilot)
        lines = finding_lines(screen_text(app))
        assert lines
        subjects = ("pod ml/trainer-7f9c/worker", "job 4711.0", "Slurm job 4711 step 0", "GPU 1", "host",
                    "pid 4242", "pid 6060")
        for line in lines:
            after_badge = line.split("  ", 1)[1] if line.startswith(("CRIT", "WARN", "INFO")) else line
            assert after_badge.lstrip().startswith(subjects), line
        text = screen_text(app)
        for doubled in ("pod container ml", "docker docker", "pod pod", "Slurm job step job"):
            assert doubled not in text


async def test_the_advisor_tab_names_the_subject_first_in_its_short_form_where_narrow():
    app = groups_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await fed(app, pilot)
        await pilot.press("6")
        await pilot.pause()
        heads = [ln for ln in finding_lines(screen_text(app))]
        assert heads[0].startswith("CRIT  pod ml/trainer-7f9c/worker  cgroup-oom-kills"), heads
        assert any(h.startswith("WARN  Slurm job 4711 step 0  pinned-cgroup-share") for h in heads), heads
        # Narrower than the full head: the short form, subject still first.
        from pinmon.tui.widgets.findings import finding_head

        snap = app.session.view_state().snapshot
        job = next(f for f in app.session.view_state().findings if f.values.get("cgroup") == "slurm/4711/0")
        assert finding_head(job, snap, 30).plain.startswith(" WARN  job 4711.0")


async def test_no_findings_under_a_title_that_reads_as_no_count():
    app = PinmonApp(FakeSource(), no_findings, start_polling=False, probe_every_s=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await fed(app, pilot, 1)
        text = screen_text(app)
        assert "No findings." in text and "(6: all findings)" not in text
        assert "─Advisor─" in text.replace(" ", "")
    app = groups_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await fed(app, pilot)
        assert re.search(r"Advisor: \d+ findings \(6: in full\)", screen_text(app))


# --- C5: a rule's advice once --------------------------------------------------------------------

def test_a_rules_findings_share_their_advice_and_keep_their_own_sentences():
    a = Finding("pinned-cgroup-share", "critical", "pod x", "m1", "Pinned pages stay. Raise the limit. Largest holder: pid 1.")
    b = Finding("pinned-cgroup-share", "warning", "job 2", "m2", "Pinned pages stay. Raise the limit. Largest holder: pid 2.")
    c = Finding("pcie-errors", "warning", "gpu1", "m3", "Reseat the card.")
    groups = group_by_rule([a, c, b])
    assert [g.rule for g in groups] == ["pinned-cgroup-share", "pcie-errors"]
    assert groups[0].findings == (a, b) and groups[0].shared_advice == "Pinned pages stay. Raise the limit."
    assert groups[0].own_advice == ("Largest holder: pid 1.", "Largest holder: pid 2.")
    assert groups[1].shared_advice == "Reseat the card." and groups[1].own_advice == ("",)
    assert sentences("Use `x.y()` e.g. here. Then 1.5 GB/s. Done") == ["Use `x.y()` e.g. here.", "Then 1.5 GB/s.", "Done"]


async def test_at_160x48_two_findings_of_one_rule_show_its_advice_once():
    app = groups_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await fed(app, pilot)
        text = screen_text(app)
        assert text.count("Pinned pages are charged to the group") == 2  # cgroup-oom-kills, pinned-cgroup-share
        assert text.count("wc-cpu-readback") == 2 and text.count("holds 1.0 GiB") == 2
        await pilot.press("6")
        await pilot.pause()
        assert screen_text(app).count("Past the limit the OOM killer") <= 1


# --- C4: pop-ups wrap and scroll ---------------------------------------------------------------------

async def test_the_group_popup_at_80x24_wraps_its_values_and_scrolls():
    app = groups_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await fed(app, pilot)
        await pilot.press("7", "enter")
        await pilot.pause()
        assert isinstance(app.screen, GroupScreen)
        text = screen_text(app)
        assert "pinned or not" in text and "(memory.current)" in text  # wrapped, not cut
        assert "memory.cu…" not in text
        box = app.screen.query_one("#group-box")
        assert box.max_scroll_y > 0 and app.focused is box
        await pilot.press("pagedown")
        await pilot.pause()
        assert box.scroll_y > 0 and "findings" in screen_text(app)
        await pilot.press("up")
        await pilot.pause()
        assert box.scroll_y < box.max_scroll_y


# --- C7: GROUP from exactly 120 columns --------------------------------------------------------------

@pytest.mark.parametrize("width,group,vmpin", [(119, False, True), (120, True, True), (109, False, False),
                                               (110, False, True)])
async def test_group_and_vmpin_columns_appear_at_the_widths_the_readme_gives(width, group, vmpin):
    app = groups_app()
    async with app.run_test(size=(width, 30)) as pilot:
        await fed(app, pilot, 1)
        await pilot.press("4")
        await pilot.pause()
        table = app.main_widget(ProcessPanel).query_one(DataTable)
        headers = [str(c.label).strip() for c in table.columns.values()]
        assert ("GROUP" in headers) == group and ("VMPIN" in headers) == vmpin, headers


# --- C10: too small, and q still quits -----------------------------------------------------------------

async def test_a_terminal_too_small_gets_a_hint_and_q_still_quits():
    app = groups_app()
    async with app.run_test(size=(40, 12)) as pilot:
        await fed(app, pilot)
        assert isinstance(app.screen, TooSmallScreen)
        text = screen_text(app)
        assert "Terminal too small (40x12)" in text and "78x20" in text and "q to quit" in "".join(text.split("\n"))
        await pilot.press("6")  # other keys do nothing behind the hint
        await pilot.pause()
        assert isinstance(app.screen, TooSmallScreen)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        assert not isinstance(app.screen, TooSmallScreen) and "1 Overview" in screen_text(app)
        await pilot.resize_terminal(60, 24)
        await pilot.pause()
        assert isinstance(app.screen, TooSmallScreen)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


# --- D1: the frame first, then the data ------------------------------------------------------------------

class BlockedSource:
    """A live source whose first read waits until released: NVML starting, the first /proc scan."""

    live = True

    def __init__(self):
        self.release = threading.Event()
        self.reading = threading.Event()
        self.thread = None

    def snapshot(self):
        self.thread = threading.current_thread()
        self.reading.set()
        self.release.wait(30)
        return make_groups_snapshot(0)

    def close(self):
        self.release.set()


async def test_the_first_frame_says_collecting_while_the_source_is_still_opening():
    source = BlockedSource()
    app = PinmonApp(source, advise, start_polling=True, probe_every_s=None)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            text = screen_text(app)
            assert "1 Overview" in text and "collecting the first snapshot…" in text
            assert "collecting…" in text and "no GPU here" not in text
            await wait_for(pilot, source.reading.is_set)
            assert source.thread is not threading.main_thread()
            source.release.set()
            await wait_for(pilot, lambda: app.session.view_state().snapshot is not None)
            assert "collecting" not in screen_text(app)
    finally:
        source.release.set()
        app.shutdown()


def test_a_source_opened_on_first_read_is_made_on_the_reading_thread_and_closed_once():
    made = []

    class Made:
        live = True
        notices: ClassVar[list[str]] = ["from the source"]
        closed = 0

        def snapshot(self):
            return make_groups_snapshot(0)

        def close(self):
            Made.closed += 1

    def open_source():
        made.append(threading.current_thread())
        return Made()

    source = OpenedOnFirstRead(open_source)
    assert not made and source.live and source.notices == []
    reader = threading.Thread(target=source.snapshot)
    reader.start()
    reader.join()
    assert made == [reader] and source.notices == ["from the source"]
    source.snapshot()
    assert len(made) == 1
    source.close()
    source.close()
    assert Made.closed == 1 and source.snapshot() is None and len(made) == 1


def test_the_app_thread_of_a_gone_group_keeps_its_subject_from_the_finding():
    """A group whose finding outlives it in the snapshot (OOM-killed and gone) is still named."""
    from pinmon.tui.view.finding_subject import finding_subject

    snap = make_groups_snapshot(0)
    f = Finding("cgroup-oom-kills", "critical", "Docker container ef01", "m", "a", values={"cgroup": "gone/key"})
    assert finding_subject(f, dataclasses.replace(snap, cgroups=()), short=True) == "Docker container ef01"
