"""The probe engine against the CuPy stand-in: what each kind measures, caps, cleanup on CUDA errors,
Ctrl-C, cancel and the time budget, one probe at a time, ``measure_copies``."""
import random
import sys
import threading

import pytest

from pinmon.model import ProbeResult
from pinmon.outputs.probe_text import format_probe
from pinmon.probe import engine as E
from pinmon.probe import plan as P
from pinmon.probe import run_probe
from pinmon.probe import safety as S
from pinmon.units import KIB, MIB
from tests.fakes.fake_cupy import assert_all_freed, make_fake_cupy

CAP = 2 * MIB  # small buffers keep the stand-in's memmoves quick


@pytest.mark.parametrize("kind", P.KINDS)
def test_no_cupy_run_probe_returns_unavailable(monkeypatch, kind):
    monkeypatch.setitem(sys.modules, "cupy", None)
    r = run_probe(kind, link_theoretical_bytes_per_s=63e9)
    assert r.status == "unavailable" and "CuPy is not installed" in r.reason
    assert r.kind == kind and r.measurements == () and r.duration_s >= 0
    assert r.link_theoretical_bytes_per_s == 63e9
    assert format_probe(r).startswith("probe unavailable: CuPy is not installed")
    assert ProbeResult.from_dict(r.to_dict()) == r


def test_unknown_kind_is_a_caller_bug():
    with pytest.raises(ValueError, match="unknown probe kind"):
        run_probe("everything")


def test_refused_cap_never_touches_cuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    r = run_probe("quick", max_pinned_bytes=0)
    assert r.status == "unavailable" and r.reason == "probe disabled: --max-pinned is 0"
    assert format_probe(r).strip() == "probe disabled: --max-pinned is 0"


def rows(r, kind, memory=None):
    return [m for m in r.measurements if m.kind == kind and (memory is None or m.memory == memory)]


def test_quick_measures_four_copies(fake):
    r = run_probe("quick", max_pinned_bytes=CAP)
    assert r.status == "ok" and r.reason is None and r.max_pinned_bytes == CAP
    copies = rows(r, "copy")
    assert {(m.memory, m.direction) for m in copies} == {(m, d) for m in ("pinned", "pageable")
                                                        for d in ("h2d", "d2h")}
    for m in copies:
        assert m.size_bytes == CAP and m.repeats == P.copy_repeats(CAP)
        assert m.bytes_per_s > 0 and m.seconds > 0
        assert "capped" in m.note
    init = rows(r, "init")
    assert len(init) == 1 and init[0].seconds >= 0 and "CUDA context" in init[0].note
    assert "0000:00:06.0" in init[0].note
    assert fake.pinned_peak <= CAP


def test_sweep_sizes_and_cap(fake):
    r = run_probe("sweep", max_pinned_bytes=CAP)
    assert r.status == "ok"
    sizes = sorted({m.size_bytes for m in rows(r, "copy")})
    assert sizes == [s for s in P.SWEEP_SIZES_BYTES if s <= CAP]
    assert "skipped" in rows(r, "init")[0].note
    assert fake.pinned_peak <= CAP


def test_alloc_rows_and_break_even(fake):
    r = run_probe("alloc", max_pinned_bytes=CAP)
    assert r.status == "ok"
    for size in [s for s in P.ALLOC_SIZES_BYTES if s <= CAP]:
        for kind in ("alloc", "free"):
            for memory in ("pinned", "pageable"):
                notes = {m.note for m in r.measurements
                         if m.kind == kind and m.memory == memory and m.size_bytes == size}
                assert notes == {"first", "steady"}
        pinned_copy = next(m for m in rows(r, "copy", "pinned") if m.size_bytes == size)
        assert "break_even_transfers=" in pinned_copy.note
    assert fake.pinned_peak <= CAP


def test_modes_rows_and_notes(fake):
    r = run_probe("modes", max_pinned_bytes=CAP)
    assert r.status == "ok", r.reason
    got = {(m.kind, m.memory) for m in r.measurements}
    for want in [("cpu_read", "pinned"), ("cpu_read", "write_combined"), ("cpu_write", "pinned"),
                 ("cpu_write", "write_combined"), ("copy", "write_combined"), ("copy", "pinned"),
                 ("kernel_read", "mapped"), ("kernel_read", "device"), ("copy", "portable"),
                 ("register", "registered"), ("free", "registered"), ("copy", "registered")]:
        assert want in got
    wc = rows(r, "cpu_read", "write_combined")[0]
    # The stand-in's "write-combined" memory is ordinary memory: no penalty, and the note says so.
    assert "no CPU-read penalty measured (write-combining not honoured here, e.g. in a VM)" in wc.note
    assert fake.calls["hostAlloc"] == 4  # default, WC, mapped, portable
    assert fake.pinned_peak <= CAP


def test_modes_uses_the_cudahostalloc_flags(monkeypatch):
    cp = make_fake_cupy()
    rt = cp.cuda.runtime
    seen = []
    real = rt.hostAlloc

    def spy(n, flags):
        seen.append(flags)
        return real(n, flags)

    rt.hostAlloc = spy
    monkeypatch.setitem(sys.modules, "cupy", cp)
    assert run_probe("modes", max_pinned_bytes=CAP).status == "ok"
    assert seen == [0, 4, 2, 1]
    assert_all_freed(rt)


def test_kernel_compile_failure_only_loses_the_kernel_rows(monkeypatch):
    cp = make_fake_cupy(compile_error="nvrtc: error")
    monkeypatch.setitem(sys.modules, "cupy", cp)
    r = run_probe("modes", max_pinned_bytes=CAP)
    assert r.status == "ok"
    for m in rows(r, "kernel_read"):
        assert m.bytes_per_s is None and m.note.startswith("not measured")
    assert rows(r, "copy", "registered")
    assert_all_freed(cp.cuda.runtime)


@pytest.mark.parametrize("call,n", [("hostAlloc", 1), ("hostAlloc", 3), ("memcpyAsync", 5),
                                    ("malloc", 2), ("hostRegister", 2), ("freeHost", 2)])
@pytest.mark.parametrize("kind", P.KINDS)
def test_cuda_error_anywhere_gives_unavailable_and_frees(fake, call, n, kind):
    fake.fail_at[call] = n
    r = run_probe(kind, max_pinned_bytes=CAP)
    if fake.calls.get(call, 0) < n:
        assert r.status == "ok"  # this probe never makes that many such calls
        return
    assert r.status == "unavailable"
    assert "cudaErrorMemoryAllocation" in r.reason and kind in r.reason
    if call == "freeHost":
        # The failed free is the stand-in's bookkeeping, not a leak: forget it for the final check.
        fake.host.clear()
        fake.pinned_now = sum(fake.registered.values())


@pytest.mark.parametrize("kind", P.KINDS)
def test_keyboard_interrupt_from_progress_at_every_step_frees_everything(monkeypatch, kind):
    total = P.build_plan(kind, CAP).total
    for stop_at in range(total + 1):
        cp = make_fake_cupy()
        monkeypatch.setitem(sys.modules, "cupy", cp)

        def progress(done, tot, label, stop_at=stop_at):
            assert tot == total and isinstance(label, str)
            if done == stop_at:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run_probe(kind, max_pinned_bytes=CAP, progress=progress)
        assert_all_freed(cp.cuda.runtime)
    # The lock was released each time.
    assert run_probe("quick", max_pinned_bytes=CAP).status == "ok"


def test_cancel_returns_what_it_has(fake):
    cancel = threading.Event()

    def progress(done, total, label):
        if done == 2:
            cancel.set()

    r = run_probe("sweep", max_pinned_bytes=CAP, progress=progress, cancel=cancel)
    assert r.status == "ok" and r.reason == "cancelled"
    assert len(rows(r, "copy")) == 2


def test_cancel_from_a_timer_thread_at_random_points(fake):
    rng = random.Random(7)
    for _ in range(20):
        cancel = threading.Event()
        timer = threading.Timer(rng.uniform(0, 0.02), cancel.set)
        timer.start()
        r = run_probe(rng.choice(P.KINDS), max_pinned_bytes=CAP, cancel=cancel)
        timer.join()
        assert r.status == "ok" and r.reason in (None, "cancelled")
        assert_all_freed(fake)


def test_time_budget_stops_between_measurements(fake):
    r = run_probe("sweep", max_pinned_bytes=CAP, time_budget_s=0)
    assert r.status == "ok" and r.reason.startswith("time budget of 0 s spent after 0 of")
    assert rows(r, "copy") == []


def test_one_probe_at_a_time(fake):
    assert S.PROBE_LOCK.acquire(blocking=False)
    try:
        r = run_probe("quick", max_pinned_bytes=CAP)
    finally:
        S.PROBE_LOCK.release()
    assert r.status == "unavailable" and "already running" in r.reason


def test_measure_copies(fake):
    out = E.measure_copies([64 * KIB, 1 * MIB], repeats=3, max_pinned_bytes=CAP)
    assert [(m.size_bytes, m.direction) for m in out] == [(64 * KIB, "h2d"), (64 * KIB, "d2h"),
                                                          (1 * MIB, "h2d"), (1 * MIB, "d2h")]
    assert all(m.repeats == 3 and m.bytes_per_s > 0 for m in out)
    with pytest.raises(RuntimeError):
        E.measure_copies([4 * MIB], max_pinned_bytes=CAP)
