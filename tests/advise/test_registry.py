"""The registry: every rule declared once, with the thresholds it reads and docs that print their
defaults; ``RULES`` and ``RULE_DOCS`` derived from it."""
import ast
import importlib
import inspect
import os
import pkgutil
import re
import textwrap

import pytest

import pinmon.advise
from pinmon.advise import RULE_DOCS, RULES, Thresholds
from pinmon.advise.registry import REGISTRY, metrics_table, readme_table
from pinmon.advise.rule import SEVERITIES, Found, Rule, rule
from pinmon.advise.thresholds import threshold_fields
from pinmon.model import SEVERITY_RANK
from pinmon.units import fmt_bytes, fmt_pct, fmt_rate, fmt_seconds
from tests import factories as make


def _declared_rules() -> list[Rule]:
    """Every ``Rule`` a module of pinmon/advise/ declares."""
    out = []
    for info in pkgutil.iter_modules(pinmon.advise.__path__):
        module = importlib.import_module(f"pinmon.advise.{info.name}")
        out += [v for v in vars(module).values() if isinstance(v, Rule) and v not in out]
    return out


def test_every_declared_rule_is_registered_once():
    declared = _declared_rules()
    assert sorted(r.id for r in declared) == sorted(r.id for r in REGISTRY)
    assert len({r.id for r in REGISTRY}) == len(REGISTRY)


def test_rules_and_docs_come_from_the_registry():
    assert list(RULES) == list(RULE_DOCS) == [r.id for r in REGISTRY]
    assert all(RULES[r.id] is r and RULE_DOCS[r.id] == r.doc for r in REGISTRY)
    assert all(doc and "\n" not in doc and "{" not in doc for doc in RULE_DOCS.values())


def test_docs_print_the_default_thresholds():
    assert RULE_DOCS["pinned-ram-share"] == ("pinned host memory vs effective RAM: warning at 30%,"
                                             " critical above 50%")
    assert "over 1 GiB and by over 50% in 10 min" in RULE_DOCS["pinned-growth"]
    assert "under 1 GB/s+ of traffic" in RULE_DOCS["pcie-link-degraded"]
    assert RULE_DOCS["pageable-bulk-copies"].startswith("100 MB/s or more")
    assert RULE_DOCS["pinned-small-allocs"].startswith("10+ pinned allocations/s with a median under 1 MiB")
    assert "over 1 s+ of copying" in RULE_DOCS["slow-pinned-copies"]


def _checked_names(check) -> set[str]:
    """The ``t.<field>`` names a check reads, from its source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(check)))
    return {n.attr for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "t"}


@pytest.mark.parametrize("r", REGISTRY, ids=lambda r: r.id)
def test_a_rule_declares_exactly_the_thresholds_it_reads(r):
    assert _checked_names(r.check) == set(r.thresholds)


def test_every_threshold_belongs_to_a_rule():
    used = {name for r in REGISTRY for name in r.thresholds}
    assert used == set(threshold_fields())


@pytest.mark.parametrize("d", sorted({d for r in REGISTRY for d in r.defaults}, key=lambda d: d.name),
                         ids=lambda d: d.name)
def test_a_doc_shows_its_default_without_rounding_it(d):
    precise = {"fraction": lambda v: fmt_pct(v, 6), "bytes": lambda v: fmt_bytes(v, 6),
               "bytes_per_s": lambda v: fmt_rate(v, 6), "seconds": lambda v: fmt_seconds(v, 6),
               "per_s": lambda v: f"{v:.6f}"}[d.kind](d.default)
    number = lambda text: float(text.split()[0].rstrip("%"))
    assert number(d.shown) == number(precise) and d.shown.split()[1:] == precise.split()[1:]


# --- a Rule and its scopes -----------------------------------------------------------------------

def test_a_rule_stamps_its_id_and_the_subject():
    @rule("toy", "toy doc", over="gpus")
    def toy(g, snap, t):
        yield Found("warning", f"gpu {g.index}", "advice", figure=1, unknown=None)

    lost = make.gpu(index=1, lost=True)
    [f] = toy([make.snapshot(gpus=[make.gpu(index=0), lost])], Thresholds())
    assert (f.rule, f.subject, f.message, f.values) == ("toy", "gpu0", "gpu 0", {"figure": 1})  # lost GPU skipped
    assert toy([], Thresholds()) == []


def test_process_and_snapshot_scopes_name_their_subjects():
    @rule("toy-proc", "doc", over="processes", severities=("info",))
    def per_process(p, snap, t):
        yield Found("info", "m", "a")

    @rule("toy-host", "doc", severities=("info",))
    def per_snapshot(snap, t):
        yield Found("info", "m", "a")
        yield Found("info", "m", "a", subject="gpu3")

    snap = make.snapshot(processes=[make.process(pid=7, name="python"), make.process(pid=8, name=None)])
    assert [f.subject for f in per_process([snap], Thresholds())] == ["pid 7 (python)", "pid 8"]
    assert [f.subject for f in per_snapshot([snap], Thresholds())] == ["host", "gpu3"]


@pytest.mark.parametrize("kwargs, needle", [
    (dict(thresholds=("no_such_field",)), "not a field of Thresholds"),
    (dict(doc="over {growth_window_s}"), "not among its thresholds"),
    (dict(severities=("fatal",)), "severities"),
    (dict(severities=()), "severities"),
    (dict(over="gpu"), "over="),
])
def test_a_bad_declaration_fails_at_import(kwargs, needle):
    args = dict(doc="doc")
    args.update(kwargs)
    doc = args.pop("doc")
    with pytest.raises(ValueError, match=needle):
        rule("bad", doc, **args)(lambda snap, t: ())


def test_rule_severities_are_those_the_model_grades():
    assert set(SEVERITIES) == set(SEVERITY_RANK) - {"ok"}


def test_an_undeclared_severity_fails_these_tests():
    @rule("toy-info", "doc", severities=("info",))
    def toy(snap, t):
        yield Found("warning", "m", "a")

    with pytest.raises(AssertionError, match="declares"):
        toy([make.snapshot()], Thresholds())



# --- the docs read the registry ------------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read(*parts) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _table_after(text: str, header: str) -> str:
    """The Markdown table that starts with ``header``, up to its first non-table line."""
    start = text.index(header)
    lines = []
    for line in text[start:].splitlines():
        if not line.startswith("|"):
            break
        lines.append(line)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("path, table", [("README.md", readme_table), ("docs/metrics.md", metrics_table)],
                         ids=["README", "metrics"])
def test_the_docs_rule_tables_are_the_registrys(path, table):
    expected = table()
    header = expected.splitlines()[0]
    text = _read(path)
    assert header in text, f"{path} has no rule table; paste:\n{expected}"
    shown = _table_after(text, header)
    assert [r.id for r in REGISTRY if f"| `{r.id}` |" not in shown] == [], f"{path}'s rule table lacks rules"
    assert shown == expected, f"{path}'s rule table differs from the registry's; replace it with:\n{expected}"


def test_a_thresholds_doc_names_the_rule_that_reads_it():
    docs = threshold_fields()
    assert [(r.id, n) for r in REGISTRY for n in r.thresholds if not docs[n][1].startswith(f"{r.id}: ")] == []


def _alert_expr(name: str) -> str:
    text = _read("contrib", "prometheus", "pinmon-alerts.yml")
    block = text[text.index(f"- alert: {name}\n"):]
    block = block[:block.index("labels:")]
    return block[block.index("expr:"):]


def _numbers(expr: str) -> list[float]:
    return [float(n) for n in re.findall(r"(?<![\w.])(\d+(?:\.\d+)?(?:e\d+)?)(?![\w.])", expr)]


@pytest.mark.parametrize("alert, fields", [
    ("PinmonPinnedRamShareHigh", ["pinned_ram_warning_fraction"]),
    ("PinmonPcieLinkDegraded", ["link_degraded_traffic_bytes_per_s"]),
    ("PinmonPinnedUnattributed", ["unattributed_min_bytes", "unattributed_min_fraction"]),
])
def test_contrib_alerts_restate_the_registrys_defaults(alert, fields):
    """The alerts that grade raw metrics repeat a rule's default thresholds: they must be the same."""
    defaults = [getattr(Thresholds(), name) for name in fields]
    assert _numbers(_alert_expr(alert)) == defaults
