"""The ``:`` command line: every command an operator can type, in one registry.

Each ``Command`` holds its name, its argument's meaning, its help and what it runs; the
``:`` line (``parse_command``), Textual's command palette (``tui.palette``) and the help
screen all read ``COMMANDS``, so a command is added in one place.  A command runs by
calling one method of the console (``tui.console.CommandTarget``): it never writes the
app's state itself.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from probes.actions.audit import NodeAction
from probes.errors import RigwatchError
from themes import THEME_CYCLE
from tui.console import CommandTarget
from tui.views.fleet_view import SORT_KEYS

THEME_PREFIX = "rigwatch-"
THEME_WORDS = tuple(name.removeprefix(THEME_PREFIX) for name in THEME_CYCLE)
"""What ``:theme`` takes: the rigwatch themes by their short names."""
WINDOWS = {"5m": 300.0, "1h": 3600.0, "6h": 6 * 3600.0, "24h": 86400.0, "all": 0.0}
"""Chart windows by name; 0 means everything kept."""

Run = Callable[[CommandTarget, str], None]
"""What a command does, given the console and its checked argument."""


class CommandError(RigwatchError, ValueError):
    """A command line that cannot be run; the message says what would work."""

    title = "Command not run"


@dataclass(frozen=True)
class Command:
    """One command: ``:name ARG``."""

    name: str
    arg: str
    """What the argument is (empty: none, or an optional one the help names)."""
    help: str
    run: Run
    choices: tuple[str, ...] = ()
    """The argument's only values: the palette offers each, the parser refuses others."""
    choice_help: str = ""
    """The palette's help for ``:name CHOICE``."""
    changes_nodes: bool = False
    """A node action: not offered, and refused, in read-only mode."""
    may_be_empty: bool = False
    """The argument may be left out although ``arg`` names it (``:filter`` clears)."""
    digits: bool = False
    """The argument is a number (a Slurm job id)."""
    arg_prefix: str = ""
    """A prefix the argument may carry before its choice (a theme's full name)."""
    live_choices: Callable[[CommandTarget], Sequence[str]] | None = None
    """Values the console knows now (its hosts), offered by the palette; any is typed."""

    @property
    def line(self) -> str:
        """How the help writes it: ``:name ARG``."""
        return f":{self.name} {self.arg}".rstrip()


def _host(app: CommandTarget, arg: str) -> None:
    app.show_host(resolve_host(arg, list(app.host_names())))


def _theme(app: CommandTarget, arg: str) -> None:
    app.set_theme_word(arg.removeprefix(THEME_PREFIX))


def _node(action: NodeAction) -> Run:
    def run(app: CommandTarget, arg: str) -> None:
        app.node_action(action, arg or None)
    return run


COMMANDS: tuple[Command, ...] = (
    Command("host", "NAME", "open a host (a unique prefix is enough)", _host,
            choice_help="open this host", live_choices=lambda app: app.host_names()),
    Command("theme", "NAME", "switch theme: " + ", ".join(THEME_WORDS), _theme,
            choices=THEME_WORDS, choice_help="switch theme", arg_prefix=THEME_PREFIX),
    Command("triage", "", "guided triage for the fleet (or the host on screen)",
            lambda app, _: app.action_triage()),
    Command("preflight", "", "the preflight checklist", lambda app, _: app.action_preflight()),
    Command("window", "SPAN", "chart window: " + ", ".join(WINDOWS),
            lambda app, arg: app.set_window(arg), choices=tuple(WINDOWS),
            choice_help="chart window"),
    Command("sort", "KEY", "sort the fleet: inventory, worst, temp, mem, util, power, name, "
                           "job (a job's hosts together)",
            lambda app, arg: app.sort_fleet(arg), choices=SORT_KEYS,
            choice_help="sort the fleet"),
    Command("filter", "TEXT", "show hosts matching every word (!word excludes); empty clears",
            lambda app, arg: app.filter_fleet(arg), may_be_empty=True),
    Command("job", "ID", "a Slurm job: its GPUs by rank, first failure, findings (the fleet "
                         "filtered to job:ID underneath)",
            lambda app, arg: app.watch_job(arg), digits=True),
    Command("wall", "", "toggle the fleet wall (one cell per GPU) and the table",
            lambda app, _: app.toggle_wall()),
    Command("drain", "", "drain a node in Slurm (:drain NODE, or the node on screen): "
                         "preview, type its name to confirm, audited",
            _node(NodeAction.DRAIN), changes_nodes=True),
    Command("resume", "", "resume a node in Slurm (:resume NODE, or the node on screen) "
                          "once a fresh read finds its cause gone",
            _node(NodeAction.RESUME), changes_nodes=True),
    Command("help", "", "the key reference", lambda app, _: app.action_help()),
    Command("quit", "", "leave rigwatch", lambda app, _: app.request_quit()),
)
BY_NAME = {c.name: c for c in COMMANDS}


def offered(read_only: bool) -> list[Command]:
    """The commands a console offers: no node actions in read-only mode."""
    return [c for c in COMMANDS if not (read_only and c.changes_nodes)]


def window_note(span: str) -> str:
    """What ``:window SPAN`` answers: the fleet screen has no chart, so say what was set
    and where it shows."""
    shown = "everything kept" if WINDOWS.get(span) == 0.0 else f"the last {span}"
    return f"chart window: {shown} (the host screen's charts)"


@dataclass(frozen=True)
class Parsed:
    """A command and its argument (possibly empty)."""

    name: str
    arg: str


def parse_command(text: str) -> Parsed:
    """``:host gpu017`` → Parsed("host", "gpu017"); a unique prefix of a name is enough.

    Raises:
        CommandError: unknown or ambiguous command, or a missing argument.
    """
    text = text.strip().lstrip(":").strip()
    if not text:
        raise CommandError("type a command: " + ", ".join(c.name for c in COMMANDS))
    word, _, arg = text.partition(" ")
    word = word.lower()
    hits = [c for c in COMMANDS if c.name.startswith(word)]
    exact = BY_NAME.get(word)
    if exact is not None:
        hits = [exact]
    if not hits:
        close = difflib.get_close_matches(word, BY_NAME, n=1)
        raise CommandError(f"unknown command {word!r}" + (f"; did you mean :{close[0]}?"
                                                          if close else ""))
    if len(hits) > 1:
        raise CommandError(f":{word} could be " + ", ".join(f":{c.name}" for c in hits))
    cmd = hits[0]
    arg = arg.strip()
    if cmd.arg and not arg and not cmd.may_be_empty:
        raise CommandError(f":{cmd.name} needs {cmd.arg} — {cmd.help}")
    if cmd.digits and not arg.isdigit():
        raise CommandError(f":{cmd.name} takes a Slurm job id (digits), not {arg!r}")
    if cmd.choices and arg.removeprefix(cmd.arg_prefix) not in cmd.choices:
        raise CommandError(f":{cmd.name} takes one of {', '.join(cmd.choices)}")
    return Parsed(cmd.name, arg)


def run_command(app: CommandTarget, text: str) -> None:
    """Parse one command line and run it on ``app``.

    Raises:
        CommandError: the line names no command, or its argument names nothing that exists.
    """
    cmd = parse_command(text)
    BY_NAME[cmd.name].run(app, cmd.arg)


def resolve_host(prefix: str, hosts: list[str]) -> str:
    """The one host named by ``prefix`` (exact name wins).

    Raises:
        CommandError: no host or several match.
    """
    if prefix in hosts:
        return prefix
    hits = [h for h in hosts if h.startswith(prefix)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        close = difflib.get_close_matches(prefix, hosts, n=1)
        raise CommandError(f"no host {prefix!r}" + (f"; did you mean {close[0]}?" if close
                                                    else ""))
    shown = ", ".join(hits[:5]) + (f" and {len(hits) - 5} more" if len(hits) > 5 else "")
    raise CommandError(f"{prefix!r} matches {shown}")
