"""Fuzzing the config loader: any bytes load or raise ``ConfigError`` in one line naming the file.
Examples: the Hypothesis profile's (tests/fuzzing.py)."""
from __future__ import annotations

import pytest
from hypothesis import given

from pinmon.cli.config import ConfigError, parse_config
from tests.fuzzing import BYTES, FUZZ, run_counted, splice

pytestmark = [pytest.mark.hardening, pytest.mark.fuzz]

TOML_PIECES = ["interval = 1.0", "interval = \"x\"", "interval = -1", "[thresholds]",
               "pinned_ram_warning_fraction = 0.3", "pinned_ram_critical_fraction = 2",
               "growth_min_bytes = \"2G\"", "growth_min_bytes = 1.5", "disabled_rules = [\"gpu-lost\"]",
               "disabled_rules = [1]", "bogus = 1", "[thresholds.sub]", "interval = inf", "= =", "[[x]]"]


def test_config_loader():
    def make(count):
        @FUZZ
        @given(BYTES)
        def t(raw):
            count()
            data = raw if raw[:1] == b"\xff" else splice(raw, TOML_PIECES)
            try:
                parse_config(data, "fuzz.toml")
            except ConfigError as e:
                assert "\n" not in str(e) and "fuzz.toml" in str(e)  # noqa: PT017  (a refusal may come, or not)
        return t
    run_counted(make)
