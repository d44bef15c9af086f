"""``judging.fan_out.all_of``: a request's runs end together, so none runs on for a request already answered."""

from __future__ import annotations

import asyncio

import pytest
from codegym_sandbox.judging.fan_out import all_of


def test_results_come_in_order() -> None:
    async def after(delay: float, value: int) -> int:
        await asyncio.sleep(delay)
        return value

    assert asyncio.run(all_of([after(0.02, 1), after(0.0, 2), after(0.01, 3)])) == [1, 2, 3]


def test_a_failure_ends_the_others_before_it_is_raised() -> None:
    ended: list[str] = []

    async def sleeper() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            ended.append("sleeper")

    async def failing() -> None:
        await asyncio.sleep(0.01)
        raise LookupError("refused")

    async def main() -> None:
        with pytest.raises(LookupError, match="refused"):  # the failure itself, not a group of them
            await all_of([sleeper(), failing(), sleeper()])
        assert ended == ["sleeper", "sleeper"]  # ended by the time the caller hears of the failure

    asyncio.run(asyncio.wait_for(main(), 5))


def test_a_fan_out_starts_a_bounded_number_at_once() -> None:
    """Started all at once, a request of 10,000 runs ran every run's first steps in one turn of the event loop,
    and every route waited seconds for it."""
    alive, most = [0], [0]

    async def one(i: int) -> int:
        alive[0] += 1
        most[0] = max(most[0], alive[0])
        await asyncio.sleep(0)
        alive[0] -= 1
        return i

    assert asyncio.run(all_of((one(i) for i in range(1000)), most=16)) == list(range(1000))
    assert most[0] <= 16
