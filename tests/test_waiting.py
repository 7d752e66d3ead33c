"""The tests' one wait helper: returns the condition's value, treats the listed errors as "not
yet", lets any other error through at once, and names what it waited for when it gives up."""
import asyncio

import pytest

from tests.waiting import NotYet, read_until, wait_until, wait_until_async


def test_returns_the_first_true_value_after_false_ones_and_listed_errors():
    answers = iter([0, OSError("not listening"), NotYet("half written"), None, "ready"])

    def condition():
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    assert wait_until(condition, interval_s=0, retry_on=(OSError,)) == "ready"


def test_an_error_not_listed_ends_the_wait_at_once():
    calls = []

    def condition():
        calls.append(1)
        raise ValueError("the child died")

    with pytest.raises(ValueError, match="the child died"):
        wait_until(condition, interval_s=0)
    assert len(calls) == 1


def test_giving_up_names_what_and_the_last_value():
    with pytest.raises(AssertionError, match=r"timed out after 0 s waiting for the flood \(last: NotYet\('3 opened'\)"):
        wait_until(lambda: (_ for _ in ()).throw(NotYet("3 opened")), timeout_s=0, what="the flood")
    def ready():
        return 0

    with pytest.raises(AssertionError, match=r"waiting for ready \(last: 0\)"):
        wait_until(ready, timeout_s=0)


def test_the_async_wait_lets_the_loop_run_between_looks():
    seen = []

    async def main():
        async def producer():  # runs only while the wait awaits its pause
            for _ in range(3):
                seen.append(1)
                await asyncio.sleep(0)

        task = asyncio.ensure_future(producer())
        got = await wait_until_async(lambda: len(seen) >= 3 and len(seen), asyncio.sleep, interval_s=0)
        await task
        return got

    assert asyncio.run(main()) == 3
    with pytest.raises(AssertionError, match="waiting for never"):
        asyncio.run(wait_until_async(lambda: False, asyncio.sleep, timeout_s=0, what="never"))


def test_read_until_returns_the_first_reading_that_is_ok_or_the_last_one_at_the_deadline():
    readings = iter(range(10))
    assert read_until(lambda: next(readings), lambda r: r >= 3, interval_s=0) == 3
    counter = iter(range(1_000_000))
    last = read_until(lambda: next(counter), lambda r: False, timeout_s=0, interval_s=0)
    assert last == 0  # one look, then the deadline: that look's reading, no error
