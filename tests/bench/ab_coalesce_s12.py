"""Variants for ``bench_collector_ab.py`` (measurement only): the collector's coalescing
loop (``probes.transport.coalesce``) against asyncio's plain wait, swapped while it runs.

* ``plain``: every wait polls at once and times out when asked (asyncio's own loop);
* ``coalesced``: the product (waits paused while busy, timers up to ``GAP_S`` late).

    python tests/bench/bench_collector_ab.py --variants tests/bench/ab_coalesce_s12.py --spread
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from probes.transport.coalesce import CoalescingSelector


def _plain() -> Callable[[], None]:
    saved = CoalescingSelector.select

    def select(self: CoalescingSelector, timeout: float | None = None) -> Any:
        return self._inner.select(timeout)

    CoalescingSelector.select = select  # type: ignore[method-assign]

    def undo() -> None:
        CoalescingSelector.select = saved  # type: ignore[method-assign]
    return undo


def _product() -> Callable[[], None]:
    return lambda: None


VARIANTS = [("plain", _plain), ("coalesced", _product)]
