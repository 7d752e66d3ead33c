"""The package's import graph, read from the source: no cycles, no private names across packages,
and data flowing one way (collect and probe know nothing of the views; the TUI calls no NVML, psutil
or CuPy).

Imports are read with ``ast`` from every module under pinmon/, the ones inside functions too: a late
import that dodges a cycle at load time is still a cycle in the design.
"""
from __future__ import annotations

import ast
import functools
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pinmon")


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def _modules() -> dict[str, str]:
    out = {}
    for d, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(d, f)
                out[_module_name(p)] = p
    return out


MODULES = _modules()


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports_of(module: str) -> list[tuple[str, str | None]]:
    """(imported pinmon module, imported name or None) for every import in ``module``."""
    path = MODULES[module]
    is_package = path.endswith("__init__.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names if a.name.startswith("pinmon")]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, is_package, node.level, node.module)
            if not target.startswith("pinmon"):
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in MODULES:
                    out.append((sub, None))  # "from .pkg import module"
                else:
                    out.append((target, a.name))
    return out


def _owner(module: str) -> str:
    """The module itself when it exists, else the nearest package that does."""
    while module and module not in MODULES:
        module = module.rpartition(".")[0]
    return module


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def _parent(module: str) -> str:
    """The Python package a module belongs to: itself for a package's ``__init__``."""
    return module if MODULES[module].endswith("__init__.py") else module.rpartition(".")[0]


GRAPH = {m: sorted({_owner(t) for t, _ in imports_of(m)} - {m, ""}) for m in MODULES}


def test_no_import_cycles():
    # A package's __init__ re-exporting its own modules is not a cycle of design: only edges between
    # different modules where neither is an __init__ of the other's package count.
    def edges(m):
        return [t for t in GRAPH[m] if not (t == _package(m) and MODULES[t].endswith("__init__.py"))
                and not (m == _package(t) and MODULES[m].endswith("__init__.py"))]

    state, cycles, stack = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in edges(m):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_private_names_imported_across_packages():
    # A package is Python's: pinmon.cli.commands is not pinmon.cli, so a command takes nothing
    # private from the CLI's common module either.
    bad = []
    for m in MODULES:
        for target, name in imports_of(m):
            n = name or ""
            private = (n.startswith("_") and not (n.startswith("__") and n.endswith("__"))) or any(
                p.startswith("_") and p != "__init__" for p in target.split(".")[1:])
            if private and _parent(_owner(target)) != _parent(m):
                bad.append(f"{m} imports {target}{'.' + name if name else ''}")
    assert not bad, "\n".join(bad)


# Packages that must not import each other, in the one direction data flows.
VIEWS = ("pinmon.tui", "pinmon.outputs", "pinmon.export", "pinmon.cli")
FORBIDDEN = [
    # The collectors run as root: the tracer's package (its __init__ starts hooks) runs in traced
    # programs only; both sides share the report format through pinmon.report_format.
    ("pinmon.collect", VIEWS + ("pinmon.advise", "pinmon.probe", "pinmon.recording", "pinmon.trace")),
    ("pinmon.advise", VIEWS + ("pinmon.collect", "pinmon.probe", "pinmon.trace", "pinmon.recording", "pinmon.attach")),
    # attach (uprobes on libcuda) reads the machine like collect, and uses collect's /proc readers.
    ("pinmon.attach", VIEWS + ("pinmon.advise", "pinmon.probe", "pinmon.trace", "pinmon.recording")),
    ("pinmon.probe", VIEWS + ("pinmon.collect", "pinmon.advise", "pinmon.recording")),
    # The model (snapshot types, the Source protocol, the probe join, link arithmetic) is what every
    # side shares, and the recording format sits on it: neither knows a collector, a rule or a view.
    ("pinmon.model", VIEWS + ("pinmon.collect", "pinmon.advise", "pinmon.probe", "pinmon.trace", "pinmon.recording",
                              "pinmon.attach")),
    ("pinmon.recording", VIEWS + ("pinmon.collect", "pinmon.advise", "pinmon.probe", "pinmon.trace", "pinmon.attach")),
    ("pinmon.tui", ("pinmon.collect", "pinmon.probe", "pinmon.trace", "pinmon.cli", "pinmon.export", "pinmon.attach")),
    ("pinmon.outputs", ("pinmon.tui", "pinmon.cli", "pinmon.export", "pinmon.probe", "pinmon.collect",
                        "pinmon.attach")),
    ("pinmon.export", ("pinmon.tui", "pinmon.cli")),
]


# What a view may take from a package it must not otherwise import: the probe's analysis is pure
# functions of a ProbeResult (what its rows say), apart from every CUDA call.
VIEWS_MAY_USE = ("pinmon.probe.analysis",)


# What a view may take from the advisor: its entry point and rule docs (``pinmon.advise``), the
# thresholds the user configured (``thresholds``), the registry of rules (``registry``: the help
# screen, the exporter's rule list) and the history the rules run over (``history``). Data a view shows
# is the model's (held bytes, a group's words, the GPU a process's copies went to), never a rule module's.
ADVISE_FOR_VIEWS = ("pinmon.advise", "pinmon.advise.thresholds", "pinmon.advise.registry", "pinmon.advise.history")


def test_views_take_from_the_advisor_only_its_entry_thresholds_and_registry():
    bad = [f"{m} imports {t}" for m in MODULES if any(m == v or m.startswith(v + ".") for v in VIEWS)
           for t in GRAPH[m] if (t == "pinmon.advise" or t.startswith("pinmon.advise.")) and t not in ADVISE_FOR_VIEWS]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("source,targets", FORBIDDEN, ids=[f[0] for f in FORBIDDEN])
def test_data_flows_one_way(source, targets):
    allowed = VIEWS_MAY_USE if source in VIEWS else ()
    bad = [f"{m} imports {t}" for m in MODULES if m == source or m.startswith(source + ".")
           for t in GRAPH[m] if any(t == x or t.startswith(x + ".") for x in targets) and t not in allowed]
    assert not bad, "\n".join(bad)


def test_only_the_entry_point_imports_the_cli():
    # The command line sits on top: it wires sources to views, and nothing below it knows it.
    bad = [f"{m} imports {t}" for m in MODULES if not (m == "pinmon.cli" or m.startswith("pinmon.cli."))
           and m != "pinmon.__main__" for t in GRAPH[m] if t == "pinmon.cli" or t.startswith("pinmon.cli.")]
    assert not bad, "\n".join(bad)


def test_the_tui_calls_no_nvml_psutil_or_cupy():
    bad = []
    for m, path in MODULES.items():
        if not m.startswith("pinmon.tui"):
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{m} imports {n}" for n in names if n.split(".")[0] in ("pynvml", "psutil", "cupy")]
    assert not bad, "\n".join(bad)


# The app's logic without Textual lives in one subpackage: what the app shows (its state, the session,
# the words and rows of every panel) is tested without an app, and a module of the app is either drawing
# (Textual, or Rich under it) or in that subpackage.
TUI_VIEW = "pinmon.tui.view"
DRAWING = ("textual", "rich")


def _libraries(module: str) -> set[str]:
    """The top-level names of the non-pinmon packages ``module`` imports, in functions too."""
    path = MODULES[module]
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.add((node.module or "").split(".")[0])
    return out - {"pinmon"}


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _holds_code(module: str) -> bool:
    """A package's ``__init__`` that holds only its docstring is no module of logic."""
    path = MODULES[module]
    if not path.endswith("__init__.py"):
        return True
    with open(path, encoding="utf-8") as f:
        body = ast.parse(f.read()).body
    return not (len(body) <= 1 and all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body))


def test_the_apps_view_subpackage_imports_no_textual():
    bad = [f"{m} imports {lib}" for m in MODULES if _in(m, TUI_VIEW) for lib in sorted(_libraries(m))
           if lib in DRAWING]
    # Through another module of the app, it would load Textual all the same.
    bad += [f"{m} imports {t}" for m in MODULES if _in(m, TUI_VIEW) for t in GRAPH[m]
            if _in(t, "pinmon.tui") and not _in(t, TUI_VIEW)]
    assert not bad, "\n".join(bad)


def test_the_apps_view_subpackage_loads_no_textual():
    """What the AST rule means at run time: every module of the subpackage imported, no Textual or Rich
    module loaded (a fresh interpreter: this one has loaded Textual for other tests)."""
    import subprocess
    import sys

    names = sorted(m for m in MODULES if _in(m, TUI_VIEW))
    code = (f"import sys, importlib; [importlib.import_module(m) for m in {names!r}]; "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({DRAWING!r})))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(ROOT))
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_the_apps_logic_without_textual_is_in_its_view_subpackage_only():
    # A module of the app outside the subpackage draws: it imports Textual (or Rich), or a module of the
    # app that does (a pop-up built on another screen class). One that does neither belongs in the
    # subpackage, where the rule above keeps it free of Textual.
    app_modules = [m for m in MODULES if _in(m, "pinmon.tui") and not _in(m, TUI_VIEW) and _holds_code(m)]
    draws: set[str] = set()
    changed = True
    while changed:
        changed = False
        for m in app_modules:
            if m not in draws and (_libraries(m) & set(DRAWING) or set(GRAPH[m]) & draws):
                draws.add(m)
                changed = True
    free = sorted(set(app_modules) - draws)
    assert not free, f"Textual-free modules outside {TUI_VIEW} (move them there): " + ", ".join(free)


def test_no_private_name_of_textual_is_imported():
    """pinmon builds on Textual's public API only: no ``textual._x`` module, no ``_name`` from it."""
    bad = []
    for m, path in MODULES.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found = [(node.module or "", a.name) for a in node.names]
            else:
                continue
            for target, name in found:
                if target.split(".")[0] != "textual":
                    continue
                if any(p.startswith("_") for p in target.split(".")[1:]) or (name or "").startswith("_"):
                    bad.append(f"{m} imports {target}{'.' + name if name else ''}")
    assert not bad, "\n".join(bad)


def test_the_top_level_holds_packages_and_the_shared_leaves_only():
    # The layering shows in the folders: beside the packages, only the table of bounds, the
    # formatting at the edge (which reads the bounds) and the tracer's report format (shared by the
    # tracer and the collectors), which use nothing else of pinmon.
    loose = sorted(m for m in MODULES if m.count(".") == 1 and not MODULES[m].endswith("__init__.py"))
    assert loose == ["pinmon.__main__", "pinmon.limits", "pinmon.report_format", "pinmon.units"]
    assert [t for t in GRAPH["pinmon.limits"] if t != "pinmon"] == []
    assert [t for t in GRAPH["pinmon.report_format"] if t != "pinmon"] == []
    assert [t for t in GRAPH["pinmon.units"] if t != "pinmon"] == ["pinmon.limits"]


def test_every_forbidden_rule_names_a_package_that_exists():
    assert [s for s, _ in FORBIDDEN if s not in MODULES] == []


def test_the_collectors_load_no_tracer_code():
    """What the AST rule means at run time: root's collector, with everything it reads of reports,
    never executes a module of the tracer's package."""
    import subprocess
    import sys

    code = ("import sys, pinmon.collect.live, pinmon.collect.traced.reader, pinmon.report_format; "
            "print(sorted(m for m in sys.modules if m.startswith('pinmon.trace')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(ROOT))
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def _textual_private_names(cls) -> set[str]:
    """The private names Textual's classes in ``cls``'s bases define or set on their instances."""
    names: set[str] = set()
    for base in cls.__mro__:
        if base.__module__.startswith("textual"):
            names |= _private_names_of(base)
    return names


@functools.cache
def _private_names_of(base: type) -> frozenset[str]:
    """One Textual class's private names (its source read once: ``inspect.getsource`` parses the
    whole module each time, and every widget of the app shares Widget and DOMNode)."""
    import inspect
    import re

    names = {n for n in vars(base) if n.startswith("_") and not n.endswith("__")}
    try:
        source = inspect.getsource(base)
    except (OSError, TypeError):
        return frozenset(names)
    names.update(re.findall(r"self\.(_[A-Za-z]\w*)\b", source))
    return frozenset(names)


def test_the_tui_reads_and_sets_no_private_attribute_of_textual():
    """Textual's objects through their public face: the TUI reads a private name only on ``self`` (or
    ``super()``), and never one that a Textual base of that class defines or sets; nothing private is
    read or put on another object by ``getattr``/``setattr`` with a string."""
    import importlib
    import inspect

    bad = []
    for m, path in MODULES.items():
        if not m.startswith("pinmon.tui"):
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        module = importlib.import_module(m)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("setattr", "getattr") and len(node.args) > 1
                    and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_")):
                bad.append(f"{m}:{node.lineno} {node.func.id}(..., {node.args[1].value!r})")
            if not isinstance(node, ast.ClassDef):
                continue
            cls = getattr(module, node.name, None)
            if not inspect.isclass(cls):
                continue
            theirs = _textual_private_names(cls)
            for sub in ast.walk(node):
                if (isinstance(sub, ast.Attribute) and sub.attr.startswith("_") and not sub.attr.endswith("__")
                        and isinstance(sub.value, ast.Name) and sub.value.id == "self" and sub.attr in theirs):
                    bad.append(f"{m}:{sub.lineno} {node.name} uses Textual's self.{sub.attr}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.endswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "os"))
                    and not (isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "super")):
                bad.append(f"{m}:{node.lineno} reads .{node.attr} of another object")
    assert not bad, "\n".join(bad)
