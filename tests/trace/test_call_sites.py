"""Call sites per behaviour, from the tracer through the report and the reader to the findings: one
process that both allocates small pinned buffers in a loop and copies device-to-host into a
write-combined buffer gets two findings, each naming the line of its own behaviour. Recordings with
the single ``call_site`` of older snapshots still load."""
import json
import os
import sys
import time

from pinmon.advise import Thresholds, advise
from pinmon.collect.traced.reader import merge_traced, read_reports
from pinmon.model import Snapshot
from pinmon.trace import report_file as R

MIB = 1 << 20


def next_line() -> str:
    """``test_call_sites.py:N`` of the line after the caller's."""
    return f"test_call_sites.py:{sys._getframe(1).f_lineno + 1}"


def test_small_allocs_and_wc_readbacks_in_one_process_name_their_own_lines(fake_cupy, report_dir):
    cupy, st = fake_cupy
    rt = cupy.cuda.runtime
    wc = rt.hostAlloc(64 * MIB, rt.hostAllocWriteCombined)  # one large allocation: fewer calls, more bytes
    dev = rt.malloc(MIB)
    alloc_line = next_line()
    ptrs = [rt.hostAlloc(4096, 0) for _ in range(200)]
    copy_line = next_line()
    [rt.memcpy(wc, dev, MIB, rt.memcpyDeviceToHost) for _ in range(5)]
    body = st.report(now=st.started + 0.05)  # a window of 50 ms of the tracer's clock
    R.write_report(report_dir, os.getpid(), {"schema": R.TRACE_SCHEMA, "pid": os.getpid(),
                                             "start_ticks": R.proc_start_ticks(os.getpid()), **body})
    (row,) = merge_traced([], read_reports(report_dir))
    assert row.call_sites["alloc"].endswith(alloc_line)
    assert row.call_sites["wc_readback"].endswith(copy_line)
    snap = Snapshot(time=time.time(), host=_host(), processes=(row,))
    by_rule = {f.rule: f for f in advise([snap], Thresholds()) if f.values.get("pid") == os.getpid()}
    small, wc_finding = by_rule["pinned-small-allocs"], by_rule["wc-cpu-readback"]
    assert small.values["call_site"].endswith(alloc_line) and alloc_line in small.message
    assert copy_line not in small.message
    assert wc_finding.values["call_site"].endswith(copy_line) and copy_line in wc_finding.message
    assert wc_finding.message.startswith("5 device-to-host copies (traced) into write-combined pinned memory")
    for p in ptrs:
        rt.freeHost(p)


def _host():
    from pinmon.model import HostMemory

    return HostMemory(hostname="box", mem_total_bytes=64 << 30, effective_mem_limit_bytes=64 << 30,
                      mem_available_bytes=60 << 30, pinned_bytes_est=0)


def test_a_snapshot_with_the_older_single_call_site_still_loads():
    row = {"pid": 7, "source": "traced", "pinned_allocs_per_s": 100.0, "median_alloc_bytes": 4096,
           "call_site": "examples/small_pinned_allocs.py:21"}
    snap = Snapshot.from_dict({"schema": "pinmon.snapshot/1", "time": 1.0, "host": {"hostname": "h"},
                               "processes": [row]})
    (p,) = snap.processes
    # The single site could be any behaviour's: it is not guessed into a category.
    assert p.call_sites == {} and p.allocations.per_s == 100.0
    (f,) = [f for f in advise([snap], Thresholds()) if f.rule == "pinned-small-allocs"]
    assert "call_site" not in f.values
    assert json.loads(json.dumps(p.to_dict()))["call_sites"] == {}
