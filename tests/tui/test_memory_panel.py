"""The memory panel's pinned bar follows the thresholds of ``pinned-ram-share``: its colours grade
the share as the rule does, its mark sits at the critical share, and the note says where."""
import dataclasses

import pytest

from pinmon.advise import Thresholds
from pinmon.tui.view.state import ViewState
from pinmon.tui.widgets.memory import memory_rows, pinned_level

from .fakes import make_snapshot

T = Thresholds()


@pytest.mark.parametrize("fraction, level", [
    (None, "$success"), (0.29, "$success"), (0.30, "$warning"), (0.50, "$warning"), (0.51, "$error"),
])
def test_pinned_bar_grades_the_share_as_the_rule_does(fraction, level):
    assert pinned_level(fraction, T) == level


def test_configured_thresholds_move_the_colours_and_the_mark():
    t = dataclasses.replace(T, pinned_ram_warning_fraction=0.10, pinned_ram_critical_fraction=0.40)
    assert pinned_level(0.2, t) == "$warning" and pinned_level(0.41, t) == "$error"
    host = make_snapshot(0).host
    note = memory_rows(host, thresholds=t)[-1].plain
    assert "┃ marks 40% of effective RAM" in note
    assert "┃ marks 50% of effective RAM" in memory_rows(host)[-1].plain


def test_view_state_carries_the_default_thresholds():
    assert ViewState().thresholds == T
