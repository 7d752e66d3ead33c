"""bench/check_demo.py: what a demo recording shows and what it lacks, read as the app reads it."""
from __future__ import annotations

import dataclasses
import gzip
import json

from pinmon.recording import Recorder
from tests.bench_scripts import load_bench
from tests.factories import GIB, box_kernel_snapshot, box_snapshot, traced_cupti_process

mod = load_bench("check_demo")


def test_a_recording_without_the_kernel_count_or_with_roots_hint_is_lacking():
    snaps = [box_snapshot(i) for i in range(3)]
    snaps[1] = dataclasses.replace(snaps[1], notices=("process scan: skipped 1 denied access (run as root"
                                                      " to see every process)",))
    lacking = mod.missing(mod.survey(snaps))
    assert "the kernel's pinned count in 0 of 3 snapshots" in lacking
    assert any("tells root to run as root" in m for m in lacking)
    assert any("names no process" in m for m in lacking)
    assert "rule pinned-growth never fires" in lacking
    assert "no traced row with its copy table (transfers)" in lacking


def test_the_survey_notes_rules_traced_rows_and_the_kernel_count():
    snaps = [box_kernel_snapshot(i, unattributed=300 * GIB) for i in range(3)]
    snaps = [dataclasses.replace(s, processes=s.processes + (traced_cupti_process(),)) for s in snaps]
    found = mod.survey(snaps)
    assert found["kernel_count_snapshots"] == 3 and found["unattributed_max_bytes"] >= 300 * GIB
    assert found["traced"]["8080"]["transfers"] and found["traced"]["8080"]["engine"] == "cupti"
    assert "pinned-unattributed" in found["rules"] and found["rules"]["pinned-unattributed"]["first_s"] == 0.0
    lacking = mod.missing(found)
    assert not any("kernel's pinned count" in m or "transfers" in m for m in lacking)
    assert "rule pinned-unattributed never fires" not in lacking


def test_a_named_denied_notice_passes(tmp_path):
    s = box_kernel_snapshot(0)
    s = dataclasses.replace(s, notices=("process scan: skipped pid 77 (firecracker) denied access (even as root:"
                                        " pinmon lacks CAP_SYS_PTRACE, or a security module refuses)",))
    assert not any("denied" in m for m in mod.missing(mod.survey([s])))


def test_main_writes_the_survey_and_exits_1_when_something_lacks(tmp_path):
    path = str(tmp_path / "demo.jsonl.gz")
    rec = Recorder(path)
    for i in range(2):
        rec.write(box_snapshot(i))
    rec.close()
    out = tmp_path / "check.json"
    assert mod.main([path, str(out)]) == 1
    result = json.loads(out.read_text())
    assert result["snapshots"] == 2 and result["missing"] and "provenance" in result
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as f:
        f.write("{not json\n")
    assert mod.main([str(bad), str(out)]) == 2


def test_record_demos_plan_traces_with_pinmon_trace_and_covers_each_expected_rule():
    rec = load_bench("record_demo")
    steps = rec.plan("python3", "auto", 70 * GIB, 0.5)
    traced = [argv for _, argv, _ in steps if "trace" in argv]
    assert traced and all(argv[1:4] == ["-m", "pinmon", "trace"] and "pinmon.trace" not in argv for argv in traced)
    names = " ".join(a for _, argv, _ in steps for a in argv)
    for example in ("small_pinned_allocs.py", "pageable_copies.py", "wc_readback.py", "rounding_waste.py"):
        assert example in names
    assert "hostRegister" in names  # pinned pages no process row explains: pinned-unattributed
    starts = [t for t, _, _ in steps]
    assert starts == sorted(starts) and rec.duration_s(70 * GIB, 0.5) > max(starts) + 60
    # Groups: a pod's container, Docker containers (one OOM-killed), a Slurm step; each laid out as
    # its runtime lays it out, so pinmon names it from its path.
    from pinmon.collect.cgroups.ownership import owner_of

    assert {g for _, _, g in steps if g} == set(rec.GROUPS)
    kinds = {name: owner_of("0::/" + "/".join(parts) + "\n").kind for name, (parts, _, _) in rec.GROUPS.items()}
    assert kinds == {"pod": "pod", "register": "docker", "oom": "docker", "job": "slurm"}
