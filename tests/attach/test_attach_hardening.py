"""A user's process that calls libcuda with made-up arguments, attached for real (the stand-in
library, this machine's uprobes): its rates in the snapshot are held to what its GPUs' links move, and
its calls land in its own row only, whatever pointers it passes; the findings they feed are about it.

These share the kernel's tracefs, so they run in one xdist group, one after another."""
import pytest

from pinmon.advise import advise
from pinmon.attach import AttachOutcome, AttachSession
from pinmon.collect.attached import merge_attached
from tests.attach.standin import CUDA, Child, mine, why_not
from tests.factories import gpu, snapshot

WHY = why_not()
pytestmark = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.xdist_group("tracefs"),
              pytest.mark.hardening]
TIB = 1 << 40



def rows_of(r, gpus=()):
    out = AttachOutcome(r, None, r.started_mono + r.window_s)
    rows, _ = merge_attached([], out, gpus=gpus, now_mono=out.ended_mono)
    return {p.pid: p for p in rows}


def test_made_up_sizes_are_held_to_the_links_rate(lib):
    faker = Child(lib)
    try:
        with AttachSession([faker.pid], is_cuda=CUDA) as s:
            faker.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pageable"}, 100 * TIB, n=200)
            r = s.run(0.2)
    finally:
        faker.close()
    g = gpu(0)
    row = rows_of(r, [g])[faker.pid]
    assert row.copies.bytes_per_s("h2d") <= g.link.max_theoretical_bytes_per_s * (1 + 1e-9)
    assert any("held to 63.0 GB/s" in n for n in row.copies.notes)
    (f,) = [f for f in advise(snapshot(gpus=[g], processes=list(rows_of(r, [g]).values())))
            if f.rule == "pageable-bulk-copies"]
    assert f.values["pid"] == faker.pid and f.values["pageable_copy_bytes_per_s"] <= 63.1e9


def test_calls_land_in_the_callers_row_whatever_pointers_they_pass(lib):
    faker, victim = Child(lib), Child(lib)
    try:
        with AttachSession([faker.pid, victim.pid], is_cuda=CUDA) as s:
            # the victim's own buffer addresses, as numbers, in the faker's calls
            for addr in victim.buffers.values():
                faker.call("cuMemcpyHtoD_v2", 0x1000, addr, 64 << 20, n=20)
                faker.call("cuMemHostRegister_v2", addr, 1 << 30, 0)
            r = s.run(0.2)
    finally:
        faker.close()
        victim.close()
    rows = rows_of(r)
    assert rows[victim.pid].copies.stats == () and rows[victim.pid].allocations.registrations == 0
    assert rows[faker.pid].copies.bytes_per_s("h2d") > 0 and rows[faker.pid].allocations.registrations == 2
    pids = {f.values.get("pid") for f in advise(snapshot(processes=list(rows.values())))}
    assert victim.pid not in pids
    assert mine() == (False, False)
