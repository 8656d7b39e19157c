"""asyncssh's keepalive with the same deadlines, without a new timer for every packet read.

asyncssh re-arms its keepalive timer on every read (``_recv_data`` → ``_reset_keepalive_timer``:
a ``TimerHandle.cancel`` and a fresh ``loop.call_later``, and the cancelled handle stays in the
loop's heap until it is swept).  A host streaming at 1 Hz reads several packets a second, and
at 256 hosts that re-arming was about a tenth of a collector's CPU under the profiler
(RESULTS.md, "#38 the collector's CPU (session 7)").

Here a read only notes its time.  The one armed timer, when it fires, checks that note: if a
read came within the interval it re-arms for the rest of it and counts nothing; otherwise it
runs asyncssh's own callback (count a miss, send ``keepalive@openssh.com``, or drop the
connection after ``keepalive_count_max`` misses).  Every keepalive request and every drop
therefore happens at the time asyncssh's own timer would have chosen: the last read plus the
interval (``tests/transport/test_ssh_keepalive.py`` replays random reads on a virtual clock
through both and compares them).

Installed on a connection's instance, so asyncssh itself is unchanged.  If a future asyncssh
lacks any attribute this relies on, the connection keeps asyncssh's own keepalive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from probes.transport import loop_clock

_NEEDS = ("_auth_complete", "_keepalive_interval", "_keepalive_timer", "_loop",
          "_reset_keepalive_timer", "_keepalive_timer_callback", "_set_keepalive_timer")


class LazyKeepalive:
    """The keepalive timer of one asyncssh connection, re-armed only when it fires."""

    __slots__ = ("_callback", "_conn", "_last_read", "_now")

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._now: Callable[[], float] = loop_clock(conn._loop)
        """The loop's clock, without a Python frame where it is asyncio's (a read a chunk)."""
        self._last_read: float = conn._loop.time()
        self._callback: Callable[[], None] = conn._keepalive_timer_callback
        """asyncssh's own callback (bound), run when a deadline really passes."""

    def reset(self) -> None:
        """In place of ``_reset_keepalive_timer``: note the read; arm only if nothing is."""
        conn = self._conn
        if conn._auth_complete:
            self._last_read = self._now()
            if conn._keepalive_timer is None:
                conn._set_keepalive_timer()

    def fire(self) -> None:
        """In place of ``_keepalive_timer_callback``: a read since means the deadline moved."""
        conn = self._conn
        left = self._last_read + conn._keepalive_interval - conn._loop.time()
        if left > 0:
            conn._keepalive_timer = conn._loop.call_later(left, self.fire)
            return
        self._callback()


def lazy_keepalive(conn: Any) -> LazyKeepalive | None:
    """Give ``conn`` the lazily re-armed timer; None (asyncssh's own kept) if it cannot.

    Installed right after the connection is made: asyncssh looks both methods up on the
    instance, so its own ``_set_keepalive_timer`` arms ``fire`` from then on.  The timer it
    armed at the end of authentication is re-armed here, from now (the handshake's last read),
    so that it too only fires through ``fire``.
    """
    if not all(hasattr(conn, name) for name in _NEEDS):
        return None
    lazy = LazyKeepalive(conn)
    conn._reset_keepalive_timer = lazy.reset
    conn._keepalive_timer_callback = lazy.fire
    if conn._keepalive_timer is not None:
        conn._keepalive_timer.cancel()
        conn._keepalive_timer = None
        conn._set_keepalive_timer()
    return lazy
