"""The backend's feed into the fold: the worker that runs it, its items folded on the loop.

Apart from ``tui.app`` because it is the console's one data path (backend → ``FleetState``),
with its thread hand-offs (a backend or the log worker calling from another thread), a
replay's rewind, and quitting, which must stop the backend before the loop goes.  How the
fold is drawn (the redraw pacing) stays with the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from functools import partial

from textual import work

from probes.analysis.alerts import AlertTracker
from probes.fleet_state import FleetState
from probes.sources.collectors import INPUT_PENDING
from probes.wire.events import Connected, Disconnected, SessionItem
from probes.wire.samples import Hello
from tui.app_base import ConsoleMixin
from tui.typeahead import keys_in_flight
from tui.views.fleet_rows import FleetRows

QUIT_GRACE_S = 3.0
"""How long quitting waits for the backend to stop its agents before leaving anyway."""


class BackendFeed(ConsoleMixin):
    """Run the backend and fold what it emits, in arrival order, on the app's loop."""

    def _scans_found(self) -> None:
        """The log worker found something (on its thread): redraw soon, on the loop."""
        loop, context = self._loop, self._worker_context
        if loop is not None and context is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._take_scans, context=context)

    def _take_scans(self) -> None:
        if self.fleet.take_scans():
            self._request_redraw()

    @work(exclusive=True, group="backend", exit_on_error=False, description="fleet backend")
    async def _run_backend(self) -> None:
        INPUT_PENDING.set(partial(keys_in_flight, self))  # the fold gives way to a key
        await self.backend.run(self._emit)

    def _emit(self, host: str, item: SessionItem) -> None:
        """The backend's ``Emit``: fold at once on the app's loop (where every backend runs);
        from another thread, hand it to the loop (never blocking, as Emit requires)."""
        if threading.get_ident() == self._loop_thread or self._loop is None:
            self.fold(host, item)
        else:
            self._loop.call_soon_threadsafe(self.fold, host, item)

    def fold(self, host: str, item: SessionItem) -> None:
        """Fold the item into the fleet state, in arrival order; redraw soon if the host's
        status changed (samples wait for the tick)."""
        self.fleet.apply(host, item, self._clock())
        if isinstance(item, (Hello, Connected, Disconnected)):
            self._request_redraw()

    def _rewind(self) -> None:
        """A replay seek starts over: a fresh picture of the fleet."""
        old = self.fleet
        self.fleet = FleetState(self.backend.specs, self.detector_limits,
                                self.preflight_limits, self.scan_worker)
        self.fleet.topology = old.topology
        self.fleet_rows = FleetRows(self.fleet)
        self.alerts = AlertTracker(self.alert_policy)

    async def action_quit(self) -> None:
        """Stop the backend first, so every agent gets EOF and is reaped, then exit.

        Textual cancels workers on exit without waiting for them; a session's
        cleanup would then run after the loop is gone and leave processes behind.
        """
        workers = [w for w in self.workers if w.group == "backend"]
        for worker in workers:
            worker.cancel()
        waits = asyncio.gather(*(w.wait() for w in workers), return_exceptions=True)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(waits, QUIT_GRACE_S)
        self.exit()

    def request_quit(self) -> None:
        """Quit in a worker (``action_quit`` waits for the backend to stop)."""
        self.run_worker(self.action_quit(), group="quit")
