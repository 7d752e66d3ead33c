"""The view memo: a piece is built again only when what it is built from changed."""
from pinmon.tui.view.memo import Memo


def test_a_piece_is_built_once_per_key_and_handed_out_as_the_same_object():
    memo, built = Memo(), []

    def build(text):
        built.append(text)
        return [text]

    first = memo.get("slot", ("a",), build, "a")
    assert memo.get("slot", ("a",), build, "a") is first
    assert built == ["a"]
    second = memo.get("slot", ("b",), build, "b")
    assert second == ["b"] and second is not first and built == ["a", "b"]
    # The slot keeps only its last piece: back to "a" builds again.
    assert memo.get("slot", ("a",), build, "a") is not first and built == ["a", "b", "a"]


def test_slots_are_apart_and_forget_drops_the_places_refused():
    memo = Memo()
    one = memo.get(("rate", 0), 1, list, (1,))
    two = memo.get(("rate", 1), 1, list, (1,))
    assert one is not two and len(memo) == 2
    memo.forget(lambda slot: slot[1] == 0)
    assert len(memo) == 1 and memo.get(("rate", 0), 1, list, (9,)) is one
    memo.clear()
    assert len(memo) == 0
