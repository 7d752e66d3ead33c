"""A ``pinmon.snapshot/1`` recording (the demo as it was recorded, ``fixtures/recordings/demo-v1.jsonl.gz``)
replays through the reader, the advisor and ``check --json`` as it did when /1 was the schema: every
snapshot reads, the advisor finds the same rules with the same severities on the same subjects
(``demo-v1.findings.json``, recorded by the /1 reader), and ``check`` says the same."""
import json
from collections import deque
from pathlib import Path

from pinmon.advise import advise
from pinmon.cli import main
from pinmon.model import SNAPSHOT_SCHEMA
from pinmon.recording import RecordingReader

HERE = Path(__file__).parent / "fixtures" / "recordings"
RECORDING = HERE / "demo-v1.jsonl.gz"
EXPECTED = json.loads((HERE / "demo-v1.findings.json").read_text())


def replayed():
    reader = RecordingReader(str(RECORDING))
    try:
        while (snap := reader.next_snapshot()) is not None:
            yield snap
    finally:
        reader.close()


def test_every_v1_snapshot_reads_as_v2_and_the_advisor_finds_what_it_found():
    history: deque = deque(maxlen=600)
    found = []
    for snap in replayed():
        assert snap.schema == SNAPSHOT_SCHEMA
        history.append(snap)
        found.append(sorted([f.rule, f.severity, f.subject] for f in advise(list(history))))
    assert len(found) == len(EXPECTED["findings"]) == 214
    assert found == [sorted(map(list, snap)) for snap in EXPECTED["findings"]]
    # Every rule the demo is there to show fires, each at the severities it fired at.
    rules = {(r, s) for snap in found for r, s, _ in snap}
    assert {"pinned-cgroup-share", "cgroup-oom-kills", "wc-cpu-readback", "pageable-bulk-copies"} <= {r for r, _ in rules}


def test_check_json_of_a_v1_recording_reports_as_it_did(capsys):
    rc = main(["check", "--json", "--snapshot", str(RECORDING)])
    out = json.loads(capsys.readouterr().out)
    want = EXPECTED["check_last"]
    assert out["schema"] == "pinmon.check/1" and out["snapshot"]["schema"] == SNAPSHOT_SCHEMA
    assert out["status"] == want["status"] and rc == {"ok": 0, "warning": 1, "critical": 2}[want["status"]]
    assert [[f["rule"], f["severity"], f["subject"]] for f in out["findings"]] == want["findings"]


def test_a_v1_traced_row_keeps_its_copies_and_allocations():
    rows = [p for snap in replayed() for p in snap.processes if p.source == "traced"]
    assert rows and all(p.copies is not None and p.instrument in ("cupti", "hooks") for p in rows)
    cupti = [p for p in rows if p.instrument == "cupti" and p.copies.bulk]
    assert cupti and all(p.copies.gpu_pci_bus_id for p in cupti)
    assert any(p.copies.pageable_bytes_per_s for p in rows)
    assert any(p.allocations is not None and p.allocations.median_bytes for p in rows)
