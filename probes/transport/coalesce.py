"""An event loop that, while busy, wakes for its sockets at most once per ``gap_s``.

A collector's hosts each send a tick a second, at their own points of the second: at 256
hosts a tick arrives every ~4 ms, and a loop that polls as soon as it is idle wakes once
per tick (and once more for each keepalive, stall watch and flush timer).  On a shared
machine each wake is a process switched in with cold caches, an ``epoll_wait`` and a loop
iteration: 40-60 % of a collector's CPU at 256 hosts on a 2-core VM (RESULTS.md, "#38 the
collectors' wakes (session 12)").  Here the selector, asked to wait while busy, first lets
``gap_s`` pass since its last wake that found something ready, and lets a timer that falls
due wait for the next wake a tick brings, ``gap_s`` at most: what became ready meanwhile,
and the timers due, are served in one wake.

Busy means at least ``MIN_PER_GAP`` files, on average, became ready per ``gap_s`` over the
last ``RATE_S``, and no connection is being made (``hold_while``: an SSH handshake is a dozen
round trips, each of which would wait out a pause; at 1024 hosts that put the last host's
first sample ~1 s later): a loop with fewer (a small shard, a console's own few sessions) is never
paused, since a pause that finds nothing ready costs a wake of its own.  A loop with work
ready polls with timeout 0 and is never paused.  So while busy, bytes wait in the kernel's
socket buffers and every timer (a remote command's timeout, a stall watch, a keepalive, the
relay's flush) fires at most ``gap_s`` (40 ms) later than asked: a dead host is detected
after the same 15 s (keepalive, stall) give or take 40 ms, and a collector already gathers
its entries for ``FLUSH_S`` (50 ms) before it sends them.  Idle, it is asyncio's own loop.
"""

from __future__ import annotations

import asyncio
import math
import selectors
import time
import weakref
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar, cast

T = TypeVar("T")

GAP_S = 0.04
"""A collector's loop wakes for I/O at most this often while it is busy (``FLUSH_S`` is 50 ms):
at 256 hosts 10 ms saved 12 % of its CPU, 20 ms 46 %, 40 ms 60 % (RESULTS.md, session 12);
80 ms saved 10-18 % more at 256 and 512 hosts (session 14), but at 1024 hosts a shard's
batch then outgrew the pipe and the relay dropped ~2,500-3,000 samples a run (0 at 40 ms):
not taken."""
MIN_PER_GAP = 2.0
"""The loop pauses only while at least this many of its files, on average, become ready in a
``gap_s``: a pause that finds nothing ready costs a wake of its own (the sleep's), so a
sparse stream (fewer than 50 ticks a second at 40 ms) is served as it comes."""
RATE_S = 1.0
"""How often the rate of ready files is judged again (a collector's hosts tick at 1 Hz)."""


class CoalescingSelector(selectors.BaseSelector):
    """A selector that, asked to wait while busy, first lets ``gap_s`` pass since its last
    wake (busy: at least ``MIN_PER_GAP`` files became ready per ``gap_s`` over the last
    ``RATE_S``)."""

    def __init__(self, inner: selectors.BaseSelector, gap_s: float,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, busy: bool | None = None) -> None:
        self._inner = inner
        self.gap_s = gap_s
        self._clock = clock
        self._sleep = sleep
        self._last = -math.inf
        """When a poll last found something ready."""
        self._since = clock()
        self._ready = 0
        """Files found ready since ``_since``."""
        self.busy = bool(busy)
        """Whether the loop pauses (judged every ``RATE_S``, unless fixed by ``busy``)."""
        self._judged = busy is None
        self.pauses = 0
        """Waits that were paused (a bench's or a test's count)."""
        self.hold: Callable[[], bool] | None = None
        """While it answers True the loop is not paused (``hold_while``)."""

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def select(self, timeout: float | None = None
               ) -> list[tuple[selectors.SelectorKey, int]]:
        hold = self.hold
        if self.busy and (timeout is None or timeout > 0) and not (hold is not None and hold()):
            if timeout is not None:
                # a timer due waits for the next wake a tick brings, at most ``gap_s``
                timeout += self.gap_s
            pause = self._last + self.gap_s - self._clock()
            if pause > 0:
                if timeout is not None:
                    pause = min(pause, timeout)
                    timeout -= pause
                self._sleep(pause)
                self.pauses += 1
        ready = self._inner.select(timeout)
        if ready:
            now = self._last = self._clock()
            self._ready += len(ready)
            if self._judged and now - self._since >= RATE_S:
                self.busy = self._ready * self.gap_s >= MIN_PER_GAP * (now - self._since)
                self._since, self._ready = now, 0
        return ready

    def close(self) -> None:
        self._inner.close()

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.get_key(fileobj)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._inner.get_map()


_SELECTORS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CoalescingSelector] = \
    weakref.WeakKeyDictionary()


def coalescing_loop(gap_s: float = GAP_S) -> asyncio.AbstractEventLoop:
    """A new event loop (the platform's selector loop) whose I/O wakes are ``gap_s`` apart."""
    selector = CoalescingSelector(selectors.DefaultSelector(), gap_s)
    loop = asyncio.SelectorEventLoop(selector)
    _SELECTORS[loop] = selector
    return loop


def hold_while(busy_elsewhere: Callable[[], bool]) -> bool:
    """The running loop, if it coalesces, is not paused while ``busy_elsewhere()`` (the
    collector's sessions making a connection); False on any other loop (nothing to hold)."""
    selector = _SELECTORS.get(asyncio.get_running_loop())
    if selector is None:
        return False
    selector.hold = busy_elsewhere
    return True


def run(main: Coroutine[Any, Any, T], gap_s: float = GAP_S) -> T:
    """``asyncio.run(main)`` on a coalescing loop (on Python 3.10, which has no
    ``asyncio.Runner``, on the plain loop)."""
    runner = getattr(asyncio, "Runner", None)
    if runner is None:
        return asyncio.run(main)
    with runner(loop_factory=lambda: coalescing_loop(gap_s)) as r:
        return cast(T, r.run(main))
