"""Variants for ``bench_collector_ab.py`` (measurement only): the collector's coalescing
loop (``probes.transport.coalesce``) against asyncio's plain wait, swapped while it runs.

* ``plain``: every wait polls at once and times out when asked (asyncio's own loop);
* ``coalesced``: the product (waits paused while busy, timers up to ``GAP_S`` late);
* with ``RW_AB_SET=gaps``: plain, then the product with a gap of 10, 20 and 40 ms;
* with ``RW_AB_SET=counts``: each also counted (polls, wakes, files ready, timers armed
  through ``call_at``: ``call_later`` goes through it) into ``RW_AB_COUNTS``.

    python tests/bench/bench_collector_ab.py --variants tests/bench/ab_coalesce_s12.py --spread
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from probes.transport.coalesce import GAP_S, CoalescingSelector


def _plain() -> Callable[[], None]:
    saved = CoalescingSelector.select

    def select(self: CoalescingSelector, timeout: float | None = None) -> Any:
        return self._inner.select(timeout)

    CoalescingSelector.select = select  # type: ignore[method-assign]

    def undo() -> None:
        CoalescingSelector.select = saved  # type: ignore[method-assign]
    return undo


def _product() -> Callable[[], None]:
    """The product.  Its rate judgement restarts from now: ``plain`` bypassed it, and a
    window counted over that slice would read as idle (one second unpaused after each
    ``plain``, as the first runs of this bench had)."""
    sel = getattr(asyncio.get_event_loop(), "_selector", None)
    if isinstance(sel, CoalescingSelector):
        sel._since, sel._ready = sel._clock(), 0
    return lambda: None


def _gap(seconds: float) -> Callable[[], Callable[[], None]]:
    """The product with another gap (installed from the signal handler, on the loop's
    thread: the running loop's selector)."""
    def install() -> Callable[[], None]:
        sel = getattr(asyncio.get_event_loop(), "_selector", None)
        if not isinstance(sel, CoalescingSelector):
            return lambda: None  # the first variant, installed before the loop exists
        sel.gap_s = seconds
        sel._since, sel._ready = sel._clock(), 0  # as ``_product``

        def undo() -> None:
            sel.gap_s = GAP_S
        return undo
    return install


class _Counts:
    """Polls, wakes with files ready, files ready and timers scheduled, per slice (what a
    variant did, written at its undo to ``RW_AB_COUNTS``)."""

    def __init__(self) -> None:
        self.polls = self.wakes = self.ready = 0
        self.timers = 0


def _counting(name: str, inner: Callable[[], Callable[[], None]]
              ) -> Callable[[], Callable[[], None]]:
    def install() -> Callable[[], None]:
        undo_inner = inner()
        loop = asyncio.get_event_loop()
        sel = getattr(loop, "_selector", None)
        if not isinstance(sel, CoalescingSelector):
            return undo_inner
        counts, real = _Counts(), sel._inner
        saved_select, saved_later = real.select, loop.call_at

        def select(timeout: float | None = None) -> Any:
            ready = saved_select(timeout)
            counts.polls += 1
            counts.wakes += bool(ready)
            counts.ready += len(ready)
            return ready

        def call_at(when: float, callback: Any, *args: Any, context: Any = None) -> Any:
            counts.timers += 1
            return saved_later(when, callback, *args, context=context)

        real.select = select  # type: ignore[method-assign]
        loop.call_at = call_at  # type: ignore[method-assign,assignment]
        t0 = loop.time()

        def undo() -> None:
            del real.select
            del loop.call_at
            undo_inner()
            with open(os.environ.get("RW_AB_COUNTS", os.devnull), "a") as f:
                f.write(f"{name} {loop.time() - t0:.2f}s polls {counts.polls} wakes "
                        f"{counts.wakes} ready {counts.ready} timers {counts.timers}\n")
        return undo
    return install


VARIANTS = {
    "default": [("plain", _plain), ("coalesced", _product)],
    "gaps": [("plain", _plain), ("gap10", _gap(0.01)), ("gap20", _gap(0.02)),
             ("gap40", _gap(0.04))],
    "counts": [("plain", _plain), ("plain_n", _counting("plain", _plain)),
               ("coalesced", _product), ("coalesced_n", _counting("coalesced", _product))],
}[os.environ.get("RW_AB_SET", "default")]
