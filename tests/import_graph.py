"""pinmon's imports read from its source (nothing is imported): which modules a module names, and
the cycles among a package's modules."""
from __future__ import annotations

import ast
import pathlib

import pinmon

ROOT = pathlib.Path(pinmon.__file__).parent


def module_name(path: pathlib.Path) -> str:
    parts = ["pinmon", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(relpath: str) -> set[str]:
    """Absolute names ``pinmon/<relpath>`` imports anywhere in it (relative imports resolved): each
    module, and each module plus the name taken from it."""
    path = ROOT / relpath
    package = ["pinmon", *pathlib.PurePath(relpath).parent.parts]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out.add(module)
            out |= {f"{module}.{a.name}" for a in node.names}
    return out


def graph(package: str) -> dict[str, set[str]]:
    """{module: the modules of ``package`` (a path under pinmon/) it imports}, for every module in it."""
    paths = sorted((ROOT / package).glob("*.py"))
    names = {module_name(p) for p in paths}
    return {module_name(p): {m for m in imports(str(p.relative_to(ROOT))) if m in names} - {module_name(p)}
            for p in paths}


def cycles(package: str) -> list[list[str]]:
    """Import cycles among the modules of ``package``, each as the path that closes it. A package's
    ``__init__`` importing its own modules is how it offers them, so edges into it count, not out."""
    g = graph(package)
    init = module_name(ROOT / package / "__init__.py")
    g[init] = set()
    found, state = [], {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = "open"
        for n in sorted(g.get(m, ())):
            if state.get(n) == "open":
                found.append(path[path.index(n):] + [n] if n in path else path + [n])
            elif n not in state:
                visit(n, path + [n])
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m, [m])
    return found
