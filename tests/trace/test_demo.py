"""The bundled demo tells the truth about traced programs: a traced example's row lasts only while
the example runs (while it is a CUDA process on the GPU), so the last snapshot holds no finding
about a program that had ended; and the committed demo is what bench/repair_demo.py makes of it."""
import gzip
import json

import pytest

from pinmon.cli import main
from pinmon.cli.commands.demo import demo_path
from tests.bench_scripts import load_bench


def demo_snapshots() -> list[dict]:
    with gzip.open(demo_path(), "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def gpu_pids(snap: dict) -> set:
    return {p["pid"] for g in snap["gpus"] for p in g["processes"]}


def test_no_traced_row_of_the_demo_outlives_its_cuda_program():
    # The tracer reports from a program's first CUDA import, a little before NVML lists its context;
    # after the program has left the GPU no row of it may stay (the recorder reaps its children).
    snaps = demo_snapshots()
    traced = [(i, p["pid"]) for i, s in enumerate(snaps) for p in s["processes"] if p["source"] == "traced"]
    assert traced, "the demo shows traced examples"
    last_on_gpu = {}
    for i, s in enumerate(snaps):
        for pid in gpu_pids(s):
            last_on_gpu[pid] = i
    stale = [(i, pid) for i, pid in traced if pid in last_on_gpu and i > last_on_gpu[pid] + 1]
    assert stale == [] and {pid for _, pid in traced} <= set(last_on_gpu)


def test_the_demos_last_snapshot_has_no_row_or_finding_of_an_ended_program(tmp_path, capsys):
    snaps = demo_snapshots()
    ever_traced = {p["pid"] for s in snaps for p in s["processes"] if p["source"] == "traced"}
    last = snaps[-1]
    ended = ever_traced - gpu_pids(last)
    assert ended, "the demo's traced examples end before the recording does"
    assert not [p for p in last["processes"] if p["pid"] in ended]
    path = tmp_path / "last.json"
    path.write_text(json.dumps(last))
    rc = main(["check", "--json", "--snapshot", str(path)])
    out = json.loads(capsys.readouterr().out)
    assert not [f for f in out["findings"] if f["values"].get("pid") in ended]
    assert rc == {"ok": 0, "warning": 1, "critical": 2}[out["status"]]


def test_the_demo_uses_call_sites_per_behaviour():
    rows = [p for s in demo_snapshots() for p in s["processes"]]
    assert not [p for p in rows if "call_site" in p]
    cats = {cat for p in rows for cat in p.get("call_sites", {})}
    assert cats == {"alloc", "pageable_copy", "wc_readback", "rounding_waste"}


def test_the_committed_demo_is_already_repaired():
    mod = load_bench("repair_demo")
    lines = mod.read_lines(demo_path())
    new, ended = mod.repair(lines)
    assert ended == {} and new == lines


def test_repair_drops_rows_from_the_snapshot_where_the_program_had_ended(tmp_path):
    mod = load_bench("repair_demo")

    def snap(t, gpu, rows, pinned):
        return json.dumps({"schema": "pinmon.snapshot/1", "time": t,
                           "host": {"hostname": "h", "pinned_bytes_est": pinned, "write_combined_bytes_est": 0},
                           "gpus": [{"index": 0, "processes": [{"pid": p} for p in gpu]}],
                           "processes": rows}, separators=(",", ":"))

    def row(rate, pinned=4096):
        return {"pid": 9, "source": "traced", "pinned_bytes": pinned, "pinned_allocs_per_s": rate,
                "call_site": "examples/small_pinned_allocs.py:21"}

    lines = [snap(0, [9], [row(10.0)], 4096), snap(1, [9], [row(20.0)], 4096),
             snap(2, [], [row(30.0)], 4096), snap(3, [], [row(30.0)], 4096)]
    new, ended = mod.repair(lines)
    assert ended == {9: 2}
    out = [json.loads(line) for line in new]
    assert [len(s["processes"]) for s in out] == [1, 1, 0, 0]
    assert [s["host"]["pinned_bytes_est"] for s in out] == [4096, 4096, 0, 0]
    assert out[0]["processes"][0]["call_sites"] == {"alloc": "examples/small_pinned_allocs.py:21"}
    # Frozen figures alone are not an end: a live program shows on the GPU.
    lines[2], lines[3] = snap(2, [9], [row(30.0)], 4096), snap(3, [9], [row(30.0)], 4096)
    assert mod.repair(lines)[1] == {}
    out_path = tmp_path / "out.jsonl.gz"
    mod.write_lines(str(out_path), new)
    first = out_path.read_bytes()
    mod.write_lines(str(out_path), new)
    assert out_path.read_bytes() == first and mod.read_lines(str(out_path)) == new


def test_repair_stops_when_a_site_is_not_of_its_category():
    mod = load_bench("repair_demo")
    row = {"pid": 9, "source": "traced", "wc_readbacks": 3, "call_site": "examples/small_pinned_allocs.py:21"}
    with pytest.raises(SystemExit, match="not a wc_readback call site"):
        mod.map_call_site(row)
