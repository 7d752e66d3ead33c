"""The CuPy examples under ``pinmon trace`` with the CuPy stand-in: while each runs, ``pinmon check
--json`` reports exactly its finding for its pid (the well-behaved pipeline: none). The same check
runs on a real GPU in tests/gpu/test_trace_gpu.py."""
import json
import os
import signal
import subprocess
import sys

import pytest

from tests.waiting import NotYet, wait_until

from .conftest import FAKES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = [
    ("small_pinned_allocs.py", [], {"pinned-small-allocs"}),
    ("wc_readback.py", [], {"wc-cpu-readback"}),
    ("pageable_copies.py", [], {"pageable-bulk-copies"}),
    ("good_pipeline.py", [], set()),
]


def pid_rules(check: dict, pid: int) -> set:
    return {f["rule"] for f in check["findings"]
            if f["values"].get("pid") == pid and f["severity"] != "info"}


def traffic_seen(row: dict) -> bool:
    """Whether the traced rates cover a window in which the program moved or allocated something."""
    rates = [s["bytes_per_s"] for s in (row.get("copies") or {}).get("stats", [])]
    return any(r for r in rates if r) or bool((row.get("allocations") or {}).get("per_s"))


@pytest.mark.parametrize("script, extra, expected", CASES, ids=[c[0] for c in CASES])
def test_example_gives_exactly_its_finding(report_dir, script, extra, expected):
    env = dict(os.environ, PINMON_TRACE_DIR=report_dir, PYTHONPATH=FAKES)
    # Runs until stopped (60 s at most): the check below polls until the program's report is there.
    child = subprocess.Popen([sys.executable, "-m", "pinmon", "trace", "--", sys.executable,
                              os.path.join("examples", script), "--seconds", "60", *extra],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check_env = dict(os.environ, PINMON_TRACE_DIR=report_dir)

    def checked():
        if child.poll() is not None:
            raise AssertionError(f"the example exited {child.returncode}: {child.communicate()[1][-2000:]}")
        # The stand-in CuPy maps no NVIDIA device: the check treats the program as a CUDA process.
        r = subprocess.run([sys.executable, "-m", "tests.cuda_stand_in", str(child.pid),
                            "check", "--json", "--window", "0.2"],
                           cwd=ROOT, env=check_env, capture_output=True, text=True, timeout=60)
        check = json.loads(r.stdout)
        rows = [p for p in check["snapshot"]["processes"] if p["pid"] == child.pid and p["source"] == "traced"]
        # Its own findings (or, for the good pipeline, a real window of traffic without one).
        if not rows or not traffic_seen(rows[0]) or not expected <= pid_rules(check, child.pid):
            raise NotYet(rows[:1] and pid_rules(check, child.pid))
        return check

    try:
        check = wait_until(checked, interval_s=0.2, what=f"the traced report of {script}")
    finally:
        child.terminate()
        _out, err = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGTERM and "Traceback" not in err, err  # running until stopped
    assert pid_rules(check, child.pid) == expected, check["findings"]
    for f in check["findings"]:
        if f["values"].get("pid") == child.pid and f["rule"] in expected:
            # The finding quotes the site of its own behaviour in its message, never in its advice.
            assert f'"examples/{script}:' in f["message"], f["message"]
            assert f["values"]["call_site"].startswith(f"examples/{script}:")
            assert "examples/" not in f["advice"]
