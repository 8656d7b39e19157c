"""Telling linear cost from superlinear cost on a busy two-core machine, in CPU time.

A check runs one piece of work on an input of size m and of size 4m: linear work costs about
4x, quadratic 16x, and the bound is :data:`RATIO` (10x).  Costs are CPU seconds of this
process (``time.process_time``), which other processes on the machine do not change; a
growth that looks superlinear is measured again, the fastest of several runs, before it
counts, and work too fast to judge is tried again on inputs four and sixteen times longer,
so a weak square (cheap steps) is still caught and timer noise is not taken for one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

RATIO = 10.0
"""Cost at 4m over cost at m above which work is superlinear (linear 4, quadratic 16)."""
SUSPECT = 6.0
"""A growth above this that is too fast to judge is measured again on longer inputs."""
FLOOR_S = 0.002
"""A cost at 4m below this says nothing either way: timer noise, not growth."""
SLOW_S = 0.2
"""A cost at 4m above this is long enough to judge from one run, and to go no further."""
ABSURD_S = 1.0
"""A cost at m above this is a defect whatever the growth (and 4m would take minutes)."""


def cpu(work: Callable[[], object], runs: int = 1) -> float:
    """The fastest of ``runs`` runs of ``work``, in CPU seconds of this process."""
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def superlinear(work: Callable[[int], object], m: int,
                steps: int = 4) -> tuple[int, float, float] | None:
    """(size, cost at size, cost at 4 size) when ``work`` grows faster than :data:`RATIO`
    allows, starting at size ``m``; else None.

    A growth too fast to judge (under :data:`FLOOR_S`), or between :data:`SUSPECT` and
    :data:`RATIO` (a linear part still hiding a square), is judged again at 4x the size,
    up to ``steps`` times, unless the work already costs :data:`SLOW_S`.
    """
    size = m
    for _ in range(steps):
        small = cpu(partial(work, size))
        if small >= ABSURD_S:
            return size, small, float("inf")
        large = cpu(partial(work, 4 * size))
        if large < SUSPECT * small:
            return None
        if large >= FLOOR_S:
            if large < SLOW_S:  # short enough for noise to matter: the fastest of a few
                small = cpu(partial(work, size), 5)
                large = cpu(partial(work, 4 * size), 3)
            elif large >= RATIO * small:  # one slow run is not yet a square: confirm it
                small = min(small, cpu(partial(work, size), 3))
                large = min(large, cpu(partial(work, 4 * size), 2))
            if large >= RATIO * small:
                return size, small, large
            if large < SUSPECT * small or large >= SLOW_S:
                return None
        size *= 4
    return None


def described(found: tuple[int, float, float]) -> str:
    size, small, large = found
    return f"{size}: {small * 1e3:.1f} ms -> {4 * size}: {large * 1e3:.1f} ms"


def cached(make: Callable[[int], str]) -> Callable[[int], str]:
    """``make`` remembering what it made, so building an input is not timed with its use."""
    made: dict[int, str] = {}

    def get(size: int) -> str:
        if size not in made:
            made[size] = make(size)
        return made[size]

    return get
