"""The GPU box's C workload (bench/attach/paced_driver.c) built with gcc and run here on the stand-in
libcuda, started before the attach: attach_accuracy.py's comparison finds every stream within 1% and
the allocation and registration sizes exact. (The stand-in's write-combined allocation is a shared
anonymous mapping, pinned-looking: on the GPU box it is a /dev/nvidiactl mapping.)"""
import json
import os
import subprocess
import time

import pytest

from pinmon.attach import AttachSession
from tests.attach.standin import build, why_not
from tests.bench_scripts import load_bench

WHY = why_not()
pytestmark = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.xdist_group("tracefs")]


def test_the_paced_driver_on_the_stand_in(tmp_path):
    attach_accuracy = load_bench("attach_accuracy")
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    build(str(lib_dir))
    exe = tmp_path / "paced_driver"
    subprocess.run(["gcc", "-O2", "-o", str(exe), attach_accuracy.DRIVER_SOURCE, "-ldl"], check=True,
                   capture_output=True)
    out = tmp_path / "truth.json"
    p = subprocess.Popen([str(exe), "--standin", "paced", "4", str(out)], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, LD_LIBRARY_PATH=str(lib_dir)))
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.3)  # not a wait: the attach comes a few rounds into the run, as on the GPU box
        with AttachSession([p.pid], is_cuda=lambda pid, maps: True) as s:
            r = s.run(2.0)
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    truth = attach_accuracy.driver_truth(json.loads(out.read_text()))
    truth["streams"] = [(d, "pinned" if m == "write_combined" else m, b) for d, m, b in truth["streams"]]
    row = attach_accuracy.compare(truth, r.processes[p.pid], r.started_mono, r.window_s)
    assert row["all_within_goal"], json.dumps(row, indent=1)
    assert row["allocations"]["sizes_exact"] and row["allocations"]["counts_match_within_one"], row
    assert not row["unexpected"]
