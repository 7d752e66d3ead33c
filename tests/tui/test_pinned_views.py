"""The pinned figures in the app, at 80x24 and 160x48: the kernel's count and what explains it (memory
panel), the NUMA node of each process (process table) and of each GPU (GPU detail), and a traced
process in full (Enter in the Processes tab). Every number on screen is asserted equal to the
snapshot's, formatted with pinmon.units; highlights follow the real advisor's findings."""
from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import DataTable

from pinmon.advise import advise
from pinmon.advise.thresholds import Thresholds
from pinmon.tui.app import PinmonApp
from pinmon.tui.screens.process import ProcessScreen
from pinmon.tui.view.format import fmt_time, node_cell
from pinmon.tui.widgets.gpu_detail import GpuDetail
from pinmon.tui.widgets.memory import memory_rows, memory_title, pinned_level
from pinmon.tui.widgets.processes import NODE_TABLE_CELLS, table_layout
from pinmon.units import fmt_bytes, fmt_int, fmt_nodes, fmt_pct, fmt_rate

from .fakes import (
    GIB,
    T0,
    FakeProbeRunner,
    FakeSource,
    fake_advisor,
    make_kernel_snapshot,
    make_probe_result,
    make_snapshot,
)
from .util import screen_text, text_of

SMALL, LARGE = (80, 24), (160, 48)
SIZES = pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
ALERT = "bold $warning"


def make_app(advisor=advise) -> PinmonApp:
    return PinmonApp(FakeSource(), advisor, start_polling=False, probe_every_s=None, probe_runner=FakeProbeRunner())


async def show(app, pilot, snapshot, probe: bool = True) -> None:
    if probe:
        app.apply_probe_result(make_probe_result(t=T0), 1.5)
    app.apply_snapshot(snapshot)
    await pilot.pause()


def styled(row, text: str) -> set:
    """The styles of the spans that cover ``text`` in a Content row."""
    start = row.plain.index(text)
    return {str(s.style) for s in row.spans if s.start <= start and s.end >= start + len(text)}


# --- memory panel ------------------------------------------------------------------------------

@SIZES
async def test_memory_tab_shows_the_kernel_count_what_explains_it_and_its_nodes(size):
    s = make_kernel_snapshot(20, nodes=2, unattributed=300 * GIB)
    h = s.host
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await show(app, pilot, s)
        await pilot.press("3")
        text = screen_text(app)
        total_share = h.pinned_bytes_total / h.effective_mem_limit_bytes
        assert f"{fmt_pct(total_share)}  {fmt_bytes(h.pinned_bytes_total)} kernel of" in text
        assert (f"{fmt_bytes(h.kernel_pinned_bytes)} (kernel's count): CUDA processes explain"
                f" {fmt_bytes(h.kernel_pinned_bytes - h.unattributed_pinned_bytes)}") in text
        assert f"unattributed {fmt_bytes(h.unattributed_pinned_bytes)} explained by no process" in text
        assert f"by node      {fmt_nodes(h.kernel_pinned_bytes_by_node)}" in text
        assert f"WC           {fmt_bytes(h.write_combined_bytes_est)} est. (in pinned;" in text
        assert "est." not in text.split("kernel of")[0].splitlines()[-1]
        # 300 GiB of 724 GiB is unattributed: the advisor's rule fires, and the figure is highlighted.
        assert "pinned-unattributed" in {f.rule for f in app.session.findings}
        row = next(r for r in app.query_one("#memory-panel").rows if r.plain.startswith("unattributed"))
        assert ALERT in styled(row, fmt_bytes(h.unattributed_pinned_bytes))


async def test_unattributed_is_plain_while_the_rule_is_silent():
    s = make_kernel_snapshot(20, unattributed=24 * GIB)  # 5% of the count: under the 20% threshold
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await show(app, pilot, s)
        await pilot.press("3")
        assert "pinned-unattributed" not in {f.rule for f in app.session.findings}
        row = next(r for r in app.query_one("#memory-panel").rows if r.plain.startswith("unattributed"))
        assert ALERT not in styled(row, fmt_bytes(24 * GIB))
        assert "by node" not in screen_text(app)  # one node: no split


async def test_overview_at_80x24_has_the_compact_kernel_line_and_still_fits():
    s = make_kernel_snapshot(20, nodes=2, unattributed=300 * GIB)
    h = s.host
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await show(app, pilot, s)
        await pilot.pause()
        rows = [r.rstrip() for r in screen_text(app).splitlines()]
        assert any(r.startswith("pinned ") and f"{fmt_bytes(h.pinned_bytes_total)} kernel of" in r for r in rows)
        assert (f"kernel  {fmt_bytes(h.kernel_pinned_bytes)}  explained"
                f" {fmt_bytes(h.kernel_pinned_bytes - h.unattributed_pinned_bytes)}"
                f"  unattributed {fmt_bytes(h.unattributed_pinned_bytes)}") in rows
        assert f"by node {fmt_nodes(h.kernel_pinned_bytes_by_node)}" in rows
        grid = app.query_one("#overview-grid")
        assert grid.max_scroll_y == 0 and not grid.show_vertical_scrollbar
        top = next(i for i, r in enumerate(rows) if "Pinned memory by process" in r)
        assert "4242" in rows[top + 2] and "5151" in rows[top + 3]  # the process list keeps rows


async def test_without_the_kernel_count_pinned_says_est_as_before():
    app = make_app(fake_advisor)
    async with app.run_test(size=SMALL) as pilot:
        s = make_snapshot(0)
        await show(app, pilot, s, probe=False)
        text = screen_text(app)
        assert f"{fmt_bytes(s.host.pinned_bytes_est)} est. of" in text and "kernel" not in text
        await pilot.press("3")
        assert "kernel" not in screen_text(app)
        # A live snapshot on a kernel without the counters: the best figure, est., and why.
        host = dataclasses.replace(s.host, pinned_bytes_total=422 * GIB, pinned_bytes_source="est.")
        app.apply_snapshot(dataclasses.replace(make_snapshot(1), host=host))
        await pilot.pause()
        text = screen_text(app)
        assert f"{fmt_bytes(422 * GIB)} est. of" in text
        assert "kernel       n/a (no FOLL_PIN counters in /proc/vmstat)" in text


def test_compact_node_line_names_four_nodes_then_how_many_more():
    s = make_kernel_snapshot(0)
    host = dataclasses.replace(s.host, kernel_pinned_bytes_by_node={str(n): n * GIB for n in range(8)},
                               numa_nodes=tuple(range(8)))
    compact = [r.plain for r in memory_rows(host, compact=True)]
    assert f"by node {fmt_nodes(host.kernel_pinned_bytes_by_node, 4)}" in compact
    assert compact[-3].endswith("+4 more")
    full = [r.plain for r in memory_rows(host)]
    assert f"by node      {fmt_nodes(host.kernel_pinned_bytes_by_node)}" in full
    # A narrow column (the wide overview's): as many nodes as fit, and the short labels.
    narrow = [r.plain for r in memory_rows(host, compact=True, width=40)]
    assert f"by node {fmt_nodes(host.kernel_pinned_bytes_by_node, 1)}" in narrow
    kernel = next(r for r in narrow if r.startswith("kernel"))
    assert " expl. " in kernel and " unattr. " in kernel
    assert " explained " in next(r for r in compact if r.startswith("kernel"))


def test_the_pinned_bar_follows_the_advisors_pinned_ram_share_thresholds():
    # The bar is coloured as pinned-ram-share judges the share, and its mark is the rule's
    # critical share, as the user configured them.
    t = Thresholds()
    assert [pinned_level(x, t) for x in (None, 0.27, 0.30, 0.50, 0.51)] == \
        ["$success", "$success", "$warning", "$warning", "$error"]
    host = make_snapshot(0).host  # 420 GiB of 1 TiB pinned: 41%
    t = Thresholds(pinned_ram_warning_fraction=0.2, pinned_ram_critical_fraction=0.4)
    assert pinned_level(0.41, t) == "$error"
    rows = memory_rows(host, thresholds=t)
    assert rows[1].plain.index("┃") == len("pinned ") + int(0.4 * 20)
    assert "┃ marks 40% of effective RAM" in rows[-1].plain
    assert memory_title(t) == "Host memory (┃ = 40% of RAM)"
    assert memory_rows(host)[1].plain.index("┃") == len("pinned ") + 10  # the default 50%


# --- process table: NODE on multi-node hosts ---------------------------------------------------

async def test_node_column_on_a_multi_node_host_where_it_fits():
    s = make_kernel_snapshot(20, nodes=2)
    app = make_app()
    async with app.run_test(size=LARGE) as pilot:
        await show(app, pilot, s)
        await pilot.press("4")
        await pilot.pause()
        table = app.query_one("#process-table", DataTable)
        headers = [c.label.plain.strip() for c in table.columns.values()]
        assert "NODE" in headers
        at = headers.index("NODE")
        for p in s.processes:
            assert table.get_row(str(p.pid))[at].plain.strip() == node_cell(p)
        assert table.get_row("8080")[at].plain.strip() == "1 (75%)"
        await pilot.resize_terminal(*SMALL)
        await pilot.pause()
        await pilot.pause()
        headers = [c.label.plain.strip() for c in table.columns.values()]
        assert "NODE" not in headers and table.max_scroll_x == 0 and not table.show_horizontal_scrollbar


async def test_no_node_column_on_one_node():
    app = make_app()
    async with app.run_test(size=LARGE) as pilot:
        await show(app, pilot, make_kernel_snapshot(20, nodes=1))
        await pilot.press("4")
        await pilot.pause()
        headers = [c.label.plain.strip() for c in app.query_one("#process-table", DataTable).columns.values()]
        assert "NODE" not in headers


def test_table_layout_keeps_command_readable_with_node():
    columns, command = table_layout(NODE_TABLE_CELLS, nodes=True)
    assert any(c[1] == "NODE" for c in columns) and command >= 18
    columns, command = table_layout(NODE_TABLE_CELLS - 1, nodes=True)
    assert not any(c[1] == "NODE" for c in columns)
    assert not any(c[1] == "NODE" for c in table_layout(200, nodes=False)[0])


# --- GPU detail: the GPU's NUMA node -------------------------------------------------------------

async def test_gpu_detail_shows_the_numa_node():
    app = make_app(fake_advisor)
    async with app.run_test(size=SMALL) as pilot:
        s = make_snapshot(0)
        await show(app, pilot, s, probe=False)
        await pilot.press("g")  # GPU 1
        await pilot.pause()
        assert f"NUMA node {s.gpus[1].numa_node}" in text_of(app.query_one(GpuDetail))
        gpus = (dataclasses.replace(s.gpus[0], numa_node=None), s.gpus[1])
        app.apply_snapshot(dataclasses.replace(make_snapshot(1), gpus=gpus))
        await pilot.press("g")  # GPU 0, node unknown
        await pilot.pause()
        assert "NUMA node n/a" in text_of(app.query_one(GpuDetail))


# --- a traced process in full --------------------------------------------------------------------

async def open_process(app, pilot, pid: int) -> ProcessScreen:
    await pilot.press("4")
    await pilot.pause()
    table = app.query_one("#process-table", DataTable)
    table.move_cursor(row=table.get_row_index(str(pid)), animate=False)
    await pilot.press("enter")
    await pilot.pause()
    assert isinstance(app.screen, ProcessScreen)
    return app.screen


@SIZES
async def test_enter_on_a_traced_process_shows_its_copies_against_the_probe(size):
    s = make_kernel_snapshot(20, nodes=2)
    p = next(p for p in s.processes if p.pid == 8080)
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await show(app, pilot, s)
        screen = await open_process(app, pilot, 8080)
        text = screen_text(app)
        assert "process 8080" in text and "traced, engine CUPTI" in text
        for d, mem in (("h2d", "pinned"), ("h2d", "pageable"), ("d2h", "pinned")):
            t = p.copies.get(d, mem)
            line = next(r for r in text.splitlines() if f"{d.upper()} {mem} " in r)
            wanted = [fmt_rate(t.bytes_per_s), fmt_int(t.count)] + [
                fmt_rate(v) for v in (t.achieved_bytes_per_s, t.rate_p50_bytes_per_s, t.rate_p10_bytes_per_s)]
            assert " ".join(wanted).split() == line.split("█")[1].split()[2:]
        probe = s.probe or app.session.displayed.probe
        h2d = probe.rate("h2d", "pinned")
        up = p.copies.bulk_of("h2d").achieved_bytes_per_s
        assert f"H2D {fmt_rate(up)} = {fmt_pct(up / h2d)} of probe {fmt_rate(h2d)} (GPU 0, 2.50 s)" in text
        assert f"{fmt_bytes(p.held.bytes)} held ({fmt_bytes(p.held.registered_bytes)} registered)" in text
        assert f"{p.allocations.per_s:.1f}/s, median {fmt_bytes(p.allocations.median_bytes)}" in text
        assert 'pageable_copy "loader.py:118\\x1b[31m"' in text and "\x1b[31m" not in text
        # The essentials need no scrolling, at 80x24 too; the H2D copies are the slow ones.
        assert screen.query_one("#process-box").max_scroll_y == 0
        assert {f.rule for f in app.session.findings} >= {"slow-pinned-copies", "pinned-numa-remote"}
        body = screen.query_one("#process-text").render()
        h2d_row = next(r for r in body.split("\n") if "of probe" in r.plain and "H2D" in r.plain)
        assert ALERT in styled(h2d_row, "H2D")


async def test_the_popup_follows_new_snapshots_and_closes():
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await show(app, pilot, make_kernel_snapshot(20))
        await open_process(app, pilot, 8080)
        s = make_kernel_snapshot(21)
        old = s.processes[-1]
        bulk = tuple(dataclasses.replace(b, achieved_bytes_per_s=51.0e9) if b.direction == "h2d" else b
                     for b in old.copies.bulk)
        faster = dataclasses.replace(old, copies=dataclasses.replace(old.copies, bulk=bulk))
        app.apply_snapshot(dataclasses.replace(s, processes=s.processes[:-1] + (faster,)))
        await pilot.pause()
        assert f"H2D {fmt_rate(51.0e9)} =" in screen_text(app)
        app.apply_snapshot(make_kernel_snapshot(22, traced=False))  # the process has exited
        await pilot.pause()
        text = screen_text(app)
        gone_at = make_kernel_snapshot(22, traced=False).time
        assert f"process 8080 (gone at {fmt_time(gone_at, with_date=False)}: its last figures, as of" in text
        assert f"H2D {fmt_rate(51.0e9)} =" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ProcessScreen)
        assert app.query_one("#process-table", DataTable).has_focus


async def test_wide_overview_kernel_lines_fit_their_column():
    s = make_kernel_snapshot(20, nodes=2, unattributed=300 * GIB)
    app = make_app()
    async with app.run_test(size=LARGE) as pilot:
        await show(app, pilot, s)
        await pilot.pause()
        panel = app.query_one("#ov-memory")
        assert panel.content_size.height == len(panel.rows)  # no row wrapped onto a second line
        kernel = next(r.plain for r in panel.rows if r.plain.startswith("kernel"))
        assert fmt_bytes(s.host.unattributed_pinned_bytes) in kernel
