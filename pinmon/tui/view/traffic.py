"""How much of a GPU's link traffic the measured copies explain, in the GPU views' words: arithmetic
is ``model.traffic.explain_traffic``'s, here only its text.

Each direction reads, as fully as the room allows: with the names ("RX 43.0 GB/s: 32.0 GB/s pid 4242
(python), pinned; 6.0 GB/s pid 5151, pageable = 88%"), without them, the largest copy and how many
more, the share alone ("RX 88%"). A narrow GPU row (80 columns) has one line for both directions; a
wide one (the graphs, 120 columns and more) a line each; the one-line summary of the overview the
shares alone. The copies whose GPU cannot be known (a process on several GPUs, or one NVML does not
list, on a host with several) are said apart, never given to a GPU. The GPU detail has every
direction in full, those copies, and what a share leaves out. ``pinmon check`` and ``pinmon attach``
say the same (``outputs/text.py``).
"""
from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import NamedTuple

from ...model.traffic import CopyShare, LinkExplained, TrafficExplained
from ...units import fmt_pct, fmt_rate, printable

SHOWN_SHARES = 5
NAME_CHARS = 24
_MEMORY_WORDS = {"write_combined": "write-combined"}
_METHOD_WORDS = {"gpm": "link bytes, GPM", "counters": "link bytes", "sampled": "est., 20 ms sample"}
SEP = " · "
_FIGURE_SPACE = re.compile(r"(?<=\d) (?=[A-Za-z%])")
UNPLACED_WHY = "GPU not known (a process on several GPUs, or one NVML does not list)"
CAVEAT = ("link bytes include protocol overhead, ~7% on RX; TX also carries the read requests of H2D"
          " copies; copies are over their own window (attach, trace), the link over the interval")


class GpuCopies(NamedTuple):
    """One GPU's part of the explanation: its two directions (only those with copies on them) and the
    copies whose GPU cannot be known (every GPU's rows mention them)."""

    links: tuple[LinkExplained, ...]
    unplaced: tuple[CopyShare, ...]


def gpu_copies(explained: TrafficExplained | None, gpu_index: int) -> GpuCopies | None:
    """``gpu_index``'s part; None where no process's copies are measured (nothing to explain)."""
    if explained is None or not explained.measured:
        return None
    links = tuple(link for link in explained.links if link.gpu_index == gpu_index and link.shares)
    return GpuCopies(links, explained.unplaced)


def _memory(s: CopyShare) -> str:
    return _MEMORY_WORDS.get(s.memory, printable(s.memory, 16))


def share_text(s: CopyShare, names: bool = True, direction: bool = False) -> str:
    """"32.0 GB/s pid 4242 (python), pinned"; with ``direction`` "..., H2D pinned"."""
    name = f" ({printable(s.name, NAME_CHARS)})" if names and s.name else ""
    way = ("H2D " if s.direction == "h2d" else "D2H ") if direction else ""
    return f"{fmt_rate(s.bytes_per_s)} pid {s.pid}{name}, {way}{_memory(s)}"


def _shares_text(shares: Sequence[CopyShare], names: bool, direction: bool = False) -> str:
    shown = [share_text(s, names, direction) for s in shares[:SHOWN_SHARES]]
    rest = shares[SHOWN_SHARES:]
    if rest:
        shown.append(f"{fmt_rate(sum(s.bytes_per_s for s in rest))} {len(rest)} more")
    return "; ".join(shown)


def _pct(link: LinkExplained) -> str:
    return "n/a" if link.explained_share is None else fmt_pct(link.explained_share)


def link_text(link: LinkExplained, names: bool = True, method: bool = False) -> str:
    """"RX 43.0 GB/s: 32.0 GB/s pid 4242 (python), pinned; ... = 88%"; with ``method`` the link's
    figure says what it counts and the share is "explained"."""
    how = f" ({_METHOD_WORDS.get(link.method or '', 'no reading')})" if method else ""
    tail = "" if link.explained_share is None else f" = {_pct(link)}" + (" explained" if method else "")
    return f"{link.word} {fmt_rate(link.link_bytes_per_s)}{how}: {_shares_text(link.shares, names)}{tail}"


def link_forms(link: LinkExplained) -> list[str]:
    """One direction, from the fullest to the shortest: with the names; without; the largest copy
    and how many more ("RX 88%: 32.0 GB/s pid 4242, pinned +1"); the share alone ("RX 88%")."""
    more = len(link.shares) - 1
    top = f"{link.word} {_pct(link)}: {share_text(link.shares[0], names=False)}" + (f" +{more}" if more else "")
    return [link_text(link), link_text(link, names=False), top, f"{link.word} {_pct(link)}"]


def unplaced_forms(unplaced: Sequence[CopyShare]) -> list[str]:
    """The copies whose GPU cannot be known, from the fullest to the shortest."""
    total = f"{_unplaced_total(unplaced)} GPU not known"
    return [f"GPU not known: {_shares_text(unplaced, True, True)}", f"GPU not known: {_shares_text(unplaced, False, True)}",
            total, total]


def _unplaced_total(unplaced: Sequence[CopyShare]) -> str:
    return fmt_rate(sum(s.bytes_per_s for s in unplaced))


def _fits(text: str, width: int | None) -> bool:
    return not width or len(text) <= width


def _none_placed(gc: GpuCopies) -> list[str]:
    if not gc.unplaced:
        return ["copies: none measured on this GPU"]
    return [f"copies: none placed on this GPU; {UNPLACED_WHY}: {_shares_text(gc.unplaced, True, True)}",
            f"copies: none placed on this GPU; GPU not known: {_shares_text(gc.unplaced, False, True)}",
            f"copies: {_unplaced_total(gc.unplaced)} whose GPU is not known",
            "copies: GPU not known"]


def row_forms(gc: GpuCopies) -> list[str]:
    """The GPU row's one line, from the fullest to the shortest: both directions on it."""
    if not gc.links:
        return _none_placed(gc)
    unplaced = unplaced_forms(gc.unplaced) if gc.unplaced else None
    forms = []
    for level in range(3):
        parts = [link_forms(link)[level] for link in gc.links] + ([unplaced[level]] if unplaced else [])
        forms.append("copies " + SEP.join(parts))
    shares = "copies explain " + ", ".join(link_forms(link)[3] for link in gc.links)
    return forms + [shares + (SEP + unplaced[3] if unplaced else "")]


def row_line(gc: GpuCopies, width: int | None) -> str:
    """The fullest of ``row_forms`` that fits ``width`` cells (the shortest where none does)."""
    forms = row_forms(gc)
    return next((f for f in forms if _fits(f, width)), forms[-1])


def row_lines(gc: GpuCopies, width: int | None) -> list[str]:
    """A line per direction with copies on this GPU (a wide row), each as full as ``width`` allows;
    the copies whose GPU cannot be known end the last one, in short (the detail has them in full)."""
    if not gc.links:
        return [next((f for f in _none_placed(gc) if _fits(f, width)), _none_placed(gc)[-1])]
    out = []
    for i, link in enumerate(gc.links):
        lead = "copies " if not i else "       "
        forms = [lead + f for f in link_forms(link)]
        if gc.unplaced and i == len(gc.links) - 1:
            forms = [f + SEP + unplaced_forms(gc.unplaced)[2] for f in forms]
        out.append(next((f for f in forms if _fits(f, width)), forms[-1]))
    return out


def line_count(gc: GpuCopies | None, wide: bool) -> int:
    """The lines ``row_lines`` (``wide``) or ``row_line`` give a GPU row: its graphs leave room."""
    if gc is None:
        return 0
    return max(1, len(gc.links)) if wide else 1


def brief(gc: GpuCopies) -> str:
    """A few words for a GPU's one-line summary: "copies RX 88% TX 43%"; "copies: GPU unknown" where
    none is placed on it but some copies' GPU cannot be known (the GPUs tab says whose)."""
    if not gc.links:
        return "copies: GPU unknown" if gc.unplaced else ""
    return "copies " + " ".join(f"{link.word} {_pct(link)}" for link in gc.links)


def hanging(text: str, width: int | None, indent: int) -> list[str]:
    """``text`` wrapped to ``width`` cells, its lines after the first ``indent`` cells in (under the
    first line's text, right of a label of that width)."""
    if not width or width <= indent + 10 or len(text) <= width - indent:
        return [text]
    # A figure and its unit stay on one line ("6.0 GB/s", "32 copies"): joined while wrapping.
    glued = _FIGURE_SPACE.sub("\u00a0", text)
    return [line.replace("\u00a0", " ") for line in textwrap.wrap(glued, width - indent, break_on_hyphens=False)] or [text]


def detail_lines(gc: GpuCopies) -> list[str]:
    """The GPU detail's lines: each direction in full, the copies of no known GPU, the caveat last."""
    out = [link_text(link, method=True) for link in gc.links]
    if gc.unplaced:
        out.append(f"{UNPLACED_WHY}: {_shares_text(gc.unplaced, True, True)}")
    if not out:
        out.append("none measured on this GPU")
    return out
