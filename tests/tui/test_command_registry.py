"""One registry of ``:`` commands (issue #37 item 6): every command in ``tui.commands.COMMANDS``
is listed by the help screen and offered by the palette, and runs in the console; a
command changes the console only through its methods (``tui.console.CommandTarget``)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from probes.analysis.alerts import AlertPolicy
from tests.conftest import REPO
from tests.support.tui_fakes import fake_fleet, settled, wait_until
from tui.app import RigwatchApp, make_app
from tui.commands import BY_NAME, COMMANDS, CommandError, parse_command
from tui.console_options import ConsoleOptions
from tui.palette import palette_lines
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from tui.screens.host import HostScreen
from tui.screens.job import JobScreen
from tui.screens.node_action import NodeActionScreen
from tui.screens.preflight import PreflightScreen
from tui.screens.triage import TriageScreen


def _fleet(app: RigwatchApp) -> FleetScreen:
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return screen


RUNS: dict[str, tuple[str, Callable[[RigwatchApp], bool]]] = {
    "host": ("host gpu-t02", lambda app: isinstance(app.screen, HostScreen)),
    "theme": ("theme light", lambda app: app.theme == "rigwatch-light"),
    "triage": ("triage", lambda app: isinstance(app.screen, TriageScreen)),
    "preflight": ("preflight", lambda app: isinstance(app.screen, PreflightScreen)),
    "window": ("window 6h", lambda app: app.window_s == 6 * 3600),
    "sort": ("sort worst", lambda app: _fleet(app).sort_key == "worst"),
    "filter": ("filter gpu-t", lambda app: _fleet(app).query_text == "gpu-t"),
    "job": ("job 48211", lambda app: isinstance(app.screen, JobScreen)
            and app.job_watch.job == "48211"),
    "wall": ("wall", lambda app: _fleet(app).wall),
    "drain": ("drain gpu-t01", lambda app: isinstance(app.screen, NodeActionScreen)),
    "resume": ("resume gpu-t01", lambda app: isinstance(app.screen, NodeActionScreen)),
    "help": ("help", lambda app: isinstance(app.screen, HelpScreen)),
    "quit": ("quit", lambda app: app.return_code is not None),
}
"""A line for each command and what the console shows once it ran."""


def test_every_command_has_a_run_check_here() -> None:
    assert set(RUNS) == set(BY_NAME)


async def test_every_command_is_in_help_and_the_palette_and_runs() -> None:
    backend, clock = fake_fleet()
    app = make_app(backend, ConsoleOptions(demo=True, alerts=AlertPolicy(notify=False)),
                   clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await settled(pilot, backend)
        app.action_help()
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert isinstance(app.screen, HelpScreen)
        listed = {line for s in app.screen.sections for line, _ in s.lines}
        assert {c.line for c in COMMANDS} <= listed
        await pilot.press("escape")
        offered = {line.split()[0] for line, _ in palette_lines(app)}
        assert {f":{c.name}" for c in COMMANDS} <= offered
        assert not app.notice
        for name, (line, shows) in RUNS.items():
            assert parse_command(line).name == name
            app.run_command(line)
            await wait_until(pilot, lambda shows=shows: shows(app))  # type: ignore[misc]
            assert app.notice is None or "not run" not in app.notice.text, name
            if name != "quit":
                app.to_fleet()
                await pilot.pause()


def test_a_choice_outside_the_registry_is_refused_before_anything_runs() -> None:
    for line in ("sort nope", "window 7h", "theme purple", "job abc", "host"):
        try:
            parse_command(line)
        except CommandError:
            continue
        raise AssertionError(line)
    assert parse_command("theme rigwatch-dark").arg == "rigwatch-dark"


def test_commands_write_no_app_state() -> None:
    """The commands, the palette, the screens and their views never assign to the app's
    attributes (``app.x = …``): they call its methods.  (The CLI still sets its options after
    ``make_app``: review §4.3.)"""
    tui = REPO / "tui"
    paths = [tui / "commands.py", tui / "palette.py", tui / "console.py",
             *sorted((tui / "screens").rglob("*.py")), *sorted((tui / "views").rglob("*.py"))]
    offenders = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                names = []  # self.app.fleet.x → ["fleet", "app", "self"] (the target's owners)
                base = target.value if isinstance(target, ast.Attribute) else None
                while isinstance(base, ast.Attribute):
                    names.append(base.attr)
                    base = base.value
                if isinstance(base, ast.Name):
                    names.append(base.id)
                if "app" in names:
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []
