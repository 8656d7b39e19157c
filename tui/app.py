"""The rigwatch console: one app, fed by a backend, used by the CLI, the snapshots and the tests.

Data flow is one way.  The backend runs in a worker and only posts
``HostItemReceived``; the handler folds the item into ``FleetState`` (pure, no
I/O); a 1 s interval, and an immediate redraw when a host's status changes, push
fresh immutable rows into the active screen's widgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.worker import Worker, WorkerState

from probes.backend import Backend
from probes.fleet_state import FleetState
from probes.incident import TriageRecord
from probes.samples import Hello
from probes.session_events import Connected, Disconnected, SessionItem
from themes import CSS_PATH, DEFAULT_THEME, THEME_CYCLE, THEMES, fallback_variables
from tui.messages import HostChosen, HostItemReceived, ViewRequested
from tui.screens.base import DataScreen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from tui.screens.host import HostScreen
from tui.screens.preflight import PreflightScreen
from tui.screens.triage import TriageScreen

REFRESH_S = 1.0
QUIT_GRACE_S = 3.0
"""How long quitting waits for the backend to stop its agents before leaving anyway."""
Clock = Callable[[], float]


class RigwatchApp(App[None]):
    """The console; build it with ``make_app``."""

    CSS_PATH = CSS_PATH
    TITLE = "rigwatch"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("t", "triage", "Triage"),
        Binding("p", "preflight", "Preflight"),
        Binding("T", "next_theme", "Theme"),
    ]

    def __init__(self, backend: Backend, *, subtitle: str, clock: Clock) -> None:
        super().__init__()
        self.backend = backend
        self.fleet = FleetState(backend.specs)
        self.subtitle = subtitle
        self.sub_title = subtitle
        self._clock = clock
        self._redraw_pending = False
        self.triage_records: dict[str | None, TriageRecord] = {}
        """One operator record per scope (None: the fleet), kept while the console runs."""
        self.reports_dir: Path | None = None
        """Where triage writes reports; None is the user's data dir."""
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """Keep our stylesheet valid under Textual's built-in themes too."""
        return fallback_variables()

    def get_default_screen(self) -> FleetScreen:
        """The fleet overview is the bottom of the screen stack."""
        return FleetScreen(self.subtitle)

    def on_mount(self) -> None:
        """Start the backend and the redraw tick."""
        self.set_interval(REFRESH_S, self.refresh_view)
        self._run_backend()

    @work(exclusive=True, group="backend", exit_on_error=False, description="fleet backend")
    async def _run_backend(self) -> None:
        await self.backend.run(self._emit)

    def _emit(self, host: str, item: SessionItem) -> None:
        # post_message never blocks and is safe from any thread, as Emit requires.
        self.post_message(HostItemReceived(host, item))

    def on_host_item_received(self, message: HostItemReceived) -> None:
        """Fold the item into the fleet state; redraw soon if the host's status changed."""
        self.fleet.apply(message.host, message.item, self._clock())
        if isinstance(message.item, (Hello, Connected, Disconnected)):
            self._request_redraw()

    def _request_redraw(self) -> None:
        # call_later runs after the messages already queued, so a burst of hellos
        # (every host connecting at start) is drawn once.
        if not self._redraw_pending:
            self._redraw_pending = True
            self.call_later(self.refresh_view)

    def refresh_view(self) -> None:
        """Draw the active screen from the fleet state now."""
        self._redraw_pending = False
        screen = self.screen
        if isinstance(screen, DataScreen) and screen.is_mounted:
            screen.show(self.fleet, self._clock())

    def on_view_requested(self, _message: ViewRequested) -> None:
        """A data screen became active."""
        self._request_redraw()

    def on_host_chosen(self, message: HostChosen) -> None:
        """Open the chosen host."""
        self.push_screen(HostScreen(message.host, self.subtitle))

    @on(Worker.StateChanged)
    def _backend_state(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "backend":
            return
        if event.state is WorkerState.ERROR:
            self.notify(f"{event.worker.error}. Restart rigwatch to reconnect.",
                        title="Backend stopped", severity="error", timeout=30)
        elif event.state is WorkerState.SUCCESS:
            self.notify("The backend finished: no more data will arrive.",
                        title="Backend ended", severity="warning", timeout=30)

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

    def action_triage(self) -> None:
        """Open guided triage: for the host on screen, else for the whole fleet."""
        if isinstance(self.screen, TriageScreen):
            return
        host = self.screen.host if isinstance(self.screen, HostScreen) else None
        record = self.triage_records.setdefault(host, TriageRecord())
        self.push_screen(TriageScreen(self.subtitle, record, host, self.reports_dir))

    def action_preflight(self) -> None:
        """Open the preflight checklist for the whole fleet."""
        if not isinstance(self.screen, PreflightScreen):
            self.push_screen(PreflightScreen(self.subtitle))

    def action_help(self) -> None:
        """Show the key reference."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_next_theme(self) -> None:
        """Step to the next rigwatch theme."""
        try:
            i = THEME_CYCLE.index(self.theme)
        except ValueError:
            i = -1
        self.theme = THEME_CYCLE[(i + 1) % len(THEME_CYCLE)]


def make_app(
    backend: Backend, *, demo: bool, title: str | None = None, clock: Clock = time.time
) -> RigwatchApp:
    """Build the console.

    Args:
        backend: where items come from (live agents, a recording, fixed test data).
        demo: whether the fleet is the built-in simulated one; the header says so.
        title: what is being watched (an inventory name), shown next to "rigwatch".
        clock: wall-clock source for staleness; tests pass a frozen one.

    Returns:
        The app, not yet running.
    """
    subtitle = " · ".join(p for p in (title, "demo fleet" if demo else None) if p)
    return RigwatchApp(backend, subtitle=subtitle, clock=clock)
