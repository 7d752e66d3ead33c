"""The probe plans: sizes, caps, repeat counts, and that no group holds more pinned bytes than the cap."""
import pytest

from pinmon.probe import plan as P
from pinmon.units import KIB, MIB


def test_sweep_sizes_are_powers_of_four_from_4k_to_256m():
    assert P.SWEEP_SIZES_BYTES == (4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 1 * MIB, 4 * MIB,
                                   16 * MIB, 64 * MIB, 256 * MIB)


def test_quick_is_64m_both_directions_pinned_and_pageable():
    plan = P.build_plan("quick", 256 * MIB)
    combos = {(s.memory, s.direction, s.size_bytes) for s in plan.steps}
    assert combos == {(m, d, 64 * MIB) for m in ("pinned", "pageable") for d in ("h2d", "d2h")}
    assert plan.notes == ()
    assert all(s.op == "copy" for s in plan.steps)


def test_quick_under_a_small_cap_uses_the_cap_and_says_so():
    plan = P.build_plan("quick", 32 * MIB)
    assert {s.size_bytes for s in plan.steps} == {32 * MIB}
    assert plan.notes and "32.0 MiB" in plan.notes[0] and "64.0 MiB" in plan.notes[0]


def test_cap_not_a_page_multiple_rounds_down():
    plan = P.build_plan("quick", 10_000_000)
    size = plan.steps[0].size_bytes
    assert size <= 10_000_000 and size % P.PAGE_BYTES == 0 and 10_000_000 - size < P.PAGE_BYTES


def test_sweep_full_under_default_cap():
    plan = P.build_plan("sweep", 256 * MIB)
    assert plan.total == 9 * 4
    sizes = [s.size_bytes for s in plan.steps]
    assert sizes == sorted(sizes)
    for size in P.SWEEP_SIZES_BYTES:
        combos = {(s.memory, s.direction) for s in plan.steps if s.size_bytes == size}
        assert combos == {(m, d) for m in ("pinned", "pageable") for d in ("h2d", "d2h")}


def test_sweep_skips_sizes_above_the_cap():
    plan = P.build_plan("sweep", 10 * MIB)
    assert max(s.size_bytes for s in plan.steps) == 4 * MIB
    assert "16.0 MiB" in plan.notes[0] and "256.0 MiB" in plan.notes[0]
    # One set of buffers of the largest size that fits, shared by every copy.
    assert {s.group for s in plan.steps} == {(P.G_COPY, 4 * MIB)}


def test_alloc_sizes_and_their_copies():
    plan = P.build_plan("alloc", 256 * MIB)
    alloc_sizes = sorted({s.size_bytes for s in plan.steps if s.op == "alloc"})
    assert alloc_sizes == list(P.ALLOC_SIZES_BYTES)
    for size in alloc_sizes:
        ops = {(s.op, s.memory, s.direction) for s in plan.steps if s.size_bytes == size}
        assert ops == {("alloc", "pinned", None), ("alloc", "pageable", None),
                       ("copy", "pinned", "h2d"), ("copy", "pageable", "h2d")}
    capped = P.build_plan("alloc", 20 * MIB)
    assert max(s.size_bytes for s in capped.steps) == 16 * MIB and capped.notes


def test_modes_covers_the_four_flags_and_register():
    plan = P.build_plan("modes", 256 * MIB)
    got = {(s.op, s.memory) for s in plan.steps}
    assert {("cpu_read", "write_combined"), ("cpu_read", "pinned"), ("cpu_write", "write_combined"),
            ("cpu_write", "pinned"), ("copy", "write_combined"), ("copy", "pinned"),
            ("kernel_read", "mapped"), ("kernel_read", "device"), ("copy", "portable"),
            ("register", "registered"), ("copy", "registered")} <= got
    cpu = [s for s in plan.steps if s.op.startswith("cpu_")]
    assert all(s.size_bytes == P.MODES_CPU_SIZE_BYTES for s in cpu)
    # Kernel loads are 16 bytes wide.
    assert all(s.size_bytes % 16 == 0 for s in plan.steps)


@pytest.mark.parametrize("kind", P.KINDS)
@pytest.mark.parametrize("cap", [1 * MIB, 3 * MIB + 12345, 64 * MIB, 100 * MIB, 256 * MIB, 1 << 30])
def test_no_group_holds_more_than_the_cap(kind, cap):
    plan = P.build_plan(kind, cap)
    assert plan.total > 0
    # One pinned buffer per group, of the group's size; the steps of a G_NONE group each hold one
    # allocation of their own size at a time.
    held = [s.size_bytes if s.group[0] == P.G_NONE else s.group[1] for s in plan.steps]
    assert max(held) <= cap
    assert all(s.size_bytes <= cap for s in plan.steps)


def test_repeats_adapt_to_size():
    assert P.copy_repeats(4 * KIB) == P.COPY_MAX_REPEATS
    assert P.copy_repeats(64 * MIB) == 8
    assert P.copy_repeats(256 * MIB) == P.COPY_MIN_REPEATS
    reps = [P.copy_repeats(s) for s in P.SWEEP_SIZES_BYTES]
    assert reps == sorted(reps, reverse=True)
    assert P.alloc_repeats(4 * KIB) == P.ALLOC_MAX_REPEATS
    assert P.alloc_repeats(256 * MIB) == P.ALLOC_MIN_REPEATS


def test_labels_read_well():
    step = P.build_plan("quick", 256 * MIB).steps[0]
    assert step.label == "copy pinned h2d 64.0 MiB"


def test_bad_input():
    with pytest.raises(ValueError, match="unknown probe kind"):
        P.build_plan("everything", 256 * MIB)
    with pytest.raises(ValueError, match="below one page"):
        P.build_plan("quick", 100)
