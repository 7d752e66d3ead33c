"""The kernel's count of pinned pages: parsing, fake trees, and a real io_uring pin as ground truth.

io_uring registered buffers pin pages with FOLL_PIN as the CUDA driver does, so on any Linux box
the collected ``kernel_pinned_bytes`` must move by exactly the pinned pages. The kernel folds per-CPU
deltas into the counters about once a second, so a reading is taken once it has held still across a
fold (or right after ``/proc/sys/vm/stat_refresh`` folds them, where pinmon's tests run as root).
"""
import json
import os
import subprocess
import sys
import time

import pytest

from pinmon.advise import advise
from pinmon.cli.config import load_config
from pinmon.collect.host.kernel_pins import KernelPins, KernelPinsReader, parse_pinned_pages
from pinmon.collect.host.pinned_total import host_wide_notice, maps_pinned_total, pinned_figures
from pinmon.collect.live import LiveCollector
from pinmon.collect.processes.procmaps import PinnedEstimate
from tests import factories as make
from tests import iouring
from tests.waiting import NotYet, read_until, wait_until

PAGE = os.sysconf("SC_PAGE_SIZE")
PIN_BYTES = 64 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The two lines as /proc/vmstat prints them, among their real neighbours.
VMSTAT = (b"nr_free_pages 5876188\nnr_zone_inactive_anon 1024\nnr_dirtied 5214\nnr_written 4100\n"
          b"nr_foll_pin_acquired 262178\nnr_foll_pin_released 2013\nnr_kernel_stack 9296\n"
          b"numa_hit 1234\n")


def write_tree(root, total=None, nodes=None, online=None):
    """A fake host root: proc/vmstat and sys/devices/system/node/nodeN/vmstat with FOLL_PIN counters
    (acquired, released) pairs; None leaves the counters out."""
    (root / "proc").mkdir(parents=True, exist_ok=True)
    lines = b"nr_free_pages 100\n"
    if total is not None:
        lines += b"nr_foll_pin_acquired %d\nnr_foll_pin_released %d\n" % total
    (root / "proc" / "vmstat").write_bytes(lines + b"numa_hit 1\n")
    if nodes is not None:
        base = root / "sys/devices/system/node"
        base.mkdir(parents=True, exist_ok=True)
        (base / "online").write_text(online or f"0-{len(nodes) - 1}\n")
        for i, counts in enumerate(nodes):
            (base / f"node{i}").mkdir(exist_ok=True)
            text = b"nr_inactive_anon 5\n"
            if counts is not None:
                text += b"nr_foll_pin_acquired %d\nnr_foll_pin_released %d\n" % counts
            (base / f"node{i}" / "vmstat").write_bytes(text)
    return str(root)


# --- parsing and fake trees ------------------------------------------------------------------------

def test_parse_pinned_pages_from_real_vmstat_lines():
    assert parse_pinned_pages(VMSTAT) == 262178 - 2013
    # First line of the file, last line without a newline.
    assert parse_pinned_pages(b"nr_foll_pin_acquired 10\nnr_foll_pin_released 4") == 6


@pytest.mark.parametrize("data", [b"", b"nr_free_pages 1\n", b"nr_foll_pin_acquired 5\n",
                                  b"nr_foll_pin_acquired x\nnr_foll_pin_released 1\n",
                                  b"nr_foll_pin_acquired -5\nnr_foll_pin_released 1\n",
                                  b"xnr_foll_pin_acquired 5\nnr_foll_pin_released 1\n"])
def test_parse_pinned_pages_missing_or_malformed_is_none(data):
    assert parse_pinned_pages(data) is None


def test_unfolded_per_cpu_deltas_never_read_below_zero():
    assert parse_pinned_pages(b"nr_foll_pin_acquired 100\nnr_foll_pin_released 103\n") == 0


def test_reader_total_and_per_node(tmp_path):
    root = write_tree(tmp_path, total=(1000, 200), nodes=[(700, 100), (300, 100)])
    kp = KernelPinsReader(root, page_size=4096).read()
    assert kp.pinned_bytes == 800 * 4096
    assert kp.by_node == {"0": 600 * 4096, "1": 200 * 4096}
    assert kp.nodes == (0, 1)


def test_reader_counters_missing_gives_none_not_a_crash(tmp_path):
    root = write_tree(tmp_path, total=None, nodes=[None])
    kp = KernelPinsReader(root, page_size=4096).read()
    assert kp.pinned_bytes is None and kp.by_node is None and kp.nodes == (0,)
    nothing = KernelPinsReader(str(tmp_path / "absent"), page_size=4096).read()
    assert nothing == KernelPins(None, None, None)


def test_a_node_without_counters_drops_the_split_not_the_total(tmp_path):
    root = write_tree(tmp_path, total=(10, 0), nodes=[(10, 0), None])
    kp = KernelPinsReader(root, page_size=4096).read()
    assert kp.pinned_bytes == 10 * 4096 and kp.by_node is None


def test_node_list_is_read_again_after_a_while(tmp_path):
    clock = [0.0]
    root = write_tree(tmp_path, total=(1, 0), nodes=[(1, 0)])
    reader = KernelPinsReader(root, page_size=4096, clock=lambda: clock[0])
    assert reader.read().nodes == (0,)
    write_tree(tmp_path, total=(1, 0), nodes=[(1, 0), (0, 0)])
    assert reader.read().nodes == (0,)
    clock[0] = 61.0
    assert reader.read().nodes == (0, 1)


def test_figures_without_the_kernel_count_fall_back_to_the_estimate():
    f = pinned_figures(KernelPins(), 0, pinned_est=3 << 30, wc_est=1 << 20)
    assert f["kernel_pinned_bytes"] is None and f["unattributed_pinned_bytes"] is None
    assert f["pinned_bytes_total"] == (3 << 30) + (1 << 20) and f["pinned_bytes_source"] == "est."


def test_figures_with_the_kernel_count():
    kp = KernelPins(pinned_bytes=5 << 30, by_node={"0": 5 << 30}, nodes=(0,))
    f = pinned_figures(kp, 1 << 30, pinned_est=1 << 30, wc_est=256 << 20)
    assert f["pinned_bytes_total"] == (5 << 30) + (256 << 20)  # write-combined is not in the count
    assert f["pinned_bytes_source"] == "kernel"
    assert f["unattributed_pinned_bytes"] == 4 << 30
    # More explained than counted (an estimate that counts a plain shared mapping): never below 0.
    assert pinned_figures(KernelPins(pinned_bytes=1), 1 << 30, 1 << 30, 0)["unattributed_pinned_bytes"] == 0


def _est(*extents):
    return PinnedEstimate(True, 0, 0, 0, frozenset(), extents=frozenset(extents))


def test_what_the_maps_explain_counts_a_shared_buffer_once_and_stays_under_shmem():
    gib = 1 << 30
    rows = [make.process(1, None, pinned_bytes=gib), make.process(2, None, pinned_bytes=gib),
            make.process(3, None, pinned_bytes=None, source="traced")]
    # pids 1 and 2 map one 1 GiB object (a fork, an IPC handle): one buffer.
    shared = {1: _est(("00:01", 7, 0, gib)), 2: _est(("00:01", 7, 0, gib))}
    assert maps_pinned_total(rows, shared.get, None) == gib
    apart = {1: _est(("00:01", 7, 0, gib)), 2: _est(("00:01", 8, 0, gib))}
    assert maps_pinned_total(rows, apart.get, None) == 2 * gib
    assert maps_pinned_total(rows, apart.get, gib // 2) == gib // 2  # never above the host's Shmem
    # A row capped below its mappings (resident) keeps the sum of the rows as the bound.
    capped = [make.process(1, None, pinned_bytes=gib // 4)]
    assert maps_pinned_total(capped, apart.get, None) == gib // 4
    assert maps_pinned_total(rows, lambda pid: None, None) == 2 * gib


def test_host_wide_notice_only_under_a_cgroup_limit_below_memtotal():
    assert host_wide_notice(1 << 30, None, 64 << 30) is None
    assert host_wide_notice(1 << 30, 64 << 30, 64 << 30) is None
    assert host_wide_notice(None, 8 << 30, 64 << 30) is None
    note = host_wide_notice(1 << 30, 8 << 30, 64 << 30)
    assert "host-wide" in note and "8.0 GiB" in note and "64.0 GiB" in note


def test_collector_on_a_tree_without_counters_has_null_figures(tmp_path):
    root = write_tree(tmp_path, total=None)
    (tmp_path / "procfs").mkdir()
    with LiveCollector(use_nvml=False, host_root=root, proc_root=str(tmp_path / "procfs")) as c:
        snap = c.snapshot()
    d = snap.to_dict()["host"]
    assert d["kernel_pinned_bytes"] is None and d["kernel_pinned_bytes_by_node"] is None
    assert d["unattributed_pinned_bytes"] is None
    assert d["pinned_bytes_source"] == "est." and d["pinned_bytes_total"] == 0


def test_collector_notice_inside_a_limited_cgroup(tmp_path):
    root = write_tree(tmp_path, total=(2048, 0))
    (tmp_path / "proc" / "meminfo").write_text("MemTotal: 67108864 kB\nMemAvailable: 33554432 kB\n")
    (tmp_path / "proc" / "self").mkdir()
    (tmp_path / "proc" / "self" / "cgroup").write_text("0::/job\n")
    (tmp_path / "proc" / "self" / "mountinfo").write_text(
        "26 23 0:25 / /sys/fs/cgroup rw,relatime shared:4 - cgroup2 cgroup2 rw\n")
    cg = tmp_path / "sys/fs/cgroup/job"
    cg.mkdir(parents=True)
    (cg / "memory.max").write_text(str(8 << 30))
    (cg / "memory.current").write_text(str(1 << 30))
    (tmp_path / "procfs").mkdir()
    with LiveCollector(use_nvml=False, host_root=root, proc_root=str(tmp_path / "procfs")) as c:
        snap = c.snapshot()
    assert snap.host.cgroup_limit_bytes == 8 << 30
    assert snap.host.kernel_pinned_bytes == 2048 * PAGE
    assert any("host-wide" in n for n in snap.notices)


# --- the real count, against io_uring pins ----------------------------------------------------------

def _fold() -> None:
    """Fold per-CPU vmstat deltas now where allowed (root); elsewhere the kernel does it each second."""
    try:
        with open("/proc/sys/vm/stat_refresh", "w") as f:
            f.write("1")
    except OSError:
        pass


def _settled(read, timeout_s: float = 5.0):
    """A reading that held still across a fold (the kernel folds about once a second)."""
    def folded():
        _fold()
        return read()

    held = {"value": folded(), "since": time.monotonic()}

    def still(now) -> bool:
        if now != held["value"]:
            held.update(value=now, since=time.monotonic())
        return time.monotonic() - held["since"] >= 1.2

    return read_until(folded, still, timeout_s=timeout_s, interval_s=0.1)


@pytest.fixture
def kernel_reader():
    reader = KernelPinsReader("/", min_interval_s=0.0)  # every read fresh: tests wait for folds
    if reader.read().pinned_bytes is None:
        pytest.skip("this kernel has no nr_foll_pin_* counters in /proc/vmstat (Linux 5.6+ has them)")
    return reader


def _pin(nbytes=PIN_BYTES):
    try:
        buf = iouring.PinnedBuffer(nbytes)
        buf.open()
    except iouring.Unavailable as e:
        pytest.skip(str(e))
    return buf


def test_io_uring_helper_reports_refusals_as_unavailable():
    import ctypes
    import errno

    def refuse(*args):
        ctypes.set_errno(errno.ENOSYS)
        return -1

    with pytest.raises(iouring.Unavailable, match="ENOSYS"):
        with iouring.PinnedBuffer(1 << 20, syscall=refuse):
            pass


# Pins pages or reads the host-wide pinned count: one worker runs all such tests, one at a time.
@pytest.mark.xdist_group("host-pinned-pages")
def test_collected_figure_moves_by_exactly_the_pinned_pages(kernel_reader):
    # One collector throughout: its vmstat file stays open and is read again from offset 0.
    with LiveCollector(use_nvml=False, pids=[os.getpid()]) as c:
        def collected():
            return c.snapshot().host.kernel_pinned_bytes

        deltas = []
        for _attempt in range(3):  # another process may pin or unpin meanwhile: retry on a mismatch
            before = _settled(collected)
            buf = _pin()
            try:
                during = _settled(collected)
            finally:
                buf.close()
            after = _settled(collected)
            deltas.append(((during - before) // PAGE, (during - after) // PAGE))
            if deltas[-1] == (buf.pages, buf.pages):
                break
    assert deltas[-1] == (buf.pages, buf.pages), deltas


def test_kept_file_reads_fresh_text_each_time(tmp_path):
    from pinmon.collect.host.kernel_pins import KeptFile

    path = tmp_path / "vmstat"
    path.write_bytes(b"nr_foll_pin_acquired 5\nnr_foll_pin_released 1\n")
    f = KeptFile(str(path))
    assert parse_pinned_pages(f.read()) == 4
    with open(path, "r+b") as w:  # same file, new text (as the kernel rebuilds /proc text per read)
        w.write(b"nr_foll_pin_acquired 9")
    assert parse_pinned_pages(f.read()) == 8
    f.close()
    path.unlink()
    with pytest.raises(FileNotFoundError):
        f.read()


def test_reader_reuses_a_reading_younger_than_half_a_second(tmp_path):
    from pinmon.collect.host.kernel_pins import MIN_READ_INTERVAL_S

    clock = [0.0]
    root = write_tree(tmp_path, total=(10, 0), nodes=[(10, 0)])
    reader = KernelPinsReader(root, page_size=4096, clock=lambda: clock[0])
    assert reader.read().pinned_bytes == 10 * 4096
    write_tree(tmp_path, total=(20, 0), nodes=[(20, 0)])
    clock[0] = MIN_READ_INTERVAL_S / 2
    assert reader.read().pinned_bytes == 10 * 4096
    clock[0] = MIN_READ_INTERVAL_S
    kp = reader.read()
    assert kp.pinned_bytes == 20 * 4096 and kp.by_node == {"0": 20 * 4096}  # one node: the host's count
    reader.close()


def _config(tmp_path, **values):
    path = tmp_path / "pinmon.toml"
    body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in values.items())
    path.write_text("[thresholds]\n" + body + "\n")
    return str(path)


# Pins pages or reads the host-wide pinned count: one worker runs all such tests, one at a time.
@pytest.mark.xdist_group("host-pinned-pages")
def test_io_uring_pins_are_explained_by_the_processs_vmpin(tmp_path, kernel_reader):
    # io_uring's registered buffers are FOLL_PIN pages no mapping shows, but the kernel accounts them
    # in the process's VmPin: they are explained, and pinned-unattributed stays silent even with its
    # thresholds lowered to a few MiB.
    cfg = load_config(_config(tmp_path, unattributed_min_bytes="4M", unattributed_min_fraction=0.01))
    with LiveCollector(use_nvml=False, pids=[os.getpid()]) as c:
        buf = _pin()

        def pinned_seen():
            snap = c.snapshot()
            if snap.host.kernel_pinned_bytes < PIN_BYTES // 2 or _own_vmpin(snap) < PIN_BYTES:
                raise NotYet(snap.host)
            return snap

        try:
            snap = wait_until(pinned_seen, interval_s=0.1, what="the registered pages in the count and in VmPin")
        finally:
            buf.close()
    assert _own_vmpin(snap) >= PIN_BYTES, snap.processes
    assert snap.host.unattributed_pinned_bytes < PIN_BYTES // 2, snap.host
    assert not [f for f in advise([snap], cfg.thresholds) if f.rule == "pinned-unattributed"]


def _own_vmpin(snap) -> int:
    return sum(p.held.vm_pinned_bytes or 0 for p in snap.processes if p.pid == os.getpid())


# Pins pages or reads the host-wide pinned count: one worker runs all such tests, one at a time.
@pytest.mark.xdist_group("host-pinned-pages")
def test_check_goes_critical_on_registered_memory_alone(tmp_path, kernel_reader):
    """pinned-ram-share, thresholds lowered in a config file, fires on pages no /proc/PID/maps shows."""
    with LiveCollector(use_nvml=False, pids=[os.getpid()]) as c:
        host = c.snapshot().host
    base = _settled(lambda: kernel_reader.read().pinned_bytes)
    eff = host.effective_mem_limit_bytes
    # Critical once half the pinned buffer is added to what the box pins anyway.
    critical = (base + PIN_BYTES // 2) / eff
    cfg = _config(tmp_path, pinned_ram_warning_fraction=critical / 2, pinned_ram_critical_fraction=critical,
                  unattributed_min_bytes="32M", unattributed_min_fraction=0.01)
    env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "pinmon", "--config", cfg, "check", "--json"]
    quiet = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    buf = _pin()

    def critical_share():
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
        doc = json.loads(p.stdout)
        share = [f for f in doc["findings"] if f["rule"] == "pinned-ram-share"]
        if not (share and share[0]["severity"] == "critical"):
            raise NotYet(share or doc["snapshot"]["host"])
        return p, doc, share

    try:
        p, doc, share = wait_until(critical_share, interval_s=0.2, what="a critical pinned-ram-share")
    finally:
        buf.close()
    assert not [f for f in json.loads(quiet.stdout)["findings"] if f["rule"] == "pinned-ram-share"]
    assert p.returncode == 2, p.stderr
    assert share and share[0]["severity"] == "critical"
    assert share[0]["values"]["kernel_count"] == 1
    assert "(kernel's count" in share[0]["message"]
    h = doc["snapshot"]["host"]
    assert h["pinned_bytes_source"] == "kernel" and h["kernel_pinned_bytes"] >= PIN_BYTES // 2
    assert h["unattributed_pinned_bytes"] is not None
    assert "pinned-unattributed" not in {f["rule"] for f in doc["findings"]}  # explained by its VmPin
