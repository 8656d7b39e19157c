"""What every data screen shares: the header bar, the status line and the way the app draws
them."""

from __future__ import annotations

import contextlib

from textual.css.query import NoMatches
from textual.screen import Screen

from probes.fleet_state import FleetState
from tui.messages import ViewRequested
from widgets.header_bar import HeaderBar, Notice, StatusLine


class DataScreen(Screen[None]):
    """A screen that shows part of the fleet state.

    The app calls ``show`` on the active data screen only, every tick and on demand;
    hidden screens are not drawn but the state they read keeps being collected.
    """

    def __init__(self, subtitle: str) -> None:
        super().__init__()
        self.subtitle = subtitle

    def header(self) -> HeaderBar:
        """The header bar to yield from ``compose``."""
        return HeaderBar(self.subtitle)

    def on_mount(self) -> None:
        """Add the status line (docked above the footer), showing the app's current notice.

        Mounted here rather than in each screen's ``compose`` so that every data screen has
        one; Textual runs this as well as a subclass's own ``on_mount``.
        """
        line = StatusLine()
        line.notice = getattr(self.app, "notice", None)
        self.mount(line)

    def show_notice(self, notice: Notice | None) -> None:
        """Put ``notice`` on this screen's status line (None clears it)."""
        for line in self.query(StatusLine):
            line.notice = notice

    def on_screen_resume(self) -> None:
        """Ask to be drawn now: after a push or a pop the data may be a tick old."""
        self.post_message(ViewRequested())

    def show(self, fleet: FleetState, now: float, mode: str = "") -> None:
        """Push the current state into this screen's widgets; ``mode`` is the header's
        recording or replay note."""
        for bar in self.query(HeaderBar):
            bar.totals = fleet.totals(now)
            bar.mode = mode
        # pushed but not composed yet: the next tick draws it
        with contextlib.suppress(NoMatches):
            self.show_state(fleet, now)

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Screen-specific part of ``show``."""
        raise NotImplementedError
