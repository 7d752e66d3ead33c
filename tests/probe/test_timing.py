"""How the probe times: one warm-up before the samples, medians, rates, first and steady costs."""
import pytest

from pinmon.probe import timing as T
from tests.fakes.fake_cupy import make_fake_cupy


def test_event_timer_warms_up_once_then_takes_one_sample_per_repeat():
    cp = make_fake_cupy()
    stream = cp.cuda.Stream(non_blocking=True)
    launches = []
    samples = T.EventTimer(cp, stream).samples(lambda: launches.append(1), 4)
    assert len(launches) == 5 and len(samples) == 4 and all(s >= 0 for s in samples)


def test_copy_samples_copy_the_bytes_each_way():
    import ctypes

    cp = make_fake_cupy()
    timer = T.EventTimer(cp, cp.cuda.Stream(non_blocking=True))
    host, device = ctypes.create_string_buffer(b"h" * 64), ctypes.create_string_buffer(64)
    T.copy_samples(timer, ctypes.addressof(host), ctypes.addressof(device), 64, "h2d", 2)
    assert device.raw == b"h" * 64
    assert cp.cuda.runtime.calls["memcpyAsync"] == 3
    with pytest.raises(ValueError, match="direction must be 'h2d' or 'd2h'"):
        T.copy_samples(timer, ctypes.addressof(host), ctypes.addressof(device), 64, "d2d", 2)


def test_wall_samples_warm_up_too():
    calls = []
    assert len(T.wall_samples(lambda: calls.append(1), 3)) == 3 and len(calls) == 4


def test_rate_row_is_the_median():
    row = T.rate_row("copy", "pinned", 1000, [1.0, 0.001, 0.002], "h2d", "a note")
    assert row.seconds == 0.002 and row.bytes_per_s == pytest.approx(500_000)
    assert (row.repeats, row.direction, row.note) == (3, "h2d", "a note")
    assert T.rate_row("copy", "pinned", 1000, [0.0, 0.0]).bytes_per_s is None


def test_cost_rows_first_and_steady():
    first, steady = T.cost_rows("alloc", "pinned", 4096, [0.5, 0.1, 0.3, 0.2])
    assert (first.seconds, first.repeats, first.note) == (0.5, 1, "first")
    assert (steady.seconds, steady.repeats, steady.note) == (0.2, 3, "steady")
    assert [r.note for r in T.cost_rows("free", "pinned", 4096, [0.5])] == ["first"]


def test_median_row_has_no_rate():
    row = T.median_row("register", "registered", 4096, [0.3, 0.1, 0.2], note="n")
    assert row.seconds == 0.2 and row.bytes_per_s is None and row.repeats == 3
