"""The state the console's mixins share, typed once: ``tui.app`` is split by concern.

``RigwatchApp`` is one Textual app made of small mixins (the backend feed, the status line,
alerts, exports, screen actions, replay and node keys, themes).  Each mixin reads and writes
the app's own state and calls its siblings; ``ConsoleMixin`` names that state and those
calls here, so mypy checks every mixin as the app it becomes.  At run time it is a plain
``object`` with nothing in it: a mixin adds no Textual class to the app (no CSS type name,
no bindings, no ``@on`` handler: those stay on ``RigwatchApp``), only methods and ``on_*``
handlers, which Textual finds by name along the app's MRO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio
    import contextvars
    from collections.abc import Callable
    from pathlib import Path

    from probes.actions.audit import NodeAction
    from probes.analysis.alerts import AlertPolicy, AlertTracker
    from probes.analysis.hook import HookGate, HookResult
    from probes.analysis.incident import TriageRecord
    from probes.analysis.job_watch import JobWatch
    from probes.analysis.limits import DetectorLimits, PreflightLimits
    from probes.fleet_state import FleetState
    from probes.outputs.metrics_server import MetricsServer
    from probes.rules.logrules.scan_worker import ScanWorker
    from probes.sources.base import Backend
    from tui.screens.fleet import FleetScreen
    from tui.typeahead import TypeaheadApp
    from tui.views.fleet_rows import FleetRows
    from widgets.header_bar import Notice, NoticeLevel

    _App = TypeaheadApp
else:
    _App = object


class ConsoleMixin(_App):
    """The base of each of ``RigwatchApp``'s mixins: the app as its parts see it."""

    if TYPE_CHECKING:
        backend: Backend
        fleet: FleetState
        fleet_rows: FleetRows
        scan_worker: ScanWorker | None
        detector_limits: DetectorLimits | None
        preflight_limits: PreflightLimits | None
        job_watch: JobWatch
        alert_policy: AlertPolicy
        alerts: AlertTracker
        hook_results: list[HookResult]
        hook_gate: HookGate
        metrics_textfile: Path | None
        metrics_port: int | None
        _metrics_server: MetricsServer | None
        window_s: float
        subtitle: str
        _clock: Callable[[], float]
        _loop: asyncio.AbstractEventLoop | None
        _loop_thread: int | None
        _worker_context: contextvars.Context | None
        triage_records: dict[str | None, TriageRecord]
        reports_dir: Path | None
        notice: Notice | None
        _notice_serial: int
        read_only: bool
        audit_path: Path | None
        action_timeout_s: float

        def refresh_view(self) -> None: ...
        def _request_redraw(self) -> None: ...
        def say(self, text: str, level: NoticeLevel = "information",
                timeout: float = ...) -> None: ...
        def drill_down(self, host: str) -> None: ...
        def open_host(self, host: str) -> None: ...
        def to_fleet(self) -> FleetScreen: ...
        def say_theme(self) -> None: ...
        def set_theme_word(self, word: str) -> None: ...
        def node_action(self, action: NodeAction, node: str | None) -> None: ...
        def action_help(self) -> None: ...
        def request_quit(self) -> None: ...
