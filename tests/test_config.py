"""The TOML config: defaults, the happy path, and a one-line error naming file and key for each fault."""
import dataclasses
import os

import pytest

from pinmon.advise import RULES, Thresholds
from pinmon.advise.thresholds import threshold_fields
from pinmon.cli import config as config_mod
from pinmon.cli.config import Config, ConfigError, load_config, parse_config
from pinmon.units import GIB, MIB


def write(tmp_path, text, name="c.toml"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


def error_of(tmp_path, text) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert msg.startswith(f"config {path}: ") and "\n" not in msg
    return msg[len(f"config {path}: "):]


@pytest.fixture
def config_home(tmp_path, monkeypatch):
    """Point the default config location at an empty temporary directory."""
    home = tmp_path / "confdir"
    monkeypatch.setattr("platformdirs.user_config_dir", lambda appname=None, *a, **k: str(home / appname))
    return home


# --- happy paths ---------------------------------------------------------------------------------

def test_no_file_at_the_default_location_gives_defaults(config_home):
    cfg = load_config(None)
    assert cfg == Config()
    assert cfg.interval_s == 1.0 and cfg.thresholds == Thresholds() and cfg.disabled_rules == frozenset()
    assert not config_home.exists()  # it never creates the directory or the file


def test_default_location_is_read_when_present(config_home):
    (config_home / "pinmon").mkdir(parents=True)
    (config_home / "pinmon" / "config.toml").write_text("interval = 5\n")
    cfg = load_config(None)
    assert cfg.interval_s == 5.0 and cfg.path == str(config_home / "pinmon" / "config.toml")


def test_full_file(tmp_path):
    path = write(tmp_path, """
interval = 2.5
disabled_rules = ["memlock-limit-low", "pcie-errors"]

[thresholds]
pinned_ram_warning_fraction = 0.25
pinned_ram_critical_fraction = 0.4
small_alloc_rate_per_s = 20
small_alloc_median_bytes = "512K"
link_degraded_traffic_bytes_per_s = 2e9
pageable_copy_bytes_per_s = 50_000_000
probe_link_fraction = 0.8
low_available_fraction = 0.05
growth_window_s = 300
growth_min_bytes = 2147483648
growth_min_fraction = 1
growth_max_drop_fraction = 0
memlock_low_bytes = "128 MiB"
""")
    before = sorted(os.listdir(tmp_path))
    cfg = load_config(path)
    assert sorted(os.listdir(tmp_path)) == before
    assert cfg.path == path and cfg.interval_s == 2.5
    assert cfg.disabled_rules == {"memlock-limit-low", "pcie-errors"}
    assert cfg.thresholds == Thresholds(
        pinned_ram_warning_fraction=0.25, pinned_ram_critical_fraction=0.4, small_alloc_rate_per_s=20.0,
        small_alloc_median_bytes=512 * 1024, link_degraded_traffic_bytes_per_s=2e9,
        pageable_copy_bytes_per_s=50e6, probe_link_fraction=0.8, low_available_fraction=0.05,
        growth_window_s=300.0, growth_min_bytes=2 * GIB, growth_min_fraction=1.0,
        growth_max_drop_fraction=0.0, memlock_low_bytes=128 * MIB)
    assert isinstance(cfg.thresholds.small_alloc_rate_per_s, float)
    assert isinstance(cfg.thresholds.growth_min_bytes, int)


def test_partial_thresholds_keep_other_defaults(tmp_path):
    cfg = load_config(write(tmp_path, "[thresholds]\nprobe_link_fraction = 0.6\n"))
    assert cfg.thresholds == dataclasses.replace(Thresholds(), probe_link_fraction=0.6)
    assert cfg.interval_s == 1.0


def test_empty_file_is_defaults(tmp_path):
    cfg = load_config(write(tmp_path, ""))
    assert dataclasses.replace(cfg, path=None) == Config()


@pytest.mark.parametrize("value", ["0.01", "1", "3600", "3600.0"])
def test_interval_bounds_accepted(tmp_path, value):
    assert load_config(write(tmp_path, f"interval = {value}\n")).interval_s == float(value)


@pytest.mark.parametrize("name", list(threshold_fields()))
def test_every_threshold_is_configurable(tmp_path, name):
    kind, _doc = threshold_fields()[name]
    value = {"fraction": "0.5", "bytes": "4096", "bytes_per_s": "5e8", "per_s": "3", "seconds": "60"}[kind]
    if name == "pinned_ram_warning_fraction":
        value = "0.45"  # must stay at or below the critical level (0.50)
    cfg = load_config(write(tmp_path, f"[thresholds]\n{name} = {value}\n"))
    assert getattr(cfg.thresholds, name) == pytest.approx(float(value))


def test_parse_config_from_text():
    cfg = parse_config('interval = 3\ndisabled_rules = []\n', "inline.toml")
    assert cfg.interval_s == 3.0 and cfg.disabled_rules == frozenset() and cfg.path == "inline.toml"


def test_default_path_uses_platformdirs(config_home):
    assert config_mod.default_config_path() == str(config_home / "pinmon" / "config.toml")


# --- errors --------------------------------------------------------------------------------------

def test_missing_explicit_file(tmp_path):
    path = str(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=r"^config .*nope\.toml: no such file$"):
        load_config(path)


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(str(tmp_path))


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path):
    path = write(tmp_path, "interval = 1\n")
    os.chmod(path, 0)
    try:
        with pytest.raises(ConfigError, match=r"cannot read it"):
            load_config(path)
    finally:
        os.chmod(path, 0o600)


def test_unreadable_default_file_is_an_error_too(config_home, monkeypatch):
    (config_home / "pinmon").mkdir(parents=True)
    (config_home / "pinmon" / "config.toml").write_text("interval = 1\n")

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("os.open", refuse)
    with pytest.raises(ConfigError, match=r"config .*config\.toml: cannot read it \(Permission denied\)"):
        load_config(None)


def test_not_utf8(tmp_path):
    assert "not UTF-8" in error_of(tmp_path, b"interval = \xff\xfe\n")


def test_not_toml(tmp_path):
    msg = error_of(tmp_path, "interval = = 3\n[thresholds\n")
    assert msg.startswith("not valid TOML: ") and "line 1" in msg


def test_unknown_top_level_key(tmp_path):
    assert error_of(tmp_path, "intervall = 2\n") == "unknown key intervall (did you mean interval?)"
    assert error_of(tmp_path, "[colors]\nx = 1\n") == (
        "unknown key colors (known: interval, app_probes, oom_lookback, attach_window, thresholds,"
        " disabled_rules)")


def test_unknown_threshold_key(tmp_path):
    msg = error_of(tmp_path, "[thresholds]\npinned_ram_warning = 0.3\n")
    assert msg == "unknown key thresholds.pinned_ram_warning (did you mean pinned_ram_warning_fraction?)"


def test_wrong_type_message_matches_the_documented_form(tmp_path):
    path = write(tmp_path, '[thresholds]\npinned_ram_warning_fraction = "lots"\n')
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == (f'config {path}: thresholds.pinned_ram_warning_fraction must be a number'
                            f' between 0 and 1, got "lots"')


@pytest.mark.parametrize("key, value, expect", [
    ("pinned_ram_critical_fraction", "1.5", "must be a number between 0 and 1, got 1.5"),
    ("probe_link_fraction", "-0.1", "must be a number between 0 and 1, got -0.1"),
    ("low_available_fraction", "nan", "must be a number between 0 and 1, got nan"),
    ("growth_min_fraction", "true", "must be a number between 0 and 1, got true"),
    ("small_alloc_median_bytes", "-1", "must be a byte count"),
    ("small_alloc_median_bytes", '"lots"', 'got "lots"'),
    ("growth_min_bytes", "1.5", "must be a byte count"),
    ("memlock_low_bytes", "[1]", "got an array"),
    ("small_alloc_rate_per_s", "-1", "must be a number of events per second, 0 or more, got -1"),
    ("link_degraded_traffic_bytes_per_s", "inf", "must be a number of bytes per second, 0 or more, got inf"),
    ("pageable_copy_bytes_per_s", '"fast"', 'got "fast"'),
    ("growth_window_s", "0", "must be a number of seconds above 0 and at most 31622400 (366 days), got 0"),
    ("growth_window_s", "{a = 1}", "got a table"),
])
def test_bad_threshold_values(tmp_path, key, value, expect):
    msg = error_of(tmp_path, f"[thresholds]\n{key} = {value}\n")
    assert msg.startswith(f"thresholds.{key} ") and expect in msg


def test_warning_above_critical(tmp_path):
    msg = error_of(tmp_path, "[thresholds]\npinned_ram_warning_fraction = 0.6\n")
    assert msg == ("thresholds.pinned_ram_warning_fraction (0.6) must not exceed"
                   " thresholds.pinned_ram_critical_fraction (0.5)")


@pytest.mark.parametrize("value, shown", [
    ("0", "0"), ("-1", "-1"), ("3600.5", "3600.5"), ('"1s"', '"1s"'), ("true", "true"), ("inf", "inf"),
    ("0.001", "0.001"), ("1e308", "1e+308"),
])
def test_bad_interval(tmp_path, value, shown):
    assert error_of(tmp_path, f"interval = {value}\n") == (
        f"interval must be a number of seconds from 0.01 to 3600, got {shown}")


@pytest.mark.parametrize("value", ["auto", "manual", "off"])
def test_app_probes(tmp_path, value):
    assert load_config(write(tmp_path, f'app_probes = "{value}"\n')).app_probes == value
    assert load_config(write(tmp_path, "")).app_probes == "auto"


@pytest.mark.parametrize("value, shown", [('"never"', '"never"'), ("false", "false"), ('["off"]', "an array")])
def test_bad_app_probes(tmp_path, value, shown):
    assert error_of(tmp_path, f"app_probes = {value}\n") == (
        f'app_probes must be one of "auto", "manual", "off", got {shown}')


def test_thresholds_must_be_a_table(tmp_path):
    assert error_of(tmp_path, "thresholds = 3\n") == "thresholds must be a table ([thresholds]), got 3"


@pytest.mark.parametrize("value, shown", [('"gpu-lost"', '"gpu-lost"'), ("[1, 2]", "an array")])
def test_disabled_rules_must_be_a_list_of_strings(tmp_path, value, shown):
    assert error_of(tmp_path, f"disabled_rules = {value}\n") == (
        f"disabled_rules must be a list of rule ids, got {shown}")


def test_unknown_rule_id(tmp_path):
    assert error_of(tmp_path, 'disabled_rules = ["gpu-lots"]\n') == (
        'disabled_rules: unknown rule id "gpu-lots" (did you mean gpu-lost?)')
    msg = error_of(tmp_path, 'disabled_rules = ["zzz"]\n')
    assert msg.startswith('disabled_rules: unknown rule id "zzz" (known: ') and all(r in msg for r in RULES)


def test_a_toml_date_is_shown_as_written(tmp_path):
    assert error_of(tmp_path, "interval = 2026-01-01\n").endswith("got 2026-01-01")


# --- a default file that is not pinmon's user's own --------------------------------------------------

def test_a_default_config_in_a_directory_others_can_write_is_ignored(config_home):
    (config_home / "pinmon").mkdir(parents=True)
    (config_home / "pinmon" / "config.toml").write_text('disabled_rules = ["pinned-ram-share"]\n')
    os.chmod(config_home / "pinmon", 0o777)
    cfg = load_config(None)
    assert cfg.disabled_rules == frozenset() and cfg.path is None
    (note,) = cfg.notices
    assert "ignored" in note and "writable by others" in note and "--config" in note
    # Named on purpose, the same file is read as given.
    assert load_config(str(config_home / "pinmon" / "config.toml")).disabled_rules == {"pinned-ram-share"}


def test_a_default_config_file_writable_by_its_group_is_ignored(config_home):
    (config_home / "pinmon").mkdir(parents=True)
    path = config_home / "pinmon" / "config.toml"
    path.write_text("interval = 5\n")
    os.chmod(path, 0o664)
    cfg = load_config(None)
    assert cfg.interval_s == 1.0 and "writable by its group" in cfg.notices[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make another user's files")
def test_roots_default_config_from_another_users_tree_is_ignored(tmp_path, monkeypatch):
    # su without "-" keeps XDG_CONFIG_HOME: root's default path lands in a user's home.
    home = tmp_path / "home"
    (home / "pinmon").mkdir(parents=True)
    (home / "pinmon" / "config.toml").write_text('disabled_rules = ["pinned-ram-share"]\n')
    for p in (home, home / "pinmon", home / "pinmon" / "config.toml"):
        os.chown(p, 1000, 1000)
    monkeypatch.setattr("platformdirs.user_config_dir", lambda appname=None, *a, **k: str(home / appname))
    cfg = load_config(None)
    assert cfg.disabled_rules == frozenset() and "belongs to uid 1000" in cfg.notices[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make another user's files")
def test_check_keeps_its_exit_code_against_an_inherited_config(tmp_path):
    import json
    import subprocess
    import sys

    from tests.factories import snapshot

    home = tmp_path / "home"
    (home / "pinmon").mkdir(parents=True)
    (home / "pinmon" / "config.toml").write_text('disabled_rules = ["pinned-ram-share"]\n')
    os.chown(home / "pinmon" / "config.toml", 1000, 1000)
    snap = snapshot(mem_total_bytes=100 * GIB, effective_mem_limit_bytes=100 * GIB, pinned_bytes_est=60 * GIB,
                    pinned_bytes_total=60 * GIB, pinned_bytes_source="est.")
    doc = tmp_path / "snap.json"
    doc.write_text(json.dumps(snap.to_dict()))
    env = dict(os.environ, XDG_CONFIG_HOME=str(home))
    out = subprocess.run([sys.executable, "-m", "pinmon", "check", "--snapshot", str(doc), "--json"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "ignored" in out.stderr and any("ignored" in n for n in json.loads(out.stdout)["snapshot"]["notices"])


def test_attach_window_is_the_app_keys_window_within_the_attach_bounds(tmp_path):
    assert load_config(write(tmp_path, "")).attach_window_s == 10.0
    assert load_config(write(tmp_path, "attach_window = 2.5\n")).attach_window_s == 2.5
    for bad in ("0", "7200", '"10s"', "true"):
        assert error_of(tmp_path, f"attach_window = {bad}\n").startswith(
            "attach_window must be a number of seconds from 0.1 to 3600, got ")
