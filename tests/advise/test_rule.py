"""``Found``: the figures a check reports, given as keywords or as a mapping."""
from pinmon.advise.rule import Found


def test_figures_given_as_a_mapping_are_the_figures_given_as_keywords():
    figures = {"pid": 7, "call_site": "train.py:12", "node0_pinned_bytes": 4096, "unknown": None}
    built = Found.with_values("warning", "message", "advice", figures, subject="gpu1")
    keywords = Found("warning", "message", "advice", subject="gpu1", pid=7, call_site="train.py:12",
                     node0_pinned_bytes=4096, unknown=None)
    assert (built.severity, built.message, built.advice, built.subject) == ("warning", "message", "advice", "gpu1")
    assert list(built.values.items()) == list(keywords.values.items()) == [
        ("pid", 7), ("call_site", "train.py:12"), ("node0_pinned_bytes", 4096)]  # in order, None left out
    assert Found.with_values("info", "m", "a", {}).subject is None
