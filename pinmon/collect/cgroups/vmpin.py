"""``VmPin`` of ``/proc/PID/status``: the pages a process pinned through the kernel's own
accounting (``mm->pinned_vm``), in bytes.

The kernel counts io_uring registered buffers and RDMA (ibverbs) memory regions there, and some
drivers' pins; CUDA's pinning (``cudaHostAlloc``, ``cudaHostRegister``) does not move it (see
docs/measurement.md). The figure is exact for what it counts and says nothing of the rest.
"""
from __future__ import annotations

MAX_KB_DIGITS = 16  # kB of a 64-bit address space


def parse_vmpin(status: str | bytes) -> int | None:
    """Bytes in the 'VmPin:\\t  307200 kB' line of /proc/PID/status text, or None where the line is
    missing (a kernel thread, a kernel before 2.6.35) or malformed."""
    if isinstance(status, bytes):
        status = status.decode("ascii", errors="replace")
    # The key starts a line (the kernel escapes a line break in a process name, so the Name line
    # cannot forge one).
    if status.startswith("VmPin:"):
        start = 0
    else:
        start = status.find("\nVmPin:")
        if start < 0:
            return None
        start += 1
    end = status.find("\n", start)
    parts = status[start + len("VmPin:"):end if end >= 0 else None].split()
    if (len(parts) != 2 or parts[1] != "kB" or not parts[0].isascii() or not parts[0].isdigit()
            or len(parts[0]) > MAX_KB_DIGITS):
        return None
    return int(parts[0]) * 1024
