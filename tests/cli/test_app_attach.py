"""The live app's attach as the command line wires it: ``pinmon --attach`` keeps every CUDA process
attached (or, before check, record or export, is theirs; a command that attaches nothing refuses it);
without it the app's key gets a runner where attaching can work, else why not; a replay gets neither."""
from __future__ import annotations

import importlib
import json
import time

import pytest

from pinmon.attach import AttachOutcome
from pinmon.cli import attaching, common
from pinmon.cli.main import build_parser, main
from pinmon.cli.options import resolve
from pinmon.collect.attached import RequestedWindows
from tests.tui.fakes import FakeSource

main_mod = importlib.import_module("pinmon.cli.main")  # the module: pinmon.cli names its function main


def exit_code(argv) -> int:
    """``main``'s code, or argparse's (it exits on an argument it refuses)."""
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def options(monkeypatch, tmp_path, source=None, config_text="", argv=(), **run_kw):
    """What the command line hands the terminal app for ``source``."""
    import pinmon.tui.app

    cfg = tmp_path / "pinmon.toml"
    cfg.write_text(config_text)
    got: dict = {}
    monkeypatch.setattr(pinmon.tui.app, "run_app", lambda **kw: got.update(kw) or 0)
    settings = resolve(build_parser().parse_args(["--config", str(cfg), *argv]))
    assert common.run_app(source or FakeSource(), settings, **run_kw) == 0
    return got


def test_the_key_gets_a_runner_and_the_configured_window(monkeypatch, tmp_path):
    import pinmon.attach.tracefs

    monkeypatch.setattr(pinmon.attach.tracefs, "preflight", lambda *a, **k: None)
    got = options(monkeypatch, tmp_path, config_text="attach_window = 4\n", attach_windows=RequestedWindows())
    assert callable(got["attach_runner"]) and got["attach_window_s"] == 4.0 and got["attach_all"] is False


def test_where_attaching_cannot_work_the_key_gets_the_reason(monkeypatch, tmp_path):
    import pinmon.attach.tracefs

    why = "the kernel is locked down (confidentiality): tracefs is closed"
    monkeypatch.setattr(pinmon.attach.tracefs, "preflight", lambda *a, **k: why)
    got = options(monkeypatch, tmp_path, attach_windows=RequestedWindows())
    assert "attach_runner" not in got and got["attach_unavailable_reason"] == why


def test_attach_all_and_a_replay_get_no_runner(monkeypatch, tmp_path):
    got = options(monkeypatch, tmp_path, attach_all=True)
    assert got["attach_all"] is True and "attach_runner" not in got and "attach_unavailable_reason" not in got
    replay = options(monkeypatch, tmp_path, FakeSource(live=False), attach_windows=RequestedWindows())
    assert not any(k.startswith("attach") for k in replay)


def test_pinmon_attach_runs_the_app_with_every_process_attached_and_stops_it(monkeypatch):
    class Attacher:
        stopped = False

        def latest(self):
            return None

        def stop(self):
            Attacher.stopped = True

    got: dict = {}
    monkeypatch.setattr(main_mod, "no_app_here", lambda: None)
    monkeypatch.setattr(attaching, "continuous", lambda interval: Attacher())
    monkeypatch.setattr(main_mod, "run_app", lambda source, settings, **kw: got.update(kw) or 0)
    assert main(["--attach", "--interval", "2"]) == 0
    # No terminal under pytest: no outline was drawn before the app.
    assert got == {"attach_all": True, "attach_windows": None, "frame": None} and Attacher.stopped
    got.clear()
    assert main([]) == 0
    assert got["attach_all"] is False and isinstance(got["attach_windows"], RequestedWindows)


def test_pinmon_attach_without_a_terminal_is_the_check_report_over_an_attach(monkeypatch, capsys):
    none = "no process that maps libcuda to attach to"
    monkeypatch.setattr(main_mod, "no_app_here", lambda: "stdout is not a terminal")
    monkeypatch.setattr(attaching, "one_window", lambda pids, s: AttachOutcome(None, none, time.monotonic()))
    main(["--attach", "--oom-lookback", "0"])
    assert f"attach: {none}" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--attach", "check"], ["check", "--attach"]])
def test_attach_before_a_command_that_takes_it_is_its_own(monkeypatch, capsys, argv):
    none = "no process that maps libcuda to attach to"
    monkeypatch.setattr(attaching, "one_window", lambda pids, s: AttachOutcome(None, none, time.monotonic()))
    main([*argv, "--window", "0.1", "--json", "--oom-lookback", "0"])
    assert f"attach: {none}" in json.loads(capsys.readouterr().out)["snapshot"]["notices"]


@pytest.mark.parametrize("argv", [["--attach", "replay", "x.jsonl"], ["replay", "x.jsonl", "--attach"],
                                  ["--attach", "demo"], ["demo", "--attach"]])
def test_a_command_that_attaches_nothing_refuses_attach_in_one_line(capsys, argv):
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--attach attaches this machine's processes" in err
    assert f"pinmon {argv[0] if argv[0] != '--attach' else argv[1]} does not take it" in err
