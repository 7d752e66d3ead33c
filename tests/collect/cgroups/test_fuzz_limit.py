"""Fuzzing the cgroup memory limit parser: any text (or none) gives no limit or one below 2**60, never
an error. Examples: the Hypothesis profile's (tests/fuzzing.py)."""
from __future__ import annotations

import pytest
from hypothesis import given

from pinmon.collect.cgroups.limits import parse_limit
from tests.fuzzing import BYTES, CGROUP_VALUES, FUZZ, run_counted, splice

pytestmark = [pytest.mark.hardening, pytest.mark.fuzz]


def test_cgroup_limit_value():
    def make(count):
        @FUZZ
        @given(BYTES)
        def t(data):
            count()
            text = None if data == b"\x00" else splice(data, CGROUP_VALUES)
            v, _understood = parse_limit(text)
            assert v is None or 0 <= v < (1 << 60)
        return t
    run_counted(make)
