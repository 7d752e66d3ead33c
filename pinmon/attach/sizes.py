"""Copy and allocation sizes in bounded memory: a log-linear histogram.

Sizes fall in buckets of 1/16 of a power of two (at most 64 x 16 buckets, however many sizes come).
Each bucket keeps its smallest and largest size, so a percentile is the largest size of the bucket it
falls in: exact where that bucket holds one size (a loop of equal copies), else at most 6% high.
"""
from __future__ import annotations

SUB_BUCKETS = 16


def bucket_of(size: int) -> int:
    if size < SUB_BUCKETS:
        return size
    exp = size.bit_length() - 1
    sub = (size >> (exp - 4)) & (SUB_BUCKETS - 1)
    return exp * SUB_BUCKETS + sub


class SizeHistogram:
    __slots__ = ("buckets", "count", "max", "total")

    def __init__(self) -> None:
        self.buckets: dict[int, list[int]] = {}   # bucket -> [count, smallest, largest]
        self.count = 0
        self.total = 0
        self.max = 0

    def add(self, size: int, times: int = 1) -> None:
        key = bucket_of(size)
        b = self.buckets.get(key)
        if b is None:
            self.buckets[key] = [times, size, size]
        else:
            b[0] += times
            if size < b[1]:
                b[1] = size
            elif size > b[2]:
                b[2] = size
        self.count += times
        self.total += size * times
        if size > self.max:
            self.max = size

    def percentile(self, q: float) -> int | None:
        """The size at or below which a share ``q`` (0..1) of the sizes fall; None when empty."""
        if not self.count:
            return None
        rank = max(1, min(self.count, int(q * self.count + 0.999999)))
        seen = 0
        for key in sorted(self.buckets):
            count, _, largest = self.buckets[key]
            seen += count
            if seen >= rank:
                return largest
        return self.max
