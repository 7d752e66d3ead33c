"""Held bytes are defined once, on the model (``HeldMemory.bytes``: pinned + write-combined + VmPin), for
a process and a group alike: no code outside ``pinmon/model/`` adds held parts up itself, the way five
views once did with three formulas."""
from __future__ import annotations

import ast
import os

from pinmon.model import Cgroup, HeldMemory, summed
from tests import factories as make

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pinmon")
MODEL = os.path.join(ROOT, "model")
HELD_PARTS = frozenset({"pinned_bytes", "write_combined_bytes", "vm_pinned_bytes"})


def _parts(node: ast.AST) -> set[str]:
    """The held parts an expression reads: ``x.pinned_bytes``, ``(x.vm_pinned_bytes or 0)``, ..."""
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and n.attr in HELD_PARTS}


def inline_sums(source: str) -> list[int]:
    """Lines where two different held parts are added: ``a + b`` with each side reading a part, or
    ``sum((a, b))`` of a literal tuple or list of them."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = _parts(node.left), _parts(node.right)
            if left and right and left | right != left & right:
                lines.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "sum"
              and node.args and isinstance(node.args[0], (ast.Tuple, ast.List))
              and len(set().union(*(_parts(e) for e in node.args[0].elts))) > 1):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_the_detector_finds_the_shapes_held_bytes_were_added_in():
    for code in ("h = (p.pinned_bytes or 0) + (p.vm_pinned_bytes or 0) + (p.write_combined_bytes or 0)",
                 "h = (g.pinned_bytes or 0) + (g.write_combined_bytes or 0)",
                 "h = p.held.pinned_bytes + p.held.write_combined_bytes",
                 "h = sum((p.pinned_bytes, p.vm_pinned_bytes))",
                 "key = lambda p: -((p.pinned_bytes or 0) + (p.vm_pinned_bytes or 0))"):
        assert inline_sums(code) == [1], code
    # One part summed over rows is not a held figure made up of parts.
    for code in ("t = sum(r.held.pinned_bytes or 0 for r in rows)", "t = a.pinned_bytes + b.pinned_bytes",
                 "t = host.pinned_bytes_est + host.write_combined_bytes_est", "h = p.held.bytes"):
        assert inline_sums(code) == [], code


def test_no_code_outside_the_model_adds_held_parts():
    bad = []
    for d, _, files in os.walk(ROOT):
        if d == MODEL or d.startswith(MODEL + os.sep):
            continue
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                with open(path, encoding="utf-8") as fh:
                    bad += [f"{os.path.relpath(path, ROOT)}:{n}" for n in inline_sums(fh.read())]
    assert not bad, "held parts added outside pinmon/model (use HeldMemory.bytes or model.summed): " + ", ".join(bad)


def test_a_process_and_a_group_hold_the_same_figure_of_the_same_parts():
    rows = [make.process(1, pinned_bytes=200, write_combined_bytes=30, vm_pinned_bytes=5),
            make.process(2, vm_pinned_bytes=640)]
    group = Cgroup(key="k", kind="docker", name="n", held=summed(p.held for p in rows))
    assert group.held.bytes == sum(p.held.bytes for p in rows) == 875
    assert rows[1].held.bytes == 640 and HeldMemory().bytes is None
