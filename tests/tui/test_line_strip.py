"""A row drawn straight to segments (``rows.line_strip``) is what Textual's text pipeline draws for it:
the same cells, styles and selection offsets, for every row of every panel the app shows, in
several themes; rows it cannot draw so go the usual way."""
from __future__ import annotations

from textual.content import Content, Span
from textual.visual import Visual

from pinmon.tui.widgets.gpu_row import GpuRow
from pinmon.tui.widgets.rows import LineStyles, RowsWidget, line_strip

from .fakes import fed_app, make_kernel_snapshot, make_snapshot


def textual_strip(widget, row: Content, index: int, width: int):
    strips = Visual.to_strips(widget, row, width, None, widget.visual_style)
    assert len(strips) == 1
    return strips[0].apply_offsets(0, index) if index else strips[0]


def cells(strip) -> list:
    """Per cell: the character, its style's definition, and the selection offset it carries."""
    return [(ch, str(seg.style), (seg.style.meta or {}).get("offset") if seg.style else None)
            for seg in strip for ch in seg.text]


def offsets(strip) -> list:
    return [(seg.text, (seg.style.meta or {}).get("offset")) for seg in strip]


async def _compare_all_rows(app, pilot) -> int:
    compared = 0
    for widget in app.screen.query(RowsWidget):
        if not widget.display or not widget.size.width:
            continue
        width = widget.size.width
        styles = LineStyles()
        for index, row in enumerate(widget.rows):
            if row.cell_length > width:
                continue  # wraps or is cut: the usual way
            fast = line_strip(row, index, widget.visual_style, styles)
            if fast is None:
                continue
            slow = textual_strip(widget, row, index, width)
            assert cells(fast) == cells(slow), (type(widget).__name__, index, row.plain)
            assert offsets(fast)[0][1] == offsets(slow)[0][1]
            assert fast.cell_length == slow.cell_length
            compared += 1
    return compared


async def test_every_panel_row_is_drawn_as_textual_draws_it():
    snaps = [make_snapshot(0), make_kernel_snapshot(1)]
    # Rows compared per second shown at least: at 160x48 the GPU rows with their graphs, the memory
    # panel with its graph; at 80x24 the memory panel's lines.
    for size, per_pass in (((160, 48), 20), ((80, 24), 3)):
        app = fed_app()
        async with app.run_test(size=size) as pilot:
            compared = 0
            for theme in ("textual-dark", "textual-light", "nord"):
                app.theme = theme
                for s in snaps:
                    app.apply_snapshot(s)
                    await pilot.pause()
                    compared += await _compare_all_rows(app, pilot)
            assert compared >= per_pass * 3 * len(snaps), compared


async def test_a_focused_gpu_rows_head_keeps_its_stacked_styles():
    app = fed_app()
    async with app.run_test(size=(160, 48)) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.pause()
        row = app.screen.query(GpuRow).first()
        # Focused, the head is bold over the spans of its parts: Textual's pipeline combines them.
        head = row.rows[0].stylize_before("bold")
        assert line_strip(head, 0, row.visual_style, LineStyles()) is None
        drawn = row._render_row(0, head, row.size.width)
        assert cells(drawn[0]) == cells(textual_strip(row, head, 0, row.size.width))


async def test_rows_it_cannot_draw_go_the_usual_way():
    app = fed_app()
    async with app.run_test(size=(100, 30)) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.pause()
        widget = app.screen.query(RowsWidget).first()
        base, styles = widget.visual_style, LineStyles()
        assert line_strip(Content("a\tb"), 0, base, styles) is None
        assert line_strip(Content.styled("x", ".gpu-row--spark-min"), 0, base, styles) is None  # a component class
        overlap = Content("abcdef", spans=[Span(0, 4, "bold"), Span(2, 6, "dim")])
        assert line_strip(overlap, 0, base, styles) is None
        # A plain row and a row of variables draw as Textual draws them.
        for row in (Content("plain text"), Content.assemble(("OK", "bold reverse $success"), " then ",
                                                            ("warn", "$warning 60%"))):
            fast = line_strip(row, 3, base, styles)
            assert fast is not None and cells(fast) == cells(textual_strip(widget, row, 3, 100))
        assert line_strip(Content(""), 0, base, styles).cell_length == 0
