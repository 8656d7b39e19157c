"""A collector's batch is folded in slices with a turn of the loop between them (#38).

At a thousand hosts a frame from a collector can hold hundreds of samples (more when the
console fell behind and the relay kept each host's newest); folded in one callback, a key
waited for all of them.  Counted in loop turns and items, with a clock that counts its own
calls: never timed.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time

from probes.sources.collectors import FoldSlices
from probes.wire.events import SessionItem
from tests.support.collector_backlog import BacklogBackend, backlog

HOSTS, SAMPLES = 6, 40
BUDGET = 10
"""A slice's budget in calls of the counting clock: one call per entry, one per turn."""


async def _fold(budget: float, frames: int = 2) -> tuple[list[tuple[str, str, object]],
                                                         list[int], int]:
    """Fold ``frames`` backlog frames through the console's ``_read``: what was emitted in
    order, and at each item how many turns a task beside the fold had had."""
    tick = itertools.count()
    t0 = time.time()
    backend = BacklogBackend(
        HOSTS, [backlog(HOSTS, SAMPLES, t0 + 100 * f) for f in range(frames)],
        slices=lambda: FoldSlices(budget, clock=lambda: float(next(tick))))
    turns = 0
    seen: list[tuple[str, str, object]] = []
    at: list[int] = []

    def emit(host: str, item: SessionItem) -> None:
        seen.append((host, type(item).__name__, getattr(item, "seq", None)))
        at.append(turns)

    async def beside() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    other = asyncio.create_task(beside())
    run = asyncio.create_task(backend.run(emit))
    await backend.done.wait()
    other.cancel()
    run.cancel()
    await asyncio.gather(other, run, return_exceptions=True)
    return seen, at, backend.slices_made()


def _longest_stretch(at: list[int]) -> int:
    """The most items folded while the task beside the fold had no turn."""
    return max(len(list(g)) for _, g in itertools.groupby(at))


async def test_a_long_batch_gives_the_loop_a_turn_every_slice_in_the_same_order() -> None:
    seen, at, turns = await _fold(BUDGET)
    whole, whole_at, _ = await _fold(math.inf)
    # the same items in the same order as folding each batch in one go (two frames'
    # worth: every host's hello and samples, twice)
    assert seen == whole
    assert sum(kind == "HostSample" for _, kind, _ in seen) == 2 * HOSTS * SAMPLES
    # a slice is at most BUDGET entries (one host's entry decodes to one line's message)
    assert turns >= len(seen) // BUDGET - 2
    assert _longest_stretch(at) <= BUDGET
    # the negative control: folded in one go, nothing else runs until a frame is done
    assert _longest_stretch(whole_at) >= HOSTS * (SAMPLES + 1)


def test_a_slice_ends_when_its_time_is_spent_not_before() -> None:
    t = [0.0]
    slices = FoldSlices(0.004, clock=lambda: t[0])
    assert not slices.due()
    t[0] = 0.0039
    assert not slices.due()
    t[0] = 0.004
    assert slices.due()
    asyncio.run(slices.turn())
    assert slices.turns == 1 and not slices.due()
