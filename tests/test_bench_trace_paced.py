"""bench/trace_paced.py's comparison, on made-up reports: which libraries each engine is held to, the
truth per key and direction, the ratios, and the reports it keeps (those whose window lies inside
the paced part)."""
import pytest

from tests.bench_scripts import load_bench

MIB = 1 << 20


@pytest.fixture(scope="module")
def paced():
    return load_bench("trace_paced")


def truth():
    return {"libs": {"torch": [["h2d", "pinned"], ["d2h", "pinned"]], "numba": [["h2d", "pageable"], ["d2h", "pageable"]]},
            "rounds": 250, "paced_s": 10.0, "wall_start": 1000.0, "wall_end": 1010.0,
            "moved_bytes": {}, "pinned_allocs": [0, 0]}


def report(t, h2d_pinned, d2h_pinned, h2d_pageable=0.0, d2h_pageable=0.0, life=0):
    row = lambda rate: {"bytes_per_s": rate, "bytes": life}
    return {"time": t, "copies": {"h2d": {"pinned": row(h2d_pinned), "pageable": row(h2d_pageable)},
                                  "d2h": {"pinned": row(d2h_pinned), "pageable": row(d2h_pageable)}}}


def test_cupti_is_held_to_every_library_and_only_settled_reports_count(paced):
    rate = 250 * 8 * MIB / 10.0
    reports = [report(1003.0, 9 * rate, 9 * rate, rate, rate)]  # inside the first window: not kept
    reports += [report(1000.0 + t, rate * 1.01, rate, rate * 0.99, rate) for t in (7.0, 8.0, 9.0)]
    out = paced.compare("cupti", truth(), reports, report(1011, 0, 0, life=255 * 8 * MIB))
    assert out["reports_kept"] == 3 and out["libs_seen"] == ["numba", "torch"]
    w = out["window_rates"]
    assert w["h2d.pinned"]["truth_bytes_per_s"] == pytest.approx(rate)
    assert w["h2d.pinned"]["ratio_median"] == pytest.approx(1.01) and w["h2d.pageable"]["ratio_min"] == pytest.approx(0.99)
    assert out["all_within_goal"] is True
    assert out["directions"]["h2d"]["truth_bytes_per_s"] == pytest.approx(2 * rate)
    assert out["lifetime"]["h2d.pinned"]["ratio"] == pytest.approx(1.0)  # 250 paced + 5 warm-up rounds


def test_the_hooks_are_held_to_torch_and_cupy_only(paced):
    rate = 250 * 8 * MIB / 10.0
    out = paced.compare("hooks", truth(), [report(1008.0, rate * 1.08, rate)], report(1011, 0, 0))
    assert out["libs_seen"] == ["torch"] and "h2d.pageable" not in out["window_rates"]
    assert out["window_rates"]["h2d.pinned"]["within_goal"] is False and out["all_within_goal"] is False


def test_registered_bytes_are_held_against_the_programs(paced):
    t = dict(truth(), registered_bytes=8 * MIB)
    final = dict(report(1011, 0, 0), pinned={"bytes": 24 * MIB, "registered_bytes": 8 * MIB, "registered_from": "cupti"})
    out = paced.compare("cupti", t, [], final)
    assert out["registered"] == {"program": 8 * MIB, "report": 8 * MIB, "from": "cupti", "pinned_bytes": 24 * MIB}
