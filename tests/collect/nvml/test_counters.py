"""The counter arithmetic: 32-bit unwrapping, 64-bit counters, error counter deltas, read rates."""
from types import SimpleNamespace

import pytest

from pinmon.collect.nvml.counters import (
    MASK_32,
    MAX_COUNTER_HZ,
    MIN_COUNTER_HZ,
    UNKNOWN_LINK_COUNTER_HZ,
    CounterUnwrapper,
    LinkBytes,
    byte_values,
    counter_hz_for_link,
    fold_errors,
)

WRAP = 1 << 32


def test_single_wrap_is_exact():
    u = CounterUnwrapper(WRAP - 100)
    assert u.update(50) == 150
    assert u.total == 150 and not u.wide


def test_value_at_the_top_of_32_bits():
    u = CounterUnwrapper(MASK_32 - 1)
    assert u.update(MASK_32) == 1
    assert u.update(0) == 1  # 2**32-1 -> 0 is one byte
    assert u.update(5) == 5
    assert u.total == 7


def test_no_change_is_zero_not_a_wrap():
    u = CounterUnwrapper(123)
    assert u.update(123) == 0


def test_a_value_above_32_bits_makes_the_counter_64_bit():
    u = CounterUnwrapper(WRAP - 10)
    assert u.update(WRAP + 5) == 15
    assert u.wide
    assert u.update(WRAP + 105) == 100
    assert u.update(7) == 0  # a 64-bit counter going back was reset, it did not wrap
    assert u.update(17) == 10
    assert u.total == 125


def test_first_reading_above_32_bits_is_64_bit_from_the_start():
    u = CounterUnwrapper(5 * WRAP)
    assert u.wide
    assert u.update(5 * WRAP + 1) == 1


def fv(value, ret=0):
    """An nvmlFieldValue_t with an unsigned long long."""
    return SimpleNamespace(nvmlReturn=ret, valueType=3, value=SimpleNamespace(ullVal=value))


def test_link_bytes_take_what_the_reads_bound():
    lb = LinkBytes((WRAP - 10, 7), now=1.0)
    assert lb.take() is None  # no read since the first one
    lb.update((5, 17), now=1.25)  # RX wrapped: 15 bytes
    lb.update((25, 27), now=1.5)
    assert lb.take() == (35, 20, 0.5)
    assert lb.taken_gap_s == 0.25
    assert lb.take() is None and lb.taken_gap_s == 0.25
    lb.update((WRAP + 100, 30), now=3.0)  # above 32 bits: a 64-bit counter has no wrap gap
    assert lb.take() == (WRAP + 75, 3, 1.5) and lb.taken_gap_s is None


def test_byte_values_need_both_fields():
    assert byte_values([fv(1), fv(2)]) == (1, 2)
    assert byte_values([fv(1), fv(2, ret=3)]) is None
    assert byte_values([fv(1)]) is None and byte_values(None) is None


def test_fold_errors_deltas_unsupported_and_resets():
    errors = {}
    fold_errors(errors, ["replay", "bad_tlp"], [fv(10), fv(0, ret=3)])
    fold_errors(errors, ["replay", "bad_tlp"], [fv(13), fv(0, ret=3)])
    assert errors["bad_tlp"] is None and errors["replay"].delta == 3
    fold_errors(errors, ["replay", "bad_tlp"], [fv(0, ret=999), fv(0, ret=3)])  # a failed read keeps the delta
    fold_errors(errors, ["replay", "bad_tlp"], [fv(2), fv(0, ret=3)])  # lower: the counter was reset
    assert errors["replay"].delta == 5


@pytest.mark.parametrize("rate, hz", [(None, UNKNOWN_LINK_COUNTER_HZ), (63.0e9, 63.0e9 * 2 / WRAP),
                                      (1e9, MIN_COUNTER_HZ), (1e12, MAX_COUNTER_HZ)])
def test_counter_rate_reads_twice_per_wrap_within_bounds(rate, hz):
    assert counter_hz_for_link(rate) == pytest.approx(hz)
