"""What other users write (a process's name and user, a finding's subject) and what a recording holds
reaches the scrape only as printable, bounded label values, and no input grows the scrape without
bound: the labels are cut, the series of each family are bounded."""
import dataclasses

from prometheus_client.core import GaugeMetricFamily

from pinmon.advise import advise
from pinmon.export.families import base as families_mod
from pinmon.export.families import status as status_mod
from pinmon.units import GIB, MIB
from tests import factories as make

from .helpers import render, samples, value

ESCAPES = "\x1b]0;PWNED\x07\x1b[2J"
# The attack: a process whose argv[0] is 128 KiB long, then a terminal escape.
HOSTILE = "A" * (128 * 1024) + ESCAPES


def control_characters(text: str) -> set[str]:
    """Characters other than the line breaks of the format that a terminal could act on."""
    return {ch for line in text.split("\n") for ch in line if not ch.isprintable()}


def label_values(text: str) -> list[str]:
    return [v for (_, labels) in samples(text) for _, v in labels]


def hostile_process(pid=4242, name=HOSTILE, **kw):
    return make.process(pid, name, user="m\x1b[31mallory" + "u" * 5000, pinned_bytes=GIB, source="traced",
                        pageable_bytes_per_s=2e9, **kw)


def test_a_hostile_process_name_reaches_the_scrape_printable_and_cut():
    snap = make.full_snapshot(processes=make.full_processes(3) + (hostile_process(),))
    text = render([snap], advise([snap]))
    assert control_characters(text) == set()
    labels = {k: v for (n, labs), _ in samples(text).items() if n == "pinmon_process_pinned_bytes"
              for k, v in labs if dict(labs)["pid"] == "4242"}
    assert labels["name"] == "A" * 63 + "…" and labels["user"].startswith("m\\x1b[31mallory")
    subjects = [dict(labs)["subject"] for (n, labs), _ in samples(text).items() if n == "pinmon_finding"]
    assert any(s.startswith("pid 4242 (AAA") for s in subjects)  # the advisor's finding on it
    assert all(len(v) <= families_mod.LABEL_CHARS for v in label_values(text))


def test_escapes_in_a_short_name_are_written_out_not_sent():
    p = make.process(7, "A" + ESCAPES, pinned_bytes=GIB)
    text = render([make.full_snapshot(processes=(p,))])
    assert control_characters(text) == set()
    assert value(text, "pinmon_process_pinned_bytes", name="A\\x1b]0;PWNED\\x07\\x1b[2J") == GIB


def test_a_long_name_does_not_grow_the_scrape():
    def scrape_of(name):
        procs = tuple(hostile_process(100 + i, name + str(i)) for i in range(10))
        snap = make.full_snapshot(processes=procs)
        return render([snap], advise([snap]))

    short, long = scrape_of("python"), scrape_of(HOSTILE)
    assert len(long) < len(short) + 10 * 4 * families_mod.LABEL_CHARS  # a few cut labels per process, no more


def test_every_text_field_of_a_snapshot_and_a_finding_is_filtered():
    bad = "\x1b[2J\x07\r\n\t\x9b\u202e" + "z" * 500
    gpu = make.full_gpu(uuid="GPU-" + bad)
    gpu = dataclasses.replace(gpu, name=bad, pci_bus_id=bad,
                              pcie=dataclasses.replace(gpu.pcie, method=bad, counter_deltas={bad: 1}))
    snap = make.full_snapshot(gpus=[gpu], processes=(make.process(9, bad, user=bad, source=bad, pinned_bytes=GIB),),
                              hostname=bad, pinned_bytes_source=bad)
    text = render([snap], [make.finding(rule=bad, severity="warning", subject=bad)])
    assert control_characters(text) == set()
    values = label_values(text)
    assert all(len(v) <= families_mod.LABEL_CHARS for v in values)
    assert sum(v.startswith("\\x1b[2J") for v in values) >= 10  # each field is there, written out


def test_a_family_built_past_the_builders_is_filtered_too(monkeypatch):
    # A new section that makes its family by hand still goes through the collector's filter.
    def raw(view):
        family = GaugeMetricFamily("pinmon_new_thing", "a family added later", labels=["what"])
        family.add_metric([HOSTILE], 1)
        return [family]

    monkeypatch.setattr(status_mod, "families", raw)
    text = render([make.full_snapshot()])
    assert control_characters(text) == set()
    assert value(text, "pinmon_new_thing", what="A" * 63 + "…") == 1


def test_values_the_cut_makes_equal_are_one_series():
    same = "gpu0 " + "x" * 200
    findings = [make.finding("pcie-errors", "warning", same + "1"), make.finding("pcie-errors", "warning", same + "2")]
    text = render([make.full_snapshot()], findings)
    (_series,) = [k for k in samples(text) if k[0] == "pinmon_finding"]  # samples() refuses duplicates
    assert value(text, "pinmon_rule_findings", rule="pcie-errors", severity="warning") == 2


def test_finding_series_are_bounded_worst_first():
    many = [make.finding("mlock-not-pinned", "warning", f"pid {i} (job)") for i in range(1000)]
    worst = make.finding("pinned-ram-share", "critical", "host")
    text = render([make.full_snapshot()], many + [worst])
    found = [k for k in samples(text) if k[0] == "pinmon_finding"]
    assert len(found) == status_mod.MAX_FINDING_SERIES
    assert value(text, "pinmon_finding", rule="pinned-ram-share", severity="critical", subject="host") == 1
    assert value(text, "pinmon_rule_findings", rule="mlock-not-pinned", severity="warning") == 1000
    assert value(text, "pinmon_status") == 2


def test_counter_names_and_numa_nodes_from_a_recording_are_bounded():
    gpu = make.full_gpu()
    gpu = dataclasses.replace(gpu, pcie=dataclasses.replace(gpu.pcie, counter_deltas={f"c{i}": 1 for i in range(5000)}))
    nodes = {str(i): MIB for i in range(5000)}
    nodes.update({"x": MIB, "-1": MIB, "٣": MIB, "0001": MIB})
    text = render([make.full_snapshot(gpus=[gpu], kernel_pinned_bytes_by_node=nodes)])
    by_counter = [k for k in samples(text) if k[0] == "pinmon_gpu_pcie_counter_events_total"]
    by_node = {dict(labs)["node"] for n, labs in samples(text) if n == "pinmon_host_kernel_pinned_node_bytes"}
    assert len(by_counter) == 16
    assert by_node == {str(i) for i in range(1024)} | {"0001"}


def test_the_largest_scrape_any_input_can_make_is_bounded():
    # Every bound at once: 256 GPUs (a snapshot's most) with hostile identities and counters, the most
    # per-process series the command line allows, a thousand findings, every NUMA node.
    long = ESCAPES + "w" * 10_000
    base = make.full_gpu()
    gpus = [dataclasses.replace(base, index=i, uuid=f"{i}{long}", pci_bus_id=long, name=long,
                                pcie=dataclasses.replace(base.pcie, counter_deltas={f"{j}{long}": 1 for j in range(40)}))
            for i in range(256)]
    procs = tuple(make.process(100 + i, f"{i}{long}", user=long, source=long, pinned_bytes=GIB, write_combined_bytes=1)
                  for i in range(2000))
    findings = [make.finding("mlock-not-pinned", "warning", f"pid {i} {long}") for i in range(1000)]
    nodes = {str(i): MIB for i in range(2000)}
    text = render([make.full_snapshot(gpus=gpus, processes=procs, hostname=long, kernel_pinned_bytes_by_node=nodes)],
                  findings, top=1000)
    assert control_characters(text) == set()
    assert len(text.encode()) < 4 << 20  # about 2.8 MB; a box of 8 GPUs serves tens of KB
