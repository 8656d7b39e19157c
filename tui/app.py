"""The rigwatch console: one app, fed by a backend, used by the CLI, the snapshots and the tests.

Data flow is one way.  The backend runs in a worker on the app's own event loop and
each item it emits is folded into ``FleetState`` at once (pure, no I/O), without a
Textual message per item: at a thousand hosts that message was a third of the console.
A 1 s interval, and a redraw soon after a host's status changes (at most
``REDRAW_MIN_S`` apart, so a thousand hosts connecting draw a few times, not a thousand),
push fresh immutable rows into the active screen's widgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.command import CommandPalette, Provider
from textual.dom import DOMNode
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from probes.actions.audit import AuditRecord, NodeAction, Outcome
from probes.actions.slurm_node import ACTION_TIMEOUT_S
from probes.analysis.alerts import Alert, AlertPolicy, AlertTracker
from probes.analysis.hook import HookGate, HookResult
from probes.analysis.incident import TriageRecord
from probes.errors import ConfigError
from probes.fleet_state import FleetState, HostStatus
from probes.outputs.export import HostExport, prometheus_text, write_textfile
from probes.outputs.metrics_server import MetricsServer, serve_metrics
from probes.rules.logrules.scan_worker import ScanWorker
from probes.sources.base import Backend, ReplayControls
from probes.sources.replay import ReplayError, parse_seek
from probes.triage import Severity
from probes.wire.events import Connected, Disconnected, SessionItem
from probes.wire.samples import Hello
from themes import CSS_PATH, DEFAULT_THEME, THEME_CYCLE, THEMES, fallback_variables
from tui import gc_policy
from tui.commands import WINDOWS, CommandError, offered, run_command, window_note
from tui.console_options import ConsoleOptions
from tui.glyphs import AsciiGlyphs
from tui.messages import HostChosen, ViewRequested
from tui.node_actions import ACTION_SCREENS, NODE_ACTIONS, target_of
from tui.node_actions import context as node_context
from tui.palette import TEXTUAL_DUPLICATES, RigwatchCommands, SteadyPalette
from tui.screens.base import DataScreen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen, Section, build_sections, own_bindings
from tui.screens.host import HostScreen
from tui.screens.job import JobScreen
from tui.screens.note import COMMAND_HINT, SEEK_HINT, NoteScreen
from tui.screens.preflight import PreflightScreen
from tui.screens.triage import TriageScreen
from tui.typeahead import TypeaheadApp
from tui.views.alert_notice import NAMED, alert_text, landed_text
from tui.views.fleet_rows import FleetRows
from widgets.fleet_wall import FleetWall
from widgets.header_bar import Notice, NoticeLevel

REFRESH_S = 1.0
REDRAW_MIN_S = 0.25
"""Status changes (connects, hellos, drops) redraw at most this often: a burst of them
is drawn about four times a second however many hosts it holds."""
METRICS_EVERY_S = 15.0
"""Textfile refresh: node_exporter reads it on its own scrape interval (15 s typical)."""
MAX_TOASTS = NAMED
"""More hosts raising alerts in one tick than this are named as "and N more"."""
NOTICE_S = 6.0
"""How long a notice stays on the status line (alerts and reports stay longer)."""
ALERT_NOTICE_S = 15.0
"""Alerts stay longer: the operator may be looking at another window when they arrive."""
HELP_SCREENS: tuple[tuple[str, type[DOMNode]], ...] = (
    ("Fleet", FleetScreen), ("Wall (w)", FleetWall), ("Host", HostScreen),
    ("Triage (t)", TriageScreen), ("Preflight (p)", PreflightScreen),
    ("Job (:job ID)", JobScreen))
"""Whose keys the help lists, in this order after the screen it was opened from."""
HOOK_RESULTS_KEPT = 100
"""Finished hook runs remembered (newest); older ones are forgotten."""
QUIT_GRACE_S = 3.0
"""How long quitting waits for the backend to stop its agents before leaving anyway."""
Clock = Callable[[], float]
FINDINGS = Binding.Group("finding", compact=True)
TEN_MIN = Binding.Group("10 min", compact=True)
SPEED = Binding.Group("speed", compact=True)


class RigwatchApp(TypeaheadApp):
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
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME
        # the palette's theme list is ours only: Textual's twenty would leave the console's
        # semantic colours on fallbacks, and `T` steps through these four anyway
        for name in list(self.available_themes):
            if name not in THEME_CYCLE:
                self.unregister_theme(name)
        if options.theme is not None:
            if options.theme not in self.available_themes:
                names = ", ".join(sorted(self.available_themes))
                raise ConfigError(f"rigwatch: unknown theme {options.theme!r} "
                                  f"(available: {names})")
            self.theme = options.theme
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

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """Keep our stylesheet valid under any other theme (Textual's are unregistered, but
        a theme set before that, or registered later, must not fail the stylesheet)."""
        return fallback_variables()

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
        if self.metrics_textfile is not None:
            self.set_interval(METRICS_EVERY_S, self._write_metrics)
        if self.metrics_port is not None:
            try:
                self._metrics_server = await serve_metrics(self.metrics_port,
                                                           self.metrics_text)
            except OSError as exc:
                text = f"cannot serve metrics on 127.0.0.1:{self.metrics_port}: " \
                    f"{exc.strerror or exc}"
                self.notify(text, markup=False, severity="error", timeout=30)

    def on_unmount(self) -> None:
        """Close the scrape endpoint and any connection it still holds; stop the log worker."""
        if self._metrics_server is not None:
            self._metrics_server.close()
        if self.scan_worker is not None:
            self.scan_worker.stop()

    def _scans_found(self) -> None:
        """The log worker found something (on its thread): redraw soon, on the loop."""
        loop, context = self._loop, self._worker_context
        if loop is not None and context is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._take_scans, context=context)

    def _take_scans(self) -> None:
        if self.fleet.take_scans():
            self._request_redraw()

    def metrics_text(self) -> str:
        """The fleet now, in Prometheus text format (dcgm-exporter names)."""
        return prometheus_text(
            HostExport(s.name, s.hello, s.last, tuple(s.findings()),
                       s.status is HostStatus.STREAMING) for s in self.fleet.hosts.values())

    async def _write_metrics(self) -> None:
        path = self.metrics_textfile
        if path is None:
            return
        try:
            await asyncio.to_thread(write_textfile, path, self.metrics_text())
        except OSError as exc:
            self.metrics_textfile = None
            text = f"stopped writing {path}: {exc.strerror or exc}"
            self.notify(text, markup=False, severity="error", timeout=30)

    @work(exclusive=True, group="backend", exit_on_error=False, description="fleet backend")
    async def _run_backend(self) -> None:
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

    def check_alerts(self) -> None:
        """Raise new alerts: a notification, the bell, the hook, and a mark in the recording.

        A replay raises none: it would page people for the past.
        """
        if not self.backend.raises_alerts:
            return
        now = self._clock()
        self.fleet.tick(now)
        findings = self.fleet.all_findings(watch=self.job_watch)
        raised = self.alerts.update(findings, now, hosts=len(self.fleet.hosts))
        by_host: dict[str, list[Alert]] = {}
        for alert in raised:
            if alert.event == "alert":
                by_host.setdefault(alert.finding.host, []).append(alert)
        if self.alert_policy.notify:
            self._notify_alerts(by_host)
            if raised and not by_host:  # recoveries only: said quietly, no bell
                self.say(" · ".join(f"{a.finding.host}: {a.finding.summary}" for a in raised))
        if by_host and self.alert_policy.bell:
            self.bell()
        dropped = 0
        for alert in raised:
            f = alert.finding
            if self.alert_policy.hook:
                if self.hook_gate.admit():
                    self.run_worker(self._hook(alert), group="hooks", exit_on_error=False)
                else:
                    dropped += 1
            self.backend.record_alert(f, f.ts if f.ts is not None else now)
        if dropped:
            text = f"{dropped} alert hook run(s) dropped: {self.hook_gate.at_once} running " \
                f"and {self.hook_gate.waiting} waiting already"
            self.notify(text, markup=False, title="Alert hook", severity="warning", timeout=15)

    def _notify_alerts(self, by_host: dict[str, list[Alert]]) -> None:
        """One status-line notice for the tick's alerts, worst host and finding first.

        One incident shows as several findings (Xid, fallen off the bus, GPU lost), and a
        rack losing power, or a console starting on a troubled fleet, raises many hosts in
        one tick.  A toast would sit over the rows that already list them; the status line
        takes its own row above the footer.
        """
        if not by_host:
            return
        tops = []
        for host, alerts in by_host.items():
            alerts.sort(key=lambda a: -a.finding.severity.rank)
            tops.append((host, alerts[0].finding, len(alerts)))
        tops.sort(key=lambda t: (-t[1].severity.rank, t[0]))
        worst = tops[0][1].severity
        level: NoticeLevel = "critical" if worst is Severity.CRITICAL else "warning"
        # one line of the status line (its padding aside): never two over the table
        text = alert_text(tops, self.size.width - 2)
        self.say(text, level, ALERT_NOTICE_S)

    def say(self, text: str, level: NoticeLevel = "information",
            timeout: float = NOTICE_S) -> None:
        """Put ``text`` on the status line of every data screen for ``timeout`` seconds.

        The newest notice replaces the one before; a notice never covers the screen.
        """
        self._notice_serial += 1
        serial = self._notice_serial
        self._show_notice(Notice(text, level))

        def expire() -> None:
            if self._notice_serial == serial:
                self._show_notice(None)

        self.set_timer(timeout, expire)

    def _show_notice(self, notice: Notice | None) -> None:
        self.notice = notice
        for screen in self.screen_stack:
            if isinstance(screen, DataScreen):
                screen.show_notice(notice)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Errors toast (in a small corner box); everything else goes to the status line.

        Screens keep calling ``notify`` (a sort order, "Report written …"): the news lands
        on the status line, as text (never markup), where it covers nothing.
        """
        if severity == "error":
            # never markup: an error quotes hosts, paths and OS messages
            super().notify(message, title=title, severity=severity, timeout=timeout,
                           markup=False)
            return
        text = f"{title}: {message}" if title else message
        self.say(text, "warning" if severity == "warning" else "information",
                 timeout if timeout is not None else NOTICE_S)

    async def _hook(self, alert: Alert) -> None:
        result = await self.hook_gate.run(self.alert_policy.hook, alert,
                                          self.alert_policy.hook_timeout_s)
        self.hook_results = [*self.hook_results[-(HOOK_RESULTS_KEPT - 1):], result]
        if not result.ok:
            text = result.error or "the alert hook failed"
            self.notify(text, markup=False, title="Alert hook", severity="warning", timeout=15)

    def _rewind(self) -> None:
        """A replay seek starts over: a fresh picture of the fleet."""
        old = self.fleet
        self.fleet = FleetState(self.backend.specs, self.detector_limits,
                                self.preflight_limits, self.scan_worker)
        self.fleet.topology = old.topology
        self.fleet_rows = FleetRows(self.fleet)
        self.alerts = AlertTracker(self.alert_policy)

    def _tick(self) -> None:
        self.refresh_view()
        self.check_alerts()

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

    def action_node_drain(self) -> None:
        """``D``: drain the node this screen is about, after a preview."""
        self._node_key(NodeAction.DRAIN)

    def action_node_resume(self) -> None:
        """``U``: resume the node this screen is about once its cause is gone."""
        self._node_key(NodeAction.RESUME)

    def _node_key(self, action: NodeAction) -> None:
        try:
            self.node_action(action, None)
        except CommandError as exc:
            self.notify(str(exc), severity="warning", timeout=8, markup=False)

    def node_action(self, action: NodeAction, node: str | None) -> None:
        """Open the drain or resume box for ``node`` (None: the one this screen is about).

        Raises:
            CommandError: read-only, or no node to act on here.
        """
        from tui.screens.node_action import NodeActionScreen

        if self.read_only:
            raise CommandError("read-only: rigwatch takes no action on nodes in this session")
        target = target_of(self.fleet, self.screen, node, self.job_watch)
        ctx = node_context(self.audit_path, self.action_timeout_s, self.detector_limits)

        def done(rec: AuditRecord | None) -> None:
            if rec is not None:
                self.say(rec.line(), "information" if rec.outcome is Outcome.DONE
                         else "warning", ALERT_NOTICE_S)

        self.push_screen(NodeActionScreen(action, target, ctx), done)

    def _replay(self) -> ReplayControls | None:
        return self.backend.replay

    def action_replay_pause(self) -> None:
        """Pause or resume the replay."""
        if (r := self._replay()) is not None:
            r.toggle_pause()
            self.refresh_view()

    def action_replay_speed(self, step: int) -> None:
        """Replay faster or slower (×1 … ×600)."""
        if (r := self._replay()) is not None:
            r.faster(step)
            self.refresh_view()

    def action_replay_step(self, seconds: float) -> None:
        """Seek the replay by ``seconds``."""
        if (r := self._replay()) is not None:
            r.seek(r.now() + seconds)

    def action_replay_finding(self, direction: int) -> None:
        """Jump to the next (or previous) recorded finding and say which it is."""
        if (r := self._replay()) is None:
            return
        t = r.next_finding() if direction > 0 else r.previous_finding()
        if t is None:
            self.notify("no recorded finding that way", timeout=4, markup=False)
        else:
            text = landed_text(direction, t, r.findings_at(t), self.size.width - 2)
            self.notify(text, timeout=8, markup=False)

    def action_replay_seek(self) -> None:
        """Ask for a time and seek there (+10m, -1h, 03:12, an ISO time)."""
        if (r := self._replay()) is None:
            return

        def done(text: str | None) -> None:
            if not text:
                return
            try:
                r.seek(parse_seek(text, r.now(), r.start))
            except ReplayError as exc:
                self.notify(str(exc), severity="warning", timeout=8, markup=False)

        self.push_screen(NoteScreen("seek", "", heading="Seek the replay to",
                                    placeholder="+10m, -1h, 03:12 (UTC) or 2026-12-03T03:12:07",
                                    hint=SEEK_HINT), done)

    def on_view_requested(self, _message: ViewRequested) -> None:
        """A data screen became active."""
        self._request_redraw()

    def on_host_chosen(self, message: HostChosen) -> None:
        """Open the chosen host."""
        self.open_host(message.host)

    def open_host(self, host: str) -> None:
        """The host's screen; a backend whose source cannot see its kernel log or topology
        (Prometheus) reads them over SSH now, when SSH can reach it."""
        self.push_screen(HostScreen(host, self.subtitle))
        self.drill_down(host)

    def drill_down(self, host: str) -> None:
        """Ask the backend to read ``host`` over SSH once, and say so."""
        if self.backend.drill_down(host):
            self.say(f"reading {host}'s kernel log and topology over SSH", "information")

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
        if host is not None:
            self.drill_down(host)
        record = self.triage_records.setdefault(host, TriageRecord())
        self.push_screen(TriageScreen(self.subtitle, record, host, self.reports_dir))

    def action_preflight(self) -> None:
        """Open the preflight checklist for the whole fleet."""
        if not isinstance(self.screen, PreflightScreen):
            self.push_screen(PreflightScreen(self.subtitle))

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

    def action_command_line(self, text: str = "") -> None:
        """``:`` — type a command (``host gpu017``, ``theme light``, ``window 6h`` …)."""
        def done(line: str | None) -> None:
            if line:
                self.run_command(line)

        self.push_screen(NoteScreen("command", text, heading=":",
                                    placeholder="host NAME · theme light · triage · preflight"
                                                " · window 6h · sort worst · filter TEXT"
                                                " · job ID · wall · help · quit",
                                    hint=COMMAND_HINT), done)

    def run_command(self, text: str) -> None:
        """Run one command line; a mistake is a notification saying what would work."""
        try:
            run_command(self, text)
        except CommandError as exc:
            self.notify(str(exc), severity="warning", timeout=6, markup=False)

    # What a ``:`` command may ask (``tui.console.CommandTarget``): commands call these and
    # never write the app's state themselves.

    def host_names(self) -> list[str]:
        """Every host watched, in inventory order."""
        return list(self.fleet.hosts)

    def to_fleet(self) -> FleetScreen:
        """Pop back to the fleet screen and return it."""
        while len(self.screen_stack) > 1 and not isinstance(self.screen, FleetScreen):
            self.pop_screen()
        screen = self.screen
        assert isinstance(screen, FleetScreen)
        return screen

    def show_host(self, host: str) -> None:
        """Back to the fleet, then ``host``'s screen on top."""
        self.to_fleet()
        self.open_host(host)

    def set_theme_word(self, word: str) -> None:
        """Switch to the rigwatch theme ``word`` (``dark``, ``light`` …) and say so."""
        self.theme = f"rigwatch-{word}"
        self.say_theme()

    def request_quit(self) -> None:
        """Quit in a worker (``action_quit`` waits for the backend to stop)."""
        self.run_worker(self.action_quit(), group="quit")

    def set_window(self, span: str) -> None:
        """The charts' window: a ``WINDOWS`` span; the fleet screen has no chart, so say it."""
        self.window_s = WINDOWS[span]
        self.refresh_view()
        self.say(window_note(span))

    def watch_job(self, job: str) -> None:
        """Follow a Slurm job: the fleet shows its hosts underneath, the job view its ranks
        on top, and its log's findings are this job's from now on."""
        self.job_watch = self.job_watch.switched_to(job)
        self.to_fleet().set_filter(f"job:{job}")
        self.push_screen(JobScreen(job, self.subtitle))

    def sort_fleet(self, key: str) -> None:
        """Back to the fleet, sorted by ``key``."""
        self.to_fleet().set_sort(key)

    def filter_fleet(self, text: str) -> None:
        """Back to the fleet, filtered by ``text``."""
        self.to_fleet().set_filter(text)

    def toggle_wall(self) -> None:
        """Back to the fleet, wall and table swapped."""
        self.to_fleet().action_toggle_wall()

    # What a data screen reads (``tui.console.ConsoleView``).

    @property
    def replaying(self) -> bool:
        """Whether this console plays a recording."""
        return self.backend.replay is not None

    def retry_host(self, host: str) -> bool:
        """Connect to ``host`` now; False if its session is not waiting for a retry."""
        return self.backend.retry_now(host)

    def action_next_theme(self) -> None:
        """Step to the next rigwatch theme."""
        try:
            i = THEME_CYCLE.index(self.theme)
        except ValueError:
            i = -1
        self.theme = THEME_CYCLE[(i + 1) % len(THEME_CYCLE)]
        self.say_theme()

    def say_theme(self) -> None:
        word = self.theme.removeprefix("rigwatch-")
        self.say(f"theme: {word} ({THEME_CYCLE.index(self.theme) + 1} of {len(THEME_CYCLE)};"
                 " T for the next)")


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
