"""Fake cgroup trees for the readers: a root with proc/self/mountinfo (a fixture) and cgroup files."""
from __future__ import annotations

import os

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "fixtures", "cgroups")
MOUNT_POINTS = {"v2": "sys/fs/cgroup", "v1_only": "sys/fs/cgroup/memory", "hybrid": "sys/fs/cgroup/memory"}


def mountinfo(name: str) -> str:
    with open(os.path.join(FIXTURES, "mountinfo", name), encoding="utf-8") as f:
        return f.read()


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def fake_root(tmp_path, layout: str, tree: dict[str, dict[str, str]]) -> str:
    """A root whose mountinfo is fixture ``layout`` and whose memory hierarchy holds ``tree``:
    {cgroup path: {file name: contents}}."""
    root = str(tmp_path)
    write(os.path.join(root, "proc", "self", "mountinfo"), mountinfo(layout))
    base = os.path.join(root, MOUNT_POINTS[layout])
    for cg, files in tree.items():
        d = os.path.join(base, cg.lstrip("/"))
        os.makedirs(d, exist_ok=True)
        for name, text in files.items():
            write(os.path.join(d, name), text)
    return root


def v2_group(max_="max", current="0", oom_kill=0) -> dict[str, str]:
    return {"memory.max": f"{max_}\n", "memory.current": f"{current}\n",
            "memory.events": f"low 0\nhigh 0\nmax 3\noom 1\noom_kill {oom_kill}\noom_group_kill 0\n"}


def v1_group(limit=9223372036854771712, usage=0, oom_kill=0) -> dict[str, str]:
    return {"memory.limit_in_bytes": f"{limit}\n", "memory.usage_in_bytes": f"{usage}\n",
            "memory.oom_control": f"oom_kill_disable 0\nunder_oom 0\noom_kill {oom_kill}\n"}
