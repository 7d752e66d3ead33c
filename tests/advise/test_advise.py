"""The advisor over all its rules: each silent on unknown, empty and healthy input; ``advise()``
sorting worst first, ``only``, thresholds, JSON findings."""
import collections
import json

import pytest

from pinmon.advise import RULE_DOCS, RULES, Thresholds, advise, sort_findings
from pinmon.model import Finding, Snapshot
from pinmon.units import GIB, MIB
from tests import factories as make

T = Thresholds()


# --- every rule: silence on unknown inputs -------------------------------------------------------

@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_rule_is_silent_when_inputs_are_unknown(rule_id):
    assert RULES[rule_id]([make.null_snapshot()], T) == []


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_rule_is_silent_on_empty_history(rule_id):
    assert RULES[rule_id]([], T) == []


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_rule_is_silent_on_a_healthy_box(rule_id):
    snap = make.snapshot(pinned_bytes_est=4 * GIB, gpus=[make.gpu(rx=50e9)],
                     processes=[make.process(pinned_bytes=4 * GIB, alloc_per_s=1.0,
                                          alloc_median_bytes=64 * MIB, wc_readbacks=0,
                                          write_combined_bytes=0, pageable_bytes_per_s=0.0)],
                     probe=make.probe())
    assert RULES[rule_id]([snap], T) == []


def test_rule_docs_cover_every_rule_and_only_them():
    assert set(RULE_DOCS) == set(RULES)
    assert all(doc and "\n" not in doc for doc in RULE_DOCS.values())


# --- advise() ------------------------------------------------------------------------------------

def _busy_snapshot(time=1000.0):
    return make.snapshot(
        time=time, pinned_bytes_est=60 * GIB, effective_mem_limit_bytes=100 * GIB, mem_available_bytes=5 * GIB,
        gpus=[make.gpu(index=10, gen=3, rx=20e9), make.gpu(index=2, gen=3, rx=20e9),
              make.gpu(index=1, lost=True)],
        processes=[make.process(pid=100, write_combined_bytes=MIB), make.process(pid=99, wc_readbacks=1),
                   make.process(pid=7, pageable_bytes_per_s=1e9)])


def test_advise_sorts_worst_first_then_rule_then_subject():
    out = advise([_busy_snapshot()])
    keys = [(f.severity, f.rule, f.subject) for f in out]
    assert keys == [
        ("critical", "gpu-lost", "gpu1"),
        ("critical", "pinned-ram-share", "host"),
        ("warning", "low-available-memory", "host"),
        ("warning", "pageable-bulk-copies", "pid 7 (python)"),
        ("warning", "pcie-link-degraded", "gpu2"),
        ("warning", "pcie-link-degraded", "gpu10"),
        ("warning", "wc-cpu-readback", "pid 99 (python)"),
        ("info", "wc-cpu-readback", "pid 100 (python)"),
    ]


def test_advise_only_and_unknown_ids():
    snap = _busy_snapshot()
    assert {f.rule for f in advise([snap], only=["gpu-lost"])} == {"gpu-lost"}
    assert {f.rule for f in advise([snap], only="gpu-lost")} == {"gpu-lost"}
    assert advise([snap], only=[]) == []
    with pytest.raises(ValueError, match="no-such-rule"):
        advise([snap], only=["no-such-rule"])


def test_advise_empty_history_and_other_sequences():
    assert advise([]) == []
    snap = _busy_snapshot()
    expected = advise([snap])
    assert advise(collections.deque([snap])) == expected
    assert advise(iter([snap])) == expected
    assert advise(snap) == expected


def test_advise_uses_the_given_thresholds():
    snap = make.snapshot(pinned_bytes_est=200 * MIB, effective_mem_limit_bytes=1000 * MIB)
    assert advise([snap]) == []
    strict = Thresholds(pinned_ram_warning_fraction=0.1, pinned_ram_critical_fraction=0.15)
    assert [f.severity for f in advise([snap], strict)] == ["critical"]


def test_advise_null_snapshot_is_silent():
    assert advise([make.null_snapshot()]) == []


def test_findings_are_json_with_numeric_values():
    out = advise([_busy_snapshot()])
    assert out
    for f in out:
        assert f.severity in ("info", "warning", "critical")
        assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in f.values.values()), f
        assert Finding.from_dict(json.loads(json.dumps(f.to_dict()))) == f


def test_advise_reads_a_replayed_history():
    history = [Snapshot.from_dict(s.to_dict()) for s in make.pinned_series([GIB + i * (GIB // 10) for i in range(11)])]
    assert [f.rule for f in advise(history)] == ["pinned-growth"]


def test_sorting_takes_any_process_name():
    """Subjects carry process names, which anyone sets: digits that are not ASCII are text."""
    odd = [Finding(rule="mlock-not-pinned", severity="warning", subject=s, message="m", advice="a")
           for s in ("pid 5 (1\u00b22)", "pid 5 (1\u0663)", "pid 10", "pid 9")]
    assert [f.subject for f in sort_findings(odd)] == ["pid 5 (1\u00b22)", "pid 5 (1\u0663)", "pid 9", "pid 10"]
