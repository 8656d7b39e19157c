"""Several awaitables that stand or fall together.

``asyncio.gather`` returns at the first failure and leaves the siblings running: a
sibling that fails later (a query refused while it was being cancelled at shutdown)
reaches the loop as "unhandled exception during asyncio.run() shutdown", a second
traceback after the one-line error the operator was promised.  Here the first failure
cancels the rest and waits for them, so it is the only error that leaves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def all_or_cancel(aws: Iterable[Awaitable[T]]) -> list[T]:
    """Every result in order; or, at the first failure, the siblings cancelled and
    awaited (what they raise on the way out is theirs to drop), then that failure."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        pending = [t for t in tasks if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for t in tasks:  # a sibling that failed too: retrieved, so the loop does not log it
            if t.done() and not t.cancelled():
                t.exception()


A = TypeVar("A")
B = TypeVar("B")


async def both(a: Awaitable[A], b: Awaitable[B]) -> tuple[A, B]:
    """Two awaitables of different types, as ``all_or_cancel`` runs them."""
    first, second = asyncio.ensure_future(a), asyncio.ensure_future(b)
    await all_or_cancel([first, second])
    return first.result(), second.result()
