"""The 1 Hz tick, which lets a key that is being handled finish first.

A tick at a thousand hosts takes tens of milliseconds (the rows, the table, the alerts);
a key read just before it was handled in hops (the focused widget, the screen, the app),
and the tick ran between them, so the key's repaint waited for the whole tick.  While a key
is in flight (``TypeaheadApp``), the tick waits until the screen has been refreshed after
it, once: a key that is still in flight then does not hold it back again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.app_base import ConsoleMixin


class KeyFirstTick(ConsoleMixin):
    """``_tick``: redraw and check alerts, after the key in flight has been drawn."""

    _tick_waited = False
    ticks_after_key = 0
    """Ticks that waited for a key in flight (tests count them)."""

    if TYPE_CHECKING:
        _in_flight: bool
        redraws: int

        def check_alerts(self) -> None: ...

    def _tick(self) -> None:
        if getattr(self, "_in_flight", False) and not self._tick_waited:
            self._tick_waited = True
            self.ticks_after_key += 1
            self.call_after_refresh(self._tick_after_key, self.redraws)
            return
        self._tick_waited = False
        self.refresh_view()
        self.check_alerts()

    def _tick_after_key(self, redraws: int) -> None:
        """The tick that waited (its redraw left out if another came meanwhile)."""
        if self._tick_waited:
            if self.redraws == redraws:
                self.refresh_view()
            self.check_alerts()
        self._tick_waited = False
