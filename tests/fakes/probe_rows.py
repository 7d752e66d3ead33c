"""Hand-made probe rows and results, for the analysis and the text output."""
from pinmon.model import ProbeMeasurement, ProbeResult
from pinmon.units import MIB


def alloc_rows(size, pinned_alloc, pinned_free, pageable_alloc, pageable_free, pinned_copy, pageable_copy):
    """The steady alloc and free rows of both memories and their H2D copies at one size, in seconds."""
    m = ProbeMeasurement
    return [m("alloc", "pinned", size, seconds=pinned_alloc, note="steady"),
            m("alloc", "pinned", size, seconds=pinned_alloc * 10, note="first"),
            m("free", "pinned", size, seconds=pinned_free, note="steady"),
            m("alloc", "pageable", size, seconds=pageable_alloc, note="steady"),
            m("free", "pageable", size, seconds=pageable_free, note="steady"),
            m("copy", "pinned", size, direction="h2d", seconds=pinned_copy, bytes_per_s=size / pinned_copy),
            m("copy", "pageable", size, direction="h2d", seconds=pageable_copy, bytes_per_s=size / pageable_copy)]


def quick_result(**kw):
    """A quick probe on a Gen5 x16 link: 55.0 GB/s pinned vs 6.3 GB/s pageable H2D; ``kw`` overrides."""
    m = ProbeMeasurement
    size = 64 * MIB
    rows_ = (m("init", "device", 0, seconds=0.21, repeats=1, note="CUDA context ready; CUDA device 0 is 0000:00:06.0"),
             m("copy", "pinned", size, "h2d", 55.0e9, size / 55.0e9, 8),
             m("copy", "pageable", size, "h2d", 6.3e9, size / 6.3e9, 8),
             m("copy", "pinned", size, "d2h", 55.1e9, size / 55.1e9, 8),
             m("copy", "pageable", size, "d2h", 11.3e9, size / 11.3e9, 8))
    args = dict(time=1.0, gpu_index=0, kind="quick", link_theoretical_bytes_per_s=32e9 * 16 * 128 / 130 / 8,
                duration_s=0.31, max_pinned_bytes=256 * MIB, measurements=rows_)
    args.update(kw)
    return ProbeResult(**args)
