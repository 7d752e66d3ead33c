"""Repair the bundled demo recording so that it shows no traced program after that program ended.

Usage: python bench/repair_demo.py [IN.jsonl.gz [OUT.jsonl.gz]]   (default: pinmon/data/demo.jsonl.gz in place)

The demo's traced examples exited while the recorder, their parent, had not reaped them: as zombies
they kept the rows of their last report to the end of the recording. When each one ended is read
from the recording itself: a traced pid has ended at the first snapshot from which, to the end of
the recording,

- its row never changes again: no report came after it (a live traced process writes one every
  0.5 s, and its rates move with each), and
- its pid is in no GPU's process list, where it had been before: its CUDA context is gone.

Its traced rows from that snapshot on are dropped, and their bytes leave the host's pinned totals
(``pinned_bytes_est``, ``write_combined_bytes_est``: the sums of the process rows). Lines of either
schema are read as they are written: a ``pinmon.snapshot/1`` row's bytes are its own fields, a ``/2``
row's are in its ``held`` record.

Each process row's single ``call_site`` becomes ``call_sites`` {category: site}. The category is
the one the recorder chose the site for, which the row's own figures tell: ``wc_readback`` when it
counted device-to-host copies into write-combined memory, else ``pageable_copy`` when it had a
pageable copy rate, else ``rounding_waste`` when it held more than it requested, else ``alloc``
(when nothing was registered; otherwise the category is not known and the site is left out). Each
mapped site's source line in ``examples/`` must do what its category says, or the script stops.

Deterministic: the same input gives the same bytes (gzip without a timestamp or a file name);
lines it does not change are kept as they were. Running it on its own output changes nothing.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEMO = os.path.join(REPO, "pinmon", "data", "demo.jsonl.gz")

# What a source line of each category calls (checked against examples/ for every mapped site).
CATEGORY_WORDS = {
    "alloc": ("hostAlloc", "alloc_pinned_memory", "empty_pinned", "zeros_pinned", "pin_memory"),
    "rounding_waste": ("hostAlloc", "alloc_pinned_memory", "pin_memory", "empty_pinned"),
    "pageable_copy": ("memcpy", "asarray", "asnumpy", ".get(", ".set(", "copy_", ".to(", ".cuda(", ".cpu("),
    "wc_readback": ("memcpy", "asnumpy", ".get(", "copy_", ".to(", ".cpu("),
}


def gpu_pids(snap: dict) -> set:
    return {p["pid"] for g in snap.get("gpus", ()) for p in g.get("processes", ())}


def traced_rows(snap: dict) -> dict:
    return {p["pid"]: p for p in snap.get("processes", ()) if p.get("source") == "traced"}


def ended_at(snaps: list[dict]) -> dict[int, int]:
    """pid -> index of the first snapshot from which its traced program had ended (see the docstring)."""
    out = {}
    pids = {pid for s in snaps for pid in traced_rows(s)}
    for pid in sorted(pids):
        last = len(snaps) - 1
        final = traced_rows(snaps[last]).get(pid)
        if final is None or pid in gpu_pids(snaps[last]):
            continue  # not shown at the end, or still a CUDA process there
        k = last
        while k > 0 and traced_rows(snaps[k - 1]).get(pid) == final and pid not in gpu_pids(snaps[k - 1]):
            k -= 1
        if any(pid in gpu_pids(s) for s in snaps[:k]):  # it had been a CUDA process before
            out[pid] = k
    return out


def category(row: dict) -> str | None:
    """The category the row's single call site was chosen for (see the docstring)."""
    if (row.get("wc_readbacks") or 0) > 0:
        return "wc_readback"
    if (row.get("pageable_copy_bytes_per_s") or 0) > 0:
        return "pageable_copy"
    pinned, requested = row.get("pinned_bytes"), row.get("requested_pinned_bytes")
    if pinned is not None and requested is not None and pinned > requested:
        return "rounding_waste"
    if not row.get("registered_bytes"):
        return "alloc"
    return None


def check_site(site: str, cat: str) -> None:
    """Stop unless the source line at ``site`` (file:line under the repository) does what ``cat`` says."""
    path, _, line = site.rpartition(":")
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        text = f.read().splitlines()[int(line) - 1]
    if not any(word in text for word in CATEGORY_WORDS[cat]):
        raise SystemExit(f"repair_demo: {site} ({text.strip()!r}) is not a {cat} call site")


def map_call_site(row: dict) -> bool:
    """Replace the row's ``call_site`` by ``call_sites``; True when the row changed."""
    if "call_site" not in row:
        return False
    site = row.pop("call_site")
    sites = {}
    if site and row.get("source") == "traced":
        cat = category(row)
        if cat is not None:
            check_site(site, cat)
            sites[cat] = site
    row["call_sites"] = sites
    return True


def held_part(row: dict, name: str):
    """A row's pinned or write-combined bytes: its own field (/1) or its held record's (/2)."""
    held = row.get("held")
    return held.get(name) if isinstance(held, dict) else row.get(name)


def repair(lines: list[str]) -> tuple[list[str], dict[int, int]]:
    """The repaired lines and, per dropped pid, the index of its first dropped row."""
    snaps = [json.loads(line) for line in lines]
    ended = ended_at(snaps)
    out = []
    for i, (line, snap) in enumerate(zip(lines, snaps)):
        changed = False
        keep = []
        for row in snap.get("processes", ()):
            if row.get("source") == "traced" and row["pid"] in ended and i >= ended[row["pid"]]:
                host = snap["host"]
                for total, part in (("pinned_bytes_est", "pinned_bytes"),
                                    ("write_combined_bytes_est", "write_combined_bytes")):
                    held = held_part(row, part)
                    if host.get(total) is not None and held:
                        host[total] -= held
                changed = True
                continue
            changed |= map_call_site(row)
            keep.append(row)
        if changed:
            snap["processes"] = keep
            line = json.dumps(snap, separators=(",", ":"))
        out.append(line)
    return out, ended


def read_lines(path: str) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def write_lines(path: str, lines: list[str]) -> None:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write("".join(line + "\n" for line in lines).encode("utf-8"))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf.getvalue())
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    src = argv[0] if argv else DEMO
    dst = argv[1] if len(argv) > 1 else src
    lines = read_lines(src)
    new, ended = repair(lines)
    t0 = json.loads(lines[0])["time"] if lines else 0.0
    for pid, k in sorted(ended.items()):
        t = json.loads(lines[k])["time"] - t0
        print(f"pid {pid}: ended by snapshot {k} (t={t:.0f} s): {len(lines) - k} traced rows dropped")
    if new == lines:
        print("nothing to repair")
        return 0
    write_lines(dst, new)
    print(f"wrote {dst}: {sum(a != b for a, b in zip(lines, new))} of {len(lines)} snapshots changed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
