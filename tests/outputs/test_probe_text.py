"""A probe result as text, from hand-made results: the headline, the tables, the widths."""
from pinmon.model import ProbeMeasurement, ProbeResult
from pinmon.outputs.probe_text import format_probe, headline
from pinmon.units import MIB
from tests.factories import alloc_rows, quick_result


def test_headline_text():
    assert headline(quick_result()) == "pinned H2D 55.0 GB/s vs pageable 6.3 GB/s: 8.7x; 87% of Gen5 x16 (63.0 GB/s)"
    assert headline(quick_result(link_theoretical_bytes_per_s=None)) == \
        "pinned H2D 55.0 GB/s vs pageable 6.3 GB/s: 8.7x"
    assert headline(quick_result(reason="cancelled")).endswith("(cancelled)")
    assert headline(ProbeResult(time=0, status="unavailable", reason="no CUDA device visible to CuPy")) == \
        "probe unavailable: no CUDA device visible to CuPy"


def test_format_probe_quick_table():
    text = format_probe(quick_result())
    lines = text.splitlines()
    assert all(len(l) <= 80 for l in lines)
    assert lines[0] == "Probe quick, CUDA device 0: 310.0 ms (context 210.0 ms), cap 256.0 MiB"
    assert "8.7x" in lines[1]
    row = next(l for l in lines if l.strip().startswith("64.0 MiB"))
    assert "55.0 GB/s" in row and "6.3 GB/s" in row and "11.3 GB/s" in row and "4.9x" in row
    assert "0000:00:06.0" in text


def test_format_probe_alloc_and_modes():
    size = 64 * MIB
    m = ProbeMeasurement
    rows = alloc_rows(size, 0.031, 0.009, 0.014, 0.002, size / 55e9, size / 6.3e9)
    r = ProbeResult(time=0, kind="alloc", measurements=tuple(rows))
    text = format_probe(r, width=80)
    assert "pinning pays off after" in text and all(len(l) <= 80 for l in text.splitlines())
    modes = ProbeResult(time=0, kind="modes", link_theoretical_bytes_per_s=63.015e9, measurements=(
        m("cpu_read", "write_combined", 16 * MIB, bytes_per_s=10.4e9, seconds=0.0016, repeats=5,
          note="no CPU-read penalty measured (write-combining not honoured here, e.g. in a VM)"),
        m("copy", "pinned", size, "h2d", 55e9, size / 55e9, 8),
        m("kernel_read", "mapped", size, bytes_per_s=50e9, seconds=size / 50e9, repeats=10),
        m("register", "registered", size, seconds=0.0018, repeats=3)))
    text = format_probe(modes, width=60)
    words = " ".join(text.split())
    assert "write-combining not honoured" in words and "kernel_read" in words and "register" in words
    assert all(len(l) <= 60 for l in text.splitlines())
    assert headline(modes).startswith("pinned H2D 55.0 GB/s; 87% of Gen5 x16")


def test_check_report_uses_the_headline():
    from pinmon.model import HostMemory, Snapshot
    from pinmon.outputs.text import format_check

    snap = Snapshot(time=1.0, host=HostMemory(hostname="h"), probe=quick_result())
    assert "pinned H2D 55.0 GB/s vs pageable 6.3 GB/s: 8.7x" in format_check(snap, [])
