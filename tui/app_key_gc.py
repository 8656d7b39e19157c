"""Young collections wait while a key is handled and drawn.

At a thousand hosts the fold leaves so many short-lived containers that a young collection
(``gc_policy.STREAMING_THRESHOLDS``) runs every second or two and takes 10-90 ms; one that
starts inside a key's handler or its repaint is added to what the operator waits for (4 of
the 5 slowest of 40 fleet presses in ``bench_fleet_keys --cycle fleet`` at 1024 hosts;
issue 38).  While a key is in flight (``TypeaheadApp``) the collector is off; it is on again
once the key has landed and the screen has been refreshed after it, so the collection that
fell due runs then, after the key is on screen.  Nothing is collected less: the objects
wait, the collection comes a few tens of milliseconds later.

Only under the console's streaming settings (``gc_policy.tuned``: the console's entry
point, never a test runner unless it asks), never longer than ``KEY_GC_HOLD_S`` from the
first key held (a storm of keys does not starve the collector), and never where something
else turned the collector off.
"""

from __future__ import annotations

import asyncio
import gc
import time

from textual import events

from tui import gc_policy
from tui.app_base import ConsoleMixin
from tui.typeahead import keys_in_flight

KEY_GC_HOLD_S = 0.5
"""The longest the collector stays off for keys, from the first key that turned it off:
then it is on again (and the key after turns it off anew)."""


class KeyFirstGc(ConsoleMixin):
    """The collector off from a key's arrival until its repaint (see the module)."""

    _gc_held_since: float | None = None
    """When a key turned the collector off (None: it is not held for keys)."""
    gc_holds = 0
    """Times a key turned the collector off (tests count them)."""
    gc_hold_enabled: bool | None = None
    """Whether keys hold the collector: None follows ``gc_policy.tuned`` (tests set it)."""

    async def on_event(self, event: events.Event) -> None:
        """A key read from the terminal turns the collector off before it is handled."""
        if isinstance(event, events.Key) and not event.is_forwarded and self._gc_holds():
            self._hold_gc()
        await super().on_event(event)

    def _gc_holds(self) -> bool:
        enabled = self.gc_hold_enabled
        return gc_policy.tuned() if enabled is None else enabled

    def _hold_gc(self) -> None:
        since = self._gc_held_since
        now = time.monotonic()
        if since is not None:
            if now - since >= KEY_GC_HOLD_S:
                self._resume_gc()  # held long enough: this key may meet a collection
            return
        if not gc.isenabled():
            return  # off for some other reason: not ours to turn on again
        gc.disable()
        self._gc_held_since = now
        self.gc_holds += 1
        asyncio.get_running_loop().call_later(KEY_GC_HOLD_S, self._gc_timed_out, now)

    def _release_next(self) -> None:
        """The key in flight has landed: the collector is on again once the screen has
        been refreshed after it and no key is in flight."""
        if self._gc_held_since is not None and not self.call_after_refresh(self._gc_after_key):
            self._resume_gc()  # closing: no refresh to wait for
        super()._release_next()

    def _gc_after_key(self) -> None:
        if not keys_in_flight(self):
            self._resume_gc()

    def _gc_timed_out(self, since: float) -> None:
        if self._gc_held_since == since:
            self._resume_gc()

    def _resume_gc(self) -> None:
        if self._gc_held_since is not None:
            self._gc_held_since = None
            gc.enable()

    def on_unmount(self) -> None:
        """The collector is on again when the console stops, whatever a key held (Textual
        runs each class's ``on_unmount`` along the app's MRO: no ``super`` call)."""
        self._resume_gc()
