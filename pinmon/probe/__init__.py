"""Live probe transfers: what pinned host memory buys over pageable memory on this box.

``run_probe`` and ``probe_available`` are the API; every CUDA call lives in ``engine`` and CuPy is
imported only when a probe runs, so importing this package never needs CuPy or a GPU.
"""
from .engine import (PinnedBuffer, Registered, break_even_transfers, cuda_devices, held_pinned_bytes,
                     measure_copies, probe_available, run_probe)
from .plan import KINDS, build_plan
from .safety import DEFAULT_MAX_PINNED_BYTES, PinnedCap, pinned_cap

__all__ = ["run_probe", "probe_available", "cuda_devices", "break_even_transfers", "measure_copies",
           "held_pinned_bytes", "PinnedBuffer", "Registered", "KINDS", "build_plan",
           "pinned_cap", "PinnedCap", "DEFAULT_MAX_PINNED_BYTES"]
