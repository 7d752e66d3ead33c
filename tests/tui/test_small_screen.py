"""80x24 is first-class: long findings, many GPUs, many notices, multi-line command lines and text
that looks like markup must leave every panel in place, on one screen, shown as it is."""
from __future__ import annotations

import dataclasses

from textual.widgets import DataTable

from pinmon.model import Finding, GpuProcess
from pinmon.tui.app import PinmonApp
from pinmon.tui.screens.finding import FindingScreen
from pinmon.tui.screens.help import HelpScreen
from pinmon.tui.screens.notices import NoticesScreen
from pinmon.tui.widgets.header import StatusHeader
from pinmon.tui.widgets.notices import NoticeBar
from pinmon.tui.widgets.processes import ProcessPanel
from tests import factories as make

from .fakes import GIB, FakeRecorder, FakeSource, fake_advisor, make_snapshot
from .util import screen_text, text_of

SIZE = (80, 24)
LONG = ("pinned memory is 41% of effective RAM and has grown by 3 GiB a minute for the last ten minutes, "
        "so at this rate the box starts swapping within the hour; every process below holds part of it ") * 3
SCRIPT = "python3 -c '\nimport cupy\nfor i in range(10):\n    x = cupy.zeros(10)\n    print(x)\n'"


def long_advisor(history):
    """Five findings whose text runs over many lines at 80 columns."""
    return [Finding(f"rule_{k}", ("critical", "warning", "info")[k % 3], f"pid {k}", f"{k}: {LONG}",
                    f"cap pinned buffers or move the job: {LONG}", values={"share": 0.41, "pinned_bytes": 420 * GIB})
            for k in range(5)]


def crowded(i: int = 0, notices=(), script: str = SCRIPT, **text):
    """A snapshot of an 8-GPU box with 30 processes; process 4242 runs ``script``; ``text``
    replaces the hostname (``hostname``), the first process's name/user and the first GPU's name."""
    s = make_snapshot(i)
    gpus = tuple(dataclasses.replace(s.gpus[k % 2], index=k) for k in range(8))
    if "gpu_name" in text:
        gpus = (dataclasses.replace(gpus[0], name=text["gpu_name"]),) + gpus[1:]
    first = make.moved(s.processes[0], cmdline=script, name=text.get("name", "python3"), user=text.get("user", "alice"))
    procs = (first,) + tuple(dataclasses.replace(s.processes[1], pid=9000 + k) for k in range(29))
    host = dataclasses.replace(s.host, hostname=text.get("hostname", s.host.hostname))
    gpus = (dataclasses.replace(gpus[0], processes=(GpuProcess(pid=4242, gpu_memory_bytes=80 * GIB),)),) + gpus[1:]
    return dataclasses.replace(s, gpus=gpus, processes=procs, host=host, notices=tuple(notices))


def make_app(**kw) -> PinmonApp:
    kw.setdefault("probe_every_s", None)
    return PinmonApp(kw.pop("source", FakeSource()), kw.pop("advisor", fake_advisor), start_polling=False, **kw)


def lines_of(app) -> list[str]:
    return screen_text(app).splitlines()


# --- the overview and the advisor: long findings are bounded and wrap under their own start ------

async def test_overview_stays_on_one_screen_with_long_findings_many_gpus_and_notices():
    app = make_app(advisor=long_advisor)
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(crowded(notices=("first notice", "second\nnotice on two lines", "third")))
        await pilot.pause()
        await pilot.pause()
        grid = app.query_one("#overview-grid")
        assert grid.max_scroll_y == 0 and not grid.show_vertical_scrollbar
        rows = lines_of(app)
        # The panels' rules run to the last column: no scrollbar took the right edge.
        rules = [r for r in rows if r.startswith("─")]
        assert len(rules) == 4 and all(len(r.rstrip()) == SIZE[0] for r in rules)
        # The process list is on screen with its header and as many rows as fit, then a count.
        top = next(i for i, r in enumerate(rows) if "Pinned memory by process" in r)
        assert "PID USER" in rows[top + 1] and "4242" in rows[top + 2]
        assert any("more (4: Processes)" in r for r in rows[top:])
        assert any("more GPUs (2: GPUs" in r for r in rows)  # 8 GPUs: the GPUs tab has them all
        assert app.query_one(NoticeBar).region.height == 1


async def test_advisor_entries_wrap_under_their_text_and_are_bounded():
    app = make_app(advisor=long_advisor)
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.press("6")
        await pilot.pause()
        rows = lines_of(app)
        start = next(i for i, r in enumerate(rows) if "Advisor findings" in r) + 1
        entry = rows[start:start + 7]  # one finding: head, 3 lines of message, 3 of advice
        assert "CRIT" in entry[0] and "rule_0" in entry[0]
        assert entry[0].index("pid 0") < entry[0].index("rule_0")  # what it is about first
        assert entry[1].startswith("    0: pinned memory")
        assert entry[4].startswith("    → cap pinned buffers")
        for row in entry[2:4]:  # the message's further lines, under its first letter
            assert row.startswith(" " * 4) and row[4] != " ", row
        for row in entry[5:7]:  # the advice's, under the text after the arrow
            assert row.startswith(" " * 6) and row[6] != " ", row
        assert entry[3].rstrip().endswith("…") and entry[6].rstrip().endswith("…")
        assert "CRIT  pid 3  rule_3" in rows[start + 7]  # the next finding: this one took its 7 lines
        # Enter: the whole text.
        await pilot.press("enter")
        assert isinstance(app.screen, FindingScreen)
        assert LONG.strip() in text_of(app.screen.query_one("#finding-text")).replace("\n", " ")


async def test_wide_overview_findings_wrap_under_their_start():
    app = make_app(advisor=long_advisor)
    async with app.run_test(size=(160, 48)) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.pause()
        await pilot.pause()
        rows = [r[1:95] for r in lines_of(app)]  # inside the left column's border
        arrow = next(i for i, r in enumerate(rows) if "→ cap pinned" in r)
        assert rows[arrow - 1].startswith("        ")  # the message's second line, under its start
        assert rows[arrow + 1].startswith("          ")  # the advice's, under the arrow's text


# --- processes: one line each, the table never scrolls sideways ----------------------------------

async def test_process_table_fits_80_columns_and_shows_the_whole_command_below():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(crowded())
        await pilot.press("4")
        await pilot.pause()
        table = app.query_one("#process-table", DataTable)
        assert table.max_scroll_x == 0 and not table.show_horizontal_scrollbar
        command = table.get_row_at(0)[-1].plain
        assert command.startswith(" python3 -c '") and command.endswith("…")
        assert len(command) >= 15 and "\n" not in command
        below = text_of(app.query_one("#process-command"))
        assert "4242" in below and "python3 -c ' import cupy for i in range(10):" in below and "\n" not in below
        rows = lines_of(app)
        assert sum("python3 -c" in r for r in rows) == 2  # its table row and the line below, nothing else
        await pilot.press("down")
        assert "9000" in text_of(app.query_one("#process-command"))  # follows the highlighted row


async def test_untrusted_text_is_one_printable_line_in_every_view():
    app = make_app()
    hostile = dict(hostname="node\x1b[2Jx", name="py\x1b]0;owned\x07", user="al\nice", gpu_name="H200\x1b[31m")
    async with app.run_test(size=(160, 48)) as pilot:
        app.apply_snapshot(crowded(**hostile))
        for tab in "12":
            await pilot.press(tab)
            await pilot.pause()
            text = screen_text(app)
            assert "\x1b" not in text and "\x07" not in text
            assert "node\\x1b[2Jx" in text
        detail = text_of(app.query_one("#gpu-detail"))
        assert "H200\\x1b[31m" in detail
        line = next(r for r in detail.splitlines() if "4242" in r)
        # The script: on one line, within the panel (cut where longer).
        assert "python3 -c ' import cupy" in line and len(line) <= app.query_one("#gpu-detail").content_size.width
        assert "import cupy" not in detail.replace(line, "")
        await pilot.press("4")
        await pilot.pause()
        table = app.query_one("#process-table", DataTable)
        cells = [c.plain for c in table.get_row_at(0)]
        assert "al ice" in cells[1]
        overview = text_of(app.query_one("#ov-processes TopProcesses.wide-only"))
        assert "python3 -c ' import cupy" in overview and "\x1b" not in overview  # the command line, one line


# --- pop-ups and notices ------------------------------------------------------------------------

async def test_finding_popup_close_hint_is_on_screen():
    app = make_app(advisor=long_advisor)
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.press("6", "enter")
        await pilot.pause()
        assert isinstance(app.screen, FindingScreen)
        assert "Esc / Enter / q: close" in screen_text(app)


async def test_help_close_hint_is_on_screen():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "Esc / q / ?: close" in screen_text(app)


async def test_notices_take_one_line_and_n_shows_them_all():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.pause()
        panes_alone = app.query_one("#overview").region.y
        app.apply_snapshot(crowded(1, notices=("NVML: " + "x" * 200, "two\nlines", "third")))
        await pilot.pause()
        bar = app.query_one(NoticeBar)
        assert bar.region.height == 1
        assert app.query_one("#overview").region.y == panes_alone + 1  # one line lower, whatever came in
        # Under the tab strip (two lines) and the status line.
        assert bar.region.y == app.query_one(StatusHeader).region.y + 1 == 3
        row = lines_of(app)[3]
        assert row.startswith(" ! NVML: xxx") and row.rstrip().endswith("+2 more (n)")
        await pilot.press("n")
        assert isinstance(app.screen, NoticesScreen)
        text = text_of(app.screen.query_one("#notices-text"))
        assert "two lines" in text and "third" in text and "x" * 200 in text.replace("\n", "").replace(" ", "")
        assert "Esc / n / q: close" in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, NoticesScreen)


async def test_probe_popups_replace_each_other():
    app = make_app(probe_unavailable_reason="CuPy is not installed")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.press("p", "s", "p", "s")
        await pilot.pause(0.3)
        assert screen_text(app).count("no probe: CuPy is not installed") == 1


# --- markup: text in brackets is shown as it is -------------------------------------------------

async def test_bracketed_text_is_shown_not_taken_as_markup():
    reason = "CuPy is not installed: pip install 'pinmon[cuda12]' [bold]now[/bold]"

    def advisor(history):
        return [Finding("pinned_share_high", "warning", "pid [4242]", "message [cuda12] [bold]x[/bold]",
                        "advice [i]y[/i]")]

    rec = FakeRecorder("rec[1].jsonl.gz")
    app = make_app(probe_unavailable_reason=reason, advisor=advisor, recorder_factory=lambda: rec)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        app.apply_snapshot(crowded(notices=("NVML [cuda12] missing",), hostname="node[bold]1",
                                   script="python train.py [cuda12] --x [bold]y[/bold]"))
        await pilot.press("p")
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "pinmon[cuda12]" in text and "[bold]now[/bold]" in text  # the pop-up
        assert "node[bold]1" in text and "NVML [cuda12] missing" in text
        assert "message [cuda12] [bold]x[/bold]" in text and "advice [i]y[/i]" in text
        await pilot.press("r")
        await pilot.pause(0.3)
        assert "recording to rec[1].jsonl.gz" in screen_text(app)
        await pilot.press("5")
        assert "pip install 'pinmon[cuda12]' [bold]now[/bold]" in text_of(app.query_one("#probe-body"))
        await pilot.press("4")
        await pilot.pause()
        assert "python train.py [cuda12] --x [bold]y[/bold]" in text_of(app.query_one(ProcessPanel)
                                                                        .query_one("#process-command"))
        await pilot.press("6", "enter")
        assert "pid [4242]" in text_of(app.screen.query_one("#finding-text"))


async def test_popup_text_is_one_line():
    app = make_app(probe_unavailable_reason="first line\nsecond line\x1b[2J")
    app.notes = []
    notify = app.notify
    app.notify = lambda message, **k: (app.notes.append((message, k)), notify(message, **k))
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.press("p")
        (message, kw), = app.notes
        assert message == "no probe: first line second line\\x1b[2J" and kw["markup"] is False
