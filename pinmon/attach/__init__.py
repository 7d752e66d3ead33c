"""pinmon attach: the copies and pinned allocations of running processes, seen through kernel uprobes
on libcuda's exported functions, with no restart and no code in the target.

The engine: ``AttachSession`` (``session.py``) returns ``AttachResult`` records (``results.py``);
``Attacher`` (``background.py``) runs sessions for a monitor (one window, or every CUDA process
window after window) and keeps the latest ``AttachOutcome``. One module a job: ``symbols`` (exported functions, pyelftools), ``arch``
(argument registers), ``catalog`` (what each function's arguments mean), ``tracefs`` (the file
system and pinmon's private instance), ``targets`` (processes and their libcuda files), ``probes``
(definitions, removal, stale groups), ``rawpages`` / ``events`` and ``reader`` (the kernel's event
buffer), ``classify`` (a host pointer's kind), ``calls`` / ``aggregate`` / ``sizes`` (the tallies).
"""
from .background import Attacher, AttachPolicy
from .results import (
    AllocationStats,
    AttachOutcome,
    AttachResult,
    CopyStats,
    OtherCopies,
    ProbedFile,
    ProcessCopies,
)
from .session import AttachError, AttachSession, Budget, SignalReceived

__all__ = ["AllocationStats", "AttachError", "AttachOutcome", "AttachPolicy", "AttachResult", "AttachSession",
           "Attacher", "Budget", "CopyStats", "OtherCopies", "ProbedFile", "ProcessCopies", "SignalReceived"]
