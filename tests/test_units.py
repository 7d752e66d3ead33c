"""Formatting at the edge: binary GiB for memory, decimal GB/s for bandwidth, n/a for unknown."""
import pytest

from pinmon.units import fmt_bytes, fmt_pct, fmt_rate, fmt_seconds, parse_size


def test_fmt_bytes():
    assert fmt_bytes(None) == "n/a"
    assert fmt_bytes(0) == "0 B"
    assert fmt_bytes(1536) == "1.5 KiB"
    assert fmt_bytes(61.2 * 2**30) == "61.2 GiB"
    assert fmt_bytes(256 * 2**20) == "256.0 MiB"


def test_fmt_rate_is_decimal():
    assert fmt_rate(None) == "n/a"
    assert fmt_rate(55.0e9) == "55.0 GB/s"
    assert fmt_rate(6.3e9) == "6.3 GB/s"
    assert fmt_rate(3.2e6) == "3.2 MB/s"
    assert fmt_rate(12) == "12 B/s"


def test_fmt_seconds_picks_its_unit():
    assert fmt_seconds(0.0000091) == "9.1 us"
    assert fmt_seconds(0.124) == "124.0 ms"
    assert fmt_seconds(1e-3) == "1.0 ms"
    assert fmt_seconds(1.5) == "1.50 s"
    assert fmt_seconds(None) == "n/a"


def test_fmt_pct():
    assert fmt_pct(0.873) == "87%" and fmt_pct(None) == "n/a"


@pytest.mark.parametrize("text, value", [("256M", 256 << 20), ("256MiB", 256 << 20), ("1G", 1 << 30),
                                         ("4096", 4096), ("1.5g", 3 << 29), ("64 KiB", 64 << 10)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "12Q", "-1G", "nanG", "inf", "1e999G"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_printable_makes_untrusted_text_one_safe_line():
    from pinmon.units import printable

    assert printable("py\x1b[2Jthon\nrm -rf\t/") == "py\\x1b[2Jthon rm -rf /"
    assert printable("\u202eevil") == "\\u202eevil"  # bidi override: shown, not obeyed
    assert printable("x" * 300, 10) == "x" * 9 + "…"
    assert printable(None) == "n/a"
