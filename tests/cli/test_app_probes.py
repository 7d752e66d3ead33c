"""The terminal app's probes as the command line wires them: ``--no-probe`` stops the automatic ones
only (p and s still probe, and the footer offers them); the config's ``app_probes = "off"`` stops
every probe and the footer offers neither key. Driven with Textual's pilot and a fake probe engine."""
from __future__ import annotations

import pytest

from pinmon.cli import common
from pinmon.cli.main import build_parser
from pinmon.cli.options import APP_PROBE_EVERY_S, resolve
from pinmon.tui.app import PinmonApp
from tests.tui.fakes import FakeSource, make_probe_result, make_snapshot
from tests.tui.util import screen_text, wait_for

SIZE = (80, 24)


@pytest.fixture
def engine(monkeypatch):
    """A probe engine that is there and answers at once; its calls are the list."""
    import pinmon.probe

    calls: list = []

    def run_probe(kind, **kw):
        calls.append((kind, kw))
        return make_probe_result(kind)

    import pinmon.probe.cuda

    monkeypatch.setattr(pinmon.probe.cuda, "cupy_installed", lambda: True)
    monkeypatch.setattr(pinmon.probe, "run_probe", run_probe)
    return calls


def app_options(monkeypatch, tmp_path, argv, config_text=""):
    """What ``pinmon ARGV`` hands the terminal app, with a config file of ``config_text``."""
    import pinmon.tui.app

    cfg = tmp_path / "pinmon.toml"
    cfg.write_text(config_text)
    got: dict = {}
    monkeypatch.setattr(pinmon.tui.app, "run_app", lambda **kw: got.update(kw) or 0)
    settings = resolve(build_parser().parse_args(["--config", str(cfg), *argv]))
    assert common.run_app(FakeSource(), settings) == 0
    return got


def app_of(options) -> PinmonApp:
    options = dict(options)
    app = PinmonApp(options.pop("source"), options.pop("advisor"), start_polling=False, **options)
    app.notes = []

    def note(message, *a, **k):
        app.notes.append(str(message))

    app.notify = note
    return app


def footer(app) -> str:
    return screen_text(app).rstrip("\n").splitlines()[-1]


@pytest.mark.parametrize("argv, every", [
    ([], APP_PROBE_EVERY_S), (["--probe-every", "30"], 30.0),
    (["--no-probe"], None), (["--no-probe", "--probe-every", "30"], None),
], ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_the_automatic_probes_period(monkeypatch, tmp_path, engine, argv, every):
    options = app_options(monkeypatch, tmp_path, argv)
    assert options["probe_every_s"] == every and options["probe_runner"] is not None


async def test_no_probe_leaves_p_and_s_working(monkeypatch, tmp_path, engine):
    app = app_of(app_options(monkeypatch, tmp_path, ["--no-probe", "--max-pinned", "8M"]))
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.pause()
        assert app.session.auto_probe_timing() is None  # no automatic probe is ever scheduled
        assert "p Probe" in footer(app) and "s Sweep" in footer(app)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.session.probe_count == 1)
        await pilot.press("s")
        await wait_for(pilot, lambda: app.session.probe_count == 2)
    assert [kind for kind, _ in engine] == ["quick", "sweep"]
    assert all(kw["max_pinned_bytes"] == 8 << 20 for _, kw in engine)


@pytest.mark.parametrize("argv", [[], ["--no-probe"]], ids=["", "--no-probe"])
async def test_app_probes_off_forbids_every_probe_and_hides_the_keys(monkeypatch, tmp_path, engine, argv):
    options = app_options(monkeypatch, tmp_path, argv, 'app_probes = "off"\n')
    assert "probe_runner" not in options and options["probe_every_s"] is None
    app = app_of(options)
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(make_snapshot(0))
        await pilot.pause()
        assert "Probe" not in footer(app) and "Sweep" not in footer(app)
        await pilot.press("p", "s")
        await pilot.pause()
        assert app.session.probe_count == 0 and engine == []
        assert len(app.notes) == 2 and all('app_probes = "off"' in n for n in app.notes)
        await pilot.press("5")
        await pilot.pause()
        assert 'probes are off in the config (app_probes = "off")' in screen_text(app)


async def test_manual_in_the_config_is_no_probe(monkeypatch, tmp_path, engine):
    options = app_options(monkeypatch, tmp_path, [], 'app_probes = "manual"\n')
    assert options["probe_every_s"] is None and options["probe_runner"] is not None


def test_the_app_starts_without_importing_cupy(monkeypatch, tmp_path):
    """Whether probes are offered is asked of the installed packages only: CuPy's import (a second on
    a GPU box) and the device check wait for the first probe, off the first frame."""
    import sys

    import pinmon.probe.cuda

    monkeypatch.setattr(pinmon.probe.cuda, "cupy_installed", lambda: True)
    monkeypatch.setattr(pinmon.probe.cuda, "import_cupy", lambda: pytest.fail("CuPy imported before a probe"))
    options = app_options(monkeypatch, tmp_path, [])
    assert options["probe_runner"] is not None and options["probe_unavailable_reason"] is None
    assert "cupy" not in sys.modules or sys.modules["cupy"] is None


def test_without_cupy_the_app_says_so_from_the_start(monkeypatch, tmp_path):
    import pinmon.probe.cuda

    monkeypatch.setattr(pinmon.probe.cuda, "cupy_installed", lambda: False)
    options = app_options(monkeypatch, tmp_path, [])
    assert options.get("probe_runner") is None
    assert "CuPy is not installed" in options["probe_unavailable_reason"]
