"""What the GPU views say of the link traffic the measured copies explain (``view/traffic.py``): the
fullest form that fits the room, a line per direction on a wide row, the copies of no known GPU said
apart and never given to a GPU, and nothing where no copies are measured."""
from __future__ import annotations

import pytest

from pinmon.model.traffic import explain_traffic
from pinmon.tui.view.traffic import brief, detail_lines, gpu_copies, hanging, line_count, row_line, row_lines

from .attach_fakes import attached_snapshot, loader, trainer
from .fakes import make_snapshot

FULL0 = ("copies RX 43.0 GB/s: 32.0 GB/s pid 4242 (python), pinned; 6.0 GB/s pid 5151 (dataloader), pageable = 88%"
         " · TX 2.3 GB/s: 1.0 GB/s pid 4242 (python), pinned; 50.0 MB/s pid 5151 (dataloader), write-combined = 46%"
         " · GPU not known: 2.0 GB/s pid 9090 (server), H2D pinned")


def copies_of(gpu: int, **kw):
    """GPU ``gpu``'s part on the box's 9th snapshot (GPU 0 at RX 43.0 GB/s, TX 2.3 GB/s)."""
    return gpu_copies(explain_traffic(attached_snapshot(9, **kw)), gpu)


def test_a_row_takes_the_fullest_form_that_fits():
    gc = copies_of(0)
    assert row_line(gc, None) == FULL0
    assert row_line(gc, 220) == FULL0.replace(" (python)", "").replace(" (dataloader)", "").replace(" (server)", "")
    assert row_line(gc, 120) == ("copies RX 88%: 32.0 GB/s pid 4242, pinned +1 · TX 46%: 1.0 GB/s pid 4242, pinned +1"
                                 " · 2.0 GB/s GPU not known")
    assert row_line(gc, 78) == "copies explain RX 88%, TX 46% · 2.0 GB/s GPU not known"
    assert line_count(gc, wide=False) == 1


def test_a_wide_row_has_a_line_per_direction():
    gc = copies_of(0)
    lines = row_lines(gc, 156)
    assert lines == ["copies RX 43.0 GB/s: 32.0 GB/s pid 4242 (python), pinned; 6.0 GB/s pid 5151 (dataloader),"
                     " pageable = 88%",
                     "       TX 2.3 GB/s: 1.0 GB/s pid 4242 (python), pinned; 50.0 MB/s pid 5151 (dataloader),"
                     " write-combined = 46% · 2.0 GB/s GPU not known"]
    assert line_count(gc, wide=True) == len(lines) == 2
    assert all(len(line) <= 92 for line in row_lines(gc, 92))


def test_copies_whose_gpu_cannot_be_known_are_said_apart_never_given_to_a_gpu():
    gc = copies_of(1)  # GPU 1's own process (6060) is traced without copies; 9090 is on no GPU NVML lists
    assert gc.links == () and [s.pid for s in gc.unplaced] == [9090]
    assert row_line(gc, None) == ("copies: none placed on this GPU; GPU not known (a process on several GPUs,"
                                  " or one NVML does not list): 2.0 GB/s pid 9090 (server), H2D pinned")
    assert row_line(gc, 40) == "copies: 2.0 GB/s whose GPU is not known"
    assert brief(gc) == "copies: GPU unknown"
    assert detail_lines(gc)[0].startswith("GPU not known")


def test_the_summary_has_the_shares_and_the_detail_everything():
    gc = copies_of(0, processes=[trainer(), loader()])
    assert brief(gc) == "copies RX 88% TX 46%"
    assert detail_lines(gc) == [
        "RX 43.0 GB/s (link bytes): 32.0 GB/s pid 4242 (python), pinned; 6.0 GB/s pid 5151 (dataloader),"
        " pageable = 88% explained",
        "TX 2.3 GB/s (link bytes): 1.0 GB/s pid 4242 (python), pinned; 50.0 MB/s pid 5151 (dataloader),"
        " write-combined = 46% explained"]


def test_nothing_is_said_where_no_copies_are_measured():
    assert gpu_copies(explain_traffic(make_snapshot(0)), 0) is None
    assert gpu_copies(None, 0) is None
    assert line_count(None, wide=True) == 0


@pytest.mark.hardening
def test_a_hostile_name_is_printable_text():
    """A process names itself: a new row's name is the attach's (its comm), shown as text."""
    from .attach_fakes import _process, _stat

    evil = _process(9191, [_stat("h2d", "pinned", 1e9, 1 << 20)], name="x\x1b[2J\n\x07y")
    line = row_line(copies_of(0, processes=[evil]), None)
    assert "\x1b" not in line and "\n" not in line and "\x07" not in line and "pid 9191 (x\\x1b[2J" in line


def test_hanging_wraps_under_the_text_and_keeps_figures_whole():
    text = "RX 43.0 GB/s (link bytes): 32.0 GB/s pid 4242 (python), pinned; 6.0 GB/s pid 5151 (dataloader)"
    lines = hanging(text, 60, 10)
    assert all(len(line) <= 50 for line in lines) and " ".join(lines) == text
    assert not any(line.startswith("GB/s") for line in lines)
    assert hanging("short", 60, 10) == ["short"] and hanging(text, None, 10) == [text]
