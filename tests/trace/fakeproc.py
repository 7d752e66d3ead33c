"""A stand-in /proc for the report reader: a process's stat (state, start ticks), status (real uid,
resident set) and the host's meminfo, written where a test says."""
from __future__ import annotations

import os


def fake_proc(root, pid: int, uid: int, ticks: int = 1000, state: str = "S", rss_kb: int = 1 << 20,
              tgid: int | None = None) -> None:
    """``tgid``: the thread group (another pid makes ``pid`` a thread of it)."""
    d = os.path.join(str(root), str(pid))
    os.makedirs(d, exist_ok=True)
    # Field 3 is the state; field 22 (index 19 after the command name) the start time in ticks.
    with open(os.path.join(d, "stat"), "w") as f:
        f.write(f"{pid} (python3 (x)) {state} " + " ".join(["1"] * 18) + f" {ticks} 0 0\n")
    with open(os.path.join(d, "status"), "w") as f:
        f.write(f"Name:\tpython3\nState:\t{state}\nTgid:\t{pid if tgid is None else tgid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
                + (f"VmRSS:\t{rss_kb} kB\n" if rss_kb is not None else ""))


def fake_meminfo(root, total_kb: int) -> None:
    with open(os.path.join(str(root), "meminfo"), "w") as f:
        f.write(f"MemTotal:       {total_kb} kB\nMemFree:        {total_kb // 2} kB\n")
