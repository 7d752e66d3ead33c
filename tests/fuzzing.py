"""Fuzzing the parsers of outside input: the shared pieces of the fuzz tests (marked ``fuzz``).

The number of examples is the Hypothesis profile's (tests/conftest.py): 300 in everyday runs, 10,000
under ``--hypothesis-profile full``, which ``.ci/run`` runs on every test marked ``fuzz``. Hypothesis
draws only bytes (its cheapest strategy, ~1 ms an example); ``splice`` turns them into a mutation of
real input (real lines cut, joined, salted with the bytes), so 10,000 examples per parser stay within
about a minute and a half for all of them on two cores. Each test counts its examples with
``run_counted`` and asserts the count, so the figure is real.
"""
from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# The profile's number of examples (300 quick, 10,000 full): settings made here inherit it.
FUZZ = settings(deadline=None, database=None, derandomize=False, suppress_health_check=list(HealthCheck))
N = FUZZ.max_examples

SEPS = ("\n", "\r\n", "\x00", " ", "\t", "")
BYTES = st.binary(max_size=64)
# Real values of a cgroup's memory limit files (the cgroup limit parser's, and the host memory
# reader's through a cgroup tree).
CGROUP_VALUES = ["max", "max\n", "9223372036854771712", " 0 ", "1e9", "-1", "137438953472\n",
                 str(1 << 70), "+5", "0x10"]


def splice(data: bytes, lines) -> str:
    """Real lines mutated by ``data``: its first bytes pick lines, a separator, a cut and a mode;
    the rest (as latin-1, so NUL, newlines and high bytes all occur, or as UTF-8) is salted in."""
    if not data:
        return ""
    b = data + bytes(6)
    noise = data[6:].decode("latin-1") if b[0] & 1 else data[6:].decode("utf-8", "replace")
    picked = [lines[(b[1] + 7 * i) % len(lines)] for i in range(b[2] % 6)]
    text = SEPS[b[3] % len(SEPS)].join(picked)
    cut = b[4] * max(1, len(text)) // 255
    mode = b[5] % 5
    if mode == 0:
        return noise
    if mode == 1:
        return text[:cut] + noise + text[cut:]
    if mode == 2:
        return text[:cut]
    if mode == 3:
        return text + "\n" + noise
    return "".join(c if i % 7 else noise[:1] for i, c in enumerate(text))


def run_counted(make_test):
    """Run a @given test built by ``make_test(count)`` and return how many examples it saw."""
    seen = [0]

    def count():
        seen[0] += 1

    make_test(count)()
    assert seen[0] >= N, seen[0]
    return seen[0]
