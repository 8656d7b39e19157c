"""What each ``:`` command does in the running console (parsing is ``tui.commands``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui.commands import ACTION_COMMANDS, WINDOWS, CommandError, resolve_host, window_note
from tui.screens.fleet import FleetScreen
from tui.screens.job import JobScreen
from tui.views.fleet_view import SORT_KEYS

if TYPE_CHECKING:
    from tui.app import RigwatchApp


def run_named(app: RigwatchApp, name: str, arg: str) -> None:
    """Run command ``name`` with its checked argument.

    Raises:
        CommandError: the argument names nothing that exists (a theme, a sort key, a host).
    """
    if name in ACTION_COMMANDS:
        from probes.actions.audit import NodeAction

        app.node_action(NodeAction.DRAIN if name == "drain" else NodeAction.RESUME,
                        arg or None)
    elif name == "host":
        host = resolve_host(arg, list(app.fleet.hosts))
        to_fleet(app)
        app.open_host(host)
    elif name == "theme":
        theme = arg if arg.startswith("rigwatch-") else f"rigwatch-{arg}"
        if theme not in app.available_themes:
            raise CommandError(f"no theme {arg!r}: dark, light, high-contrast, colour-safe")
        app.theme = theme
        app.say_theme()
    elif name == "triage":
        app.action_triage()
    elif name == "preflight":
        app.action_preflight()
    elif name == "help":
        app.action_help()
    elif name == "quit":
        app.run_worker(app.action_quit(), group="quit")
    elif name == "window":
        app.window_s = WINDOWS[arg]
        app.refresh_view()
        app.say(window_note(arg))
    elif name == "job":
        # the fleet shows the job's hosts underneath, the job view its ranks on top
        if app.fleet.watched_job != arg:  # the nodes Slurm named were the other job's
            app.fleet.watched_hosts = frozenset()
        app.fleet.watched_job = arg  # its log's findings are this job's from now on
        to_fleet(app).set_filter(f"job:{arg}")
        app.push_screen(JobScreen(arg, app.subtitle))
    elif name in ("sort", "filter", "wall"):
        fleet = to_fleet(app)
        if name == "sort":
            if arg not in SORT_KEYS:
                raise CommandError(f":sort takes one of {', '.join(SORT_KEYS)}")
            fleet.set_sort(arg)
        elif name == "filter":
            fleet.set_filter(arg)
        else:
            fleet.action_toggle_wall()


def to_fleet(app: RigwatchApp) -> FleetScreen:
    """Pop back to the fleet screen and return it."""
    while len(app.screen_stack) > 1 and not isinstance(app.screen, FleetScreen):
        app.pop_screen()
    screen = app.screen
    assert isinstance(screen, FleetScreen)
    return screen
