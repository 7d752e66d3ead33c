"""Large terminals use their room: history graphs, whole findings with their rule and process, the
command's script, tables that fit their column, the GPUs tab at full width; Enter on the overview;
pop-ups that say when their figures were read and when a finding cleared; labels that say what RX,
TX and "% of link" count."""
from __future__ import annotations

import dataclasses
import re

import pytest
from textual.widgets import TabbedContent

from pinmon.advise import advise
from pinmon.model import Finding
from pinmon.tui.app import PinmonApp
from pinmon.tui.screens.finding import FindingScreen
from pinmon.tui.screens.help import help_items
from pinmon.tui.view.format import fmt_time
from pinmon.tui.view.process_detail import detail_rows
from pinmon.tui.widgets.gpu_detail import GpuDetail
from pinmon.tui.widgets.memory import MemoryPanel
from pinmon.tui.widgets.processes import COLUMNS, NODE_COLUMN
from pinmon.tui.widgets.top_findings import fitted
from pinmon.tui.widgets.top_processes import MIN_COMMAND_CELLS, columns_for
from pinmon.units import fmt_rate
from tests import factories as make

from .fakes import GIB, FakeSource, fake_advisor, make_probe_result, make_snapshot
from .util import screen_text, text_of

SIZES = [(120, 30), (160, 48), (250, 60)]


def make_app(**kw) -> PinmonApp:
    kw.setdefault("probe_every_s", None)
    return PinmonApp(kw.pop("source", FakeSource()), kw.pop("advisor", fake_advisor), start_polling=False, **kw)


def with_commands(s):
    """The fake box's processes running scripts from long paths."""
    procs = tuple(make.moved(p, cmdline=f"/opt/venv/bin/python3 /srv/jobs/job{p.pid}/train_{p.pid}.py --lr 3")
                  for p in s.processes)
    return dataclasses.replace(s, processes=procs)


async def fill(app, pilot, n: int = 30, **kw):
    for i in range(n):
        app.apply_snapshot(with_commands(make_snapshot(i, **kw)))
    await pilot.pause()
    await pilot.pause()


# --- the overview --------------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_overview_graphs_each_gpu_and_pinned_memory_against_the_line(size):
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await fill(app, pilot)
        text = screen_text(app)
        assert re.search(r"└ [56] min ago .*pinned, share of RAM", text)  # the pinned graph's axis
        assert "RX/TX link bytes, last minutes" in text
        if size != (120, 30):  # two GPUs at 120x30: one line each, the same minutes
            assert re.search(r"└ [56] min ago .*top: 63.0 GB/s, the link's rate", text)  # the GPU graphs' axis
        assert re.search(r"50% ┄+", text) or "50% █" in text  # the critical share's line
        assert "pinned, share of RAM" in text
        memory = app.query_one("#ov-memory", MemoryPanel)
        assert memory.content_size.height == len(memory.rows)  # every graph row on screen, none wrapped


async def test_80x24_keeps_one_line_sparklines_and_no_graphs():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await fill(app, pilot)
        text = screen_text(app)
        assert "min ago" not in text and "┄" not in text
        await pilot.press("2")
        await pilot.pause()
        assert "min ago" not in screen_text(app)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_overview_commands_show_the_script_and_the_probe_table_fits(size):
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await fill(app, pilot)
        app.apply_probe_result(make_probe_result(), 1.0)
        await pilot.pause()
        processes = text_of(app.query_one("#ov-processes TopProcesses"))
        assert "python3 train_4242.py" in processes  # not the interpreter alone, not its directory
        probe = app.query_one("#ov-probe")
        lines = text_of(probe).splitlines()
        table = [line for line in lines if line.startswith(("H2D", "D2H")) or "pinned" in line]
        assert len(table) == 3  # the heading and a row each way, none wrapped onto a second line
        assert all(len(line) <= probe.content_size.width for line in table)


def test_overview_process_columns_keep_command_readable():
    for width in (44, 60, 96):
        columns, command = columns_for(width)
        assert command >= MIN_COMMAND_CELLS or [c[0] for c in columns] == ["PID", "PINNED"]
    assert [c[0] for c in columns_for(44)[0]] == ["PID", "PINNED"]
    assert [c[0] for c in columns_for(60)[0]] == ["PID", "PINNED", "GPU MEM"]
    assert [c[0] for c in columns_for(96)[0]] == ["PID", "USER", "PINNED", "GPU MEM"]


LONG = "pinned memory grew by 3 GiB a minute for ten minutes, so at this rate the box starts swapping soon; "


def two_findings(history):
    s = history[-1]
    return [Finding("pinned-growth", "critical", "host", LONG * 3, "Find the process that grows. " * 6),
            Finding("pageable-bulk-copies", "warning", f"pid {s.processes[0].pid} (python3)", "2.7 GB/s of copies",
                    "Pin the staging buffer.", values={"pid": s.processes[0].pid})]


@pytest.mark.parametrize("size", [(160, 48), (250, 60)], ids=["160x48", "250x60"])
async def test_overview_findings_in_full_with_rule_and_process(size):
    app = make_app(advisor=two_findings)
    async with app.run_test(size=size) as pilot:
        await fill(app, pilot)
        text = text_of(app.query_one("#ov-findings TopFindings"))
        assert "…" not in text  # everything fits: nothing cut
        assert "CRIT  host  pinned-growth" in text  # what it is about first, then the rule
        pid = make_snapshot(0).processes[0].pid
        assert f"WARN  pid {pid} python3 train_{pid}.py --lr 3  pageable-bulk-copies" in text
        assert "Find the process that grows. " * 5 in " ".join(text.split()) + " "


def test_findings_are_shortened_from_the_least_severe_up():
    s = with_commands(make_snapshot(0))
    found = two_findings([s])
    full = fitted(found, s, 80, 100)
    assert not any("…" in r.plain for r in full)
    tight = fitted(found, s, 80, len(full) - 1)
    assert len(tight) <= len(full) - 1
    critical_rows = [r.plain for r in tight][:len(fitted(found[:1], s, 80, 100))]
    assert not any("…" in r for r in critical_rows)  # the critical one keeps its whole text
    two = fitted(found, s, 80, 3)
    assert len(two) <= 3 and "more (6: Advisor)" in two[-1].plain


# --- the GPUs tab and Enter ----------------------------------------------------------------------

async def test_gpus_tab_at_160x48_gives_the_detail_the_whole_width():
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await fill(app, pilot)
        await pilot.press("2")
        await pilot.pause()
        detail = app.query_one(GpuDetail)
        assert detail.size.width >= 150
        assert text_of(detail).splitlines()[0].startswith("name")
        assert all(len(line) <= detail.content_size.width for line in text_of(detail).splitlines())


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_enter_on_the_overview_opens_the_selected_gpus_detail(size):
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await fill(app, pilot)
        await pilot.press("g", "1")  # GPU 1 selected, back on the overview; no Tab pressed
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "overview"
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "gpus"
        assert "GPU 1 detail" in str(app.query_one(GpuDetail).border_title)


async def test_enter_behind_the_help_does_not_open_a_gpu():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await fill(app, pilot, 3)
        await pilot.press("question_mark", "enter")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "overview"


# --- pop-ups: when the figures were read, and findings that cleared -------------------------------

def wc_finding(pid: int) -> Finding:
    return Finding("wc-cpu-readback", "warning", f"pid {pid} (python3)", "88 copies (64.0 MiB held now)",
                   "Drop write-combined memory.", values={"pid": pid, "write_combined_bytes": 64 << 20})


async def test_a_finding_popup_follows_the_advisor_and_marks_the_finding_cleared():
    pid = make_snapshot(0).processes[0].pid
    live = {"on": True}

    def advisor(history):
        return [wc_finding(pid)] if live["on"] else []

    app = make_app(advisor=advisor)
    async with app.run_test(size=(100, 30)) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.press("6", "enter")
        await pilot.pause()
        assert isinstance(app.screen, FindingScreen)
        assert f"figures as of {fmt_time(make_snapshot(0).time)}" in screen_text(app)
        app.apply_snapshot(make_snapshot(1))
        await pilot.pause()
        assert f"figures as of {fmt_time(make_snapshot(1).time)}" in screen_text(app)
        live["on"] = False
        s = make_snapshot(2)
        gone = dataclasses.replace(s, processes=tuple(p for p in s.processes if p.pid != pid))
        app.apply_snapshot(gone)
        await pilot.pause()
        text = screen_text(app)
        assert "CLEARED" in text and f"at {fmt_time(s.time)}: process {pid} has exited" in text
        assert f"its last figures, as of {fmt_time(make_snapshot(1).time)}" in text
        app.apply_snapshot(make_snapshot(3))  # still cleared: the time it cleared stays
        await pilot.pause()
        assert f"at {fmt_time(s.time)}" in screen_text(app)


def test_a_traced_process_shows_the_copy_rates_its_finding_quotes():
    """The pageable rate the advisor quotes is the table's pageable rows, both directions: they are
    highlighted while the finding is active, the others not."""
    s = make_snapshot(0)
    stats = [make.stat(d, mem, 1.3e9 if mem == "pageable" else 0.0) for d in ("h2d", "d2h")
             for mem in ("pinned", "pageable")]
    p = make.process(684, "python3", source="traced", pinned_bytes=0, copies=make.copies("hooks", stats=stats),
                     gpu_indices=(0,), gpu_memory_bytes=GIB)
    found = [Finding("pageable-bulk-copies", "warning", "pid 684 (python3)", "m", "a",
                     values={"pid": 684, "pageable_copy_bytes_per_s": 2.6e9})]
    rows = detail_rows(p, s, found)
    flagged = {r.label: r for r in rows if r.style == "warning" and r.label != "findings"}
    assert set(flagged) == {"H2D pageable", "D2H pageable"}
    assert all(r.text.split()[:2] == fmt_rate(1.3e9).split() for r in flagged.values())
    assert p.copies.pageable_bytes_per_s == 2.6e9 and not any(r.label == "pageable" for r in rows)
    gpu = next(r for r in rows if r.label == "GPU memory")
    assert gpu.text == f"{GIB / GIB:.1f} GiB on GPU 0 (node {s.gpus[0].numa_node})"


# --- labels --------------------------------------------------------------------------------------

def test_help_names_run_clear_of_their_text_and_explain_the_columns():
    text = "\n".join(item.plain if not isinstance(item, tuple) else item[0].plain + item[1]
                     for item in help_items())
    assert re.search(r"DEGRADED +below", text) and "DEGRADEDbelow" not in text
    for column in ("PINNED", "WC", "MAPS", "CHURN", "SRC", "NODE", "GPU MEM"):
        assert re.search(rf"^  {re.escape(column)} +\w", text, re.M), column
    assert "read requests" in text  # TX is not device-to-host data alone
    assert "% of link" in text and "payload" in text and "link bytes" in text


def test_sorted_headers_never_touch_their_neighbour():
    for _, header, _right, width in COLUMNS + (NODE_COLUMN,):
        if width is not None:
            assert len(header + " ▼") + 1 <= width, header


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_no_view_calls_tx_device_to_host_alone(size):
    app = make_app(advisor=lambda h: advise(h))
    async with app.run_test(size=size) as pilot:
        await fill(app, pilot, 5)
        for tab in "125":
            await pilot.press(tab)
            await pilot.pause()
            text = screen_text(app)
            assert "TX D2H" not in text and "TX device-to-host" not in text
        await pilot.press("2")
        await pilot.pause()
        assert "TX also counts the read requests of host-to-device copies" in text_of(app.query_one(GpuDetail))


async def test_a_replays_probe_tab_says_where_it_was_measured():
    app = make_app(source=FakeSource(live=False, probe_in_snapshots=True))
    async with app.run_test(size=(100, 30)) as pilot:
        app.apply_snapshot(make_snapshot(0, source="replay",
                                         probe=make_probe_result()))
        await pilot.press("5")
        await pilot.pause()
        title = str(app.query_one("#probe-panel").border_title)
        assert "this box" not in title.replace("not this box", "")
        assert make_snapshot(0).host.hostname in title and "recorded" in title


async def test_rows_that_grow_after_a_lost_layout_request_still_get_their_height(monkeypatch):
    """A layout asked for while the screen's own is pending can be missed (at start-up); the rows
    check their height after the next refresh and ask again."""
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await fill(app, pilot, 3)
        memory = app.query_one("#ov-memory", MemoryPanel)
        real = type(memory).refresh
        dropped = {"n": 0}

        def lossy(self, *regions, **kw):
            if kw.get("layout") and self is memory and not dropped["n"]:
                dropped["n"] += 1
                kw["layout"] = False  # the request that goes missing
            return real(self, *regions, **kw)

        monkeypatch.setattr(type(memory), "refresh", lossy)
        rows = list(memory.rows)
        memory.set_rows(rows + rows[:3])
        await pilot.pause()
        await pilot.pause()
        assert dropped["n"] == 1
        assert memory.content_size.height == len(memory.rows)


def test_readme_measurement_and_help_give_one_meaning_of_percent_of_link():
    """The help's term, the README and docs/measurement.md say the same: a share of the link's rate,
    of link bytes on GPU rows and of payload in the probe, with the same pair of figures."""
    import os

    from pinmon.advise.thresholds import Thresholds
    from pinmon.tui.screens.help import terms

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parts = [dict(terms(Thresholds()))["% of link"]]
    for path in (("README.md",), ("docs", "measurement.md")):
        flat = " ".join(open(os.path.join(root, *path)).read().split())
        parts.append(flat[flat.index('"% of link"'):][:600])
    for part in parts:
        assert "link bytes" in part and "payload" in part and "88%" in part and "94%" in part, part


async def test_text_that_changes_size_after_a_lost_layout_request_still_gets_its_height(monkeypatch):
    """The same for a text widget (``set_content``): the probe's summary kept the height of its first,
    wrapped text at 120x30 and pushed the process list out of its column."""
    from textual.app import App
    from textual.widgets import Static

    from pinmon.tui.widgets.base import TextBlock, set_content

    class OneText(App):
        def compose(self):
            yield TextBlock(id="text")
            yield Static("below", id="below")

    app = OneText()
    async with app.run_test(size=(40, 12)) as pilot:
        text = app.query_one("#text", Static)
        set_content(text, "one\ntwo\nthree\nfour\nfive\nsix")
        await pilot.pause()
        assert text.content_size.height == 6
        real = Static.refresh
        dropped = {"n": 0}

        def lossy(self, *regions, **kw):
            if kw.get("layout") and self is text and not dropped["n"]:
                dropped["n"] += 1
                kw["layout"] = False  # the request that goes missing
            return real(self, *regions, **kw)

        monkeypatch.setattr(Static, "refresh", lossy)
        set_content(text, "one\ntwo")
        for _ in range(4):
            await pilot.pause()
        assert dropped["n"] == 1 and text.content_size.height == 2
        assert app.query_one("#below").region.y == 2  # the widget below moved up with it
