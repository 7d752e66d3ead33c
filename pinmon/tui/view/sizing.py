"""How much of a large terminal each of the overview's graphs takes: pure arithmetic, no Textual.

The wide overview (120 columns and more) is two columns: GPUs over the advisor on the left, host
memory over the processes and the probe on the right. The GPU graphs take up to ``GPU_SHARE`` of
the height under the tab strip, the rest goes to the advisor's findings; the pinned-memory graph
grows with the height in steps, leaving the process list most of its column. The GPUs tab's rows
have graphs of the same size, above the selected GPU's detail.
"""
from __future__ import annotations

# Graphs from this terminal width (the wide layout's breakpoint): 80x24 keeps one line per direction.
WIDE_CELLS = 120
# Lines above and below the panes: the tab strip (2), the status line, the notice bar, the footer.
CHROME_LINES = 5
GPU_SHARE = 0.45
PANEL_BORDER = 2
# A GPU's graph: its head line, ``rows`` per direction, the time axis.
MAX_GPU_GRAPH_ROWS = 8
MAX_PINNED_BAND_ROWS = 3


def pane_lines(screen_height: int) -> int:
    return max(0, screen_height - CHROME_LINES)


def gpu_graph_rows(screen_width: int, screen_height: int, gpu_count: int, extra_lines: int = 0) -> int:
    """Rows of graph per direction for each GPU; 1 means the one-line sparkline (a narrow terminal,
    or no room for more). ``extra_lines``: each GPU's lines besides its head, graphs and axis (what
    the measured copies explain of its link)."""
    if gpu_count <= 0 or screen_width < WIDE_CELLS:
        return 1
    budget = int(GPU_SHARE * pane_lines(screen_height)) - PANEL_BORDER
    per_gpu = budget // gpu_count - extra_lines
    rows = (per_gpu - 2) // 2  # the head line and the axis, then two directions
    return max(1, min(MAX_GPU_GRAPH_ROWS, rows)) if rows >= 2 else 1


def pinned_band_rows(screen_height: int) -> int:
    """Rows above and below the critical-share line in the pinned-memory graph; 0: no graph."""
    lines = pane_lines(screen_height)
    if lines < 18:
        return 0
    return max(1, min(MAX_PINNED_BAND_ROWS, (lines - 25) // 10 + 1))


# The least terminal the app draws in: the tab strip's width (its seven tabs in one row) and room for
# the overview's panels under it. Smaller, a hint says so (screens/too_small.py), and q still quits.
MIN_WIDTH = 78
MIN_HEIGHT = 20


def too_small(width: int, height: int) -> bool:
    return width < MIN_WIDTH or height < MIN_HEIGHT
