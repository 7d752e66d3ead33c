"""On a real GPU: each probe kind returns sane figures, the pinned cap holds while a probe runs, and
probes cut short (cancel from a timer thread, Ctrl-C from the progress callback) give every pinned
byte back. Pinned bytes are read from /proc/self/maps with the collector's own estimator.

No timing thresholds beyond "pinned beats pageable" and orderings: figures live in bench/.
"""
import math
import random
import threading

import pytest

from pinmon.collect.processes.procmaps import estimate_pinned
from pinmon.outputs.probe_text import format_probe, headline
from pinmon.probe import break_even_transfers, held_pinned_bytes, plan, probe_available, run_probe

pytestmark = pytest.mark.gpu
MIB = 1 << 20
# Slack for the driver's own staging buffers and the 2 MiB chunks small pinned allocations are
# carved from; a leaked probe buffer is at least 4 MiB larger than that in these tests.
TOLERANCE_BYTES = 4 * MIB


def pinned_now() -> int:
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
        est = estimate_pinned(f.read())
    return est.pinned_bytes + est.write_combined_bytes


def copy_rate(r, memory, direction, size):
    rows = [m for m in r.measurements if m.kind == "copy" and m.memory == memory
            and m.direction == direction and m.size_bytes == size]
    assert len(rows) == 1, (memory, direction, size)
    assert rows[0].bytes_per_s and math.isfinite(rows[0].bytes_per_s)
    return rows[0].bytes_per_s


def test_probe_available():
    assert probe_available() == (True, None)


def test_quick():
    r = run_probe("quick", link_theoretical_bytes_per_s=63.0e9)
    assert r.status == "ok" and r.reason is None, r.reason
    size = 64 * MIB
    assert copy_rate(r, "pinned", "h2d", size) > copy_rate(r, "pageable", "h2d", size)
    assert copy_rate(r, "pinned", "d2h", size) > 1e9
    init = [m for m in r.measurements if m.kind == "init"]
    assert len(init) == 1 and init[0].seconds >= 0
    assert headline(r).startswith("pinned H2D ")
    print(format_probe(r))
    assert held_pinned_bytes() == 0


def test_quick_in_a_worker_thread():
    out = {}
    t = threading.Thread(target=lambda: out.update(r=run_probe("quick")))
    t.start()
    t.join(60)
    assert out["r"].status == "ok", out["r"].reason


def test_sweep_pinned_roughly_monotone():
    r = run_probe("sweep", max_pinned_bytes=256 * MIB)
    assert r.status == "ok", r.reason
    sizes = [s for s in plan.SWEEP_SIZES_BYTES if s <= r.max_pinned_bytes]
    rates = [copy_rate(r, "pinned", "h2d", s) for s in sizes]
    for small, big, rate_small, rate_big in zip(sizes, sizes[1:], rates, rates[1:]):
        if small >= 64 * 1024:
            assert rate_big >= 0.7 * rate_small, (small, big, rate_small, rate_big)
    assert rates[-1] > 5 * rates[0]
    assert copy_rate(r, "pinned", "h2d", sizes[-1]) > copy_rate(r, "pageable", "h2d", sizes[-1])
    print(format_probe(r))


def test_alloc_break_even():
    r = run_probe("alloc", max_pinned_bytes=256 * MIB)
    assert r.status == "ok", r.reason
    for size in [s for s in plan.ALLOC_SIZES_BYTES if s <= r.max_pinned_bytes]:
        notes = {(m.kind, m.memory, m.note) for m in r.measurements if m.size_bytes == size}
        for kind in ("alloc", "free"):
            for memory in ("pinned", "pageable"):
                assert {(kind, memory, "first"), (kind, memory, "steady")} <= notes
    n = break_even_transfers(r, 64 * MIB)
    assert n is not None and 0 <= n < math.inf
    print(format_probe(r))


def test_modes():
    r = run_probe("modes", link_theoretical_bytes_per_s=63.0e9)
    assert r.status == "ok", r.reason
    by = {(m.kind, m.memory): m for m in r.measurements}
    for key in [("cpu_read", "pinned"), ("cpu_read", "write_combined"), ("cpu_write", "pinned"),
                ("cpu_write", "write_combined"), ("copy", "write_combined"), ("copy", "pinned"),
                ("kernel_read", "mapped"), ("kernel_read", "device"), ("copy", "portable"),
                ("copy", "registered")]:
        assert by[key].bytes_per_s and by[key].bytes_per_s > 0, key
    assert by[("register", "registered")].seconds > 0
    assert by[("kernel_read", "device")].bytes_per_s > by[("kernel_read", "mapped")].bytes_per_s
    assert by[("copy", "registered")].bytes_per_s > 0.5 * by[("copy", "pinned")].bytes_per_s
    wc_note = by[("cpu_read", "write_combined")].note
    assert "no CPU-read penalty measured" in wc_note or "slower than from ordinary pinned" in wc_note
    print(format_probe(r))


def test_cap_holds_while_running():
    run_probe("sweep", max_pinned_bytes=16 * MIB)  # settle the driver's staging buffers
    base = pinned_now()
    peak = [0]

    def progress(done, total, label):
        peak[0] = max(peak[0], pinned_now() - base)

    r = run_probe("sweep", max_pinned_bytes=16 * MIB, progress=progress)
    assert r.status == "ok" and max(m.size_bytes for m in r.measurements) == 16 * MIB
    assert peak[0] <= 16 * MIB + TOLERANCE_BYTES


def test_interrupted_probes_give_pinned_memory_back():
    cap = 64 * MIB
    for kind in plan.KINDS:  # warm-up: CUDA context, staging buffers, kernel compile
        assert run_probe(kind, max_pinned_bytes=cap).status == "ok"
    base = pinned_now()
    rng = random.Random(20261202)
    outcomes = {"cancelled": 0, "interrupted": 0, "finished": 0}
    for i in range(100):
        kind = rng.choice(plan.KINDS)
        if i % 2 == 0:
            cancel = threading.Event()
            timer = threading.Timer(rng.uniform(0.0, 0.4), cancel.set)
            timer.start()
            try:
                r = run_probe(kind, max_pinned_bytes=cap, cancel=cancel)
            finally:
                timer.cancel()
                timer.join()
            assert r.status == "ok", r.reason
            outcomes["cancelled" if r.reason == "cancelled" else "finished"] += 1
        else:
            total = plan.build_plan(kind, cap).total
            stop_at = rng.randint(0, total)

            def progress(done, tot, label, stop_at=stop_at):
                if done == stop_at:
                    raise KeyboardInterrupt

            with pytest.raises(KeyboardInterrupt):
                run_probe(kind, max_pinned_bytes=cap, progress=progress)
            outcomes["interrupted"] += 1
        assert held_pinned_bytes() == 0, (i, kind)
        now = pinned_now()
        assert now - base <= TOLERANCE_BYTES, (i, kind, now - base)
    assert outcomes["interrupted"] == 50 and outcomes["cancelled"] > 0
    print(outcomes)
