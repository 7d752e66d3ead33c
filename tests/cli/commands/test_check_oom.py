"""``pinmon check`` and the OOM kills in the kernel's log: the report's section and finding, the
``--json`` document, ``--oom-lookback`` (pinmon's and check's own) and the config's ``oom_lookback``."""
import json
import os

import pytest

from pinmon.cli import main
from pinmon.cli.config import ConfigError, parse_config
from pinmon.limits import DEFAULT_OOM_LOOKBACK_S
from tests import factories as make


def saved(tmp_path, snap) -> str:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap.to_dict()))
    return str(path)


def test_a_saved_snapshots_kill_is_reported_in_text_and_json(tmp_path, capsys):
    path = saved(tmp_path, make.snapshot(oom_kills=(make.oom_kill(),)))
    assert main(["check", "--snapshot", path]) == 2
    out = capsys.readouterr().out
    assert "Memory cgroup OOM kills in the kernel's log" in out and "slurm job 4711.0: python3 pid 5151" in out
    assert "CRITICAL oom-killed [Slurm job 4711 step 0]" in out
    assert main(["check", "--snapshot", path, "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    (k,) = doc["snapshot"]["oom_kills"]
    assert k["pid"] == 5151 and k["job"] == "4711" and k["step"] == "0" and k["shmem_rss_bytes"] == 48 << 30
    (f,) = [f for f in doc["findings"] if f["rule"] == "oom-killed"]
    assert f["severity"] == "critical" and f["values"]["shmem_fraction"] == 0.8


@pytest.mark.parametrize("argv", [["check", "--oom-lookback", "-1"], ["check", "--oom-lookback", "abc"],
                                  ["--oom-lookback", "1e12", "check"]])
def test_a_bad_lookback_is_one_line_exit_3(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--oom-lookback" in err and "expected one argument" not in err


@pytest.mark.parametrize("argv", [["--oom-lookback", "0", "check", "--window", "0.05", "--json"],
                                  ["check", "--oom-lookback", "0", "--window", "0.05", "--json"]])
def test_a_lookback_of_zero_reads_no_kernel_log(capsys, argv):
    assert main(argv) in (0, 1, 2)
    doc = json.loads(capsys.readouterr().out)
    assert doc["snapshot"]["oom_kills"] == [] and not any("kernel log" in n for n in doc["snapshot"]["notices"])
    assert not [f for f in doc["findings"] if f["rule"] == "oom-killed"]


def test_the_config_file_sets_the_lookback(tmp_path):
    assert parse_config("").oom_lookback_s == DEFAULT_OOM_LOOKBACK_S == 86400
    assert parse_config("oom_lookback = 3600").oom_lookback_s == 3600.0
    assert parse_config("oom_lookback = 0").oom_lookback_s == 0.0
    for bad in ("oom_lookback = -1", "oom_lookback = \"1d\"", "oom_lookback = 1e12", "oom_lookback = nan"):
        with pytest.raises(ConfigError, match="oom_lookback must be a number of seconds"):
            parse_config(bad)


def test_the_command_line_wins_over_the_config(tmp_path):
    from pinmon.cli.main import build_parser
    from pinmon.cli.options import resolve

    cfg = tmp_path / "c.toml"
    cfg.write_text("oom_lookback = 60\n")
    os.chmod(cfg, 0o600)

    def lookback(*argv):
        return resolve(build_parser().parse_args(["--config", str(cfg), *argv])).oom_lookback_s

    assert lookback("check") == 60
    assert lookback("--oom-lookback", "0", "check") == 0.0
    assert lookback("--oom-lookback", "0", "check", "--oom-lookback", "7") == 7.0
    assert lookback("record", "-o", "x", "--oom-lookback", "5") == 5.0
