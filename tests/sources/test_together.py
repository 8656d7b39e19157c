"""A failed query's siblings are cancelled and awaited before the failure leaves.

CI once printed a second traceback after ``snapshot``'s one-line error: a Prometheus
answer over its cap failed one query of a shard while ``asyncio.gather`` left the other
queries running; at shutdown one of them, cancelled just as its own answer went over the
cap, raised, and asyncio.run logged it ("unhandled exception during asyncio.run()
shutdown").  The race is reproduced here on purpose: a sibling that raises while it is
being cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import pytest

from probes.sources.together import all_or_cancel, both


class Refused(Exception):
    pass


async def _fails_now() -> int:
    await asyncio.sleep(0)
    raise Refused("first")


async def _fails_when_cancelled(stopped: list[str]) -> int:
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        stopped.append("cancelled")
        raise Refused("while cancelled") from None
    return 1


def _logged(gatherer: Callable[[Iterable[Awaitable[int]]], Awaitable[Any]]
            ) -> tuple[list[dict[str, Any]], list[str], str]:
    """What the loop logged, what the sibling saw, and what the caller caught."""
    logged: list[dict[str, Any]] = []
    stopped: list[str] = []

    async def main() -> str:
        asyncio.get_running_loop().set_exception_handler(lambda _l, ctx: logged.append(ctx))
        try:
            await gatherer([_fails_now(), _fails_when_cancelled(stopped)])
        except Refused as exc:
            return str(exc)
        return "no error"

    caught = asyncio.run(main())
    return logged, stopped, caught


async def _plain_gather(aws: Iterable[Awaitable[int]]) -> list[int]:
    return list(await asyncio.gather(*aws))


def test_the_first_failure_is_the_only_one_that_leaves() -> None:
    logged, stopped, caught = _logged(all_or_cancel)
    assert caught == "first"
    assert stopped == ["cancelled"]  # cancelled and awaited before the error left
    assert logged == []


def test_plain_gather_leaves_the_sibling_to_the_loop() -> None:
    """Negative control: the race this module exists for is real."""
    logged, stopped, caught = _logged(_plain_gather)
    assert caught == "first"
    assert stopped == ["cancelled"]  # cancelled by asyncio.run's shutdown, not by us
    assert any(isinstance(ctx.get("exception"), Refused) for ctx in logged), logged


def test_results_in_order_when_all_succeed() -> None:
    async def after(delay: float, value: int) -> int:
        await asyncio.sleep(delay)
        return value

    async def main() -> tuple[list[int], tuple[int, str]]:
        many = await all_or_cancel(after(d, v) for d, v in [(0.02, 1), (0.0, 2), (0.01, 3)])

        async def word() -> str:
            return "x"
        two = await both(after(0.01, 7), word())
        return many, two

    assert asyncio.run(main()) == ([1, 2, 3], (7, "x"))


def test_a_caller_cancelled_cancels_every_query() -> None:
    started = asyncio.Event()
    stopped: list[int] = []

    async def slow(k: int) -> int:
        started.set()
        try:
            await asyncio.sleep(10)
        finally:
            stopped.append(k)
        return k

    async def main() -> None:
        task = asyncio.ensure_future(all_or_cancel(slow(k) for k in range(3)))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert sorted(stopped) == [0, 1, 2]
