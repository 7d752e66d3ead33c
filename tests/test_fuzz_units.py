"""Fuzzing the size parser: any text gives a size of at least 0 or a ``ValueError``. Examples: the
Hypothesis profile's (tests/fuzzing.py)."""
from __future__ import annotations

import pytest
from hypothesis import given

from pinmon.units import parse_size
from tests.fuzzing import BYTES, FUZZ, run_counted, splice

pytestmark = [pytest.mark.hardening, pytest.mark.fuzz]

SIZES = ["256M", "1G", "4096", "1.5GiB", "nan", "inf", "-1k", "1e400", "0x10", " 2 tb ", "e5", "."]


def test_size_parser():
    def make(count):
        @FUZZ
        @given(BYTES)
        def t(data):
            count()
            text = splice(data, SIZES)
            try:
                assert parse_size(text) >= 0
            except ValueError:
                pass
        return t
    run_counted(make)
