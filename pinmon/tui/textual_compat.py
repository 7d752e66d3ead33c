"""What differs between the Textual releases pinmon allows (6.12 .. 8.x), in one place.

Checked against Textual 6.12.0 and 8.2.8: the oldest and the newest that pyproject.toml allows
(``.ci/run`` runs the TUI tests on both). Only public modules and names are used; each part says
what pinmon does where a release lacks it.

1. The tab strip's type (``CONTENT_TABS``): the status line is composed right after TabbedContent's
   strip, found by its type; should a release not compose one (or move the type), no type matches
   and the lines follow the panes.
2. ``BLANK`` containers: Textual's switch for widgets that draw only their background; a release
   without it ignores the attribute and renders the containers as before (``HONOURS_BLANK``).
   ``draw_as_blank`` turns it on for one widget that Textual builds itself (the tab strip's box,
   the panes' switcher): Textual reads the switch from the widget (``self.BLANK``).
"""
from __future__ import annotations

from textual.widget import Widget

CONTENT_TABS: type
try:
    from textual.widgets.tabbed_content import ContentTabs

    CONTENT_TABS = ContentTabs
except Exception:  # moved: no type matches, the status line follows the panes
    CONTENT_TABS = type("NoContentTabs", (), {})

HONOURS_BLANK = hasattr(Widget, "BLANK")


def draw_as_blank(widget: Widget) -> None:
    """``BLANK`` for this widget alone, where the release has the switch: a widget that only holds
    others, with no border or text of its own (tests/tui/test_frame_cost.py checks each one)."""
    if HONOURS_BLANK:
        widget.BLANK = True  # type: ignore[misc]  # the class default, shadowed on this instance
