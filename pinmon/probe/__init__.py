"""Live probe transfers: what pinned host memory buys over pageable memory on this box.

``run_probe`` and ``probe_available`` are the API. CuPy is imported (in ``cuda``) only when a probe
runs, so importing this package never needs CuPy or a GPU. The modules: ``plan`` (what each kind
measures), ``safety`` (the pinned cap, the time budget), ``cuda`` (CuPy, availability, the context),
``buffers`` (host and device buffers), ``timing`` (CUDA events, medians), ``engine`` (runs a plan),
``analysis`` (pure: what the rows say), ``numa`` (``probe --numa``).
"""
from .analysis import break_even_transfers
from .buffers import PinnedBuffer, Registered, held_pinned_bytes
from .cuda import cuda_devices, probe_available
from .engine import measure_copies, run_probe
from .plan import KINDS, build_plan
from .safety import DEFAULT_MAX_PINNED_BYTES, PinnedCap, pinned_cap

__all__ = ["DEFAULT_MAX_PINNED_BYTES", "KINDS", "PinnedBuffer", "PinnedCap", "Registered",
           "break_even_transfers", "build_plan", "cuda_devices", "held_pinned_bytes",
           "measure_copies", "pinned_cap", "probe_available", "run_probe"]
