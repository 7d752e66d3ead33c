"""What a demo recording shows, against what the bundled demo should show of pinmon today.

Usage: python3 bench/check_demo.py RECORDING.jsonl.gz OUT.json
Exit 0 when nothing is missing, 1 when something is (the list is printed and in OUT.json), 2 when
the recording cannot be read.

The advisor runs over the recording as the app runs it (``pinmon.advise.history.AdvisorHistory``
with the default thresholds, each snapshot in turn) and every rule that fires is noted with its first time. What the
demo must show (``missing`` lists what it lacks):

- the kernel's pinned count in every snapshot (the memory panel's kernel and unattributed lines);
- an unattributed amount that fires ``pinned-unattributed``;
- each rule of ``EXPECTED_RULES`` at least once, traced examples among them;
- a traced row with its copy table (``copies.stats``), so the process pop-up shows copies by kind;
- no notice telling root to run as root, and any "denied access" notice naming the process;
- nothing of the recording box's own (``demo_filter.py``'s defaults): no row, group or "denied access"
  notice of its agent, no command line naming a script of the checkout by its absolute path.
"""
from __future__ import annotations

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from demo_filter import BOX_CGROUP_PREFIXES, BOX_PROCESSES, group_path, notice_without, under

from pinmon.advise import advise
from pinmon.advise.history import AdvisorHistory
from pinmon.recording import RecordingError, RecordingReader
from provenance import portable_argv, portable_text, provenance

EXPECTED_RULES = ("pinned-small-allocs", "pageable-bulk-copies", "wc-cpu-readback", "pinned-rounding-waste",
                  "pinned-unattributed", "pinned-ram-share", "pinned-growth", "pinned-cgroup-share",
                  "cgroup-oom-kills")
# A command line's argument naming a script of the checkout (bench/, examples/) by its absolute path.
CHECKOUT_SCRIPT = re.compile(r"(?<!\S)/\S*/(?:bench|examples)/\S+\.py\b")


def survey(snapshots) -> dict:
    """What the snapshots show: counts, rules fired (first time and severities), traced rows, notices."""
    history = AdvisorHistory.for_thresholds()
    t0 = None
    rules: dict[str, dict] = {}
    kernel = 0
    unattributed_max = 0
    traced: dict[int, dict] = {}
    notices: dict[str, int] = {}
    box: dict[str, int] = {}
    count = 0
    for s in snapshots:
        count += 1
        t0 = s.time if t0 is None else t0
        history.append(s)
        h = s.host
        if h.kernel_pinned_bytes is not None:
            kernel += 1
            unattributed_max = max(unattributed_max, h.unattributed_pinned_bytes or 0)
        for g in s.cgroups:
            if under(group_path(g), BOX_CGROUP_PREFIXES):
                box[f"group {g.name}"] = box.get(f"group {g.name}", 0) + 1
        for p in s.processes:
            if p.identity.name in BOX_PROCESSES:
                box[f"pid {p.pid} ({p.identity.name})"] = box.get(f"pid {p.pid} ({p.identity.name})", 0) + 1
            for path in CHECKOUT_SCRIPT.findall(p.identity.cmdline or ""):
                box[f"checkout path {path}"] = box.get(f"checkout path {path}", 0) + 1
            if p.source == "traced":
                cmd = p.identity.cmdline
                row = traced.setdefault(p.pid, {"engine": p.instrument, "transfers": False,
                                                "command": cmd and cmd[-120:]})
                row["transfers"] |= bool(p.copies is not None and p.copies.stats)
        for n in s.notices:
            notices[n] = notices.get(n, 0) + 1
        for f in advise(history.snapshots()):
            seen = rules.setdefault(f.rule, {"first_s": round(s.time - t0, 1), "severities": []})
            if f.severity not in seen["severities"]:
                seen["severities"].append(f.severity)
    return {"snapshots": count, "kernel_count_snapshots": kernel, "unattributed_max_bytes": unattributed_max,
            "rules": rules, "traced": {str(k): v for k, v in sorted(traced.items())}, "notices": notices,
            "recording_box": dict(sorted(box.items()))}


def missing(found: dict) -> list[str]:
    """What the demo should show and does not, in words."""
    out = []
    if not found["snapshots"]:
        return ["no snapshot at all"]
    if found["kernel_count_snapshots"] < found["snapshots"]:
        out.append(f"the kernel's pinned count in {found['kernel_count_snapshots']} of {found['snapshots']}"
                   " snapshots")
    out += [f"rule {r} never fires" for r in EXPECTED_RULES if r not in found["rules"]]
    if "critical" not in found["rules"].get("pinned-ram-share", {}).get("severities", []):
        out.append("pinned-ram-share never critical")
    if not any(t["transfers"] for t in found["traced"].values()):
        out.append("no traced row with its copy table (transfers)")
    for notice in found["notices"]:
        if "run as root" in notice:
            out.append(f"a notice tells root to run as root: {notice!r}")
        if "denied access" in notice and "pid " not in notice:
            out.append(f"a denied-access notice names no process: {notice!r}")
        if notice_without(notice, BOX_PROCESSES) != notice:
            out.append(f"a notice names the recording box's agent: {notice!r}")
    out += [f"the recording box's own {what} in {n} snapshots" for what, n in found.get("recording_box", {}).items()]
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    path, out_path = argv
    reader = RecordingReader(path)

    def snapshots():
        while True:
            s = reader.next_snapshot()
            if s is None:
                return
            yield s

    try:
        found = survey(snapshots())
    except RecordingError as e:
        print(f"check_demo: {e}", file=sys.stderr)
        return 2
    finally:
        reader.close()
    lacking = missing(found)
    result = {"recording": os.path.basename(path), "argv": portable_argv(sys.argv), **found, "missing": lacking,
              "provenance": provenance()}
    with open(out_path, "w") as f:
        # The traced rows' command lines name the examples by where the checkout sat on that machine.
        f.write(portable_text(json.dumps(result, indent=1).replace(sys.executable, os.path.basename(sys.executable))))
    print(f"{found['snapshots']} snapshots; kernel count in {found['kernel_count_snapshots']};"
          f" unattributed up to {found['unattributed_max_bytes'] / 2**30:.1f} GiB")
    for rule, seen in sorted(found["rules"].items(), key=lambda kv: kv[1]["first_s"]):
        print(f"  {seen['first_s']:7.1f} s  {rule} ({', '.join(seen['severities'])})")
    for notice, n in found["notices"].items():
        print(f"  notice x{n}: {notice}")
    print("missing: " + ("; ".join(lacking) if lacking else "nothing"))
    return 1 if lacking else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
