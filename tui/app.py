"""The rigwatch console: one app, fed by a backend, used by the CLI, the snapshots and the tests.

Data flow is one way.  The backend runs in a worker on the app's own event loop and
each item it emits is folded into ``FleetState`` at once (pure, no I/O), without a
Textual message per item: at a thousand hosts that message was a third of the console.
A 1 s interval, and a redraw soon after a host's status changes (at most
``REDRAW_MIN_S`` apart, so a thousand hosts connecting draw a few times, not a thousand),
push fresh immutable rows into the active screen's widgets.

The app is made of mixins, one concern each (``tui.app_base`` says how): the backend's
feed into the fold (``app_feed``), the status line (``app_status_line``), alerts
(``app_alerts``), the Prometheus exports (``app_metrics``), screen actions and ``:``
commands (``app_screens``), replay keys (``app_replay_keys``), node actions
(``app_node_keys``) and themes (``app_themes``).  This module keeps the app's state, its
bindings, its start and stop, the redraw pacing and the help built from its keys.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.command import CommandPalette, Provider
from textual.dom import DOMNode
from textual.filter import LineFilter
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from probes.actions.slurm_node import ACTION_TIMEOUT_S
from probes.analysis.alerts import AlertPolicy, AlertTracker
from probes.analysis.hook import HookGate, HookResult
from probes.analysis.incident import TriageRecord
from probes.fleet_state import FleetState
from probes.outputs.metrics_server import MetricsServer
from probes.rules.logrules.scan_worker import ScanWorker
from probes.sources.base import Backend
from themes import CSS_PATH
from tui import gc_policy
from tui.app_alerts import AlertRaising
from tui.app_feed import BackendFeed
from tui.app_key_gc import KeyFirstGc
from tui.app_metrics import MetricsExport
from tui.app_node_keys import NodeKeys
from tui.app_replay_keys import ReplayKeys
from tui.app_screens import ScreenActions
from tui.app_status_line import StatusLine
from tui.app_themes import ThemeKeys
from tui.app_tick import KeyFirstTick
from tui.commands import offered
from tui.console_options import ConsoleOptions
from tui.glyphs import AsciiGlyphs
from tui.messages import ViewRequested
from tui.node_actions import ACTION_SCREENS, NODE_ACTIONS
from tui.palette import TEXTUAL_DUPLICATES, RigwatchCommands, SteadyPalette
from tui.screens.base import DataScreen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen, Section, build_sections, own_bindings
from tui.screens.host import HostScreen
from tui.screens.job import JobScreen
from tui.screens.preflight import PreflightScreen
from tui.screens.triage import TriageScreen
from tui.typeahead import TypeaheadApp
from tui.views.alert_notice import NAMED
from tui.views.fleet_rows import FleetRows
from widgets.fleet_wall import FleetWall
from widgets.header_bar import Notice

REFRESH_S = 1.0
REDRAW_MIN_S = 0.25
"""Status changes (connects, hellos, drops) redraw at most this often: a burst of them
is drawn about four times a second however many hosts it holds."""
MAX_TOASTS = NAMED
"""More hosts raising alerts in one tick than this are named as "and N more"."""
HELP_SCREENS: tuple[tuple[str, type[DOMNode]], ...] = (
    ("Fleet", FleetScreen), ("Wall (w)", FleetWall), ("Host", HostScreen),
    ("Triage (t)", TriageScreen), ("Preflight (p)", PreflightScreen),
    ("Job (:job ID)", JobScreen))
"""Whose keys the help lists, in this order after the screen it was opened from."""
Clock = Callable[[], float]
FINDINGS = Binding.Group("finding", compact=True)
TEN_MIN = Binding.Group("10 min", compact=True)
SPEED = Binding.Group("speed", compact=True)


class RigwatchApp(ScreenActions, NodeKeys, ReplayKeys, AlertRaising, MetricsExport,
                  BackendFeed, KeyFirstTick, KeyFirstGc, StatusLine, ThemeKeys,
                  TypeaheadApp):
    """The console; build it with ``make_app``."""

    CSS_PATH = CSS_PATH
    TITLE = "rigwatch"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="quit (stops every agent first)"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="this help"),
        Binding("t", "triage", "Triage",
                tooltip="guided triage: the fleet, or the host on screen"),
        Binding("p", "preflight", "Preflight",
                tooltip="preflight: every host against the training-server checklist"),
        Binding("T", "next_theme", "Theme", show=False,
                tooltip="next theme: dark, light, high contrast, colour-blind safe"),
        Binding("colon", "command_line", "Command", key_display=":", show=False,
                tooltip="command line: host NAME, window 6h, sort worst …"),
        # replay keys: hidden elsewhere, a replay's footer lists them (in groups)
        Binding("space", "replay_pause", "Pause", show=False, tooltip="pause or resume"),
        Binding("less_than_sign", "replay_finding(-1)", "Prev finding", show=False,
                tooltip="jump to the previous recorded finding", group=FINDINGS),
        Binding("greater_than_sign", "replay_finding(1)", "Next finding", show=False,
                tooltip="jump to the next recorded finding", group=FINDINGS),
        Binding("left_square_bracket", "replay_step(-600)", "-10 min", show=False,
                tooltip="10 minutes earlier", group=TEN_MIN),
        Binding("right_square_bracket", "replay_step(600)", "+10 min", show=False,
                tooltip="10 minutes later", group=TEN_MIN),
        Binding("minus", "replay_speed(-1)", "Slower", show=False, tooltip="slower",
                group=SPEED),
        Binding("plus,equals_sign", "replay_speed(1)", "Faster", show=False,
                tooltip="faster (up to ×600)", group=SPEED),
        Binding("at", "replay_seek", "Seek", show=False,
                tooltip="seek to a time: +10m, -1h, 03:12, an ISO time"),
        # not in the footer (``?`` lists them): a host screen's footer is full at 80 columns
        Binding("D", "node_drain", "Drain", show=False,
                tooltip="drain this node in Slurm (the host, the job's failing rank, triage's "
                        "first failure): preview, type its name to confirm, audited"),
        Binding("U", "node_resume", "Resume", show=False,
                tooltip="resume this node in Slurm once a fresh read finds the cause gone "
                        "(else refused; a typed reason overrides), audited"),
    ]

    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {RigwatchCommands}
    """Rigwatch's commands first, then Textual's own (``RigwatchCommands`` lists both)."""

    def __init__(self, backend: Backend, options: ConsoleOptions, *, clock: Clock) -> None:
        super().__init__()
        self.backend = backend
        detectors, preflight = options.detectors, options.preflight
        self.detector_limits, self.preflight_limits = detectors, preflight
        self.scan_worker = ScanWorker(self._scans_found) if options.scan_logs_apart else None
        """The thread that runs the log rules off this loop (the CLI's consoles)."""
        self.fleet = FleetState(backend.specs, detectors, preflight, self.scan_worker)
        self.fleet.topology = options.topology
        self.fleet_rows = FleetRows(self.fleet)
        """The fleet's rows, kept between redraws (the view over ``fleet``)."""
        self.job_watch = options.job_watch
        """The Slurm job watched (``--slurm-job``, ``:job``): the console's, not the fold's;
        handed to the reads that place ranks."""
        self.alert_policy = options.alerts or AlertPolicy()
        self.alerts = AlertTracker(self.alert_policy)
        self.hook_results: list[HookResult] = []
        """Finished hook runs, newest last (kept for tests and the status line)."""
        self.hook_gate = HookGate(self.alert_policy.hook_at_once, self.alert_policy.hook_waiting)
        self.metrics_textfile = options.metrics_textfile
        """Where to write Prometheus text every ``METRICS_EVERY_S`` (node_exporter's textfile
        collector), if anywhere."""
        self.metrics_port = options.metrics_port
        """Serve ``/metrics`` on 127.0.0.1 at this port, if set."""
        self._metrics_server: MetricsServer | None = None
        self.window_s = 3600.0
        """The charts' time window (``:window``); 0 shows everything kept."""
        self.ascii_glyphs = options.ascii_glyphs
        """Draw plain ASCII instead of braille, blocks and boxes (``tui.glyphs``)."""
        self._ascii_filter = AsciiGlyphs()
        if backend.replay is not None:
            backend.replay.on_rewind = self._rewind
            clock = backend.replay.now
        self.subtitle = self.sub_title = options.subtitle
        self._clock = clock
        self._redraw_pending = False
        self._last_draw = -REDRAW_MIN_S
        """``time.monotonic()`` of the last redraw."""
        self.redraws = 0
        """Redraws of the active screen so far (tests and benches count them)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._worker_context: contextvars.Context | None = None
        """The app's context (its active app), in which the log worker's news is taken."""
        self.triage_records: dict[str | None, TriageRecord] = {}
        """One operator record per scope (None: the fleet), kept while the console runs."""
        self.reports_dir: Path | None = None
        """Where triage writes reports; None is the user's data dir."""
        self._register_themes(options.theme)
        self.notice: Notice | None = None
        """What the status line says now (every data screen shows it)."""
        self._notice_serial = 0
        self.read_only = backend.replay is not None or options.read_only
        """No node actions: ``D``, ``U`` and ``:drain``/``:resume`` are gone (``--read-only``,
        ``read_only: true``, and always in a replay: it shows the past)."""
        self.audit_path = options.audit_path
        """Where node actions are recorded; None is the user's data dir."""
        self.action_timeout_s = ACTION_TIMEOUT_S

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Textual's palette entries, less the two that ``:quit`` and ``:theme`` are."""
        return (c for c in super().get_system_commands(screen)
                if c.title not in TEXTUAL_DUPLICATES)

    def action_command_palette(self) -> None:
        """The palette (Ctrl+P), guarded against keys that arrive together."""
        if self.use_command_palette and not CommandPalette.is_open(self):  # type: ignore[arg-type]
            self.push_screen(SteadyPalette())  # no id: the one going out may still hold it

    def get_default_screen(self) -> FleetScreen:
        """The fleet overview is the bottom of the screen stack."""
        return FleetScreen(self.subtitle)

    async def on_mount(self) -> None:
        """Start the backend, the redraw tick and the metrics exports that were asked for."""
        self._loop, self._loop_thread = asyncio.get_running_loop(), threading.get_ident()
        if self.scan_worker is not None:
            self._worker_context = contextvars.copy_context()  # the app's, for the worker's calls
            self.scan_worker.start()
        self.set_interval(REFRESH_S, self._tick)
        if gc_policy.tuned():
            for after in gc_policy.REFREEZE_AFTER_S:
                self.set_timer(after, gc_policy.refreeze)
        self._run_backend()
        await self._start_metrics()

    def on_unmount(self) -> None:
        """Close the scrape endpoint and any connection it still holds; stop the log worker."""
        if self._metrics_server is not None:
            self._metrics_server.close()
        if self.scan_worker is not None:
            self.scan_worker.stop()

    def _request_redraw(self) -> None:
        """Redraw soon: after what is queued, and no sooner than ``REDRAW_MIN_S`` after the
        last redraw, so one burst of connects is drawn a few times, not once per host."""
        if self._redraw_pending:
            return
        self._redraw_pending = True
        wait = self._last_draw + REDRAW_MIN_S - time.monotonic()
        if wait <= 0:
            self.call_later(self._redraw_due)
        else:
            self.set_timer(wait, self._redraw_due)

    def _redraw_due(self) -> None:
        # a tick may have drawn in the meantime
        if self._redraw_pending:
            self.refresh_view()

    def refresh_view(self) -> None:
        """Draw the active screen from the fleet state now."""
        self._redraw_pending = False
        self._last_draw = time.monotonic()
        self.redraws += 1
        self.fleet.tick(self._clock())
        if not self.screen_stack:
            return  # a redraw that was due as the app closed: nothing is left to draw
        if isinstance(screen := self.screen, DataScreen) and screen.is_mounted:
            self.draw(screen)

    def draw(self, screen: DataScreen) -> None:
        """Draw ``screen`` from the fleet state now (a screen does as soon as it is
        composed, so it never shows its empty state over what is known)."""
        screen.show(self.fleet, self._clock(), self.mode_text())

    def mode_text(self) -> str:
        """The header's note on where the data comes from: a replay position or recording."""
        return self.backend.mode_text()

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters (NO_COLOR among them), then plain glyphs when asked for."""
        filters = super().get_line_filters()
        return [*filters, self._ascii_filter] if self.ascii_glyphs else filters

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Replay keys exist only in a replay; node actions only on a screen about a node,
        and never in read-only mode."""
        if action.startswith("replay_"):
            return self.backend.replay is not None
        if action in NODE_ACTIONS:
            return not self.read_only and isinstance(self.screen, ACTION_SCREENS)
        return True

    def on_view_requested(self, _message: ViewRequested) -> None:
        """A data screen became active."""
        self._request_redraw()

    @on(Worker.StateChanged)
    def _backend_state(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "backend":
            return
        if event.state is WorkerState.ERROR:
            text = f"{event.worker.error}. Restart rigwatch to reconnect."
            self.notify(text, markup=False, title="Backend stopped", severity="error", timeout=30)
        elif event.state is WorkerState.SUCCESS:
            text = "The backend finished: no more data will arrive."
            self.notify(text, markup=False, title="Backend ended", severity="warning", timeout=30)

    def action_help(self) -> None:
        """Show the key reference, generated from the bindings."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_sections()))

    def help_sections(self) -> list[Section]:
        """Every key of the app and of each screen; the screen on show first."""
        here = next((title for title, cls in HELP_SCREENS if type(self.screen) is cls), None)
        if isinstance(self.screen, FleetScreen) and self.screen.wall:
            here = HELP_SCREENS[1][0]
        screens = [(title, own_bindings(cls)) for title, cls in HELP_SCREENS]
        app_keys = [b for b in own_bindings(RigwatchApp)
                    if not (self.read_only and b.action in NODE_ACTIONS)]
        commands = tuple((c.line, c.help) for c in offered(self.read_only))
        return build_sections(app_keys, screens, self.get_key_display, here, commands)


def make_app(backend: Backend, options: ConsoleOptions | None = None, *,
             clock: Clock = time.time) -> RigwatchApp:
    """Build the console: everything it starts with is in ``options`` (the callers write
    no attribute of it afterwards).

    Args:
        backend: where items come from (live agents, a recording, fixed test data).
        options: how it watches, judges, shows and exports (default: a plain console).
        clock: wall-clock source for staleness; tests pass a frozen one (a replay brings
            its own).

    Returns:
        The app, not yet running.

    Raises:
        ConfigError: ``options.theme`` names no theme of the console's.
    """
    return RigwatchApp(backend, options or ConsoleOptions(), clock=clock)
