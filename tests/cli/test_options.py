"""One argument parser: a shared option is one name before or after the command, its value settled once
(argument, else config file, else default), negative values reach the option's own check."""
from __future__ import annotations

import pytest

from pinmon.cli import main
from pinmon.cli.commands import COMMANDS
from pinmon.cli.main import build_parser
from pinmon.cli.options import SHARED, resolve


def settings_of(argv, tmp_path, config_text=""):
    cfg = tmp_path / "c.toml"
    cfg.write_text(config_text)
    args, extra = build_parser().parse_known_args(["--config", str(cfg), *argv])
    assert extra == []
    return resolve(args)


@pytest.mark.parametrize("argv, interval", [
    (["record", "-o", "x"], 1.0),
    (["--interval", "2", "record", "-o", "x"], 2.0),
    (["record", "-o", "x", "--interval", "2"], 2.0),
    (["--interval", "2", "export", "--interval", "3"], 3.0),  # given twice: the one after the command
    (["export", "--interval=0.5"], 0.5),
], ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_a_shared_option_is_one_name_before_or_after_the_command(tmp_path, argv, interval):
    assert settings_of(argv, tmp_path).interval_s == interval


def test_the_argument_else_the_config_file_else_the_default(tmp_path):
    assert settings_of(["record", "-o", "x"], tmp_path, "interval = 4\n").interval_s == 4.0
    assert settings_of(["record", "-o", "x", "--interval", "2"], tmp_path, "interval = 4\n").interval_s == 2.0
    assert settings_of([], tmp_path).interval_s == 1.0


@pytest.mark.parametrize("argv, max_pinned, every", [
    ([], None, None),
    (["--max-pinned", "8M", "export"], 8 << 20, None),
    (["export", "--max-pinned", "8M", "--probe-every", "30"], 8 << 20, 30.0),
    (["--probe-every", "30", "probe", "--max-pinned", "1G"], 1 << 30, 30.0),
    (["check", "--max-pinned", "2M"], 2 << 20, None),
], ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_probe_caps_and_periods(tmp_path, argv, max_pinned, every):
    s = settings_of(argv, tmp_path)
    assert s.max_pinned_bytes == max_pinned and s.probe_every_s == every


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_takes_the_config_file_after_it_too(tmp_path, capsys, command):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("interval = = 1\n")
    rest = {"record": ["-o", str(tmp_path / "r.jsonl")], "replay": ["r.jsonl"], "trace": ["--", "true"]}
    code = main([command, "--config", str(cfg), *rest.get(command, [])])
    err = capsys.readouterr().err
    assert code == (3 if command in ("check", "attach") else 2) and "bad.toml" in err and err.count("\n") == 1


def test_each_shared_option_is_declared_once():
    for name in SHARED:
        flag = "--" + name.replace("_", "-")
        parsers = [build_parser(), *build_parser().subcommands.values()]
        actions = [a for p in parsers for a in p.arguments if flag in a.option_strings]
        # One declaration (the shared parent's), one help text, one type, wherever it is taken.
        assert len({(a.help, a.type, a.dest) for a in actions}) == 1, flag


def _value_options():
    parser = build_parser()
    out = [([], o) for o in sorted(parser.value_options)]
    out += [([name], o) for name, p in parser.subcommands.items() for o in sorted(p.value_options)]
    return out


@pytest.mark.parametrize("where, option", _value_options(), ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_negative_value_reaches_the_options_own_check(capsys, where, option):
    # A value like -5 is this option's to judge (a type that refuses it says why, a file name is a
    # name): argparse alone would call it a missing value.
    try:
        build_parser().parse_known_args([*where, option, "-5"])
    except SystemExit:
        pass
    err = capsys.readouterr().err
    assert "expected one argument" not in err, err


def test_abbreviations_are_not_options(capsys):
    with pytest.raises(SystemExit) as e:
        main(["record", "-o", "x.jsonl", "--interv", "2"])
    assert e.value.code == 2 and "unrecognized arguments: --interv 2" in capsys.readouterr().err
