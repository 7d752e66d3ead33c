"""The docs follow the code: every metric family, snapshot key, schema id, package and bench script is
documented, and every result file the docs name exists (bench/results/MANIFEST.json lists every result
file: tests/test_bench_manifest.py)."""
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
    files = sorted(os.path.relpath(os.path.join(d, f), export_dir)
                   for d, _, names in os.walk(export_dir) for f in names if f.endswith(".py"))
    for fname in files:
        tree = ast.parse(_read("pinmon", "export", *fname.split(os.sep)))
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
    from pinmon.trace.report_file import ReportWriter
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

def _bench_scripts(folder: str) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.endswith((".py", ".sh")))


def test_every_bench_script_is_in_bench_readme():
    documented = _code_names(_read("bench", "README.md"))
    missing = [s for s in _bench_scripts(BENCH) if s not in documented]
    assert not missing, f"bench/README.md lacks {missing}"


def test_every_research_script_says_what_it_established():
    """bench/research/README.md gives each script of the folder a line, with its command."""
    text = _read("bench", "research", "README.md")
    scripts = _bench_scripts(os.path.join(BENCH, "research"))
    assert scripts
    missing = [s for s in scripts if f"`{s}`" not in text or f"bench/research/{s}" not in text]
    assert not missing, f"bench/research/README.md lacks {missing}"


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
    for _base, dirs, files in os.walk(RESULTS):
        out |= set(files) | {d + "/" for d in dirs}
    return out


DOC_FILES = ["README.md"] + [f"docs/{f}" for f in sorted(os.listdir(DOCS)) if f.endswith(".md")]


@pytest.mark.parametrize("doc", ["bench/README.md"] + DOC_FILES)
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

_HISTORY = re.compile(r"\b(previously|formerly|earlier|no longer|used to|now fixed|this work|this tree|"
                      r"the start of|the tree of)\b", re.I)


@pytest.mark.parametrize("doc", ["bench/README.md"] + DOC_FILES)
def test_docs_do_not_narrate_history(doc):
    hits = [line.strip() for line in _read(doc).splitlines() if _HISTORY.search(line)]
    assert not hits, f"{doc}: {hits[:3]}"


def test_the_history_pattern_catches_narration():
    for line in ("Earlier runs: 2.37%", "the tree of the start of this work",
                 "the engine in this tree"):
        assert _HISTORY.search(line), line
    assert not _HISTORY.search("link generation now and rated")


# --- paths and links -----------------------------------------------------------------------------

# A path of this repository, as the docs name it: in a code span, a link, or a command line.
_TOP = ("pinmon", "bench", "tests", "contrib", "examples", "docs", "screenshots", ".ci")
_TOP_ALTERNATIVES = "|".join(re.escape(t) for t in _TOP)
_REPO_PATH = re.compile(rf"(?<![\w./$-])((?:{_TOP_ALTERNATIVES})/[A-Za-z0-9_./*-]*)")
_PLACEHOLDER_PATH = re.compile(r"OUT|DIR|[<>]")


def _named_paths(text: str) -> set[str]:
    """Every repository path a Markdown text names in a code span or a link target."""
    spans = _code_names(text) | set(re.findall(r"\]\(([^()\s]+)\)", text))
    names = set()
    for span in spans:
        for m in _REPO_PATH.finditer(span):
            path = m.group(1).rstrip(".")
            if not _PLACEHOLDER_PATH.search(path):
                names.add(path)
    return names


def _exists(rel: str) -> bool:
    import glob

    full = os.path.join(ROOT, rel)
    return bool(glob.glob(full)) if "*" in rel else os.path.exists(full)


def test_the_path_reader_finds_paths():
    text = ("`pinmon/advise/registry.py` `python3 bench/tui_frame.py OUT.json` `tests/fixtures/maps/*.json` "
            "`$XDG_RUNTIME_DIR/pinmon` `bench/results/trace_gpu_h200/` [a](docs/metrics.md#x) "
            "`python3 bench/overhead.py --out OUTDIR` -> `OUTDIR/overhead.json`")
    assert _named_paths(text) == {"pinmon/advise/registry.py", "bench/tui_frame.py", "tests/fixtures/maps/*.json",
                                  "bench/results/trace_gpu_h200/", "docs/metrics.md",
                                  "bench/overhead.py"}


@pytest.mark.parametrize("doc", DOC_FILES)
def test_every_repository_path_a_doc_names_exists(doc):
    """README.md and docs/*.md name pinmon/..., bench/..., tests/... paths: each must exist (a link's
    target relative to the document is checked by the link test below)."""
    missing = sorted(p for p in _named_paths(_read(doc)) if not _exists(p))
    assert not missing, f"{doc} names paths that do not exist: {missing}"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())  # punctuation and backticks go, _ stays
    return text.replace(" ", "-")


def _anchors(rel: str) -> set[str]:
    return {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", _read(rel), re.M)}


def test_anchors_follow_github():
    assert _anchor("Fleet: Prometheus and Grafana") == "fleet-prometheus-and-grafana"
    assert _anchor("`pinmon.snapshot/1`") == "pinmonsnapshot1"
    assert _anchor("The advisor's figures") == "the-advisors-figures"


@pytest.mark.parametrize("doc", DOC_FILES)
def test_every_relative_link_resolves(doc):
    """Each Markdown link to a file of the repository points at one that exists, and its #anchor at a
    heading of that file."""
    base = os.path.dirname(doc)
    bad = []
    for target in re.findall(r"\]\(([^()\s]+)\)", _read(doc)):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        rel = os.path.normpath(os.path.join(base, path)) if path else doc
        missing = not os.path.exists(os.path.join(ROOT, rel))
        if missing or (anchor and rel.endswith(".md") and anchor not in _anchors(rel)):
            bad.append(target)
    assert not bad, f"{doc} has links that lead nowhere: {bad}"
