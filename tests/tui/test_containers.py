"""The Containers tab (7), the group pop-up and the process table's GROUP and VMPIN columns.

The findings come from the real advisor, so what the tab marks CRIT or WARN is what ``pinmon check``
says; the figures are the snapshot's (``tests.factories.box_groups_snapshot``)."""
from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import DataTable

from pinmon.advise import advise
from pinmon.advise.thresholds import Thresholds
from pinmon.tui.app import PinmonApp
from pinmon.tui.screens.group import GroupScreen
from pinmon.tui.screens.help import help_items
from pinmon.tui.view.group_detail import (
    gone,
    group_rows,
    group_severity,
    limit_share,
    sort_groups,
    ungrouped,
)
from pinmon.tui.view.process_detail import detail_rows
from pinmon.tui.widgets.containers import ContainerPanel, table_layout
from pinmon.tui.widgets.processes import ProcessPanel
from pinmon.tui.widgets.processes import table_layout as process_layout
from pinmon.units import fmt_bytes
from tests import factories as make

from .fakes import GIB, GONE_KEY, MIB, FakeSource, GroupsSource, make_groups_snapshot
from .util import StepClock, screen_text

POD = "pod/0a1b2c3d-0000-4000-8000-00000000abcd/" + "cd" * 32
JOB = "slurm/4711/0"


def groups_and_findings(**kw):
    snap = make_groups_snapshot(**kw)
    return snap, advise([snap])


# --- the figures, no Textual ------------------------------------------------------------------------

def test_severity_is_the_advisors_finding_about_the_group():
    snap, found = groups_and_findings()
    by_key = {g.key: g for g in snap.cgroups}
    assert group_severity(by_key[POD], found) == "critical"
    assert group_severity(by_key[JOB], found) == "warning"
    assert group_severity(by_key[GONE_KEY], found) is None
    # Configured thresholds move the marks: the view decides nothing of its own.
    lenient = advise([snap], Thresholds(cgroup_pinned_warning_fraction=0.9, cgroup_pinned_critical_fraction=0.95))
    assert group_severity(by_key[POD], lenient) is None


def test_share_of_the_limit_counts_write_combined_and_vmpin():
    snap, _ = groups_and_findings()
    pod = next(g for g in snap.cgroups if g.key == POD)
    assert limit_share(pod) == pytest.approx((400 + 1) / 512)
    job = next(g for g in snap.cgroups if g.key == JOB)
    assert limit_share(job) == pytest.approx((20 * GIB + 128 * MIB + GIB) / (64 * GIB))
    assert limit_share(make.moved(job, limit_bytes=None)) is None


def test_worst_first_and_gone_last():
    snap, found = groups_and_findings()
    order = [g.key for g in sort_groups(reversed(snap.cgroups), found)]
    assert order == [POD, JOB, GONE_KEY]
    assert gone(snap.cgroups[2]) and not gone(snap.cgroups[0])


def test_oom_kills_count_from_pinmon_start():
    snap, _ = groups_and_findings(oom_kills=2)
    pod = next(g for g in snap.cgroups if g.key == POD)
    assert pod.limit.oom_kills_since_start == 2
    assert make.moved(pod, oom_kills_at_start=None).limit.oom_kills_since_start is None
    assert make.moved(pod, oom_kills=1, oom_kills_at_start=5).limit.oom_kills_since_start == 0


def test_group_rows_name_the_pod_its_limit_share_kills_and_processes():
    snap, found = groups_and_findings(oom_kills=1)
    found = advise([make_groups_snapshot(0), snap])  # the OOM count rose: cgroup-oom-kills fires
    pod = next(g for g in snap.cgroups if g.key == POD)
    rows = {r.label: r for r in group_rows(pod, snap, found) if r.label}
    assert rows["group"].text == "pod ml/trainer-7f9c/worker"  # the kind said once, then the name
    assert rows["namespace"].text == "ml" and rows["pod"].text == "trainer-7f9c" and rows["container"].text == "worker"
    assert rows["pinned"].text == f"{fmt_bytes(401 * GIB)} = 78% of the limit"
    assert rows["pinned"].style == "warning"
    assert "set by /kubepods.slice/kubepods-pod0a1b.slice" in rows["limit"].text
    assert rows["OOM kills"].text == "1 in all, 1 since pinmon started" and rows["OOM kills"].style == "warning"
    texts = [r.text for r in group_rows(pod, snap, found)]
    assert any(t.strip().startswith("4242") for t in texts) and any(t.strip().startswith("5151") for t in texts)
    assert "cgroup-oom-kills" in rows["findings"].text and "pinned-cgroup-share" in rows["findings"].text


def test_group_rows_for_a_job_a_unit_and_a_group_without_a_limit():
    snap, found = groups_and_findings()
    job = next(g for g in snap.cgroups if g.key == JOB)
    rows = {r.label: r for r in group_rows(job, snap, found) if r.label}
    assert rows["group"].text == "Slurm job 4711 step 0"
    assert rows["job"].text == "4711, step 0"
    assert "VmPin 128.0 MiB" in " ".join(r.text for r in group_rows(job, snap, found))
    unit = make.moved(job, kind="systemd", unit="train.service", limit_bytes=None, key="systemd/x")
    rows = {r.label: r for r in group_rows(unit, snap, ()) if r.label}
    assert rows["unit"].text == "train.service"
    assert rows["limit"].text.startswith("none") and rows["limit"].style == "dim"
    assert rows["processes"].text.startswith("none in this snapshot")


def test_hostile_names_reach_no_row_as_control_characters():
    snap, found = groups_and_findings()
    evil = next(g for g in snap.cgroups if g.key == GONE_KEY)
    for r in group_rows(evil, snap, found):
        assert not any(ord(c) < 32 or ord(c) == 127 for c in r.text), r


def test_ungrouped_processes():
    snap, _ = groups_and_findings()
    assert [p.pid for p in ungrouped(snap)] == [7070]


def test_layout_fits_80_columns_and_adds_figures_when_wide():
    narrow, name = table_layout(78)
    assert name >= 12 and sum(w or name for *_, w in narrow) == 78
    assert "IN USE" not in [c[0] for c in narrow]
    wide, _ = table_layout(156)
    assert {"IN USE", "VMPIN", "KIND"} <= {c[0] for c in wide}


def test_process_table_gains_group_and_vmpin_where_there_is_room():
    cols, command = process_layout(78, groups=True, vm_pinned=True)
    assert "GROUP" not in [c[1] for c in cols] and "VMPIN" not in [c[1] for c in cols]
    cols, command = process_layout(156, groups=True, vm_pinned=True)
    headers = [c[1] for c in cols]
    assert headers[-3:] == ["VMPIN", "GROUP", "COMMAND"] and command >= 30
    assert "GROUP" not in [c[1] for c in process_layout(156)[0]]


def test_process_detail_names_its_group_and_vmpin():
    snap, found = groups_and_findings()
    p = next(p for p in snap.processes if p.pid == 6060)
    rows = {r.label: r for r in detail_rows(p, snap, found) if r.label}
    assert rows["group"].text == "job 4711.0: pinned 21.1 GiB = 33% of its 64.0 GiB limit (7: Containers)"
    assert rows["group"].style == "warning"
    assert rows["VmPin"].text.startswith("128.0 MiB")


def test_help_explains_the_tab_and_its_columns():
    text = " ".join(str(i) if not isinstance(i, tuple) else f"{i[0].plain} {i[1]}" for i in help_items())
    for term in ("Containers", "PINNED/LIMIT", "VMPIN", "OOM", "gone"):
        assert term in text


# --- the app ----------------------------------------------------------------------------------------

def app_of(source=None, thresholds=None):
    kw = {"thresholds": thresholds} if thresholds else {}
    return PinmonApp(source or GroupsSource(), (lambda h: advise(h, thresholds or Thresholds())),
                     start_polling=False, probe_every_s=None, clock=StepClock(), **kw)


def rows_of(table: DataTable) -> list[list[str]]:
    return [[cell.plain.strip() for cell in table.get_row_at(i)] for i in range(table.row_count)]


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_key_7_shows_every_group_worst_first(size):
    app = app_of()
    async with app.run_test(size=size) as pilot:
        for _ in range(3):
            app.apply_snapshot(app.source.snapshot())
        await pilot.press("7")
        await pilot.pause()
        table = app.main_widget(ContainerPanel).table()
        assert app.focused is table
        rows = rows_of(table)
        headers = [str(c.label).strip() for c in table.columns.values()]
        assert [r[0] for r in rows] == ["CRIT", "WARN", ""]
        name = headers.index("NAME")
        assert rows[0][name].startswith("ml/trainer-7f9c") and rows[1][name] == "job 4711.0"
        assert rows[2][headers.index("PROCS")] == "gone"
        assert rows[0][headers.index("SHARE")] == "78%" and rows[0][headers.index("LIMIT")] == "512.0 GiB"
        text = screen_text(app)
        assert "\x1b[2J" not in text and "docker evil" in text  # the hostile name, shown printable
        assert "2 processes" not in text  # counts are in PROCS, not prose
        assert "3 groups, 1 critical, 1 warning; 1 process in no group, 256.0 MiB" in text
        if size[0] >= 160:
            assert "IN USE" in headers and rows[1][headers.index("VMPIN")] == "128.0 MiB"


async def test_oom_kills_appear_and_the_popup_stays_live():
    app = app_of(GroupsSource(kill_at=3))
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(2):
            app.apply_snapshot(app.source.snapshot())
        await pilot.press("7", "enter")
        await pilot.pause()
        assert isinstance(app.screen, GroupScreen) and app.screen.key == POD
        assert "0 since pinmon started" in screen_text(app)
        for _ in range(2):
            app.apply_snapshot(app.source.snapshot())
        await pilot.pause()
        assert "1 since pinmon started" in screen_text(app)
        await pilot.press("end")  # at 80x24 the rows run past the box: it scrolls to its last rows
        await pilot.pause()
        assert "cgroup-oom-kills" in screen_text(app)
        # The group leaves the snapshots: its last figures stay, marked gone.
        snap = app.source.snapshot()
        app.apply_snapshot(dataclasses.replace(snap, cgroups=snap.cgroups[1:],
                                               processes=tuple(p for p in snap.processes if p.identity.cgroup != POD)))
        await pilot.pause()
        assert "group gone at" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, GroupScreen)
        assert rows_of(app.main_widget(ContainerPanel).table())[0][0] == "WARN"


async def test_no_groups_says_so():
    app = app_of(FakeSource())
    async with app.run_test(size=(80, 24)) as pilot:
        app.apply_snapshot(app.source.snapshot())
        await pilot.press("7")
        await pilot.pause()
        assert app.main_widget(ContainerPanel).table().row_count == 0
        assert "no groups: no process holding pinned memory runs in a container" in screen_text(app)


async def test_process_table_group_column_and_filter_by_group():
    app = app_of()
    async with app.run_test(size=(160, 48)) as pilot:
        app.apply_snapshot(app.source.snapshot())
        await pilot.press("4")
        await pilot.pause()
        panel = app.main_widget(ProcessPanel)
        table = panel.table()
        headers = [str(c.label).strip() for c in table.columns.values()]
        assert "GROUP" in headers and "VMPIN" in headers
        groups = {r[0]: r[headers.index("GROUP")] for r in rows_of(table)}
        assert groups == {"4242": "ml/trainer-7f9c/wo…", "5151": "ml/trainer-7f9c/wo…", "6060": "job 4711.0",
                          "7070": "-"}
        await pilot.press("slash", *"4711", "enter")
        await pilot.pause()
        assert [r[0] for r in rows_of(table)] == ["6060"]
    app = app_of()
    async with app.run_test(size=(80, 24)) as pilot:
        app.apply_snapshot(app.source.snapshot())
        await pilot.press("4")
        await pilot.pause()
        headers = [str(c.label).strip() for c in app.main_widget(ProcessPanel).table().columns.values()]
        assert "GROUP" not in headers  # COMMAND keeps its width at 80 columns


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_a_vmpin_only_process_shows_what_it_holds_and_sorts_by_it(size):
    """An io_uring user pinning 640 MiB (VmPin only) among rows of 80 and 0 bytes: PINNED shows its 640 MiB,
    not n/a, and it is the first row, at 80 and at 160 columns; the overview's top processes too."""
    snap = make_groups_snapshot(0)
    rows = (make.process(11, "uring", vm_pinned_bytes=640 * MIB), make.process(12, "zero", pinned_bytes=0),
            make.process(13, "small", pinned_bytes=80 * MIB))
    snap = dataclasses.replace(snap, processes=rows, cgroups=())
    app = app_of()
    async with app.run_test(size=size) as pilot:
        app.apply_snapshot(snap)
        await pilot.press("4")
        await pilot.pause()
        table = app.main_widget(ProcessPanel).table()
        headers = [str(c.label).strip() for c in table.columns.values()]
        got = [(r[0], r[headers.index("PINNED ▼")]) for r in rows_of(table)]
        assert got == [("11", "640.0 MiB"), ("13", "80.0 MiB"), ("12", "0 B")]
        await pilot.press("1")
        await pilot.pause()
        lines = [ln for ln in screen_text(app).splitlines() if "uring" in ln or "small" in ln]
        assert "640.0 MiB" in lines[0] and "uring" in lines[0] and "80.0 MiB" in lines[1]


# --- end to end: a real cgroup, a process pinning in it, the live collector, the tab ---------------

@pytest.mark.xdist_group("host-pinned-pages")
async def test_a_real_container_pinning_most_of_its_limit_is_crit_in_the_tab():
    """io_uring pins 64 MiB in a 96 MiB memory cgroup laid out as a Docker container's scope (root;
    skipped, saying why, where cgroups or io_uring are not there); the live collector's snapshot, the
    real advisor and the app: the tab's row is the container at 67% of its limit, CRIT."""
    import hashlib

    from tests.collect.cgroups.realcg import pinned_in_docker_scope

    cid = hashlib.sha256(b"pinmon tab test").hexdigest()
    snap, _pid = pinned_in_docker_scope(cid, 64 * MIB, 96 * MIB)
    app = app_of(FakeSource())
    async with app.run_test(size=(160, 48)) as pilot:
        app.apply_snapshot(snap)
        await pilot.press("7")
        await pilot.pause()
        table = app.main_widget(ContainerPanel).table()
        headers = [str(c.label).strip() for c in table.columns.values()]
        row = next(r for r in rows_of(table) if r[headers.index("NAME")] == f"docker {cid[:12]}")
        assert row[0] == "CRIT" and row[headers.index("SHARE")] == "67%"
        assert row[headers.index("PINNED")] == "64.0 MiB" and row[headers.index("LIMIT")] == "96.0 MiB"
        assert row[headers.index("VMPIN")] == "64.0 MiB" and row[headers.index("PROCS")] == "1"


async def test_the_status_line_counts_the_kernel_logs_oom_kills():
    from tests import factories as make

    app = app_of(FakeSource())
    async with app.run_test(size=(160, 48)) as pilot:
        snap = app.source.snapshot()
        app.apply_snapshot(dataclasses.replace(snap, oom_kills=(make.oom_kill(time=snap.time - 60), make.oom_kill(
            time=snap.time - 30, pid=6, name="job \x1b[2J4711.0"))))
        await pilot.press("7")
        await pilot.pause()
        text = screen_text(app)
        assert "2 OOM kills in the kernel's log, latest job \\x1b[2J4711.0 at" in text  # printable
        assert "no groups" in text  # no live group: the kills still show
