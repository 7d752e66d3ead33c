"""What a user who calls libcuda with made-up arguments can change in root's snapshot through an
attach: their own row's copies and allocations, and findings about that row; never a host total,
another process's row, or held bytes (those stay the kernel's and the maps').

Against the live collector on a fake /proc and host tree (so the two snapshots compared see the same
machine), the faker's window as the engine's records."""
from __future__ import annotations

import time

import pytest

from pinmon.advise import advise
from pinmon.collect.attached import LatestOutcome
from pinmon.collect.live import LiveCollector
from tests.collect.test_attached import alloc_stats, cs, outcome, proc
from tests.collect.test_forged_figures import CUDA, TRUSTED, fake_cuda_proc, host_tree, lines

pytestmark = pytest.mark.hardening
MIB, GIB = 1 << 20, 1 << 30


def take(host, procdir, attached=None):
    with LiveCollector(use_nvml=False, host_root=host, proc_root=procdir, pids=[4242, 4343], kernel_read_every_s=0,
                       attached=attached) as col:
        col.scanner.objects = TRUSTED
        return col.snapshot()


def test_a_faked_window_changes_its_own_row_only(tmp_path):
    procdir = tmp_path / "proc"
    procdir.mkdir()
    pinned = lines(2, 0x7f5000000000, 64 * MIB, "00:01", 900, "/dev/zero (deleted)")
    fake_cuda_proc(procdir, 4242, CUDA + pinned, rss_shmem_kib=128 * 1024)
    fake_cuda_proc(procdir, 4343, CUDA + lines(1, 0x7f6000000000, 32 * MIB, "00:01", 901, "/dev/zero (deleted)"),
                   rss_shmem_kib=32 * 1024)
    host = host_tree(tmp_path, shmem_kib=160 * 1024, pinned_pages=(160 * MIB) // 4096)
    faker = proc(4242, [cs("h2d", "pageable", 9e11), cs("d2h", "write_combined", 5e11, count=10 ** 9)],
                 allocations=alloc_stats(count=10 ** 9, per_s=2e8, median_bytes=4096, bytes=1 << 59,
                                         registrations=10 ** 6, registered_bytes=1 << 59))
    fresh = outcome(faker, ended=time.monotonic())
    plain = take(host, str(procdir))
    faked = take(host, str(procdir), LatestOutcome(fresh))
    assert faked.host == plain.host                                          # every host figure as it was
    rows = {p.pid: p for p in faked.processes}
    before = {p.pid: p for p in plain.processes}
    assert rows[4343] == before[4343]                                        # another process's row
    assert rows[4242].held == before[4242].held and rows[4242].source == "attached"
    assert rows[4242].copies.pageable_bytes_per_s == 9e11                   # its own figures: its word
    ids = {(f.rule, f.values.get("pid")) for f in advise([faked])} - {(f.rule, f.values.get("pid"))
                                                                     for f in advise([plain])}
    assert ids == {("pageable-bulk-copies", 4242), ("pinned-small-allocs", 4242), ("wc-cpu-readback", 4242)}
