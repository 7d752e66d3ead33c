"""Pinned cap arithmetic, refusal when memory is short, the ledger and the time budget."""
import pytest

from pinmon.probe import safety as S
from pinmon.units import GIB, MIB


def test_default_cap_when_memory_is_plentiful():
    cap = S.pinned_cap(None, available_bytes=100 * GIB)
    assert not cap.refused and cap.cap_bytes == 256 * MIB and cap.notes == ()


def test_requested_cap_below_five_percent_is_kept():
    cap = S.pinned_cap(64 * MIB, available_bytes=100 * GIB)
    assert cap.cap_bytes == 64 * MIB


def test_never_more_than_five_percent_of_available():
    cap = S.pinned_cap(None, available_bytes=1 * GIB)
    assert cap.cap_bytes <= 0.05 * GIB and cap.cap_bytes > 0.05 * GIB - 4096
    assert cap.cap_bytes % 4096 == 0
    assert "lowered" in cap.notes[0] and "available" in cap.notes[0]
    big = S.pinned_cap(64 * GIB, available_bytes=100 * GIB)
    assert big.cap_bytes <= 5 * GIB


def test_effective_limit_counts_when_smaller():
    cap = S.pinned_cap(None, available_bytes=100 * GIB, effective_limit_bytes=2 * GIB)
    assert cap.cap_bytes <= 0.05 * 2 * GIB
    assert "effective memory limit" in cap.notes[0]


def test_refused_when_memory_is_short():
    cap = S.pinned_cap(None, available_bytes=10 * MIB)
    assert cap.refused
    assert cap.reason.startswith("probe refused: memory is short")
    assert "10.0 MiB" in cap.reason


def test_max_pinned_zero_disables():
    cap = S.pinned_cap(0, available_bytes=100 * GIB)
    assert cap.refused and "--max-pinned is 0" in cap.reason


def test_max_pinned_below_minimum_is_refused_with_its_own_reason():
    cap = S.pinned_cap(512 * 1024, available_bytes=100 * GIB)
    assert cap.refused and "--max-pinned" in cap.reason and "1.0 MiB" in cap.reason


def test_unknown_available_falls_back_to_default():
    cap = S.pinned_cap(4 * GIB, read_available=False)
    assert cap.cap_bytes == S.DEFAULT_MAX_PINNED_BYTES and "unknown" in cap.notes[0]


def test_reads_psutil_available(monkeypatch):
    import types

    import psutil

    monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(available=2 * GIB))
    assert S.available_memory_bytes() == 2 * GIB
    assert S.pinned_cap(None).cap_bytes <= 0.05 * 2 * GIB


def test_ledger_enforces_the_cap():
    ledger = S.PinnedLedger(10 * MIB)
    ledger.reserve(6 * MIB)
    with pytest.raises(S.CapExceeded):
        ledger.reserve(5 * MIB)
    assert ledger.held_bytes == 6 * MIB
    ledger.reserve(4 * MIB)  # up to the cap exactly is allowed
    assert ledger.held_bytes == 10 * MIB
    ledger.release(10 * MIB)
    assert ledger.held_bytes == 0


def test_time_budget():
    now = [100.0]
    budget = S.TimeBudget(5.0, clock=lambda: now[0])
    assert not budget.expired() and budget.elapsed_s == 0.0
    now[0] = 105.0
    assert budget.expired() and budget.elapsed_s == 5.0
    assert not S.TimeBudget(None, clock=lambda: now[0]).expired()
