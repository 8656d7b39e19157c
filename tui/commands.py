"""The ``:`` command line: what an operator can type, parsed into an action for the app.

The same commands appear in Textual's command palette, so each is one ``Command`` with a
name, its argument's meaning and help text.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from probes.errors import RigwatchError


@dataclass(frozen=True)
class Command:
    """One command: ``:name ARG``."""

    name: str
    arg: str
    """What the argument is (empty: none)."""
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("host", "NAME", "open a host (a unique prefix is enough)"),
    Command("theme", "NAME", "switch theme: dark, light, high-contrast, colour-safe"),
    Command("triage", "", "guided triage for the fleet (or the host on screen)"),
    Command("preflight", "", "the preflight checklist"),
    Command("window", "SPAN", "chart window: 5m, 1h, 6h, 24h, all"),
    Command("sort", "KEY", "sort the fleet: inventory, worst, temp, mem, util, power, name, "
                           "job (a job's hosts together)"),
    Command("filter", "TEXT", "show hosts matching every word (!word excludes); empty clears"),
    Command("job", "ID", "a Slurm job: its GPUs by rank, first failure, findings (the fleet "
                         "filtered to job:ID underneath)"),
    Command("wall", "", "toggle the fleet wall (one cell per GPU) and the table"),
    Command("drain", "", "drain a node in Slurm (:drain NODE, or the node on screen): "
                         "preview, type its name to confirm, audited"),
    Command("resume", "", "resume a node in Slurm (:resume NODE, or the node on screen) "
                          "once a fresh read finds its cause gone"),
    Command("help", "", "the key reference"),
    Command("quit", "", "leave rigwatch"),
)
BY_NAME = {c.name: c for c in COMMANDS}
ACTION_COMMANDS = frozenset({"drain", "resume"})
"""Commands that change a node: not offered, and refused, in read-only mode."""
WINDOWS = {"5m": 300.0, "1h": 3600.0, "6h": 6 * 3600.0, "24h": 86400.0, "all": 0.0}
"""Chart windows by name; 0 means everything kept."""


def window_note(span: str) -> str:
    """What ``:window SPAN`` answers: the fleet screen has no chart, so say what was set
    and where it shows."""
    shown = "everything kept" if WINDOWS.get(span) == 0.0 else f"the last {span}"
    return f"chart window: {shown} (the host screen's charts)"


class CommandError(RigwatchError, ValueError):
    """A command line that cannot be run; the message says what would work."""

    title = "Command not run"


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
    if cmd.arg and not arg and cmd.name not in ("filter",):
        raise CommandError(f":{cmd.name} needs {cmd.arg} — {cmd.help}")
    if cmd.name == "job" and not arg.isdigit():
        raise CommandError(f":job takes a Slurm job id (digits), not {arg!r}")
    if cmd.name == "window" and arg not in WINDOWS:
        raise CommandError(f":window takes one of {', '.join(WINDOWS)}")
    return Parsed(cmd.name, arg)


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
