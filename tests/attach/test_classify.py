"""classify.ProcessMemory on fake maps: each kind of host memory, the CUDA-process check's default
(a real NVIDIA device through map_files) and its injection, ranges seen during the attach, and the
throttled re-read on a miss. calls.apply and the tallies on top of it."""
import os
import stat

from pinmon.attach import calls
from pinmon.attach.aggregate import ProcessTally
from pinmon.attach.catalog import CATALOG
from pinmon.attach.classify import PAGEABLE, PINNED, WRITE_COMBINED, ProcessMemory, maps_real_nvidia_device
from pinmon.attach.sizes import SizeHistogram
from pinmon.collect.processes.kernel_objects import KernelObjects
from pinmon.collect.processes.procmaps import parse_maps

OBJECTS = KernelObjects(shmem_dev="00:01", nvidiactl=("00:05", 77))
MAPS = """\
200000000-300000000 ---p 00000000 00:00 0
7f0000000000-7f0000200000 rw-s 00000000 00:01 1001                       /dev/zero (deleted)
7f0000200000-7f0000400000 rw-s 00000000 00:09 1002                       /dev/zero (deleted)
7f0001000000-7f0002000000 rw-s 00000000 00:05 77                         /dev/nvidiactl
7f0003000000-7f0003100000 rw-p 00000000 00:00 0
7f0004000000-7f0004001000 rw-s 00000000 00:05 88                         /dev/nvidia0
7f0005000000-7f0005001000 rw-s 00000000 00:05 89                         /dev/nvidia-uvm
"""
PINNED_PTR, FORGED_ZERO, WC_PTR, ANON, DEV0, UVM = (0x7f0000000100, 0x7f0000200100, 0x7f0001000100, 0x7f0003000100,
                                                    0x7f0004000100, 0x7f0005000100)


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def memory(text=MAPS, cuda=True, clock=None):
    state = {"text": text, "reads": 0}

    def read(pid):
        state["reads"] += 1
        return parse_maps(state["text"])
    m = ProcessMemory(42, OBJECTS, is_cuda=lambda pid, maps: cuda, read_maps=read, clock=clock or Clock())
    return m, state


def test_kinds_of_host_pointers():
    m, _ = memory()
    assert m.host_kind(PINNED_PTR) == PINNED
    assert m.host_kind(FORGED_ZERO) == PAGEABLE   # a /dev/zero of another file system: not the kernel's shmem
    assert m.host_kind(WC_PTR) == WRITE_COMBINED
    assert m.host_kind(ANON) == PAGEABLE
    assert m.host_kind(None) == PAGEABLE


def test_without_a_cuda_device_a_shared_anonymous_mapping_is_not_pinned():
    m, _ = memory(cuda=False)
    assert m.host_kind(PINNED_PTR) == PAGEABLE


def test_host_or_device_for_cumemcpy():
    m, _ = memory()
    assert m.is_host(ANON) and m.is_host(PINNED_PTR)
    assert not m.is_host(0x200001000)       # CUDA's reserved range: inaccessible
    assert not m.is_host(DEV0) and not m.is_host(UVM)
    assert not m.is_host(0x10)


def test_a_miss_rereads_the_maps_at_most_every_fifth_of_a_second():
    clock = Clock()
    m, state = memory(clock=clock)
    assert state["reads"] == 1
    state["text"] += "7f0009000000-7f0009100000 rw-s 00000000 00:01 2002  /dev/zero (deleted)\n"
    clock.t += 0.05
    assert m.host_kind(0x7f0009000010) == PAGEABLE and state["reads"] == 1   # too soon
    clock.t += 0.2
    assert m.host_kind(0x7f0009000010) == PINNED and state["reads"] == 2
    for _ in range(100):
        m.host_kind(0x10)
    assert state["reads"] == 2   # a hundred misses in the same instant: no re-read
    clock.t += 0.2
    m.host_kind(0x10)
    assert state["reads"] == 3


def test_ranges_allocated_and_registered_during_the_attach():
    m, state = memory(cuda=False)
    m.registered(ANON, 4096)
    assert m.host_kind(ANON + 10) == PINNED and m.host_kind(ANON + 4096) == PAGEABLE
    m.released(ANON)
    assert m.host_kind(ANON + 10) == PAGEABLE
    state["text"] += "7f0009000000-7f0009300000 rw-s 00000000 00:01 2002  /dev/zero (deleted)\n"
    assert m.allocated(3 << 20, write_combined=True) == (0x7f0009000000, 0x7f0009300000)
    assert m.host_kind(0x7f0009000010) == WRITE_COMBINED
    state["text"] += "7f000a000000-7f000a001000 rw-s 00000000 00:01 2003  /dev/zero (deleted)\n"
    assert m.allocated(8192, write_combined=False) is None   # the new mapping is too small to hold it


def test_an_allocation_read_before_its_mapping_exists_is_found_by_a_later_reread():
    # Its entry event was read while the call still ran (a large allocation takes ~0.1 s): no mapping yet.
    clock = Clock()
    m, state = memory(cuda=False, clock=clock)
    assert m.allocated(256 << 20, write_combined=False) is None and len(m.pending) == 1
    state["text"] += "7f0010000000-7f0020000000 rw-s 00000000 00:01 2004  /dev/zero (deleted)\n"
    clock.t += 0.05                           # the next batch, read after the call returned: its copy misses
    m.batch_read(clock.t)
    clock.t += 0.001
    assert m.host_kind(0x7f0010000100) == PINNED and not m.pending    # re-read at once, not 0.2 s later
    reads = state["reads"]
    for _ in range(50):
        m.host_kind(0x10)                     # misses in the same batch: no more re-reads
    assert state["reads"] == reads
    m.allocated(1 << 30, write_combined=False)                         # never appears: given up
    clock.t += 3.0
    m.host_kind(0x10)
    assert not m.pending


def test_the_default_cuda_check_asks_the_kernel_what_the_mapped_file_is():
    maps = parse_maps(MAPS)
    assert maps_real_nvidia_device(1, maps, stat_mapped=lambda p: _chr(195))
    assert not maps_real_nvidia_device(1, maps, stat_mapped=lambda p: _chr(1))      # another device
    assert not maps_real_nvidia_device(1, maps, stat_mapped=lambda p: _reg())       # a planted file
    assert not maps_real_nvidia_device(1, parse_maps(MAPS.replace("/dev/nvidia", "/dev/other")),
                                       stat_mapped=lambda p: _chr(195))


class _St:
    def __init__(self, mode, rdev):
        self.st_mode, self.st_rdev = mode, rdev


def _chr(major):
    return _St(stat.S_IFCHR | 0o600, os.makedev(major, 0))


def _reg():
    return _St(stat.S_IFREG | 0o600, 0)


# --- tallies ---------------------------------------------------------------------------------------

def tally(text=MAPS):
    m, _ = memory(text)
    return ProcessTally(42, m)


def test_calls_land_in_their_direction_and_kind():
    t = tally()
    calls.apply(CATALOG["cuMemcpyHtoD_v2"], {"host": PINNED_PTR, "size": 100}, t)
    calls.apply(CATALOG["cuMemcpyDtoHAsync_v2_ptsz"], {"host": WC_PTR, "size": 50}, t)
    calls.apply(CATALOG["cuMemcpyAtoH"], {"host": ANON, "size": 7}, t)
    calls.apply(CATALOG["cuMemcpy"], {"dst": 0x200001000, "src": ANON, "size": 9}, t)           # h2d pageable
    calls.apply(CATALOG["cuMemcpyAsync"], {"dst": PINNED_PTR, "src": 0x200001000, "size": 11}, t)  # d2h pinned
    calls.apply(CATALOG["cuMemcpy"], {"dst": ANON, "src": PINNED_PTR, "size": 13}, t)             # host to host
    calls.apply(CATALOG["cuMemcpy"], {"dst": 0x200001000, "src": 0x200002000, "size": 17}, t)     # device
    calls.apply(CATALOG["cuMemcpyDtoD_v2"], {"size": 19}, t)
    calls.apply(CATALOG["cuMemcpyPeerAsync"], {"size": 23}, t)
    assert {k: (v.count, v.bytes) for k, v in t.copies.items()} == {
        ("h2d", PINNED): (1, 100), ("d2h", WRITE_COMBINED): (1, 50), ("d2h", PAGEABLE): (1, 7),
        ("h2d", PAGEABLE): (1, 9), ("d2h", PINNED): (1, 11)}
    assert (t.host_copies.bytes, t.device_copies.bytes, t.peer_copies.bytes) == (13, 17 + 19, 23)
    assert t.pageable_seen


def test_a_call_events_registers_become_the_functions_fields():
    raw = {"fn": 1, "a0": 7, "a1": 0xFFFF_FFFF_0000_0010, "a2": (5 << 32) | 4096, "a3": 0, "a4": 0}
    assert calls.call_fields(CATALOG["cuMemcpyHtoD"], raw) == {"host": 0xFFFF_FFFF_0000_0010, "size": 4096}
    assert calls.call_fields(CATALOG["cuMemcpyHtoD_v2"], raw) == {"host": 0xFFFF_FFFF_0000_0010, "size": (5 << 32) | 4096}
    assert calls.call_fields(CATALOG["cuMemcpyPeer"], dict(raw, a4=99)) == {"size": 99}
    desc = {"a0": (7 << 32) | 1, "a1": 10, "a2": (9 << 32) | 5, "a3": 2, "a4": 0, "a5": 6, "a6": 100, "a7": 3, "a8": 1}
    assert calls.call_fields(CATALOG["cuMemcpy2D"], desc) == {"st": 1, "sh": 10, "sd": 5, "dt": 2, "dh": 0, "dd": 6,
                                                               "w": 100, "h": 3, "d": 1}
    assert calls.call_fields(CATALOG["cuMemcpy2D_v2"], desc)["sd"] == (9 << 32) | 5


def test_descriptors_batches_and_bad_sizes():
    t = tally()
    d2 = {"st": 1, "sh": PINNED_PTR, "sd": 0, "dt": 2, "dh": 0, "dd": 0x200001000, "w": 100, "h": 3}
    calls.apply(CATALOG["cuMemcpy2DAsync_v2"], d2, t)
    d3 = {"st": 3, "sh": 0, "sd": 0, "dt": 4, "dh": 0, "dd": ANON, "w": 10, "h": 2, "d": 5}
    calls.apply(CATALOG["cuMemcpy3D_v2_ptds"], d3, t)                     # array -> unified host: d2h
    calls.apply(CATALOG["cuMemcpy3DPeer"], dict(d3, dt=2, dd=0), t)        # device <- array, peer
    batch = {"a0": 10, "a1": 0x200001000, "a2": ANON, "a3": PINNED_PTR, "a4": 0x200001000, "a5": 1000, "a6": 2000,
             "a7": 0, "a8": 0}
    calls.apply(CATALOG["cuMemcpyBatchAsync_v2"], calls.call_fields(CATALOG["cuMemcpyBatchAsync_v2"], batch), t)
    one = dict(batch, a0=1, a2=0xdead, a4=0xbeef, a6=1 << 40)    # past a batch of one: what lay beyond its arrays
    calls.apply(CATALOG["cuMemcpyBatchAsync"], calls.call_fields(CATALOG["cuMemcpyBatchAsync"], one), t)
    calls.apply(CATALOG["cuMemcpy3DBatchAsync_v2"], {"n": 4}, t)
    calls.apply(CATALOG["cuMemcpy3DWithAttributesAsync"], {}, t)
    calls.apply(CATALOG["cuMemcpyHtoD_v2"], {"host": PINNED_PTR, "size": 1 << 60}, t)   # not a real size
    assert (t.copies[("h2d", PINNED)].count, t.copies[("h2d", PINNED)].bytes) == (4, 300 + 1000 + 1000)
    assert t.copies[("h2d", PINNED)].unknown_size == 1
    assert (t.copies[("d2h", PAGEABLE)].count, t.copies[("d2h", PAGEABLE)].bytes) == (2, 100 + 2000)
    assert t.peer_copies.bytes == 100
    # 2 of the batch's 10 copies were fetched; the batch of one used its one copy only
    assert (t.batch_calls, t.batch_copies, t.batch_copies_unmeasured, t.batch_op_count) == (4, 11, 8, 5)


def test_allocations_registrations_and_frees():
    t = tally()
    calls.apply(CATALOG["cuMemHostAlloc"], {"size": 1 << 20, "flags": 5}, t)
    calls.apply(CATALOG["cuMemAllocHost_v2"], {"size": 4096}, t)
    calls.apply(CATALOG["cuMemHostRegister_v2"], {"ptr": ANON, "size": 8192, "flags": 2}, t)
    calls.apply(CATALOG["cuMemHostUnregister"], {"ptr": ANON}, t)
    calls.apply(CATALOG["cuMemFreeHost"], {"ptr": PINNED_PTR}, t)
    assert (t.allocations.count, t.allocations.bytes, t.frees) == (2, (1 << 20) + 4096, 1)
    assert dict(t.alloc_flags) == {"portable": 1, "writecombined": 1, "default": 1}
    assert (t.registrations.count, t.registrations.bytes, dict(t.register_flags), t.unregistrations) == \
        (1, 8192, {"devicemap": 1}, 1)


def test_size_percentiles_are_exact_for_equal_sizes_and_bounded_otherwise():
    h = SizeHistogram()
    assert h.percentile(0.5) is None
    for _ in range(90):
        h.add(1 << 20)
    for _ in range(10):
        h.add(3000)
    assert (h.percentile(0.5), h.percentile(0.9), h.percentile(1.0), h.max) == (1 << 20, 1 << 20, 1 << 20, 1 << 20)
    assert h.percentile(0.05) == 3000
    g = SizeHistogram()
    for s in range(1, 100_000, 7):
        g.add(s)
    assert len(g.buckets) < 300
    p50 = g.percentile(0.5)
    assert 50_000 <= p50 <= 50_000 * 1.07
