"""What probe rows say, on hand-made rows: break-even, the write-combined verdict, speedups, NUMA ratios."""
import pytest

from pinmon.model import ProbeMeasurement, ProbeResult
from pinmon.probe import analysis as A
from pinmon.probe import break_even_transfers
from pinmon.units import KIB, MIB
from tests.factories import alloc_rows


def test_break_even_formula():
    # (124 + 37 - 56 - 10) ms of extra cost / (42.6 - 4.9) ms saved per copy
    rows_ = alloc_rows(256 * MIB, 0.124, 0.037, 0.056, 0.010, 0.0049, 0.0426)
    n = break_even_transfers(rows_, 256 * MIB)
    assert n == pytest.approx((0.124 + 0.037 - 0.056 - 0.010) / (0.0426 - 0.0049))
    r = ProbeResult(time=0, kind="alloc", measurements=tuple(rows_))
    assert break_even_transfers(r, 256 * MIB) == pytest.approx(n)
    assert break_even_transfers(r, 4 * KIB) is None


def test_break_even_edges():
    assert break_even_transfers(alloc_rows(4096, 1e-5, 1e-5, 1e-3, 0, 1e-5, 2e-5), 4096) == 0.0
    assert break_even_transfers(alloc_rows(4096, 1e-3, 1e-5, 1e-5, 0, 2e-5, 1e-5), 4096) == float("inf")
    annotated = A.annotate_break_even(alloc_rows(4096, 1e-3, 1e-5, 1e-5, 0, 2e-5, 1e-5))
    note = next(m for m in annotated if m.kind == "copy" and m.memory == "pinned").note
    assert note == "break_even_transfers=never (pageable copy not slower)"


def test_wc_verdict_both_ways():
    m = ProbeMeasurement
    same = [m("cpu_read", "pinned", MIB, bytes_per_s=10e9), m("cpu_read", "write_combined", MIB, bytes_per_s=10.5e9)]
    assert A.wc_read_verdict(same).startswith("no CPU-read penalty measured (write-combining not honoured here")
    slow = [m("cpu_read", "pinned", MIB, bytes_per_s=10e9), m("cpu_read", "write_combined", MIB, bytes_per_s=0.5e9)]
    assert A.wc_read_verdict(slow).startswith("CPU reads 20.0x slower")
    assert A.wc_read_verdict(slow[:1]) is None


def test_h2d_pinned_vs_pageable_takes_the_largest_size_measured_both_ways():
    m = ProbeMeasurement
    rows = [m("copy", "pinned", MIB, "h2d", 20e9), m("copy", "pageable", MIB, "h2d", 5e9),
            m("copy", "pinned", 4 * MIB, "h2d", 50e9), m("copy", "pageable", 4 * MIB, "d2h", 9e9),
            m("copy", "pinned", 16 * MIB, "d2h", 51e9)]
    assert A.h2d_pinned_vs_pageable(rows) == (20e9, 5e9)
    assert A.h2d_pinned_vs_pageable(rows[2:]) == (50e9, None)
    assert A.h2d_pinned_vs_pageable(rows[3:]) == (None, None)
    assert A.ratio(20e9, 5e9) == 4.0 and A.ratio(None, 5e9) is None and A.ratio(1.0, 0) is None


def test_costs_and_their_sums():
    rows = alloc_rows(4 * KIB, 1e-3, 2e-4, 1e-5, 3e-6, 1e-5, 2e-5)
    assert A.cost_s(rows, "alloc", "pinned", 4 * KIB, "first") == pytest.approx(1e-2)
    assert A.alloc_free_s(rows, "pinned", 4 * KIB) == pytest.approx(1.2e-3)
    assert A.alloc_free_s(rows, "pinned", 8 * KIB) == 0


def _numa(rates, gpu_known=True):
    """Copy rows of a NUMA probe: {(node, direction): bytes/s}, node 0 the GPU's own."""
    def role(node):
        return ("local" if node == 0 else "remote") if gpu_known else "GPU node unknown"
    rows = tuple(ProbeMeasurement("copy", "registered", 64 * MIB, d, rate, host_numa_node=node,
                                  note=f"{role(node)}; 100% of 256 sampled pages on node {node}")
                 for (node, d), rate in rates.items())
    return ProbeResult(time=0, kind="numa", measurements=rows)


def test_numa_ratios_take_the_slowest_remote_node():
    r = _numa({(0, "h2d"): 50e9, (1, "h2d"): 40e9, (2, "h2d"): 30e9, (0, "d2h"): 50e9})
    assert A.numa_local_remote(r, "h2d") == (50e9, 30e9)
    assert A.numa_ratios(r) == {"h2d": pytest.approx(0.6), "d2h": None}
    assert A.numa_ratios(_numa({(0, "h2d"): 50e9, (1, "h2d"): 40e9}, gpu_known=False)) == {"h2d": None, "d2h": None}


def test_annotate_modes_compares_rows():
    m = ProbeMeasurement
    rows = [m("copy", "pinned", MIB, "h2d", 50e9), m("copy", "registered", MIB, "h2d", 45e9),
            m("kernel_read", "mapped", MIB, bytes_per_s=20e9), m("kernel_read", "device", MIB, bytes_per_s=2000e9)]
    notes = [r.note for r in A.annotate_modes(rows)]
    assert notes == [None, "0.90x default pinned H2D", "device memory reads 100.0x faster", None]
