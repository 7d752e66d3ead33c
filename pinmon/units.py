"""Formatting at the edge: bytes as binary GiB/MiB, bandwidth as decimal GB/s (as NVIDIA's tools do).

Inside pinmon every figure is bytes or bytes/second; only views call these. ``None`` prints "n/a".
Each kind of figure has one formatter here (bytes, rate, share, seconds, link, traffic), so the
terminal app, ``pinmon check``, the probe report and the advisor's messages print it alike.
"""
from __future__ import annotations

from collections.abc import Mapping

from .limits import MAX_SIZE_BYTES

NA = "n/a"
KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30


def fmt_bytes(n: float | None, digits: int = 1) -> str:
    """1536 -> '1.5 KiB'; 61.2 * 2**30 -> '61.2 GiB'."""
    if n is None:
        return NA
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, size in (("TiB", 1 << 40), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{sign}{n / size:.{digits}f} {unit}"
    return f"{sign}{int(n)} B"


def fmt_rate(bytes_per_s: float | None, digits: int = 1) -> str:
    """Decimal bandwidth: 55.0e9 -> '55.0 GB/s', 3.2e6 -> '3.2 MB/s'."""
    if bytes_per_s is None:
        return NA
    v = abs(bytes_per_s)
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if v >= size:
            return f"{bytes_per_s / size:.{digits}f} {unit}"
    return f"{bytes_per_s:.0f} B/s"


def fmt_seconds(seconds: float | None, digits: int | None = None) -> str:
    """A duration with its unit: 9.1e-6 -> '9.1 us', 0.124 -> '124.0 ms', 1.5 -> '1.50 s',
    600 -> '10 min', 9000 -> '2.5 h'. ``digits`` replaces the unit's usual decimals (1 for us, ms
    and h, 2 for s, 0 for min)."""
    if seconds is None:
        return NA
    if seconds == 0:
        return "0 s"
    v = abs(seconds)
    # (from, unit, size, usual decimals): whole minutes from 2 min, hours from 2 h.
    for start, unit, size, usual in ((7200.0, "h", 3600.0, 1), (120.0, "min", 60.0, 0), (1.0, "s", 1.0, 2),
                                     (1e-3, "ms", 1e-3, 1), (0.0, "us", 1e-6, 1)):
        if v >= start:
            return f"{seconds / size:.{usual if digits is None else digits}f} {unit}"
    return NA  # NaN


def fmt_pct(fraction: float | None, digits: int = 0) -> str:
    if fraction is None:
        return NA
    return f"{fraction * 100:.{digits}f}%"


def share(part: float | None, whole: float | None) -> float | None:
    """``part`` as a fraction of ``whole``; None when either is unknown or the whole is 0."""
    if part is None or not whole:
        return None
    return part / whole


def fmt_share(part: float | None, whole: float | None, digits: int = 0) -> str:
    """``part`` as a percentage of ``whole``: fmt_share(30, 120) -> '25%'; 'n/a' when unknown."""
    return fmt_pct(share(part, whole), digits)


def fmt_ratio(ratio: float | None, digits: int = 1) -> str:
    """How many times one figure is another: 8.66 -> '8.7x' (a speedup, remote vs local)."""
    if ratio is None:
        return NA
    return f"{ratio:.{digits}f}x"


def fmt_link(gen: int | None, width: int | None) -> str:
    """A PCIe link's generation and width: 'Gen5 x16', 'Gen4 x?' when one is unknown, 'n/a' for both."""
    if gen is None and width is None:
        return NA
    return f"Gen{gen if gen is not None else '?'} x{width if width is not None else '?'}"


def fmt_traffic(rx_bytes_per_s: float | None, tx_bytes_per_s: float | None) -> str:
    """A link's two directions: 'RX 12.3 GB/s  TX 1.0 GB/s' (RX host to device, TX device to host)."""
    return f"RX {fmt_rate(rx_bytes_per_s)}  TX {fmt_rate(tx_bytes_per_s)}"


def fmt_int(n: int | None) -> str:
    return NA if n is None else f"{n:,}"


def node_key(node: str) -> tuple[int, int, str]:
    """Sort key of a NUMA node id: "2" before "10"; a key that is not a number in ASCII digits (a
    recording's odd key) after them, by name."""
    return (0, int(node), "") if node.isascii() and node.isdigit() else (1, 0, node)


def main_node(by_node: Mapping[str, float] | None) -> tuple[str, float] | None:
    """(the node holding the most of ``by_node``'s bytes, its share of them), the lowest node on a
    tie; None when unknown or empty."""
    total = sum(v for v in by_node.values() if v > 0) if by_node else 0
    if not by_node or total <= 0:
        return None
    node, v = max(sorted(by_node.items(), key=lambda kv: node_key(kv[0])), key=lambda kv: kv[1])
    return node, v / total


def fmt_nodes(by_node: Mapping[str, float] | None, limit: int | None = None) -> str:
    """Bytes by NUMA node: "node0 300.0 GiB, node1 120.0 GiB" by node id; past ``limit`` nodes
    "+N more"; "n/a" when unknown."""
    if not by_node:
        return NA
    items = sorted(by_node.items(), key=lambda kv: node_key(kv[0]))
    shown = items if limit is None else items[:limit]
    text = ", ".join(f"node{printable(n, 12)} {fmt_bytes(v)}" for n, v in shown)
    return text + (f", +{len(items) - len(shown)} more" if len(items) > len(shown) else "")


def fmt_main_node(by_node: Mapping[str, float] | None) -> str:
    """"1 (75%)": the node holding the most of ``by_node``'s bytes and its share; "n/a" unknown."""
    main = main_node(by_node)
    return NA if main is None else f"{printable(main[0], 4)} ({fmt_pct(main[1])})"


def parse_size(text: str) -> int:
    """'256M', '256MiB', '1G', '4096' -> bytes (binary multiples), at most 1 EiB. Raises ValueError
    with a one-line reason."""
    s = str(text).strip().replace(" ", "")
    units = {"": 1, "b": 1, "k": KIB, "kb": KIB, "kib": KIB, "m": MIB, "mb": MIB, "mib": MIB,
             "g": GIB, "gb": GIB, "gib": GIB, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
             "p": 1 << 50, "pb": 1 << 50, "pib": 1 << 50, "e": 1 << 60, "eb": 1 << 60, "eib": 1 << 60}
    i = len(s)
    while i > 0 and s[i - 1].isalpha():
        i -= 1
    num, unit = s[:i], s[i:].lower()
    if unit not in units or not num:
        raise ValueError(f"not a size: {text!r} (use e.g. 256M, 1G, 4096)")
    try:
        value = float(num)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (use e.g. 256M, 1G, 4096)") from None
    if value < 0 or value != value or value == float("inf"):
        raise ValueError(f"not a size: {text!r} (must be a positive number)")
    if value * units[unit] > MAX_SIZE_BYTES:  # also keeps int() off an infinite product
        raise ValueError(f"size too large: {text!r} (at most 1 EiB)")
    return int(value * units[unit])


def _escaped(text: str) -> str:
    """``text`` with line breaks and tabs as spaces and other unprintable characters as escapes."""
    out = []
    for ch in text:
        if ch in "\r\n\t\v\f":
            out.append(" ")
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000
                       else f"\\U{code:08x}")
    return "".join(out)


def printable(text: str | None, max_len: int = 200) -> str:
    """One line of plain, printable text from untrusted input (a process name, a command line, a
    hostname, a report's call site): line breaks and tabs become spaces, other control characters
    (ESC first of all: terminal escapes) become ``\\xNN``, and the result is cut to ``max_len``
    characters with "…". ``None`` prints "n/a"."""
    if text is None:
        return NA
    # Every character becomes at least one: the first max_len + 1 decide the result, however long
    # the text (a 128 KiB argv[0] costs no more than a short one).
    head = str(text)[: max_len + 1]
    s = head if head.isprintable() else _escaped(head)  # the common case checked in C: nothing to replace
    if len(s) > max_len:
        s = s[:max(0, max_len - 1)] + "…"
    return s
