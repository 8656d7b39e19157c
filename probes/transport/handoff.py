"""Items from a source's own thread to the console's loop, in order, a batch at a time.

One ``call_soon_threadsafe`` per item wakes the console's loop once per host-sample
(10,000 a refresh on a large fleet).  Here the first item of a burst schedules one drain;
the drain folds what has arrived, and when a burst is long (a large fleet's start-up: every
host's hello and history) it stops after ``SLICE_S`` and goes on at the next turn of the
loop, so keys and redraws are served in between instead of after the whole burst.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable

from probes.wire.events import Emit, SessionItem

SLICE_S = 0.05
"""Longest the console's loop folds before it serves its own events again."""
BATCH = 256
"""Items taken from the queue under one lock."""


class Handoff:
    """``put`` from any thread; ``deliver`` runs on ``loop``, in the order put."""

    def __init__(self, loop: asyncio.AbstractEventLoop, deliver: Emit,
                 context: contextvars.Context | None = None) -> None:
        self._loop = loop
        self._deliver = deliver
        self._context = context
        self._lock = threading.Lock()
        self._items: deque[tuple[str, SessionItem]] = deque()
        self._scheduled = False
        self.drains = 0
        """Loop turns spent folding (a test's measure of the coalescing)."""

    def put(self, host: str, item: SessionItem) -> None:
        """Queue an item; wake the loop only when no drain is pending."""
        with self._lock:
            self._items.append((host, item))
            if self._scheduled:
                return
            self._scheduled = True
        self._loop.call_soon_threadsafe(self._drain, context=self._context)

    def _drain(self) -> None:
        self.drains += 1
        clock = time.perf_counter
        deadline = clock() + SLICE_S
        deliver: Callable[[str, SessionItem], None] = self._deliver
        while True:
            with self._lock:
                if not self._items:
                    self._scheduled = False
                    return
                take = min(BATCH, len(self._items))
                batch = [self._items.popleft() for _ in range(take)]
            for n, (host, item) in enumerate(batch, 1):
                deliver(host, item)
                if clock() > deadline:  # a slow fold: the rest waits for the next turn
                    if n < len(batch):
                        with self._lock:
                            self._items.extendleft(reversed(batch[n:]))
                    self._loop.call_soon(self._drain, context=self._context)
                    return
