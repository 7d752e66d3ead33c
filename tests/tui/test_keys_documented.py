"""Every key the app answers is on its help screen and in the README's Keys table."""
import os
import re

from pinmon.tui.app import PinmonApp
from pinmon.tui.screens.help import KEYS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_keys_table() -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text.split("## Keys (terminal app)", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def key_cell(table: str) -> str:
    return "\n".join(line.split("|")[1] for line in table.splitlines())


def test_every_help_key_is_in_the_readme():
    keys = key_cell(readme_keys_table())
    for key, _ in KEYS:
        for token in re.split(r" / | … ", key):
            if token in ("ctrl+p",):
                continue  # the command palette is described below the table
            wanted = (_readme_key(token) if token.startswith("ctrl+") else
                      f"`{token}`" if len(token) == 1 or token == "space" else token)
            assert wanted in keys, f"{key!r}: {wanted!r} not in the README's Keys table"


def test_every_bound_key_is_on_the_help_screen():
    helped = {t.lower() for key, _ in KEYS for t in re.split(r" / | … ", key)}
    names = {"question_mark": "?", "slash": "/", "plus": "+", "minus": "-", "space": "space", "enter": "enter"}
    for binding in PinmonApp.BINDINGS:
        if binding.action in ("clear_filter", "no_probe", "no_speed") or binding.action.startswith("tab("):
            continue  # Esc is documented with /; the others answer keys the help lists already
        first = binding.key.split(",")[0]
        assert names.get(first, first).lower() in helped, binding.key


def _readme_key(key: str) -> str:
    """A Textual key name as the README writes it: ``q`` -> `q`, ``ctrl+q`` -> Ctrl-Q."""
    if key.startswith("ctrl+"):
        return "Ctrl-" + key[len("ctrl+"):].upper()
    return f"`{key}`"


def test_every_quit_key_is_in_the_readme():
    """The keys that quit, Textual's own (ctrl+q) included, are in the Keys table, and so is what
    Ctrl-C does (Textual binds it to a hint, not to quit)."""
    from textual.binding import Binding

    bindings = [b for cls in PinmonApp.__mro__ for b in vars(cls).get("BINDINGS", []) if isinstance(b, Binding)]
    quit_keys = {k for b in bindings if b.action == "quit" for k in b.key.split(",")}
    assert {"q", "ctrl+q"} <= quit_keys
    row = next(line for line in readme_keys_table().splitlines() if "quit" in line.split("|")[2])
    for key in sorted(quit_keys):
        assert _readme_key(key) in row.split("|")[1], key
    assert "help_quit" in {b.action for b in bindings if b.key == "ctrl+c"}
    assert "Ctrl-C" in row
