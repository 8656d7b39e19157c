"""What every data screen shares: the header bar, the status line and the way the app draws
them."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from textual.binding import ActiveBinding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets.data_table import RowKey

from probes.analysis.job_watch import JobWatch
from probes.fleet_state import FleetState
from tui.messages import ViewRequested
from tui.views.fleet_rows import FleetRows
from widgets._alive import leaving
from widgets.header_bar import HeaderBar, Notice, StatusLine

APP_KEYS_KEPT = frozenset({"help", "quit"})
"""The app's keys every footer keeps; ``?`` lists the rest (the palette's ``^p`` too)."""
REPLAY_PREFIX = "replay_"
REPLAY_HIDES = frozenset({"retry_host"})
"""Keys a replay's footer leaves out: nothing there can be retried."""
SCREEN_KEYS_CROWD = 5
"""A screen with this many keys of its own shows only ``APP_KEYS_KEPT`` of the app's: the
footer must fit 80 columns (triage has six keys of its own)."""


@runtime_checkable
class ConsoleView(Protocol):
    """What a data screen reads of the console it is shown in, and asks of it: typed, so a
    screen never reads the app by a string name."""

    @property
    def window_s(self) -> float:
        """The charts' time window (``:window``); 0 shows everything kept."""

    @property
    def notice(self) -> Notice | None:
        """What the status line says now."""

    @property
    def job_watch(self) -> JobWatch:
        """The Slurm job watched (``--slurm-job``, ``:job``), for the reads that place ranks."""

    @property
    def replaying(self) -> bool:
        """Whether the console plays a recording (nothing to retry, no node actions)."""

    @property
    def audit_path(self) -> Path | None:
        """Where node actions are recorded; None is the user's data dir."""

    def retry_host(self, host: str) -> bool:
        """Connect to ``host`` now instead of at its next retry; False if not waiting."""

    def draw(self, screen: DataScreen) -> None:
        """Draw ``screen`` from the fleet state now."""

    @property
    def fleet_rows(self) -> FleetRows:
        """The fleet's rows, kept between redraws (the header's totals, the fleet screen)."""


def on_top(screen: Screen[Any]) -> bool:
    """Whether ``screen`` is the active screen (the top of the stack).

    A key, a submitted input or a deferred callback can reach a screen after it was
    popped (keys that arrive together, as over a slow SSH link): leaving again would pop
    the screen underneath, or fail on the last one.
    """
    stack = screen.app.screen_stack
    return bool(stack) and stack[-1] is screen


def row_key_text(key: RowKey | None) -> str | None:
    """A highlighted or selected row's key, or None (an emptied table highlights none)."""
    return None if key is None or key.value is None else str(key.value)


def shown(active: ActiveBinding, description: str | None = None) -> ActiveBinding:
    """``active`` listed in the footer (its binding's ``show`` on), re-worded if asked."""
    binding = dataclasses.replace(active.binding, show=True,
                                  description=description or active.binding.description)
    return active._replace(binding=binding)


def replay_footer(bindings: dict[str, ActiveBinding], app: object) -> dict[str, ActiveBinding]:
    """A replay's footer: its own keys first (pause, findings, ±10 min, speed, seek), then
    the screen's and help; no retry (a recording plays what was recorded), no palette hint,
    and not the other app keys (``?`` lists them): at 80 columns the replay keys show."""
    replay = {key: shown(b) for key, b in bindings.items()
              if b.binding.action.startswith(REPLAY_PREFIX)}
    rest = {key: b for key, b in bindings.items()
            if key not in replay and key != getattr(app, "COMMAND_PALETTE_BINDING", None)
            and b.binding.action not in REPLAY_HIDES
            and (b.node is not app or not b.binding.show or b.binding.action == "help")}
    return replay | rest


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

    @property
    def console(self) -> ConsoleView:
        """The console this screen is shown in."""
        app = self.app
        assert isinstance(app, ConsoleView), "a data screen runs in the rigwatch console"
        return app

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """The footer's keys: this screen's own first, then as many of the app's as fit.

        Only what is listed changes (Textual's footer reads this); every key still works.
        """
        bindings = self.footer_keys(super().active_bindings)
        if self.console.replaying:
            return replay_footer(bindings, self.app)
        own = sum(1 for b in bindings.values() if b.binding.show and b.node is not self.app)
        if own < SCREEN_KEYS_CROWD:
            return bindings
        palette = self.app.COMMAND_PALETTE_BINDING  # its hint too: ? lists it
        return {key: b for key, b in bindings.items()
                if key != palette and (b.node is not self.app or not b.binding.show
                                       or b.binding.action in APP_KEYS_KEPT)}

    def footer_keys(self, bindings: dict[str, ActiveBinding]) -> dict[str, ActiveBinding]:
        """The screen's keys as its footer should list them now (the wall lists its own)."""
        return bindings

    def on_mount(self) -> None:
        """Add the status line (docked above the footer), showing the app's current notice.

        Mounted here rather than in each screen's ``compose`` so that every data screen has
        one; Textual runs this as well as a subclass's own ``on_mount``.
        """
        line = StatusLine()
        line.notice = self.console.notice
        self.mount(line)
        # what is known, at once: waiting for the next redraw, a host opened by `:host`
        # read "waiting for hosts…" and "no findings" while its host was streaming
        if not leaving(self):
            self.console.draw(self)

    def show_notice(self, notice: Notice | None) -> None:
        """Put ``notice`` on this screen's status line (None clears it)."""
        for line in self.query(StatusLine):
            line.notice = notice

    def on_screen_resume(self) -> None:
        """Ask to be drawn now: after a push or a pop the data may be a tick old."""
        self.post_message(ViewRequested())

    def action_back(self) -> None:
        """Back to the screen underneath (once, however many Esc keys arrive)."""
        if on_top(self):
            self.dismiss()

    def show(self, fleet: FleetState, now: float, mode: str = "") -> None:
        """Push the current state into this screen's widgets; ``mode`` is the header's
        recording or replay note."""
        for bar in self.query(HeaderBar):
            bar.totals = self.console.fleet_rows.totals(now)
            bar.mode = mode
        # pushed but not composed yet: the next tick draws it
        with contextlib.suppress(NoMatches):
            self.show_state(fleet, now)

    def show_state(self, fleet: FleetState, now: float) -> None:
        """Screen-specific part of ``show``."""
        raise NotImplementedError
