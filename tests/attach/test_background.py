"""Rolling windows (``AttachSession.cut``) and the background attacher (``Attacher``) on this machine's
kernel: a window's calls are counted in it and in no other, none lost between windows; one window in
the caller's thread; window after window on a thread, a new process attached at the next window, the
probes gone when it stops; a reason where nothing can be attached.

These share the kernel's tracefs, so they run in one xdist group, one after another."""

import pytest

from pinmon.attach import Attacher, AttachError, AttachPolicy, AttachSession, Budget
from pinmon.attach.classify import PINNED
from tests.attach.standin import CUDA, Child, mine, why_not
from tests.waiting import wait_until

WHY = why_not()
pytestmark = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.xdist_group("tracefs")]
MIB = 1 << 20



def wait_for(predicate, seconds=20.0):
    return wait_until(predicate, timeout_s=seconds, interval_s=0.05, what="the attacher's window")


def test_rolling_windows_count_every_call_once(child):
    with AttachSession([child.pid], is_cuda=CUDA) as s:
        first = s.cut()                                   # nothing yet
        child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 4096, n=30)
        second = s.cut()
        child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 4096, n=7)
        child.call("cuMemAllocHost_v2", {"out": "p"}, MIB)
        third = s.run_window(0.2)
        assert mine() == (True, True)                     # the probes stay between windows
        last = s.finish()
    counts = [r.processes[child.pid].stat("h2d", PINNED) for r in (first, second, third, last)]
    assert counts[0] is None and counts[1].count == 30 and counts[2].count == 7 and counts[3] is None
    assert third.processes[child.pid].allocations.count == 1 and second.processes[child.pid].allocations.count == 0
    assert second.started_mono < third.started_mono and third.window_s >= 0.2
    assert mine() == (False, False)


def test_one_window_in_the_callers_thread(child):
    attacher = Attacher([child.pid], AttachPolicy(window_s=0.3), is_cuda=CUDA)
    child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 1, n=2, thread=True)
    outcome = attacher.run_once()
    assert outcome.result is not None and outcome.error is None and outcome.detach_s is not None
    assert child.pid in outcome.result.processes and attacher.latest() is outcome
    assert mine() == (False, False)


def test_one_window_on_a_thread(child):
    attacher = Attacher([child.pid], AttachPolicy(window_s=30.0), is_cuda=CUDA).start_once()
    assert attacher.attached.wait(20)
    child.call("cuMemcpyDtoH_v2", {"buf": "pageable"}, 0x1000, 5, n=3)
    attacher.stop()                                   # ends the 30 s window early, detached
    assert not attacher.running and mine() == (False, False)
    outcome = attacher.latest()
    assert outcome.result.processes[child.pid].stat("d2h", "pageable").count == 3


def test_nothing_attached_says_why(child):
    outcome = Attacher([child.pid], AttachPolicy(window_s=0.1), euid=1000).run_once()
    assert outcome.result is None and "root" in outcome.error and outcome.fatal
    with pytest.raises(AttachError) as e:
        AttachSession([child.pid], euid=1000).attach()
    assert e.value.fatal
    gone = Attacher([2 ** 22], AttachPolicy(window_s=0.1)).run_once()
    assert gone.result is None and not gone.fatal and "libcuda" in gone.error
    assert mine() == (False, False)


def test_window_after_window_on_a_thread_takes_in_a_new_process(lib):
    a = Child(lib)
    b = None
    attacher = Attacher(None, AttachPolicy(window_s=0.3, budget=Budget()), is_cuda=CUDA)
    # Only the test's children: another process that maps a libcuda here belongs to someone else.
    attacher.targets = lambda: ([p for p in (a.pid, b.pid if b else None) if p], ())
    try:
        attacher.start()
        wait_for(lambda: (o := attacher.latest()) and o.result and a.pid in o.result.processes)   # attached
        a.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 10, n=4)
        got = wait_for(lambda: (o := attacher.latest()) and o.result and a.pid in o.result.processes
                       and o.result.processes[a.pid].stat("h2d", PINNED) and o)
        assert got.result.processes[a.pid].stat("h2d", PINNED).count == 4
        b = Child(lib)
        first_b = wait_for(lambda: (o := attacher.latest()) and o.result and b.pid in o.result.processes and o)
        assert first_b.ended_mono >= got.ended_mono
        b.call("cuMemcpyDtoH_v2", {"buf": "pinned"}, 0x1000, 20, n=3)
        wait_for(lambda: (o := attacher.latest()) and o.result and (s := o.result.processes.get(b.pid))
                 and s.stat("d2h", PINNED) and s.stat("d2h", PINNED).count == 3)
    finally:
        attacher.stop()
        a.close()
        if b is not None:
            b.close()
    assert mine() == (False, False)
