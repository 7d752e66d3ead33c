"""collect/attached.py: an attach's outcome as snapshot rows, on hand-made engine records: the model's
records and words, which rows take them (an estimate's, none for a traced one's, a new one), the bounds
(links' rates, the pid filter, a stale outcome) and the notices."""
from pinmon.attach.results import AllocationStats, AttachOutcome, AttachResult, CopyStats, OtherCopies, ProcessCopies
from pinmon.collect.attached import LatestOutcome, link_cap, merge_attached
from pinmon.model import GpuProcess
from tests.factories import GIB, MIB, copies, gpu, process, stat

NONE = OtherCopies(0, 0, 0.0)


def alloc_stats(**kw):
    fields = dict(count=0, per_s=0.0, frees=0, frees_per_s=0.0, median_bytes=None, size_p90_bytes=None,
                  size_max_bytes=None, bytes=0, flags={}, registrations=0, registered_bytes=0,
                  registration_median_bytes=None, registration_max_bytes=None, registration_flags={},
                  unregistrations=0)
    fields.update(kw)
    return AllocationStats(**fields)


def proc(pid, stats=(), window=5.0, **kw):
    fields = dict(pid=pid, window_s=window, stats=tuple(stats), peer=NONE, device=NONE, host_to_host=NONE,
                  batch_calls=0, batch_copies=0, batch_copies_unmeasured=0, batch_ops=0,
                  pageable_may_be_registered=False, allocations=alloc_stats())
    fields.update(kw)
    return ProcessCopies(**fields)


def cs(direction, memory, rate, count=10, size=8 * MIB):
    return CopyStats(direction, memory, rate, int(rate * 5), count, size, size, size)


def outcome(*procs, failed=None, ended=100.0, error=None, notices=(), **kw):
    if error:
        return AttachOutcome(None, error, ended)
    result = AttachResult(window_s=5.0, enabled_s=5.0, processes={p.pid: p for p in procs}, failed=failed or {},
                          files=(), events=1, lost_events=0, notices=tuple(notices), **kw)
    return AttachOutcome(result, None, ended)


def merge(rows, out, **kw):
    kw.setdefault("now_mono", 101.0)
    return merge_attached(list(rows), out, **kw)


def test_an_estimate_row_takes_the_attach_and_says_so():
    est = process(10, pinned_bytes=GIB)
    pc = proc(10, [cs("h2d", "pinned", 6e9), cs("d2h", "write_combined", 1e8, count=3)],
              allocations=alloc_stats(count=40, per_s=8.0, median_bytes=4096, size_p90_bytes=4096,
                                      size_max_bytes=8192, flags={"writecombined": 2, "default": 38,
                                                                  "devicemap": 1},
                                      registrations=2, registered_bytes=4 * MIB, registration_median_bytes=2 * MIB,
                                      registration_max_bytes=2 * MIB, registration_flags={"iomemory": 2},
                                      unregistrations=1),
              peer=OtherCopies(4, 400, 80.0), batch_copies_unmeasured=3)
    rows, notices = merge([est], outcome(pc))
    (row,) = rows
    assert row.source == "attached" and row.held == est.held          # held bytes stay the maps'
    c, a = row.copies, row.allocations
    assert c.instrument == "uprobes" and c.window_s == 5.0 and c.get("h2d", "pinned").bytes_per_s == 6e9
    assert c.wc_readbacks == 3 and (c.peer_count, c.peer_bytes_per_s) == (4, 80.0)
    assert any("batches" in n for n in c.notes)
    assert (a.instrument, a.count, a.per_s, a.median_bytes, a.flags) == (
        "uprobes", 40, 8.0, 4096, {"write_combined": 2, "mapped": 1})
    assert (a.registrations, a.registration_max_bytes, a.registration_flags, a.unregistrations) == (
        2, 2 * MIB, {"io_memory": 2}, 1)
    assert notices == []


def test_a_traced_row_keeps_the_tracers_figures_and_a_new_process_gets_a_row():
    traced = process(20, source="traced", copies=copies("cupti", [stat("h2d", "pinned", 1e9)]))
    rows, _ = merge([traced], outcome(proc(20, [cs("h2d", "pinned", 9e9)]), proc(30, [cs("d2h", "pageable", 2e8)],
                                                                                  name="srv")),
                    describe=lambda pid: (None, "bob", None))
    by = {r.pid: r for r in rows}
    assert by[20] is traced
    assert by[30].source == "attached" and by[30].identity.name == "srv" and by[30].identity.user == "bob"
    assert by[30].held.bytes is None and by[30].copies.pageable_bytes_per_s == 2e8


def test_the_pid_filter_a_stale_outcome_and_one_that_attached_nothing():
    out = outcome(proc(30, [cs("h2d", "pinned", 1e9)]), failed={31: "its libcuda (/x): squashfs"},
                  notices=("over 50000 events/s: probes sampled",))
    rows, notices = merge([], out, only_pids=[99])
    assert rows == [] and any("31 not attached" in n and "squashfs" in n for n in notices)
    assert any("sampled" in n for n in notices)
    assert merge([], out, now_mono=100.0 + 60.0) == ([], [])               # 60 s old: not now's
    rows, notices = merge([process(5)], outcome(error="attach needs root: uprobes are set through tracefs"))
    assert [r.source for r in rows] == ["est."] and notices == ["attach: attach needs root: uprobes are set"
                                                                " through tracefs"]
    held = LatestOutcome()
    assert held.latest() is None
    held.set(out)
    assert held.latest() is out


def test_a_process_cannot_claim_more_than_its_gpus_links_move():
    gen5 = gpu(0, processes=(GpuProcess(40),))       # 63 GB/s rated
    other = gpu(1, gen=4, gen_max=4)                  # 31.5 GB/s
    assert link_cap(40, [gen5, other]) == gen5.link.max_theoretical_bytes_per_s
    assert link_cap(41, [gen5, other]) == gen5.link.max_theoretical_bytes_per_s + other.link.max_theoretical_bytes_per_s
    assert link_cap(41, []) is None
    claim = proc(40, [cs("h2d", "pinned", 4e14), cs("h2d", "pageable", 1e14), cs("d2h", "pinned", 1e9)])
    (row,), _ = merge([], outcome(claim), gpus=[gen5, other])
    cap = gen5.link.max_theoretical_bytes_per_s
    assert abs(row.copies.bytes_per_s("h2d") - cap) < 1 and row.copies.get("d2h", "pinned").bytes_per_s == 1e9
    assert abs(row.copies.get("h2d", "pinned").bytes_per_s - cap * 0.8) < 1          # scaled alike
    assert any("held to" in n for n in row.copies.notes)


def test_requested_windows_keep_the_latest_that_attached_and_say_nothing_before(tmp_path):
    """The app's attach key: before its first window the collector says nothing of attaching (an
    attach always running says "attaching"), and a window that attached nothing stays out of the
    snapshots (the key says why, once)."""
    from pinmon.collect.attached import RequestedWindows
    from pinmon.collect.live import LiveCollector

    windows = RequestedWindows()
    attached = outcome(proc(30, [cs("h2d", "pinned", 1e9)]))
    windows.set(outcome(error="attach needs root: uprobes are set through tracefs"))
    assert windows.latest() is None
    windows.set(attached)
    windows.set(outcome(error="no process that maps libcuda to attach to"))
    assert windows.latest() is attached

    proc_root = tmp_path / "proc"
    proc_root.mkdir()
    empty = str(tmp_path / "empty")

    def notices(source):
        with LiveCollector(use_nvml=False, host_root=empty, proc_root=str(proc_root), attached=source,
                           oom_lookback_s=0) as col:
            return [n for n in col.snapshot().notices if n.startswith("attach")]

    assert notices(RequestedWindows()) == []
    assert notices(LatestOutcome()) == ["attach: attaching (no window has ended yet)"]
