"""What the tests read of Textual beyond its public API: the screen as the compositor draws it, and
which widgets an update renders. The package never does (tests/test_imports.py); a release that
keeps these elsewhere skips the tests that need them rather than failing them."""
from __future__ import annotations

import pytest
from textual.widget import Widget


def _compositor(app):
    compositor = getattr(app.screen, "_compositor", None)
    if compositor is None or not hasattr(compositor, "render_update"):
        pytest.skip("this Textual keeps its compositor elsewhere")
    return compositor


def screen_update(app):
    """The whole screen as the compositor draws it (a Rich renderable), modal screens included."""
    stack = getattr(app, "_background_screens", None)
    if stack is None:
        pytest.skip("this Textual keeps its screen stack elsewhere")
    return _compositor(app).render_update(full=True, screen_stack=stack)


def screen_strips(app) -> list:
    """The current screen's lines as strips."""
    return _compositor(app).render_strips()


def count_renders(monkeypatch) -> list:
    """Patch ``Widget.render_lines`` (with pytest's ``monkeypatch``) to note each widget it renders;
    returns the list it fills."""
    rendered: list = []
    real = Widget.render_lines

    def counting(self, crop):
        rendered.append(self)
        return real(self, crop)

    monkeypatch.setattr(Widget, "render_lines", counting)
    return rendered
