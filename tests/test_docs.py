"""The docs follow the code: every metric family, snapshot key, schema id, package and bench script is
documented, every result file the docs name exists, and every result file is listed in bench/README.md."""
import ast
import dataclasses
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
BENCH = os.path.join(ROOT, "bench")
RESULTS = os.path.join(BENCH, "results")
PINMON = os.path.join(ROOT, "pinmon")


def _read(*parts) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _code_names(text: str) -> set[str]:
    """Every `code span` of a Markdown text (the docs name keys, metrics and files that way)."""
    return set(re.findall(r"`([^`\n]+)`", text))


# --- metrics -------------------------------------------------------------------------------------

def _bound_in_for(func: ast.AST, name: str):
    """(iterable Name, position) of the for-loop in ``func`` whose target binds ``name``."""
    for node in ast.walk(func):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Name):
            targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
            for i, t in enumerate(targets):
                if isinstance(t, ast.Name) and t.id == name:
                    return node.iter.id, i
    return None


def _module_tuple(tree: ast.Module, name: str):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
    return None


def exporter_families() -> set[str]:
    """The exposed name of every family built with ``Gauge(...)``/``Counter(...)`` in pinmon/export/,
    read from the source (a name taken from a module-level table in a loop is resolved too)."""
    prefix = "pinmon_"
    found = set()
    export_dir = os.path.join(PINMON, "export")
    for fname in sorted(os.listdir(export_dir)):
        if not fname.endswith(".py"):
            continue
        tree = ast.parse(_read("pinmon", "export", fname))
        for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            for call in ast.walk(func):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                        and call.func.id in ("Gauge", "Counter") and call.args):
                    continue
                arg = call.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    names = [arg.value]
                elif isinstance(arg, ast.Name):
                    bound = _bound_in_for(func, arg.id)
                    table = _module_tuple(tree, bound[0]) if bound else None
                    assert table is not None, f"pinmon/export/{fname}: cannot resolve metric name {arg.id}"
                    names = [row.elts[bound[1]].value for row in table.elts]
                else:
                    raise AssertionError(f"pinmon/export/{fname}: a metric name this test cannot read")
                for n in names:
                    if call.func.id == "Counter" and not n.endswith("_total"):
                        n += "_total"
                    found.add(prefix + n)
    return found


def test_the_family_reader_sees_the_exporter():
    fams = exporter_families()
    # One of each kind of definition: a literal gauge, a counter, and a name from host.py's table.
    assert {"pinmon_gpu_info", "pinmon_snapshots_total", "pinmon_host_memory_total_bytes"} <= fams
    assert len(fams) >= 40


def test_every_metric_family_is_in_metrics_md():
    documented = _code_names(_read("docs", "metrics.md"))
    missing = sorted(exporter_families() - documented)
    assert not missing, f"docs/metrics.md lacks {missing}"


def test_metrics_md_names_no_family_the_exporter_lacks():
    fams = exporter_families()
    text = _read("docs", "metrics.md")
    named = set(re.findall(r"\bpinmon_[a-z0-9_]+", text))
    extra = sorted(n for n in named if n not in fams)
    assert not extra, f"docs/metrics.md names families the exporter does not serve: {extra}"


# --- schemas -------------------------------------------------------------------------------------

def test_every_model_field_is_in_schema_md():
    from pinmon import model

    documented = _code_names(_read("docs", "schema.md"))
    # Keys may be listed together ("`rx_bytes_per_s`, `tx_bytes_per_s`") or inside a cell's text.
    words = set(re.findall(r"[a-z_][a-z0-9_]*", " ".join(documented)))
    classes = [c for c in vars(model).values() if dataclasses.is_dataclass(c) and isinstance(c, type)]
    assert {"Snapshot", "HostMemory", "Gpu", "ProcessPinned", "ProbeResult"} <= {c.__name__ for c in classes}
    missing = sorted(f"{c.__name__}.{f.name}" for c in classes for f in dataclasses.fields(c)
                     if f.name not in words)
    assert not missing, f"docs/schema.md lacks {missing}"


def test_every_trace_report_key_is_in_schema_md():
    from pinmon.trace.merge import merged
    from pinmon.trace.report import ReportWriter
    from pinmon.trace.state import TracerState

    state = TracerState()
    hooks_only = ReportWriter(lambda: merged(state.report(), None)).payload()
    with_cupti = merged(state.report(), {"copies": {}, "window": {}, "pinned": {}}, "armed")
    documented = _code_names(_read("docs", "schema.md"))
    keys = set(hooks_only) | set(with_cupti) | set(hooks_only["pinned"]) | set(hooks_only["allocs"])
    words = documented | set(re.findall(r"[a-z_][a-z0-9_]*", " ".join(documented)))
    missing = sorted(keys - words)
    assert not missing, f"docs/schema.md lacks trace report keys {missing}"


def test_every_schema_id_in_the_code_is_in_schema_md():
    ids = set()
    for base, _, files in os.walk(PINMON):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(base, f), encoding="utf-8") as fh:
                    ids |= set(re.findall(r"[\"'](pinmon\.[a-z]+/\d+)[\"']", fh.read()))
    assert {"pinmon.snapshot/1", "pinmon.check/1", "pinmon.probe/1", "pinmon.trace/1"} <= ids
    text = _read("docs", "schema.md")
    missing = sorted(i for i in ids if f"`{i}`" not in text)
    assert not missing, f"docs/schema.md lacks {missing}"


# --- architecture --------------------------------------------------------------------------------

def test_every_package_and_top_level_module_is_in_architecture_md():
    text = _read("docs", "architecture.md")
    wanted = []
    for base, dirs, files in os.walk(PINMON):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
        rel = os.path.relpath(base, ROOT)
        if "__init__.py" in files and base != PINMON:
            wanted.append(f"`{rel}/`")
    wanted += [f"`pinmon/{f}`" for f in os.listdir(PINMON)
               if f.endswith(".py") and not f.startswith("__")]
    missing = sorted(w for w in wanted if w not in text)
    assert not missing, f"docs/architecture.md lacks {missing}"


# --- bench ---------------------------------------------------------------------------------------

def test_every_bench_script_is_in_bench_readme():
    documented = _code_names(_read("bench", "README.md"))
    scripts = sorted(f for f in os.listdir(BENCH) if f.endswith((".py", ".sh")))
    missing = [s for s in scripts if s not in documented]
    assert not missing, f"bench/README.md lacks {missing}"


def test_every_result_file_is_in_bench_readme():
    text = _read("bench", "README.md")
    entries = sorted(os.listdir(RESULTS))
    missing = [e for e in entries if f"`{e}`" not in text and f"`{e}/" not in text]
    assert not missing, f"bench/README.md lacks results {missing}"


_RESULT_NAME = re.compile(r"[A-Za-z0-9_./*<>-]+(?:\.(?:jsonl|json|txt|log)(?![A-Za-z0-9.])|_h200/)")
_PLACEHOLDER = re.compile(r"OUT|DIR|NN|[*<>]")


def _named_results(text: str) -> set[str]:
    names = set()
    for span in _code_names(text) | set(re.findall(r"\(([^()\s]+)\)", text)):
        for m in _RESULT_NAME.finditer(span):
            if not _PLACEHOLDER.search(m.group(0)):
                names.add(m.group(0))
    return names


def _result_basenames() -> set[str]:
    out = set()
    for base, dirs, files in os.walk(RESULTS):
        out |= set(files) | {d + "/" for d in dirs}
    return out


@pytest.mark.parametrize("doc", ["bench/README.md"] + [f"docs/{f}" for f in sorted(os.listdir(DOCS))
                                                       if f.endswith(".md")])
def test_every_result_file_a_doc_names_exists(doc):
    basenames = _result_basenames()
    missing = []
    for name in sorted(_named_results(_read(doc))):
        if name.startswith("bench/results/"):
            ok = os.path.exists(os.path.join(ROOT, name))
        elif "/" in name.rstrip("/") and os.path.exists(os.path.join(ROOT, name)):
            ok = True  # a file of the repository (tests/fixtures, contrib)
        elif "/" in name.rstrip("/"):
            ok = os.path.exists(os.path.join(RESULTS, name))  # relative to bench/results
        else:
            ok = name in basenames
        if not ok:
            missing.append(name)
    assert not missing, f"{doc} names result files that do not exist: {missing}"


def test_the_result_name_reader_finds_names():
    text = ("`overhead_h200_tui.json` (`bench/results/soak.json`) `OUTDIR/overhead.json` "
            "`trace_h200/` `python3 bench/tui_frame.py OUT.json` -> `tui_frame_h200.json`")
    assert _named_results(text) == {"overhead_h200_tui.json", "bench/results/soak.json", "trace_h200/",
                                    "tui_frame_h200.json"}


# --- no history ----------------------------------------------------------------------------------

_HISTORY = re.compile(r"\b(previously|formerly|earlier runs?|no longer|used to|now fixed|this work|"
                      r"the start of|the tree of)\b", re.I)


@pytest.mark.parametrize("doc", ["bench/README.md"] + [f"docs/{f}" for f in sorted(os.listdir(DOCS))
                                                       if f.endswith(".md")])
def test_docs_do_not_narrate_history(doc):
    hits = [line.strip() for line in _read(doc).splitlines() if _HISTORY.search(line)]
    assert not hits, f"{doc}: {hits[:3]}"
