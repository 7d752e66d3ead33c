"""The CuPy examples under ``pinmon trace`` with the CuPy stand-in: while each runs, ``pinmon check
--json`` reports exactly its finding for its pid (the well-behaved pipeline: none). The same check
runs on a real GPU in tests/gpu/test_trace_gpu.py."""
import json
import os
import subprocess
import sys
import time

import pytest

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


@pytest.mark.parametrize("script, extra, expected", CASES, ids=[c[0] for c in CASES])
def test_example_gives_exactly_its_finding(report_dir, script, extra, expected):
    env = dict(os.environ, PINMON_TRACE_DIR=report_dir, PYTHONPATH=FAKES)
    child = subprocess.Popen([sys.executable, "-m", "pinmon", "trace", "--", sys.executable,
                              os.path.join("examples", script), "--seconds", "4", *extra],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2.5)  # several report intervals: the rates cover a real window
        check_env = dict(os.environ, PINMON_TRACE_DIR=report_dir)
        r = subprocess.run([sys.executable, "-m", "pinmon", "check", "--json", "--window", "0.2"],
                           cwd=ROOT, env=check_env, capture_output=True, text=True, timeout=60)
        check = json.loads(r.stdout)
    finally:
        out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    row = next(p for p in check["snapshot"]["processes"] if p["pid"] == child.pid)
    assert row["source"] == "traced"
    assert pid_rules(check, child.pid) == expected, check["findings"]
    for f in check["findings"]:
        if f["values"].get("pid") == child.pid and f["rule"] in expected:
            # The finding quotes the site of its own behaviour in its message, never in its advice.
            assert f'"examples/{script}:' in f["message"], f["message"]
            assert f["values"]["call_site"].startswith(f"examples/{script}:")
            assert "examples/" not in f["advice"]
