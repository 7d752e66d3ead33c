"""``pinmon attach`` and ``--attach`` of check, record and export, end to end on this machine's kernel:
a child that loads the stand-in libcuda copies from pageable memory while pinmon attaches to it.

Bad arguments and an attach that attaches nothing exit 3 with one line (and the JSON envelope); the
report's rows are "attached", its findings are about them; check goes on with a notice where it cannot
attach; a recording keeps the attached rows for replay; the exporter serves their copy rates.
``check``, ``record`` and ``export`` attach "every CUDA process": here the attacher is pointed at the
test's child only (another process that maps a libcuda here is someone else's).

The real-kernel tests share tracefs, so they run in one xdist group, one after another."""
from __future__ import annotations

import json
import threading
import time

import pytest

from pinmon.attach import Attacher, AttachOutcome, AttachPolicy
from pinmon.cli import attaching
from pinmon.cli.main import main
from tests.attach.standin import CUDA, Child, why_not

WHY = why_not()
REAL = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.xdist_group("tracefs")]
MIB = 1 << 20



@pytest.fixture
def busy(lib):
    """A child copying 8 MiB from pageable memory 40 times a second (320 MB/s) for 4 s, from now."""
    c = Child(lib)
    t = threading.Thread(target=c.call, args=("cuMemcpyHtoD_v2", 0x1000, {"buf": "pageable"}, 8 * MIB),
                         kwargs={"n": 160, "rate": 40.0}, daemon=True)
    t.start()
    yield c
    t.join(30)
    c.close()


def only(pid):
    """``attaching.one_window`` for the test's child alone."""
    def window(pids, seconds):
        return Attacher([pid], AttachPolicy(window_s=seconds), is_cuda=CUDA).run_once()
    return window


# --- without a kernel -------------------------------------------------------------------------------

def exit_code(argv) -> int:
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


def test_bad_arguments_are_unknown_in_one_line(capsys):
    assert exit_code(["attach", "not-a-pid"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a process id" in err
    assert exit_code(["attach", "1", "--seconds", "0", "--json"]) == 3
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["schema"] == "pinmon.attach/1" and doc["status"] == "unknown" and "--seconds" in doc["reason"]
    assert main(["attach", *[str(p) for p in range(1, 300)]]) == 3
    assert "at most 256" in capsys.readouterr().err


def test_nothing_attached_is_unknown_in_one_line(capsys, monkeypatch):
    monkeypatch.setattr(attaching, "one_window", lambda pids, s: AttachOutcome(
        None, "attach needs root: uprobes are set through tracefs", 0.0, fatal=True))
    assert main(["attach", "--seconds", "0.1"]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err == "pinmon attach: attach needs root: uprobes are set through tracefs\n"
    assert main(["attach", "--seconds", "0.1", "--json"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"schema": "pinmon.attach/1", "status": "unknown",
                   "reason": "attach needs root: uprobes are set through tracefs"}


def test_check_attach_goes_on_where_nothing_can_be_attached(capsys, monkeypatch):
    none = "no process that maps libcuda to attach to"
    monkeypatch.setattr(attaching, "one_window", lambda pids, s: AttachOutcome(None, none, time.monotonic()))
    main(["check", "--attach", "--window", "0.1", "--json", "--oom-lookback", "0"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] in ("ok", "warning", "critical")
    assert "attach: no process that maps libcuda to attach to" in doc["snapshot"]["notices"]


def test_attach_does_not_combine_with_a_saved_snapshot_or_a_replay(capsys, tmp_path):
    assert main(["check", "--attach", "--snapshot", str(tmp_path / "x.json")]) == 3
    assert "--attach" in capsys.readouterr().err
    assert main(["export", "--attach", "--replay", str(tmp_path / "x.jsonl"), "--once"]) == 2
    assert "--attach" in capsys.readouterr().err


# --- on this machine's kernel -------------------------------------------------------------------------

@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
@REAL[0]
@REAL[1]
def test_attach_reports_the_attached_process_and_its_findings(busy, capsys, as_json):
    code = main(["attach", str(busy.pid), "--seconds", "0.8"] + (["--json"] if as_json else []))
    out = capsys.readouterr().out
    assert code == 1                                   # warning: pageable-bulk-copies
    if not as_json:
        assert f"pid {busy.pid}" in out and "source attached" in out
        assert "pageable, or registered before the attach" in out and "pageable-bulk-copies" in out
        return
    doc = json.loads(out)
    assert doc["schema"] == "pinmon.attach/1" and doc["status"] == "warning" and doc["detach_s"] is not None
    (row,) = doc["processes"]
    assert row["pid"] == busy.pid and row["source"] == "attached" and row["copies"]["instrument"] == "uprobes"
    (s,) = row["copies"]["stats"]
    assert (s["direction"], s["memory"], s["size_p50_bytes"]) == ("h2d", "pageable", 8 * MIB)
    assert [f["rule"] for f in doc["findings"]] == ["pageable-bulk-copies"]
    assert doc["findings"][0]["values"]["pid"] == busy.pid
    assert doc["traffic"]["unplaced"][0]["pid"] == busy.pid      # no GPU here to place it on


@REAL[0]
@REAL[1]
def test_check_attach_counts_over_its_window(busy, capsys, monkeypatch):
    monkeypatch.setattr(attaching, "one_window", only(busy.pid))
    main(["check", "--attach", "--window", "0.8", "--json", "--oom-lookback", "0"])
    doc = json.loads(capsys.readouterr().out)
    row = next(p for p in doc["snapshot"]["processes"] if p["pid"] == busy.pid)
    assert row["source"] == "attached" and row["copies"]["stats"][0]["bytes_per_s"] > 100e6
    assert any(f["rule"] == "pageable-bulk-copies" and f["values"]["pid"] == busy.pid for f in doc["findings"])


@REAL[0]
@REAL[1]
def test_record_attach_keeps_the_rows_for_replay(busy, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(attaching, "continuous", lambda interval: Attacher(
        [busy.pid], AttachPolicy(window_s=0.4), is_cuda=CUDA).start())
    out = tmp_path / "rec.jsonl"
    assert main(["record", "--attach", "--interval", "0.5", "--duration", "3", "-o", str(out)]) == 0
    rows = [p for line in out.read_text().splitlines() for p in json.loads(line)["processes"]
            if p["pid"] == busy.pid and p["source"] == "attached" and p["copies"]["stats"]]
    assert rows and all(p["copies"]["instrument"] == "uprobes" for p in rows)
    capsys.readouterr()
    main(["check", "--snapshot", str(out), "--json"])       # a recording's last line, judged again
    doc = json.loads(capsys.readouterr().out)
    assert any(f["rule"] == "pageable-bulk-copies" and f["values"]["pid"] == busy.pid for f in doc["findings"])


@REAL[0]
@REAL[1]
def test_export_attach_once_serves_the_copy_rates(busy, capsys, monkeypatch):
    monkeypatch.setattr(attaching, "one_window", only(busy.pid))
    assert main(["export", "--attach", "--once", "--interval", "0.8"]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("pinmon_process_copy_bytes_per_second{")
                and f'pid="{busy.pid}"' in x)
    assert 'source="attached"' in line and 'memory="pageable"' in line and float(line.rsplit(" ", 1)[1]) > 100e6
