"""Tests wait for conditions, not for fixed times: every ``time.sleep`` in tests/ (or a sleep in
disguise, ``threading.Event().wait(s)`` on a fresh event) says on its line (or the line above) ``# not a wait: <why>`` (it makes time pass for a rate, paces a load, is a render's
own cost...), and every polling loop has a deadline. Anything waiting for an effect uses
``tests/waiting.py`` (``wait_until``, ``read_until``), which returns as soon as the effect is there
and turns a hang into a failure.

A polling loop here is a ``while`` whose condition is constant (``while True``) or whose body sleeps;
it has a deadline when the loop reads a clock (``time.monotonic()``, ``time.time()``,
``time.perf_counter()``) or names a deadline, or says ``# not a wait:`` on its ``while`` line.
"""
from __future__ import annotations

import ast
import io
import os
import tokenize

TESTS = os.path.dirname(os.path.abspath(__file__))
MARK = "not a wait:"
CLOCKS = {"monotonic", "time", "perf_counter", "monotonic_ns", "time_ns", "perf_counter_ns"}


def _comment_lines(source: str) -> set[int]:
    """Lines carrying a ``# not a wait: ...`` comment."""
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and MARK in tok.string:
            lines.add(tok.start[0])
    return lines


class _Finder(ast.NodeVisitor):
    def __init__(self):
        self.time_names = set()  # names the time module is bound to here
        self.sleep_names = set()  # names time.sleep is bound to here (from time import sleep)
        self.sleeps: list[ast.Call] = []
        self.loops: list[ast.While] = []

    def visit_Import(self, node):
        for a in node.names:
            if a.name == "time":
                self.time_names.add(a.asname or "time")

    def visit_ImportFrom(self, node):
        if node.module == "time":
            for a in node.names:
                if a.name == "sleep":
                    self.sleep_names.add(a.asname or "sleep")

    def visit_While(self, node):
        self.loops.append(node)
        self.generic_visit(node)

    def visit_Call(self, node):
        self.sleeps.append(node)  # sorted out once every import is known
        self.generic_visit(node)

    def is_sleep(self, call: ast.Call) -> bool:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "wait" and isinstance(f.value, ast.Call):
            made = f.value.func  # threading.Event().wait(s): an event nobody sets
            return (isinstance(made, ast.Attribute) and made.attr == "Event") or \
                (isinstance(made, ast.Name) and made.id == "Event")
        if isinstance(f, ast.Attribute) and f.attr == "sleep":
            return isinstance(f.value, ast.Name) and f.value.id in self.time_names
        return isinstance(f, ast.Name) and f.id in self.sleep_names

    def reads_a_clock(self, node: ast.AST) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in CLOCKS \
                    and isinstance(n.func.value, ast.Name) and n.func.value.id in self.time_names:
                return True
            if isinstance(n, ast.Name) and "deadline" in n.id.lower():
                return True
            if isinstance(n, ast.Attribute) and "deadline" in n.attr.lower():
                return True
        return False


def problems(source: str, name: str = "<test>") -> list[str]:
    """What breaks the rules in one file's ``source``: ``name:line: why`` each."""
    tree = ast.parse(source, name)
    found = _Finder()
    found.visit(tree)
    marked = _comment_lines(source)
    out = []

    def says_why(first: int, last: int) -> bool:
        return any(line in marked for line in range(first - 1, last + 1))

    for call in found.sleeps:
        if found.is_sleep(call) and not says_why(call.lineno, call.end_lineno or call.lineno):
            out.append(f"{name}:{call.lineno}: a fixed sleep without '# {MARK} <why>': wait for the condition"
                       " with tests/waiting.py instead")
    for loop in found.loops:
        constant = isinstance(loop.test, ast.Constant) and bool(loop.test.value)
        sleeps = any(isinstance(n, ast.Call) and found.is_sleep(n) for n in ast.walk(loop))
        if (constant or sleeps) and not found.reads_a_clock(loop) and loop.lineno not in marked:
            out.append(f"{name}:{loop.lineno}: a polling loop with no deadline: use tests/waiting.py")
    return out


def test_no_fixed_waits_and_no_endless_polling_in_the_tests():
    bad = []
    for d, dirs, files in os.walk(TESTS):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(d, f)
                with open(path, encoding="utf-8") as fh:
                    bad += problems(fh.read(), os.path.relpath(path, os.path.dirname(TESTS)))
    assert bad == [], "\n".join(bad)


def test_the_check_finds_what_it_is_for():
    assert problems("import time\ntime.sleep(1)\n")
    assert problems("from time import sleep as nap\nnap(0.5)\n")
    assert problems("import time as t\nt.sleep(1)  # settles\n")  # a comment that does not say why
    assert not problems("import time\ntime.sleep(1)  # not a wait: a second of load\n")
    assert not problems("import time\n# not a wait: a second of load\ntime.sleep(1)\n")
    assert not problems("import asyncio\nasyncio.sleep(0)\n")  # another module's sleep
    assert problems("import threading\nthreading.Event().wait(0.5)\n")
    assert not problems("import threading\ndone = threading.Event()\ndone.wait(5)\n")  # set by someone
    assert problems("while True:\n    if ready():\n        break\n")
    assert problems("import time\nwhile not ready():\n    time.sleep(0.1)  # not a wait: x\n")
    assert not problems("import time\nend = time.monotonic() + 5\n"
                        "while not ready() and time.monotonic() < end:\n    time.sleep(0.1)  # not a wait: x\n")
    assert not problems("while True:\n    if ready() or past(deadline):\n        break\n")
    assert not problems("while not stop.is_set():\n    work()\n")  # a load stopped by its owner
