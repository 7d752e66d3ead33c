"""PCIe link arithmetic: per-lane signalling rate, line-encoding efficiency, payload bandwidth, and
the link a payload rate belongs to.

Pure functions of numbers, so the collectors, the probe's analysis and the views share them. A link's
payload rate is ``GT/s x lanes x encoding efficiency / 8`` bytes per second. It is the
ceiling a transfer is judged against ("55 GB/s is 87% of a Gen5 x16 link"). Protocol overhead
(TLP headers, flow control) comes on top, so even a perfect copy stays below it.
Unknown or nonsensical input gives ``None``, never a guess.
"""
from __future__ import annotations

from fractions import Fraction

# Transfers per second per lane, in GT/s.
_LANE_RATE_GT_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0, 7: 128.0}

# Gen1-2 send 10 bits per byte; Gen3-5 128 payload bits per 130; Gen6 and later use 256-byte FLITs
# of which 242 bytes carry TLP data (the rest is FEC and CRC).
_ENCODING = {1: Fraction(8, 10), 2: Fraction(8, 10), 3: Fraction(128, 130), 4: Fraction(128, 130),
             5: Fraction(128, 130), 6: Fraction(242, 256), 7: Fraction(242, 256)}


def _valid_int(value: object) -> int | None:
    # bool is an int subclass; True lanes is a bug upstream, not a x1 link.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def lane_rate_gt_s(gen: int | None) -> float | None:
    """Signalling rate of one lane in GT/s: Gen1 2.5 ... Gen5 32, Gen6 64; None if unknown."""
    g = _valid_int(gen)
    return None if g is None else _LANE_RATE_GT_S.get(g)


def encoding_efficiency(gen: int | None) -> float | None:
    """Fraction of line bits that carry data: 0.8 (8b/10b), 128/130, 242/256 (FLIT); None if unknown."""
    g = _valid_int(gen)
    if g is None or g not in _ENCODING:
        return None
    return float(_ENCODING[g])


def theoretical_bytes_per_s(gen: int | None, width: int | None) -> float | None:
    """Payload bandwidth of one direction of a link, bytes/s: Gen5 x16 -> 63.0e9. None if unknown."""
    g, w = _valid_int(gen), _valid_int(width)
    if g is None or w is None or g not in _LANE_RATE_GT_S:
        return None
    return _LANE_RATE_GT_S[g] * 1e9 * w * float(_ENCODING[g]) / 8  # the two tables hold the same generations


# Widths a link trains to, for naming a link from its rate.
_WIDTHS = (1, 2, 4, 8, 12, 16, 32)


def link_name(bytes_per_s: float | None) -> str:
    """'Gen5 x16' when ``bytes_per_s`` is exactly one generation and width's payload rate, else 'link'."""
    if not bytes_per_s:
        return "link"
    # Equal rates are ambiguous (Gen4 x32 = Gen5 x16): prefer the common x16 slot, newest gen first.
    for width in sorted(_WIDTHS, key=lambda w: (w != 16, -w)):
        for gen in range(7, 0, -1):
            r = theoretical_bytes_per_s(gen, width)
            if r and abs(r - bytes_per_s) <= 0.002 * r:
                return f"Gen{gen} x{width}"
    return "link"
