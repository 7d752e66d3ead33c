"""What a finding is about, in the words every finding line starts with: "pid 853 python3 train.py",
"Slurm job 4711 step 0", "GPU 1", "host"; and a short form where room is scarce ("pid 853 python3",
"job 4711.0", "pod ns/pod/container").

No Textual here. A process is named from its row in the snapshot, a group from its ``Cgroup``
(the model's words, ``Cgroup.subject`` and ``Cgroup.short``, the ones ``pinmon check`` prints); anything else by the finding's own
subject, which is printable and bounded on the way out.
"""
from __future__ import annotations

from ...model import Finding, Snapshot
from ...units import printable
from .format import command_brief, name_text

SUBJECT_CHARS = 80


def finding_subject(f: Finding, snapshot: Snapshot | None, short: bool = False) -> str:
    pid = f.values.get("pid")
    if isinstance(pid, int) and not isinstance(pid, bool):
        row = next((p for p in snapshot.processes if p.pid == pid), None) if snapshot is not None else None
        if row is None:
            return printable(f.subject, SUBJECT_CHARS)
        return f"pid {pid} {name_text(row) if short else command_brief(row, SUBJECT_CHARS)}"
    key = f.values.get("cgroup")
    if isinstance(key, str) and snapshot is not None:
        g = next((g for g in snapshot.cgroups if g.key == key), None)
        if g is not None:
            return printable(g.short if short else g.subject, SUBJECT_CHARS)
    subject = printable(f.subject, SUBJECT_CHARS)
    if subject.startswith("gpu") and subject[3:].isdigit():
        return f"GPU {subject[3:]}"
    return subject
