"""Formatting at the edge: binary GiB for memory, decimal GB/s for bandwidth, n/a for unknown."""
import pytest

from pinmon.units import (
    MIB,
    fmt_bytes,
    fmt_link,
    fmt_main_node,
    fmt_nodes,
    fmt_pct,
    fmt_rate,
    fmt_ratio,
    fmt_seconds,
    fmt_share,
    fmt_traffic,
    main_node,
    node_key,
    parse_size,
    share,
)


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


def test_share_of_a_whole():
    assert share(30, 120) == 0.25 and fmt_share(30, 120) == "25%" and fmt_share(1, 3, 1) == "33.3%"
    # Unknown part, unknown or empty whole: no figure rather than a division by zero.
    assert share(None, 10) is None and share(5, None) is None and share(5, 0) is None
    assert fmt_share(5, 0) == "n/a"


@pytest.mark.parametrize("seconds, text", [
    (None, "n/a"), (0, "0 s"), (9.1e-6, "9.1 us"), (9e-6, "9.0 us"), (0.012, "12.0 ms"), (0.124, "124.0 ms"),
    (1.5, "1.50 s"), (119.99, "119.99 s"), (600, "10 min"), (9000, "2.5 h"), (-2.5, "-2.50 s"),
    (float("nan"), "n/a"),
])
def test_fmt_seconds(seconds, text):
    assert fmt_seconds(seconds) == text


def test_fmt_seconds_digits():
    assert fmt_seconds(1.0, 0) == "1 s" and fmt_seconds(600, 0) == "10 min" and fmt_seconds(2e-3, 2) == "2.00 ms"


def test_fmt_ratio():
    assert fmt_ratio(8.66) == "8.7x" and fmt_ratio(0.7361, 2) == "0.74x" and fmt_ratio(None) == "n/a"


def test_fmt_link():
    assert fmt_link(5, 16) == "Gen5 x16"
    assert fmt_link(None, None) == "n/a"
    assert fmt_link(4, None) == "Gen4 x?" and fmt_link(None, 8) == "Gen? x8"


def test_fmt_traffic():
    assert fmt_traffic(12.3e9, 1e9) == "RX 12.3 GB/s  TX 1.0 GB/s"
    assert fmt_traffic(None, 0.0) == "RX n/a  TX 0 B/s"


@pytest.mark.parametrize("text, value", [("256M", 256 << 20), ("256MiB", 256 << 20), ("1G", 1 << 30),
                                         ("4096", 4096), ("1.5g", 3 << 29), ("64 KiB", 64 << 10),
                                         ("1P", 1 << 50), ("2PiB", 2 << 50), ("1E", 1 << 60), ("1EiB", 1 << 60)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "12Q", "-1G", "nanG", "inf", "1e999G", "2E", "1025P"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError, match=r"not a size|size too large"):
        parse_size(text)


def test_printable_makes_untrusted_text_one_safe_line():
    from pinmon.units import printable

    assert printable("py\x1b[2Jthon\nrm -rf\t/") == "py\\x1b[2Jthon rm -rf /"
    assert printable("\u202eevil") == "\\u202eevil"  # bidi override: shown, not obeyed
    assert printable("x" * 300, 10) == "x" * 9 + "…"
    assert printable(None) == "n/a"


def test_nodes_sort_by_number_then_by_name():
    assert sorted(["10", "2", "x", "0"], key=node_key) == ["0", "2", "10", "x"]
    # Digits that are not ASCII (a crafted recording's key) are a name, not a number to parse.
    assert sorted(["\u00b2", "1"], key=node_key) == ["1", "\u00b2"]


def test_fmt_nodes():
    split = {"10": 10 * MIB, "2": 2 * MIB, "0": 0}
    assert fmt_nodes(split) == "node0 0 B, node2 2.0 MiB, node10 10.0 MiB"
    assert fmt_nodes(split, 1) == "node0 0 B, +2 more"
    assert fmt_nodes(None) == fmt_nodes({}) == "n/a"
    assert fmt_nodes({"\x1b[2J": 1}) == "node\\x1b[2J 1 B"  # a key from a file is shown, not sent


def test_main_node_and_its_share():
    assert main_node({"0": 1, "1": 3}) == ("1", 0.75) and fmt_main_node({"0": 1, "1": 3}) == "1 (75%)"
    assert main_node({"1": 2, "0": 2}) == ("0", 0.5)  # a tie: the lowest node, whatever the order
    assert main_node({"0": 0}) is None and fmt_main_node(None) == "n/a"
    assert fmt_main_node({"\u00b2": 5, "0": 3}) == "\u00b2 (62%)"
